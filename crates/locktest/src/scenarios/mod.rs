//! `locktest scenario NAME`: the seeds' before/after designs, side by side.
//!
//! Each scenario models one seed small: the "before" design (a lock,
//! chosen with `--lock`) and the "after" design that replaced it. Per thread
//! count, every round runs all variants back to back (the order reverses
//! each round, so neither side always runs on a warmer machine); the
//! summary shows, per thread count, the median over rounds of after's total
//! op/s over each before's from the same round. Every variant also checks
//! the invariant its design must keep and counts violations; any violation
//! makes the command exit 1.
//!
//! One file per scenario: [`pmtimer`] (seed 003), [`memtype`] (seed 004),
//! [`vpt`] (seed 002); [`harness`] runs the threads, [`record`] keeps the
//! runs, prints them and writes the JSON.

mod harness;
mod memtype;
mod pmtimer;
mod record;
mod vpt;

use std::path::PathBuf;
use std::time::Duration;

use crate::bench::Sample;
use crate::{Failure, ScenarioArgs, Usage};
use record::{Report, ScenarioRun};

/// One variant's run: `Setup` in, `Outcome` out.
pub type RunFn = fn(&Setup) -> Result<Outcome, String>;

/// What a variant runs with.
pub struct Setup {
    /// Worker threads.
    pub threads: usize,
    /// How long they run.
    pub runtime: Duration,
    /// `scenario/variant`, for messages.
    pub what: String,
}

/// What a variant measured and checked.
pub struct Outcome {
    /// Per-thread operation counts and the measured time.
    pub sample: Sample,
    /// Scenario-specific numbers (name, value), printed and stored.
    pub metrics: Vec<(&'static str, f64)>,
    /// Broken invariants; must be 0.
    pub violations: u64,
    /// CPU seconds the worker threads got.
    pub cpu: f64,
}

/// A scenario: its before design per lock, its after design.
pub struct Scenario {
    /// The name `locktest scenario NAME` takes.
    pub name: &'static str,
    /// One line for `scenario list`.
    pub about: &'static str,
    /// Locks for the before design when `--lock` is not given.
    pub default_locks: &'static [&'static str],
    /// The before design with the registry lock of that name.
    pub before: fn(&str) -> Option<RunFn>,
    /// The after design's variant name.
    pub after_name: &'static str,
    /// The after design.
    pub after: RunFn,
}

/// Every scenario, in the order the seeds were landed.
pub static SCENARIOS: &[Scenario] = &[pmtimer::SCENARIO, memtype::SCENARIO, vpt::SCENARIO];

/// `before_fn!(name, function, Data)`: `function::<Lock<Data>>` for the
/// registry lock called `name`, as a [`RunFn`] (one monomorphized loop per
/// lock, as in the bench). A test keeps this in step with the registry.
macro_rules! before_fn {
    ($name:expr, $f:ident, $data:ty) => {
        match $name {
            "qspinlock" => Some($f::<scalelock::QSpinLock<$data>> as $crate::scenarios::RunFn),
            "qrwlock" => Some($f::<scalelock::QRwLock<$data>> as _),
            "percpu-rwlock" => Some($f::<scalelock::PerCpuRwLock<$data>> as _),
            "std-mutex" => Some($f::<std::sync::Mutex<$data>> as _),
            "std-rwlock" => Some($f::<std::sync::RwLock<$data>> as _),
            "pl-mutex" => Some($f::<parking_lot::Mutex<$data>> as _),
            "pl-fairmutex" => Some($f::<parking_lot::FairMutex<$data>> as _),
            "pl-rwlock" => Some($f::<parking_lot::RwLock<$data>> as _),
            "spin-mutex" => Some($f::<spin::mutex::SpinMutex<$data>> as _),
            "spin-ticket" => Some($f::<spin::mutex::TicketMutex<$data>> as _),
            "spin-rwlock" => Some($f::<spin::RwLock<$data>> as _),
            "sharded" => Some($f::<crossbeam_utils::sync::ShardedLock<$data>> as _),
            _ => None,
        }
    };
}
use before_fn;

/// `locktest scenario ...`: validate, run, print, write the JSON.
pub fn command(args: &ScenarioArgs) -> Result<(), Failure> {
    if args.name == "list" {
        for s in SCENARIOS {
            crate::emit(&format!("{:<8}  {}\n", s.name, s.about));
        }
        return Ok(());
    }
    let names = || SCENARIOS.iter().map(|s| s.name).collect::<Vec<_>>();
    let sc = SCENARIOS
        .iter()
        .find(|s| s.name == args.name)
        .ok_or_else(|| {
            let known = names().join(", ");
            Usage(format!(
                "unknown scenario '{}' (known: {known}, list)",
                args.name
            ))
        })?;
    let locks: Vec<String> = if args.lock.is_empty() {
        sc.default_locks.iter().map(|s| s.to_string()).collect()
    } else {
        args.lock.clone()
    };
    let mut variants = Vec::new();
    for l in &locks {
        let run = (sc.before)(l).ok_or_else(|| {
            Usage(format!(
                "unknown lock '{l}' (known: {})",
                crate::locks::names()
            ))
        })?;
        let name = format!("before-{l}");
        if !variants.iter().any(|v: &(String, _, _)| v.0 == name) {
            variants.push((name, Some(l.clone()), run));
        }
    }
    variants.push((sc.after_name.to_string(), None, sc.after));
    let c = crate::cores();
    let mut threads = if args.threads.is_empty() {
        vec![1, c, 8 * c]
    } else {
        args.threads.clone()
    };
    for t in &mut threads {
        *t = crate::check_threads(*t)?;
    }
    let mut seen = Vec::new();
    threads.retain(|t| {
        !seen.contains(t) && {
            seen.push(*t);
            true
        }
    });
    let runtime = crate::check_seconds("--runtime", args.runtime)?;
    if args.rounds == 0 {
        return Err(Usage("--rounds: must be at least 1".into()).into());
    }

    let mut runs = Vec::new();
    for &t in &threads {
        for round in 1..=args.rounds {
            let mut order: Vec<_> = variants.iter().collect();
            if round.is_multiple_of(2) {
                order.reverse();
            }
            for (variant, lock, run) in order {
                let setup = Setup {
                    threads: t,
                    runtime: Duration::from_secs_f64(runtime),
                    what: format!("{}/{variant}", sc.name),
                };
                let out = run(&setup).map_err(Failure::Run)?;
                let rec = ScenarioRun::new(sc.name, variant, lock.clone(), runtime, round, out);
                crate::emit(&rec.seed_lines());
                runs.push(rec);
            }
        }
    }
    let report = Report::new(sc.name, runtime, args.rounds, runs);
    crate::emit(&report.summary());
    let json = args.json.clone().unwrap_or_else(|| {
        PathBuf::from("locktest-report").join(format!("scenario-{}.json", sc.name))
    });
    report.write(&json).map_err(Failure::Run)?;
    if !args.quiet {
        eprintln!("locktest: wrote {}", json.display());
    }
    match report.violations() {
        0 => Ok(()),
        v => Err(Failure::Run(format!(
            "{}: {v} invariant violations",
            sc.name
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_registry_lock_runs_every_before_design() {
        for s in SCENARIOS {
            for l in crate::locks::REGISTRY {
                assert!((s.before)(l.name).is_some(), "{}: {}", s.name, l.name);
            }
            assert!((s.before)("nope").is_none());
            for d in s.default_locks {
                assert!(crate::locks::find(d).is_some(), "{}: {d}", s.name);
            }
        }
    }
}
