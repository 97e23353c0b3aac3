//! What a torture run prints and stores, in Linux locktorture's words:
//!
//! ```text
//! Start of test: lock=qspinlock writers=8 readers=8 duration=2s ...
//! Writes: Total: 1234567 Max/Min: 160000/150000 Fail: 0
//! Reads: Total: 2345678 Max/Min: 300000/280000 Fail: 0
//! End of test: SUCCESS: lock=qspinlock writers=8 readers=8 duration=2s ...
//! ```
//!
//! `Total` counts lock acquisitions, `Max/Min` those of the busiest and the
//! idlest thread of the role. `???` follows Max/Min when max/2 > min (a
//! thread starved: a warning, as in locktorture), `!!!` follows a non-zero
//! `Fail` (broken invariants). A FAILURE lists its first failures.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::Serialize;

use crate::stats::Stats;

/// What a torture run was asked to do.
#[derive(Clone, Debug, Serialize)]
pub struct Params {
    /// Writer threads.
    pub writers: usize,
    /// Reader threads.
    pub readers: usize,
    /// Seconds the threads run.
    pub duration: f64,
    /// A long hold's length, milliseconds (0: none).
    pub long_hold_ms: u64,
    /// Run/pause period, milliseconds (`null`: no stutter).
    pub stutter_ms: Option<u64>,
    /// Re-pinning period, milliseconds (`null`: no shuffle).
    pub shuffle_ms: Option<u64>,
    /// Extra locks taken around each operation.
    pub nested: usize,
    /// Seconds between statistics lines.
    pub stat_interval: f64,
    /// Seconds without progress that make a stall.
    pub stall_s: f64,
}

impl Params {
    /// `lock=NAME writers=8 readers=8 duration=2s ...`: locktorture's
    /// parameter list.
    pub fn line(&self, lock: &str) -> String {
        let ms = |v: Option<u64>| v.map_or("off".to_string(), |m| format!("{m}ms"));
        format!(
            "lock={lock} writers={} readers={} duration={}s long_hold_ms={} stutter={} \
             shuffle={} nested={} stat_interval={}s",
            self.writers,
            self.readers,
            self.duration,
            self.long_hold_ms,
            ms(self.stutter_ms),
            ms(self.shuffle_ms),
            self.nested,
            self.stat_interval
        )
    }

    /// The run time.
    pub fn runtime(&self) -> Duration {
        Duration::from_secs_f64(self.duration)
    }
}

/// One role's numbers (writers or readers).
#[derive(Clone, Debug, Serialize)]
pub struct Role {
    /// Acquisitions per thread of the role, and what follows.
    #[serde(flatten)]
    pub stats: Stats,
    /// Operations that broke an invariant.
    pub fail: u64,
}

/// `Writes: Total: N Max/Min: a/b ??? Fail: f !!!`.
pub fn role_line(label: &str, counts: &[u64], fail: u64) -> String {
    let total: u64 = counts.iter().sum();
    let max = counts.iter().copied().max().unwrap_or(0);
    let min = counts.iter().copied().min().unwrap_or(0);
    let starved = if max / 2 > min { " ???" } else { "" };
    let failed = if fail > 0 { " !!!" } else { "" };
    format!("{label}: Total: {total} Max/Min: {max}/{min}{starved} Fail: {fail}{failed}")
}

/// One lock's torture, as stored in the JSON.
#[derive(Clone, Debug, Serialize)]
pub struct Record {
    /// The lock's name.
    pub lock: String,
    /// `"mutex"` or `"rwlock"`.
    pub kind: &'static str,
    /// `"SUCCESS"` or `"FAILURE"`.
    pub verdict: &'static str,
    /// What was asked.
    pub params: Params,
    /// Acquisitions per thread (writers first), and what follows.
    #[serde(flatten)]
    pub stats: Stats,
    /// The writers' numbers.
    pub writes: Role,
    /// The readers' numbers.
    pub reads: Role,
    /// Operations attempted, by name (`write`, `try-read`, `downgrade`...).
    pub ops: BTreeMap<&'static str, u64>,
    /// Tries and timed tries that did not get the lock, and try and timed
    /// upgrades that did not upgrade (their upgradable read, held and
    /// checked, is not counted as a write) (not failures).
    pub try_misses: u64,
    /// The first failures, in the order seen.
    pub failures: Vec<String>,
    /// Failures beyond those listed.
    pub more_failures: u64,
    /// Why shuffling stopped, if it could not go on (not a lock failure).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub shuffle_error: Option<String>,
}

impl Record {
    /// Whether the lock passed.
    pub fn passed(&self) -> bool {
        self.verdict == "SUCCESS"
    }

    /// The closing lines: final statistics, failures, `End of test: ...`.
    pub fn closing(&self) -> String {
        let mut out = format!(
            "{}\n{}\n",
            role_line("Writes", &self.writes.stats.counts, self.writes.fail),
            role_line("Reads", &self.reads.stats.counts, self.reads.fail),
        );
        for f in &self.failures {
            out += &format!("Failure: {f}\n");
        }
        if self.more_failures > 0 {
            out += &format!(
                "Failure: ... and {} more during the run\n",
                self.more_failures
            );
        }
        if let Some(e) = &self.shuffle_error {
            out += &format!("Note: shuffling stopped: {e}\n");
        }
        out + &format!(
            "End of test: {}: {}\n\n",
            self.verdict,
            self.params.line(&self.lock)
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn locktorture_lines() {
        assert_eq!(
            role_line("Writes", &[100, 90], 0),
            "Writes: Total: 190 Max/Min: 100/90 Fail: 0"
        );
        assert_eq!(
            role_line("Reads", &[100, 40], 3),
            "Reads: Total: 140 Max/Min: 100/40 ??? Fail: 3 !!!"
        );
        assert_eq!(
            role_line("Reads", &[], 0),
            "Reads: Total: 0 Max/Min: 0/0 Fail: 0"
        );
        let p = Params {
            writers: 2,
            readers: 1,
            duration: 0.5,
            long_hold_ms: 100,
            stutter_ms: Some(50),
            shuffle_ms: None,
            nested: 0,
            stat_interval: 1.0,
            stall_s: 10.0,
        };
        assert_eq!(
            p.line("qspinlock"),
            "lock=qspinlock writers=2 readers=1 duration=0.5s long_hold_ms=100 stutter=50ms \
             shuffle=off nested=0 stat_interval=1s"
        );
    }
}
