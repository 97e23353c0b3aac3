//! [`Snapshot`]: the statistics as plain data, summed over threads.

use std::string::String;
use std::vec::Vec;

use super::counters::{self, Event};
use super::histogram::TimeStats;
use crate::class::{LockKind, registry};

/// All classes' statistics at one moment; see [`snapshot`](super::snapshot).
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Snapshot {
    /// Whether statistics were being collected when it was taken.
    pub enabled: bool,
    /// Hold times are sampled on 1 in this many acquisitions per thread.
    pub hold_sample: u32,
    /// Events the profiler could not count (made from inside itself: an
    /// allocator built on an instrumented lock). Normally 0.
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
    /// Exclusive acquisitions.
    pub write: AccessStats,
    /// What the lock algorithms saw.
    pub events: Events,
}

/// Statistics of one access mode of one class.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct AccessStats {
    /// Acquisitions (for a SeqLock read, reads; for RefreshOnce, calls).
    pub acquisitions: u64,
    /// Acquisitions that took the slow path.
    pub contended: u64,
    /// Time from entering the slow path to holding the lock (contended
    /// acquisitions only).
    pub wait: TimeStats,
    /// Time from acquisition to release, on sampled acquisitions.
    pub hold: TimeStats,
}

/// Events only the lock algorithms see.
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
    /// Waiters that went to sleep.
    pub parks: u64,
    /// Sleepers woken with their condition met.
    pub wakes: u64,
    /// Sleepers woken without it (they slept again).
    pub spurious_wakes: u64,
    /// PerCpuRwLock reads on the reader's own slot.
    pub fast_reads: u64,
    /// PerCpuRwLock reads through the underlying lock.
    pub fallback_reads: u64,
    /// PerCpuRwLock reader-bias revocations by writers, and their cost.
    pub revocations: TimeStats,
    /// SeqLock reads retried because a write overlapped.
    pub seqlock_retries: u64,
    /// RefreshOnce callers served by another caller's update.
    pub refresh_coalesced: u64,
    /// Sampled holds at or above the long-hold threshold.
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
    }
}

impl Events {
    fn merge(&mut self, o: &Events) {
        self.pending_path += o.pending_path;
        self.queue_depth_max = self.queue_depth_max.max(o.queue_depth_max);
        self.batch_ends += o.batch_ends;
        self.handoffs += o.handoffs;
        self.parks += o.parks;
        self.wakes += o.wakes;
        self.spurious_wakes += o.spurious_wakes;
        self.fast_reads += o.fast_reads;
        self.fallback_reads += o.fallback_reads;
        self.revocations.merge(&o.revocations);
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
            hold: empty_time.clone(),
        };
        ClassStats {
            read: access.clone(),
            write: access,
            events: Events {
                revocations: empty_time,
                ..Events::default()
            },
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
        for (mine, live) in [&mut c.read, &mut c.write].into_iter().zip(&b.access) {
            mine.merge(&AccessStats {
                acquisitions: load(&live.acquisitions),
                contended: load(&live.contended),
                wait: live.wait.read(),
                hold: live.hold.read(),
            });
        }
        let ev = |e: Event| load(&b.events[e as usize]);
        c.events.merge(&Events {
            pending_path: ev(Event::PendingPath),
            queue_depth_max: load(&b.queue_depth_max),
            batch_ends: ev(Event::BatchEnd),
            handoffs: ev(Event::Handoff),
            parks: ev(Event::Park),
            wakes: ev(Event::Wake),
            spurious_wakes: ev(Event::SpuriousWake),
            fast_reads: ev(Event::FastRead),
            fallback_reads: ev(Event::FallbackRead),
            revocations: b.revocations.read(),
            seqlock_retries: ev(Event::SeqlockRetry),
            refresh_coalesced: ev(Event::RefreshCoalesced),
            long_holds: ev(Event::LongHold),
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
        c.read.acquisitions += counts[counters::FAST_READS];
        c.write.acquisitions += counts[counters::FAST_WRITES];
        c.events.fast_reads += counts[counters::FAST_PERCPU_READS];
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
