//! `locktest scenario`, run as a user runs it, with tiny runtimes.

use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};

use assert_cmd::Command;
use predicates::prelude::*;
use serde_json::Value;

/// Every scenario and how many before designs it runs by default.
const SCENARIOS: &[(&str, usize)] = &[
    ("pmtimer", 2),
    ("memtype", 2),
    ("vpt", 3),
    ("gnttab", 2),
    ("p2m", 3),
];

fn locktest() -> Command {
    Command::cargo_bin("locktest").expect("locktest binary")
}

/// A fresh JSON path per call: tests run in parallel in one process, and
/// several run the same scenario (two writing one file made a test read
/// the other's report now and then).
fn json_path(tag: &str) -> PathBuf {
    static CALLS: AtomicUsize = AtomicUsize::new(0);
    let n = CALLS.fetch_add(1, Ordering::Relaxed);
    let dir = std::env::temp_dir().join(format!(
        "locktest-scenario-{}-{tag}-{n}",
        std::process::id()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    dir.join("r.json")
}

/// "1,234" -> 1234.
fn number(s: &str) -> u64 {
    s.trim()
        .replace(',', "")
        .parse()
        .unwrap_or_else(|e| panic!("not a number {s:?}: {e}"))
}

/// One run read back from stdout: name, threads, total rate, violations.
#[derive(Debug, PartialEq)]
struct Parsed {
    name: String,
    threads: u64,
    total_rate: u64,
    violations: u64,
}

fn parse(stdout: &str) -> Vec<Parsed> {
    let lines: Vec<&str> = stdout.lines().collect();
    let mut out = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        let Some(rest) = line.strip_prefix("Running locktest with ") else {
            continue;
        };
        let (name, params) = rest.split_once(" [").expect("header has [");
        assert!(
            // A scenario has no work units: no `load`.
            params.starts_with("runtime = ") && !params.contains("load") && params.ends_with(']'),
            "{line}"
        );
        let (t, mmm) = lines[i + 1]
            .split_once(", Min/Mean/Max = ")
            .expect("min/mean/max");
        let threads = number(t.strip_prefix("Threads = ").unwrap());
        assert_eq!(mmm.split('/').map(number).count(), 3);
        let rate = lines[i + 2]
            .strip_prefix(&format!("Threads = {threads}, Total Rate = "))
            .and_then(|r| r.split_once(" op/s; Percpu Rate = "))
            .expect("rates line")
            .0;
        let v = lines[i + 3]
            .rsplit_once("violations = ")
            .expect("violations")
            .1;
        out.push(Parsed {
            name: name.to_string(),
            threads,
            total_rate: number(rate),
            violations: number(v),
        });
    }
    out
}

/// Runs `scenario NAME` tiny; checks stdout against the JSON; returns both.
fn tiny(name: &str, extra: &[&str]) -> (String, Value) {
    let json = json_path(name);
    let out = locktest()
        .args(["scenario", name, "--runtime", "0.03", "--threads", "1,3"])
        .args(["--rounds", "2", "--quiet", "--no-plots", "--json"])
        .arg(&json)
        .args(extra)
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    let stdout = String::from_utf8(out).unwrap();
    let report: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let runs = report["runs"].as_array().unwrap();
    let parsed = parse(&stdout);
    assert_eq!(parsed.len(), runs.len(), "{stdout}");
    for (p, r) in parsed.iter().zip(runs) {
        let from_json = Parsed {
            name: format!("{name}/{}", r["variant"].as_str().unwrap()),
            threads: r["threads"].as_u64().unwrap(),
            total_rate: r["total_rate"].as_u64().unwrap(),
            violations: r["violations"].as_u64().unwrap(),
        };
        assert_eq!(*p, from_json);
        assert_eq!(p.violations, 0, "{stdout}");
        // Some operation, unless the run's threads hardly ran: a 30 ms run
        // on a loaded machine (these tests run in parallel, CI's too) can
        // give its one thread a microsecond of CPU. Threads that had a
        // tenth of their CPUs' time and did nothing are a defect.
        let did_some = r["counts"]
            .as_array()
            .unwrap()
            .iter()
            .any(|c| c.as_u64() > Some(0));
        let share = r["cpu_share"].as_f64().unwrap();
        assert!(did_some || share < 0.1, "{r}");
    }
    // One summary line per thread count, comparing after with each before.
    assert!(stdout.contains(&format!("Summary {name}: ")), "{stdout}");
    for t in [1, 3] {
        let line = stdout
            .lines()
            .find(|l| l.starts_with(&format!("Threads = {t}, after")))
            .unwrap_or_else(|| panic!("no summary for {t} threads:\n{stdout}"));
        assert!(
            line.contains(" vs before-") && line.ends_with('x'),
            "{line}"
        );
    }
    (stdout, report)
}

#[test]
fn every_scenario_completes_with_zero_violations() {
    for &(name, befores) in SCENARIOS {
        let (_, report) = tiny(name, &[]);
        // (befores + after) × 2 thread counts × 2 rounds.
        assert_eq!(
            report["runs"].as_array().unwrap().len(),
            (befores + 1) * 2 * 2
        );
        assert_eq!(report["ratios"].as_array().unwrap().len(), befores * 2);
        assert_eq!(report["scenario"], name);
    }
}

#[test]
fn lock_flag_picks_the_before_design() {
    let (stdout, _) = tiny("pmtimer", &["--lock", "std-mutex"]);
    assert!(stdout.contains("Running locktest with pmtimer/before-std-mutex [runtime = 0.03s"));
    assert!(!stdout.contains("before-qspinlock"));
}

#[test]
fn pmtimer_reports_recomputes_per_call() {
    let (_, report) = tiny("pmtimer", &["--lock", "qspinlock"]);
    for r in report["runs"].as_array().unwrap() {
        let per_call = r["metrics"]["recomputes/call"].as_f64().unwrap();
        assert!(per_call > 0.0 && per_call <= 1.0, "{r}");
        if r["design"] == "before" {
            assert_eq!(per_call, 1.0);
        }
    }
}

#[test]
fn gnttab_and_p2m_report_their_grant_traffic() {
    for name in ["gnttab", "p2m"] {
        let (_, report) = tiny(name, &[]);
        // Every run reports both counts; the traffic itself is summed over
        // the runs: a 30 ms run starved on a loaded machine (CI runs these
        // tests in parallel) has done a single operation, which is a map or
        // a copy, not both.
        let (mut maps, mut copies) = (0.0, 0.0);
        for r in report["runs"].as_array().unwrap() {
            let m = &r["metrics"];
            maps += m["maps"].as_f64().unwrap_or_else(|| panic!("no maps: {r}"));
            copies += m["copies"]
                .as_f64()
                .unwrap_or_else(|| panic!("no copies: {r}"));
            assert!(m["frames"].as_f64() >= Some(8.0), "{r}");
        }
        assert!(maps > 0.0 && copies > 0.0, "{name}: {report}");
    }
}

#[test]
fn all_runs_every_scenario_with_charts() {
    let dir = json_path("all").parent().unwrap().to_path_buf();
    let out = locktest()
        .args(["scenario", "all", "--runtime", "0.02", "--threads", "2"])
        .args(["--rounds", "1", "--quiet", "--out"])
        .arg(&dir)
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    let stdout = String::from_utf8(out).unwrap();
    for &(name, befores) in SCENARIOS {
        assert!(stdout.contains(&format!("Summary {name}: ")), "{stdout}");
        let report: Value = serde_json::from_str(
            &std::fs::read_to_string(dir.join(format!("scenario-{name}.json"))).unwrap(),
        )
        .unwrap();
        assert_eq!(report["runs"].as_array().unwrap().len(), befores + 1);
        for chart in ["throughput", "fairness"] {
            for ext in ["svg", "png"] {
                let f = dir.join(format!("{chart}-scenario-{name}.{ext}"));
                let len = std::fs::metadata(&f).map_or(0, |m| m.len());
                assert!(len > 1000, "{} missing or empty", f.display());
            }
        }
    }
}

#[test]
fn list_names_every_scenario() {
    let assert = locktest().args(["scenario", "list"]).assert().success();
    let out = String::from_utf8(assert.get_output().stdout.clone()).unwrap();
    for (name, _) in SCENARIOS {
        assert!(out.lines().any(|l| l.starts_with(name)), "{out}");
    }
}

#[test]
fn bad_arguments_exit_2_with_one_line() {
    let cases: &[&[&str]] = &[
        &["scenario", "nope"],
        &["scenario"],
        &["scenario", "pmtimer", "--lock", "nope"],
        &["scenario", "pmtimer", "--threads", "0"],
        &["scenario", "pmtimer", "--threads", "x"],
        &["scenario", "pmtimer", "--runtime", "-1"],
        &["scenario", "pmtimer", "--rounds", "0"],
        &["scenario", "pmtimer", "--bogus"],
        &["scenario", "all", "--json", "x.json"],
        &["scenario", "all", "--lock", "nope"],
        // `list` runs nothing: flags of a run are mistakes, not ignored.
        &["scenario", "list", "--lock", "qrwlock"],
        &["scenario", "list", "--threads", "2"],
        &["scenario", "list", "--stats"],
        &["scenario", "list", "--runtime", "5"],
        &["scenario", "list", "--rounds", "9"],
        &["scenario", "list", "--no-plots"],
        &["scenario", "list", "--out", "somewhere"],
    ];
    // The charts' folder is checked before the runs, even when --json
    // names a writable place elsewhere.
    let json = json_path("bad-out");
    let json = json.to_str().unwrap();
    let bad_out: &[&str] = &[
        "scenario",
        "pmtimer",
        "--runtime",
        "0.01",
        "--threads",
        "1",
        "--rounds",
        "1",
        "--json",
        json,
        "--out",
        "/proc/locktest-nope",
    ];
    for args in cases.iter().copied().chain([bad_out]) {
        let assert = locktest()
            .args(args)
            .assert()
            .code(2)
            .stdout(predicate::str::is_empty());
        let err = String::from_utf8(assert.get_output().stderr.clone()).unwrap();
        assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
        assert!(err.starts_with("locktest: "), "{args:?}: {err}");
    }
}
