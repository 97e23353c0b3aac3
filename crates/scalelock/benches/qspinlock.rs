//! Side-by-side mutex benchmark: QSpinLock against std, parking_lot (Mutex and
//! FairMutex) and spin (Mutex, TicketMutex).
//!
//! Every round runs each lock once per thread count, in alternating order, for
//! `RUNTIME`; the report gives the median over rounds of throughput, the ratio
//! to parking_lot's Mutex *within the same round*, and per-thread min/max op
//! counts. Run: `cargo bench -p scalelock --bench qspinlock` (env
//! `ROUNDS`, `RUNTIME_MS`, `THREADS=1,2,16` override the defaults).

use std::hint::black_box;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Barrier};
use std::thread;
use std::time::{Duration, Instant};

use crossbeam_utils::CachePadded;

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

/// Runs `threads` threads for `runtime`; returns per-thread op counts.
fn run<M: BenchMutex>(threads: usize, runtime: Duration) -> Vec<u64> {
    let lock = Arc::new(M::new());
    let stop = Arc::new(AtomicBool::new(false));
    let barrier = Arc::new(Barrier::new(threads + 1));
    let handles: Vec<_> = (0..threads)
        .map(|_| {
            let (lock, stop, barrier) = (lock.clone(), stop.clone(), barrier.clone());
            thread::spawn(move || {
                let mut ops = CachePadded::new(0u64);
                barrier.wait();
                while !stop.load(Ordering::Relaxed) {
                    // load = 1: one unit of work on the protected data.
                    lock.with(|v| *v = black_box(v.wrapping_mul(31).wrapping_add(1)));
                    *ops += 1;
                }
                *ops
            })
        })
        .collect();
    barrier.wait();
    let start = Instant::now();
    thread::sleep(runtime);
    stop.store(true, Ordering::Relaxed);
    let counts: Vec<u64> = handles.into_iter().map(|h| h.join().unwrap()).collect();
    let elapsed = start.elapsed().as_secs_f64();
    counts
        .into_iter()
        .map(|c| (c as f64 / elapsed * runtime.as_secs_f64()) as u64)
        .collect()
}

struct Sample {
    mops: f64,
    fairness: f64,
}

fn sample<M: BenchMutex>(threads: usize, runtime: Duration) -> Sample {
    let counts = run::<M>(threads, runtime);
    let total: u64 = counts.iter().sum();
    let min = *counts.iter().min().unwrap() as f64;
    let max = (*counts.iter().max().unwrap()).max(1) as f64;
    Sample {
        mops: total as f64 / runtime.as_secs_f64() / 1e6,
        fairness: min / max,
    }
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

type Runner = fn(usize, Duration) -> Sample;

fn main() {
    let env = |k: &str, d: &str| std::env::var(k).unwrap_or_else(|_| d.to_string());
    let rounds: usize = env("ROUNDS", "5").parse().expect("ROUNDS");
    let runtime = Duration::from_millis(env("RUNTIME_MS", "500").parse().expect("RUNTIME_MS"));
    let threads: Vec<usize> = env("THREADS", "1,2,16")
        .split(',')
        .map(|t| t.trim().parse().expect("THREADS"))
        .collect();
    let locks: Vec<(&str, Runner)> = vec![
        ("pl-mutex", sample::<parking_lot::Mutex<u64>>),
        ("qspinlock", sample::<scalelock::QSpinLock<u64>>),
        ("std-mutex", sample::<std::sync::Mutex<u64>>),
        ("pl-fairmutex", sample::<parking_lot::FairMutex<u64>>),
        ("spin-mutex", sample::<spin::Mutex<u64>>),
        ("spin-ticket", sample::<spin::mutex::TicketMutex<u64>>),
    ];
    let only: Option<Vec<String>> = std::env::var("LOCKS")
        .ok()
        .map(|s| s.split(',').map(str::to_string).collect());
    let locks: Vec<_> = locks
        .into_iter()
        .filter(|(n, _)| n == &"pl-mutex" || only.as_ref().is_none_or(|o| o.iter().any(|x| x == n)))
        .collect();
    println!(
        "# {rounds} rounds x {} ms, load = 1, median over rounds; ratio = lock / pl-mutex in the same round",
        runtime.as_millis()
    );
    println!("| threads | lock | Mops/s | x pl-mutex | min/max |");
    println!("| --- | --- | --- | --- | --- |");
    for &t in &threads {
        // per lock: (mops per round, ratio per round, fairness per round)
        let mut results: Vec<(Vec<f64>, Vec<f64>, Vec<f64>)> =
            vec![(vec![], vec![], vec![]); locks.len()];
        for round in 0..rounds {
            let mut this_round: Vec<Sample> = Vec::new();
            // Alternate the order every round so no lock always runs first.
            let order: Vec<usize> = if round % 2 == 0 {
                (0..locks.len()).collect()
            } else {
                (0..locks.len()).rev().collect()
            };
            let mut by_lock: Vec<Option<Sample>> = (0..locks.len()).map(|_| None).collect();
            for &i in &order {
                by_lock[i] = Some((locks[i].1)(t, runtime));
            }
            this_round.extend(by_lock.into_iter().map(Option::unwrap));
            let base = this_round[0].mops;
            for (i, s) in this_round.iter().enumerate() {
                results[i].0.push(s.mops);
                results[i].1.push(s.mops / base);
                results[i].2.push(s.fairness);
            }
        }
        for (i, (name, _)) in locks.iter().enumerate() {
            let (m, r, f) = results[i].clone();
            println!(
                "| {t} | {name} | {:.2} | {:.2} | {:.2} |",
                median(m),
                median(r),
                median(f)
            );
        }
    }
}
