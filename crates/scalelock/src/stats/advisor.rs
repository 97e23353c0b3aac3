//! The advisor: which lock should each class be?
//!
//! [`advise`] gives one [`Advice`] per class of a [`Snapshot`]: a
//! [`Recommendation`], the reason in words, and the figures behind it, each
//! next to the threshold it was compared with. The first rule that matches
//! decides, in this order:
//!
//! 1. Fewer than [`MIN_ACQUISITIONS`]: not enough data.
//! 2. Holds with a long tail ([`LONG_HOLD_P99_NS`], [`HOLD_TAIL_RATIO`],
//!    from at least [`MIN_SAMPLED_HOLDS`] sampled holds) while waiters park ([`MIN_PARK_SHARE`]) and the lock is contended
//!    ([`MIN_CONTENTION`]): holders are descheduled or sleep inside the
//!    critical section; no lock type fixes that.
//! 3. A PerCpuRwLock class whose writes exceed [`PERCPU_MAX_WRITE_SHARE`]
//!    and which revokes: the revocations cost more than per-CPU reads save:
//!    QRwLock.
//! 4. A reader-writer class with reads at or above [`PERCPU_READ_SHARE`]
//!    whose readers contend ([`MIN_READ_CONTENTION`]): PerCpuRwLock.
//! 5. Contention below [`MIN_CONTENTION`]: keep the lock.
//! 6. A reader-writer class with reads at or below [`MUTEX_MAX_READ_SHARE`]
//!    and short holds ([`SHORT_HOLD_NS`], median of at least
//!    [`MIN_SAMPLED_HOLDS`] sampled holds): readers rarely overlap,
//!    an rwlock buys nothing over QSpinLock.
//! 7. A SeqLock whose reads retry at or above [`SEQLOCK_MAX_RETRY_SHARE`]:
//!    writes are too frequent for optimistic readers: QRwLock.
//! 8. Otherwise keep it (contended, but no other lock type would do better:
//!    shorten or split the critical sections).
//!
//! # Thresholds
//! The thresholds are conservative starting values, each a named constant
//! whose documentation says which benchmark calibrates it; they are not
//! measurements. The hold percentiles they are compared with are the upper
//! bounds of log2 buckets (capped by the maximum), so the time thresholds
//! sit on bucket edges: [`SHORT_HOLD_NS`] at the top of a bucket (a median
//! at or below it is exactly one whose bucket ends there or lower),
//! [`LONG_HOLD_P99_NS`] at the bottom of one (a p99 at or above it is
//! exactly one whose bucket starts there or higher). A threshold inside a
//! bucket would be crossed by a percentile anywhere in that bucket. For
//! the same reason the tail ratio ([`HOLD_TAIL_RATIO`]) is taken between
//! buckets, at its smallest: the bottom of the p99's bucket over the top
//! of the median's, so it is met only if every p99 and median those
//! buckets allow are that far apart. Reader-reader cache-line traffic on a shared rwlock word is
//! not contention a lock can count (the fast path succeeds, slowly), so a
//! read-mostly class may gain from PerCpuRwLock before rule 4 fires;
//! `locktest bench` shows it.

use std::string::{String, ToString};
use std::vec::Vec;

use super::histogram::{TimeStats, bucket_of, bucket_range};
use super::snapshot::{ClassStats, Snapshot, ratio};
use super::table::Ns;
use crate::class::LockKind;

/// Fewer acquisitions than this in a class are too few to advise on. Not a
/// performance threshold: below it, a 1% share is a handful of events.
pub const MIN_ACQUISITIONS: u64 = 1_000;

/// Fewer sampled holds than this are too few for the hold rules (2 and 6):
/// the p99 of a handful of samples is their largest. Not a performance
/// threshold. Holds are sampled 1 in [`hold_sample`](super::hold_sample)
/// acquisitions per thread, so a class needs about this many times that
/// many acquisitions before its holds are judged.
pub const MIN_SAMPLED_HOLDS: u64 = 100;

/// Contended share below which changing the lock type cannot buy much: the
/// uncontended costs of QSpinLock, QRwLock and PerCpuRwLock reads differ by
/// nanoseconds. Calibrate with `cargo bench -p scalelock --bench qspinlock`
/// (1 vs 2 threads).
pub const MIN_CONTENTION: f64 = 0.01;

/// Contended share of *reads* from which readers are said to contend (a
/// read-mostly lock contends only when a writer is around, so this is lower
/// than [`MIN_CONTENTION`]). Calibrate with `cargo bench -p scalelock
/// --bench qrwlock` (95%+ reads).
pub const MIN_READ_CONTENTION: f64 = 0.001;

