//! [`Snapshot`]: the statistics as plain data, summed over threads.

use std::string::String;
use std::vec::Vec;

use super::counters::{self, Event, WaitEvent};
use super::histogram::TimeStats;
use crate::class::{LockKind, registry};

/// All classes' statistics at one moment; see [`snapshot`](super::snapshot).
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Snapshot {
    /// Whether statistics were being collected when it was taken.
    pub enabled: bool,
    /// Hold times are sampled on 1 in this many acquisitions per thread:
    /// the rate when the snapshot was taken. Holds recorded before a
    /// [`set_hold_sample`](super::set_hold_sample) since the last reset
    /// were sampled at the rate of their time.
    pub hold_sample: u32,
    /// Events the profiler could not count since the last reset (made from
    /// inside itself: an allocator built on an instrumented lock).
    /// Normally 0.
    pub dropped_events: u64,
    /// Every class with at least one counted event, in registration order.
    pub classes: Vec<ClassStats>,
}

/// One class's statistics.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ClassStats {
    /// The class name (for a construction-site class, `file:line:column`).
    pub name: String,
    /// Construction site, for a class named by it.
    pub site: Option<String>,
    /// The kind of lock the class was first used with.
    pub kind: Option<LockKind>,
    /// Shared acquisitions.
    pub read: AccessStats,
    /// Exclusive acquisitions (upgradable reads included).
    pub write: AccessStats,
    /// What the lock algorithms saw, for the whole class: the slow-path
    /// events are the sums of `read.events` and `write.events`.
    pub events: Events,
}

/// Statistics of one access mode of one class.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct AccessStats {
    /// Acquisitions (for a SeqLock read, reads; for RefreshOnce, calls).
    pub acquisitions: u64,
    /// Acquisitions that took the slow path, each counted when it enters
    /// it. Taken after the threads stop, never more than `acquisitions`
    /// (timed attempts that waited and gave up are in `events.timeouts`
    /// instead); taken while they run, it also counts the waiters still
    /// waiting, whose acquisitions are not counted yet, and may be more.
    pub contended: u64,
    /// Time from entering the slow path to holding the lock (contended
    /// acquisitions only).
    pub wait: TimeStats,
    /// Time from acquisition to release, on sampled acquisitions.
    pub hold: TimeStats,
    /// Sampled holds at or above the long-hold threshold
    /// ([`set_long_hold_hook`](super::set_long_hold_hook)).
    #[serde(default)]
    pub long_holds: u64,
    /// The slow-path events of this access's waiters (a reader's park
    /// counts here under `read`, a writer's under `write`).
    #[serde(default)]
    pub events: WaitEvents,
}

/// Slow-path events of one access mode of one class: what its waiters saw.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct WaitEvents {
    /// Second contenders that waited on the word without queueing
    /// (qspinlock's pending bit).
    pub pending_path: u64,
    /// Longest wait queue a waiter saw (waiters, the joiner included).
    pub queue_depth_max: u64,
    /// Batches ended by a waiter claiming the lock (bounded re-acquisition
    /// runs of the holders).
    pub batch_ends: u64,
    /// Hand-offs: the lock went to a waiter that had claimed it, or that a
    /// fair unlock chose, with no newcomer able to take it first.
    pub handoffs: u64,
    /// Steals: a spinning contender took a lock reserved for the waiter
    /// first in line, which did not come for it in time (it could not
    /// run). Many of them: threads outnumber CPUs, or waiters are
    /// preempted.
    #[serde(default)]
    pub steals: u64,
    /// Waiters that went to sleep.
    pub parks: u64,
    /// Sleepers woken with their condition met.
    pub wakes: u64,
    /// Sleepers woken without it (they slept again).
    pub spurious_wakes: u64,
    /// Timed acquisitions (`try_lock_for`, ...) that waited and gave up
    /// without the lock.
    #[serde(default)]
    pub timeouts: u64,
}

impl WaitEvents {
    fn merge(&mut self, o: &WaitEvents) {
        self.pending_path += o.pending_path;
        self.queue_depth_max = self.queue_depth_max.max(o.queue_depth_max);
        self.batch_ends += o.batch_ends;
        self.handoffs += o.handoffs;
        self.steals += o.steals;
        self.parks += o.parks;
        self.wakes += o.wakes;
        self.spurious_wakes += o.spurious_wakes;
        self.timeouts += o.timeouts;
    }
}

