//! `locktest`: measure, compare and torture scalelock's locks against the
//! locks people use today (std, parking_lot, spin, crossbeam).
//!
//! - `locktest [bench]`: the seed-format sweep, summary, JSON and plots
//!   (`--workload kv` for a key-value mix over a `HashMap`).
//! - `locktest list`: every lock name.
//! - `locktest torture`: a locktorture-style correctness run.
//! - `locktest scenario NAME|all|list`: real systems' before and after
//!   designs side by side.
//!
//! Exit codes: 0 success, 1 a run failed (torture or scenario violation,
//! hang, I/O error), 2 bad arguments.
//!
//! Layout: the three commands share one harness (`harness.rs`: start gate,
//! timer, watchdog), one statistics type (`stats.rs`) and one lock registry
//! (`locks.rs`, over `lockable.rs`); the modules import each other in one
//! direction only (a test in `tests/layout.rs` checks it).

mod args;
mod bench;
mod busted;
mod failure;
mod format;
mod harness;
mod json;
mod kv;
mod lockable;
mod locks;
mod lockstat;
mod pct;
mod plot;
mod report;
mod rng;
mod scenarios;
mod stats;
mod stdout;
mod sweep;
mod torture;

use std::process::ExitCode;

use clap::Parser;

use crate::args::{Cli, Command};
use crate::failure::{Failure, Usage};

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
            // (joined: "...not provided:" is followed by the argument).
            let line = text
                .trim_start()
                .split("\n\n")
                .next()
                .map(|p| p.lines().map(str::trim).collect::<Vec<_>>().join(" "))
                .filter(|l| !l.is_empty())
                .unwrap_or_else(|| "error: bad arguments".into());
            eprintln!("locktest: {line}");
            return ExitCode::from(2);
        }
    };
    let result = match cli.command {
        None => sweep::command(&cli.bench),
        Some(Command::Bench(args)) => sweep::command(&args),
        Some(Command::List) => {
            stdout::emit(&locks::listing());
            Ok(())
        }
        Some(Command::Torture(args)) => torture::command(&args),
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
