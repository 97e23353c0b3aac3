//! `locktest`: measure, compare and torture scalelock's locks against the
//! locks people use today (std, parking_lot, spin, crossbeam).
//!
//! - `locktest [bench]`: the seed-format sweep, summary, JSON and plots.
//! - `locktest list`: every lock name.
//! - `locktest torture`: a locktorture-style correctness run.
//! - `locktest scenario NAME`: a seed's before and after designs side by
//!   side (`scenario list` for the names).
//!
//! Exit codes: 0 success, 1 a run failed (torture or scenario violation,
//! I/O error), 2 bad arguments.

mod bench;
mod format;
mod locks;
mod plot;
mod report;
mod scenarios;
mod sweep;
mod torture;

use std::io::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand};

use crate::locks::{Kind, LockInfo};

#[derive(Parser)]
#[command(
    name = "locktest",
    version,
    about = "Measure, compare and torture scalelock against std, parking_lot, spin and crossbeam locks",
    args_conflicts_with_subcommands = true
)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    /// With no subcommand, `bench` runs with these flags.
    #[command(flatten)]
    bench: BenchArgs,
}

#[derive(Subcommand)]
enum Command {
    /// Run the throughput sweep (the default).
    Bench(BenchArgs),
    /// List every lock name, its kind and what it is.
    List,
    /// Hammer locks with invariant checks; exit 1 on any violation.
    Torture(TortureArgs),
    /// Run a seed's before and after designs side by side (`scenario list`).
    Scenario(ScenarioArgs),
}

#[derive(Args, Clone)]
struct BenchArgs {
    /// Locks to run, comma separated (default: all; see `locktest list`).
    #[arg(long, value_delimiter = ',', value_name = "NAMES")]
    lock: Vec<String>,
    /// Thread counts, comma separated (default: 1, cores, 4×cores, 8×cores).
    #[arg(long, value_delimiter = ',', value_name = "LIST")]
    threads: Vec<usize>,
    /// Read percentages for rwlocks, comma separated.
    #[arg(
        long = "read-pct",
        value_delimiter = ',',
        value_name = "LIST",
        default_value = "50,95,100"
    )]
    read_pct: Vec<u32>,
    /// Seconds per run.
    #[arg(long, default_value_t = 0.5, value_name = "SECONDS")]
    runtime: f64,
    /// Units of work inside each critical section.
    #[arg(long, default_value_t = 1, value_name = "N")]
    load: u32,
    /// Where to write every run as JSON [default: OUT/results.json].
    #[arg(long, value_name = "PATH")]
    json: Option<PathBuf>,
    /// Folder for the JSON and plots.
    #[arg(long, default_value = "locktest-report", value_name = "DIR")]
    out: PathBuf,
    /// No progress bar and no notes on stderr.
    #[arg(long, short)]
    quiet: bool,
    /// Rounds: the lock list runs round-robin this many times per
    /// configuration; the summary shows the median.
    #[arg(long, default_value_t = 1, value_name = "R")]
    rounds: u32,
    /// Do not draw the SVG/PNG charts.
    #[arg(long)]
    no_plots: bool,
}

#[derive(Args)]
struct TortureArgs {
    /// Locks to torture, comma separated (default: all).
    #[arg(long, value_delimiter = ',', value_name = "NAMES")]
    lock: Vec<String>,
    /// Threads hammering each lock [default: 4×cores].
    #[arg(long, value_name = "N")]
    threads: Option<usize>,
    /// Seconds per lock.
    #[arg(long, default_value_t = 2.0, value_name = "S")]
    seconds: f64,
    /// Read percentage for rwlocks.
    #[arg(long = "read-pct", default_value_t = 50, value_name = "PCT")]
    read_pct: u32,
}

