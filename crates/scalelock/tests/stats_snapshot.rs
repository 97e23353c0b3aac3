//! Snapshots taken while threads wait for a lock: a waiter is counted
//! contended when it enters the slow path, its acquisition when it has the
//! lock (as `AccessStats::contended` says; the tests that wait for a
//! thread to be "contended" rely on it).
//! Run: `cargo test -p scalelock --features stats --test stats_snapshot`
#![cfg(feature = "stats")]

mod hook_lock;

use std::thread;

use hook_lock::{HookRwLock, class_stats, stats_setup, wait_until};
use scalelock::stats;
use scalelock::{ClassRef, LockClass};

#[test]
fn waiters_in_flight_are_contended_before_they_are_acquisitions() {
    stats_setup();
    static WAITED: LockClass = LockClass::new("waited");
    static LOCK: HookRwLock = HookRwLock::new(ClassRef::of(&WAITED));
    let held = LOCK.write();
    thread::scope(|s| {
        for _ in 0..2 {
            s.spawn(|| drop(LOCK.write()));
        }
        // Both writers are in the slow path (each parks before it can get
        // the lock), neither has the lock.
        wait_until("both writers park", || {
            class_stats("waited").write.events.parks >= 2
        });
        let snap = stats::snapshot();
        let w = &snap.class("waited").unwrap().write;
        assert_eq!((w.acquisitions, w.contended, w.wait.count), (1, 2, 0));
        // The table shows it as it is, in its column.
        let table = snap.to_string();
        assert!(table.contains(" 200.00% "), "{table}");
        drop(held);
    });
    // Stopped: exact, and no more contended than acquisitions.
    let w = class_stats("waited").write;
    assert_eq!((w.acquisitions, w.contended, w.wait.count), (3, 2, 2));
}
