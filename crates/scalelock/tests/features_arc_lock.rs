//! The `arc_lock` feature (lock_api's, passed through): guards that own an
//! `Arc` of their lock, for every lock type of lock_api we provide.
//! Run: `cargo test -p scalelock --features arc_lock --test features_arc_lock`
#![cfg(all(feature = "arc_lock", not(any(loom, shuttle))))]

use std::cell::Cell;
use std::sync::Arc;
use std::sync::mpsc::channel;
use std::thread;

use lock_api::{
    ArcMutexGuard, ArcReentrantMutexGuard, ArcRwLockReadGuard, ArcRwLockUpgradableReadGuard,
    ArcRwLockWriteGuard, RawRwLockUpgrade,
};
use scalelock::{PerCpuRwLock, QRwLock, QSpinLock, RawQSpinLock, RawThreadId, ReentrantMutex};

#[test]
fn mutex_lock_arc_owns_the_lock() {
    let m = Arc::new(QSpinLock::new(vec![1u32]));
    let mut g: ArcMutexGuard<RawQSpinLock, Vec<u32>> = m.lock_arc();
    assert_eq!(Arc::strong_count(&m), 2, "the guard holds a reference");
    g.push(2);
    assert!(m.try_lock().is_none());
    assert!(m.try_lock_arc().is_none());
    // The guard keeps the lock alive after every other reference is gone.
    let weak = Arc::downgrade(&m);
    drop(m);
    g.push(3);
    assert!(weak.upgrade().is_some());
    let m = ArcMutexGuard::into_arc(g);
    assert_eq!(*m.lock(), [1, 2, 3]);
    assert_eq!(Arc::strong_count(&m), 1);
}

#[test]
fn mutex_arc_guard_moves_to_another_thread() {
    // A 'static guard: taken here, released by a worker.
    let m = Arc::new(QSpinLock::new(0u64));
    let (tx, rx) = channel::<ArcMutexGuard<RawQSpinLock, u64>>();
    let worker = thread::spawn(move || {
        let mut g = rx.recv().unwrap();
        *g += 1;
        // Dropped here, on the worker.
    });
    let g = m.lock_arc();
    tx.send(g).unwrap();
    worker.join().unwrap();
    assert_eq!(*m.try_lock().expect("released by the worker"), 1);
    // And a fair release of an Arc guard.
    let mut g = m.try_lock_arc().unwrap();
    *g += 1;
    ArcMutexGuard::unlock_fair(g);
    assert_eq!(*m.lock(), 2);
}

/// `read_arc`, `write_arc`, `upgradable_read_arc` with upgrade and
/// downgrade, on any of our rwlocks.
fn rwlock_arc_guards<R>(l: Arc<lock_api::RwLock<R, Vec<u32>>>)
where
    R: RawRwLockUpgrade + lock_api::RawRwLockDowngrade,
{
    {
        let r1: ArcRwLockReadGuard<R, Vec<u32>> = l.read_arc();
        let r2 = l.read_arc();
        assert_eq!(Arc::strong_count(&l), 3);
        assert_eq!(r1.len() + r2.len(), 0);
        assert!(l.try_write_arc().is_none());
        drop(r1);
        assert!(l.try_write_arc().is_none(), "one reader left");
        drop(r2);
    }
    {
        let mut w: ArcRwLockWriteGuard<R, Vec<u32>> = l.write_arc();
        w.push(1);
        assert!(l.try_read_arc().is_none());
        let r = ArcRwLockWriteGuard::downgrade(w);
        assert_eq!(*r, [1]);
        assert!(l.try_read_arc().is_some(), "downgraded: readers may enter");
        assert!(l.try_write_arc().is_none());
    }
    {
        let u: ArcRwLockUpgradableReadGuard<R, Vec<u32>> = l.upgradable_read_arc();
        assert!(
            l.try_upgradable_read_arc().is_none(),
            "one upgradable reader"
        );
        assert!(l.try_write_arc().is_none());
        let mut w = ArcRwLockUpgradableReadGuard::upgrade(u);
        w.push(2);
        let u = l.try_upgradable_read_arc();
        assert!(u.is_none());
    }
    let weak = Arc::downgrade(&l);
    let r = l.read_arc();
    drop(l);
    assert_eq!(*r, [1, 2], "the guard keeps the lock alive");
    drop(r);
    assert!(weak.upgrade().is_none());
}

#[test]
fn qrwlock_arc_guards() {
    rwlock_arc_guards(Arc::new(QRwLock::new(Vec::new())));
}

#[test]
fn percpu_rwlock_arc_guards() {
    rwlock_arc_guards(Arc::new(PerCpuRwLock::new(Vec::new())));
}

#[test]
fn reentrant_mutex_lock_arc() {
    let m = Arc::new(ReentrantMutex::new(Cell::new(0)));
    let a: ArcReentrantMutexGuard<RawQSpinLock, RawThreadId, Cell<i32>> = m.lock_arc();
    let b = m.try_lock_arc().expect("the owner locks again");
    b.set(a.get() + 1);
    drop(a);
    let m2 = m.clone();
    assert!(
        thread::spawn(move || m2.try_lock_arc().is_none())
            .join()
            .unwrap(),
        "held by the remaining Arc guard"
    );
    drop(b);
    assert_eq!(m.lock().get(), 1);
}
