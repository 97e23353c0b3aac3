//! `locktest bench`: every selected lock × thread count × read share, for
//! some rounds, printed in the seed format as it goes, then the summary,
//! the JSON and the charts.
//!
//! Runs are grouped by configuration (threads, r%). Within a group every
//! round runs each lock once, back to back, so a lock and its baseline see
//! the same machine state; the summary compares them round by round. The
//! order reverses every other round (as `scenario`'s does), so that no lock
//! always runs first, or always just before or after its baseline.

use std::time::Duration;

use indicatif::{ProgressBar, ProgressStyle};

use crate::args::{self, BenchArgs, WorkloadArg};
use crate::bench::{self, RunConfig, Workload};
use crate::failure::{Failure, Usage};
use crate::format;
use crate::harness::cores;
use crate::kv::KvMix;
use crate::lockable::Kind;
use crate::locks::LockInfo;
use crate::lockstat::LockStat;
use crate::pct::Pct;
use crate::plot;
use crate::report::{self, Report, RunRecord};
use crate::stdout::emit;

/// A validated sweep.
pub struct Plan {
    /// Locks to run, in registry order.
    pub locks: Vec<&'static LockInfo>,
    /// Thread counts.
    pub threads: Vec<usize>,
    /// Read shares (rwlocks under `lock`; every lock under `kv`).
    pub read_pcts: Vec<Pct>,
    /// Seconds per run.
    pub runtime: f64,
    /// Work units per critical section.
    pub load: u32,
    /// Rounds.
    pub rounds: u32,
    /// What the threads do.
    pub workload: Workload,
    /// No progress bar.
    pub quiet: bool,
    /// `--stats`: lock statistics around every run.
    pub lockstat: LockStat,
}

/// One configuration and the locks that run in it.
struct Group {
    threads: usize,
    read_pct: Option<Pct>,
    locks: Vec<&'static LockInfo>,
}

impl Plan {
    /// Checks the flags and builds the sweep.
    pub fn new(args: &BenchArgs) -> Result<Plan, Usage> {
        let kv = args.workload == WorkloadArg::Kv;
        if !kv && args.kv_writes.is_some() {
            return Err(Usage(
                "--kv-writes: only with --workload kv (the lock workload has no inserts, \
                 updates or removes)"
                    .into(),
            ));
        }
        let load = match (kv, args.load) {
            (true, Some(_)) => {
                return Err(Usage(
                    "--load: only with --workload lock (the kv workload's critical sections \
                     are its map operations)"
                        .into(),
                ));
            }
            (_, Some(n)) if n > args::MAX_LOAD => {
                return Err(Usage(format!(
                    "--load: {n} is more than {} units per critical section",
                    args::MAX_LOAD
                )));
            }
            (_, n) => n.unwrap_or(1),
        };
        let mut locks = args::select_locks(&args.lock)?;
        if kv && args.lock.is_empty() {
            locks.retain(|l| l.kind == Kind::RwLock);
        }
        let c = cores();
        let threads = args::thread_list(&args.threads, vec![1, c, 4 * c, 8 * c])?;
        let mut read_pcts: Vec<Pct> = Vec::new();
        let given = if !args.read_pct.is_empty() {
            args.read_pct.clone()
        } else if kv {
            vec![KvMix::DEFAULT_READ]
        } else {
            [50, 95, 100].map(Pct::whole).to_vec()
        };
        for p in given {
            if !read_pcts.contains(&p) {
                read_pcts.push(p);
            }
        }
        Ok(Plan {
            locks,
            threads,
            read_pcts,
            runtime: args::check_seconds("--runtime", args.runtime)?,
            load,
            rounds: args::check_rounds(args.rounds)?,
            workload: if kv {
                Workload::Kv(args.kv_writes.unwrap_or(KvMix::READ_HEAVY))
            } else {
                Workload::Lock
            },
            quiet: args.quiet,
            lockstat: LockStat::new(args.stats)?,
        })
    }

