//! Lockdep on the queued locks: lock-order inversions and recursive
//! acquisitions are reported before anything deadlocks.
//! Run: `cargo test -p scalelock --features lockdep --test lockdep_queued`
#![cfg(feature = "lockdep")]

mod hook_lock;

use std::time::Duration;

use hook_lock::on_thread;
use scalelock::{
    ClassRef, LockClass, PerCpuRwLock, QRwLock, QRwLockUpgradableReadGuard, QRwLockWriteGuard,
    QSpinLock, RawPerCpuRwLock, RawQRwLock, RawQSpinLock, lockdep,
};

#[test]
fn qspinlock_ab_ba_is_reported_without_deadlocking() {
    static A: LockClass = LockClass::new("qspin-order-A");
    static B: LockClass = LockClass::new("qspin-order-B");
    static LA: QSpinLock<u32> = QSpinLock::from_raw(RawQSpinLock::with_class(ClassRef::of(&A)), 0);
    static LB: QSpinLock<u32> = QSpinLock::from_raw(RawQSpinLock::with_class(ClassRef::of(&B)), 0);

    let first = on_thread("qspin-first", || {
        let a = LA.lock();
        let b = LB.lock();
        assert_eq!(lockdep::held_count(), 2);
        drop(b);
        drop(a);
        assert_eq!(lockdep::held_count(), 0);
    });
    assert_eq!(first, None, "A then B alone is fine");
    let report = on_thread("qspin-second", || {
        let _b = LB.lock();
        let _a = LA.lock(); // closes B -> A -> B: reported, not taken
        unreachable!("lockdep must report before taking A");
    })
    .expect("B then A must be reported");
    assert!(
        report.contains("possible circular locking dependency"),
        "{report}"
    );
    assert!(
        report.contains("thread 'qspin-second' is taking \"qspin-order-A\""),
        "{report}"
    );
    assert!(
        report.contains(
            "\"qspin-order-A\" (write) -> \"qspin-order-B\" (write): first on thread 'qspin-first'"
        ),
        "{report}"
    );
    // Nothing stayed locked: B's guard unwound, A was never taken.
    assert!(!LA.is_locked());
    assert!(!LB.is_locked());
}

/// A try-lock never waits: taking A with a try-lock while holding B adds no
/// B -> A dependency.
#[test]
fn qspinlock_try_lock_adds_no_dependency_into_it() {
    static A: LockClass = LockClass::new("qspin-try-A");
    static B: LockClass = LockClass::new("qspin-try-B");
    static LA: QSpinLock<u32> = QSpinLock::from_raw(RawQSpinLock::with_class(ClassRef::of(&A)), 0);
    static LB: QSpinLock<u32> = QSpinLock::from_raw(RawQSpinLock::with_class(ClassRef::of(&B)), 0);
    let r = on_thread("qspin-try", || {
        {
            let _a = LA.lock();
            let _b = LB.lock();
        }
        {
            let _b = LB.lock();
            let a = LA.try_lock().expect("A is free");
            assert_eq!(lockdep::held_count(), 2);
            drop(a);
        }
        assert_eq!(lockdep::held_count(), 0);
    });
    assert_eq!(r, None);
}

/// A timed lock ends its wait: like a try-lock, taking A with
/// `try_lock_for` while holding B adds no B -> A dependency, and a timed
/// lock of a lock the thread holds is no reported recursion (it times out).
/// What is taken under a timed hold depends on it as usual.
#[test]
fn qspinlock_timed_lock_adds_no_dependency_into_it() {
    static A: LockClass = LockClass::new("qspin-timed-A");
    static B: LockClass = LockClass::new("qspin-timed-B");
    static C: LockClass = LockClass::new("qspin-timed-C");
    static LA: QSpinLock<u32> = QSpinLock::from_raw(RawQSpinLock::with_class(ClassRef::of(&A)), 0);
    static LB: QSpinLock<u32> = QSpinLock::from_raw(RawQSpinLock::with_class(ClassRef::of(&B)), 0);
    static LC: QSpinLock<u32> = QSpinLock::from_raw(RawQSpinLock::with_class(ClassRef::of(&C)), 0);
    let r = on_thread("qspin-timed", || {
        {
            let _a = LA.lock();
            let _b = LB.lock();
        }
        {
            let _b = LB.lock();
            let a = LA.try_lock_for(Duration::from_secs(1)).expect("A is free");
            assert_eq!(lockdep::held_count(), 2);
            // Held by us: times out instead of deadlocking.
            assert!(LA.try_lock_for(Duration::from_millis(1)).is_none());
            assert_eq!(lockdep::held_count(), 2);
            drop(a);
        }
        assert_eq!(lockdep::held_count(), 0);
        // C under a timed hold of A: A -> C is recorded.
        let a = LA
            .try_lock_until(std::time::Instant::now() + Duration::from_secs(1))
            .expect("A is free");
        drop(LC.lock());
        drop(a);
    });
    assert_eq!(r, None);
    let report = on_thread("qspin-timed-inverse", || {
        let _c = LC.lock();
        let _a = LA.lock(); // closes C -> A -> C
        unreachable!("lockdep must report before taking A");
    })
    .expect("C then A must be reported");
    assert!(
        report.contains("possible circular locking dependency"),
        "{report}"
    );
}

