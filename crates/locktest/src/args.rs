//! The command line: every subcommand's flags, and the checks that turn a
//! bad value into one clear line (exit 2).

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};

use crate::failure::Usage;
use crate::kv::KvMix;
use crate::locks::{self, LockInfo};
use crate::pct::Pct;

#[derive(Parser)]
#[command(
    name = "locktest",
    version,
    about = "Measure, compare and torture scalelock against std, parking_lot, spin and crossbeam locks",
    args_conflicts_with_subcommands = true
)]
pub struct Cli {
    /// The subcommand (default: bench).
    #[command(subcommand)]
    pub command: Option<Command>,
    /// With no subcommand, `bench` runs with these flags.
    #[command(flatten)]
    pub bench: BenchArgs,
}

/// The subcommands.
#[derive(Subcommand)]
pub enum Command {
    /// Run the throughput sweep (the default).
    Bench(BenchArgs),
    /// List every lock name, its kind, its operations and what it is.
    List,
    /// locktorture-style correctness run: exit 1 unless every lock passes.
    Torture(TortureArgs),
    /// Run a real system's before and after designs side by side
    /// (`scenario list`, `scenario all`).
    Scenario(ScenarioArgs),
}

/// What bench threads do.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum WorkloadArg {
    /// Work units under the lock, reads or writes by `--read-pct`.
    Lock,
    /// A HashMap<u64, u64> behind the lock: lookups by `--read-pct`, the
    /// rest inserts, updates and removes by `--kv-writes`.
    Kv,
}

/// `locktest bench`.
#[derive(Args, Clone)]
pub struct BenchArgs {
    /// Locks to run, comma separated (default: all; with `--workload kv`,
    /// every rwlock; see `locktest list`).
    #[arg(long, value_delimiter = ',', value_name = "NAMES")]
    pub lock: Vec<String>,
    /// Thread counts, comma separated (default: 1, cores, 4×cores, 8×cores).
    #[arg(long, value_delimiter = ',', value_name = "LIST")]
    pub threads: Vec<usize>,
    /// Read percentages, comma separated, up to 4 decimals (99.9)
    /// [default: 50,95,100; kv: 94].
    #[arg(long = "read-pct", value_delimiter = ',', value_name = "LIST", value_parser = Pct::parse)]
    pub read_pct: Vec<Pct>,
    /// What the threads do.
    #[arg(long, value_enum, default_value_t = WorkloadArg::Lock)]
    pub workload: WorkloadArg,
    /// kv: weights that split the non-lookup share into inserts, updates
    /// and removes (2:3:1 with 94% lookups is bustle's read_heavy: 2%
    /// inserts, 3% updates, 1% removes) [default: 2:3:1; only with
    /// `--workload kv`].
    #[arg(long = "kv-writes", value_name = "I:U:R", value_parser = KvMix::parse)]
    pub kv_writes: Option<KvMix>,
    /// Seconds per run.
    #[arg(long, default_value_t = 0.2, value_name = "SECONDS")]
    pub runtime: f64,
    /// Units of work inside each critical section, 0 to 10,000,000 (a unit
    /// is a dependent multiply-add, about a nanosecond) [default: 1; only
    /// with `--workload lock`].
    #[arg(long, value_name = "N")]
    pub load: Option<u32>,
    /// Where to write every run as JSON [default: OUT/results.json].
    #[arg(long, value_name = "PATH")]
    pub json: Option<PathBuf>,
    /// Folder for the JSON and plots.
    #[arg(long, default_value = "locktest-report", value_name = "DIR")]
    pub out: PathBuf,
    /// No progress bar and no notes on stderr.
    #[arg(long, short)]
    pub quiet: bool,
    /// Rounds: the lock list runs this many times per configuration, its
    /// order reversed every other round; the summary shows the median of
    /// the per-round ratios.
    #[arg(long, default_value_t = 3, value_name = "R")]
    pub rounds: u32,
    /// Do not draw the SVG/PNG charts.
    #[arg(long)]
    pub no_plots: bool,
    /// After every run, print scalelock's lock statistics (a lock_stat-style
    /// table per lock class) and the advisor's recommendations, and keep
    /// them in the JSON (needs a build with `--features stats`; counting
    /// slows every scalelock lock down).
    #[arg(long)]
    pub stats: bool,
}

