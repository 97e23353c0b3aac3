//! Loom models of timed `RawQSpinLock` acquisitions giving up: a word
//! waiter racing a reserving (fair) release, a word waiter handing `PENDING`
//! to a queued head, a queued waiter leaving from the front and from the
//! middle of the queue. The timed thread runs a ticking clock (one
//! nanosecond per reading, `LoomPlatform::start_ticking_clock`), so its
//! deadline passes after a given number of clock readings; each model runs
//! once per deadline, which moves the give-up point through the protocol
//! while loom interleaves the other threads around it. A lost hand-off or
//! wake-up is a loom deadlock; a lock left reserved for nobody fails the
//! final `try_lock`; a node still written after its owner left fails the
//! exclusion check of the data (the node is reused at once).
//!
//! Run: `RUSTFLAGS="--cfg loom" LOOM_MAX_PREEMPTIONS=2 cargo test -p scalelock
//! --release --test loom_timed_qspinlock`
#![cfg(loom)]

use std::time::Duration;

use loom::cell::UnsafeCell;
use loom::sync::Arc;
use loom::sync::atomic::{AtomicBool, Ordering};
use loom::thread;

use lock_api::{RawMutex, RawMutexFair, RawMutexTimed};
use scalelock::RawQSpinLock;
use scalelock::platform::LoomPlatform;

const PENDING: u8 = 1;

struct Shared {
    lock: RawQSpinLock,
    data: UnsafeCell<usize>,
}

// SAFETY: `data` is only touched with `lock` held; loom checks that claim.
unsafe impl Sync for Shared {}
unsafe impl Send for Shared {}

impl Shared {
    fn new() -> Arc<Self> {
        Arc::new(Shared {
            lock: RawQSpinLock::new(),
            data: UnsafeCell::new(0),
        })
    }

    fn bump(&self) {
        // SAFETY: the lock is held; loom reports a race if exclusion fails.
        self.data.with_mut(|d| unsafe { *d += 1 });
    }

    fn increment(&self) {
        let g = self.lock.lock();
        self.bump();
        // SAFETY: `g` came from `lock()` above.
        unsafe { self.lock.unlock(g) };
    }

    /// With a ticking clock: gives up after `reads` clock readings. Twice,
    /// so that the node of a waiter that gave up is reused at once.
    fn increment_timed(&self, reads: u64) -> usize {
        self.increment_timed_rounds(reads, 2)
    }

    /// `increment_timed`, `rounds` times (1: the node is not reused; the
    /// larger models check that much only).
    fn increment_timed_rounds(&self, reads: u64, rounds: usize) -> usize {
        LoomPlatform::start_ticking_clock();
        let mut got = 0;
        for _ in 0..rounds {
            if let Some(g) = self.lock.try_lock_for(Duration::from_nanos(reads)) {
                self.bump();
                got += 1;
                // SAFETY: `g` came from `try_lock_for` above.
                unsafe { self.lock.unlock(g) };
            }
        }
        got
    }

    fn value(&self) -> usize {
        // SAFETY: called after every other thread was joined.
        self.data.with(|d| unsafe { *d })
    }

    /// The lock is free, nobody waits, and it is not reserved for anybody.
    fn assert_clean(&self) {
        assert_eq!(self.lock.state(), (0, 0, 0), "{:?}", self.lock);
        let g = self.lock.try_lock().expect("free lock refuses try_lock");
        // SAFETY: `g` came from `try_lock()` just above.
        unsafe { self.lock.unlock(g) };
    }
}

fn until(cond: impl Fn() -> bool) {
    while !cond() {
        thread::yield_now();
    }
}

/// A model thread that says when it is done (loom's handles cannot).
struct Spawned<T> {
    handle: thread::JoinHandle<T>,
    done: Arc<AtomicBool>,
}

impl<T: 'static> Spawned<T> {
    fn new(f: impl FnOnce() -> T + 'static) -> Self {
        let done = Arc::new(AtomicBool::new(false));
        let d = done.clone();
        let handle = thread::spawn(move || {
            let r = f();
            d.store(true, Ordering::SeqCst);
            r
        });
        Self { handle, done }
    }

    fn is_finished(&self) -> bool {
        self.done.load(Ordering::SeqCst)
    }

    fn join(self) -> T {
        self.handle.join().unwrap()
    }
}