#[test]
fn qspinlock_recursion_is_reported() {
    let r = on_thread("qspin-recursive", || {
        let l: QSpinLock<u32> = QSpinLock::from_raw(RawQSpinLock::with_class(ClassRef::here()), 0);
        let _g = l.lock();
        let _again = l.lock(); // would spin forever
        unreachable!("lockdep must report the recursion");
    })
    .expect("a recursive lock must be reported");
    assert!(r.contains("possible recursive locking"), "{r}");
    assert!(r.contains("(write, QSpinLock at"), "{r}");
    assert!(r.contains("<- the same lock"), "{r}");
    assert!(r.contains("not recursive"), "{r}");
}

#[test]
fn qrwlock_write_and_qspinlock_ab_ba_is_reported() {
    static A: LockClass = LockClass::new("qrw-order-A");
    static B: LockClass = LockClass::new("qrw-order-B");
    static LA: QRwLock<u32> = QRwLock::from_raw(RawQRwLock::with_class(ClassRef::of(&A)), 0);
    static LB: QSpinLock<u32> = QSpinLock::from_raw(RawQSpinLock::with_class(ClassRef::of(&B)), 0);
    let first = on_thread("qrw-first", || {
        let _a = LA.write();
        let _b = LB.lock();
    });
    assert_eq!(first, None);
    let report = on_thread("qrw-second", || {
        let _b = LB.lock();
        let _a = LA.read(); // a fair read waits for a queued writer too
        unreachable!("lockdep must report before reading A");
    })
    .expect("B then A must be reported");
    assert!(
        report.contains("possible circular locking dependency"),
        "{report}"
    );
    assert!(
        report.contains("thread 'qrw-second' is taking \"qrw-order-A\""),
        "{report}"
    );
    assert!(!LA.is_locked());
    assert!(!LB.is_locked());
}

#[test]
fn qrwlock_second_fair_read_is_reported() {
    let r = on_thread("qrw-recursive-read", || {
        let l: QRwLock<u32> = QRwLock::from_raw(RawQRwLock::with_class(ClassRef::here()), 0);
        let _r1 = l.read();
        let _r2 = l.read(); // a writer queued in between would deadlock us
        unreachable!("lockdep must report the second read");
    })
    .expect("a second fair read must be reported");
    assert!(r.contains("possible recursive locking"), "{r}");
    assert!(r.contains("(read, QRwLock at"), "{r}");
    assert!(r.contains("a second fair read queues behind"), "{r}");
}

#[test]
fn qrwlock_downgrade_and_upgrade_keep_lockdep_balanced() {
    let r = on_thread("qrw-balanced", || {
        let l: QRwLock<u32> = QRwLock::from_raw(RawQRwLock::with_class(ClassRef::here()), 0);
        let w = l.write();
        assert_eq!(lockdep::held_count(), 1);
        let r = QRwLockWriteGuard::downgrade(w);
        assert_eq!(lockdep::held_count(), 1);
        drop(r);
        assert_eq!(lockdep::held_count(), 0);
        let u = l.upgradable_read();
        let w = QRwLockUpgradableReadGuard::upgrade(u);
        assert_eq!(lockdep::held_count(), 1);
        drop(w);
        let u = l.upgradable_read();
        let Ok(w) = QRwLockUpgradableReadGuard::try_upgrade(u) else {
            panic!("no other reader is in");
        };
        assert_eq!(lockdep::held_count(), 1);
        drop(w);
        assert_eq!(lockdep::held_count(), 0);
    });
    assert_eq!(r, None);
}

/// PerCpuRwLock reads are reentrant reads (a thread's second read never
/// waits), so they are not reported; a read-write order inversion with
/// another lock is.
#[test]
fn percpu_recursive_reads_pass_and_inversions_are_reported() {
    static A: LockClass = LockClass::new("percpu-order-A");
    static B: LockClass = LockClass::new("percpu-order-B");
    static LA: PerCpuRwLock<u32> =
        PerCpuRwLock::from_raw(RawPerCpuRwLock::with_class(ClassRef::of(&A)), 0);
    static LB: QSpinLock<u32> = QSpinLock::from_raw(RawQSpinLock::with_class(ClassRef::of(&B)), 0);
    let first = on_thread("percpu-first", || {
        let r1 = LA.read();
        let r2 = LA.read();
        assert_eq!(lockdep::held_count(), 2);
        let _b = LB.lock();
        drop((r1, r2));
    });
    assert_eq!(first, None, "recursive reads, then B, are fine");
    let report = on_thread("percpu-second", || {
        let _b = LB.lock();
        let _a = LA.write(); // closes A -> B -> A
        unreachable!("lockdep must report before writing A");
    })
    .expect("B then A must be reported");
    assert!(
        report.contains("possible circular locking dependency"),
        "{report}"
    );
    assert!(
        report.contains("thread 'percpu-second' is taking \"percpu-order-A\""),
        "{report}"
    );
    assert!(!LA.is_locked());
    assert_eq!(
        on_thread("percpu-balanced", || {
            let w = LA.write();
            let r = scalelock::PerCpuRwLockWriteGuard::downgrade(w);
            assert_eq!(lockdep::held_count(), 1);
            drop(r);
            assert_eq!(lockdep::held_count(), 0);
        }),
        None
    );
}

