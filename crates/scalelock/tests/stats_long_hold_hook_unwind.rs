//! A long-hold hook that panics while a guard is dropped by an unwinding
//! thread: the hook's panic is caught, not turned into an abort (a panic
//! inside a drop during unwinding aborts the process). Its own test binary:
//! the hook and the sampling rate are process-wide.
//! Run: `cargo test -p scalelock --features stats --test stats_long_hold_hook_unwind`
#![cfg(feature = "stats")]

use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use scalelock::{ClassRef, LockClass, QSpinLock, RawQSpinLock, stats};

static CALLS: AtomicU32 = AtomicU32::new(0);

fn panicking_hook(_: &stats::LongHold) {
    CALLS.fetch_add(1, Ordering::Relaxed);
    panic!("the long-hold hook panics");
}

#[test]
fn a_panicking_hook_during_an_unwind_does_not_abort() {
    static C: LockClass = LockClass::new("unwind-long-hold");
    static L: QSpinLock<u64> = QSpinLock::from_raw(RawQSpinLock::with_class(ClassRef::of(&C)), 0);
    stats::enable();
    stats::set_hold_sample(1);
    stats::set_long_hold_hook(1_000_000, Some(panicking_hook));
    // Outside an unwind, the hook's panic reaches the releasing code.
    let plain = std::panic::catch_unwind(|| {
        let _g = L.lock();
        std::thread::sleep(Duration::from_millis(2));
    });
    assert!(plain.is_err(), "the hook's panic comes out of the drop");
    assert_eq!(CALLS.load(Ordering::Relaxed), 1);
    // During an unwind: the first panic comes out, the process lives.
    let unwinding = std::panic::catch_unwind(|| {
        let _g = L.lock();
        std::thread::sleep(Duration::from_millis(2));
        panic!("the critical section panics");
    });
    let payload = unwinding.expect_err("the critical section's panic");
    assert_eq!(
        payload.downcast_ref::<&str>(),
        Some(&"the critical section panics")
    );
    assert_eq!(CALLS.load(Ordering::Relaxed), 2, "the hook still ran");
    assert_eq!(
        stats::snapshot()
            .class("unwind-long-hold")
            .unwrap()
            .events
            .long_holds,
        2
    );
    stats::set_long_hold_hook(u64::MAX, None);
}
