//! Lockdep on the queued locks: lock-order inversions and recursive
//! acquisitions are reported before anything deadlocks.
//! Run: `cargo test -p scalelock --features lockdep --test lockdep_queued`
#![cfg(feature = "lockdep")]

use std::thread;

use scalelock::{ClassRef, LockClass, QSpinLock, RawQSpinLock, lockdep};

/// Runs `f` on a thread named `name`; its panic message, if it panicked.
fn on_thread(name: &str, f: impl FnOnce() + Send + 'static) -> Option<String> {
    let r = thread::Builder::new()
        .name(name.into())
        .spawn(f)
        .unwrap()
        .join();
    r.err().map(|e| match e.downcast::<String>() {
        Ok(s) => *s,
        Err(e) => e
            .downcast::<&str>()
            .map(|s| s.to_string())
            .unwrap_or_default(),
    })
}

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