#[derive(Args)]
struct ScenarioArgs {
    /// Scenario to run, or `list` to list them.
    #[arg(value_name = "NAME")]
    name: String,
    /// Locks for the "before" design, comma separated (default: per scenario).
    #[arg(long, value_delimiter = ',', value_name = "NAMES")]
    lock: Vec<String>,
    /// Thread counts, comma separated (default: 1, cores, 8×cores).
    #[arg(long, value_delimiter = ',', value_name = "LIST")]
    threads: Vec<usize>,
    /// Seconds per run.
    #[arg(long, default_value_t = 0.5, value_name = "SECONDS")]
    runtime: f64,
    /// Rounds of every variant per thread count; the summary shows the median.
    #[arg(long, default_value_t = 3, value_name = "R")]
    rounds: u32,
    /// Where to write every run as JSON [default: locktest-report/scenario-NAME.json].
    #[arg(long, value_name = "PATH")]
    json: Option<PathBuf>,
    /// No notes on stderr.
    #[arg(long, short)]
    quiet: bool,
}

/// A bad argument: one line on stderr, exit 2.
struct Usage(String);

/// The most threads one run may ask for.
const MAX_THREADS: usize = 4096;

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            use clap::error::ErrorKind;
            if matches!(e.kind(), ErrorKind::DisplayHelp | ErrorKind::DisplayVersion) {
                let _ = e.print();
                return ExitCode::SUCCESS;
            }
            // clap's first line is the error itself; the rest is usage help.
            let text = e.render().to_string();
            let line = text
                .lines()
                .find(|l| !l.trim().is_empty())
                .unwrap_or("error: bad arguments");
            eprintln!("locktest: {line}");
            return ExitCode::from(2);
        }
    };
    let result = match cli.command {
        None => bench(&cli.bench),
        Some(Command::Bench(args)) => bench(&args),
        Some(Command::List) => {
            list();
            Ok(())
        }
        Some(Command::Torture(args)) => torture(&args),
        Some(Command::Scenario(args)) => scenarios::command(&args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(Failure::Usage(Usage(msg))) => {
            eprintln!("locktest: error: {msg}");
            ExitCode::from(2)
        }
        Err(Failure::Run(msg)) => {
            eprintln!("locktest: {msg}");
            ExitCode::from(1)
        }
    }
}

enum Failure {
    Usage(Usage),
    Run(String),
}

impl From<Usage> for Failure {
    fn from(u: Usage) -> Self {
        Failure::Usage(u)
    }
}

/// Writes to stdout. A closed stdout (`locktest | head`) is not an error
/// worth a panic: the results still go to the JSON file.
fn emit(text: &str) {
    let mut out = std::io::stdout().lock();
    let _ = out.write_all(text.as_bytes());
    let _ = out.flush();
}

fn cores() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

fn list() {
    let width = locks::REGISTRY
        .iter()
        .map(|l| l.name.len())
        .max()
        .unwrap_or(0);
    for l in locks::REGISTRY {
        emit(&format!(
            "{:<width$}  {:<6}  {}\n",
            l.name,
            l.kind.as_str(),
            l.about
        ));
    }
}

/// Resolves `--lock` names (empty: all), keeping registry order.
fn select_locks(names: &[String]) -> Result<Vec<&'static LockInfo>, Usage> {
    for n in names {
        if locks::find(n).is_none() {
            return Err(Usage(format!(
                "unknown lock '{n}' (known: {})",
                locks::names()
            )));
        }
    }
    Ok(locks::REGISTRY
        .iter()
        .filter(|l| names.is_empty() || names.iter().any(|n| n == l.name))
        .collect())
}

fn check_threads(t: usize) -> Result<usize, Usage> {
    match t {
        0 => Err(Usage("--threads: thread counts must be at least 1".into())),
        t if t > MAX_THREADS => Err(Usage(format!("--threads: {t} is more than {MAX_THREADS}"))),
        t => Ok(t),
    }
}

fn check_seconds(flag: &str, s: f64) -> Result<f64, Usage> {
    if s.is_finite() && s > 0.0 && s <= 86_400.0 {
        Ok(s)
    } else {
        Err(Usage(format!(
            "{flag}: must be a number of seconds above 0 (and at most a day), not {s}"
        )))
    }
}

fn check_pct(p: u32) -> Result<u8, Usage> {
    u8::try_from(p)
        .ok()
        .filter(|&p| p <= 100)
        .ok_or_else(|| Usage(format!("--read-pct: {p} is not a percentage (0-100)")))
}

