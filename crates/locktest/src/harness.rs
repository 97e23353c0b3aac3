//! The one harness every timed run goes through: a bench run, a scenario
//! variant, a torture run.
//!
//! 1. **Start gate.** Every worker thread is spawned, says it is ready and
//!    waits for a shared hold of the gate, which the main thread holds
//!    exclusively until all are waiting; then they all start together.
//!    (A `Barrier` cannot be released if spawning a thread fails midway.)
//! 2. **Timer.** The main thread sleeps for the run time, waking early only
//!    when the run's [`Monitor`] asked for a tick (torture prints its
//!    periodic lines, stutters and shuffles there), then sets the stop flag.
//!    The measured time runs from the gate opening to the stop flag.
//! 3. **Watchdog.** Every worker must notice the flag and come back within
//!    a grace period. A lock that deadlocks or loses a wake-up keeps its
//!    threads inside forever; they cannot be unwound, so the watchdog prints
//!    what the monitor knows (the lock's state) and ends the process with
//!    exit code 1.
//! 4. **Results.** Each worker returns its operation count and its own
//!    findings; the join hands them over, with the CPU time each thread got.

use std::sync::PoisonError;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use crate::stats::Stats;

/// CPUs this process may run on.
pub fn cores() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// What to run: how many threads, for how long, named how in messages.
pub struct Spec<'a> {
    /// `lock`, `scenario/variant`: names the run in messages.
    pub what: &'a str,
    /// Worker threads.
    pub threads: usize,
    /// How long they run.
    pub runtime: Duration,
    /// How long after the stop flag every thread must be out.
    pub grace: Duration,
}

impl<'a> Spec<'a> {
    /// A run with the default grace: 30 s or 20 run times, whichever is longer.
    pub fn new(what: &'a str, threads: usize, runtime: Duration) -> Self {
        Spec {
            what,
            threads,
            runtime,
            grace: Duration::from_secs(30).max(runtime * 20),
        }
    }
}

/// What a worker thread is told: who it is and when to stop.
pub struct Worker<'a> {
    /// This thread's index, `0..threads`.
    pub index: usize,
    stop: &'a AtomicBool,
}

impl Worker<'_> {
    /// Whether the run is over: check it once per operation.
    #[inline]
    pub fn stopped(&self) -> bool {
        // Relaxed: the flag only says "stop soon"; results travel through
        // the join, not through this flag.
        self.stop.load(Ordering::Relaxed)
    }
}

/// What the monitor wants after a tick.
pub enum Tick {
    /// Call `tick` again after this long.
    After(Duration),
    /// No more ticks; sleep until the run time is over.
    Idle,
    /// End the run now.
    Stop,
}

/// The main thread's part of a run, while the workers work.
pub trait Monitor {
    /// Called once when the gate opens (`elapsed` zero) and then whenever
    /// the previous call asked.
    fn tick(&mut self, elapsed: Duration) -> Tick {
        let _ = elapsed;
        Tick::Idle
    }
    /// Called right after the stop flag is set (resume paused threads...).
    fn stopping(&mut self) {}
    /// Called when threads are still inside `grace` after the stop, just
    /// before the process exits: the lines that help find out why (the
    /// lock's state).
    fn hung(&mut self) -> String {
        String::new()
    }
}

/// A run with no ticks that reports `state()` (the lock's state) if it
/// hangs: what bench runs and scenario variants use.
pub struct Quiet<F: FnMut() -> String>(pub F);

impl<F: FnMut() -> String> Monitor for Quiet<F> {
    fn hung(&mut self) -> String {
        (self.0)()
    }
}

/// What the threads did.
pub struct Timed<R> {
    /// Operations per thread, in thread order.
    pub counts: Vec<u64>,
    /// From the gate opening to the stop flag.
    pub elapsed: Duration,
    /// CPU seconds each thread used inside `work`, in thread order.
    pub cpu: Vec<f64>,
    /// Each thread's own findings, in thread order.
    pub found: Vec<R>,
}

impl<R> Timed<R> {
    /// The run's statistics.
    pub fn stats(&self) -> Stats {
        self.stats_of(0..self.counts.len())
    }

