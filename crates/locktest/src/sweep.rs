//! A bench sweep: every selected lock × thread count × read share, for some
//! rounds, printed in the seed format as it goes.
//!
//! Runs are grouped by configuration (threads, r%). Within a group every
//! round runs each lock once, back to back, so a lock and its baseline see
//! the same machine state; the summary compares them round by round.

use std::io::Write as _;
use std::time::Duration;

use indicatif::{ProgressBar, ProgressStyle};

use crate::bench::RunConfig;
use crate::format;
use crate::locks::{Kind, LockInfo};
use crate::report::RunRecord;

/// A validated sweep.
pub struct Plan {
    /// Locks to run, in registry order.
    pub locks: Vec<&'static LockInfo>,
    /// Thread counts.
    pub threads: Vec<usize>,
    /// Read shares for rwlocks.
    pub read_pcts: Vec<u8>,
    /// Seconds per run.
    pub runtime: f64,
    /// Work units per critical section.
    pub load: u32,
    /// Rounds.
    pub rounds: u32,
    /// No progress bar.
    pub quiet: bool,
}

/// One configuration and the locks that run in it.
struct Group {
    threads: usize,
    read_pct: Option<u8>,
    locks: Vec<&'static LockInfo>,
}

impl Plan {
    fn groups(&self) -> Vec<Group> {
        let of_kind = |k: Kind| -> Vec<&'static LockInfo> {
            self.locks.iter().copied().filter(|l| l.kind == k).collect()
        };
        let (mutexes, rwlocks) = (of_kind(Kind::Mutex), of_kind(Kind::RwLock));
        let mut groups = Vec::new();
        for &threads in &self.threads {
            if !mutexes.is_empty() {
                groups.push(Group {
                    threads,
                    read_pct: None,
                    locks: mutexes.clone(),
                });
            }
        }
        for &threads in &self.threads {
            for &r in &self.read_pcts {
                if !rwlocks.is_empty() {
                    groups.push(Group {
                        threads,
                        read_pct: Some(r),
                        locks: rwlocks.clone(),
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

    /// Runs the sweep, printing each run to stdout in the seed format.
    pub fn execute(&self) -> Result<Vec<RunRecord>, String> {
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
        let stdout = std::io::stdout();
        for group in self.groups() {
            for round in 1..=self.rounds {
                for info in &group.locks {
                    let cfg = RunConfig {
                        lock: info.name,
                        threads: group.threads,
                        read_pct: group.read_pct,
                        load: self.load,
                        runtime: Duration::from_secs_f64(self.runtime),
                    };
                    let pct = group
                        .read_pct
                        .map(|r| format!(" r%={r}"))
                        .unwrap_or_default();
                    bar.set_message(format!("{} t={}{pct}", info.name, group.threads));
                    let sample = (info.bench)(&cfg).map_err(|e| format!("{}: {e}", info.name))?;
                    let rec = RunRecord::new(
                        info,
                        group.read_pct,
                        self.load,
                        self.runtime,
                        round,
                        sample,
                    );
                    let text = format!(
                        "{}\n{}\n{}\n\n",
                        format::header(info.name, info.kind, rec.runtime, rec.read_pct, rec.load),
                        format::min_mean_max(rec.threads, rec.min, rec.mean, rec.max),
                        format::rates(rec.threads, rec.total_rate, rec.percpu_rate),
                    );
                    bar.suspend(|| {
                        let mut out = stdout.lock();
                        // A closed stdout (e.g. `| head`) must not stop the sweep.
                        let _ = out.write_all(text.as_bytes());
                        let _ = out.flush();
                    });
                    records.push(rec);
                    bar.inc(1);
                }
            }
        }
        bar.finish_and_clear();
        Ok(records)
    }
}
