//! Side-by-side reader-writer lock benchmark: QRwLock against parking_lot's
//! RwLock and std's RwLock, at read shares of 50, 95 and 100%.
//!
//! Every round runs each lock once per (threads, read share), in alternating
//! order, for `RUNTIME_MS`; the report gives the median over rounds of
//! throughput and of the ratio to parking_lot *within the same round*, and
//! the per-thread min/max op counts. Each op: pick read or write with a
//! per-thread xorshift; a read sums the 4 protected words, a write bumps
//! them. Run: `cargo bench -p scalelock --bench qrwlock` (env `ROUNDS`,
//! `RUNTIME_MS`, `THREADS=2,16`, `READS=50,95,100` override the defaults).

use std::hint::black_box;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use crossbeam_utils::CachePadded;

mod common;
use common::{alternating, env_u64, list, median, timed};

type Data = [u64; 4];

trait BenchRw: Send + Sync + 'static {
    fn new() -> Self;
    fn read(&self) -> u64;
    fn write(&self);
}

macro_rules! lock_api_rw {
    ($ty:ty) => {
        impl BenchRw for $ty {
            fn new() -> Self {
                <$ty>::new([0; 4])
            }
            #[inline]
            fn read(&self) -> u64 {
                self.read().iter().sum()
            }
            #[inline]
            fn write(&self) {
                let mut g = self.write();
                for w in g.iter_mut() {
                    *w = black_box(w.wrapping_add(1));
                }
            }
        }
    };
}

lock_api_rw!(scalelock::QRwLock<Data>);
lock_api_rw!(parking_lot::RwLock<Data>);

impl BenchRw for std::sync::RwLock<Data> {
    fn new() -> Self {
        std::sync::RwLock::new([0; 4])
    }
    #[inline]
    fn read(&self) -> u64 {
        self.read().unwrap().iter().sum()
    }
    #[inline]
    fn write(&self) {
        let mut g = self.write().unwrap();
        for w in g.iter_mut() {
            *w = black_box(w.wrapping_add(1));
        }
    }
}

struct Sample {
    mops: f64,
    fairness: f64,
}

fn sample<L: BenchRw>(threads: usize, read_pct: u64, runtime: Duration) -> Sample {
    let counts = timed(
        threads,
        runtime,
        // A line of its own (see the qspinlock bench).
        Arc::new(CachePadded::new(L::new())),
        move |t, lock: &CachePadded<L>, stop| {
            let mut ops = CachePadded::new(0u64);
            let mut rng = (t as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15);
            while !stop.load(Ordering::Relaxed) {
                rng ^= rng << 13;
                rng ^= rng >> 7;
                rng ^= rng << 17;
                if rng % 100 < read_pct {
                    black_box(lock.read());
                } else {
                    lock.write();
                }
                *ops += 1;
            }
            *ops
        },
    );
    Sample {
        mops: counts.mops(),
        fairness: counts.fairness(),
    }
}

type Runner = fn(usize, u64, Duration) -> Sample;

fn main() {
    let rounds = env_u64("ROUNDS", 5) as usize;
    let runtime = Duration::from_millis(env_u64("RUNTIME_MS", 300));
    let threads = list("THREADS", "2,16");
    let reads = list("READS", "50,95,100");
    // Index 0 is the baseline of the ratio column.
    let locks: Vec<(&str, Runner)> = vec![
        ("pl-rwlock", sample::<parking_lot::RwLock<Data>>),
        ("qrwlock", sample::<scalelock::QRwLock<Data>>),
        ("std-rwlock", sample::<std::sync::RwLock<Data>>),
    ];
    println!(
        "# {rounds} rounds x {} ms, median over rounds; ratio = lock / pl-rwlock in the same round",
        runtime.as_millis()
    );
    println!("| threads | read % | lock | Mops/s | x pl-rwlock | min/max |");
    println!("| --- | --- | --- | --- | --- | --- |");
    for &t in &threads {
        for &r in &reads {
            let samples = alternating(rounds, locks.len(), |i| {
                (locks[i].1)(t as usize, r, runtime)
            });
            for (i, (name, _)) in locks.iter().enumerate() {
                let mops: Vec<f64> = samples[i].iter().map(|s| s.mops).collect();
                let ratio: Vec<f64> = (0..rounds).map(|k| mops[k] / samples[0][k].mops).collect();
                let fair: Vec<f64> = samples[i].iter().map(|s| s.fairness).collect();
                println!(
                    "| {t} | {r} | {name} | {:.2} | {:.2} | {:.2} |",
                    median(&mops),
                    median(&ratio),
                    median(&fair)
                );
            }
        }
    }
}