    /// The statistics of some of the threads (one role of a torture run).
    pub fn stats_of(&self, threads: std::ops::Range<usize>) -> Stats {
        let cpu = self.cpu[threads.clone()].iter().sum();
        Stats::new(self.counts[threads].to_vec(), self.elapsed, cpu, cores())
    }
}

/// This thread's CPU time, seconds.
fn thread_cpu() -> f64 {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::ThreadCPUTime);
    t.tv_sec as f64 + t.tv_nsec as f64 * 1e-9
}

/// Counts a worker out when it leaves `work`, even by a panic, so the
/// watchdog does not mistake a panic for a hang.
struct Finished<'a>(&'a AtomicUsize);

impl Drop for Finished<'_> {
    fn drop(&mut self) {
        // Relaxed: a head count for the watchdog; the join publishes results.
        self.0.fetch_add(1, Ordering::Relaxed);
    }
}

/// Runs `work` on `spec.threads` threads for `spec.runtime` (see the module
/// docs). `work` loops until [`Worker::stopped`] and returns its operation
/// count and its findings.
pub fn run<R, W, M>(spec: &Spec, monitor: &mut M, work: W) -> Result<Timed<R>, String>
where
    R: Send,
    W: Fn(&Worker) -> (u64, R) + Sync,
    M: Monitor + ?Sized,
{
    let stop = AtomicBool::new(false);
    let gate = std::sync::RwLock::new(());
    let ready = AtomicUsize::new(0);
    let finished = AtomicUsize::new(0);
    let threads = spec.threads;
    std::thread::scope(|s| {
        let closed = gate.write().unwrap_or_else(PoisonError::into_inner);
        let mut handles = Vec::with_capacity(threads);
        for index in 0..threads {
            let (stop, gate, ready, finished, work) = (&stop, &gate, &ready, &finished, &work);
            let spawned = std::thread::Builder::new()
                .name(format!("locktest-{index}"))
                .spawn_scoped(s, move || {
                    let _out = Finished(finished);
                    // Relaxed: a head count; the gate orders the start.
                    ready.fetch_add(1, Ordering::Relaxed);
                    drop(gate.read().unwrap_or_else(PoisonError::into_inner));
                    let cpu = thread_cpu();
                    let (ops, found) = work(&Worker { index, stop });
                    (ops, found, thread_cpu() - cpu)
                });
            match spawned {
                Ok(h) => handles.push(h),
                Err(e) => {
                    // Let the threads already spawned through into a run
                    // that stops at once; the scope joins them.
                    stop.store(true, Ordering::Relaxed);
                    drop(closed);
                    return Err(format!("cannot spawn thread {index} of {threads}: {e}"));
                }
            }
        }
        while ready.load(Ordering::Relaxed) < threads {
            std::thread::sleep(Duration::from_micros(100));
        }
        let start = Instant::now();
        drop(closed);
        let elapsed = time(spec.runtime, start, monitor);
        // Relaxed: "stop soon"; results travel through the joins.
        stop.store(true, Ordering::Relaxed);
        monitor.stopping();
        watch(spec, &finished, monitor);
        let mut out = Timed {
            counts: Vec::with_capacity(threads),
            elapsed,
            cpu: Vec::with_capacity(threads),
            found: Vec::with_capacity(threads),
        };
        // Every handle is joined: one left to the scope that panicked
        // would make the scope panic, ending the process.
        let mut panicked = Vec::new();
        for (i, h) in handles.into_iter().enumerate() {
            match h.join() {
                Ok((ops, found, cpu)) => {
                    out.counts.push(ops);
                    out.found.push(found);
                    out.cpu.push(cpu);
                }
                Err(_) => panicked.push(i.to_string()),
            }
        }
        match panicked.as_slice() {
            [] => Ok(out),
            [i] => Err(format!("{}: worker thread {i} panicked", spec.what)),
            many => Err(format!(
                "{}: worker threads {} panicked",
                spec.what,
                many.join(", ")
            )),
        }
    })
}

