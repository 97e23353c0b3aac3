//! `--stats`: scalelock's own lock statistics (Linux's lock_stat, per lock
//! class) around each bench run and scenario variant.
//!
//! Statistics are reset right before a run and read right after it, so each
//! printed table and each JSON snapshot covers exactly the run it follows.
//! Only scalelock's locks report (their classes are named after the bench
//! lock or the scenario's lock role, e.g. `bench/qspinlock`,
//! `grant_table/gt_lock`); the peers (std, parking_lot, spin, crossbeam)
//! have no statistics, so their runs print an empty table. Counting costs
//! time on every acquisition: throughput measured with `--stats` is not
//! comparable with a run without it.
//!
//! The statistics live in scalelock's `stats` feature; locktest builds it
//! in with its own `stats` feature. Without it `--stats` is an error, not
//! ignored.

use serde_json::Value;

use crate::failure::Usage;

/// Whether this build can collect lock statistics.
pub const AVAILABLE: bool = cfg!(feature = "stats");

/// Lock statistics of one run: the table, the advice and the snapshot.
pub struct Captured {
    /// The lock_stat-style table and the advisor's recommendations, ready
    /// to print.
    pub text: String,
    /// The snapshot, for the JSON.
    pub snapshot: Value,
}

/// Collecting lock statistics around runs, if `--stats` asked for it.
pub struct LockStat {
    on: bool,
}

impl LockStat {
    /// `--stats` given (`wanted`) or not: an error if this build has no
    /// statistics; otherwise switches collection on.
    pub fn new(wanted: bool) -> Result<LockStat, Usage> {
        if wanted && !AVAILABLE {
            return Err(Usage(
                "--stats: this locktest was built without lock statistics; rebuild it with \
                 `--features stats` (cargo build --release -p locktest --features stats)"
                    .into(),
            ));
        }
        if wanted {
            imp::enable();
        }
        Ok(LockStat { on: wanted })
    }

    /// Whether statistics are collected.
    pub fn on(&self) -> bool {
        self.on
    }

    /// Call right before a run: zeroes the statistics.
    pub fn begin(&self) {
        if self.on {
            imp::reset();
        }
    }

    /// Call right after a run (its threads joined): the run's statistics,
    /// headed by `title`; `None` without `--stats`.
    pub fn end(&self, title: &str) -> Option<Captured> {
        self.on.then(|| imp::capture(title))
    }
}

#[cfg(feature = "stats")]
mod imp {
    use std::fmt::Write as _;

    use scalelock::stats;

    use super::Captured;

    pub fn enable() {
        stats::enable();
    }

    pub fn reset() {
        stats::reset();
    }

    pub fn capture(title: &str) -> Captured {
        let snap = stats::snapshot();
        let mut text = format!("lock statistics, {title}:\n");
        if snap.classes.is_empty() {
            text.push_str("  (no scalelock lock ran: other locks have no statistics)\n");
        } else {
            let _ = write!(text, "{snap}");
            if !text.ends_with('\n') {
                text.push('\n');
            }
            let advice = stats::advise(&snap);
            if !advice.is_empty() {
                text.push_str("advice:\n");
                for a in advice {
                    let _ = writeln!(text, "  {a}");
                }
            }
        }
        text.push('\n');
        let snapshot = serde_json::to_value(&snap).unwrap_or(serde_json::Value::Null);
        Captured { text, snapshot }
    }
}

#[cfg(not(feature = "stats"))]
mod imp {
    use super::Captured;

    // `LockStat::new` refuses `--stats` in this build, so these never run.
    pub fn enable() {}

    pub fn reset() {}

    pub fn capture(_title: &str) -> Captured {
        unreachable!("LockStat::new refuses --stats without the stats feature")
    }
}