/// `locktest torture`.
#[derive(Args)]
pub struct TortureArgs {
    /// Locks to torture, comma separated (default: every lock in `locktest
    /// list`; one named twice runs once). `busted`, a lock that does not
    /// lock, must end in FAILURE.
    #[arg(long, value_delimiter = ',', value_name = "NAMES")]
    pub lock: Vec<String>,
    /// Seconds per lock.
    #[arg(
        long,
        visible_alias = "seconds",
        default_value_t = 2.0,
        value_name = "S"
    )]
    pub duration: f64,
    /// Writer threads per lock [default: 4×cores, at most 2048].
    #[arg(long, value_name = "N", conflicts_with = "threads")]
    pub writers: Option<usize>,
    /// Reader threads per lock (read sections; a mutex's are exclusive)
    /// [default: 4×cores, at most 2048].
    #[arg(long, value_name = "N", conflicts_with = "threads")]
    pub readers: Option<usize>,
    /// Threads per lock, half writers (rounded up), half readers.
    #[arg(long, value_name = "N")]
    pub threads: Option<usize>,
    /// Now and then a critical section holds the lock this long (0: never).
    #[arg(long = "long-hold-ms", default_value_t = 100, value_name = "MS")]
    pub long_hold_ms: u64,
    /// Run and pause all threads in turns of MS milliseconds, so they
    /// sleep and wake together (`--stutter` alone: 50).
    #[arg(long, value_name = "MS", num_args = 0..=1, default_missing_value = "50")]
    pub stutter: Option<u64>,
    /// Every MS milliseconds, pin each thread to another CPU, one CPU left
    /// idle in turn (`--shuffle` alone: 10).
    #[arg(long, value_name = "MS", num_args = 0..=1, default_missing_value = "10")]
    pub shuffle: Option<u64>,
    /// Extra locks of the same type taken, a random subset in a fixed
    /// order, around each operation (at most 8).
    #[arg(long, default_value_t = 0, value_name = "N")]
    pub nested: usize,
    /// No thread completing an operation for this long (stutter pauses not
    /// counted) is a stall: the lock's state is printed and it fails.
    #[arg(long = "stall-s", default_value_t = 10.0, value_name = "S")]
    pub stall_s: f64,
    /// Seconds between the Writes/Reads statistics lines (at least 0.01).
    #[arg(long = "stat-interval", default_value_t = 1.0, value_name = "S")]
    pub stat_interval: f64,
    /// Write every lock's result as JSON here.
    #[arg(long, value_name = "PATH")]
    pub json: Option<PathBuf>,
}

/// `locktest scenario`.
#[derive(Args)]
pub struct ScenarioArgs {
    /// Scenario to run, `all` for every one, or `list` to list them.
    #[arg(value_name = "NAME")]
    pub name: String,
    /// Locks for the "before" design, comma separated (default: per scenario).
    #[arg(long, value_delimiter = ',', value_name = "NAMES")]
    pub lock: Vec<String>,
    /// Thread counts, comma separated (default: 1, cores, 8×cores).
    #[arg(long, value_delimiter = ',', value_name = "LIST")]
    pub threads: Vec<usize>,
    /// Seconds per run [default: 0.5].
    // Options, not clap defaults, so that `scenario list` can tell them
    // given (it refuses every flag of a run) from left alone.
    #[arg(long, value_name = "SECONDS")]
    pub runtime: Option<f64>,
    /// Rounds of every variant per thread count; the summary shows the
    /// median [default: 3].
    #[arg(long, value_name = "R")]
    pub rounds: Option<u32>,
    /// Where to write every run as JSON [default: OUT/scenario-NAME.json;
    /// not with `all`].
    #[arg(long, value_name = "PATH")]
    pub json: Option<PathBuf>,
    /// Folder for the JSON and charts [default: locktest-report].
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Do not draw the SVG/PNG charts.
    #[arg(long)]
    pub no_plots: bool,
    /// No notes on stderr.
    #[arg(long, short)]
    pub quiet: bool,
    /// After every variant's run, print scalelock's lock statistics (a
    /// lock_stat-style table per lock class) and the advisor's
    /// recommendations, and keep them in the JSON (needs a build with
    /// `--features stats`; counting slows every scalelock lock down).
    #[arg(long)]
    pub stats: bool,
}