/// Read share from which a PerCpuRwLock pays: each write after reads
/// revokes the reader bias (an asymmetric fence and a scan of the reader
/// slots), so writes must be rare. Calibrate with `cargo bench -p scalelock
/// --bench percpu_rwlock` (its write-percentage sections, against QRwLock).
pub const PERCPU_READ_SHARE: f64 = 0.99;

/// Write share above which a PerCpuRwLock's revocations cost more than its
/// reads save: QRwLock instead. Calibrate with `cargo bench -p scalelock
/// --bench percpu_rwlock` (5% and 50% writes).
pub const PERCPU_MAX_WRITE_SHARE: f64 = 0.05;

/// Read share at or below which, with short holds, an rwlock buys nothing
/// over a mutex: readers rarely run side by side and the rwlock's extra
/// state costs on every operation. Calibrate with `cargo bench -p scalelock
/// --bench qrwlock` (50% reads) against `--bench qspinlock`.
pub const MUTEX_MAX_READ_SHARE: f64 = 0.75;

/// Median hold (ns) at or below which critical sections are short: letting
/// readers overlap saves less than the rwlock costs. Calibrate with the
/// qrwlock and qspinlock benches at their critical-section lengths. About
/// 1 us: the top of the `[512, 1023]` ns bucket (see "Thresholds"; at
/// 1000, any median from 512 ns on read as 1023 ns, over the threshold).
pub const SHORT_HOLD_NS: u64 = (1 << 10) - 1;

/// 99th-percentile hold (ns) from which some holders are not running while
/// they hold the lock: far above a critical section that runs straight
/// through, below a scheduler time slice (milliseconds). Calibrate with
/// `locktest scenario` runs with more threads than CPUs. About 131 us: the
/// bottom of the `[2^17, 2^18)` ns bucket (see "Thresholds"; at 100 us, any
/// p99 from 65.5 us on read as 131 us once a longer hold was seen).
pub const LONG_HOLD_P99_NS: u64 = 1 << 17;

/// p99/p50 hold ratio from which the long holds are a tail (some holders
/// descheduled), not uniformly long critical sections. Compared with the
/// smallest ratio the two percentiles' log2 buckets allow (see
/// "Thresholds").
pub const HOLD_TAIL_RATIO: u64 = 20;

/// The smallest p99/p50 ratio of `hold` its buckets allow: the bottom of
/// the p99's bucket over the top of the median's (at least 1 ns).
fn tail_ratio_floor(hold: &TimeStats) -> u64 {
    let p99_low = bucket_range(bucket_of(hold.p99_ns)).0;
    let p50_high = bucket_range(bucket_of(hold.p50_ns)).1.max(1);
    p99_low / p50_high
}

/// Parks per contended acquisition from which waiters are sleeping rather
/// than spinning out the holds.
pub const MIN_PARK_SHARE: f64 = 0.10;

/// SeqLock retries per read from which readers waste too much work
/// re-reading: writes are too frequent for optimistic reads. Calibrate with
/// `cargo bench -p scalelock --bench refresh` / the seqlock stress test.
pub const SEQLOCK_MAX_RETRY_SHARE: f64 = 0.10;

/// What the advisor recommends for a class.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum Recommendation {
    /// Too few acquisitions to tell.
    NotEnoughData,
    /// The lock suits its use.
    Keep,
    /// Use a [`PerCpuRwLock`](crate::PerCpuRwLock).
    PerCpuRwLock,
    /// Use a [`QRwLock`](crate::QRwLock).
    QRwLock,
    /// Use a [`QSpinLock`](crate::QSpinLock).
    QSpinLock,
    /// The lock type is not the problem: holders are descheduled or sleep
    /// inside the critical section.
    FixLongHolds,
}

impl Recommendation {
    /// A short phrase for the recommendation.
    pub fn phrase(self) -> &'static str {
        match self {
            Recommendation::NotEnoughData => "not enough data",
            Recommendation::Keep => "keep it",
            Recommendation::PerCpuRwLock => "use PerCpuRwLock",
            Recommendation::QRwLock => "use QRwLock",
            Recommendation::QSpinLock => "use QSpinLock",
            Recommendation::FixLongHolds => "fix the long holds",
        }
    }
}

/// How a figure is expressed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum Unit {
    /// A fraction, shown as a percentage.
    Share,
    /// Nanoseconds.
    Ns,
    /// A plain number.
    Count,
}

/// A figure behind an advice, with the threshold it was compared with.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Figure {
    /// What it is ("read share", "hold p99").
    pub name: String,
    /// Its value in `unit`.
    pub value: f64,
    /// How to read `value`.
    pub unit: Unit,
    /// The named constant it was compared with, the comparison (`>=`,
    /// `<`, ...) and the constant's value, if a rule compared it.
    pub threshold: Option<(String, String, f64)>,
}

