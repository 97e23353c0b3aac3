//! Lock statistics through a condvar wait: the wait's unlock and re-lock
//! are a release and an acquisition of the mutex like any other, counted
//! once each.
//! Run: `cargo test -p scalelock --features stats --test stats_condvar`
#![cfg(feature = "stats")]

mod hook_lock;

use std::sync::Arc;
use std::thread;

use hook_lock::{class_stats, stats_setup, wait_until};
use scalelock::{ClassRef, Condvar, LockClass, QSpinLock, RawQSpinLock};

#[test]
fn wait_counts_its_relock_as_an_acquisition() {
    stats_setup();
    static C: LockClass = LockClass::new("condvar-mutex");
    static M: QSpinLock<bool> =
        QSpinLock::from_raw(RawQSpinLock::with_class(ClassRef::of(&C)), false);
    let cv = Arc::new(Condvar::new());
    let cv2 = cv.clone();
    // 1: the waiter's lock; 2: its re-lock in `wait`.
    let waiter = thread::spawn(move || {
        let mut g = M.lock();
        cv2.wait_while(&mut g, |ready| !*ready);
    });
    wait_until("the waiter waits", || cv.raw().waiters() == 1);
    // 3: the notifier's lock.
    *M.lock() = true;
    assert!(cv.notify_one());
    waiter.join().unwrap();

    let st = class_stats("condvar-mutex");
    assert_eq!(st.write.acquisitions, 3);
    // Every hold ended with one release (hold times sampled 1 in 1): the
    // wait's unlock, the waiter's and the notifier's guards.
    assert_eq!(st.write.hold.count, 3);
    assert!(!M.is_locked());
}

const CHILD: &str = "SCALELOCK_CONDVAR_LONG_HOLD_CHILD";

fn panicking_hook(_: &scalelock::stats::LongHold) {
    panic!("long hold");
}

/// In a child process (the hook is process-wide): a long-hold hook that
/// panics at the unlock of a condvar wait (it aborted the process: the
/// wait unwound with the mutex unlocked). The wait re-locks, then the
/// panic comes out of it, as lock_api requires.
fn condvar_long_hold_scenario() {
    static C: LockClass = LockClass::new("condvar-long-hold-panic");
    static M: QSpinLock<u32> = QSpinLock::from_raw(RawQSpinLock::with_class(ClassRef::of(&C)), 0);
    let cv = Condvar::new();
    scalelock::stats::enable();
    scalelock::stats::set_hold_sample(1);
    scalelock::stats::set_long_hold_hook(1_000_000, Some(panicking_hook));
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let mut g = M.lock();
        std::thread::sleep(std::time::Duration::from_millis(3));
        // The wait's unlock ends a 3 ms hold: the hook panics.
        let _ = cv.wait_for(&mut g, std::time::Duration::from_millis(10));
    }));
    assert!(r.is_err(), "the hook's panic comes out of the wait");
    scalelock::stats::set_long_hold_hook(u64::MAX, None);
    assert!(!M.is_locked(), "the guard released the re-locked mutex");
}

#[test]
fn a_panicking_long_hold_hook_in_a_condvar_wait_does_not_abort() {
    if std::env::var_os(CHILD).is_some() {
        condvar_long_hold_scenario();
        return;
    }
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "a_panicking_long_hold_hook_in_a_condvar_wait_does_not_abort",
            "--exact",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD, "1")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "child: {:?}\nstderr: {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
}