/// The most units of work `--load` may put in one critical section: about
/// 10 ms of work, so that a run still ends close to its `--runtime`.
pub const MAX_LOAD: u32 = 10_000_000;

/// The most threads one run may ask for.
pub const MAX_THREADS: usize = 4096;

/// Resolves `--lock` names (empty: all), keeping registry order.
pub fn select_locks(names: &[String]) -> Result<Vec<&'static LockInfo>, Usage> {
    for n in names {
        if locks::find(n).is_none() {
            return Err(unknown_lock(n));
        }
    }
    Ok(locks::REGISTRY
        .iter()
        .filter(|l| names.is_empty() || names.iter().any(|n| n == l.name))
        .collect())
}

/// `unknown lock 'x' (known: ...)`.
pub fn unknown_lock(name: &str) -> Usage {
    Usage(format!("unknown lock '{name}' (known: {})", locks::names()))
}

/// A thread count: at least 1, at most [`MAX_THREADS`].
pub fn check_threads(flag: &str, t: usize) -> Result<usize, Usage> {
    match t {
        0 => Err(Usage(format!("{flag}: thread counts must be at least 1"))),
        t if t > MAX_THREADS => Err(Usage(format!("{flag}: {t} is more than {MAX_THREADS}"))),
        t => Ok(t),
    }
}

/// Thread counts, checked, duplicates dropped; `default` when none given
/// (capped at [`MAX_THREADS`]: on a machine of more than 512 CPUs, 8×cores
/// made the run with no flags fail with "--threads: ... is more than 4096").
pub fn thread_list(given: &[usize], default: Vec<usize>) -> Result<Vec<usize>, Usage> {
    let list = if given.is_empty() {
        default.into_iter().map(|t| t.min(MAX_THREADS)).collect()
    } else {
        given.to_vec()
    };
    let mut out: Vec<usize> = Vec::new();
    for t in list {
        let t = check_threads("--threads", t)?;
        if !out.contains(&t) {
            out.push(t);
        }
    }
    Ok(out)
}

/// A duration in seconds: above 0, at most a day.
pub fn check_seconds(flag: &str, s: f64) -> Result<f64, Usage> {
    if s.is_finite() && s > 0.0 && s <= 86_400.0 {
        Ok(s)
    } else {
        Err(Usage(format!(
            "{flag}: must be a number of seconds above 0 (and at most a day), not {s}"
        )))
    }
}

/// Rounds: at least 1.
pub fn check_rounds(r: u32) -> Result<u32, Usage> {
    if r == 0 {
        Err(Usage("--rounds: must be at least 1".into()))
    } else {
        Ok(r)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The defaults are multiples of the core count that no user typed: on
    /// a machine of 600 CPUs, `locktest` with no flags refused 4,800 threads
    /// as a bad `--threads` (exit 2).
    #[test]
    fn default_thread_counts_on_a_big_machine_are_capped_not_refused() {
        let c = 600;
        let list = thread_list(&[], vec![1, c, 4 * c, 8 * c]).map_err(|e| e.0);
        assert_eq!(list, Ok(vec![1, 600, 2400, MAX_THREADS]));
        // A count the user gave is still checked.
        assert!(thread_list(&[8 * c], vec![1]).is_err());
    }
}
