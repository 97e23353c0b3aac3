//! `ReentrantMutex` under lockdep and statistics: only a thread's outermost
//! `lock` reaches the queued spinlock, so lockdep sees one acquisition per
//! owner (nested locking is not reported as recursive: it never waits) and
//! statistics count outermost acquisitions and whole holds; lock order
//! through the reentrant mutex is still checked.
//! Run: `cargo test -p scalelock --features stats,lockdep --test lockdep_remutex`
#![cfg(any(feature = "lockdep", feature = "stats"))]

mod hook_lock;

#[cfg(feature = "lockdep")]
mod lockdep_checks {
    use std::cell::Cell;
    use std::panic::{AssertUnwindSafe, catch_unwind};

    use super::hook_lock::on_thread;
    use scalelock::{
        ClassRef, LockClass, QSpinLock, RawQSpinLock, RawThreadId, ReentrantMutex, lockdep,
    };

    #[test]
    fn nested_locking_is_not_reported() {
        static C: LockClass = LockClass::new("remutex-nested");
        static M: ReentrantMutex<Cell<u32>> = ReentrantMutex::from_raw(
            RawQSpinLock::with_class(ClassRef::of(&C)),
            RawThreadId,
            Cell::new(0),
        );
        let r = catch_unwind(AssertUnwindSafe(|| {
            let a = M.lock();
            assert_eq!(lockdep::held_count(), 1);
            let b = M.lock();
            let c = M.try_lock().unwrap();
            // Still one held lock: the nested levels never took the raw lock.
            assert_eq!(lockdep::held_count(), 1);
            c.set(a.get() + b.get() + 1);
            drop(a);
            assert_eq!(lockdep::held_count(), 1, "inner guards still hold it");
            drop(b);
            drop(c);
            assert_eq!(lockdep::held_count(), 0);
        }));
        assert!(r.is_ok(), "lockdep reported reentrant locking");
        assert_eq!(M.lock().get(), 1);
        assert_eq!(lockdep::held_count(), 0);
    }

    /// The control: lockdep is on and reports the same pattern on the plain
    /// queued spinlock the reentrant mutex is built on.
    #[test]
    fn the_plain_spinlock_taken_twice_is_reported() {
        static C: LockClass = LockClass::new("remutex-control");
        static L: QSpinLock<u32> =
            QSpinLock::from_raw(RawQSpinLock::with_class(ClassRef::of(&C)), 0);
        let r = catch_unwind(AssertUnwindSafe(|| {
            let _a = L.lock();
            let _b = L.lock();
        }))
        .expect_err("a second lock of a plain QSpinLock is reported");
        let msg = r.downcast::<String>().map(|s| *s).unwrap_or_default();
        assert!(msg.contains("possible recursive locking"), "{msg}");
        assert!(L.try_lock().is_some());
        assert_eq!(lockdep::held_count(), 0);
    }

    #[test]
    fn lock_order_through_a_reentrant_mutex_is_checked() {
        static RA: LockClass = LockClass::new("remutex-order-A");
        static RB: LockClass = LockClass::new("remutex-order-B");
        static A: ReentrantMutex<()> =
            ReentrantMutex::from_raw(RawQSpinLock::with_class(ClassRef::of(&RA)), RawThreadId, ());
        static B: QSpinLock<()> =
            QSpinLock::from_raw(RawQSpinLock::with_class(ClassRef::of(&RB)), ());

        // A, B, then A again nested: the nested A does not wait, so it adds
        // no B -> A order and is not reported.
        let first = on_thread("remutex-first", || {
            let _a = A.lock();
            let _b = B.lock();
            let _a_again = A.lock();
            assert_eq!(lockdep::held_count(), 2);
        });
        assert_eq!(first, None);
        // B then A (outermost, so it may wait) closes B -> A -> B.
        let second = on_thread("remutex-second", || {
            let _b = B.lock();
            let _a = A.lock();
            unreachable!("lockdep must report before taking A");
        })
        .expect("B then A must be reported");
        assert!(
            second.contains("possible circular locking dependency"),
            "{second}"
        );
        assert!(second.contains("\"remutex-order-A\""), "{second}");
        assert!(!A.is_locked());
        assert!(!B.is_locked());
    }
}

#[cfg(feature = "stats")]
mod stats_checks {
    use std::cell::Cell;
    use std::sync::Barrier;
    use std::thread;
    use std::time::Duration;

    use super::hook_lock::{class_stats, stats_setup, wait_until};
    use scalelock::{ClassRef, LockClass, LockKind, RawQSpinLock, RawThreadId, ReentrantMutex};

    #[test]
    fn outermost_acquisitions_and_whole_holds_are_counted() {
        stats_setup();
        const HOLD: Duration = Duration::from_millis(5);
        static C: LockClass = LockClass::new("remutex-stats");
        static M: ReentrantMutex<Cell<u32>> = ReentrantMutex::from_raw(
            RawQSpinLock::with_class(ClassRef::of(&C)),
            RawThreadId,
            Cell::new(0),
        );
        for _ in 0..3 {
            let a = M.lock();
            let b = M.lock();
            let c = M.try_lock().unwrap();
            assert_eq!((a.get(), b.get()), (c.get(), c.get()));
            c.set(c.get() + 1);
        }
        let st = class_stats("remutex-stats");
        assert_eq!(st.kind, Some(LockKind::QSpinLock));
        assert_eq!(
            st.write.acquisitions, 3,
            "nested levels are not acquisitions"
        );
        assert_eq!(st.write.hold.count, 3);

        // A hold lasts from the first lock to the last guard's drop, even
        // when the first guard goes first; a waiting thread is contended
        // once.
        let start = Barrier::new(2);
        thread::scope(|s| {
            let outer = M.lock();
            let inner = M.lock();
            s.spawn(|| {
                start.wait();
                let g = M.lock();
                g.set(g.get() + 1);
            });
            start.wait();
            wait_until("the other thread is contended", || {
                class_stats("remutex-stats").write.contended == 1
            });
            drop(outer);
            thread::sleep(HOLD);
            drop(inner);
        });
        let w = class_stats("remutex-stats").write;
        assert_eq!(w.acquisitions, 5);
        assert_eq!(w.contended, 1);
        assert!(w.hold.max_ns >= HOLD.as_nanos() as u64, "{w:?}");
        assert!(w.wait.max_ns >= HOLD.as_nanos() as u64, "{w:?}");
        assert_eq!(M.lock().get(), 4);
    }
}
