//! Where a QSpinLock's per-thread unfairness comes from, with more threads
//! than CPUs: each thread runs the tight loop of `benches/qspinlock.rs` and
//! splits its run into *turns* (the stretches in which it re-takes the lock
//! without waiting; a wait of more than 200 µs between two clock reads
//! starts a new one), then reports its operations, its turns, how long a
//! turn lasted (mean, median and longest), its speed within turns and its
//! total time in turns. Fairness in operations is the product of three:
//! equal turns, equal speed and equal time each.
//!
//! Run: `cargo run --release -p scalelock --example qspinlock_turns` (env
//! `THREADS`, default 16; `RUNTIME_MS`, default 500; `ROUNDS`, default 3).
//! The clock is read every 64 operations, which costs the loop a little.

use std::hint::black_box;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use scalelock::QSpinLock;

/// Operations between two clock reads.
const EVERY: u64 = 64;
/// A gap between two clock reads longer than this ends a turn.
const GAP: Duration = Duration::from_micros(200);

fn env(key: &str, default: u64) -> u64 {
    std::env::var(key)
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default)
}

/// One thread's run: operations, and each whole turn's operations and
/// length (first to last clock read in it).
struct Run {
    ops: u64,
    turns: Vec<(u64, Duration)>,
}

fn worker(lock: &QSpinLock<u64>, stop: &AtomicBool) -> Run {
    let mut run = Run {
        ops: 0,
        turns: Vec::new(),
    };
    let (mut start, mut last) = (Instant::now(), Instant::now());
    let mut in_turn = 0u64;
    while !stop.load(Ordering::Relaxed) {
        {
            let mut g = lock.lock();
            *g = black_box(g.wrapping_mul(31).wrapping_add(1));
        }
        run.ops += 1;
        in_turn += 1;
        if run.ops.is_multiple_of(EVERY) {
            let now = Instant::now();
            if now.duration_since(last) > GAP {
                // We waited: the turn before ended at `last`, with the
                // ops up to that read. The `EVERY` ops since then straddle
                // the wait: they count in neither turn (only in `ops`).
                run.turns
                    .push((in_turn - EVERY, last.duration_since(start)));
                in_turn = 0;
                start = now;
            }
            last = now;
        }
    }
    run
}

fn main() {
    let threads = env("THREADS", 16) as usize;
    let runtime = Duration::from_millis(env("RUNTIME_MS", 500));
    for round in 0..env("ROUNDS", 3) {
        let lock = Arc::new(QSpinLock::new(0u64));
        let stop = Arc::new(AtomicBool::new(false));
        let barrier = Arc::new(Barrier::new(threads + 1));
        let handles: Vec<_> = (0..threads)
            .map(|_| {
                let (lock, stop, barrier) = (lock.clone(), stop.clone(), barrier.clone());
                std::thread::spawn(move || {
                    barrier.wait();
                    worker(&lock, &stop)
                })
            })
            .collect();
        barrier.wait();
        std::thread::sleep(runtime);
        stop.store(true, Ordering::Relaxed);
        let mut runs: Vec<Run> = handles.into_iter().map(|h| h.join().unwrap()).collect();
        runs.sort_by_key(|r| r.ops);
        let (min, max) = (runs[0].ops, runs[threads - 1].ops.max(1));
        println!(
            "round {round}: {threads} threads, {} ms, fairness (min/max ops) {:.2}",
            runtime.as_millis(),
            min as f64 / max as f64
        );
        println!(
            "| ops | turns | mean turn µs | median turn µs | longest turn µs | ops/µs in turns | time in turns ms |"
        );
        println!("| ---: | ---: | ---: | ---: | ---: | ---: | ---: |");
        for r in &runs {
            // The first "turn" is the start, up to the first wait.
            let whole = r.turns.get(1..).unwrap_or_default();
            let n = whole.len().max(1) as f64;
            let ops: u64 = whole.iter().map(|t| t.0).sum();
            let time: Duration = whole.iter().map(|t| t.1).sum();
            let us = time.as_secs_f64() * 1e6;
            // A few turns far longer than the batch (a late wake-up of
            // the next word waiter) show in the longest, not the median.
            let mut lengths: Vec<Duration> = whole.iter().map(|t| t.1).collect();
            lengths.sort();
            let median = lengths.get(lengths.len() / 2).copied().unwrap_or_default();
            let longest = lengths.last().copied().unwrap_or_default();
            println!(
                "| {} | {} | {:.0} | {} | {} | {:.1} | {:.1} |",
                r.ops,
                whole.len(),
                us / n,
                median.as_micros(),
                longest.as_micros(),
                ops as f64 / us.max(1.0),
                us / 1e3
            );
        }
    }
}
