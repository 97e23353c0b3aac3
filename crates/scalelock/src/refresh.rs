//! `RefreshOnce<T>`: many threads want a fresh value; one recomputes it, the
//! others wait for that recomputation and share its result.
//!
//! This is the fix seed 003 (Xen's pmtimer) was after. 32 vCPUs serialised on
//! a spinlock just to recompute the same timer value. The first patch let
//! the losers of a `trylock` return the old value: *stale* (rejected). The
//! second made them spin on a counter bumped after each update: a loser
//! could end up waiting for the *next* holder's update, and again for the one
//! after (rejected). Keir's `spin_barrier` makes the losers wait for the
//! current holder only, but that holder may have started before they
//! arrived. And the value must be published atomically.
//!
//! # Promise
//! `refresh(f)` returns the value computed by an update (a call of some
//! caller's `f`) that **started after the caller arrived**, and the caller
//! waits for **at most one update beyond the one in progress at its
//! arrival**: a caller arriving while the lock is idle waits for one update
//! (often its own); a caller arriving mid-update waits for that update to
//! finish (its result was computed from a time before the caller came, so it
//! does not count) and then for the next one, and never for a third.
//!
//! # The state word
//!
//! ```text
//!  bits 31..2           1        0
//! +-------------------+--------+------+
//! | generation        | PARKED | BUSY |
//! +-------------------+--------+------+
//! ```
//! `generation` counts completed updates (wrapping; 2^30 values). `BUSY` is
//! set for the whole of an update: from just before `f` runs until its
//! result is published. Both change only under the value's writer lock (the
//! [`SeqLock`]'s `RawQSpinLock`). `PARKED`: some caller sleeps on this word
//! (`Platform::wait`); set by sleepers, cleared by the update that finishes.
//!
//! # Algorithm
//! 1. **Arrive**: load the state (SeqCst). If it shows generation `g` and
//!    not `BUSY`, the first update to start after now completes generation
//!    `g + 1`: that is our target. If `BUSY`, the update in progress
//!    completes `g + 1` but started before us, so the target is `g + 2`.
//! 2. Loop: if the generation has reached the target, read the value
//!    (SeqLock read: atomic, never torn) and return it. If the state is not
//!    `BUSY`, `try_lock` the writer lock; the winner re-checks the target
//!    (someone may have completed it meanwhile: then return that result
//!    without recomputing), else sets `BUSY`, runs `f` on the current value,
//!    publishes the result, and stores generation + 1 with `BUSY` and
//!    `PARKED` clear (Release), waking sleepers if `PARKED` was set. If
//!    `BUSY`, spin with backoff, then set `PARKED` and sleep on the word
//!    until it changes.
//!
//! # Why the promise holds
//! - *Started after arrival*: an update starts with its `BUSY` store, made
//!   while holding the writer lock, at generation `g'`. If our arrival load
//!   saw `g` not busy, every later `BUSY` store follows it in the word's
//!   modification order (coherence), so the update completing `g + 1`
//!   started after us, as did all later ones. If it saw `BUSY` at `g`, the
//!   update completing `g + 2` set `BUSY` after the completion store of
//!   `g + 1`, which follows our load. Both stores are SeqCst with the
//!   arrival load, so "after" also holds in the single total order that
//!   orders the clock reads `f` makes after its `BUSY` store.
//! - *At most one more*: generations grow by exactly one per update, and a
//!   caller returns as soon as it sees its target. Updates are serialized, so
//!   between our arrival and our target there are at most the update in
//!   progress (completing `g + 1`) and the target itself. Some waiter always
//!   takes the free writer lock, so the target is reached.
//! - *Atomic publication*: the value lives in a [`SeqLock`]; a reader never
//!   sees a half-written value, and the generation store is Release after the
//!   value was published, so a caller that sees its target (Acquire) reads
//!   that value or a later one.
//!
//! # No lost wake-up
//! A sleeper sets `PARKED` with a `cmpxchg` from the very (`BUSY`) value it
//! judged, then sleeps while the word equals that value plus `PARKED`. The
//! finishing update `swap`s in a new generation: if the `swap` follows the
//! `cmpxchg` it sees `PARKED` and wakes everyone; if it precedes it the
//! `cmpxchg` fails and the sleeper re-checks.
//!
//! # Waiting (16 threads on 2 cores)
//! Callers waiting for an update sleep (futex on std) after a short spin, so
//! the updater gets the CPU; a waiter that finds the state idle but the
//! writer lock held (a new updater about to set `BUSY`, or the last one
//! about to release) backs off with yields, which lasts a few instructions of
//! the holder's time.
//!
//! If `f` panics, the update is abandoned: `BUSY` is cleared (same
//! generation) and sleepers are woken; one of them then updates.

