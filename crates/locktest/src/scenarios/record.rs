//! A scenario's runs: the seed-format lines, the ratio summary, the JSON.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

use serde::Serialize;

use super::Outcome;
use crate::format;
use crate::json::write_json;
use crate::lockable::Kind;
use crate::plot::{Panel, Series};
use crate::stats::{Stats, median};

/// One variant's run in one round.
#[derive(Debug, Serialize)]
pub struct ScenarioRun {
    /// Scenario name.
    pub scenario: String,
    /// `before-LOCK` or the after design's name.
    pub variant: String,
    /// `"before"` or `"after"`.
    pub design: &'static str,
    /// The before design's lock; `null` for after.
    pub lock: Option<String>,
    /// Round number, from 1.
    pub round: u32,
    /// Requested runtime, seconds.
    pub runtime: f64,
    /// Threads, per-thread counts, the seed format's numbers and the CPU
    /// share (below 1: other load took the CPUs, or the threads slept on
    /// a lock; a starved run's rates say little).
    #[serde(flatten)]
    pub stats: Stats,
    /// Scenario-specific numbers.
    pub metrics: BTreeMap<&'static str, f64>,
    /// Broken invariants; must be 0.
    pub violations: u64,
    /// `--stats`: scalelock's lock statistics of this run
    /// (`scalelock::stats::Snapshot`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lockstat: Option<serde_json::Value>,
}

impl ScenarioRun {
    /// The record of one variant's outcome.
    pub fn new(
        scenario: &str,
        variant: &str,
        lock: Option<String>,
        runtime: f64,
        round: u32,
        out: Outcome,
    ) -> Self {
        ScenarioRun {
            scenario: scenario.to_string(),
            variant: variant.to_string(),
            design: if lock.is_some() { "before" } else { "after" },
            lock,
            round,
            runtime,
            stats: out.stats,
            metrics: out.metrics.into_iter().collect(),
            violations: out.violations,
            lockstat: None,
        }
    }

    /// The seed's three lines plus one line: CPU share, metrics, violations.
    pub fn seed_lines(&self) -> String {
        let name = format!("{}/{}", self.scenario, self.variant);
        let s = &self.stats;
        let mut metrics = format!("cpu-share = {:.2}, ", s.cpu_share);
        for (k, v) in &self.metrics {
            let _ = write!(metrics, "{k} = {}, ", number(*v));
        }
        format!(
            "{}\n{}\n{}\nThreads = {}, {metrics}violations = {}\n\n",
            format::header(&name, Kind::Mutex, self.runtime, None, None),
            format::min_mean_max(s.threads, s.min, s.mean, s.max),
            format::rates(s.threads, s.total_rate, s.percpu_rate),
            s.threads,
            self.violations,
        )
    }
}

/// Integers with separators, fractions with three decimals.
fn number(v: f64) -> String {
    if v.fract() == 0.0 && v.abs() < 1e18 {
        let s = format::thousands(v.abs() as u64);
        if v < 0.0 { format!("-{s}") } else { s }
    } else {
        format!("{v:.3}")
    }
}

/// After over one before at one thread count.
#[derive(Debug, Serialize)]
pub struct Ratio {
    /// Worker threads.
    pub threads: usize,
    /// The after variant.
    pub after: String,
    /// The before variant it is divided by.
    pub before: String,
    /// After's total op/s over before's, per round.
    pub ratios: Vec<f64>,
    /// Their median: the summary's number (0 without ratios: every
    /// round's before run made no operation).
    pub median: f64,
}

/// The JSON file.
#[derive(Debug, Serialize)]
pub struct Report {
    /// `locktest X.Y.Z`.
    pub tool: String,
    /// Scenario name.
    pub scenario: String,
    /// CPUs available to the process.
    pub cores: usize,
    /// Requested runtime per run, seconds.
    pub runtime: f64,
    /// Rounds per thread count.
    pub rounds: u32,
    /// Every run, in the order it ran.
    pub runs: Vec<ScenarioRun>,
    /// The summary's ratios.
    pub ratios: Vec<Ratio>,
}

impl Report {
    /// Collects the runs and derives the round-by-round ratios.
    pub fn new(scenario: &str, runtime: f64, rounds: u32, runs: Vec<ScenarioRun>) -> Self {
        let mut ratios = Vec::new();
        let mut variants: Vec<(&str, &str)> = Vec::new();
        for r in &runs {
            if !variants.iter().any(|v| v.0 == r.variant) {
                variants.push((&r.variant, r.design));
            }
        }
        let mut threads: Vec<usize> = runs.iter().map(|r| r.stats.threads).collect();
        threads.dedup();
        let rate = |t: usize, v: &str, round: u32| {
            runs.iter()
                .find(|r| r.stats.threads == t && r.variant == v && r.round == round)
                .map_or(0.0, |r| r.stats.total_rate as f64)
        };
        for t in threads {
            for &(a, _) in variants.iter().filter(|v| v.1 == "after") {
                for &(b, _) in variants.iter().filter(|v| v.1 == "before") {
                    // As in the bench: a round whose before made no
                    // operation has no ratio.
                    let rs: Vec<f64> = (1..=rounds)
                        .filter(|&n| rate(t, b, n) > 0.0)
                        .map(|n| rate(t, a, n) / rate(t, b, n))
                        .collect();
                    ratios.push(Ratio {
                        threads: t,
                        after: a.to_string(),
                        before: b.to_string(),
                        median: median(rs.clone()).unwrap_or(0.0),
                        ratios: rs,
                    });
                }
            }
        }
        Report {
            tool: concat!("locktest ", env!("CARGO_PKG_VERSION")).to_string(),
            scenario: scenario.to_string(),
            cores: crate::harness::cores(),
            runtime,
            rounds,
            runs,
            ratios,
        }
    }

