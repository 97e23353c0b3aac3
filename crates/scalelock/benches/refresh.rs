//! Refresh-once against "everyone locks and recomputes" (the pmtimer code
//! before seed 003's patch), side by side in one process.
//!
//! Each op asks for a fresh value; an update costs `WORK_NS` of spinning
//! (a TSC read and scaling in pmtimer is ~100 ns; an emulated device or a
//! cache refill a few µs). Between calls each thread does `THINK_NS` of
//! private work: 0 is the closed loop (every thread calls back to back, so
//! at most two threads, one per CPU here, are ever running and sharing is
//! capped by the pipeline: the callers that arrive during one update share
//! the next); a think time makes arrivals independent of the lock, as a
//! vCPU that reads the timer now and then. Report: median over rounds of
//! calls/s, of the ratio to the locking baseline in the same round, and of
//! calls per update. Run: `cargo bench -p scalelock --bench refresh` (env
//! `ROUNDS`, `RUNTIME_MS`, `THREADS=2,16`, `WORK_NS=100,5000`,
//! `THINK_NS=0,2000`).

use std::hint::black_box;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crossbeam_utils::CachePadded;

mod common;
use common::{alternating, env_u64, list, median, timed};

/// Iterations of the `work` loop per µs, calibrated once. (Not a clock loop:
/// on this VM clock reads serialise across CPUs, so two threads "working"
/// by polling `Instant::now` would slow each other down.)
static ITERS_PER_US: AtomicU64 = AtomicU64::new(0);

fn calibrate() {
    let n = 20_000_000u64;
    let mut best = f64::MAX;
    for _ in 0..3 {
        let t = Instant::now();
        black_box(spin_iters(n, 1));
        best = best.min(t.elapsed().as_secs_f64());
    }
    ITERS_PER_US.store((n as f64 / (best * 1e6)) as u64, Ordering::Relaxed);
}

/// Not inlined: every variant runs this one copy of the loop. Inlined
/// copies sit at different code addresses, and on some CPUs (the 2-vCPU
/// AMD EPYC VM here) their speed differs by tens of percent, which the
/// calibration cannot see.
#[inline(never)]
fn spin_iters(n: u64, base: u64) -> u64 {
    let mut x = base;
    for _ in 0..n {
        x = black_box(x.wrapping_mul(31).wrapping_add(1));
    }
    x
}

/// About `ns` of CPU work (a recompute); returns a value derived from `base`.
fn work(ns: u64, base: u64) -> u64 {
    spin_iters(ns * ITERS_PER_US.load(Ordering::Relaxed) / 1000, base) | 1
}

trait Refresher: Send + Sync + 'static {
    fn new() -> Self;
    fn fresh(&self, ns: u64, updates: &AtomicU64) -> u64;
}

/// Private work between calls (not counted as an update).
fn think(ns: u64) {
    if ns != 0 {
        black_box(work(ns, 1));
    }
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
    calls_per_update: f64,
}

fn sample<R: Refresher>(threads: usize, ns: u64, think_ns: u64, runtime: Duration) -> Sample {
    let shared = Arc::new((R::new(), AtomicU64::new(0)));
    let counts = timed(
        threads,
        runtime,
        shared.clone(),
        move |_, (r, updates): &(R, AtomicU64), stop| {
            let mut ops = CachePadded::new(0u64);
            while !stop.load(Ordering::Relaxed) {
                black_box(r.fresh(ns, updates));
                *ops += 1;
                think(think_ns);
            }
            *ops
        },
    );
    let calls: u64 = counts.per_thread.iter().sum();
    Sample {
        mcalls: counts.mops(),
        calls_per_update: calls as f64 / shared.1.load(Ordering::Relaxed).max(1) as f64,
    }
}

type Runner = fn(usize, u64, u64, Duration) -> Sample;

fn main() {
    let rounds = env_u64("ROUNDS", 5) as usize;
    calibrate();
    let runtime = Duration::from_millis(env_u64("RUNTIME_MS", 300));
    let threads = list("THREADS", "2,16");
    let works = list("WORK_NS", "100,5000");
    let thinks = list("THINK_NS", "0,2000");
    let kinds: Vec<(&str, Runner)> = vec![
        ("lock+recompute (qspinlock)", sample::<LockAll>),
        ("refresh-once", sample::<Once>),
        ("lock+recompute (pl-mutex)", sample::<LockAllPl>),
    ];
    println!(
        "# {rounds} rounds x {} ms, median; ratio = calls/s / lock+recompute (qspinlock) in the same round; {} work iterations/us",
        runtime.as_millis(),
        ITERS_PER_US.load(Ordering::Relaxed)
    );
    println!("| threads | work ns | think ns | variant | Mcalls/s | ratio | calls/update |");
    println!("| --- | --- | --- | --- | --- | --- | --- |");
    for &t in &threads {
        for (&w, &th) in works
            .iter()
            .flat_map(|w| thinks.iter().map(move |th| (w, th)))
        {
            let samples = alternating(rounds, kinds.len(), |i| {
                (kinds[i].1)(t as usize, w, th, runtime)
            });
            for (i, (name, _)) in kinds.iter().enumerate() {
                let calls: Vec<f64> = samples[i].iter().map(|s| s.mcalls).collect();
                let ratio: Vec<f64> = (0..rounds)
                    .map(|k| calls[k] / samples[0][k].mcalls)
                    .collect();
                let shared: Vec<f64> = samples[i].iter().map(|s| s.calls_per_update).collect();
                println!(
                    "| {t} | {w} | {th} | {name} | {:.3} | {:.2} | {:.2} |",
                    median(&calls),
                    median(&ratio),
                    median(&shared)
                );
            }
        }
    }
}