use crate::platform::{DefaultPlatform, Platform};
use crate::seqlock::{NoUninit, SeqLock, SeqLockWriteGuard};
use crate::sync::atomic::{AtomicU32, Ordering};
use crate::wait::Backoff;

/// An update is in progress.
const BUSY: u32 = 1 << 0;
/// Somebody sleeps on the state word.
const PARKED: u32 = 1 << 1;
/// One completed update.
const ONE_GEN: u32 = 1 << 2;
/// The generation field.
const GEN_MASK: u32 = !(ONE_GEN - 1);

/// Backoff steps a waiter spins (the last few yield) before sleeping.
const SPIN_STEPS: u32 = 6;

/// Has the generation in `state` reached `target` (wrapping)?
#[inline]
const fn reached(state: u32, target: u32) -> bool {
    ((state & GEN_MASK).wrapping_sub(target) as i32) >= 0
}

/// A value that many threads refresh, one at a time, sharing each
/// refresh; see the module documentation.
pub struct RefreshOnce<T: NoUninit, P: Platform = DefaultPlatform> {
    /// Generation, `BUSY` and `PARKED`; see the module docs.
    state: AtomicU32,
    /// The value; its writer lock serialises updates.
    value: SeqLock<T, P>,
}

impl<T: NoUninit, P: Platform> RefreshOnce<T, P> {
    /// Holds `value`, generation 0.
    #[cfg(not(loom))]
    pub const fn new(value: T) -> Self {
        Self {
            state: AtomicU32::new(0),
            value: SeqLock::new(value),
        }
    }

    /// Holds `value`, generation 0.
    #[cfg(loom)]
    pub fn new(value: T) -> Self {
        Self {
            state: AtomicU32::new(0),
            value: SeqLock::new(value),
        }
    }

    /// Returns a value computed by `f(&current)` in an update that started
    /// after this call began, waiting for at most one update beyond any
    /// already in progress. `f` runs at most once, and only if no other
    /// caller's update can serve this call.
    #[inline]
    pub fn refresh(&self, f: impl FnOnce(&T) -> T) -> T {
        // Arrival. SeqCst: ordered against every update's SeqCst BUSY store.
        let s = self.state.load(Ordering::SeqCst);
        let target = (s & GEN_MASK)
            .wrapping_add(ONE_GEN)
            .wrapping_add(if s & BUSY != 0 { ONE_GEN } else { 0 });
        if s & BUSY == 0
            && let Some(guard) = self.value.try_lock()
        {
            return self.update_locked(guard, target, f);
        }
        self.refresh_slow(target, f)
    }

    /// The latest published value, without refreshing (it may be stale).
    #[inline]
    pub fn get(&self) -> T {
        self.value.read()
    }

    /// The number of completed updates (wrapping at 2^30).
    #[inline]
    pub fn generation(&self) -> u32 {
        self.state.load(Ordering::Acquire) >> ONE_GEN.trailing_zeros()
    }

    /// Whether an update is running right now (a momentary snapshot).
    #[inline]
    pub fn is_refreshing(&self) -> bool {
        self.state.load(Ordering::Relaxed) & BUSY != 0
    }