/// Events only the lock algorithms see, per class. The first nine (the
/// slow-path events) are the class's totals over reads and writes; each
/// access's share is in [`AccessStats::events`].
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Events {
    /// Second contenders that waited on the word without queueing
    /// (qspinlock's pending bit).
    pub pending_path: u64,
    /// Longest wait queue seen (waiters, the joiner included).
    pub queue_depth_max: u64,
    /// Batches ended by their holder (bounded re-acquisition runs).
    pub batch_ends: u64,
    /// Hand-offs to a waiter that had claimed the lock.
    pub handoffs: u64,
    /// Locks reserved for a waiter that did not come in time, taken by a
    /// spinning contender.
    #[serde(default)]
    pub steals: u64,
    /// Waiters that went to sleep.
    pub parks: u64,
    /// Sleepers woken with their condition met.
    pub wakes: u64,
    /// Sleepers woken without it (they slept again).
    pub spurious_wakes: u64,
    /// Timed acquisitions that waited and gave up without the lock.
    #[serde(default)]
    pub timeouts: u64,
    /// PerCpuRwLock reads on the reader's own slot.
    pub fast_reads: u64,
    /// PerCpuRwLock reads through the underlying lock.
    pub fallback_reads: u64,
    /// PerCpuRwLock reader-bias revocations by writers, and their cost
    /// (the fence and the wait for the readers' slots).
    pub revocations: TimeStats,
    /// Of `revocations`, those that paid the heavy fence (a `membarrier`
    /// that interrupts every CPU running the process's threads: a biased
    /// lock's); the others paid a plain full fence (a symmetric lock's).
    #[serde(default)]
    pub heavy_revocations: u64,
    /// SeqLock reads retried because a write overlapped.
    pub seqlock_retries: u64,
    /// RefreshOnce callers served by another caller's update.
    pub refresh_coalesced: u64,
    /// Sampled holds at or above the long-hold threshold, reads and writes
    /// together (each access's own: [`AccessStats::long_holds`]).
    pub long_holds: u64,
}

impl AccessStats {
    /// Contended share of the acquisitions (0 if none).
    pub fn contention(&self) -> f64 {
        ratio(self.contended, self.acquisitions)
    }

    fn merge(&mut self, other: &AccessStats) {
        self.acquisitions += other.acquisitions;
        self.contended += other.contended;
        self.wait.merge(&other.wait);
        self.hold.merge(&other.hold);
        self.long_holds += other.long_holds;
        self.events.merge(&other.events);
    }
}

impl Events {
    /// Adds one access's slow-path events to the class totals.
    fn add_waits(&mut self, w: &WaitEvents) {
        self.merge(&Events {
            pending_path: w.pending_path,
            queue_depth_max: w.queue_depth_max,
            batch_ends: w.batch_ends,
            handoffs: w.handoffs,
            steals: w.steals,
            parks: w.parks,
            wakes: w.wakes,
            spurious_wakes: w.spurious_wakes,
            timeouts: w.timeouts,
            // Merging an empty histogram (no buckets) adds nothing.
            ..Events::default()
        });
    }

    /// No events, with an empty revocation histogram (as `collect` builds
    /// them).
    fn zero() -> Events {
        Events {
            revocations: TimeStats::from_samples(&[]),
            ..Events::default()
        }
    }

    fn merge(&mut self, o: &Events) {
        self.pending_path += o.pending_path;
        self.queue_depth_max = self.queue_depth_max.max(o.queue_depth_max);
        self.batch_ends += o.batch_ends;
        self.handoffs += o.handoffs;
        self.steals += o.steals;
        self.parks += o.parks;
        self.wakes += o.wakes;
        self.spurious_wakes += o.spurious_wakes;
        self.timeouts += o.timeouts;
        self.fast_reads += o.fast_reads;
        self.fallback_reads += o.fallback_reads;
        self.revocations.merge(&o.revocations);
        self.heavy_revocations += o.heavy_revocations;
        self.seqlock_retries += o.seqlock_retries;
        self.refresh_coalesced += o.refresh_coalesced;
        self.long_holds += o.long_holds;
    }
}

impl ClassStats {
    /// Reads and writes.
    pub fn acquisitions(&self) -> u64 {
        self.read.acquisitions + self.write.acquisitions
    }

    /// Contended reads and writes.
    pub fn contended(&self) -> u64 {
        self.read.contended + self.write.contended
    }

    /// Share of acquisitions that were reads (0 if none).
    pub fn read_share(&self) -> f64 {
        ratio(self.read.acquisitions, self.acquisitions())
    }

    /// Share of acquisitions that were contended (0 if none).
    pub fn contention(&self) -> f64 {
        ratio(self.contended(), self.acquisitions())
    }

    /// Read and write hold times together.
    pub fn hold(&self) -> TimeStats {
        let mut h = self.read.hold.clone();
        h.merge(&self.write.hold);
        h
    }

    fn is_empty(&self) -> bool {
        *self
            == ClassStats {
                name: self.name.clone(),
                site: self.site.clone(),
                kind: self.kind,
                ..ClassStats::empty()
            }
    }

