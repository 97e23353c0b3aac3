//! Lock statistics (feature `stats`): Linux's lock_stat, per lock class.
//!
//! Per [class](crate::LockClass) and per read/write: acquisitions,
//! contended acquisitions, wait and hold times (total, max, log2 histogram
//! with p50/p99), and what only these locks' algorithms see: pending-path
//! hits, queue depth, batch ends, hand-offs and steals (a reserved lock
//! taken from a waiter that could not run), parks and wakes (spurious
//! too), per-CPU fast vs fallback reads, revocations and their cost (fence
//! and slot wait; how many paid the heavy fence), SeqLock retries,
//! RefreshOnce callers served by another's update.
//!
//! ```
//! use scalelock::{ClassRef, LockClass, SeqLock, stats};
//!
//! static VTIME: LockClass = LockClass::new("vtime");
//! let lock: SeqLock<u64> = SeqLock::with_class(0, ClassRef::of(&VTIME));
//!
//! stats::enable();
//! lock.write(1);
//! assert_eq!(lock.read(), 1);
//! let snap = stats::snapshot();
//! let vtime = snap.class("vtime").unwrap();
//! assert_eq!((vtime.read.acquisitions, vtime.write.acquisitions), (1, 1));
//! println!("{snap}"); // the lock_stat-style table
//! for advice in stats::advise(&snap) {
//!     println!("{advice}");
//! }
//! ```
//!
//! # Switching and cost
//! Collection is off until [`enable`]; while off, each acquisition pays one
//! Relaxed load of a flag that is never written while running (see
//! [`hook`](crate::hook) for the exact cost model). On, counts go to
//! per-thread blocks (no shared cache line, see the counters' design in
//! the source).
//!
//! # What is exact and what is sampled
//! - **Counts are exact**: acquisitions, contended acquisitions, fast and
//!   fallback reads, every slow-path event. An uncontended acquisition
//!   costs a thread-local load, one counter store in the thread's own
//!   counters and a countdown, no clock read.
//! - **Wait times are exact**: every contended acquisition reads the clock
//!   when it enters its slow path and when it gets the lock (it waits
//!   anyway, so the clock read hides in the wait).
//! - **Hold times are sampled**: the clock is read at acquisition and at
//!   release on 1 in [`hold_sample`] acquisitions per thread (a per-thread
//!   countdown, which reads the rate when it runs out; [`DEFAULT_HOLD_SAMPLE`]
//!   unless [`set_hold_sample`] says otherwise), because a clock read costs several uncontended lock
//!   operations. The hold histogram's `count` is the number of sampled
//!   holds. The sample is systematic: every N-th acquisition of the
//!   thread, over all its classes and both access modes. So a thread that
//!   takes locks in a fixed cycle whose length shares a factor with N
//!   (lock A then lock B, or a read then a write, with N even) samples
//!   some of them on every turn and others never: their `hold` counts and
//!   percentiles are not 1 in N of theirs. The default rate is a prime so
//!   that only cycles of a multiple of it do that; pick a prime, or 1, for
//!   another rate. Set the rate to 1 to time every hold, e.g. to catch
//!   every long hold or to test exact histograms.
//!
//! A snapshot taken while threads run may lag by the events in flight (a
//! thread waiting for a lock is already counted contended, its acquisition
//! not yet: contended acquisitions can then outnumber acquisitions);
//! taken after they stop it is exact. [`reset`] zeroes everything; a
//! snapshot taken while another thread resets sees the counts all before
//! or all after the reset. An operation in flight at a reset is counted
//! partly in each: a hold acquired before it and released after is
//! recorded after it without its acquisition, so just after a reset a
//! class's sampled holds can outnumber its acquisitions by the holds then
//! in flight (likewise a wait begun before it).
//!
//! # Hold times and lock_api guards
//! The acquisition's sample start travels in the lock_api 0.5 guard state
//! ([`hook::Held`](crate::hook::Held)), so a guard that is forgotten never
//! records a hold; one released on another thread records it there.

pub mod advisor;
pub(crate) mod clock;
pub(crate) mod counters;
mod histogram;
mod snapshot;
use crate::sys_vec;
mod table;

