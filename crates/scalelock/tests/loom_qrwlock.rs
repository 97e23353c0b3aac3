//! Loom models of the queued rwlock: reader/writer exclusion on the fast
//! paths, the reader slow path queueing on `wait_lock` behind a writer, the
//! writer slow path (W_WAITING, drain, W_LOCKED), downgrade, upgrade, and
//! sleeping on the count word (the loom platform's `wait` really blocks, so
//! a lost wake-up around PARKED shows up as a loom deadlock).
//!
//! Run: `RUSTFLAGS="--cfg loom" LOOM_MAX_PREEMPTIONS=2 cargo test -p scalelock
//! --release --test loom_qrwlock`
#![cfg(loom)]

use loom::cell::UnsafeCell;
use loom::sync::Arc;
use loom::thread;

use lock_api::{RawRwLock, RawRwLockDowngrade, RawRwLockUpgrade};
use scalelock::RawQRwLock;

struct Shared {
    lock: RawQRwLock,
    data: UnsafeCell<usize>,
}

// SAFETY: `data` is written only under the exclusive lock and read only
// under a shared one; loom reports a race if exclusion fails.
unsafe impl Sync for Shared {}
unsafe impl Send for Shared {}

impl Shared {
    fn new() -> Arc<Self> {
        Arc::new(Shared {
            lock: RawQRwLock::new(),
            data: UnsafeCell::new(0),
        })
    }

    fn write(&self) {
        let g = self.lock.lock_exclusive();
        // SAFETY: exclusive lock held.
        self.data.with_mut(|d| unsafe { *d += 1 });
        // SAFETY: `g` came from `lock_exclusive` above.
        unsafe { self.lock.unlock_exclusive(g) };
    }

    fn read(&self) -> usize {
        let g = self.lock.lock_shared();
        // SAFETY: shared lock held.
        let v = self.data.with(|d| unsafe { *d });
        // SAFETY: `g` came from `lock_shared` above.
        unsafe { self.lock.unlock_shared(g) };
        v
    }
}

#[test]
fn two_writers() {
    loom::model(|| {
        let s = Shared::new();
        let t = {
            let s = s.clone();
            thread::spawn(move || s.write())
        };
        s.write();
        t.join().unwrap();
        assert_eq!(s.read(), 2);
        assert!(!s.lock.is_locked());
    });
}

#[test]
fn reader_and_writer() {
    loom::model(|| {
        let s = Shared::new();
        let t = {
            let s = s.clone();
            thread::spawn(move || s.read())
        };
        s.write();
        let seen = t.join().unwrap();
        assert!(seen <= 1);
        assert!(!s.lock.is_locked());
    });
}

/// A writer queued between two readers: one reader may go through the
/// slow path (undo, wait_lock, wait for W_LOCKED to clear).
#[test]
fn writer_between_readers() {
    let mut b = loom::model::Builder::new();
    b.preemption_bound = Some(2);
    b.check(|| {
        let s = Shared::new();
        let r1 = {
            let s = s.clone();
            thread::spawn(move || s.read())
        };
        let w = {
            let s = s.clone();
            thread::spawn(move || s.write())
        };
        let v = s.read();
        w.join().unwrap();
        assert!(r1.join().unwrap() <= 1 && v <= 1);
        assert!(!s.lock.is_locked());
    });
}

/// Downgrade lets a reader in but no writer; upgrade drains readers.
#[test]
fn downgrade_and_upgrade() {
    loom::model(|| {
        let s = Shared::new();
        let t = {
            let s = s.clone();
            thread::spawn(move || {
                let u = s.lock.lock_upgradable();
                // SAFETY: `u` came from `lock_upgradable` above.
                let w = unsafe { s.lock.upgrade(u) };
                // SAFETY: exclusive lock held.
                s.data.with_mut(|d| unsafe { *d += 1 });
                // SAFETY: `w` came from `upgrade` above.
                let r = unsafe { s.lock.downgrade(w) };
                // SAFETY: shared lock held.
                let v = s.data.with(|d| unsafe { *d });
                // SAFETY: `r` came from `downgrade` above.
                unsafe { s.lock.unlock_shared(r) };
                v
            })
        };
        let seen = s.read();
        assert!(seen <= 1);
        assert!(t.join().unwrap() >= 1);
        assert!(!s.lock.is_locked());
    });
}