    fn empty() -> Self {
        let empty_time = TimeStats::from_samples(&[]);
        let access = AccessStats {
            acquisitions: 0,
            contended: 0,
            wait: empty_time.clone(),
            hold: empty_time,
            long_holds: 0,
            events: WaitEvents::default(),
        };
        ClassStats {
            read: access.clone(),
            write: access,
            events: Events::zero(),
            ..ClassStats::default()
        }
    }
}

impl Snapshot {
    /// The statistics of the class named `name` (the first, if several
    /// classes share the name).
    pub fn class(&self, name: &str) -> Option<&ClassStats> {
        self.classes.iter().find(|c| c.name == name)
    }
}

pub(crate) fn ratio(a: u64, b: u64) -> f64 {
    if b == 0 { 0.0 } else { a as f64 / b as f64 }
}

/// Sums the live blocks of the current epoch into a snapshot.
pub(crate) fn collect() -> Snapshot {
    // All before or all after a concurrent reset (see `reset_gate`).
    let _gate = counters::reset_gate();
    let infos = registry::all();
    let mut classes: Vec<Option<ClassStats>> = std::vec![None; infos.len()];
    counters::live_blocks(|b| {
        let i = b.class as usize;
        if i >= classes.len() {
            classes.resize(i + 1, None);
        }
        let c = classes[i].get_or_insert_with(ClassStats::empty);
        let load =
            |a: &core::sync::atomic::AtomicU64| a.load(core::sync::atomic::Ordering::Relaxed);
        let accesses = [&mut c.read, &mut c.write].into_iter().zip(&b.access);
        for (side, (mine, live)) in accesses.enumerate() {
            let waits = &b.wait_events[side];
            let wv = |e: WaitEvent| load(&waits[e as usize]);
            let events = WaitEvents {
                pending_path: wv(WaitEvent::PendingPath),
                queue_depth_max: load(&b.queue_depth_max[side]),
                batch_ends: wv(WaitEvent::BatchEnd),
                handoffs: wv(WaitEvent::Handoff),
                steals: wv(WaitEvent::Steal),
                parks: wv(WaitEvent::Park),
                wakes: wv(WaitEvent::Wake),
                spurious_wakes: wv(WaitEvent::SpuriousWake),
                timeouts: wv(WaitEvent::TimedOut),
            };
            c.events.add_waits(&events);
            let long_holds = wv(WaitEvent::LongHold);
            c.events.long_holds += long_holds;
            mine.merge(&AccessStats {
                acquisitions: load(&live.acquisitions),
                // A timed attempt that gave up was counted contended
                // when it began to wait, in this same block.
                contended: load(&live.contended).saturating_sub(events.timeouts),
                wait: live.wait.read(),
                hold: live.hold.read(),
                long_holds,
                events,
            });
        }
        let ev = |e: Event| load(&b.events[e as usize]);
        c.events.merge(&Events {
            fast_reads: ev(Event::FastRead),
            fallback_reads: ev(Event::FallbackRead),
            revocations: b.revocations.read(),
            heavy_revocations: ev(Event::HeavyRevocation),
            seqlock_retries: ev(Event::SeqlockRetry),
            refresh_coalesced: ev(Event::RefreshCoalesced),
            ..Events::default()
        });
    });
    // Uncontended acquisitions and fast reads of the first classes are
    // counted apart from the blocks (see the counters' "uncontended path").
    counters::fast_counts_since_reset(|class, counts| {
        let i = class as usize;
        if i >= classes.len() {
            classes.resize(i + 1, None);
        }
        let c = classes[i].get_or_insert_with(ClassStats::empty);
        // An uncontended per-CPU read is counted once, by its path.
        c.read.acquisitions += counts[counters::FAST_READS]
            + counts[counters::FAST_PERCPU_READS]
            + counts[counters::FAST_FALLBACK_READS];
        c.write.acquisitions += counts[counters::FAST_WRITES];
        c.events.fast_reads += counts[counters::FAST_PERCPU_READS];
        c.events.fallback_reads += counts[counters::FAST_FALLBACK_READS];
    });
    let infos = registry::all();
    let classes = classes
        .into_iter()
        .enumerate()
        .filter_map(|(i, c)| {
            let mut c = c?;
            let info = infos.get(i)?;
            c.name = info.name.into();
            c.site = info.site_string();
            c.kind = Some(info.kind);
            (!c.is_empty()).then_some(c)
        })
        .collect();
    Snapshot {
        enabled: super::is_enabled(),
        hold_sample: super::hold_sample(),
        dropped_events: counters::DROPPED.load(core::sync::atomic::Ordering::Relaxed),
        classes,
    }
}