use core::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::string::String;
use std::sync::{PoisonError, RwLock};

pub use self::advisor::{Advice, Figure, Recommendation, Unit, advise};
pub use self::histogram::{BUCKETS, TimeStats, bucket_of, bucket_range};
pub use self::snapshot::{AccessStats, ClassStats, Events, Snapshot, WaitEvents};
use crate::class::{Access, LockKind, registry};
use crate::hook::active;

/// Hold times are sampled on 1 in this many acquisitions per thread, until
/// [`set_hold_sample`] says otherwise. A sampled hold reads the clock twice
/// (a `clock_gettime` each, slower still on VMs without a stable TSC) and
/// records a histogram entry: together about as much as counting a hundred
/// uncontended acquisitions. About 1 in 256 keeps the sampling a fraction
/// of the counting cost while a lock taken many thousands of times a
/// second still gets a histogram of many holds; set 1 to time every hold
/// (to catch every long hold). A prime, 257 rather than 256: the sample is
/// every N-th acquisition of a thread, and with an even N a thread that
/// takes two locks (or a read and a write) in turn timed only one of them.
/// `benches/stats_overhead.rs` (env `HOLD_SAMPLE`) measures the enabled
/// overhead at any rate.
pub const DEFAULT_HOLD_SAMPLE: u32 = 257;

static HOLD_SAMPLE: AtomicU32 = AtomicU32::new(DEFAULT_HOLD_SAMPLE);
/// Holds at least this long (ns) are long; `u64::MAX`: none.
static LONG_HOLD_NS: AtomicU64 = AtomicU64::new(u64::MAX);
/// The hook and the threshold it was given, together: a release that read
/// the old `LONG_HOLD_NS` while a new hook was set calls the new hook only
/// for holds at its own threshold.
static LONG_HOLD_HOOK: RwLock<(Option<LongHoldHook>, u64)> = RwLock::new((None, u64::MAX));

/// A long-hold hook, as [`set_long_hold_hook`] takes it.
type LongHoldHook = fn(&LongHold);

/// Starts collecting statistics (process-wide).
pub fn enable() {
    active::set(active::STATS, true);
}

/// Stops collecting; what was collected stays until [`reset`].
pub fn disable() {
    active::set(active::STATS, false);
}

/// Whether statistics are being collected.
pub fn is_enabled() -> bool {
    active::load() & active::STATS != 0
}

/// Zeroes every count (a new epoch: blocks of other threads are zeroed by
/// their owners, never written from here). A concurrent [`snapshot`] sees
/// the counts all before or all after it.
pub fn reset() {
    counters::reset();
}

/// The statistics of every class with at least one event since the last
/// [`reset`], summed over threads.
pub fn snapshot() -> Snapshot {
    snapshot::collect()
}

/// Samples hold times on 1 in `every` acquisitions per thread (1: every
/// acquisition; 0 is taken as 1): of any `k * every` consecutive
/// acquisitions of a thread, exactly `k` are timed.
///
/// Each thread counts down to its next sampled hold and reads the rate only
/// then, so that unsampled acquisitions touch nothing shared. The new rate
/// therefore applies:
/// - on the calling thread, at once: its next acquisition is sampled, and
///   every `every`-th one after it;
/// - on a thread that has not counted an acquisition yet, at once (its
///   first acquisition is sampled);
/// - on any other thread, from its next sampled hold on: it first finishes
///   the countdown it is in, at most the old rate's acquisitions.
///
/// To time every hold from a known point in a multi-threaded program, set
/// the rate before starting the threads (or on each of them). The sample
/// is every `every`-th acquisition of a thread over all its locks: a prime
/// rate (or 1) keeps a thread that takes a few locks in turn from timing
/// only some of them (see "What is exact and what is sampled").
pub fn set_hold_sample(every: u32) {
    HOLD_SAMPLE.store(every.max(1), Ordering::Relaxed);
    counters::restart_sampling();
}