/// A PerCpuRwLock read of a lock the thread already reads never waits, so
/// taking B between the two reads is no cycle (the second read adds no
/// dependency into A).
#[test]
fn percpu_reread_under_another_lock_is_not_reported() {
    static A: LockClass = LockClass::new("percpu-reread-A");
    static B: LockClass = LockClass::new("percpu-reread-B");
    static LA: PerCpuRwLock<u32> =
        PerCpuRwLock::from_raw(RawPerCpuRwLock::with_class(ClassRef::of(&A)), 0);
    static LB: QSpinLock<u32> = QSpinLock::from_raw(RawQSpinLock::with_class(ClassRef::of(&B)), 0);
    let r = on_thread("percpu-reread", || {
        let r1 = LA.read();
        let b = LB.lock();
        let r2 = LA.read();
        assert_eq!(lockdep::held_count(), 3);
        drop((r2, b, r1));
    });
    assert_eq!(r, None);
}

/// A first PerCpuRwLock read queues behind a writer that waits (revoking
/// the bias, or for the underlying lock): T1 reads A then takes B; T2
/// holds B and reads A. A writer of A between them waits for T1's read,
/// T2's read waits behind the writer, T1 waits for B: reported, as with
/// fair reads.
#[test]
fn percpu_first_reads_against_a_reader_of_another_thread_are_a_cycle() {
    static A: LockClass = LockClass::new("percpu-fair-A");
    static B: LockClass = LockClass::new("percpu-fair-B");
    static LA: PerCpuRwLock<u32> =
        PerCpuRwLock::from_raw(RawPerCpuRwLock::with_class(ClassRef::of(&A)), 0);
    static LB: QSpinLock<u32> = QSpinLock::from_raw(RawQSpinLock::with_class(ClassRef::of(&B)), 0);
    let first = on_thread("percpu-fair-first", || {
        let _r = LA.read();
        let _b = LB.lock();
    });
    assert_eq!(first, None);
    let report = on_thread("percpu-fair-second", || {
        let _b = LB.lock();
        let _r = LA.read(); // may queue behind a writer that waits for T1
        unreachable!("lockdep must report B -> A (read) against A (read) -> B");
    })
    .expect("B then a first read of A must be reported");
    assert!(
        report.contains("possible circular locking dependency"),
        "{report}"
    );
    assert!(
        report.contains("(reentrant read, PerCpuRwLock at"),
        "{report}"
    );
}

/// Timed reads, writes and upgradable reads of the rwlocks are try-locks to
/// lockdep: taken under another lock they add no dependency into them, so
/// the reverse order later is no inversion.
#[test]
fn rwlock_timed_ops_add_no_dependency_into_them() {
    static S: LockClass = LockClass::new("timed-rw-S");
    static Q: LockClass = LockClass::new("timed-rw-Q");
    static P: LockClass = LockClass::new("timed-rw-P");
    static LS: QSpinLock<u32> = QSpinLock::from_raw(RawQSpinLock::with_class(ClassRef::of(&S)), 0);
    static LQ: QRwLock<u32> = QRwLock::from_raw(RawQRwLock::with_class(ClassRef::of(&Q)), 0);
    let lp: PerCpuRwLock<u32> =
        PerCpuRwLock::from_raw(RawPerCpuRwLock::with_class(ClassRef::of(&P)), 0);
    let t = Duration::from_secs(1);
    let r = on_thread("timed-rw", move || {
        {
            let _s = LS.lock();
            drop(LQ.try_write_for(t).expect("free"));
            drop(LQ.try_read_for(t).expect("free"));
            drop(LQ.try_upgradable_read_for(t).expect("free"));
            drop(lp.try_write_for(t).expect("free"));
            drop(lp.try_read_for(t).expect("free"));
            drop(lp.try_upgradable_read_for(t).expect("free"));
            assert_eq!(lockdep::held_count(), 1);
        }
        {
            let _q = LQ.write();
            let _s = LS.lock();
        }
        {
            let _p = lp.write();
            let _s = LS.lock();
        }
        assert_eq!(lockdep::held_count(), 0);
    });
    assert_eq!(r, None);
}
