//! `locktest scenario NAME|all|list`: real systems' lock designs, before
//! and after the change that made them scale, side by side.
//!
//! Each scenario models one system small: the "before" design (a lock,
//! chosen with `--lock`) and the "after" design that replaced it. Per
//! thread count, every round runs all variants back to back (the order
//! reverses each round, so neither side always runs on a warmer machine);
//! the summary shows, per thread count, the median over rounds of after's
//! total op/s over each before's from the same round. Every variant also
//! checks the invariant its design must keep and counts violations; any
//! violation makes the command exit 1. Runs go through the shared harness
//! (`crate::harness`) and end up in the JSON and in charts like the bench's.
//!
//! One file per scenario: [`pmtimer`] (Xen's ACPI PM timer), [`memtype`]
//! (Linux's x86 PAT memtype lock), [`vpt`] (Xen's virtual platform timers
//! after XSA-336), [`gnttab`] (Xen's grant tables), [`p2m`] (Xen's p2m
//! taken nested in the grant table); [`grant_table`] is the grant-table
//! model the last two share, [`record`] keeps the runs, prints them and
//! writes the JSON.

mod gnttab;
mod grant_table;
mod memtype;
mod p2m;
mod pmtimer;
mod record;
mod vpt;

use std::time::Duration;

use crate::args::{self, ScenarioArgs};
use crate::failure::{Failure, Usage};
use crate::harness::{Spec, cores};
use crate::lockstat::LockStat;
use crate::plot;
use crate::stats::Stats;
use crate::stdout::emit;
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

impl Setup {
    /// The harness's run specification.
    pub fn spec(&self) -> Spec<'_> {
        Spec::new(&self.what, self.threads, self.runtime)
    }
}

