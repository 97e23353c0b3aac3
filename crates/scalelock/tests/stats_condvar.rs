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