    #[cold]
    fn refresh_slow(&self, target: u32, f: impl FnOnce(&T) -> T) -> T {
        let mut backoff = Backoff::new();
        loop {
            // Acquire pairs with the Release `swap` that completed the
            // generation we see, and so with its value's publication.
            let s = self.state.load(Ordering::Acquire);
            if reached(s, target) {
                return self.value.read();
            }
            if s & BUSY == 0 {
                if let Some(guard) = self.value.try_lock() {
                    return self.update_locked(guard, target, f);
                }
                // Idle but locked: an updater is about to set BUSY, or the
                // last one is about to release. A few of its instructions.
                backoff.snooze::<P>();
                continue;
            }
            if backoff.steps() < SPIN_STEPS {
                backoff.snooze::<P>();
                continue;
            }
            // Set PARKED from the value we judged (see "No lost wake-up").
            if s & PARKED == 0
                && self
                    .state
                    .compare_exchange_weak(s, s | PARKED, Ordering::Relaxed, Ordering::Relaxed)
                    .is_err()
            {
                continue;
            }
            P::wait(&self.state, s | PARKED);
        }
    }

    /// Holding the writer lock: run the update unless `target` was reached.
    fn update_locked(
        &self,
        mut guard: SeqLockWriteGuard<'_, T, P>,
        target: u32,
        f: impl FnOnce(&T) -> T,
    ) -> T {
        // Only the writer-lock holder changes the generation or BUSY, and
        // PARKED is only set while BUSY, so this is a plain generation.
        let s = self.state.load(Ordering::Relaxed);
        debug_assert_eq!(s & (BUSY | PARKED), 0);
        let current = guard.get();
        if reached(s, target) {
            // Someone completed our target since we looked: share it.
            return current;
        }
        // The update starts. SeqCst: after every arrival that saw `s` idle.
        self.state.fetch_or(BUSY, Ordering::SeqCst);
        let abandon = Abandon {
            owner: self,
            state: s,
        };
        let new = f(&current);
        core::mem::forget(abandon);
        guard.set(new);
        // Release pairs with waiters' Acquire state load: the value above is
        // published before they see the new generation.
        self.finish(s.wrapping_add(ONE_GEN));
        drop(guard);
        new
    }

    /// Stores `state` (not BUSY, not PARKED) and wakes any sleepers.
    #[inline]
    fn finish(&self, state: u32) {
        let old = self.state.swap(state, Ordering::Release);
        if old & PARKED != 0 {
            P::wake_all(&self.state);
        }
    }
}

/// Clears `BUSY` (same generation) if `f` unwinds.
struct Abandon<'a, T: NoUninit, P: Platform> {
    owner: &'a RefreshOnce<T, P>,
    state: u32,
}

impl<T: NoUninit, P: Platform> Drop for Abandon<'_, T, P> {
    fn drop(&mut self) {
        self.owner.finish(self.state);
    }
}

impl<T: NoUninit + Default, P: Platform> Default for RefreshOnce<T, P> {
    fn default() -> Self {
        Self::new(T::default())
    }
}

