//! Loom models of the queued rwlock: reader/writer exclusion on the fast
//! paths, the reader slow path queueing on `wait_lock` behind a writer, the
//! writer slow path (W_WAITING, drain, W_LOCKED), downgrade, upgrade, the
//! batch protocol (the `wait_lock` holder waits with QUIET while a running
//! writer re-acquires, the writer raises HANDOFF, the waiter claims), turns
//! (a queued reader's claim takes one; the writer that ran before it may not
//! pass it), and sleeping on the count word (the loom platform's `wait`
//! really blocks, so a lost wake-up around PARKED shows up as a loom
//! deadlock).
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
        self.write_yielding(0);
    }

    /// A write that yields `yields` times while holding the lock, so that a
    /// spinning waiter runs out of spins and parks (loom runs a yielding
    /// spinner only once the others yield or block).
    fn write_yielding(&self, yields: usize) {
        let g = self.lock.lock_exclusive();
        for _ in 0..yields {
            thread::yield_now();
        }
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

/// A writer that keeps re-acquiring while a contended writer or reader waits
/// with QUIET on `wait_lock`: the running writer may pass it (writer fast
/// path past QUIET) and then raises HANDOFF (under loom every acquisition
/// past QUIET ends the batch), the waiter claims the lock in one RMW and may
/// sleep on the word until the running writer's unlock wakes it (the second
/// write holds the lock across yields, so the waiter reaches its sleep).
fn batch_handoff(waiter_writes: bool) {
    let mut b = loom::model::Builder::new();
    b.preemption_bound = Some(2);
    b.check(move || {
        let s = Shared::new();
        let t = {
            let s = s.clone();
            thread::spawn(move || {
                if waiter_writes {
                    s.write();
                    0
                } else {
                    s.read()
                }
            })
        };
        s.write();
        s.write_yielding(6);
        let seen = t.join().unwrap();
        assert!(seen <= 2);
        assert_eq!(s.read(), if waiter_writes { 3 } else { 2 });
        assert!(!s.lock.is_locked());
    });
}

#[test]
fn batch_handoff_to_writer() {
    batch_handoff(true);
}

#[test]
fn batch_handoff_to_reader() {
    batch_handoff(false);
}

/// Turns: the reader queues behind the running writer and its claim takes
/// a turn; the reader then writes past its turn while the writer, which ran
/// before the claim, writes again: it may not pass the turn, and queues
/// (or, once nobody waits, ends it and claims the next). Under loom a turn
/// is over after `batch_polls` writes (no clock), so the reader's third
/// write can find it over with the writer waiting, and leave it to it.
/// Every write lands, exclusion holds, and nobody is left waiting.
#[test]
fn turn_holder_and_earlier_writer() {
    let mut b = loom::model::Builder::new();
    b.preemption_bound = Some(2);
    b.check(|| {
        let s = Shared::new();
        let t = {
            let s = s.clone();
            thread::spawn(move || {
                let seen = s.read();
                for _ in 0..3 {
                    s.write();
                }
                seen
            })
        };
        s.write();
        s.write_yielding(6);
        s.write();
        let seen = t.join().unwrap();
        assert!(seen <= 3);
        assert_eq!(s.read(), 6);
        assert!(!s.lock.is_locked());
    });
}

/// An upgrade that waits (W_WAITING, then asleep with PARKED) for a reader
/// that leaves with a fair unlock, then releases the write fairly itself:
/// the reader's release wakes the upgrader, and nobody is left waiting.
#[test]
fn upgrade_waits_for_a_fair_reader() {
    use lock_api::RawRwLockFair;
    let mut b = loom::model::Builder::new();
    b.preemption_bound = Some(2);
    b.check(|| {
        let s = Shared::new();
        let t = {
            let s = s.clone();
            thread::spawn(move || {
                let g = s.lock.lock_shared();
                for _ in 0..4 {
                    thread::yield_now();
                }
                // SAFETY: shared lock held.
                let v = s.data.with(|d| unsafe { *d });
                // SAFETY: `g` came from `lock_shared` above.
                unsafe { s.lock.unlock_shared_fair(g) };
                v
            })
        };
        let u = s.lock.lock_upgradable();
        // SAFETY: `u` came from `lock_upgradable` above.
        let w = unsafe { s.lock.upgrade(u) };
        // SAFETY: exclusive lock held.
        s.data.with_mut(|d| unsafe { *d += 1 });
        // SAFETY: `w` came from `upgrade` above.
        unsafe { s.lock.unlock_exclusive_fair(w) };
        assert!(t.join().unwrap() <= 1);
        assert_eq!(s.read(), 1);
        assert!(!s.lock.is_locked());
    });
}

/// A writer queued on `wait_lock` behind an upgradable reader that leaves
/// with a fair unlock (the queue lock reserved for the writer, the read
/// released with HANDOFF if the writer already waits out a batch).
#[test]
fn upgradable_fair_unlock_to_a_queued_writer() {
    use lock_api::RawRwLockUpgradeFair;
    let mut b = loom::model::Builder::new();
    b.preemption_bound = Some(2);
    b.check(|| {
        let s = Shared::new();
        let u = s.lock.lock_upgradable();
        let t = {
            let s = s.clone();
            thread::spawn(move || s.write())
        };
        for _ in 0..3 {
            thread::yield_now();
        }
        // SAFETY: shared (upgradable) lock held.
        let v = s.data.with(|d| unsafe { *d });
        assert_eq!(v, 0);
        // SAFETY: `u` came from `lock_upgradable` above.
        unsafe { s.lock.unlock_upgradable_fair(u) };
        t.join().unwrap();
        assert_eq!(s.read(), 1);
        assert!(!s.lock.is_locked());
    });
}

/// An upgradable reader waiting (asleep) for a writer that downgrades:
/// the downgrade wakes it; its upgrade then waits for the downgraded read.
#[test]
fn downgrade_wakes_a_waiting_upgradable_reader() {
    let mut b = loom::model::Builder::new();
    b.preemption_bound = Some(2);
    b.check(|| {
        let s = Shared::new();
        let t = {
            let s = s.clone();
            thread::spawn(move || {
                let w = s.lock.lock_exclusive();
                for _ in 0..4 {
                    thread::yield_now();
                }
                // SAFETY: exclusive lock held.
                s.data.with_mut(|d| unsafe { *d += 1 });
                // SAFETY: `w` came from `lock_exclusive` above.
                let r = unsafe { s.lock.downgrade(w) };
                // SAFETY: shared lock held.
                let v = s.data.with(|d| unsafe { *d });
                // SAFETY: `r` came from `downgrade` above.
                unsafe { s.lock.unlock_shared(r) };
                v
            })
        };
        let u = s.lock.lock_upgradable();
        // SAFETY: `u` came from `lock_upgradable` above.
        let w = unsafe { s.lock.upgrade(u) };
        // SAFETY: exclusive lock held.
        s.data.with_mut(|d| unsafe { *d += 1 });
        // SAFETY: `w` came from `upgrade` above.
        unsafe { s.lock.unlock_exclusive(w) };
        assert!(t.join().unwrap() >= 1);
        assert_eq!(s.read(), 2);
        assert!(!s.lock.is_locked());
    });
}
