//! [`Stats`]: what every timed run measured, in one type for bench runs,
//! scenario variants and torture runs, flattened into each JSON record so
//! every record carries the same fields under the same names.

use std::time::Duration;

use serde::{Deserialize, Serialize};

/// Per-thread operation counts over a measured time, and what follows from
/// them.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Stats {
    /// Worker threads.
    pub threads: usize,
    /// Measured time from the start gate opening to the stop flag, seconds;
    /// rates divide by it.
    pub elapsed: f64,
    /// Operations completed by each thread, in thread order.
    pub counts: Vec<u64>,
    /// All operations: the sum of `counts`.
    #[serde(default)]
    pub total: u64,
    /// Fewest operations of any thread.
    pub min: u64,
    /// Mean operations per thread, rounded.
    pub mean: u64,
    /// Most operations of any thread.
    pub max: u64,
    /// `total` divided by `elapsed`, rounded, op/s.
    pub total_rate: u64,
    /// `total_rate` per thread, rounded, op/s.
    pub percpu_rate: u64,
    /// CPU seconds the threads got while running.
    #[serde(default)]
    pub cpu: f64,
    /// `cpu` over what the threads could have had (`elapsed` × the lesser of
    /// threads and cores). Well below 1: other load took the CPUs (on a
    /// shared machine the rates then say little) or the threads slept
    /// waiting (parked on a lock, paused by a torture stutter).
    #[serde(default)]
    pub cpu_share: f64,
}

impl Stats {
    /// The statistics of `counts` over `elapsed`, with `cpu` CPU seconds
    /// used on a machine of `cores` CPUs.
    pub fn new(counts: Vec<u64>, elapsed: Duration, cpu: f64, cores: usize) -> Self {
        let threads = counts.len();
        let total: u64 = counts.iter().sum();
        let secs = elapsed.as_secs_f64();
        let rate = if secs > 0.0 { total as f64 / secs } else { 0.0 };
        let usable = secs * threads.min(cores).max(1) as f64;
        Stats {
            threads,
            elapsed: secs,
            total,
            min: counts.iter().copied().min().unwrap_or(0),
            mean: (total as f64 / threads.max(1) as f64).round() as u64,
            max: counts.iter().copied().max().unwrap_or(0),
            total_rate: rate.round() as u64,
            percpu_rate: (rate / threads.max(1) as f64).round() as u64,
            cpu,
            cpu_share: if usable > 0.0 { cpu / usable } else { 0.0 },
            counts,
        }
    }

    /// Slowest thread over fastest thread: 1.0 is perfectly fair.
    pub fn fairness(&self) -> f64 {
        if self.max == 0 {
            0.0
        } else {
            self.min as f64 / self.max as f64
        }
    }

    /// A thread's count as a rate, op/s.
    pub fn per_second(&self, count: u64) -> f64 {
        count as f64 / self.elapsed.max(1e-9)
    }
}

/// The median of some numbers (mean of the middle two for an even count).
pub fn median(mut xs: Vec<f64>) -> Option<f64> {
    if xs.is_empty() {
        return None;
    }
    xs.sort_by(f64::total_cmp);
    let n = xs.len();
    Some(if n % 2 == 1 {
        xs[n / 2]
    } else {
        (xs[n / 2 - 1] + xs[n / 2]) / 2.0
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn medians() {
        assert_eq!(median(vec![]), None);
        assert_eq!(median(vec![3.0]), Some(3.0));
        assert_eq!(median(vec![3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(vec![4.0, 1.0, 2.0, 3.0]), Some(2.5));
    }

    #[test]
    fn derived_numbers() {
        let s = Stats::new(vec![10, 30], Duration::from_secs(2), 3.0, 2);
        assert_eq!((s.total, s.min, s.mean, s.max), (40, 10, 20, 30));
        assert_eq!((s.total_rate, s.percpu_rate), (20, 10));
        assert_eq!(s.cpu_share, 0.75);
        assert!((s.fairness() - 1.0 / 3.0).abs() < 1e-9);
        // More threads than cores: the share is over the cores.
        let s = Stats::new(vec![1; 8], Duration::from_secs(1), 2.0, 2);
        assert_eq!(s.cpu_share, 1.0);
    }
}
