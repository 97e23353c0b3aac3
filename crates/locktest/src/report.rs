//! What a bench sweep keeps: one [`RunRecord`] per run, the JSON file
//! holding them all, the summary table of ratios against parking_lot, and
//! the chart panels.
//!
//! With several rounds the summary follows "measure side by side": in each
//! round a lock's rate is divided by the baseline's rate from the same round
//! (they ran back to back), and the table shows the median of those ratios.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::bench::{Measured, RunConfig, Workload};
use crate::lockable::Kind;
use crate::locks::{self, LockInfo};
use crate::pct::Pct;
use crate::plot::{Panel, Series};
use crate::stats::{Stats, median};

/// One run, as printed in the seed format and stored in the JSON.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct RunRecord {
    /// Lock name from the registry.
    pub lock: String,
    /// `"mutex"` or `"rwlock"`.
    pub kind: String,
    /// `"lock"` (Linux locktest's workload) or `"kv"`.
    #[serde(default = "lock_workload")]
    pub workload: String,
    /// Share of read operations: `null` for mutexes under the `lock`
    /// workload; a number with up to 4 decimals (`99.9`).
    pub read_pct: Option<Pct>,
    /// `kv`: lookup/insert/update/remove shares in percent, `94/2/3/1`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mix: Option<String>,
    /// `lock`: work units inside each critical section.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub load: Option<u32>,
    /// Requested runtime, seconds.
    pub runtime: f64,
    /// Round number, from 1.
    pub round: u32,
    /// Threads, per-thread counts and the numbers the seed format prints.
    #[serde(flatten)]
    pub stats: Stats,
    /// `kv`: the share of lookups that found their key; absent when no
    /// lookup ran (`--read-pct 0`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hit_rate: Option<f64>,
    /// `--stats`: scalelock's lock statistics of this run
    /// (`scalelock::stats::Snapshot`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lockstat: Option<serde_json::Value>,
}

fn lock_workload() -> String {
    "lock".to_string()
}

impl RunRecord {
    /// The record of `info`'s run under `cfg` in round `round`.
    pub fn new(info: &LockInfo, cfg: &RunConfig, round: u32, m: Measured) -> Self {
        let (read_pct, mix, load) = match cfg.workload {
            Workload::Lock => (
                cfg.read_pct.filter(|_| info.kind == Kind::RwLock),
                None,
                Some(cfg.load),
            ),
            Workload::Kv(mix) => {
                let r = cfg.read_pct.unwrap_or(crate::kv::KvMix::DEFAULT_READ);
                (Some(r), Some(mix.describe(r)), None)
            }
        };
        RunRecord {
            lock: info.name.to_string(),
            kind: info.kind.as_str().to_string(),
            workload: cfg.workload.name().to_string(),
            read_pct,
            mix,
            load,
            // Whole nanoseconds over 1e9, rounded once: `as_secs_f64`
            // rounds twice (1.118 s became 1.1179999999999999).
            runtime: cfg.runtime.as_nanos() as f64 / 1e9,
            round,
            stats: m.stats,
            hit_rate: m.hit_rate,
            lockstat: None,
        }
    }

    fn kind(&self) -> Kind {
        if self.kind == Kind::RwLock.as_str() {
            Kind::RwLock
        } else {
            Kind::Mutex
        }
    }

    fn key(&self) -> ConfigKey {
        (self.kind(), self.stats.threads, self.read_pct)
    }
}