/// One recommendation for one class.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Advice {
    /// The class.
    pub class: String,
    /// Its lock type.
    pub kind: Option<LockKind>,
    /// What to do.
    pub recommendation: Recommendation,
    /// Why, in words.
    pub reason: String,
    /// The figures behind it.
    pub figures: Vec<Figure>,
}

fn show(value: f64, unit: Unit) -> String {
    match unit {
        Unit::Share => std::format!("{:.1}%", value * 100.0),
        Unit::Ns => Ns(value as u64).to_string(),
        Unit::Count => std::format!("{value}"),
    }
}

impl core::fmt::Display for Figure {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "{} {}", self.name, show(self.value, self.unit))?;
        if let Some((name, rel, v)) = &self.threshold {
            write!(f, " ({name}: {rel} {})", show(*v, self.unit))?;
        }
        Ok(())
    }
}

impl core::fmt::Display for Advice {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(
            f,
            "{} ({}): {}: {}",
            self.class,
            self.kind.map_or("?", |k| k.name()),
            self.recommendation.phrase(),
            self.reason
        )?;
        for (i, fig) in self.figures.iter().enumerate() {
            f.write_str(if i == 0 { " [" } else { "; " })?;
            write!(f, "{fig}")?;
        }
        if !self.figures.is_empty() {
            f.write_str("]")?;
        }
        Ok(())
    }
}

/// Collects figures for one class's advice.
struct Figures(Vec<Figure>);

impl Figures {
    fn plain(&mut self, name: &str, value: f64, unit: Unit) {
        self.0.push(Figure {
            name: name.into(),
            value,
            unit,
            threshold: None,
        });
    }

    fn vs(&mut self, name: &str, value: f64, unit: Unit, rel: &str, constant: &str, t: f64) {
        self.0.push(Figure {
            name: name.into(),
            value,
            unit,
            threshold: Some((constant.into(), rel.into(), t)),
        });
    }
}

fn is_rwlock(c: &ClassStats) -> bool {
    matches!(c.kind, Some(LockKind::QRwLock | LockKind::PerCpuRwLock))
        || (!matches!(c.kind, Some(LockKind::SeqLock | LockKind::RefreshOnce))
            && c.read.acquisitions != 0
            && c.write.acquisitions != 0)
}

/// One recommendation per class of `snapshot`, in its order.
pub fn advise(snapshot: &Snapshot) -> Vec<Advice> {
    snapshot.classes.iter().map(advise_class).collect()
}

fn advise_class(c: &ClassStats) -> Advice {
    let (recommendation, reason, figures) = rule(c);
    Advice {
        class: c.name.clone(),
        kind: c.kind,
        recommendation,
        reason,
        figures: figures.0,
    }
}

