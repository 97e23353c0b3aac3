//! Loom models of timed `RawQRwLock` acquisitions giving up: a timed
//! writer against a reader that leaves fairly, a timed reader against a
//! writer that leaves fairly, a timed upgrade against a reader. The timed
//! thread runs a ticking clock (one nanosecond per reading,
//! `LoomPlatform::start_ticking_clock`), so its deadline passes after a
//! given number of clock readings; each model runs once per deadline,
//! which moves the give-up point through the protocol (queued on
//! `wait_lock`, waiting out the batch, draining, waiting for the writer)
//! while loom interleaves the other thread around it; the holder's stay
//! (a number of yields, or until the timed thread is done) moves its
//! release through that path too. A lost wake-up is a loom deadlock; a
//! timed waiter that gave up while the lock was still held must have left
//! the word exactly as it found it (its turn included), and the lock ends
//! idle with nothing left in its word or queue.
//!
//! Run: `RUSTFLAGS="--cfg loom" LOOM_MAX_PREEMPTIONS=2 cargo test -p scalelock
//! --release --test loom_timed_qrwlock`
#![cfg(loom)]

use std::time::Duration;

use loom::cell::UnsafeCell;
use loom::sync::Arc;
use loom::sync::atomic::{AtomicBool, Ordering};
use loom::thread;

use lock_api::{RawRwLock, RawRwLockFair, RawRwLockTimed, RawRwLockUpgrade, RawRwLockUpgradeTimed};
use scalelock::RawQRwLock;
use scalelock::platform::LoomPlatform;

struct Shared {
    lock: RawQRwLock,
    data: UnsafeCell<usize>,
    /// The timed thread is done (it got the lock or gave up).
    done: AtomicBool,
    /// The timed thread got the lock.
    got: AtomicBool,
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
            done: AtomicBool::new(false),
            got: AtomicBool::new(false),
        })
    }

    /// The holder's stay: until the timed thread is done, or `hold`
    /// yields (loom runs a yielding thread only once the others yield or
    /// block, so `hold` moves the release through the timed thread's
    /// path; a large `hold` releases only after the timed thread gave up).
    /// After `stay`: if the timed thread gave up while we still hold the
    /// lock, the lock is exactly as it was before it came (`before`, its
    /// Debug output then), its turn included.
    fn check_as_before(&self, before: &str) {
        if self.done.load(Ordering::SeqCst) && !self.got.load(Ordering::SeqCst) {
            assert_eq!(
                format!("{:?}", self.lock),
                before,
                "a timed waiter left a trace"
            );
        }
    }

    fn stay(&self, hold: usize) {
        for _ in 0..hold {
            if self.done.load(Ordering::SeqCst) {
                return;
            }
            thread::yield_now();
        }
    }

    /// The lock is idle, and nothing is left in its word or its queue
    /// (but a turn number); a write and a read go through.
    fn check_idle(&self) {
        let state = format!("{:?}", self.lock);
        assert!(
            !state.contains("true")
                && state.contains("readers: 0")
                && state.contains("locked: \"free\"")
                && state.contains("tail: 0"),
            "left dirty: {state}"
        );
        let g = self
            .lock
            .try_lock_exclusive()
            .expect("idle lock refuses a write");
        // SAFETY: `g` came from `try_lock_exclusive` above.
        unsafe { self.lock.unlock_exclusive(g) };
    }
}

/// Deadlines, in clock readings of the timed thread.
const READS: [u64; 6] = [1, 2, 3, 5, 8, 13];
/// How many yields the holder stays for at most.
const HOLDS: [usize; 3] = [1, 4, 1_000];

/// Every (deadline, stay) pair.
fn cases() -> impl Iterator<Item = (u64, usize)> {
    READS
        .into_iter()
        .flat_map(|reads| HOLDS.into_iter().map(move |hold| (reads, hold)))
}

fn model(f: impl Fn() + Sync + Send + 'static) {
    let mut b = loom::model::Builder::new();
    b.preemption_bound = Some(2);
    b.check(f);
}

#[test]
fn timed_writer_against_a_fair_reader() {
    for (reads, hold) in cases() {
        model(move || {
            let s = Shared::new();
            let r = s.lock.lock_shared();
            let before = format!("{:?}", s.lock);
            let t = {
                let s = s.clone();
                thread::spawn(move || {
                    LoomPlatform::start_ticking_clock();
                    if let Some(g) = s.lock.try_lock_exclusive_for(Duration::from_nanos(reads)) {
                        s.got.store(true, Ordering::SeqCst);
                        // SAFETY: exclusive lock held.
                        s.data.with_mut(|d| unsafe { *d += 1 });
                        // SAFETY: `g` came from `try_lock_exclusive_for`.
                        unsafe { s.lock.unlock_exclusive(g) };
                    }
                    s.done.store(true, Ordering::SeqCst);
                })
            };
            // SAFETY: shared lock held.
            s.data.with(|d| unsafe { *d });
            s.stay(hold);
            s.check_as_before(&before);
            // SAFETY: `r` came from `lock_shared` above.
            unsafe { s.lock.unlock_shared_fair(r) };
            t.join().unwrap();
            s.check_idle();
        });
    }
}

#[test]
fn timed_reader_against_a_fair_writer() {
    for (reads, hold) in cases() {
        model(move || {
            let s = Shared::new();
            let w = s.lock.lock_exclusive();
            let before = format!("{:?}", s.lock);
            let t = {
                let s = s.clone();
                thread::spawn(move || {
                    LoomPlatform::start_ticking_clock();
                    if let Some(g) = s.lock.try_lock_shared_for(Duration::from_nanos(reads)) {
                        s.got.store(true, Ordering::SeqCst);
                        // SAFETY: shared lock held.
                        s.data.with(|d| unsafe { *d });
                        // SAFETY: `g` came from `try_lock_shared_for`.
                        unsafe { s.lock.unlock_shared(g) };
                    }
                    s.done.store(true, Ordering::SeqCst);
                })
            };
            // SAFETY: exclusive lock held.
            s.data.with_mut(|d| unsafe { *d += 1 });
            s.stay(hold);
            s.check_as_before(&before);
            // SAFETY: `w` came from `lock_exclusive` above.
            unsafe { s.lock.unlock_exclusive_fair(w) };
            t.join().unwrap();
            s.check_idle();
        });
    }
}

#[test]
fn timed_upgrade_against_a_reader() {
    for (reads, hold) in cases() {
        model(move || {
            let s = Shared::new();
            let u = s.lock.lock_upgradable();
            let t = {
                let s = s.clone();
                thread::spawn(move || {
                    let r = s.lock.lock_shared();
                    // SAFETY: shared lock held.
                    s.data.with(|d| unsafe { *d });
                    s.stay(hold);
                    // SAFETY: `r` came from `lock_shared` above.
                    unsafe { s.lock.unlock_shared(r) };
                })
            };
            LoomPlatform::start_ticking_clock();
            // SAFETY: `u` came from `lock_upgradable` above.
            match unsafe { s.lock.try_upgrade_for(u, Duration::from_nanos(reads)) } {
                Ok(w) => {
                    // SAFETY: exclusive lock held.
                    s.data.with_mut(|d| unsafe { *d += 1 });
                    // SAFETY: `w` came from `try_upgrade_for`.
                    unsafe { s.lock.unlock_exclusive(w) };
                }
                // SAFETY: the upgradable read is still ours.
                Err(u) => unsafe { s.lock.unlock_upgradable(u) },
            }
            s.done.store(true, Ordering::SeqCst);
            t.join().unwrap();
            s.check_idle();
        });
    }
}
