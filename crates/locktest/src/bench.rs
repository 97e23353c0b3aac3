//! One benchmark run: N threads hammer one lock for a fixed time.
//!
//! Every thread waits at a start gate so all start together, then loops until
//! the stop flag is set: pick read or write with its own PRNG against `r%`
//! (mutexes always write), take the lock, do `load` units of dependent
//! arithmetic on the protected data (writes mutate it, reads only read it),
//! release, count one operation. Counts stay in a register during the run
//! and land in a cache-padded slot per thread at the end, so counting never
//! writes a line another thread touches.

use std::hint::black_box;
use std::sync::PoisonError;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use crossbeam_utils::CachePadded;

use crate::locks::{Kind, Lockable};

/// The data every bench lock protects: a small state a writer advances and a
/// reader folds, so the critical section touches the lock's neighbour line
/// the way real protected data does.
#[derive(Debug)]
pub struct BenchData {
    a: u64,
    b: u64,
}

impl BenchData {
    fn new() -> Self {
        BenchData { a: 1, b: 2 }
    }

    /// `load` units of writer work: each unit is a multiply-add step of a
    /// 64-bit LCG on `a` and a fold into `b`, all dependent on the previous.
    #[inline]
    fn write(&mut self, load: u32) {
        let mut a = self.a;
        let mut b = self.b;
        for _ in 0..black_box(load) {
            a = a
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            b ^= a >> 29;
        }
        self.a = a;
        self.b = b;
    }

    /// `load` units of reader work: the same dependent chain, seeded from the
    /// protected data, whose result is only observed (black_box), never stored.
    #[inline]
    fn read(&self, load: u32) {
        let mut x = self.a;
        let b = self.b;
        for _ in 0..black_box(load) {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(b);
            x ^= x >> 29;
        }
        black_box(x);
    }
}

/// What one run measures.
#[derive(Clone, Debug)]
pub struct RunConfig {
    /// The lock's name, for messages.
    pub lock: &'static str,
    /// Number of worker threads.
    pub threads: usize,
    /// Percentage of operations that take the read lock (rwlocks only).
    pub read_pct: Option<u8>,
    /// Units of work inside each critical section.
    pub load: u32,
    /// How long the threads run.
    pub runtime: Duration,
}

/// What one run measured.
#[derive(Clone, Debug)]
pub struct Sample {
    /// Operations completed by each thread.
    pub counts: Vec<u64>,
    /// Wall time from the start barrier to the stop flag.
    pub elapsed: Duration,
}

/// A tiny xorshift64* generator: per thread, no shared state.
struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Self {
        // Never zero: xorshift is stuck at zero.
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }

    #[inline]
    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// A number in `0..100`.
    #[inline]
    fn percent(&mut self) -> u8 {
        ((self.next() >> 32) % 100) as u8
    }
}

/// Runs lock type `L` once under `cfg`.
pub fn run<L: Lockable<BenchData>>(cfg: &RunConfig) -> Result<Sample, String> {
    let lock = L::new(BenchData::new());
    let stop = AtomicBool::new(false);
    // The start gate: main holds it exclusively until every thread is
    // waiting for a shared hold, then opens it so they all start together.
    // (A `Barrier` cannot be released if spawning a thread fails midway.)
    let gate = std::sync::RwLock::new(());
    let ready = AtomicUsize::new(0);
    let finished = AtomicUsize::new(0);
    let counts: Vec<CachePadded<AtomicU64>> = (0..cfg.threads)
        .map(|_| CachePadded::new(AtomicU64::new(0)))
        .collect();
    // Mutexes ignore r%: every operation is a write.
    let read_pct = match L::KIND {
        Kind::Mutex => 0,
        Kind::RwLock => cfg.read_pct.unwrap_or(0),
    };
    let load = cfg.load;

    let elapsed = std::thread::scope(|s| -> Result<Duration, String> {
        let closed = gate.write().unwrap_or_else(PoisonError::into_inner);
        for (i, slot) in counts.iter().enumerate() {
            let (lock, stop, gate, ready, finished) = (&lock, &stop, &gate, &ready, &finished);
            let spawned = std::thread::Builder::new()
                .name(format!("locktest-{i}"))
                .spawn_scoped(s, move || {
                    let mut rng = Rng::new(i as u64 + 1);
                    let mut ops = 0u64;
                    // Relaxed: a head count only; the gate orders the start.
                    ready.fetch_add(1, Ordering::Relaxed);
                    drop(gate.read().unwrap_or_else(PoisonError::into_inner));
                    // Relaxed: the flag only says "stop soon"; the counts are
                    // published by the scope's join, not by this flag.
                    while !stop.load(Ordering::Relaxed) {
                        if read_pct > 0 && rng.percent() < read_pct {
                            lock.with_read(|d| d.read(load));
                        } else {
                            lock.with_write(|d| d.write(load));
                        }
                        ops += 1;
                    }
                    // Relaxed: read after the scope joins this thread.
                    slot.store(ops, Ordering::Relaxed);
                    // Relaxed: a head count for the watchdog only.
                    finished.fetch_add(1, Ordering::Relaxed);
                });
            if let Err(e) = spawned {
                // Let the threads already spawned through into a run that
                // stops at once; the scope joins them.
                stop.store(true, Ordering::Relaxed);
                drop(closed);
                return Err(format!("cannot spawn thread {i} of {}: {e}", cfg.threads));
            }
        }
        while ready.load(Ordering::Relaxed) < cfg.threads {
            std::thread::sleep(Duration::from_micros(100));
        }
        let start = Instant::now();
        drop(closed);
        std::thread::sleep(cfg.runtime);
        stop.store(true, Ordering::Relaxed);
        let elapsed = start.elapsed();
        // Watchdog: a lock that deadlocks or loses a wake-up would otherwise
        // hang the sweep in the scope's join. Its threads cannot be
        // unwound, so report and end the process.
        let grace = Duration::from_secs(30).max(cfg.runtime * 20);
        while finished.load(Ordering::Relaxed) < cfg.threads {
            if start.elapsed() > elapsed + grace {
                eprintln!(
                    "locktest: {}: {} of {} threads still inside the lock {:.0}s after \
                     stop: deadlock or lost wake-up",
                    cfg.lock,
                    cfg.threads - finished.load(Ordering::Relaxed),
                    cfg.threads,
                    grace.as_secs_f64()
                );
                std::process::exit(1);
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        Ok(elapsed)
    })?;

    Ok(Sample {
        counts: counts.iter().map(|c| c.load(Ordering::Relaxed)).collect(),
        elapsed,
    })
}
