//! Log2 time histograms: the live per-thread form and the snapshot summary
//! ([`TimeStats`]) with its percentiles.
//!
//! Bucket 0 counts durations of 0 ns, bucket 1 of 1 ns, and bucket `i`
//! (`1 <= i < BUCKETS - 1`) durations in `[2^(i-1), 2^i)` ns; the last bucket
//! takes everything from `2^(BUCKETS - 2)` ns (about 4.6 minutes) up.
//! Percentiles are the upper bound of the bucket the rank falls in (capped
//! by the maximum seen), so they are within a factor of 2 above the truth,
//! never below it.

use core::sync::atomic::{AtomicU64, Ordering};
use std::vec::Vec;

/// Buckets of a histogram.
pub const BUCKETS: usize = 40;

/// The bucket a duration of `ns` nanoseconds falls in.
#[inline]
pub const fn bucket_of(ns: u64) -> usize {
    let b = (64 - ns.leading_zeros()) as usize;
    if b < BUCKETS { b } else { BUCKETS - 1 }
}

/// The smallest and largest duration (ns) bucket `i` counts; the last
/// bucket's largest is `u64::MAX`.
pub const fn bucket_range(i: usize) -> (u64, u64) {
    match i {
        0 => (0, 0),
        _ if i >= BUCKETS - 1 => (1 << (BUCKETS - 2), u64::MAX),
        _ => (1 << (i - 1), (1 << i) - 1),
    }
}

/// A histogram summary: how many, how long in all, the longest, p50/p99
/// and the log2 buckets (see the module docs for the bucket bounds).
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct TimeStats {
    /// Durations recorded.
    pub count: u64,
    /// Their sum, in ns.
    pub total_ns: u64,
    /// The longest, in ns.
    pub max_ns: u64,
    /// Median (upper bound of its log2 bucket), in ns.
    pub p50_ns: u64,
    /// 99th percentile (upper bound of its log2 bucket), in ns.
    pub p99_ns: u64,
    /// Count per bucket; [`BUCKETS`] entries.
    pub buckets: Vec<u64>,
}

impl TimeStats {
    /// The summary of some durations (for tests and synthetic snapshots).
    pub fn from_samples(samples: &[u64]) -> Self {
        let mut buckets = std::vec![0; BUCKETS];
        for &s in samples {
            buckets[bucket_of(s)] += 1;
        }
        Self::from_buckets(
            buckets,
            samples.iter().fold(0u64, |a, &s| a.saturating_add(s)),
            samples.iter().copied().max().unwrap_or(0),
        )
    }

    /// The summary of bucket counts with their sum and maximum.
    pub fn from_buckets(mut buckets: Vec<u64>, total_ns: u64, max_ns: u64) -> Self {
        buckets.resize(BUCKETS, 0);
        let mut s = Self {
            count: buckets.iter().sum(),
            total_ns,
            max_ns,
            p50_ns: 0,
            p99_ns: 0,
            buckets,
        };
        s.p50_ns = s.percentile_ns(0.50);
        s.p99_ns = s.percentile_ns(0.99);
        s
    }

    /// The mean duration in ns (0 if none).
    pub fn mean_ns(&self) -> u64 {
        self.total_ns.checked_div(self.count).unwrap_or(0)
    }

    /// The `q` quantile (0 < q <= 1) in ns: the upper bound of the bucket
    /// holding that rank, capped by the maximum; 0 if empty.
    pub fn percentile_ns(&self, q: f64) -> u64 {
        if self.count == 0 {
            return 0;
        }
        let rank = ((q * self.count as f64).ceil() as u64).clamp(1, self.count);
        let mut seen = 0;
        for (i, &n) in self.buckets.iter().enumerate() {
            seen += n;
            if seen >= rank {
                return bucket_range(i).1.min(self.max_ns);
            }
        }
        self.max_ns
    }

    /// Adds `other`'s durations to these (percentiles recomputed).
    pub(crate) fn merge(&mut self, other: &TimeStats) {
        self.buckets.resize(BUCKETS, 0);
        for (a, b) in self.buckets.iter_mut().zip(&other.buckets) {
            *a += b;
        }
        let (total, max) = (
            self.total_ns.saturating_add(other.total_ns),
            self.max_ns.max(other.max_ns),
        );
        *self = Self::from_buckets(core::mem::take(&mut self.buckets), total, max);
    }
}

/// The live form, in a per-thread block: written only by its thread (plain
/// loads and stores, no read-modify-write), read Relaxed by snapshots.
pub(crate) struct LiveHistogram {
    total: AtomicU64,
    max: AtomicU64,
    buckets: [AtomicU64; BUCKETS],
}