/// What a variant measured and checked.
pub struct Outcome {
    /// Per-thread operation counts and what follows.
    pub stats: Stats,
    /// Scenario-specific numbers (name, value), printed and stored.
    pub metrics: Vec<(&'static str, f64)>,
    /// Broken invariants; must be 0.
    pub violations: u64,
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

/// Every scenario, in the order they were added.
pub static SCENARIOS: &[Scenario] = &[
    pmtimer::SCENARIO,
    memtype::SCENARIO,
    vpt::SCENARIO,
    gnttab::SCENARIO,
    p2m::SCENARIO,
];

/// `before_fn!(name, function, Data)`: `function::<Lock<Data>>` for the
/// registry lock called `name`, as a [`RunFn`] (one monomorphized loop per
/// lock, as in the bench), through the registry's visit.
macro_rules! before_fn {
    ($name:expr, $f:ident, $data:ty) => {{
        struct Before;
        impl $crate::locks::Visit for Before {
            type Out = $crate::scenarios::RunFn;
            fn visit<F: $crate::locks::Family>(self) -> Self::Out {
                $f::<F::Of<$data>>
            }
        }
        $crate::locks::visit($name, Before)
    }};
}
use before_fn;

/// `locktest scenario ...`: validate, run, print, write the JSON and charts.
pub fn command(args: &ScenarioArgs) -> Result<(), Failure> {
    if args.name == "list" {
        let given: Vec<&str> = [
            (!args.lock.is_empty(), "--lock"),
            (!args.threads.is_empty(), "--threads"),
            (args.json.is_some(), "--json"),
            (args.stats, "--stats"),
            (args.runtime.is_some(), "--runtime"),
            (args.rounds.is_some(), "--rounds"),
            (args.out.is_some(), "--out"),
            (args.no_plots, "--no-plots"),
        ]
        .into_iter()
        .filter_map(|(given, flag)| given.then_some(flag))
        .collect();
        if !given.is_empty() {
            return Err(Usage(format!(
                "{}: `scenario list` only lists the scenarios (run one with `scenario NAME`)",
                given.join(", ")
            ))
            .into());
        }
        for s in SCENARIOS {
            emit(&format!("{:<8}  {}\n", s.name, s.about));
        }
        return Ok(());
    }
    let chosen: Vec<&Scenario> = if args.name == "all" {
        if args.json.is_some() {
            return Err(Usage(
                "--json: `scenario all` writes one file per scenario, OUT/scenario-NAME.json \
                 (choose OUT with --out)"
                    .into(),
            )
            .into());
        }
        SCENARIOS.iter().collect()
    } else {
        let sc = SCENARIOS
            .iter()
            .find(|s| s.name == args.name)
            .ok_or_else(|| {
                let known: Vec<&str> = SCENARIOS.iter().map(|s| s.name).collect();
                Usage(format!(
                    "unknown scenario '{}' (known: {}, all, list)",
                    args.name,
                    known.join(", ")
                ))
            })?;
        vec![sc]
    };
    let c = cores();
    let threads = args::thread_list(&args.threads, vec![1, c, 8 * c])?;
    let runtime = args::check_seconds("--runtime", args.runtime.unwrap_or(0.5))?;
    let rounds = args::check_rounds(args.rounds.unwrap_or(3))?;
    let out_dir = args.out.clone().unwrap_or_else(|| "locktest-report".into());
    let lockstat = LockStat::new(args.stats)?;
    if lockstat.on() && !args.quiet {
        eprintln!(
            "locktest: --stats: scalelock's locks count every acquisition; \
             their rates include that cost"
        );
    }
    // Every lock name is checked before anything runs.
    let plans: Vec<(&Scenario, Vec<Variant>)> = chosen
        .into_iter()
        .map(|sc| Ok((sc, variants(sc, &args.lock)?)))
        .collect::<Result<_, Usage>>()?;

    // Refuse an unwritable destination now, not after the runs.
    for (sc, _) in &plans {
        let json = args
            .json
            .clone()
            .unwrap_or_else(|| out_dir.join(format!("scenario-{}.json", sc.name)));
        crate::json::check_writable(&json).map_err(Usage)?;
        // The charts go to OUT even when --json names another place.
        if !args.no_plots {
            let chart = out_dir.join(format!("throughput-scenario-{}.svg", sc.name));
            crate::json::check_writable(&chart).map_err(Usage)?;
        }
    }
    let mut failed = Vec::new();
    for (sc, variants) in plans {
        let report = run(sc, &variants, &threads, runtime, rounds, &lockstat)?;
        let json = args
            .json
            .clone()
            .unwrap_or_else(|| out_dir.join(format!("scenario-{}.json", sc.name)));
        report.write(&json).map_err(Failure::Run)?;
        let mut wrote = vec![json];
        if !args.no_plots {
            let panel = report.panel();
            wrote.extend(plot::draw_all(&[panel], &out_dir).map_err(Failure::Run)?);
        }
        if !args.quiet {
            for f in wrote {
                eprintln!("locktest: wrote {}", f.display());
            }
        }
        if report.violations() > 0 {
            failed.push(format!(
                "{}: {} invariant violations",
                sc.name,
                report.violations()
            ));
        }
    }
    if failed.is_empty() {
        Ok(())
    } else {
        Err(Failure::Run(failed.join("; ")))
    }
}

/// A variant: its name, its before lock (none for after), its run.
type Variant = (String, Option<String>, RunFn);

/// The before variants for `locks` (default: the scenario's), then after.
fn variants(sc: &Scenario, locks: &[String]) -> Result<Vec<Variant>, Usage> {
    let locks: Vec<String> = if locks.is_empty() {
        sc.default_locks.iter().map(|s| s.to_string()).collect()
    } else {
        locks.to_vec()
    };
    let mut out: Vec<Variant> = Vec::new();
    for l in &locks {
        let run = (sc.before)(l).ok_or_else(|| args::unknown_lock(l))?;
        let name = format!("before-{l}");
        if !out.iter().any(|v| v.0 == name) {
            out.push((name, Some(l.clone()), run));
        }
    }
    out.push((sc.after_name.to_string(), None, sc.after));
    Ok(out)
}

/// Runs every variant of `sc` at every thread count for `rounds` rounds,
/// printing each run and the summary.
fn run(
    sc: &Scenario,
    variants: &[Variant],
    threads: &[usize],
    runtime: f64,
    rounds: u32,
    lockstat: &LockStat,
) -> Result<Report, Failure> {
    let mut runs = Vec::new();
    for &t in threads {
        for round in 1..=rounds {
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
                lockstat.begin();
                let out = run(&setup).map_err(Failure::Run)?;
                let mut rec = ScenarioRun::new(sc.name, variant, lock.clone(), runtime, round, out);
                let mut text = rec.seed_lines();
                let title = format!("{} t={t} round {round}", setup.what);
                if let Some(got) = lockstat.end(&title) {
                    text.push_str(&got.text);
                    rec.lockstat = Some(got.snapshot);
                }
                emit(&text);
                runs.push(rec);
            }
        }
    }
    let report = Report::new(sc.name, runtime, rounds, runs);
    emit(&report.summary());
    Ok(report)
}

/// Test support: runs `attempt` (a short run of a broken design) until it
/// reports a violation, for up to 30 s. A fixed number of tries was
/// flaky on a loaded 2-CPU machine, where the threads that must overlap
/// seldom ran at once; with the time bound a quiet machine still catches
/// it in the first try or so, and a loaded one keeps trying.
#[cfg(test)]
pub(crate) fn caught_within_30s(mut attempt: impl FnMut() -> bool) -> bool {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        if attempt() {
            return true;
        }
        if std::time::Instant::now() >= deadline {
            return false;
        }
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