fn rule(c: &ClassStats) -> (Recommendation, String, Figures) {
    use Recommendation as R;
    let mut f = Figures(Vec::new());
    let acq = c.acquisitions();
    if acq < MIN_ACQUISITIONS {
        f.vs(
            "acquisitions",
            acq as f64,
            Unit::Count,
            "<",
            "MIN_ACQUISITIONS",
            MIN_ACQUISITIONS as f64,
        );
        return (R::NotEnoughData, "too few acquisitions to judge".into(), f);
    }
    let contention = c.contention();
    let hold = c.hold();
    let parks = ratio(c.events.parks, c.contended());

    // 2. Hold tails from holders that do not run.
    let enough_holds = hold.count >= MIN_SAMPLED_HOLDS;
    if contention >= MIN_CONTENTION
        && enough_holds
        && hold.p99_ns >= LONG_HOLD_P99_NS
        && tail_ratio_floor(&hold) >= HOLD_TAIL_RATIO
        && parks >= MIN_PARK_SHARE
    {
        f.vs(
            "hold p99",
            hold.p99_ns as f64,
            Unit::Ns,
            ">=",
            "LONG_HOLD_P99_NS",
            LONG_HOLD_P99_NS as f64,
        );
        f.vs(
            "hold p99/p50 (at least)",
            tail_ratio_floor(&hold) as f64,
            Unit::Count,
            ">=",
            "HOLD_TAIL_RATIO",
            HOLD_TAIL_RATIO as f64,
        );
        f.vs(
            "parks per contended acquisition",
            parks,
            Unit::Share,
            ">=",
            "MIN_PARK_SHARE",
            MIN_PARK_SHARE,
        );
        f.vs(
            "contended",
            contention,
            Unit::Share,
            ">=",
            "MIN_CONTENTION",
            MIN_CONTENTION,
        );
        return (
            R::FixLongHolds,
            "a tail of long holds while waiters sleep: holders are preempted or block inside \
             the critical section; no lock type fixes that. Move blocking work out of the \
             lock, or run fewer busy threads than CPUs"
                .into(),
            f,
        );
    }

    let read_share = c.read_share();
    // The writes' own ratio: `1.0 - read_share` is not exact in floating
    // point (0.95 reads left 0.050000000000000044 writes, over a 5%
    // threshold that exactly 5% writes must not pass).
    let write_share = ratio(c.write.acquisitions, acq);

    // 3. PerCpuRwLock with too many writes.
    if c.kind == Some(LockKind::PerCpuRwLock)
        && write_share > PERCPU_MAX_WRITE_SHARE
        && c.events.revocations.count != 0
    {
        f.vs(
            "write share",
            write_share,
            Unit::Share,
            ">",
            "PERCPU_MAX_WRITE_SHARE",
            PERCPU_MAX_WRITE_SHARE,
        );
        f.plain(
            "revocations",
            c.events.revocations.count as f64,
            Unit::Count,
        );
        f.plain(
            "revocation mean cost",
            c.events.revocations.mean_ns() as f64,
            Unit::Ns,
        );
        f.plain(
            "revocations with a heavy fence",
            c.events.heavy_revocations as f64,
            Unit::Count,
        );
        return (
            R::QRwLock,
            "writes are too frequent for per-CPU reads: every write after reads pays a \
             revocation (fence and reader-slot scan)"
                .into(),
            f,
        );
    }

    // 4. Read-mostly with contending readers.
    let read_contention = c.read.contention();
    if is_rwlock(c)
        && c.kind != Some(LockKind::PerCpuRwLock)
        && read_share >= PERCPU_READ_SHARE
        && read_contention >= MIN_READ_CONTENTION
    {
        f.vs(
            "read share",
            read_share,
            Unit::Share,
            ">=",
            "PERCPU_READ_SHARE",
            PERCPU_READ_SHARE,
        );
        f.vs(
            "contended reads",
            read_contention,
            Unit::Share,
            ">=",
            "MIN_READ_CONTENTION",
            MIN_READ_CONTENTION,
        );
        return (
            R::PerCpuRwLock,
            "almost only reads, and readers contend: per-CPU reads write no shared cache line"
                .into(),
            f,
        );
    }

    // 5. Uncontended.
    if contention < MIN_CONTENTION {
        f.vs(
            "contended",
            contention,
            Unit::Share,
            "<",
            "MIN_CONTENTION",
            MIN_CONTENTION,
        );
        return (
            R::Keep,
            "rarely contended: another lock type would not change much".into(),
            f,
        );
    }

    // 6. An rwlock whose readers rarely overlap.
    if is_rwlock(c)
        && read_share <= MUTEX_MAX_READ_SHARE
        && enough_holds
        && hold.p50_ns <= SHORT_HOLD_NS
    {
        f.vs(
            "read share",
            read_share,
            Unit::Share,
            "<=",
            "MUTEX_MAX_READ_SHARE",
            MUTEX_MAX_READ_SHARE,
        );
        f.vs(
            "hold p50",
            hold.p50_ns as f64,
            Unit::Ns,
            "<=",
            "SHORT_HOLD_NS",
            SHORT_HOLD_NS as f64,
        );
        f.plain("contended", contention, Unit::Share);
        return (
            R::QSpinLock,
            "reads are not dominant and critical sections are short: an rwlock buys nothing \
             over QSpinLock"
                .into(),
            f,
        );
    }

    // 7. SeqLock readers retrying too often.
    let retries = ratio(c.events.seqlock_retries, c.read.acquisitions);
    if c.kind == Some(LockKind::SeqLock) && retries >= SEQLOCK_MAX_RETRY_SHARE {
        f.vs(
            "retries per read",
            retries,
            Unit::Share,
            ">=",
            "SEQLOCK_MAX_RETRY_SHARE",
            SEQLOCK_MAX_RETRY_SHARE,
        );
        f.plain("write share", write_share, Unit::Share);
        return (
            R::QRwLock,
            "writes are too frequent for optimistic readers: they keep retrying".into(),
            f,
        );
    }

    // 8. Contended, but no other type would do better.
    f.vs(
        "contended",
        contention,
        Unit::Share,
        ">=",
        "MIN_CONTENTION",
        MIN_CONTENTION,
    );
    f.plain("read share", read_share, Unit::Share);
    if enough_holds {
        f.plain("hold p50", hold.p50_ns as f64, Unit::Ns);
    } else {
        f.vs(
            "sampled holds",
            hold.count as f64,
            Unit::Count,
            "<",
            "MIN_SAMPLED_HOLDS",
            MIN_SAMPLED_HOLDS as f64,
        );
    }
    (
        R::Keep,
        "contended, but no other lock type fits better: shorten the critical sections or \
         split the data"
            .into(),
        f,
    )
}
