//! What a sweep keeps: one [`RunRecord`] per run, the JSON file holding them
//! all, and the summary table of ratios against parking_lot.
//!
//! With several rounds the summary follows "measure side by side": in each
//! round a lock's rate is divided by the baseline's rate from the same round
//! (they ran back to back), and the table shows the median of those ratios.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::bench::Sample;
use crate::locks::{self, Kind};

/// One run, as printed in the seed format and stored in the JSON.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct RunRecord {
    /// Lock name from the registry.
    pub lock: String,
    /// `"mutex"` or `"rwlock"`.
    pub kind: String,
    /// Worker threads.
    pub threads: usize,
    /// Share of read operations; `null` for mutexes.
    pub read_pct: Option<u8>,
    /// Work units inside each critical section.
    pub load: u32,
    /// Requested runtime, seconds.
    pub runtime: f64,
    /// Measured time from start gate to stop flag, seconds; rates divide by it.
    pub elapsed: f64,
    /// Round number, from 1.
    pub round: u32,
    /// Operations completed by each thread.
    pub counts: Vec<u64>,
    /// Fewest operations of any thread.
    pub min: u64,
    /// Mean operations per thread, rounded.
    pub mean: u64,
    /// Most operations of any thread.
    pub max: u64,
    /// All operations divided by `elapsed`, rounded, op/s.
    pub total_rate: u64,
    /// `total_rate` per thread, rounded, op/s.
    pub percpu_rate: u64,
}

impl RunRecord {
    /// Derives the printed statistics from a raw sample.
    pub fn new(
        info: &locks::LockInfo,
        read_pct: Option<u8>,
        load: u32,
        runtime: f64,
        round: u32,
        sample: Sample,
    ) -> Self {
        let threads = sample.counts.len();
        let sum: u64 = sample.counts.iter().sum();
        let elapsed = sample.elapsed.as_secs_f64();
        let total = sum as f64 / elapsed;
        RunRecord {
            lock: info.name.to_string(),
            kind: info.kind.as_str().to_string(),
            threads,
            read_pct: match info.kind {
                Kind::Mutex => None,
                Kind::RwLock => read_pct,
            },
            load,
            runtime,
            elapsed,
            round,
            min: sample.counts.iter().copied().min().unwrap_or(0),
            mean: (sum as f64 / threads.max(1) as f64).round() as u64,
            max: sample.counts.iter().copied().max().unwrap_or(0),
            total_rate: total.round() as u64,
            percpu_rate: (total / threads.max(1) as f64).round() as u64,
            counts: sample.counts,
        }
    }

    /// Slowest thread over fastest thread: 1.0 is perfectly fair.
    pub fn fairness(&self) -> f64 {
        if self.max == 0 {
            0.0
        } else {
            self.min as f64 / self.max as f64
        }
    }
}

/// The JSON file: the sweep's settings and every run.
#[derive(Debug, Serialize, Deserialize)]
pub struct Report {
    /// `locktest X.Y.Z`.
    pub tool: String,
    /// CPUs available to the process.
    pub cores: usize,
    /// Requested runtime per run, seconds.
    pub runtime: f64,
    /// Work units per critical section.
    pub load: u32,
    /// Rounds of the sweep.
    pub rounds: u32,
    /// Every run, in the order it ran.
    pub runs: Vec<RunRecord>,
    /// Per lock and configuration, the summary's numbers.
    pub medians: Vec<MedianRecord>,
}

/// What the summary shows for one lock in one configuration.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct MedianRecord {
    /// Lock name.
    pub lock: String,
    /// `"mutex"` or `"rwlock"`.
    pub kind: String,
    /// Worker threads.
    pub threads: usize,
    /// Share of read operations; `null` for mutexes.
    pub read_pct: Option<u8>,
    /// How many rounds ran.
    pub rounds: usize,
    /// Total rate of the median run, op/s.
    pub total_rate: u64,
    /// The lock the ratio is taken against.
    pub baseline: String,
    /// Median over rounds of this lock's rate over the baseline's in the same
    /// round; `null` when the baseline did not run.
    pub ratio: Option<f64>,
    /// Slowest over fastest thread's operations in the median run.
    pub fairness: f64,
}

/// The summary's numbers for every lock and configuration that ran, by
/// configuration, then in registry order.
pub fn medians(runs: &[RunRecord]) -> Vec<MedianRecord> {
    let position = |name: &str| locks::REGISTRY.iter().position(|l| l.name == name);
    let mut out: Vec<MedianRecord> = median_runs(runs)
        .into_iter()
        .map(|((c, lock), r)| {
            let base = locks::baseline(c.0);
            MedianRecord {
                rounds: runs
                    .iter()
                    .filter(|x| x.lock == lock && key(x) == c)
                    .count(),
                ratio: ratio(runs, &c, &lock, base),
                baseline: base.to_string(),
                kind: r.kind.clone(),
                threads: r.threads,
                read_pct: r.read_pct,
                total_rate: r.total_rate,
                fairness: r.fairness(),
                lock,
            }
        })
        .collect();
    out.sort_by_key(|m| (m.kind.clone(), m.threads, m.read_pct, position(&m.lock)));
    out
}

impl Report {
    /// Writes the report as pretty JSON, creating parent folders.
    pub fn write(&self, path: &Path) -> Result<(), String> {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir)
                .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
        }
        let json = serde_json::to_string_pretty(self).map_err(|e| e.to_string())?;
        std::fs::write(path, json + "\n")
            .map_err(|e| format!("cannot write {}: {e}", path.display()))
    }
}

/// One configuration: kind, threads, read share.
pub type ConfigKey = (Kind, usize, Option<u8>);

