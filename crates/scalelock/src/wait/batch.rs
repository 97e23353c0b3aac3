//! Bounded batches: fair and fast.
//!
//! Handing a lock to the next waiter at every release (a ticket lock, a
//! fair mutex) costs a cache-line transfer per acquisition and, whenever the
//! next waiter is not running, the lock sits idle until it is scheduled:
//! such locks collapse once threads outnumber CPUs. Never handing over (a
//! test-and-set lock) starves. Both queued locks in this crate do the middle
//! thing: the thread that waits on the lock word (the *word waiter*, first
//! in line) lets the running threads keep re-acquiring for one *batch*, and
//! then the next release is reserved for it.
//!
//! The word waiter keeps the batch's clock ([`BatchClock`]) and sleeps
//! through it; at its end it claims the lock and the holder's next release
//! reserves it. Only a running waiter can take the lock anyway: a waiter
//! that is not scheduled when its batch ends ends it later, when it runs,
//! and the running threads use the lock meanwhile instead of leaving it
//! reserved for a thread that cannot take it.
//!
//! (Ending batches on the holder's side instead, by counting its releases
//! in thread-local storage and reading the clock every few of them, cost
//! the holder a third of its speed under contention, measured with
//! `cargo bench -p scalelock --bench qspinlock` at 2 and 16 threads.)
//!
//! The thread that handed the lock over is still running: its next `lock`
//! queues at once ([`handing_off`], [`just_handed_off`]) instead of
//! spinning, or it would take the lock back whenever it finds it free
//! between the new holder's acquisitions.
//!
//! A word waiter that is not running when the lock is reserved for it
//! delays nobody for long: a spinning contender takes a reserved lock after
//! `qs_steal_ns`, and its own release reserves it again.

use core::cell::Cell;

use crate::platform::Platform;

/// A waiter's clock: when it started waiting, and polls (the bound on
/// platforms without a clock).
#[derive(Debug)]
pub(crate) struct BatchClock {
    start_ns: u64,
    polls: u32,
}

impl BatchClock {
    /// Starts timing now.
    #[inline]
    pub(crate) fn start<P: Platform>() -> Self {
        Self {
            start_ns: P::now_ns(),
            polls: 0,
        }
    }

    /// Timing since `start_ns` (a `now_ns` reading), not now.
    #[inline]
    pub(crate) fn since(start_ns: u64) -> Self {
        Self { start_ns, polls: 0 }
    }

    /// Counts one poll; `None` once `ns` passed (or `polls` polls were
    /// made), else about how long is left (all of `ns` without a clock).
    #[inline]
    pub(crate) fn remaining_ns<P: Platform>(&mut self, ns: u64, polls: u32) -> Option<u64> {
        self.polls = self.polls.saturating_add(1);
        let elapsed = P::now_ns().wrapping_sub(self.start_ns);
        (self.polls < polls && elapsed < ns).then(|| ns - elapsed)
    }

    /// Counts one poll; true once `ns` passed (or `polls` polls were made).
    #[inline]
    pub(crate) fn elapsed<P: Platform>(&mut self, ns: u64, polls: u32) -> bool {
        self.polls = self.polls.saturating_add(1);
        self.polls >= polls || P::now_ns().wrapping_sub(self.start_ns) >= ns
    }
}

/// A thread's record of the lock it just handed to the word waiter: its next
/// `lock` of it queues at once rather than spinning, because a thread still
/// running right after a hand-off would otherwise take the lock back
/// whenever it finds it free between the new holder's acquisitions. Lives
/// in `LocalState`; only its thread touches it.
#[derive(Debug, Default)]
pub(crate) struct HandedOff {
    lock: Cell<usize>,
}

impl HandedOff {
    pub(crate) const fn new() -> Self {
        Self { lock: Cell::new(0) }
    }
}

/// The calling thread reserves the lock at `lock` for its word waiter.
#[inline]
pub(crate) fn handing_off<P: Platform>(lock: usize) {
    let _ = P::with_local(|l| l.handed_off.lock.set(lock));
}

/// Whether the calling thread's last release of `lock` handed it over
/// (consumes the record).
#[inline]
pub(crate) fn just_handed_off<P: Platform>(lock: usize) -> bool {
    P::with_local(|l| l.handed_off.lock.replace(0) == lock).unwrap_or(false)
}