/// The hold-time sampling rate; see [`set_hold_sample`].
#[inline]
pub fn hold_sample() -> u32 {
    HOLD_SAMPLE.load(Ordering::Relaxed)
}

/// A hold at least as long as the threshold of [`set_long_hold_hook`].
#[derive(Clone, Debug)]
pub struct LongHold {
    /// The lock's class.
    pub class: &'static str,
    /// Its construction site, for a class named by it.
    pub site: Option<String>,
    /// The kind of lock.
    pub kind: LockKind,
    /// Whether it was held for reading.
    pub read: bool,
    /// How long it was held, in ns.
    pub hold_ns: u64,
}

impl core::fmt::Display for LongHold {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(
            f,
            "long hold: {} ({}, {}) held {} for {}",
            self.class,
            self.kind,
            self.site.as_deref().unwrap_or("no site"),
            if self.read {
                "for reading"
            } else {
                "for writing"
            },
            table::Ns(self.hold_ns),
        )
    }
}

/// Calls `hook` on the releasing thread, after the release, for every
/// sampled hold of at least `threshold_ns` (each is also counted in
/// [`Events::long_holds`]); `None` removes the hook (holds are still
/// counted). Only sampled holds are seen: [`set_hold_sample`]`(1)` to see
/// them all. `threshold_ns = u64::MAX` turns detection off (the default).
///
/// A panic from `hook` reaches the code that released the lock (the
/// guard's drop), except while that thread is already unwinding from
/// another panic (a guard dropped on the way out): then it is caught and
/// dropped, where it would otherwise abort the process.
pub fn set_long_hold_hook(threshold_ns: u64, hook: Option<fn(&LongHold)>) {
    *LONG_HOLD_HOOK
        .write()
        .unwrap_or_else(PoisonError::into_inner) = (hook, threshold_ns);
    LONG_HOLD_NS.store(threshold_ns, Ordering::Relaxed);
}

#[inline]
pub(crate) fn long_hold_threshold() -> u64 {
    LONG_HOLD_NS.load(Ordering::Relaxed)
}

#[cold]
pub(crate) fn report_long_hold(class: u32, access: Access, hold_ns: u64) {
    let (hook, threshold) = *LONG_HOLD_HOOK
        .read()
        .unwrap_or_else(PoisonError::into_inner);
    // The caller judged the hold by the threshold it read; a hook set since
    // sees only holds at the threshold it was given.
    if let Some(hook) = hook.filter(|_| hold_ns >= threshold) {
        let info = registry::info(class);
        let long = LongHold {
            class: info.name,
            site: info.site_string(),
            kind: info.kind,
            read: access.is_read(),
            hold_ns,
        };
        if std::thread::panicking() {
            // A guard dropped while its thread unwinds: a second panic
            // from the hook here would abort the process. Caught and
            // dropped (the panic hook has printed it).
            let _ = std::panic::catch_unwind(core::panic::AssertUnwindSafe(|| hook(&long)));
        } else {
            hook(&long);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    static CALLS: AtomicU64 = AtomicU64::new(0);

    fn count_call(_: &LongHold) {
        CALLS.fetch_add(1, Ordering::Relaxed);
    }

    /// A release that read a lower threshold than the hook's (the hook and
    /// threshold were set between its read and its report) does not call
    /// the hook with a hold below the hook's own threshold.
    #[test]
    fn a_hook_sees_only_holds_at_its_own_threshold() {
        use crate::class::{ClassRef, LockClass, LockKind};
        static C: LockClass = LockClass::new("long-hold-threshold");
        let class = ClassRef::of(&C).resolve(LockKind::QSpinLock).index;
        set_long_hold_hook(1_000_000_000, Some(count_call));
        // Judged long by a threshold of 1 ms read before the hook was set.
        report_long_hold(class, Access::Write, 2_000_000);
        assert_eq!(
            CALLS.load(Ordering::Relaxed),
            0,
            "a 2 ms hold reached a 1 s hook"
        );
        report_long_hold(class, Access::Write, 1_000_000_000);
        assert_eq!(CALLS.load(Ordering::Relaxed), 1);
        set_long_hold_hook(u64::MAX, None);
    }
}