/// Runs `f` under loom with at most `preemptions` preemptions (fewer if
/// `LOOM_MAX_PREEMPTIONS` says so): the models with more threads are only
/// tractable with fewer.
fn model(preemptions: usize, f: impl Fn() + Sync + Send + 'static) {
    let mut builder = loom::model::Builder::new();
    let bound = builder.preemption_bound.unwrap_or(2).min(preemptions);
    builder.preemption_bound = Some(bound);
    builder.check(f);
}

/// A timed word waiter whose deadline races the holder's release: a fair
/// one, or one after the waiter claimed the lock (HANDOFF). The release
/// reserves the lock for the waiter only if it still waits (GRANTED), and a
/// waiter that sees the reservation takes it. Once both are done the lock
/// must be free at once (not reserved for nobody), and a third acquisition
/// must get it.
#[test]
fn word_waiter_gives_up_against_a_reserving_release() {
    const HANDOFF: u8 = 2;
    for (reads, claim) in [(3, false), (4, false), (6, false), (10, true), (14, true)] {
        model(2, move || {
            let s = Shared::new();
            let g = s.lock.lock();
            let t = {
                let s = s.clone();
                Spawned::new(move || s.increment_timed(reads))
            };
            // Release once the waiter claimed the lock (a plain unlock then
            // reserves it), or as soon as it waits (a fair unlock does).
            let wanted = if claim { HANDOFF } else { PENDING };
            until(|| s.lock.state().1 & wanted != 0 || t.is_finished());
            // SAFETY: `g` came from `lock()` above.
            unsafe {
                if claim {
                    s.lock.unlock(g)
                } else {
                    s.lock.unlock_fair(g)
                }
            }
            let got = t.join();
            // Both are done: the lock is free now, not reserved for a
            // waiter that gave up (a third thread would steal a stranded
            // reservation after a while; `try_lock` does not).
            s.assert_clean();
            s.increment();
            assert_eq!(s.value(), got + 1);
            s.assert_clean();
        });
    }
}

/// A timed word waiter gives up while a queue head without predecessor
/// sleeps until PENDING clears: the head must be woken and get the lock.
#[test]
fn word_waiter_gives_up_to_a_sleeping_queue_head() {
    for reads in [2, 5] {
        model(1, move || {
            let s = Shared::new();
            let g = s.lock.lock();
            let timed = {
                let s = s.clone();
                Spawned::new(move || s.increment_timed_rounds(reads, 1))
            };
            until(|| s.lock.state().1 & PENDING != 0 || timed.is_finished());
            let head = {
                let s = s.clone();
                Spawned::new(move || s.increment())
            };
            // The head queues, unless the timed thread left first and the
            // head became the word waiter (then the timed thread queues or
            // finishes).
            until(|| s.lock.state().2 != 0 || timed.is_finished());
            // SAFETY: `g` came from `lock()` above.
            unsafe { s.lock.unlock(g) };
            let got = timed.join();
            head.join();
            assert_eq!(s.value(), got + 1);
            s.assert_clean();
        });
    }
}

/// The first queued waiter (behind a word waiter that never queued) gives
/// up with a waiter queued behind it: that one must become first and get
/// the lock; or the timed one is made word waiter first and gives up (or
/// hands PENDING on) from there.
#[test]
fn first_queued_waiter_gives_up_with_a_successor() {
    for reads in [2] {
        model(0, move || {
            let s = Shared::new();
            let g = s.lock.lock();
            let word = {
                let s = s.clone();
                Spawned::new(move || s.increment())
            };
            until(|| s.lock.state().1 & PENDING != 0);
            let timed = {
                let s = s.clone();
                Spawned::new(move || s.increment_timed(reads))
            };
            until(|| s.lock.state().2 != 0 || timed.is_finished());
            let tail = s.lock.state().2;
            let last = {
                let s = s.clone();
                Spawned::new(move || s.increment())
            };
            until(|| s.lock.state().2 != tail || last.is_finished());
            // SAFETY: `g` came from `lock()` above.
            unsafe { s.lock.unlock(g) };
            word.join();
            let got = timed.join();
            last.join();
            assert_eq!(s.value(), got + 2);
            s.assert_clean();
        });
    }
}

