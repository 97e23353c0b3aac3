//! `locktest torture`: Linux locktorture for user-space locks.
//!
//! For each lock, writer threads and reader threads (8× as many threads as
//! CPUs by default) run an operation mix ([`ops`]) whose critical sections
//! check invariants only a working lock keeps ([`checks`]), with now and
//! then a long hold, optionally under stutter and CPU shuffling
//! ([`perturb`]) and inside nested locks. Statistics lines come every
//! `--stat-interval` and at the end, then `End of test: SUCCESS` or
//! `End of test: FAILURE` ([`output`]); the exit code is 1 if any lock
//! failed. `busted`, a lock that does not lock, is the negative control:
//! it must fail. Before its threads start, each lock is probed where the
//! answer is known ([`probe`]): on a free lock every try and timed try
//! gets in, on a lock another thread holds for 400 ms every try misses and
//! a timed try gives up after its timeout and well before the holder lets
//! go, and a timed upgrade under a reader times out still holding its
//! upgradable read (a threaded run cannot tell a try that never succeeds
//! from contention). `mutants` (tests) breaks a correct lock one way at a
//! time and checks that the torture fails each.
//!
//! [`run`] tortures one lock; this file validates the flags, runs every
//! lock and writes the JSON.

mod checks;
#[cfg(test)]
mod mutants;
mod ops;
mod output;
mod perturb;
mod probe;
mod run;

use crate::args::{self, MAX_THREADS, TortureArgs};
use crate::busted::Busted;
use crate::failure::{Failure, Usage};
use crate::harness::cores;
use crate::json::write_json;
use crate::locks::{self, Family, Visit};
use checks::TortureData;
use output::{Params, Record};

/// The negative control's name.
pub const BUSTED: &str = "busted";

/// The most nested locks.
const MAX_NESTED: usize = 8;

/// Runs the torture of the registry lock family it visits.
struct Torture<'a> {
    name: &'a str,
    params: &'a Params,
}

impl Visit for Torture<'_> {
    type Out = Result<Record, String>;
    fn visit<F: Family>(self) -> Self::Out {
        run::run::<F::Of<TortureData>>(self.name, self.params)
    }
}

/// Writers (and readers) per lock when not given: 4×cores, capped so that
/// the two together stay within [`MAX_THREADS`] (on a machine of more than
/// 512 CPUs, 8×cores made the run with no flags fail with "--writers,
/// --readers: more than 4096 threads", as `thread_list`'s defaults did).
fn default_role_threads(cores: usize) -> usize {
    (4 * cores).min(MAX_THREADS / 2)
}

/// Checks the flags.
fn params(a: &TortureArgs) -> Result<Params, Usage> {
    let default = default_role_threads(cores());
    let (writers, readers) = match a.threads {
        Some(t) => {
            let t = args::check_threads("--threads", t)?;
            (t.div_ceil(2), t / 2)
        }
        None => (a.writers.unwrap_or(default), a.readers.unwrap_or(default)),
    };
    let Some(total) = writers.checked_add(readers).filter(|&t| t <= MAX_THREADS) else {
        return Err(Usage(format!(
            "--writers, --readers: more than {MAX_THREADS} threads"
        )));
    };
    if writers == 0 || total < 2 {
        return Err(Usage(
            "--writers, --readers, --threads: at least one writer and two threads \
             (with fewer, no lock can fail)"
                .into(),
        ));
    }
    if a.nested > MAX_NESTED {
        return Err(Usage(format!(
            "--nested: at most {MAX_NESTED}, not {}",
            a.nested
        )));
    }
    if a.long_hold_ms > 10_000 {
        return Err(Usage("--long-hold-ms: at most 10000".into()));
    }
    for (flag, v) in [("--stutter", a.stutter), ("--shuffle", a.shuffle)] {
        if v.is_some_and(|ms| ms == 0 || ms > 60_000) {
            return Err(Usage(format!("{flag}: milliseconds from 1 to 60000")));
        }
    }
    Ok(Params {
        writers,
        readers,
        duration: args::check_seconds("--duration", a.duration)?,
        long_hold_ms: a.long_hold_ms,
        stutter_ms: a.stutter,
        shuffle_ms: a.shuffle,
        nested: a.nested,
        stat_interval: match args::check_seconds("--stat-interval", a.stat_interval)? {
            // Every 10 ms is already a line per lock per second a hundred
            // times over; shorter floods the output and steals the CPUs.
            s if s < 0.01 => {
                return Err(Usage(format!(
                    "--stat-interval: at least 0.01 seconds, not {s}"
                )));
            }
            s => s,
        },
        stall_s: args::check_seconds("--stall-s", a.stall_s)?,
    })
}