/// The JSON file: the sweep's settings and every run.
#[derive(Debug, Serialize, Deserialize)]
pub struct Report {
    /// `locktest X.Y.Z`.
    pub tool: String,
    /// CPUs available to the process.
    pub cores: usize,
    /// `"lock"` or `"kv"`.
    pub workload: String,
    /// `kv`: the `--kv-writes` weights, `INSERT:UPDATE:REMOVE`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kv_writes: Option<String>,
    /// Requested runtime per run, seconds.
    pub runtime: f64,
    /// Work units per critical section (`lock` workload; absent for `kv`,
    /// whose critical sections are its map operations).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub load: Option<u32>,
    /// Rounds of the sweep.
    pub rounds: u32,
    /// `--stats`: scalelock's lock statistics were collected (every run
    /// carries its `lockstat` snapshot; rates include the counting cost).
    #[serde(default)]
    pub lock_stats: bool,
    /// Every run, in the order it ran.
    pub runs: Vec<RunRecord>,
    /// Per lock and configuration, the summary's numbers.
    pub medians: Vec<MedianRecord>,
    /// The error that stopped the sweep before its end (`runs` holds the
    /// runs made before it); absent when the sweep ran to its end.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stopped_early: Option<String>,
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
    /// Share of read operations; `null` for mutexes under `lock`.
    pub read_pct: Option<Pct>,
    /// How many rounds ran.
    pub rounds: usize,
    /// Median over rounds of the total rate (for an even count, the mean
    /// of the middle two), rounded, op/s: the figure the summary prints
    /// without the baseline.
    pub total_rate: u64,
    /// The lock the ratio is taken against.
    pub baseline: String,
    /// Median over rounds of this lock's rate over the baseline's in the same
    /// round; `null` when the baseline did not run.
    pub ratio: Option<f64>,
    /// Slowest over fastest thread's operations in the median run.
    pub fairness: f64,
    /// The lowest of that figure over the rounds: with more threads than
    /// CPUs it moves a good deal from round to round, with how the
    /// scheduler placed the threads (the run's length matters too).
    #[serde(default)]
    pub fairness_min: f64,
    /// The highest of it over the rounds.
    #[serde(default)]
    pub fairness_max: f64,
}

/// The summary's numbers for every lock and configuration that ran, by
/// configuration, then in registry order.
pub fn medians(runs: &[RunRecord]) -> Vec<MedianRecord> {
    let mut out: Vec<MedianRecord> = median_runs(runs)
        .into_iter()
        .map(|((c, lock), r)| {
            let base = locks::baseline(c.0);
            let (fairness_min, fairness_max) = fairness_range(runs, &c, &lock);
            MedianRecord {
                rounds: runs_of(runs, &c, &lock).count(),
                ratio: ratio(runs, &c, &lock, base),
                baseline: base.to_string(),
                kind: r.kind.clone(),
                threads: r.stats.threads,
                read_pct: r.read_pct,
                // The summary's figure, not the median run's rate (they
                // differ for an even count of rounds).
                total_rate: median_rate(runs, &c, &lock).unwrap_or(r.stats.total_rate),
                fairness: r.stats.fairness(),
                fairness_min,
                fairness_max,
                lock,
            }
        })
        .collect();
    out.sort_by_key(|m| {
        (
            m.kind.clone(),
            m.threads,
            m.read_pct,
            locks::position(&m.lock),
        )
    });
    out
}

impl Report {
    /// Writes the report as pretty JSON, creating parent folders.
    pub fn write(&self, path: &Path) -> Result<(), String> {
        crate::json::write_json(self, path)
    }
}

/// One configuration: kind, threads, read share.
pub type ConfigKey = (Kind, usize, Option<Pct>);

/// The run whose total rate is the median of a lock's rounds for one
/// configuration (the lower middle for an even count): a real run, so its
/// per-thread counts can be shown.
pub fn median_runs(runs: &[RunRecord]) -> BTreeMap<(ConfigKey, String), &RunRecord> {
    let mut groups: BTreeMap<(ConfigKey, String), Vec<&RunRecord>> = BTreeMap::new();
    for r in runs {
        groups.entry((r.key(), r.lock.clone())).or_default().push(r);
    }
    groups
        .into_iter()
        .map(|(k, mut v)| {
            v.sort_by_key(|r| r.stats.total_rate);
            (k, v[(v.len() - 1) / 2])
        })
        .collect()
}

/// Lock names in registry order, limited to those that ran with `kind`.
fn locks_of(runs: &[RunRecord], kind: Kind) -> Vec<&'static str> {
    locks::REGISTRY
        .iter()
        .filter(|l| l.kind == kind && runs.iter().any(|r| r.lock == l.name))
        .map(|l| l.name)
        .collect()
}

