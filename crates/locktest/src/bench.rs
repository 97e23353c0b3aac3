//! One benchmark run: N threads hammer one lock for a fixed time, with one
//! of two workloads.
//!
//! - `lock` (Linux locktest's workload, as in the powerpc qspinlock
//!   thread): pick read or write with the thread's own PRNG against `r%`
//!   (mutexes always write), take the lock, do `load`
//!   units of dependent arithmetic on the protected data (writes mutate it,
//!   reads only read it), release, count one operation.
//! - `kv`: a key-value mix over a `HashMap<u64, u64>` behind the lock
//!   ([`crate::kv`]).
//!
//! Counts stay in a register during the run and come back through the
//! harness's join, so counting never writes a line another thread touches.

use std::hint::black_box;
use std::time::Duration;

use crossbeam_utils::CachePadded;

use crate::harness::{self, Quiet, Spec};
use crate::kv::{self, KvMix};
use crate::lockable::{Kind, LockRole, Lockable};
use crate::locks::{self, Family, Visit};
use crate::pct::Pct;
use crate::rng::Rng;
use crate::stats::Stats;

/// The data every `lock`-workload run protects: a small state a writer
/// advances and a reader folds, so the critical section touches the lock's
/// neighbour line the way real protected data does.
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

    /// `load` units of reader work: the writer's chain step for step,
    /// seeded from the protected data, whose result is only observed
    /// (black_box), never stored, so a read holds the lock as long as a
    /// write.
    #[inline]
    fn read(&self, load: u32) {
        let mut a = self.a;
        let mut b = self.b;
        for _ in 0..black_box(load) {
            a = a
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            b ^= a >> 29;
        }
        black_box((a, b));
    }
}

/// What the threads do in a run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Workload {
    /// Linux locktest's workload: `load` units of work under the lock.
    Lock,
    /// Key-value operations on a `HashMap` behind the lock.
    Kv(KvMix),
}

impl Workload {
    /// `lock` or `kv`, as in JSON and file names.
    pub fn name(self) -> &'static str {
        match self {
            Workload::Lock => "lock",
            Workload::Kv(_) => "kv",
        }
    }
}

/// What one run measures.
#[derive(Clone, Debug)]
pub struct RunConfig {
    /// The lock's registry name.
    pub lock: &'static str,
    /// Number of worker threads.
    pub threads: usize,
    /// Share of operations that read (`lock`: rwlocks only; `kv`: lookups).
    pub read_pct: Option<Pct>,
    /// Units of work inside each critical section (`lock` workload).
    pub load: u32,
    /// How long the threads run.
    pub runtime: Duration,
    /// What they do.
    pub workload: Workload,
}

/// What one run measured.
#[derive(Clone, Debug)]
pub struct Measured {
    /// Operations per thread and what follows.
    pub stats: Stats,
    /// `kv`: the share of lookups that found their key (`None` without
    /// lookups).
    pub hit_rate: Option<f64>,
}

/// Runs the registry lock `cfg.lock` once under `cfg`.
pub fn run(cfg: &RunConfig) -> Result<Measured, String> {
    locks::visit(cfg.lock, Run(cfg)).ok_or_else(|| format!("unknown lock '{}'", cfg.lock))?
}

/// The visit that monomorphizes the loop for one lock.
struct Run<'a>(&'a RunConfig);

impl Visit for Run<'_> {
    type Out = Result<Measured, String>;
    fn visit<F: Family>(self) -> Self::Out {
        match self.0.workload {
            Workload::Lock => run_lock::<F::Of<BenchData>>(self.0),
            Workload::Kv(mix) => {
                let read = self.0.read_pct.unwrap_or(KvMix::DEFAULT_READ);
                let spec = Spec::new(self.0.lock, self.0.threads, self.0.runtime);
                let (stats, hits) = kv::run::<F::Of<kv::Map>>(&spec, role(self.0), read, mix)?;
                Ok(Measured {
                    stats,
                    hit_rate: hits,
                })
            }
        }
    }
}

