//! What the side-by-side benchmarks share: settings from the environment,
//! rounds that alternate the order of the contenders, timed runs of
//! threads, and medians.
#![allow(dead_code)] // each bench uses its own subset

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Barrier};
use std::thread;
use std::time::{Duration, Instant};

use crossbeam_utils::CachePadded;

/// `key` from the environment, or `default`.
pub fn env_or(key: &str, default: &str) -> String {
    std::env::var(key).unwrap_or_else(|_| default.to_string())
}

/// A number from the environment (`ROUNDS`, `RUNTIME_MS`, ...).
pub fn env_u64(key: &str, default: u64) -> u64 {
    env_or(key, &default.to_string())
        .trim()
        .parse()
        .unwrap_or_else(|_| panic!("{key} must be a number"))
}

/// A comma-separated list of numbers from the environment (`THREADS`, ...).
pub fn list(key: &str, default: &str) -> Vec<u64> {
    env_or(key, default)
        .split(',')
        .map(|t| {
            t.trim()
                .parse()
                .unwrap_or_else(|_| panic!("{key} must be comma-separated numbers"))
        })
        .collect()
}

/// The median of `v` (the mean of the middle two for an even count).
pub fn median(v: &[f64]) -> f64 {
    let mut v = v.to_vec();
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// Runs each of `contenders` once per round, reversing the order every other
/// round so that none always runs first, and returns `samples[contender]
/// [round]`: ratios should be taken within a round, then their median.
pub fn alternating<S>(
    rounds: usize,
    contenders: usize,
    mut run: impl FnMut(usize) -> S,
) -> Vec<Vec<S>> {
    let mut samples: Vec<Vec<S>> = (0..contenders).map(|_| Vec::new()).collect();
    for round in 0..rounds {
        let mut this_round: Vec<Option<S>> = (0..contenders).map(|_| None).collect();
        for k in 0..contenders {
            let i = if round % 2 == 0 {
                k
            } else {
                contenders - 1 - k
            };
            this_round[i] = Some(run(i));
        }
        for (i, s) in this_round.into_iter().enumerate() {
            samples[i].push(s.expect("every contender ran"));
        }
    }
    samples
}

/// Ops between two writes of one thread for a read share of `reads` %
/// (0: never). Only shares whose write period is a whole number of ops
/// (100 - 100/n: 0, 50, 75, 80, 90, 95, 99, 99.9...) can be run by a
/// period; any other share is refused, not rounded to a neighbour's.
pub fn write_period(reads: f64) -> u64 {
    assert!(
        (0.0..=100.0).contains(&reads),
        "READS: {reads} is not a share of 0-100%"
    );
    if reads >= 100.0 {
        return 0;
    }
    let period = 100.0 / (100.0 - reads);
    let whole = period.round();
    assert!(
        (period - whole).abs() <= 1e-6 * period,
        "READS: {reads}% reads is not one write every whole number of ops \
         (a period of {period:.3}); use 100 - 100/n (50, 75, 80, 90, 95, 99, 99.9, ...)"
    );
    whole as u64
}

/// What one timed run of threads did: each thread's operation count and
/// the time from their common start to the last one's exit.
pub struct Counts {
    pub per_thread: Vec<u64>,
    pub elapsed: Duration,
}

impl Counts {
    /// All threads' operations per second, in millions.
    pub fn mops(&self) -> f64 {
        self.per_thread.iter().sum::<u64>() as f64 / self.elapsed.as_secs_f64() / 1e6
    }

    /// The slowest thread's operations over the fastest's (1.0 = equal).
    pub fn fairness(&self) -> f64 {
        let min = *self.per_thread.iter().min().unwrap() as f64;
        let max = (*self.per_thread.iter().max().unwrap()).max(1) as f64;
        min / max
    }
}

/// Runs `threads` threads over `shared` for `runtime` (keep a clone of
/// it to look at it afterwards): all wait at a
/// barrier, then each runs `worker(thread index, &shared, stop flag)`,
/// which loops until the flag is set and returns its operation count.
/// Generic over the worker (not a function pointer), so each loop is
/// compiled into its thread's body, as a hand-written one would be.
pub fn timed<S, W>(threads: usize, runtime: Duration, shared: Arc<S>, worker: W) -> Counts
where
    S: Send + Sync + 'static,
    W: Fn(usize, &S, &AtomicBool) -> u64 + Copy + Send + 'static,
{
    // A line of its own: every worker reads the flag once per operation
    // (or per batch), and where the allocator put it (on the measured
    // lock's line or not) changed with each lock type's size.
    let stop = Arc::new(CachePadded::new(AtomicBool::new(false)));
    let barrier = Arc::new(Barrier::new(threads + 1));
    let handles: Vec<_> = (0..threads)
        .map(|t| {
            let (shared, stop, barrier) = (shared.clone(), stop.clone(), barrier.clone());
            thread::spawn(move || {
                barrier.wait();
                worker(t, &shared, &stop)
            })
        })
        .collect();
    barrier.wait();
    let start = Instant::now();
    thread::sleep(runtime);
    stop.store(true, Ordering::Relaxed);
    let per_thread = handles.into_iter().map(|h| h.join().unwrap()).collect();
    Counts {
        per_thread,
        elapsed: start.elapsed(),
    }
}