/// `locktest torture ...`.
pub fn command(a: &TortureArgs) -> Result<(), Failure> {
    let p = params(a)?;
    let names: Vec<&str> = if a.lock.is_empty() {
        locks::REGISTRY.iter().map(|l| l.name).collect()
    } else {
        for n in &a.lock {
            if n != BUSTED && locks::find(n).is_none() {
                return Err(Usage(format!(
                    "unknown lock '{n}' (known: {}, and {BUSTED})",
                    locks::names()
                ))
                .into());
            }
        }
        // A lock named twice runs once (as `bench --lock` does), in the
        // order first named.
        let mut names: Vec<&str> = Vec::new();
        for n in &a.lock {
            if !names.contains(&n.as_str()) {
                names.push(n);
            }
        }
        names
    };
    if let Some(path) = &a.json {
        crate::json::check_writable(path).map_err(Usage)?;
    }
    let mut records: Vec<Record> = Vec::new();
    for name in names {
        let record = if name == BUSTED {
            run::run::<Busted<TortureData>>(name, &p)
        } else {
            locks::visit(name, Torture { name, params: &p })
                .unwrap_or_else(|| Err(format!("unknown lock '{name}'")))
        }
        .map_err(|e| Failure::Run(format!("torture {name}: {e}")))?;
        records.push(record);
        // Written after every lock, so a later hang loses nothing done.
        if let Some(path) = &a.json {
            write_json(&records, path).map_err(Failure::Run)?;
        }
    }
    let failed: Vec<&str> = records
        .iter()
        .filter(|r| !r.passed())
        .map(|r| r.lock.as_str())
        .collect();
    if failed.is_empty() {
        Ok(())
    } else {
        Err(Failure::Run(format!(
            "torture failed for: {}",
            failed.join(", ")
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The defaults on a big machine: 600 CPUs asked for 2 × 2400 threads.
    #[test]
    fn default_threads_on_a_big_machine_fit() {
        let d = default_role_threads(600);
        assert!(2 * d <= MAX_THREADS, "{d} writers and {d} readers");
        assert_eq!(default_role_threads(2), 8);
    }

    fn quick(writers: usize, readers: usize) -> Params {
        Params {
            writers,
            readers,
            duration: 0.3,
            long_hold_ms: 5,
            stutter_ms: Some(20),
            shuffle_ms: Some(5),
            nested: 2,
            stat_interval: 0.1,
            stall_s: 10.0,
        }
    }

    #[test]
    #[cfg_attr(miri, ignore)]
    fn busted_fails() {
        let r = run::run::<Busted<TortureData>>(BUSTED, &quick(3, 3)).unwrap();
        assert!(!r.passed(), "{r:?}");
        // The threaded checks, not only the probe (busted's tries always
        // get in, so the probe alone lists failures).
        assert!(r.writes.fail + r.reads.fail > 0, "{r:?}");
    }

    /// A mutex whose first write section sleeps for 3 s: a stall the
    /// watch must report, after which the run still ends.
    struct Sleepy<T>(parking_lot::Mutex<T>, std::sync::atomic::AtomicBool);

    impl<T: Send> crate::lockable::Lockable<T> for Sleepy<T> {
        const KIND: crate::lockable::Kind = crate::lockable::Kind::Mutex;
        const CAPS: crate::lockable::Caps = crate::lockable::Caps::NONE;
        fn new(v: T) -> Self {
            Sleepy(parking_lot::Mutex::new(v), Default::default())
        }
        fn with_write<R>(&self, f: impl FnOnce(&mut T) -> R) -> R {
            let mut g = self.0.lock();
            // Only in the run's threads (not in the probe before it).
            let worker = std::thread::current()
                .name()
                .is_some_and(|n| n.starts_with("locktest-"));
            if worker && !self.1.swap(true, std::sync::atomic::Ordering::Relaxed) {
                std::thread::sleep(std::time::Duration::from_secs(3));
            }
            f(&mut g)
        }
        fn with_read<R>(&self, f: impl FnOnce(&T) -> R) -> R {
            f(&self.0.lock())
        }
        fn try_with_write<R>(&self, f: impl FnOnce(&mut T) -> R) -> Option<R> {
            self.0.try_lock().map(|mut g| f(&mut g))
        }
        fn try_with_read<R>(&self, f: impl FnOnce(&T) -> R) -> Option<R> {
            self.0.try_lock().map(|g| f(&g))
        }
        fn state(&self) -> String {
            format!("sleepy, is_locked = {}", self.0.is_locked())
        }
    }

    #[test]
    fn a_stall_is_reported_and_fails() {
        let p = Params {
            duration: 5.0,
            long_hold_ms: 0,
            stutter_ms: None,
            shuffle_ms: None,
            nested: 0,
            stall_s: 1.0,
            ..quick(2, 2)
        };
        let started = std::time::Instant::now();
        let r = run::run::<Sleepy<TortureData>>("sleepy", &p).unwrap();
        assert!(!r.passed());
        assert!(r.failures[0].starts_with("stall"), "{:?}", r.failures);
        // Stopped at the stall, not at the end of the duration.
        assert!(started.elapsed() < std::time::Duration::from_millis(4_500));
    }

    /// Under stutter too: the pauses do not count towards a stall, but
    /// they do not start its count again either.
    #[test]
    fn a_stall_is_reported_and_fails_under_stutter() {
        let p = Params {
            duration: 5.0,
            long_hold_ms: 0,
            stutter_ms: Some(20),
            shuffle_ms: None,
            nested: 0,
            stall_s: 1.0,
            ..quick(2, 2)
        };
        let started = std::time::Instant::now();
        let r = run::run::<Sleepy<TortureData>>("sleepy", &p).unwrap();
        assert!(!r.passed(), "{r:?}");
        assert!(r.failures[0].starts_with("stall"), "{:?}", r.failures);
        assert!(started.elapsed() < std::time::Duration::from_millis(4_500));
    }

    #[test]
    fn a_real_lock_passes_with_every_perturbation() {
        let r = run::run::<parking_lot::RwLock<TortureData>>("pl-rwlock", &quick(3, 3)).unwrap();
        assert!(r.passed(), "{r:?}");
        assert!(r.writes.stats.total > 0 && r.reads.stats.total > 0);
        assert!(r.ops.contains_key("upgrade") && r.ops.contains_key("timed-read"));
    }
}
