//! Side-by-side mutex benchmark: QSpinLock against std, parking_lot (Mutex and
//! FairMutex) and spin (Mutex, TicketMutex).
//!
//! Every round runs each lock once per thread count, in alternating order, for
//! `RUNTIME_MS` (500 ms); the report gives the median over rounds of throughput, the ratio
//! to parking_lot's Mutex *within the same round*, and per-thread min/max op
//! counts. Run: `cargo bench -p scalelock --bench qspinlock` (env
//! `ROUNDS`, `RUNTIME_MS`, `THREADS=1,2,16` override the defaults).
//!
//! The last row of each thread count, `unlocked`, runs the same loop on a
//! thread-private value with no lock at all: its min/max is the fairness
//! the OS scheduler itself gives that many busy threads over the runtime,
//! the ceiling for a lock that lets a running thread keep going (with
//! more threads than CPUs, a thread's operations follow its CPU time). Its
//! throughput is not a lock's, so it has no ratio.

use std::hint::black_box;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use crossbeam_utils::CachePadded;

mod common;
use common::{alternating, env_u64, list, median, timed};

trait BenchMutex: Send + Sync + 'static {
    fn new() -> Self;
    fn with(&self, f: impl FnOnce(&mut u64));
}

macro_rules! lock_api_mutex {
    ($ty:ty) => {
        impl BenchMutex for $ty {
            fn new() -> Self {
                <$ty>::new(0)
            }
            #[inline]
            fn with(&self, f: impl FnOnce(&mut u64)) {
                f(&mut self.lock());
            }
        }
    };
}

lock_api_mutex!(scalelock::QSpinLock<u64>);
lock_api_mutex!(parking_lot::Mutex<u64>);
lock_api_mutex!(parking_lot::FairMutex<u64>);
lock_api_mutex!(spin::Mutex<u64>);
lock_api_mutex!(spin::mutex::TicketMutex<u64>);

impl BenchMutex for std::sync::Mutex<u64> {
    fn new() -> Self {
        std::sync::Mutex::new(0)
    }
    #[inline]
    fn with(&self, f: impl FnOnce(&mut u64)) {
        f(&mut self.lock().unwrap());
    }
}

struct Sample {
    mops: f64,
    fairness: f64,
}

fn sample<M: BenchMutex>(threads: usize, runtime: Duration) -> Sample {
    // The lock on a line of its own, as locktest's: where the allocator put
    // it beside other blocks changed with each lock type's size.
    let lock = Arc::new(CachePadded::new(M::new()));
    let counts = timed(threads, runtime, lock, |_, lock: &CachePadded<M>, stop| {
        let mut ops = CachePadded::new(0u64);
        while !stop.load(Ordering::Relaxed) {
            // load = 1: one unit of work on the protected data.
            lock.with(|v| *v = black_box(v.wrapping_mul(31).wrapping_add(1)));
            *ops += 1;
        }
        *ops
    });
    Sample {
        mops: counts.mops(),
        fairness: counts.fairness(),
    }
}

/// The same loop with no lock: each thread updates its own value.
fn sample_unlocked(threads: usize, runtime: Duration) -> Sample {
    let counts = timed(threads, runtime, Arc::new(()), |_, _: &(), stop| {
        let mut v = CachePadded::new(0u64);
        let mut ops = CachePadded::new(0u64);
        while !stop.load(Ordering::Relaxed) {
            *v = black_box(v.wrapping_mul(31).wrapping_add(1));
            *ops += 1;
        }
        *ops
    });
    Sample {
        mops: counts.mops(),
        fairness: counts.fairness(),
    }
}

type Runner = fn(usize, Duration) -> Sample;

fn main() {
    let rounds = env_u64("ROUNDS", 5) as usize;
    let runtime = Duration::from_millis(env_u64("RUNTIME_MS", 500));
    let threads = list("THREADS", "1,2,16");
    let locks: Vec<(&str, Runner)> = vec![
        ("pl-mutex", sample::<parking_lot::Mutex<u64>>),
        ("qspinlock", sample::<scalelock::QSpinLock<u64>>),
        ("std-mutex", sample::<std::sync::Mutex<u64>>),
        ("pl-fairmutex", sample::<parking_lot::FairMutex<u64>>),
        ("spin-mutex", sample::<spin::Mutex<u64>>),
        ("spin-ticket", sample::<spin::mutex::TicketMutex<u64>>),
        ("unlocked", sample_unlocked),
    ];
    // LOCKS=a,b runs only those (pl-mutex, the baseline, and unlocked, the
    // scheduler's fairness, always run).
    let only: Option<Vec<String>> = std::env::var("LOCKS")
        .ok()
        .map(|s| s.split(',').map(str::to_string).collect());
    // A name not in the list (a typo) ran pl-mutex and unlocked alone,
    // silently.
    for w in only.iter().flatten() {
        let known: Vec<&str> = locks.iter().map(|(n, _)| *n).collect();
        assert!(
            known.contains(&w.as_str()),
            "LOCKS: no lock named {w:?} (known: {known:?})"
        );
    }
    let locks: Vec<_> = locks
        .into_iter()
        .filter(|(n, _)| {
            *n == "pl-mutex"
                || *n == "unlocked"
                || only.as_ref().is_none_or(|o| o.iter().any(|x| x == n))
        })
        .collect();
    println!(
        "# {rounds} rounds x {} ms, load = 1, median over rounds; ratio = lock / pl-mutex in the same round",
        runtime.as_millis()
    );
    println!("| threads | lock | Mops/s | x pl-mutex | min/max |");
    println!("| --- | --- | --- | --- | --- |");
    for &t in &threads {
        let samples = alternating(rounds, locks.len(), |i| (locks[i].1)(t as usize, runtime));
        for (i, (name, _)) in locks.iter().enumerate() {
            let mops: Vec<f64> = samples[i].iter().map(|s| s.mops).collect();
            let ratio: Vec<f64> = (0..rounds).map(|r| mops[r] / samples[0][r].mops).collect();
            let fair: Vec<f64> = samples[i].iter().map(|s| s.fairness).collect();
            let ratio = if *name == "unlocked" {
                "-".to_string()
            } else {
                format!("{:.2}", median(&ratio))
            };
            println!(
                "| {t} | {name} | {:.2} | {ratio} | {:.2} |",
                median(&mops),
                median(&fair)
            );
        }
    }
}