    /// All violations of all runs.
    pub fn violations(&self) -> u64 {
        self.runs.iter().map(|r| r.violations).sum()
    }

    /// `Summary ...` and one line per thread count:
    /// `Threads = 16, AFTER vs before-x = 2.10x, vs before-y = 1.50x`.
    pub fn summary(&self) -> String {
        let mut out = format!(
            "Summary {}: after / before total op/s, median of {} round(s); violations = {}\n",
            self.scenario,
            self.rounds,
            self.violations()
        );
        let mut threads: Vec<usize> = self.ratios.iter().map(|r| r.threads).collect();
        threads.dedup();
        for t in threads {
            let rs: Vec<&Ratio> = self.ratios.iter().filter(|r| r.threads == t).collect();
            let parts: Vec<String> = rs
                .iter()
                .map(|r| {
                    if r.ratios.is_empty() {
                        format!("vs {} = - (it made no operation)", r.before)
                    } else {
                        format!("vs {} = {:.2}x", r.before, r.median)
                    }
                })
                .collect();
            let _ = writeln!(out, "Threads = {t}, {} {}", rs[0].after, parts.join(", "));
        }
        out
    }

    /// Writes the JSON, creating its folder.
    pub fn write(&self, path: &Path) -> Result<(), String> {
        write_json(self, path)
    }

    /// The charts' data: one line per variant, at each thread count the
    /// run with the median total rate over the rounds.
    pub fn panel(&self) -> Panel<'_> {
        let mut threads: Vec<usize> = self.runs.iter().map(|r| r.stats.threads).collect();
        threads.sort_unstable();
        threads.dedup();
        let mut variants: Vec<&ScenarioRun> = Vec::new();
        for r in &self.runs {
            if !variants.iter().any(|v| v.variant == r.variant) {
                variants.push(r);
            }
        }
        let series = variants
            .into_iter()
            .map(|first| {
                let v = first.variant.as_str();
                let of = |t: usize| {
                    let mut of: Vec<&ScenarioRun> = self
                        .runs
                        .iter()
                        .filter(|r| r.variant == v && r.stats.threads == t)
                        .collect();
                    of.sort_by_key(|r| r.stats.total_rate);
                    of
                };
                let points = threads
                    .iter()
                    .enumerate()
                    .filter_map(|(i, &t)| {
                        let of = of(t);
                        of.get(of.len().saturating_sub(1) / 2)
                            .map(|r| (i, &r.stats))
                    })
                    .collect();
                // The median rate over the rounds (the title's "median of N
                // rounds"; for an even count, the mean of the middle two).
                let rates = threads
                    .iter()
                    .enumerate()
                    .filter_map(|(i, &t)| {
                        median(of(t).iter().map(|r| r.stats.total_rate as f64).collect())
                            .map(|m| (i, m))
                    })
                    .collect();
                let ours = match &first.lock {
                    None => true,
                    Some(l) => crate::locks::find(l).is_some_and(|l| l.ours),
                };
                Series {
                    name: v.to_string(),
                    ours,
                    points,
                    rates,
                }
            })
            .collect();
        Panel {
            stem: format!("scenario-{}", self.scenario),
            title: format!(
                "scenario {} (runtime = {}s, median of {} round{})",
                self.scenario,
                self.runtime,
                self.rounds,
                if self.rounds == 1 { "" } else { "s" }
            ),
            threads,
            series,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn run(variant: &str, lock: Option<&str>, round: u32, ops: u64) -> ScenarioRun {
        let out = Outcome {
            stats: Stats::new(vec![ops], Duration::from_secs(1), 1.0, 2),
            metrics: Vec::new(),
            violations: 0,
        };
        ScenarioRun::new("s", variant, lock.map(str::to_string), 1.0, round, out)
    }

    /// A before run that made no operation gives no ratio (as in the bench
    /// summary), not after's op/s over 1 op/s.
    #[test]
    fn a_before_run_without_operations_gives_no_ratio() {
        let runs = vec![
            run("before-x", Some("x"), 1, 0),
            run("after", None, 1, 1000),
        ];
        let rep = Report::new("s", 1.0, 1, runs);
        assert!(rep.ratios[0].ratios.is_empty(), "{:?}", rep.ratios);
        assert!(
            rep.summary()
                .contains("vs before-x = - (it made no operation)"),
            "{}",
            rep.summary()
        );
    }

    /// The chart draws the median of the rounds' rates (the title's): 200
    /// for rounds of 100 and 300 op/s (it drew the lower middle run's 100).
    #[test]
    fn the_chart_draws_the_median_rate() {
        let runs = vec![run("after", None, 1, 100), run("after", None, 2, 300)];
        let rep = Report::new("s", 1.0, 2, runs);
        let p = rep.panel();
        assert_eq!(p.series[0].rates.get(&0), Some(&200.0));
    }
}