/// Adds `v` to a counter only its owner writes.
#[inline]
pub(crate) fn bump(counter: &AtomicU64, v: u64) {
    // Relaxed: a statistic; snapshots read it Relaxed and tolerate lag.
    counter.store(
        counter.load(Ordering::Relaxed).wrapping_add(v),
        Ordering::Relaxed,
    );
}

/// Raises a maximum only its owner writes.
#[inline]
pub(crate) fn raise(max: &AtomicU64, v: u64) {
    if v > max.load(Ordering::Relaxed) {
        max.store(v, Ordering::Relaxed);
    }
}

impl LiveHistogram {
    pub(crate) const fn new() -> Self {
        Self {
            total: AtomicU64::new(0),
            max: AtomicU64::new(0),
            buckets: [const { AtomicU64::new(0) }; BUCKETS],
        }
    }

    #[inline]
    pub(crate) fn record(&self, ns: u64) {
        // Saturating, as `TimeStats` sums: a wrapped total reads below the
        // maximum (a mean of 0 next to a max of centuries).
        self.total.store(
            self.total.load(Ordering::Relaxed).saturating_add(ns),
            Ordering::Relaxed,
        );
        raise(&self.max, ns);
        bump(&self.buckets[bucket_of(ns)], 1);
    }

    pub(crate) fn zero(&self) {
        self.total.store(0, Ordering::Relaxed);
        self.max.store(0, Ordering::Relaxed);
        for b in &self.buckets {
            b.store(0, Ordering::Relaxed);
        }
    }

    pub(crate) fn read(&self) -> TimeStats {
        TimeStats::from_buckets(
            self.buckets
                .iter()
                .map(|b| b.load(Ordering::Relaxed))
                .collect(),
            self.total.load(Ordering::Relaxed),
            self.max.load(Ordering::Relaxed),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_are_log2() {
        assert_eq!(bucket_of(0), 0);
        assert_eq!(bucket_of(1), 1);
        assert_eq!(bucket_of(2), 2);
        assert_eq!(bucket_of(3), 2);
        assert_eq!(bucket_of(4), 3);
        assert_eq!(bucket_of(1023), 10);
        assert_eq!(bucket_of(1024), 11);
        assert_eq!(bucket_of(u64::MAX), BUCKETS - 1);
        for i in 0..BUCKETS {
            let (lo, hi) = bucket_range(i);
            assert_eq!(bucket_of(lo), i);
            assert_eq!(bucket_of(hi), i);
        }
    }

    #[test]
    fn percentiles_are_bucket_upper_bounds() {
        // 98 short (40 ns), 2 long (1 ms): p50 is 40's bucket [32, 63],
        // p99 the long one's, capped by the max.
        let mut v = std::vec![40u64; 98];
        v.extend([1_000_000, 1_000_000]);
        let s = TimeStats::from_samples(&v);
        assert_eq!(s.count, 100);
        assert_eq!(s.p50_ns, 63);
        assert_eq!(s.p99_ns, 1_000_000);
        assert_eq!(s.max_ns, 1_000_000);
        assert_eq!(s.mean_ns(), (98 * 40 + 2_000_000) / 100);
        assert_eq!(s.buckets[bucket_of(40)], 98);
        assert_eq!(TimeStats::from_samples(&[]).p99_ns, 0);
    }

    #[test]
    fn merge_adds() {
        let mut a = TimeStats::from_samples(&[10, 20]);
        a.merge(&TimeStats::from_samples(&[5_000]));
        assert_eq!(a, TimeStats::from_samples(&[10, 20, 5_000]));
    }

    #[test]
    fn live_histogram_records() {
        let h = LiveHistogram::new();
        for v in [0, 1, 100, 100, 1 << 20] {
            h.record(v);
        }
        let s = h.read();
        assert_eq!(s, TimeStats::from_samples(&[0, 1, 100, 100, 1 << 20]));
        h.zero();
        assert_eq!(h.read().count, 0);
    }

    #[test]
    fn live_total_saturates_like_the_summary() {
        // A duration near u64::MAX (a caller's bogus cost through the
        // public hook API): the live total must not wrap below the max.
        let h = LiveHistogram::new();
        h.record(u64::MAX - 1);
        h.record(2);
        let s = h.read();
        assert!(
            s.total_ns >= s.max_ns,
            "total {} < max {}",
            s.total_ns,
            s.max_ns
        );
        assert_eq!(s, TimeStats::from_samples(&[u64::MAX - 1, 2]));
    }
}