/// The summary tables (markdown) for every kind that ran; `note` follows
/// the kind in each title (`, kv workload (...)`).
pub fn summary(runs: &[RunRecord], rounds: u32, note: &str) -> String {
    let mut out = String::new();
    let medians = median_runs(runs);
    for kind in [Kind::Mutex, Kind::RwLock] {
        let names = locks_of(runs, kind);
        if names.is_empty() {
            continue;
        }
        let mut configs: Vec<ConfigKey> = runs
            .iter()
            .map(|r| r.key())
            .filter(|k| k.0 == kind)
            .collect();
        configs.sort();
        configs.dedup();
        let base = locks::baseline(kind);
        let has_base = names.contains(&base);
        let with_pct = configs.iter().any(|c| c.2.is_some());
        let (row_head, row_rule) = if with_pct {
            ("| threads | r% |", "| ---: | ---: |")
        } else {
            ("| threads |", "| ---: |")
        };
        let cols: String = names.iter().map(|n| format!(" {n} |")).collect();
        let rules: String = names.iter().map(|_| " ---: |").collect();
        let row_start = |c: &ConfigKey| match c.2 {
            Some(r) => format!("| {} | {r}% |", c.1),
            None if with_pct => format!("| {} | - |", c.1),
            None => format!("| {} |", c.1),
        };
        let plural = if rounds == 1 { "" } else { "s" };
        // A sweep that stopped early left some cells with fewer rounds.
        let short = configs.iter().any(|c| {
            names.iter().any(|n| {
                let k = runs_of(runs, c, n).count();
                k > 0 && k < rounds as usize
            })
        });
        let fewer = if short {
            ", fewer where the sweep stopped"
        } else {
            ""
        };
        let what = format!("{}{note}", kind.plural());

        if has_base {
            let _ = writeln!(
                out,
                "### {what}: throughput relative to {base} (median of {rounds} round{plural}{fewer}; >1 is faster)\n"
            );
        } else {
            let _ = writeln!(
                out,
                "### {what}: total op/s (median of {rounds} round{plural}{fewer}; {base} not run, so no ratios)\n"
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
                    // The median of the rounds' rates, as the title says.
                    median_rate(runs, c, name)
                        .map(crate::format::thousands)
                        .unwrap_or_else(|| "-".into())
                };
                let _ = write!(line, " {cell} |");
            }
            let _ = writeln!(out, "{line}");
        }

        let range = if rounds > 1 {
            ", and in brackets its range over the rounds"
        } else {
            ""
        };
        let _ = writeln!(
            out,
            "\n### {what}: fairness, slowest / fastest thread's ops in the median run{range} (1.00 = perfectly fair)\n"
        );
        let _ = writeln!(out, "{row_head}{cols}\n{row_rule}{rules}");
        for c in &configs {
            let mut line = row_start(c);
            for name in &names {
                let cell = medians
                    .get(&(*c, name.to_string()))
                    .map(|r| fairness_cell(r.stats.fairness(), fairness_range(runs, c, name)))
                    .unwrap_or_else(|| "-".into());
                let _ = write!(line, " {cell} |");
            }
            let _ = writeln!(out, "{line}");
        }
        out.push('\n');
    }
    out
}

/// `name`'s runs (one per round) in configuration `c`.
fn runs_of<'a>(
    runs: &'a [RunRecord],
    c: &'a ConfigKey,
    name: &'a str,
) -> impl Iterator<Item = &'a RunRecord> {
    runs.iter().filter(move |r| r.lock == name && r.key() == *c)
}

/// The median of `name`'s total rates over the rounds in configuration
/// `c` (for an even count, the mean of the middle two), rounded, op/s.
fn median_rate(runs: &[RunRecord], c: &ConfigKey, name: &str) -> Option<u64> {
    median(
        runs_of(runs, c, name)
            .map(|r| r.stats.total_rate as f64)
            .collect(),
    )
    .map(|m| m.round() as u64)
}

/// The lowest and highest fairness of `name`'s runs in configuration `c`
/// (both 0 without a run).
fn fairness_range(runs: &[RunRecord], c: &ConfigKey, name: &str) -> (f64, f64) {
    runs_of(runs, c, name)
        .map(|r| r.stats.fairness())
        .fold(None, |acc: Option<(f64, f64)>, f| {
            Some(acc.map_or((f, f), |(lo, hi)| (lo.min(f), hi.max(f))))
        })
        .unwrap_or((0.0, 0.0))
}

/// A fairness table cell: the median run's figure, and the range over the
/// rounds in brackets when the rounds differ.
fn fairness_cell(median_run: f64, (lo, hi): (f64, f64)) -> String {
    let (m, lo, hi) = (
        format!("{median_run:.2}"),
        format!("{lo:.2}"),
        format!("{hi:.2}"),
    );
    if lo == hi {
        m
    } else {
        format!("{m} ({lo}-{hi})")
    }
}