/// The median of some numbers (mean of the middle two for an even count).
pub fn median(mut xs: Vec<f64>) -> Option<f64> {
    if xs.is_empty() {
        return None;
    }
    xs.sort_by(f64::total_cmp);
    let n = xs.len();
    Some(if n % 2 == 1 {
        xs[n / 2]
    } else {
        (xs[n / 2 - 1] + xs[n / 2]) / 2.0
    })
}

/// The run whose total rate is the median of a lock's rounds for one
/// configuration (the lower middle for an even count): a real run, so its
/// per-thread counts can be shown.
pub fn median_runs(runs: &[RunRecord]) -> BTreeMap<(ConfigKey, String), &RunRecord> {
    let mut groups: BTreeMap<(ConfigKey, String), Vec<&RunRecord>> = BTreeMap::new();
    for r in runs {
        groups.entry((key(r), r.lock.clone())).or_default().push(r);
    }
    groups
        .into_iter()
        .map(|(k, mut v)| {
            v.sort_by_key(|r| r.total_rate);
            (k, v[(v.len() - 1) / 2])
        })
        .collect()
}

fn kind_of(r: &RunRecord) -> Kind {
    if r.kind == Kind::RwLock.as_str() {
        Kind::RwLock
    } else {
        Kind::Mutex
    }
}

fn key(r: &RunRecord) -> ConfigKey {
    (kind_of(r), r.threads, r.read_pct)
}

/// Lock names in registry order, limited to those that ran with `kind`.
fn locks_of(runs: &[RunRecord], kind: Kind) -> Vec<&'static str> {
    locks::REGISTRY
        .iter()
        .filter(|l| l.kind == kind && runs.iter().any(|r| r.lock == l.name))
        .map(|l| l.name)
        .collect()
}

/// The summary tables (markdown) for every kind that ran.
pub fn summary(runs: &[RunRecord], rounds: u32) -> String {
    let mut out = String::new();
    let medians = median_runs(runs);
    for kind in [Kind::Mutex, Kind::RwLock] {
        let names = locks_of(runs, kind);
        if names.is_empty() {
            continue;
        }
        let mut configs: Vec<ConfigKey> = runs.iter().map(key).filter(|k| k.0 == kind).collect();
        configs.sort();
        configs.dedup();
        let base = locks::baseline(kind);
        let has_base = names.contains(&base);
        let row_head = match kind {
            Kind::Mutex => "| threads |",
            Kind::RwLock => "| threads | r% |",
        };
        let row_rule = match kind {
            Kind::Mutex => "| ---: |",
            Kind::RwLock => "| ---: | ---: |",
        };
        let cols: String = names.iter().map(|n| format!(" {n} |")).collect();
        let rules: String = names.iter().map(|_| " ---: |").collect();
        let row_start = |c: &ConfigKey| match c.2 {
            Some(r) => format!("| {} | {r}% |", c.1),
            None => format!("| {} |", c.1),
        };
        let plural = if rounds == 1 { "" } else { "s" };
        let what = match kind {
            Kind::Mutex => "mutexes",
            Kind::RwLock => "rwlocks",
        };

        if has_base {
            let _ = writeln!(
                out,
                "### {what}: throughput relative to {base} (median of {rounds} round{plural}; >1 is faster)\n"
            );
        } else {
            let _ = writeln!(
                out,
                "### {what}: total op/s (median of {rounds} round{plural}; {base} not run, so no ratios)\n"
            );
        }
        let _ = writeln!(out, "{row_head}{cols}\n{row_rule}{rules}");
        for c in &configs {
            let mut line = row_start(c);
            for name in &names {
                let cell = if has_base {
                    ratio(runs, c, name, base)
                        .map(|r| format!("{r:.2}x"))
                        .unwrap_or_else(|| "-".into())
                } else {
                    medians
                        .get(&(*c, name.to_string()))
                        .map(|r| crate::format::thousands(r.total_rate))
                        .unwrap_or_else(|| "-".into())
                };
                let _ = write!(line, " {cell} |");
            }
            let _ = writeln!(out, "{line}");
        }

        let _ = writeln!(
            out,
            "\n### {what}: fairness, slowest / fastest thread's ops (1.00 = perfectly fair)\n"
        );
        let _ = writeln!(out, "{row_head}{cols}\n{row_rule}{rules}");
        for c in &configs {
            let mut line = row_start(c);
            for name in &names {
                let cell = medians
                    .get(&(*c, name.to_string()))
                    .map(|r| format!("{:.2}", r.fairness()))
                    .unwrap_or_else(|| "-".into());
                let _ = write!(line, " {cell} |");
            }
            let _ = writeln!(out, "{line}");
        }
        out.push('\n');
    }
    out
}

/// The median over rounds of `name`'s rate divided by `base`'s rate in the
/// same round.
fn ratio(runs: &[RunRecord], c: &ConfigKey, name: &str, base: &str) -> Option<f64> {
    let of = |lock: &str| -> BTreeMap<u32, u64> {
        runs.iter()
            .filter(|r| r.lock == lock && key(r) == *c)
            .map(|r| (r.round, r.total_rate))
            .collect()
    };
    let (mine, theirs) = (of(name), of(base));
    let ratios: Vec<f64> = mine
        .iter()
        .filter_map(|(round, &rate)| match theirs.get(round) {
            Some(&b) if b > 0 => Some(rate as f64 / b as f64),
            _ => None,
        })
        .collect();
    median(ratios)
}

#[cfg(test)]
mod tests {
    use super::median;

    #[test]
    fn medians() {
        assert_eq!(median(vec![]), None);
        assert_eq!(median(vec![3.0]), Some(3.0));
        assert_eq!(median(vec![3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(vec![4.0, 1.0, 2.0, 3.0]), Some(2.5));
    }
}
