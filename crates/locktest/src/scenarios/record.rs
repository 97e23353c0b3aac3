//! A scenario's runs: the seed-format lines, the ratio summary, the JSON.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

use serde::Serialize;

use super::Outcome;
use crate::format;
use crate::locks::Kind;
use crate::report::median;

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
    /// Worker threads.
    pub threads: usize,
    /// Round number, from 1.
    pub round: u32,
    /// Requested runtime, seconds.
    pub runtime: f64,
    /// Measured time from start gate to stop flag, seconds.
    pub elapsed: f64,
    /// Operations completed by each thread.
    pub counts: Vec<u64>,
    /// Fewest, mean (rounded) and most operations of one thread.
    pub min: u64,
    /// See `min`.
    pub mean: u64,
    /// See `min`.
    pub max: u64,
    /// All operations over `elapsed`, op/s.
    pub total_rate: u64,
    /// `total_rate` per thread, op/s.
    pub percpu_rate: u64,
    /// CPU seconds the worker threads got.
    pub cpu: f64,
    /// `cpu` over what the threads could have used (`elapsed` × the lesser
    /// of threads and cores). Below 1: other load took the CPUs (on a
    /// shared machine the rates then say little) or the threads slept
    /// waiting (parked on a lock).
    pub cpu_share: f64,
    /// Scenario-specific numbers.
    pub metrics: BTreeMap<&'static str, f64>,
    /// Broken invariants; must be 0.
    pub violations: u64,
}

impl ScenarioRun {
    /// Derives the printed statistics from an outcome.
    pub fn new(
        scenario: &str,
        variant: &str,
        lock: Option<String>,
        runtime: f64,
        round: u32,
        out: Outcome,
    ) -> Self {
        let counts = out.sample.counts;
        let threads = counts.len().max(1);
        let sum: u64 = counts.iter().sum();
        let elapsed = out.sample.elapsed.as_secs_f64();
        let total = sum as f64 / elapsed;
        ScenarioRun {
            scenario: scenario.to_string(),
            variant: variant.to_string(),
            design: if lock.is_some() { "before" } else { "after" },
            lock,
            threads: counts.len(),
            round,
            runtime,
            elapsed,
            min: counts.iter().copied().min().unwrap_or(0),
            mean: (sum as f64 / threads as f64).round() as u64,
            max: counts.iter().copied().max().unwrap_or(0),
            total_rate: total.round() as u64,
            percpu_rate: (total / threads as f64).round() as u64,
            counts,
            cpu: out.cpu,
            cpu_share: out.cpu / (elapsed * threads.min(crate::cores()) as f64),
            metrics: out.metrics.into_iter().collect(),
            violations: out.violations,
        }
    }

    /// The seed's three lines plus one line: CPU share, metrics, violations.
    pub fn seed_lines(&self) -> String {
        let name = format!("{}/{}", self.scenario, self.variant);
        let mut metrics = format!("cpu-share = {:.2}, ", self.cpu_share);
        for (k, v) in &self.metrics {
            let _ = write!(metrics, "{k} = {}, ", number(*v));
        }
        format!(
            "{}\n{}\n{}\nThreads = {}, {metrics}violations = {}\n\n",
            format::header(&name, Kind::Mutex, self.runtime, None, 1),
            format::min_mean_max(self.threads, self.min, self.mean, self.max),
            format::rates(self.threads, self.total_rate, self.percpu_rate),
            self.threads,
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
    /// Their median: the summary's number.
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
        let mut threads: Vec<usize> = runs.iter().map(|r| r.threads).collect();
        threads.dedup();
        let rate = |t: usize, v: &str, round: u32| {
            runs.iter()
                .find(|r| r.threads == t && r.variant == v && r.round == round)
                .map_or(0.0, |r| r.total_rate as f64)
        };
        for t in threads {
            for &(a, _) in variants.iter().filter(|v| v.1 == "after") {
                for &(b, _) in variants.iter().filter(|v| v.1 == "before") {
                    let rs: Vec<f64> = (1..=rounds)
                        .map(|n| rate(t, a, n) / rate(t, b, n).max(1.0))
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
            cores: crate::cores(),
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
                .map(|r| format!("vs {} = {:.2}x", r.before, r.median))
                .collect();
            let _ = writeln!(out, "Threads = {t}, {} {}", rs[0].after, parts.join(", "));
        }
        out
    }

    /// Writes the JSON, creating its folder.
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
