//! Spinning without hurting the holder.
//!
//! - [`Backoff`]: exponential spinning on loads (never on RMWs, to be easy
//!   on the cache line), capped; after `backoff_sleep_after` steps each step
//!   also sleeps briefly, so that a preempted thread we wait for (on our
//!   CPU) can run (after crossbeam's `Backoff`).
//! - [`QuietPoll`]: how a word waiter waits out a running holder's batch.
//!   Every poll of the lock word takes the line from the holder (its next
//!   acquisition misses), so the interval between polls grows, first spun,
//!   then slept: threads that can do useful work get the CPU.
//! - [`SpinThenYield`]: how a contender waits between its polls of a held
//!   lock before it queues: a few short spins, then `yield_now` for as long
//!   as yields run other threads, then spinning again.
//!
//! `Backoff` and `QuietPoll` never call `yield_now`: `sched_yield` may hand
//! the CPU to any runnable task, a low-priority one included, for a whole
//! time slice (milliseconds), during which the waiter cannot take the lock
//! it waits for. A timed sleep returns when its timer fires. `SpinThenYield`
//! yields only before its caller queues, a few times at most: with more
//! runnable threads than CPUs the yield runs the preempted holder, or a
//! thread with work to do, where spinning would burn the slice and queueing
//! would put the caller to sleep (a queue comes back one wake-up at a
//! time, and a woken thread can wait a scheduler tick for a CPU).

use super::TUNING;
use crate::platform::Platform;

/// A contender's wait between two polls of a held lock before it queues
/// (after parking_lot's `SpinWait`: spin a little, then yield), with a probe:
/// a yield that returns at once (within `yield_ran_ns`) found no other
/// thread to run on this CPU, so the holder runs elsewhere and spinning
/// serves better than more system calls; the following waits spin.
#[derive(Debug)]
pub(crate) struct SpinThenYield {
    backoff: Backoff,
    waits: u32,
    yielding: bool,
}

impl SpinThenYield {
    #[inline]
    pub(crate) const fn new() -> Self {
        Self {
            backoff: Backoff::new(),
            waits: 0,
            yielding: true,
        }
    }

    /// Waits counted so far.
    #[inline]
    pub(crate) fn waits(&self) -> u32 {
        self.waits
    }

    /// Waits before the next poll: one `Backoff` step for the first
    /// `spins_first` waits, then yields while they run other threads.
    #[inline]
    pub(crate) fn wait<P: Platform>(&mut self, spins_first: u32) {
        self.waits += 1;
        if self.waits > spins_first && self.yielding {
            let start = P::now_ns();
            P::yield_now();
            self.yielding = P::now_ns().wrapping_sub(start) >= TUNING.yield_ran_ns;
        } else {
            self.backoff.snooze::<P>();
        }
    }

    /// One `Backoff` step, not counted as a wait.
    #[inline]
    pub(crate) fn spin<P: Platform>(&mut self) {
        self.backoff.snooze::<P>();
    }
}

/// Exponential backoff for spin loops.
#[derive(Debug, Default)]
pub(crate) struct Backoff {
    step: u32,
}

impl Backoff {
    #[inline]
    pub(crate) const fn new() -> Self {
        Self { step: 0 }
    }

    /// Waits a little longer than last time.
    #[inline]
    pub(crate) fn snooze<P: Platform>(&mut self) {
        let limit = TUNING.backoff_spin_limit;
        for _ in 0..(1u32 << self.step.min(limit)) {
            P::relax();
        }
        if self.step > TUNING.backoff_sleep_after {
            P::sleep_ns(TUNING.backoff_sleep_ns);
        }
        self.step = self.step.saturating_add(1);
    }

    /// Number of steps taken so far.
    #[inline]
    pub(crate) fn steps(&self) -> u32 {
        self.step
    }
}

/// The growing poll interval of a waiter that waits out a batch.
#[derive(Debug)]
pub(crate) struct QuietPoll {
    relaxes: u32,
    sleep_ns: u64,
}

impl QuietPoll {
    #[inline]
    pub(crate) const fn new() -> Self {
        Self {
            relaxes: TUNING.quiet_min_relaxes,
            sleep_ns: TUNING.quiet_sleep_ns,
        }
    }

    /// Waits one interval and makes the next one longer: spun intervals
    /// double up to `quiet_max_relaxes`, then each is a timed sleep with
    /// `sleep(ns)` (a timed wait that the awaited event may cut short),
    /// doubling up to `quiet_max_sleep_ns`.
    #[inline]
    pub(crate) fn wait_with<P: Platform>(&mut self, sleep: impl FnOnce(u64)) {
        if self.relaxes > TUNING.quiet_max_relaxes {
            sleep(self.sleep_ns);
            self.sleep_ns = (self.sleep_ns * 2).min(TUNING.quiet_max_sleep_ns);
            return;
        }
        for _ in 0..self.relaxes {
            P::relax();
        }
        self.relaxes *= 2;
    }
}