/// The median over rounds of `name`'s rate divided by `base`'s rate in the
/// same round.
fn ratio(runs: &[RunRecord], c: &ConfigKey, name: &str, base: &str) -> Option<f64> {
    let of = |lock: &str| -> BTreeMap<u32, u64> {
        runs_of(runs, c, lock)
            .map(|r| (r.round, r.stats.total_rate))
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

/// One chart panel per kind and read share: `mutex`, `rwlock-r95`,
/// `rwlock-r99.9`; `kv` runs add `-kv` (`rwlock-kv-r94`).
pub fn panels(runs: &[RunRecord]) -> Vec<Panel<'_>> {
    let medians = median_runs(runs);
    let mut configs: Vec<(Kind, Option<Pct>)> =
        medians.keys().map(|((k, _, r), _)| (*k, *r)).collect();
    configs.sort();
    configs.dedup();
    let mut out = Vec::new();
    for (kind, pct) in configs {
        let mut threads: Vec<usize> = medians
            .keys()
            .filter(|((k, _, r), _)| *k == kind && *r == pct)
            .map(|((_, t, _), _)| *t)
            .collect();
        threads.sort_unstable();
        threads.dedup();
        let mut series = Vec::new();
        for info in locks::REGISTRY.iter().filter(|l| l.kind == kind) {
            let points: BTreeMap<usize, &Stats> = threads
                .iter()
                .enumerate()
                .filter_map(|(i, t)| {
                    medians
                        .get(&((kind, *t, pct), info.name.to_string()))
                        .map(|r| (i, &r.stats))
                })
                .collect();
            if !points.is_empty() {
                // The tables' figure, not the median run's rate.
                let rates = points
                    .keys()
                    .filter_map(|&i| {
                        let c = (kind, threads[i], pct);
                        median_rate(runs, &c, info.name).map(|r| (i, r as f64))
                    })
                    .collect();
                series.push(Series {
                    name: info.name.to_string(),
                    ours: info.ours,
                    points,
                    rates,
                });
            }
        }
        let first = medians
            .iter()
            .find(|(((k, _, r), _), _)| *k == kind && *r == pct)
            .map(|(_, r)| *r);
        let kv = first.is_some_and(|r| r.workload == "kv");
        let tag = if kv { "-kv" } else { "" };
        let (stem, what) = match pct {
            None => (format!("{}{tag}", kind.as_str()), kind.plural().to_string()),
            Some(r) => (
                format!("{}{tag}-r{r}", kind.as_str()),
                format!("{}, {r}% reads", kind.plural()),
            ),
        };
        let detail = match first {
            Some(r) if kv => format!(
                "kv: {} lookup/insert/update/remove %, runtime = {}s",
                r.mix.as_deref().unwrap_or("?"),
                r.runtime
            ),
            Some(r) => format!("load = {}, runtime = {}s", r.load.unwrap_or(1), r.runtime),
            None => String::new(),
        };
        out.push(Panel {
            stem,
            title: format!("{what} ({detail})"),
            threads,
            series,
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    /// A mutex run of `lock` at 2 threads in round `round`.
    fn run(lock: &str, round: u32, counts: Vec<u64>) -> RunRecord {
        RunRecord {
            lock: lock.to_string(),
            kind: Kind::Mutex.as_str().to_string(),
            workload: lock_workload(),
            read_pct: None,
            mix: None,
            load: Some(1),
            runtime: 0.1,
            round,
            stats: Stats::new(counts, Duration::from_millis(100), 0.2, 2),
            hit_rate: None,
            lockstat: None,
        }
    }

    /// `--runtime 1.118` prints and stores as given: the record's runtime
    /// came from `Duration::as_secs_f64`, which made it 1.1179999999999999
    /// in the header line, the JSON and the chart titles.
    #[test]
    fn the_runtime_is_recorded_as_given() {
        use crate::bench::{Measured, RunConfig, Workload};
        for s in [0.2, 0.03, 1.118, 1.122, 2.3, 10.0] {
            let cfg = RunConfig {
                lock: "pl-mutex",
                threads: 1,
                read_pct: None,
                load: 1,
                runtime: Duration::from_secs_f64(s),
                workload: Workload::Lock,
            };
            let m = Measured {
                stats: Stats::new(vec![1], Duration::from_millis(1), 0.0, 1),
                hit_rate: None,
            };
            let rec = RunRecord::new(locks::find("pl-mutex").unwrap(), &cfg, 1, m);
            assert_eq!(crate::format::runtime(rec.runtime), format!("{s}s"));
        }
    }

    /// A sweep that stopped in round 2 of 3 printed "median of 3 rounds"
    /// over cells that had 1 or 2.
    #[test]
    fn a_sweep_that_stopped_early_does_not_promise_every_round() {
        let full = vec![
            run("qspinlock", 1, vec![10]),
            run("pl-mutex", 1, vec![10]),
            run("qspinlock", 2, vec![10]),
            run("pl-mutex", 2, vec![10]),
        ];
        let table = summary(&full, 2, "");
        assert!(table.contains("(median of 2 rounds; >1"), "{table}");
        let stopped = &full[..3];
        let table = summary(stopped, 2, "");
        assert!(
            table.contains("(median of 2 rounds, fewer where the sweep stopped; >1"),
            "{table}"
        );
    }

    /// Without the baseline the table promises "total op/s (median of 2
    /// rounds)": with rounds of 100 and 300 op/s that is 200, not 100.
    #[test]
    fn the_total_rate_of_two_rounds_is_their_median() {
        let runs = vec![run("qspinlock", 1, vec![10]), run("qspinlock", 2, vec![30])];
        let table = summary(&runs, 2, "");
        assert!(table.contains("median of 2 rounds"), "{table}");
        assert!(table.contains("| 1 | 200 |"), "{table}");
    }

    /// The chart draws the table's figure: for rounds of 100 and 300 op/s,
    /// 200 (it drew the lower middle run's 100), while its fairness bar is
    /// still a real run's.
    #[test]
    fn the_chart_draws_the_printed_median_rate() {
        let runs = vec![run("qspinlock", 1, vec![10]), run("qspinlock", 2, vec![30])];
        let p = panels(&runs);
        let s = p[0].series.iter().find(|s| s.name == "qspinlock").unwrap();
        assert_eq!(s.rates.get(&0), Some(&200.0));
        assert_eq!(s.points[&0].total_rate, 100);
    }

    /// The JSON medians are "the summary's numbers": without the baseline
    /// the summary prints the median of the rounds' total rates (200 for
    /// rounds of 100 and 300 op/s), and the record said 100, the lower
    /// middle run's rate.
    #[test]
    fn the_json_median_rate_is_the_one_printed() {
        let runs = vec![run("qspinlock", 1, vec![10]), run("qspinlock", 2, vec![30])];
        let table = summary(&runs, 2, "");
        assert!(table.contains("| 1 | 200 |"), "{table}");
        let m = medians(&runs);
        assert_eq!(m[0].total_rate, 200, "{m:?}");
    }

    #[test]
    fn fairness_shows_the_median_run_and_the_range_over_rounds() {
        // qspinlock's rounds total 40, 20 and 60 operations: the median run
        // is round 1 (fairness 1/3); the rounds range from 1/3 to 1.
        // pl-mutex is perfectly fair in every round: no range.
        let runs = vec![
            run("qspinlock", 1, vec![10, 30]),
            run("pl-mutex", 1, vec![10, 10]),
            run("qspinlock", 2, vec![10, 10]),
            run("pl-mutex", 2, vec![10, 10]),
            run("qspinlock", 3, vec![20, 40]),
            run("pl-mutex", 3, vec![10, 10]),
        ];
        let table = summary(&runs, 3, "");
        assert!(
            table.contains("in the median run, and in brackets its range over the rounds"),
            "{table}"
        );
        assert!(table.contains("| 2 | 0.33 (0.33-1.00) | 1.00 |"), "{table}");
        let q = medians(&runs)
            .into_iter()
            .find(|m| m.lock == "qspinlock")
            .unwrap();
        assert!((q.fairness - 1.0 / 3.0).abs() < 1e-9);
        assert!((q.fairness_min - 1.0 / 3.0).abs() < 1e-9);
        assert_eq!(q.fairness_max, 1.0);

        // One round: no range, and the title does not promise one.
        let one = summary(&runs[..2], 1, "");
        assert!(!one.contains("range over the rounds"), "{one}");
        assert!(one.contains("| 2 | 0.33 | 1.00 |"), "{one}");
    }
}