    fn groups(&self) -> Vec<Group> {
        let of_kind = |k: Kind| -> Vec<&'static LockInfo> {
            self.locks.iter().copied().filter(|l| l.kind == k).collect()
        };
        let mut groups = Vec::new();
        for kind in [Kind::Mutex, Kind::RwLock] {
            let locks = of_kind(kind);
            if locks.is_empty() {
                continue;
            }
            // Under `lock`, mutexes ignore the read share: one group per
            // thread count.
            let shares: Vec<Option<Pct>> = match (self.workload, kind) {
                (Workload::Lock, Kind::Mutex) => vec![None],
                _ => self.read_pcts.iter().copied().map(Some).collect(),
            };
            for &threads in &self.threads {
                for &read_pct in &shares {
                    groups.push(Group {
                        threads,
                        read_pct,
                        locks: locks.clone(),
                    });
                }
            }
        }
        groups
    }

    /// Total number of runs the sweep will make.
    pub fn run_count(&self) -> u64 {
        self.groups()
            .iter()
            .map(|g| g.locks.len() as u64)
            .sum::<u64>()
            * u64::from(self.rounds)
    }

    /// The seed's three lines for one run.
    fn seed_lines(&self, rec: &RunRecord) -> String {
        let head = match (self.workload, rec.read_pct) {
            (Workload::Kv(mix), Some(r)) => {
                format::kv_header(&rec.lock, rec.runtime, r, &mix.describe(r))
            }
            _ => {
                let kind = if rec.read_pct.is_some() {
                    Kind::RwLock
                } else {
                    Kind::Mutex
                };
                format::header(&rec.lock, kind, rec.runtime, rec.read_pct, Some(self.load))
            }
        };
        let s = &rec.stats;
        format!(
            "{head}\n{}\n{}\n\n",
            format::min_mean_max(s.threads, s.min, s.mean, s.max),
            format::rates(s.threads, s.total_rate, s.percpu_rate),
        )
    }

    /// Runs the sweep, printing each run to stdout in the seed format.
    /// Runs the sweep: every run made, and the error that stopped it early
    /// (the runs before it are kept).
    pub fn execute(&self) -> (Vec<RunRecord>, Option<String>) {
        let bar = if self.quiet {
            ProgressBar::hidden()
        } else {
            let bar = ProgressBar::new(self.run_count());
            let style = ProgressStyle::with_template(
                "{bar:30.cyan/blue} {pos}/{len} runs, {elapsed} of ~{duration} {msg}",
            )
            .unwrap_or_else(|_| ProgressStyle::default_bar());
            bar.set_style(style);
            bar
        };
        let mut records = Vec::new();
        for group in self.groups() {
            for round in 1..=self.rounds {
                for info in round_order(&group.locks, round) {
                    let cfg = RunConfig {
                        lock: info.name,
                        threads: group.threads,
                        read_pct: group.read_pct,
                        load: self.load,
                        runtime: Duration::from_secs_f64(self.runtime),
                        workload: self.workload,
                    };
                    let pct = group
                        .read_pct
                        .map(|r| format!(" r%={r}"))
                        .unwrap_or_default();
                    bar.set_message(format!("{} t={}{pct}", info.name, group.threads));
                    self.lockstat.begin();
                    let measured = match bench::run(&cfg) {
                        Ok(m) => m,
                        Err(e) => {
                            bar.finish_and_clear();
                            return (records, Some(format!("{}: {e}", info.name)));
                        }
                    };
                    let mut rec = RunRecord::new(info, &cfg, round, measured);
                    let mut text = self.seed_lines(&rec);
                    let title = format!("{} t={}{pct} round {round}", info.name, group.threads);
                    if let Some(got) = self.lockstat.end(&title) {
                        text.push_str(&got.text);
                        rec.lockstat = Some(got.snapshot);
                    }
                    // A closed stdout (e.g. `| head`) must not stop the sweep.
                    bar.suspend(|| emit(&text));
                    records.push(rec);
                    bar.inc(1);
                }
            }
        }
        bar.finish_and_clear();
        (records, None)
    }

    /// What the summary titles add for the workload.
    fn note(&self) -> String {
        match self.workload {
            Workload::Lock => String::new(),
            Workload::Kv(mix) => format!(
                ", kv workload (r% lookups, the rest insert:update:remove = {mix}, \
                 over {} keys)",
                crate::kv::KEYS
            ),
        }
    }
}