/// Sleeps out the run time from `start`, ticking the monitor when it asks;
/// returns the time run.
fn time<M: Monitor + ?Sized>(runtime: Duration, start: Instant, monitor: &mut M) -> Duration {
    let mut next = match monitor.tick(Duration::ZERO) {
        Tick::After(d) => Some(d),
        Tick::Idle => None,
        Tick::Stop => return start.elapsed(),
    };
    loop {
        let now = start.elapsed();
        if now >= runtime {
            return now;
        }
        let wake = next.map_or(runtime, |n| n.min(runtime));
        if wake > now {
            std::thread::sleep(wake - now);
            continue;
        }
        let now = start.elapsed();
        next = match monitor.tick(now) {
            Tick::After(d) => Some(now + d),
            Tick::Idle => None,
            Tick::Stop => return now,
        };
    }
}

/// The watchdog: waits for every worker to be out, or reports and exits.
fn watch<M: Monitor + ?Sized>(spec: &Spec, finished: &AtomicUsize, monitor: &mut M) {
    let stopped = Instant::now();
    while finished.load(Ordering::Relaxed) < spec.threads {
        if stopped.elapsed() > spec.grace {
            let stuck = spec.threads - finished.load(Ordering::Relaxed);
            let extra = monitor.hung();
            eprintln!(
                "locktest: {}: {stuck} of {} threads still inside {:.0}s after stop: \
                 deadlock or lost wake-up",
                spec.what,
                spec.threads,
                spec.grace.as_secs_f64()
            );
            if !extra.is_empty() {
                eprintln!("{}", extra.trim_end());
            }
            std::process::exit(1);
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_thread_runs_and_reports() {
        let spec = Spec::new("test", 3, Duration::from_millis(20));
        let run = run(&spec, &mut Quiet(String::new), |w| {
            let mut n = 0u64;
            while !w.stopped() {
                n += 1;
                std::hint::spin_loop();
            }
            (n, w.index)
        })
        .unwrap();
        assert_eq!(run.found, [0, 1, 2]);
        assert!(run.counts.iter().all(|&c| c > 0));
        assert!(run.elapsed >= Duration::from_millis(20));
        assert_eq!(run.stats().threads, 3);
    }

    /// Ticks when asked and stops the run early on request.
    struct Ticker(Vec<Duration>);

    impl Monitor for Ticker {
        fn tick(&mut self, elapsed: Duration) -> Tick {
            self.0.push(elapsed);
            if self.0.len() == 3 {
                Tick::Stop
            } else {
                Tick::After(Duration::from_millis(5))
            }
        }
    }

    #[test]
    fn the_monitor_ticks_and_can_stop_early() {
        let spec = Spec::new("test", 1, Duration::from_secs(10));
        let mut ticker = Ticker(Vec::new());
        let run = run(&spec, &mut ticker, |w| {
            while !w.stopped() {
                std::thread::yield_now();
            }
            (1, ())
        })
        .unwrap();
        assert_eq!(ticker.0.len(), 3);
        assert!(ticker.0[2] >= Duration::from_millis(10));
        assert!(run.elapsed < Duration::from_secs(5));
    }

    #[test]
    fn a_panicking_worker_is_an_error_not_a_hang() {
        let spec = Spec::new("test", 2, Duration::from_millis(5));
        let run = run(&spec, &mut Quiet(String::new), |w| {
            if w.index == 1 {
                panic!("worker 1 fails on purpose");
            }
            (0, ())
        });
        assert!(run.err().unwrap().contains("panicked"));
    }

    /// Two panicking workers: an error too, not a panic of the whole run
    /// (the scope panics if a panicked thread is left for it to join).
    #[test]
    fn panicking_workers_are_an_error_not_a_crash() {
        let spec = Spec::new("test", 3, Duration::from_millis(5));
        let run = run(&spec, &mut Quiet(String::new), |w| {
            if w.index > 0 {
                panic!("worker {} fails on purpose", w.index);
            }
            (0, ())
        });
        let err = run.err().unwrap();
        assert!(err.contains("worker threads 1, 2 panicked"), "{err}");
    }
}
