//! Spinning without hurting the holder.
//!
//! - [`Backoff`]: exponential spinning on loads (never on RMWs, to be easy
//!   on the cache line), capped; after `backoff_sleep_after + 1` steps each
//!   step also sleeps briefly, so that a preempted thread we wait for (on our
//!   CPU) can run (after crossbeam's `Backoff`).
//! - [`QuietPoll`]: how a word waiter waits out a running holder's batch.
//!   Every poll of the lock word takes the line from the holder (its next
//!   acquisition misses), so the interval between polls grows, first spun,
//!   then slept: threads that can do useful work get the CPU.
//! - [`SpinThenYield`]: how a contender waits between its polls of a held
//!   lock before it queues: a few short spins, then `yield_now` for as long
//!   as yields run other threads, then spinning again.
//! - [`GapWatch`]: how a word waiter measures the holder's gaps between
//!   critical sections and, if they are long, takes the lock in one of
//!   them instead of sleeping through the holder's batch.
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
//! `GapWatch` never yields either: a word waiter that yields to another
//! thread claims the lock only once it runs again, and the holder's batch
//! runs on meanwhile (see `GapWatch`).

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

/// How a word waiter watches the holder during its batch instead of
/// sleeping through it. With work on both sides of the critical sections
/// (a microsecond inside, half of one outside) a word waiter asleep through
/// the batch left the lock free a third of the time, and with 8-16 threads
/// on 2 CPUs, most of them asleep in the queue, one CPU idle: the lock did
/// one thread's work, and parking_lot, whose waiter spins and grabs, did
/// more.
///
/// 1. *Observe*: the caller measures how long the holder leaves the lock
///    free between two critical sections (`shortest_free_gap`). A holder
///    in a tight loop re-takes it within a cache-line transfer or two, and
///    there the batch is what makes the lock fast (a waiter that grabs the
///    lock at every release moves its line at every acquisition): the
///    waiter goes back to sleep for the rest of the batch (*Off*).
/// 2. *Grab*: gaps of at least `qs_gap_min_ns` are a holder that works
///    between critical sections: the waiter polls the lock every
///    `qs_gap_grab_relaxes` relaxes and takes it the moment it is free,
///    as a spinning waiter of parking_lot or a pending waiter of Linux's
///    qspinlock does. Its spin is bounded by the batch: once the batch is
///    over the waiter claims the lock as it always does.
///
/// The first version (da749ce) watched only while the waiter's CPU had
/// nothing else to run, probed with a `yield_now` each batch, and only
/// without a queue behind it. With a queue, that yield cost fairness: a
/// yield that ran another thread kept the waiter off its CPU for a time
/// slice, past the end of the batch, so the holder's batch ran on (16
/// threads in a tight loop: slowest over fastest 0.85 -> 0.56). Without
/// the yield, the watch with a queue keeps the tight loop's fairness. What
/// the watch costs a lock that gains nothing from it is one measure per
/// batch: one short gap (a holder in a tight loop), or
/// `qs_gap_held_max_ns` of a lock held throughout (a long critical
/// section, or a holder that is not running).
#[derive(Debug)]
pub(crate) struct GapWatch {
    state: GapState,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum GapState {
    Observe,
    Grab,
    Off,
}

impl GapWatch {
    /// A watch for one batch; `watch`: false, or `qs_gap_count` 0, and it
    /// never watches.
    #[inline]
    pub(crate) const fn new(watch: bool) -> Self {
        Self {
            state: if TUNING.qs_gap_count == 0 || !watch {
                GapState::Off
            } else {
                GapState::Observe
            },
        }
    }

    /// Whether the waiter may still watch in this batch (`wait` has not
    /// turned it off).
    #[inline]
    pub(crate) fn watching(&self) -> bool {
        self.state != GapState::Off
    }

    /// Whether the waiter takes a lock the moment it sees it free.
    #[inline]
    pub(crate) fn grabs(&self) -> bool {
        self.state == GapState::Grab
    }

    /// Waits before the next poll, measuring the holder's gaps with
    /// `shortest_gap` first. False (at once) once the waiter does not
    /// watch: then it waits quietly instead.
    #[inline]
    pub(crate) fn wait<P: Platform>(&mut self, shortest_gap: impl FnOnce() -> Option<u64>) -> bool {
        match self.state {
            GapState::Off => false,
            GapState::Observe => {
                self.state = match shortest_gap() {
                    Some(gap) if gap >= TUNING.qs_gap_min_ns => GapState::Grab,
                    _ => GapState::Off,
                };
                self.state != GapState::Off
            }
            GapState::Grab => {
                for _ in 0..TUNING.qs_gap_grab_relaxes {
                    P::relax();
                }
                true
            }
        }
    }
}

/// Watches a held lock closely (`is_free` at every relax) for up to
/// `qs_gap_observe_ns` and returns the shortest of the first
/// `qs_gap_count` whole gaps in which it was free (from a poll that found
/// it free after one that found it held, to the next that found it held),
/// or `None` if fewer were seen or the lock stayed held for
/// `qs_gap_held_max_ns` at a stretch. It returns at the first gap shorter
/// than `qs_gap_min_ns` (the shortest can only be shorter). Without a
/// clock (`now_ns` always 0) every gap measures 0: such a waiter never
/// grabs.
pub(crate) fn shortest_free_gap<P: Platform>(is_free: impl Fn() -> bool) -> Option<u64> {
    let start = P::now_ns();
    let mut held_seen = false;
    // Since when the lock has been held, while it is.
    let mut held_since = None;
    let mut gap_start = None;
    let mut shortest = u64::MAX;
    let mut gaps = 0;
    for _ in 0..TUNING.qs_gap_observe_polls {
        let free = is_free();
        let now = P::now_ns();
        if free {
            held_since = None;
            if held_seen && gap_start.is_none() {
                gap_start = Some(now);
            }
        } else {
            held_seen = true;
            if let Some(since) = gap_start.take() {
                shortest = shortest.min(now.wrapping_sub(since));
                gaps += 1;
                // A gap too short to grab in decides already: a holder in
                // a tight loop costs the waiter one gap's watch, not three.
                if gaps >= TUNING.qs_gap_count || shortest < TUNING.qs_gap_min_ns {
                    return Some(shortest);
                }
            }
            // Held this long: long critical sections, where a waiter that
            // sleeps through the batch loses little, or a holder that is
            // not running, maybe waiting for our CPU (with a queue behind
            // the waiter, 4 in 10 watches at 16 threads in a tight loop
            // found no gap at all and spun for the whole watch).
            if now.wrapping_sub(*held_since.get_or_insert(now)) >= TUNING.qs_gap_held_max_ns {
                return None;
            }
        }
        if now.wrapping_sub(start) >= TUNING.qs_gap_observe_ns {
            break;
        }
        P::relax();
    }
    None
}