/// The order `locks` run in round `round` (from 1): as given in odd rounds,
/// reversed in even ones.
fn round_order<T: Copy>(locks: &[T], round: u32) -> Vec<T> {
    let mut order = locks.to_vec();
    if round.is_multiple_of(2) {
        order.reverse();
    }
    order
}

/// `locktest bench`: validate, run, print, write the JSON and charts.
pub fn command(args: &BenchArgs) -> Result<(), Failure> {
    let plan = Plan::new(args)?;
    if plan.locks.is_empty() {
        return Err(Usage("--lock: no lock to run".into()).into());
    }
    if plan.lockstat.on() && !args.quiet {
        eprintln!(
            "locktest: --stats: scalelock's locks count every acquisition; \
             their rates include that cost"
        );
    }
    // Refuse an unwritable destination now, not after the whole sweep.
    let json = args
        .json
        .clone()
        .unwrap_or_else(|| args.out.join("results.json"));
    crate::json::check_writable(&json).map_err(|e| Failure::Usage(Usage(e)))?;
    if !args.no_plots {
        std::fs::create_dir_all(&args.out).map_err(|e| {
            Failure::Usage(Usage(format!("cannot create {}: {e}", args.out.display())))
        })?;
    }
    let (runs, stopped) = plan.execute();
    if let Some(e) = &stopped
        && runs.is_empty()
    {
        return Err(Failure::Run(e.clone()));
    }
    emit(&report::summary(&runs, plan.rounds, &plan.note()));

    let rep = Report {
        tool: concat!("locktest ", env!("CARGO_PKG_VERSION")).to_string(),
        cores: cores(),
        workload: plan.workload.name().to_string(),
        kv_writes: match plan.workload {
            Workload::Kv(mix) => Some(mix.to_string()),
            Workload::Lock => None,
        },
        runtime: plan.runtime,
        load: match plan.workload {
            Workload::Lock => Some(plan.load),
            Workload::Kv(_) => None,
        },
        rounds: plan.rounds,
        lock_stats: plan.lockstat.on(),
        medians: report::medians(&runs),
        runs,
        stopped_early: stopped.clone(),
    };
    rep.write(&json).map_err(Failure::Run)?;
    if let Some(e) = stopped {
        // The runs made are written (no charts: the sweep is incomplete).
        let made = match rep.runs.len() {
            1 => "the run before it is".to_string(),
            n => format!("the {n} runs before it are"),
        };
        return Err(Failure::Run(format!(
            "{e}; the sweep stopped there, and {made} in {}",
            json.display()
        )));
    }
    if !args.quiet {
        eprintln!("locktest: wrote {}", json.display());
    }
    if !args.no_plots {
        let files = plot::draw_all(&report::panels(&rep.runs), &args.out).map_err(Failure::Run)?;
        if !args.quiet {
            for f in files {
                eprintln!("locktest: wrote {}", f.display());
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::round_order;

    /// Registry order put scalelock's locks first and the baselines after
    /// them in every round: a lock and its baseline never swapped places.
    #[test]
    fn the_order_reverses_every_other_round() {
        let locks = ["qspinlock", "std-mutex", "pl-mutex"];
        assert_eq!(round_order(&locks, 1), locks);
        assert_eq!(
            round_order(&locks, 2),
            ["pl-mutex", "std-mutex", "qspinlock"]
        );
        assert_eq!(round_order(&locks, 3), locks);
        // Over two rounds each lock runs once before and once after the
        // baseline.
        let first_in = |r| round_order(&locks, r)[0];
        assert_ne!(first_in(1), first_in(2));
    }
}
