//! The timed run every scenario variant uses: N threads start together at a
//! gate, each runs its own loop until the stop flag, and hands back its
//! operation count and whatever it checked on the way.

use std::sync::PoisonError;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use crate::bench::Sample;

/// A tiny xorshift64* generator: per thread, no shared state.
pub struct Rng(u64);

impl Rng {
    /// A generator for thread `i` (never the stuck-at-zero state).
    pub fn new(i: usize) -> Self {
        Rng((i as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }

    /// The next 64 random bits.
    #[inline]
    pub fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// A number in `0..n` (`n > 0`).
    #[inline]
    pub fn below(&mut self, n: usize) -> usize {
        ((self.next() >> 32) % n as u64) as usize
    }
}

/// This thread's CPU time, seconds.
fn thread_cpu() -> f64 {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::ThreadCPUTime);
    t.tv_sec as f64 + t.tv_nsec as f64 * 1e-9
}

/// What the threads did: operations and time, their findings, and the CPU
/// time they got.
pub struct Timed<R> {
    /// Per-thread operation counts and the measured run time.
    pub sample: Sample,
    /// Each thread's findings, in thread order.
    pub found: Vec<R>,
    /// CPU seconds all threads used inside `work`.
    pub cpu: f64,
}

/// Runs `work(thread, stop)` on `threads` threads for `runtime`. `work`
/// loops until `stop` is set and returns its operation count and its own
/// findings `R`. A thread that is not out 30 s (or 20 runtimes) after the
/// stop is a deadlock: report it and end the process, as the bench does.
pub fn timed<R, F>(
    what: &str,
    threads: usize,
    runtime: Duration,
    work: F,
) -> Result<Timed<R>, String>
where
    R: Send,
    F: Fn(usize, &AtomicBool) -> (u64, R) + Sync,
{
    let stop = AtomicBool::new(false);
    // Main holds the gate exclusively until every thread waits for a shared
    // hold (a `Barrier` cannot be released if a spawn fails midway).
    let gate = std::sync::RwLock::new(());
    let ready = AtomicUsize::new(0);
    let finished = AtomicUsize::new(0);
    std::thread::scope(|s| {
        let closed = gate.write().unwrap_or_else(PoisonError::into_inner);
        let mut handles = Vec::with_capacity(threads);
        for i in 0..threads {
            let (stop, gate, ready, finished, work) = (&stop, &gate, &ready, &finished, &work);
            let spawned = std::thread::Builder::new()
                .name(format!("scenario-{i}"))
                .spawn_scoped(s, move || {
                    // Relaxed: head counts only; the gate orders the start
                    // and the join publishes the results.
                    ready.fetch_add(1, Ordering::Relaxed);
                    drop(gate.read().unwrap_or_else(PoisonError::into_inner));
                    let cpu = thread_cpu();
                    let (ops, found) = work(i, stop);
                    let cpu = thread_cpu() - cpu;
                    finished.fetch_add(1, Ordering::Relaxed);
                    (ops, found, cpu)
                });
            match spawned {
                Ok(h) => handles.push(h),
                Err(e) => {
                    stop.store(true, Ordering::Relaxed);
                    drop(closed);
                    return Err(format!("cannot spawn thread {i} of {threads}: {e}"));
                }
            }
        }
        while ready.load(Ordering::Relaxed) < threads {
            std::thread::sleep(Duration::from_micros(100));
        }
        let start = Instant::now();
        drop(closed);
        std::thread::sleep(runtime);
        // Relaxed: "stop soon"; results travel through the joins.
        stop.store(true, Ordering::Relaxed);
        let elapsed = start.elapsed();
        let grace = Duration::from_secs(30).max(runtime * 20);
        while finished.load(Ordering::Relaxed) < threads {
            if start.elapsed() > elapsed + grace {
                eprintln!(
                    "locktest: {what}: {} of {threads} threads still running {:.0}s after \
                     stop: deadlock or lost wake-up",
                    threads - finished.load(Ordering::Relaxed),
                    grace.as_secs_f64()
                );
                std::process::exit(1);
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        let mut counts = Vec::with_capacity(threads);
        let mut found = Vec::with_capacity(threads);
        let mut cpu = 0.0;
        for h in handles {
            let (ops, r, c) = h
                .join()
                .map_err(|_| format!("{what}: a worker thread panicked"))?;
            counts.push(ops);
            found.push(r);
            cpu += c;
        }
        Ok(Timed {
            sample: Sample { counts, elapsed },
            found,
            cpu,
        })
    })
}
