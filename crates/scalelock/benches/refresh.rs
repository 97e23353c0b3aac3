//! Refresh-once against "everyone locks and recomputes" (the pmtimer code
//! before seed 003's patch), side by side in one process.
//!
//! Each op asks for a fresh value; an update costs `WORK_NS` of spinning
//! (a TSC read and scaling in pmtimer is ~100 ns; try 100 and 2000). Report:
//! median over rounds of calls/s and of the ratio to the locking baseline
//! in the same round, plus updates per call. Run: `cargo bench -p scalelock
//! --bench refresh` (env `ROUNDS`, `RUNTIME_MS`, `THREADS=2,16`,
//! `WORK_NS=100,2000`).

use std::hint::black_box;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Barrier};
use std::thread;
use std::time::{Duration, Instant};

use crossbeam_utils::CachePadded;

fn work(ns: u64, base: u64) -> u64 {
    let end = Instant::now() + Duration::from_nanos(ns);
    let mut x = base;
    while Instant::now() < end {
        x = black_box(x.wrapping_mul(31).wrapping_add(1));
    }
    x | 1
}

trait Refresher: Send + Sync + 'static {
    fn new() -> Self;
    fn fresh(&self, ns: u64, updates: &AtomicU64) -> u64;
}

/// Everyone takes the lock and recomputes.
struct LockAll(scalelock::QSpinLock<u64>);
impl Refresher for LockAll {
    fn new() -> Self {
        LockAll(scalelock::QSpinLock::new(0))
    }
    fn fresh(&self, ns: u64, updates: &AtomicU64) -> u64 {
        let mut g = self.0.lock();
        updates.fetch_add(1, Ordering::Relaxed);
        *g = work(ns, *g);
        *g
    }
}

/// The same with parking_lot's Mutex.
struct LockAllPl(parking_lot::Mutex<u64>);
impl Refresher for LockAllPl {
    fn new() -> Self {
        LockAllPl(parking_lot::Mutex::new(0))
    }
    fn fresh(&self, ns: u64, updates: &AtomicU64) -> u64 {
        let mut g = self.0.lock();
        updates.fetch_add(1, Ordering::Relaxed);
        *g = work(ns, *g);
        *g
    }
}

struct Once(scalelock::RefreshOnce<u64>);
impl Refresher for Once {
    fn new() -> Self {
        Once(scalelock::RefreshOnce::new(0))
    }
    fn fresh(&self, ns: u64, updates: &AtomicU64) -> u64 {
        self.0.refresh(|v| {
            updates.fetch_add(1, Ordering::Relaxed);
            work(ns, *v)
        })
    }
}

struct Sample {
    mcalls: f64,
    updates_per_call: f64,
}

fn sample<R: Refresher>(threads: usize, ns: u64, runtime: Duration) -> Sample {
    let r = Arc::new(R::new());
    let updates = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let barrier = Arc::new(Barrier::new(threads + 1));
    let hs: Vec<_> = (0..threads)
        .map(|_| {
            let (r, updates, stop, barrier) =
                (r.clone(), updates.clone(), stop.clone(), barrier.clone());
            thread::spawn(move || {
                let mut ops = CachePadded::new(0u64);
                barrier.wait();
                while !stop.load(Ordering::Relaxed) {
                    black_box(r.fresh(ns, &updates));
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
    let calls: u64 = hs.into_iter().map(|h| h.join().unwrap()).sum();
    let el = start.elapsed().as_secs_f64();
    Sample {
        mcalls: calls as f64 / el / 1e6,
        updates_per_call: updates.load(Ordering::Relaxed) as f64 / calls.max(1) as f64,
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

type Runner = fn(usize, u64, Duration) -> Sample;

fn list(var: &str, default: &str) -> Vec<u64> {
    std::env::var(var)
        .unwrap_or_else(|_| default.to_string())
        .split(',')
        .map(|t| t.trim().parse().expect(var))
        .collect()
}

fn main() {
    let env = |k: &str, d: &str| std::env::var(k).unwrap_or_else(|_| d.to_string());
    let rounds: usize = env("ROUNDS", "5").parse().expect("ROUNDS");
    let runtime = Duration::from_millis(env("RUNTIME_MS", "300").parse().expect("RUNTIME_MS"));
    let threads = list("THREADS", "2,16");
    let works = list("WORK_NS", "100,2000");
    let kinds: Vec<(&str, Runner)> = vec![
        ("lock+recompute (qspinlock)", sample::<LockAll>),
        ("refresh-once", sample::<Once>),
        ("lock+recompute (pl-mutex)", sample::<LockAllPl>),
    ];
    println!(
        "# {rounds} rounds x {} ms, median; ratio = calls/s / lock+recompute (qspinlock) in the same round",
        runtime.as_millis()
    );
    println!("| threads | work ns | variant | Mcalls/s | ratio | updates/call |");
    println!("| --- | --- | --- | --- | --- | --- |");
    for &t in &threads {
        for &w in &works {
            let mut res: Vec<(Vec<f64>, Vec<f64>, Vec<f64>)> =
                vec![(vec![], vec![], vec![]); kinds.len()];
            for round in 0..rounds {
                let order: Vec<usize> = if round % 2 == 0 {
                    (0..kinds.len()).collect()
                } else {
                    (0..kinds.len()).rev().collect()
                };
                let mut by: Vec<Option<Sample>> = (0..kinds.len()).map(|_| None).collect();
                for &i in &order {
                    by[i] = Some((kinds[i].1)(t as usize, w, runtime));
                }
                let base = by[0].as_ref().unwrap().mcalls;
                for (i, s) in by.into_iter().enumerate() {
                    let s = s.unwrap();
                    res[i].0.push(s.mcalls);
                    res[i].1.push(s.mcalls / base);
                    res[i].2.push(s.updates_per_call);
                }
            }
            for (i, (name, _)) in kinds.iter().enumerate() {
                let (m, q, u) = res[i].clone();
                println!(
                    "| {t} | {w} | {name} | {:.3} | {:.2} | {:.2} |",
                    median(m),
                    median(q),
                    median(u)
                );
            }
        }
    }
}