/// A timed waiter queued behind another queued waiter unlinks itself from
/// it (step A), possibly racing its predecessor taking it as successor when
/// it becomes word waiter; the queue must stay whole.
#[test]
fn queued_waiter_unlinks_from_its_predecessor() {
    for reads in [3, 8, 16] {
        model(0, move || {
            let s = Shared::new();
            let g = s.lock.lock();
            let word = {
                let s = s.clone();
                Spawned::new(move || s.increment())
            };
            until(|| s.lock.state().1 & PENDING != 0);
            let head = {
                let s = s.clone();
                Spawned::new(move || s.increment())
            };
            until(|| s.lock.state().2 != 0);
            let tail = s.lock.state().2;
            let timed = {
                let s = s.clone();
                Spawned::new(move || s.increment_timed(reads))
            };
            until(|| s.lock.state().2 != tail || timed.is_finished());
            // SAFETY: `g` came from `lock()` above.
            unsafe { s.lock.unlock(g) };
            word.join();
            head.join();
            let got = timed.join();
            assert_eq!(s.value(), got + 2);
            s.assert_clean();
        });
    }
}

/// A timed waiter in the middle of the queue (a queued predecessor, a
/// queued successor) leaves: its successor is linked to its predecessor
/// (step C), or taken by it, and everybody else gets the lock.
#[test]
fn middle_waiter_links_its_neighbours() {
    for reads in [2, 4, 6] {
        model(0, move || {
            let s = Shared::new();
            let g = s.lock.lock();
            let spawn = |s: &Arc<Shared>| {
                let s = s.clone();
                Spawned::new(move || s.increment())
            };
            let word = spawn(&s);
            until(|| s.lock.state().1 & PENDING != 0);
            let head = spawn(&s);
            until(|| s.lock.state().2 != 0);
            let head_tail = s.lock.state().2;
            let timed = {
                let s = s.clone();
                Spawned::new(move || s.increment_timed(reads))
            };
            until(|| s.lock.state().2 != head_tail || timed.is_finished());
            let timed_tail = s.lock.state().2;
            let last = spawn(&s);
            // Until the last one has queued (the tail names it, or the timed
            // one queued again behind it and will give the tail back).
            until(|| {
                let tail = s.lock.state().2;
                tail != 0 && tail != head_tail && tail != timed_tail
            });
            // SAFETY: `g` came from `lock()` above.
            unsafe { s.lock.unlock(g) };
            word.join();
            head.join();
            let got = timed.join();
            last.join();
            assert_eq!(s.value(), got + 3);
            s.assert_clean();
        });
    }
}

/// Two neighbours in the queue give up at about the same time: the first
/// one (without predecessor) makes its successor first while that one
/// unlinks itself, or the second waits in its step B for the first's step C.
/// The untimed waiters get the lock.
#[test]
fn neighbours_give_up_together() {
    for (a, b) in [(2, 4), (4, 2)] {
        model(0, move || {
            let s = Shared::new();
            let g = s.lock.lock();
            let word = {
                let s = s.clone();
                Spawned::new(move || s.increment())
            };
            until(|| s.lock.state().1 & PENDING != 0);
            let first = {
                let s = s.clone();
                Spawned::new(move || s.increment_timed_rounds(a, 1))
            };
            until(|| s.lock.state().2 != 0 || first.is_finished());
            let first_tail = s.lock.state().2;
            let second = {
                let s = s.clone();
                Spawned::new(move || s.increment_timed_rounds(b, 1))
            };
            until(|| s.lock.state().2 != first_tail || second.is_finished());
            let last = {
                let s = s.clone();
                Spawned::new(move || s.increment())
            };
            // SAFETY: `g` came from `lock()` above.
            unsafe { s.lock.unlock(g) };
            word.join();
            let got = first.join() + second.join();
            last.join();
            assert_eq!(s.value(), got + 2);
            s.assert_clean();
        });
    }
}