/// The role of the run's lock: `bench/NAME`.
fn role(cfg: &RunConfig) -> &'static LockRole {
    static UNKNOWN: LockRole = LockRole::new("bench/?");
    locks::find(cfg.lock).map_or(&UNKNOWN, |l| l.role)
}

/// The `lock` workload with lock type `L`.
fn run_lock<L: Lockable<BenchData>>(cfg: &RunConfig) -> Result<Measured, String> {
    // A line of its own: among the run's locals on the stack, where the
    // lock and its data fell (straddling a line, beside the stop flag or
    // not) changed with each lock type's size and frame.
    let lock = CachePadded::new(L::with_role(BenchData::new(), role(cfg)));
    // Mutexes ignore r%: every operation is a write.
    let read_ppm = match L::KIND {
        Kind::Mutex => 0,
        Kind::RwLock => cfg.read_pct.map_or(0, Pct::ppm),
    };
    let load = cfg.load;
    let spec = Spec::new(cfg.lock, cfg.threads, cfg.runtime);
    let run = harness::run(&spec, &mut Quiet(|| lock.state()), |w| {
        let mut rng = Rng::new(w.index as u64);
        let mut ops = 0u64;
        // An operation counts if it ended before the stop: one still
        // waiting for the lock then ends outside the measured time.
        loop {
            if read_ppm > 0 && rng.chance(read_ppm) {
                lock.with_read(|d| d.read(load));
            } else {
                lock.with_write(|d| d.write(load));
            }
            if w.stopped() {
                break;
            }
            ops += 1;
        }
        (ops, ())
    })?;
    Ok(Measured {
        stats: run.stats(),
        hit_rate: None,
    })
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;
    use crate::lockable::Caps;

    /// This thread's CPU time, seconds.
    fn cpu() -> f64 {
        let t = rustix::time::clock_gettime(rustix::time::ClockId::ThreadCPUTime);
        t.tv_sec as f64 + t.tv_nsec as f64 * 1e-9
    }

    /// The least CPU time `f` took over a few tries.
    fn least(mut f: impl FnMut()) -> f64 {
        (0..7)
            .map(|_| {
                let t = cpu();
                f();
                cpu() - t
            })
            .fold(f64::MAX, f64::min)
    }

    /// Where the last [`Probe`] used lived.
    static PROBED_AT: AtomicUsize = AtomicUsize::new(0);

    /// A parking_lot mutex that notes its own address whenever it is
    /// taken, and holds it `HOLD_MS` milliseconds in each section.
    struct Probe<T, const HOLD_MS: u64 = 0>(parking_lot::Mutex<T>);

    impl<T: Send, const HOLD_MS: u64> Lockable<T> for Probe<T, HOLD_MS> {
        const KIND: Kind = Kind::Mutex;
        const CAPS: Caps = Caps::NONE;
        fn new(value: T) -> Self {
            Probe(parking_lot::Mutex::new(value))
        }
        fn with_write<R>(&self, f: impl FnOnce(&mut T) -> R) -> R {
            PROBED_AT.store(self as *const Self as usize, Ordering::Relaxed);
            self.0.with_write(|d| {
                std::thread::sleep(Duration::from_millis(HOLD_MS));
                f(d)
            })
        }
        fn with_read<R>(&self, f: impl FnOnce(&T) -> R) -> R {
            self.with_write(|d| f(d))
        }
        fn try_with_write<R>(&self, f: impl FnOnce(&mut T) -> R) -> Option<R> {
            self.0.try_with_write(f)
        }
        fn try_with_read<R>(&self, f: impl FnOnce(&T) -> R) -> Option<R> {
            self.0.try_with_read(f)
        }
        fn state(&self) -> String {
            self.0.state()
        }
    }

    /// The measured lock (and the data beside it) starts a cache line of
    /// its own: it lived among the run's locals on the main thread's stack,
    /// next to the stop flag every worker reads once per operation and the
    /// captured `r%` and load, so whether those shared the lock's line (an
    /// extra coherence miss per operation) depended on each lock type's
    /// size and frame layout.
    #[test]
    fn the_measured_lock_has_its_cache_lines_to_itself() {
        let line = std::mem::align_of::<crossbeam_utils::CachePadded<u8>>();
        let cfg = RunConfig {
            lock: "probe",
            threads: 1,
            read_pct: None,
            load: 1,
            runtime: Duration::from_millis(5),
            workload: Workload::Lock,
        };
        run_lock::<Probe<BenchData>>(&cfg).unwrap();
        let at = PROBED_AT.load(Ordering::Relaxed);
        assert_eq!(at % line, 0, "lock workload: lock at {at:#x}");
        let spec = Spec::new("probe", 1, Duration::from_millis(5));
        static ROLE: LockRole = LockRole::new("bench/probe");
        kv::run::<Probe<kv::Map>>(&spec, &ROLE, Pct::whole(50), KvMix::READ_HEAVY).unwrap();
        let at = PROBED_AT.load(Ordering::Relaxed);
        assert_eq!(at % line, 0, "kv workload: lock at {at:#x}");
    }

    /// How long a [`Slow`] section holds its lock, ms.
    const SLOW_MS: u64 = 20;
    const HOLD: Duration = Duration::from_millis(SLOW_MS);

    /// A mutex whose every section holds it for [`HOLD`].
    type Slow<T> = Probe<T, SLOW_MS>;

    /// Only operations that ended inside the measured time count: the
    /// sections are serialized and each holds the lock for `HOLD`, so no
    /// more than `elapsed / HOLD` of them fit. Every thread still waiting
    /// for the lock at the stop went on to finish its section and counted
    /// it (4 threads over 50 ms counted 6 sections of 20 ms: 120 ms of
    /// work, a rate 2.4 times too high).
    #[test]
    fn operations_ending_after_the_stop_do_not_count() {
        let fits = |s: &Stats| s.total as f64 * HOLD.as_secs_f64() <= s.elapsed + 0.001;
        let cfg = RunConfig {
            lock: "slow",
            threads: 4,
            read_pct: None,
            load: 1,
            runtime: Duration::from_millis(50),
            workload: Workload::Lock,
        };
        let s = run_lock::<Slow<BenchData>>(&cfg).unwrap().stats;
        assert!(
            fits(&s),
            "lock: {} ops of {HOLD:?} in {}s",
            s.total,
            s.elapsed
        );
        let spec = Spec::new("slow", 4, Duration::from_millis(50));
        static ROLE: LockRole = LockRole::new("bench/slow");
        let (s, _) =
            kv::run::<Slow<kv::Map>>(&spec, &ROLE, Pct::whole(50), KvMix::READ_HEAVY).unwrap();
        assert!(
            fits(&s),
            "kv: {} ops of {HOLD:?} in {}s",
            s.total,
            s.elapsed
        );
    }

    /// `r%` must change only who holds the lock, not for how long: a read's
    /// `load` units cost what a write's do (they were a multiply-add plus a
    /// shift-xor on the dependent chain against a writer's multiply-add,
    /// about 1.5x as long).
    #[test]
    #[cfg_attr(any(miri, debug_assertions), ignore)]
    fn a_read_unit_costs_what_a_write_unit_costs() {
        const LOAD: u32 = 2_000_000;
        let mut d = BenchData::new();
        let w = least(|| d.write(LOAD));
        let r = least(|| d.read(LOAD));
        let ratio = r / w;
        assert!(
            (0.8..1.25).contains(&ratio),
            "a read's critical section is {ratio:.2}x a write's (read {r:.4}s, write {w:.4}s)"
        );
    }
}