impl<T: NoUninit + core::fmt::Debug, P: Platform> core::fmt::Debug for RefreshOnce<T, P> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("RefreshOnce")
            .field("generation", &self.generation())
            .field("refreshing", &self.is_refreshing())
            .field("value", &self.get())
            .finish()
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::sync::atomic::AtomicBool;
    use std::sync::Arc;
    use std::thread;

    fn wait_until(cond: impl Fn() -> bool) {
        while !cond() {
            thread::yield_now();
        }
    }

    #[test]
    fn refresh_runs_f_and_counts() {
        let r: RefreshOnce<u64> = RefreshOnce::new(1);
        assert_eq!(r.refresh(|v| v + 1), 2);
        assert_eq!(r.refresh(|v| v * 10), 20);
        assert_eq!(r.get(), 20);
        assert_eq!(r.generation(), 2);
        assert!(!r.is_refreshing());
    }

    #[test]
    fn panicking_update_is_abandoned() {
        let r: RefreshOnce<u64> = RefreshOnce::new(1);
        let p = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            r.refresh(|_| panic!("boom"))
        }));
        assert!(p.is_err());
        assert!(!r.is_refreshing());
        assert_eq!(r.generation(), 0);
        assert_eq!(r.refresh(|v| v + 1), 2);
    }

    /// A caller arriving mid-update does not take that update's result: it
    /// waits for the next update (here, its own).
    #[test]
    fn mid_update_arrival_waits_for_the_next_update() {
        let r: Arc<RefreshOnce<u64>> = Arc::new(RefreshOnce::new(0));
        let gate = Arc::new(AtomicBool::new(false));
        let a = {
            let (r, gate) = (r.clone(), gate.clone());
            thread::spawn(move || {
                r.refresh(|_| {
                    wait_until(|| gate.load(Ordering::Acquire));
                    100
                })
            })
        };
        wait_until(|| r.is_refreshing());
        let b = {
            let r = r.clone();
            thread::spawn(move || r.refresh(|old| old + 1))
        };
        if !cfg!(miri) {
            thread::sleep(std::time::Duration::from_millis(2));
        }
        assert!(!b.is_finished(), "B returned during A's update");
        gate.store(true, Ordering::Release);
        assert_eq!(a.join().unwrap(), 100);
        assert_eq!(b.join().unwrap(), 101, "B must get an update after A's");
        assert_eq!(r.generation(), 2);
    }

    /// Two callers arriving mid-update share the single next update: neither
    /// waits for a third, and `f` runs twice in all.
    #[test]
    fn at_most_one_further_update() {
        let r: Arc<RefreshOnce<u64>> = Arc::new(RefreshOnce::new(0));
        let gate1 = Arc::new(AtomicBool::new(false));
        let gate2 = Arc::new(AtomicBool::new(false));
        let calls = Arc::new(crate::sync::atomic::AtomicU32::new(0));
        let a = {
            let (r, g, c) = (r.clone(), gate1.clone(), calls.clone());
            thread::spawn(move || {
                r.refresh(|_| {
                    c.fetch_add(1, Ordering::Relaxed);
                    wait_until(|| g.load(Ordering::Acquire));
                    1
                })
            })
        };
        wait_until(|| r.is_refreshing());
        let arrived = Arc::new(crate::sync::atomic::AtomicU32::new(0));
        let waiters: Vec<_> = (0..2)
            .map(|_| {
                let (r, g, c) = (r.clone(), gate2.clone(), calls.clone());
                let arrived = arrived.clone();
                thread::spawn(move || {
                    arrived.fetch_add(1, Ordering::Relaxed);
                    r.refresh(|old| {
                        c.fetch_add(1, Ordering::Relaxed);
                        wait_until(|| g.load(Ordering::Acquire));
                        old + 10
                    })
                })
            })
            .collect();
        // Both waiters must arrive during A's update (a waiter arriving during
        // the second update would rightly wait for a third).
        wait_until(|| arrived.load(Ordering::Relaxed) == 2);
        wait_until(|| r.state.load(Ordering::Relaxed) & PARKED != 0);
        if !cfg!(miri) {
            thread::sleep(std::time::Duration::from_millis(20));
        }
        gate1.store(true, Ordering::Release);
        assert_eq!(a.join().unwrap(), 1);
        // One waiter now runs the second update (blocked on gate2).
        wait_until(|| r.generation() == 1 && r.is_refreshing());
        gate2.store(true, Ordering::Release);
        for w in waiters {
            assert_eq!(w.join().unwrap(), 11);
        }
        assert_eq!(calls.load(Ordering::Relaxed), 2);
        assert_eq!(r.generation(), 2);
    }
}
