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
//! A batch ends two ways:
//! - **By the holder** ([`HolderBatch`]): a thread counts the releases it
//!   makes while a word waiter exists and, reading the clock on one in
//!   `holder_clock_every` of them, ends its batch once it has held the lock
//!   on and off for `batch_ns`: that release reserves the lock and wakes the
//!   word waiter, which may sleep meanwhile. This bounds every thread that
//!   keeps taking the lock through the fast path, also one that got back in
//!   without waiting (a holder descheduled while the lock was free, that
//!   runs again). It needs per-thread state (`Platform::with_local`).
//! - **By the word waiter** ([`BatchClock`]): after `claim_ns` it claims the
//!   next release itself. This covers platforms without per-thread state
//!   and threads that alternate between locks (the per-thread record follows
//!   one lock at a time).
//!
//! A word waiter that is not running when the lock is reserved for it
//! delays nobody for long: a spinning contender takes a reserved lock after
//! `qs_steal_ns`, and its own release reserves it again.

use core::cell::Cell;

use super::TUNING;
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

    /// Counts one poll; true once `ns` passed (or `polls` polls were made).
    #[inline]
    pub(crate) fn elapsed<P: Platform>(&mut self, ns: u64, polls: u32) -> bool {
        self.polls = self.polls.saturating_add(1);
        self.polls >= polls || P::now_ns().wrapping_sub(self.start_ns) >= ns
    }
}

/// A thread's record of its current batch on one lock: which lock, how many
/// contended releases, since when. Lives in `LocalState`; only its thread
/// touches it.
#[derive(Debug, Default)]
pub(crate) struct HolderBatch {
    lock: Cell<usize>,
    releases: Cell<u32>,
    start_ns: Cell<u64>,
}

impl HolderBatch {
    pub(crate) const fn new() -> Self {
        Self {
            lock: Cell::new(0),
            releases: Cell::new(0),
            start_ns: Cell::new(0),
        }
    }

    /// One release of `lock` while a word waiter exists: true if this
    /// thread's batch on `lock` is over (the release should reserve).
    #[inline]
    fn contended_release<P: Platform>(&self, lock: usize) -> bool {
        if self.lock.get() != lock {
            self.lock.set(lock);
            self.releases.set(1);
            self.start_ns.set(P::now_ns());
            return false;
        }
        let n = self.releases.get().saturating_add(1);
        self.releases.set(n);
        if n >= TUNING.holder_batch_max_ops {
            return true;
        }
        n.is_multiple_of(TUNING.holder_clock_every)
            && P::now_ns().wrapping_sub(self.start_ns.get()) >= TUNING.batch_ns
    }

    /// Forget the record: the thread's next batch starts from zero.
    #[inline]
    fn restart(&self) {
        self.lock.set(0);
    }
}

/// Counts a release of the lock at `lock` that a word waiter waits for;
/// true if the calling thread's batch is over. Ends the record then, so a
/// thread that gets the lock back starts a new batch.
#[inline]
pub(crate) fn holder_batch_over<P: Platform>(lock: usize) -> bool {
    P::with_local(|l| {
        let over = l.batch.contended_release::<P>(lock);
        if over {
            l.batch.restart();
        }
        over
    })
    .unwrap_or(false)
}

/// A word waiter took the lock: its batch starts now.
#[inline]
pub(crate) fn holder_batch_restart<P: Platform>() {
    let _ = P::with_local(|l| l.batch.restart());
}