fn plan(args: &BenchArgs) -> Result<sweep::Plan, Usage> {
    let locks = select_locks(&args.lock)?;
    let mut threads = if args.threads.is_empty() {
        let c = cores();
        vec![1, c, 4 * c, 8 * c]
    } else {
        args.threads
            .iter()
            .map(|&t| check_threads(t))
            .collect::<Result<_, _>>()?
    };
    let mut seen = Vec::new();
    threads.retain(|t| {
        !seen.contains(t) && {
            seen.push(*t);
            true
        }
    });
    let mut read_pcts: Vec<u8> = args
        .read_pct
        .iter()
        .map(|&p| check_pct(p))
        .collect::<Result<_, _>>()?;
    let mut seen = Vec::new();
    read_pcts.retain(|p| {
        !seen.contains(p) && {
            seen.push(*p);
            true
        }
    });
    if read_pcts.is_empty() && locks.iter().any(|l| l.kind == Kind::RwLock) {
        return Err(Usage("--read-pct: give at least one percentage".into()));
    }
    if args.rounds == 0 {
        return Err(Usage("--rounds: must be at least 1".into()));
    }
    Ok(sweep::Plan {
        locks,
        threads,
        read_pcts,
        runtime: check_seconds("--runtime", args.runtime)?,
        load: args.load,
        rounds: args.rounds,
        quiet: args.quiet,
    })
}

fn bench(args: &BenchArgs) -> Result<(), Failure> {
    let plan = plan(args)?;
    let runs = plan.execute().map_err(Failure::Run)?;
    emit(&report::summary(&runs, plan.rounds));

    let json = args
        .json
        .clone()
        .unwrap_or_else(|| args.out.join("results.json"));
    let rep = report::Report {
        tool: concat!("locktest ", env!("CARGO_PKG_VERSION")).to_string(),
        cores: cores(),
        runtime: plan.runtime,
        load: plan.load,
        rounds: plan.rounds,
        medians: report::medians(&runs),
        runs,
    };
    rep.write(&json).map_err(Failure::Run)?;
    if !args.quiet {
        eprintln!("locktest: wrote {}", json.display());
    }
    if !args.no_plots {
        let files = plot::draw_all(&rep.runs, &args.out).map_err(Failure::Run)?;
        if !args.quiet {
            for f in files {
                eprintln!("locktest: wrote {}", f.display());
            }
        }
    }
    Ok(())
}

fn torture(args: &TortureArgs) -> Result<(), Failure> {
    let locks = select_locks(&args.lock)?;
    let threads = check_threads(args.threads.unwrap_or(4 * cores()))?;
    let seconds = check_seconds("--seconds", args.seconds)?;
    let read_pct = check_pct(args.read_pct)?;
    let cfg = torture::TortureConfig {
        threads,
        seconds,
        read_pct,
    };
    let mut failed = Vec::new();
    for info in locks {
        let out = (info.torture)(&cfg);
        let what = match info.kind {
            Kind::Mutex => format!("threads = {threads}, {seconds}s"),
            Kind::RwLock => format!("threads = {threads}, {seconds}s, r% = {read_pct}%"),
        };
        match &out.verdict {
            Ok(()) => {
                let ops = match info.kind {
                    Kind::Mutex => format!("writes = {}", format::thousands(out.writes)),
                    Kind::RwLock => format!(
                        "writes = {}, reads = {}",
                        format::thousands(out.writes),
                        format::thousands(out.reads)
                    ),
                };
                emit(&format!(
                    "torture {}: PASS [{what}] {ops}, counter = {}\n",
                    info.name,
                    format::thousands(out.final_counter),
                ));
            }
            Err(msg) => {
                emit(&format!("torture {}: FAIL [{what}] {msg}\n", info.name));
                failed.push(info.name);
                // A thread stuck inside a broken lock cannot be joined: stop
                // here rather than torture the next lock beside it.
                if out.hung {
                    break;
                }
            }
        }
    }
    if failed.is_empty() {
        Ok(())
    } else {
        Err(Failure::Run(format!(
            "torture failed for: {}",
            failed.join(", ")
        )))
    }
}
