//! The locktest command line, run as a user runs it.

use std::path::Path;

use assert_cmd::Command;
use predicates::prelude::*;
use serde_json::Value;

/// Every lock name the issue asks for that exists in scalelock today, plus
/// the peers.
const NAMES: &[&str] = &[
    "qspinlock",
    "qrwlock",
    "percpu-rwlock",
    "std-mutex",
    "std-rwlock",
    "pl-mutex",
    "pl-fairmutex",
    "pl-rwlock",
    "spin-mutex",
    "spin-ticket",
    "spin-rwlock",
    "sharded",
];

fn locktest() -> Command {
    Command::cargo_bin("locktest").expect("locktest binary")
}

/// "1,234" -> 1234.
fn number(s: &str) -> u64 {
    s.trim()
        .replace(',', "")
        .parse()
        .unwrap_or_else(|e| panic!("not a number {s:?}: {e}"))
}

/// One run as read back from the seed-format lines.
#[derive(Debug, PartialEq)]
struct Parsed {
    lock: String,
    read_pct: Option<f64>,
    threads: u64,
    min: u64,
    mean: u64,
    max: u64,
    total_rate: u64,
    percpu_rate: u64,
}

/// Parses every `Running locktest with ...` block in `stdout`.
fn parse_seed(stdout: &str) -> Vec<Parsed> {
    let lines: Vec<&str> = stdout.lines().collect();
    let mut runs = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        let Some(rest) = line.strip_prefix("Running locktest with ") else {
            continue;
        };
        let (lock, params) = rest.split_once(" [").expect("header has [");
        let params = params.strip_suffix(']').expect("header ends with ]");
        let read_pct = params
            .split(", ")
            .find_map(|p| p.strip_prefix("r% = "))
            .map(|p| {
                p.trim_end_matches('%')
                    .parse::<f64>()
                    .expect("r% is a number")
            });

        let mmm = lines[i + 1];
        let (t1, rest) = mmm
            .split_once(", Min/Mean/Max = ")
            .expect("min/mean/max line");
        let threads = number(t1.strip_prefix("Threads = ").expect("Threads ="));
        let v: Vec<u64> = rest.split('/').map(number).collect();
        assert_eq!(v.len(), 3, "{mmm}");

        let rates = lines[i + 2];
        let re = rates
            .strip_prefix(&format!("Threads = {threads}, Total Rate = "))
            .expect(rates);
        let (total, percpu) = re.split_once(" op/s; Percpu Rate = ").expect(rates);
        let percpu = percpu.strip_suffix(" op/s").expect(rates);
        runs.push(Parsed {
            lock: lock.to_string(),
            read_pct,
            threads,
            min: v[0],
            mean: v[1],
            max: v[2],
            total_rate: number(total),
            percpu_rate: number(percpu),
        });
    }
    runs
}

fn read_json(path: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).expect("json written")).expect("valid json")
}

#[test]
fn list_prints_every_name() {
    let out = locktest()
        .arg("list")
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    let out = String::from_utf8(out).unwrap();
    let listed: Vec<&str> = out
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .collect();
    for name in NAMES {
        assert!(listed.contains(name), "{name} missing from list:\n{out}");
    }
    for line in out.lines() {
        assert!(
            line.contains(" mutex ") || line.contains(" rwlock "),
            "kind missing: {line}"
        );
        assert!(line.contains(" try"), "operations missing: {line}");
    }
    // The negative control is not a lock to pick.
    assert!(!listed.contains(&"busted"), "{out}");
}

#[test]
fn tiny_run_seed_lines_agree_with_json() {
    let dir = tempdir("tiny");
    let json = dir.join("r.json");
    let assert = locktest()
        .args([
            "bench",
            "--runtime",
            "0.05",
            "--threads",
            "1,2",
            "--read-pct",
            "50,100",
            // One round: the default is three, and each prints its lines.
            "--rounds",
            "1",
        ])
        .args([
            "--lock",
            "qspinlock,pl-mutex,qrwlock,percpu-rwlock,pl-rwlock",
        ])
        .arg("--json")
        .arg(&json)
        .arg("--out")
        .arg(&dir)
        .arg("--quiet")
        .assert()
        .success();
    let stdout = String::from_utf8(assert.get_output().stdout.clone()).unwrap();

    let seed = parse_seed(&stdout);
    // 2 mutexes × 2 thread counts + 3 rwlocks × 2 thread counts × 2 r%.
    assert_eq!(seed.len(), 2 * 2 + 3 * 2 * 2, "{stdout}");
    assert!(stdout.contains("Running locktest with qspinlock [runtime = 0.05s, load = 1]"));
    assert!(stdout.contains("Running locktest with qrwlock [runtime = 0.05s, r% = 50%, load = 1]"));
    assert!(
        stdout.contains("throughput relative to pl-mutex"),
        "{stdout}"
    );
    assert!(
        stdout.contains("throughput relative to pl-rwlock"),
        "{stdout}"
    );

    let report = read_json(&json);
    assert_eq!(report["load"], 1, "the lock workload's load at the top");
    let runs = report["runs"].as_array().expect("runs array");
    assert_eq!(runs.len(), seed.len());
    for (p, r) in seed.iter().zip(runs) {
        let from_json = Parsed {
            lock: r["lock"].as_str().unwrap().to_string(),
            read_pct: r["read_pct"].as_f64(),
            threads: r["threads"].as_u64().unwrap(),
            min: r["min"].as_u64().unwrap(),
            mean: r["mean"].as_u64().unwrap(),
            max: r["max"].as_u64().unwrap(),
            total_rate: r["total_rate"].as_u64().unwrap(),
            percpu_rate: r["percpu_rate"].as_u64().unwrap(),
        };
        assert_eq!(*p, from_json);
        // The printed statistics are those of the stored per-thread counts.
        let counts: Vec<u64> = r["counts"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c.as_u64().unwrap())
            .collect();
        assert_eq!(counts.len() as u64, p.threads);
        assert_eq!(*counts.iter().min().unwrap(), p.min);
        assert_eq!(*counts.iter().max().unwrap(), p.max);
        let sum: u64 = counts.iter().sum();
        // Some operation, unless the threads hardly ran (a 50 ms run on a
        // loaded machine can give them microseconds of CPU).
        let share = r["cpu_share"].as_f64().unwrap();
        assert!(sum > 0 || share < 0.1, "no operations at all: {r}");
        let elapsed = r["elapsed"].as_f64().unwrap();
        assert!(elapsed >= 0.05, "ran {elapsed}s, asked 0.05s");
        assert_eq!(((sum as f64) / elapsed).round() as u64, p.total_rate);
        assert_eq!((sum as f64 / p.threads as f64).round() as u64, p.mean);
        assert_eq!(
            r["kind"],
            if p.read_pct.is_some() {
                "rwlock"
            } else {
                "mutex"
            }
        );
        assert_eq!(r["round"], 1);
    }

    for f in [
        "throughput-mutex.svg",
        "throughput-mutex.png",
        "fairness-mutex.png",
        "throughput-rwlock-r50.svg",
        "throughput-rwlock-r100.png",
        "fairness-rwlock-r100.svg",
    ] {
        let meta = std::fs::metadata(dir.join(f)).unwrap_or_else(|e| panic!("{f}: {e}"));
        assert!(meta.len() > 1000, "{f} is nearly empty");
    }
}

#[test]
fn rounds_report_each_run_and_a_median() {
    let dir = tempdir("rounds");
    let assert = locktest()
        .args([
            "--runtime",
            "0.02",
            "--threads",
            "2",
            "--rounds",
            "3",
            "--no-plots",
            "--quiet",
        ])
        .args(["--lock", "qspinlock,pl-mutex"])
        .arg("--out")
        .arg(&dir)
        .assert()
        .success();
    let stdout = String::from_utf8(assert.get_output().stdout.clone()).unwrap();
    let seed = parse_seed(&stdout);
    // Every round runs both locks; the order reverses every other round,
    // so that neither always runs first.
    let order: Vec<&str> = seed.iter().map(|p| p.lock.as_str()).collect();
    assert_eq!(
        order,
        [
            "qspinlock",
            "pl-mutex",
            "pl-mutex",
            "qspinlock",
            "qspinlock",
            "pl-mutex"
        ]
    );
    assert!(stdout.contains("median of 3 rounds"), "{stdout}");
    let report = read_json(&dir.join("results.json"));
    let rounds: Vec<u64> = report["runs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["round"].as_u64().unwrap())
        .collect();
    assert_eq!(rounds, [1, 1, 2, 2, 3, 3]);
    assert!(
        !dir.join("throughput-mutex.png").exists(),
        "--no-plots drew plots"
    );
}

#[test]
fn bad_arguments_exit_2_with_one_line() {
    let cases: &[&[&str]] = &[
        &["bench", "--lock", "nosuchlock"],
        &["bench", "--threads", "0"],
        &["bench", "--threads", "x"],
        &["bench", "--runtime", "0"],
        &["bench", "--runtime", "-1"],
        &["bench", "--runtime", "abc"],
        &["bench", "--runtime", "NaN"],
        &["bench", "--read-pct", "101"],
        &["bench", "--rounds", "0"],
        &["--threads", "0"],
        &["frobnicate"],
        &["bench", "--no-such-flag"],
        &["bench", "--read-pct", "99.12345"],
        &["bench", "--read-pct", "-5"],
        &["bench", "--workload", "nope"],
        &["bench", "--workload", "kv", "--kv-writes", "0:0:0"],
        &["bench", "--workload", "kv", "--kv-writes", "2:3"],
        &["torture", "--lock", "nosuchlock"],
        &["torture", "--threads", "0"],
        &["torture", "--seconds", "0"],
        &["torture", "--duration", "-1"],
        &["torture", "--writers", "0", "--readers", "0"],
        &["torture", "--threads", "4", "--writers", "2"],
        &["torture", "--nested", "9"],
        &["torture", "--stutter", "0"],
        &["torture", "--shuffle", "x"],
        &["torture", "--stat-interval", "0"],
        &["torture", "--stall-s", "nan"],
    ];
    for args in cases {
        let out = locktest()
            .args(*args)
            .assert()
            .code(2)
            .stdout(predicate::str::is_empty())
            .get_output()
            .clone();
        let err = String::from_utf8(out.stderr).unwrap();
        assert_eq!(err.lines().count(), 1, "{args:?}: not one line:\n{err}");
        assert!(err.starts_with("locktest: error"), "{args:?}: {err}");
        assert!(!err.contains("panicked"), "{args:?}: {err}");
    }
}

/// Every `End of test` line in a torture's stdout: (verdict, lock).
fn verdicts(stdout: &str) -> Vec<(String, String)> {
    stdout
        .lines()
        .filter_map(|l| l.strip_prefix("End of test: "))
        .map(|rest| {
            let (verdict, params) = rest.split_once(": ").expect("verdict: params");
            let lock = params
                .split(' ')
                .find_map(|p| p.strip_prefix("lock="))
                .expect("lock= in the parameters");
            (verdict.to_string(), lock.to_string())
        })
        .collect()
}

#[test]
fn torture_passes_for_qspinlock_and_peers() {
    // `--threads` and `--seconds` are the older spellings of the flags.
    let out = locktest()
        .args([
            "torture",
            "--lock",
            "qspinlock,pl-mutex,qrwlock,percpu-rwlock,std-rwlock",
        ])
        .args(["--threads", "4", "--seconds", "0.3"])
        .assert()
        .success()
        .get_output()
        .clone();
    let out = String::from_utf8(out.stdout).unwrap();
    let got = verdicts(&out);
    let want: Vec<(String, String)> = [
        "qspinlock",
        "pl-mutex",
        "qrwlock",
        "percpu-rwlock",
        "std-rwlock",
    ]
    .iter()
    .map(|l| ("SUCCESS".to_string(), l.to_string()))
    .collect();
    assert_eq!(got, want, "{out}");
    assert!(out.contains("Start of test: lock=qspinlock writers=2 readers=2 duration=0.3s"));
    for line in out
        .lines()
        .filter(|l| l.starts_with("Writes:") || l.starts_with("Reads:"))
    {
        assert!(
            line.contains(" Total: ") && line.contains(" Max/Min: "),
            "{line}"
        );
        assert!(line.ends_with("Fail: 0"), "{line}");
    }
}

#[test]
fn torture_of_every_scalelock_lock_succeeds_under_shuffle_and_stutter() {
    let json = tempdir("torture-ours").join("t.json");
    let out = locktest()
        .args(["torture", "--lock", "qspinlock,qrwlock,percpu-rwlock"])
        .args([
            "--duration",
            "0.5",
            "--shuffle",
            "--stutter",
            "--nested",
            "2",
        ])
        .args(["--long-hold-ms", "20", "--stat-interval", "0.2", "--json"])
        .arg(&json)
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    let out = String::from_utf8(out).unwrap();
    let got = verdicts(&out);
    assert_eq!(got.len(), 3, "{out}");
    assert!(got.iter().all(|v| v.0 == "SUCCESS"), "{out}");
    assert!(out.contains("stutter=50ms shuffle=10ms nested=2"), "{out}");
    // Periodic lines as well as the final ones.
    assert!(out.matches("Writes: Total: ").count() >= 3 * 2, "{out}");
    let records = read_json(&json);
    let records = records.as_array().expect("one record per lock");
    assert_eq!(records.len(), 3);
    for r in records {
        assert_eq!(r["verdict"], "SUCCESS");
        assert!(r["writes"]["total"].as_u64() > Some(0), "{r}");
        assert!(r["reads"]["total"].as_u64() > Some(0), "{r}");
        assert_eq!(r["writes"]["fail"], 0);
        // The flattened statistics cover every thread: 8× the cores.
        assert_eq!(
            r["counts"].as_array().unwrap().len() as u64,
            r["params"]["writers"].as_u64().unwrap() + r["params"]["readers"].as_u64().unwrap()
        );
        assert!(r["ops"]["try-write"].as_u64() > Some(0), "{r}");
    }
    // The lock's own operations are in the mix.
    assert!(records[0]["ops"]["write-fair"].as_u64() > Some(0));
    assert!(records[1]["ops"]["upgrade"].as_u64() > Some(0));
    assert!(records[1]["ops"]["timed-upgradable"].as_u64() > Some(0));
    assert!(records[2]["ops"]["downgrade"].as_u64() > Some(0));
}

#[test]
fn busted_lock_ends_in_failure() {
    let json = tempdir("torture-busted").join("t.json");
    let out = locktest()
        .args(["torture", "--lock", "busted", "--duration", "0.3", "--json"])
        .arg(&json)
        .assert()
        .code(1)
        .get_output()
        .clone();
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert_eq!(
        verdicts(&stdout),
        [("FAILURE".to_string(), "busted".to_string())],
        "{stdout}"
    );
    assert!(stdout.contains(" !!!"), "{stdout}");
    assert!(stdout.contains("Failure: "), "{stdout}");
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(err.contains("torture failed for: busted"), "{err}");
    assert_eq!(read_json(&json)[0]["verdict"], "FAILURE");
}

#[test]
fn kv_workload_runs_every_rwlock_with_fractional_read_shares() {
    let dir = tempdir("kv");
    let out = locktest()
        .args([
            "bench",
            "--workload",
            "kv",
            "--threads",
            "1,2",
            "--rounds",
            "1",
        ])
        .args([
            "--read-pct",
            "94,99.9",
            "--runtime",
            "0.03",
            "--quiet",
            "--out",
        ])
        .arg(&dir)
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    let stdout = String::from_utf8(out).unwrap();
    let rwlocks: Vec<&str> = NAMES
        .iter()
        .copied()
        .filter(|n| n.contains("rwlock") || *n == "sharded")
        .collect();
    let seed = parse_seed(&stdout);
    assert_eq!(seed.len(), rwlocks.len() * 2 * 2, "{stdout}");
    assert!(
        stdout.contains(
            "Running locktest with qrwlock [runtime = 0.03s, workload = kv, r% = 94%, mix = 94/2/3/1]"
        ),
        "{stdout}"
    );
    assert!(
        stdout.contains("r% = 99.9%, mix = 99.9/0.0333/0.05/0.0167]"),
        "{stdout}"
    );
    assert!(stdout.contains("kv workload"), "{stdout}");
    assert!(stdout.contains("| 2 | 99.9% |"), "{stdout}");
    let report = read_json(&dir.join("results.json"));
    assert_eq!(report["workload"], "kv");
    assert_eq!(report["kv_writes"], "2:3:1");
    // The kv workload has no work units: no `load` at the top either.
    assert!(report.get("load").is_none(), "{report}");
    let runs = report["runs"].as_array().unwrap();
    for r in runs {
        assert_eq!(r["workload"], "kv");
        assert!(rwlocks.contains(&r["lock"].as_str().unwrap()), "{r}");
        let hit = r["hit_rate"].as_f64().unwrap();
        assert!(hit > 0.5 && hit <= 1.0, "lookups should mostly hit: {r}");
        assert!(r.get("load").is_none(), "{r}");
    }
    assert!(runs.iter().any(|r| r["read_pct"].as_f64() == Some(99.9)));
    assert!(runs.iter().any(|r| r["read_pct"].as_u64() == Some(94)));
    for f in [
        "throughput-rwlock-kv-r94.svg",
        "fairness-rwlock-kv-r99.9.png",
    ] {
        assert!(dir.join(f).exists(), "{f} missing");
    }
}

#[test]
fn fractional_read_pct_in_the_lock_workload() {
    let dir = tempdir("frac");
    let out = locktest()
        .args([
            "bench",
            "--lock",
            "qrwlock,pl-rwlock,pl-mutex",
            "--threads",
            "2",
            "--rounds",
            "1",
        ])
        .args([
            "--read-pct",
            "99.9,99.99",
            "--runtime",
            "0.03",
            "--quiet",
            "--out",
        ])
        .arg(&dir)
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    let stdout = String::from_utf8(out).unwrap();
    assert!(
        stdout.contains("Running locktest with qrwlock [runtime = 0.03s, r% = 99.99%, load = 1]"),
        "{stdout}"
    );
    // Mutexes ignore the read share and run once per thread count.
    assert_eq!(stdout.matches("Running locktest with pl-mutex").count(), 1);
    assert!(stdout.contains("| 2 | 99.9% | "), "{stdout}");
    let report = read_json(&dir.join("results.json"));
    let pcts: Vec<Option<f64>> = report["medians"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["lock"] == "qrwlock")
        .map(|m| m["read_pct"].as_f64())
        .collect();
    assert_eq!(pcts, [Some(99.9), Some(99.99)]);
    assert!(dir.join("throughput-rwlock-r99.99.png").exists());
    assert!(dir.join("throughput-mutex.svg").exists());
}

/// A fresh folder under the target dir for one test's report files.
fn tempdir(name: &str) -> std::path::PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("locktest-{name}"));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// The class `name` of one run's `lockstat` snapshot.
#[cfg(feature = "stats")]
fn class<'a>(run: &'a Value, name: &str) -> &'a Value {
    let classes = run["lockstat"]["classes"]
        .as_array()
        .unwrap_or_else(|| panic!("no lockstat snapshot in {run}"));
    classes
        .iter()
        .find(|c| c["name"] == name)
        .unwrap_or_else(|| panic!("no class {name} in {classes:?}"))
}

#[cfg(feature = "stats")]
#[test]
fn bench_stats_prints_table_and_advice_and_the_json_carries_the_snapshot() {
    let dir = tempdir("bench-stats");
    let json = dir.join("r.json");
    let assert = locktest()
        .args(["bench", "--lock", "qspinlock,qrwlock,pl-mutex"])
        .args(["--threads", "2", "--read-pct", "95", "--runtime", "0.03"])
        .args(["--rounds", "1", "--quiet", "--no-plots", "--stats"])
        .arg("--json")
        .arg(&json)
        .arg("--out")
        .arg(&dir)
        .assert()
        .success();
    let stdout = String::from_utf8(assert.get_output().stdout.clone()).unwrap();
    for want in [
        "lock statistics, qspinlock t=2 round 1:",
        "lock statistics, qrwlock t=2 r%=95 round 1:",
        "lock_stat (scalelock)",
        "bench/qspinlock",
        "bench/qrwlock",
        "advice:",
        "lock statistics, pl-mutex t=2 round 1:\n  (no scalelock lock ran",
    ] {
        assert!(stdout.contains(want), "no {want:?} in:\n{stdout}");
    }
    // The table follows its run's seed lines, before the next run.
    let table = stdout.find("bench/qspinlock ").unwrap();
    let runs: Vec<usize> = stdout
        .match_indices("Running locktest with")
        .map(|m| m.0)
        .collect();
    let own = stdout.find("Running locktest with qspinlock").unwrap();
    assert!(table > own && runs.iter().all(|&r| r <= own || r > table));

    let report = read_json(&json);
    assert_eq!(report["lock_stats"], true);
    let runs = report["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 3);
    for run in runs {
        let total = run["total"].as_u64().unwrap();
        assert!(total > 0);
        // Statistics were reset right before each run: every operation of
        // the run is one acquisition of its lock, the counted ones and each
        // thread's last, which ended after the stop and does not count.
        let acquired = total + run["threads"].as_u64().unwrap();
        match run["lock"].as_str().unwrap() {
            "qspinlock" => {
                let c = class(run, "bench/qspinlock");
                assert_eq!(c["kind"], "QSpinLock");
                assert_eq!(c["write"]["acquisitions"].as_u64(), Some(acquired));
                assert_eq!(c["read"]["acquisitions"].as_u64(), Some(0));
                assert_eq!(run["lockstat"]["classes"].as_array().unwrap().len(), 1);
            }
            "qrwlock" => {
                let c = class(run, "bench/qrwlock");
                let r = c["read"]["acquisitions"].as_u64().unwrap();
                let w = c["write"]["acquisitions"].as_u64().unwrap();
                assert_eq!(r + w, acquired);
                assert!(r > w, "95% reads: {r} reads, {w} writes");
            }
            "pl-mutex" => {
                assert_eq!(run["lockstat"]["classes"].as_array().unwrap().len(), 0);
                assert_eq!(run["lockstat"]["enabled"], true);
            }
            other => panic!("unexpected lock {other}"),
        }
    }
}

#[cfg(feature = "stats")]
#[test]
fn scenario_stats_names_the_scenarios_locks() {
    let dir = tempdir("scenario-stats");
    let json = dir.join("memtype.json");
    let assert = locktest()
        .args(["scenario", "memtype", "--lock", "qspinlock"])
        .args(["--threads", "2", "--runtime", "0.03", "--rounds", "1"])
        .args(["--quiet", "--no-plots", "--stats"])
        .arg("--json")
        .arg(&json)
        .arg("--out")
        .arg(&dir)
        .assert()
        .success();
    let stdout = String::from_utf8(assert.get_output().stdout.clone()).unwrap();
    assert!(
        stdout.contains("lock statistics, memtype/before-qspinlock t=2 round 1:"),
        "{stdout}"
    );
    assert!(stdout.contains("memtype/memtype_lock "), "{stdout}");
    assert!(stdout.contains("advice:"), "{stdout}");
    let report = read_json(&json);
    let runs = report["runs"].as_array().unwrap();
    let before = runs
        .iter()
        .find(|r| r["variant"] == "before-qspinlock")
        .unwrap();
    let c = class(before, "memtype/memtype_lock");
    assert!(c["write"]["acquisitions"].as_u64().unwrap() > 0);
    // The after design takes no lock: its snapshot is empty.
    let after = runs.iter().find(|r| r["design"] == "after").unwrap();
    assert_eq!(after["lockstat"]["classes"].as_array().unwrap().len(), 0);
}

#[cfg(feature = "stats")]
#[test]
fn scenario_all_stats_prints_a_table_per_variant() {
    let dir = tempdir("scenario-all-stats");
    let assert = locktest()
        .args(["scenario", "all", "--threads", "1", "--runtime", "0.02"])
        .args(["--rounds", "1", "--quiet", "--no-plots", "--stats"])
        .arg("--out")
        .arg(&dir)
        .assert()
        .success();
    let stdout = String::from_utf8(assert.get_output().stdout.clone()).unwrap();
    let runs = stdout.matches("Running locktest with").count();
    assert!(runs >= 10, "{stdout}");
    assert_eq!(stdout.matches("lock statistics, ").count(), runs);
    for class in [
        "pmtimer/pmt_lock ",
        "pmtimer/refresh ",
        "memtype/memtype_lock ",
        "vpt/pt_migrate ",
        "vpt/tm_lock ",
        "vpt/timer_lock ",
        "grant_table/gt_lock ",
        "p2m/p2m_lock ",
    ] {
        assert!(stdout.contains(class), "no {class:?} in:\n{stdout}");
    }
    for name in ["pmtimer", "memtype", "vpt", "gnttab", "p2m"] {
        let report = read_json(&dir.join(format!("scenario-{name}.json")));
        for run in report["runs"].as_array().unwrap() {
            assert!(run["lockstat"]["classes"].is_array(), "{name}: {run}");
        }
    }
}

#[cfg(not(feature = "stats"))]
#[test]
fn stats_without_the_feature_is_an_error_that_says_how_to_rebuild() {
    for args in [
        &[
            "bench",
            "--lock",
            "qspinlock",
            "--runtime",
            "0.01",
            "--stats",
        ][..],
        &["scenario", "memtype", "--runtime", "0.01", "--stats"],
        &["scenario", "all", "--runtime", "0.01", "--stats"],
    ] {
        let assert = locktest().args(args).assert().code(2);
        let out = assert.get_output();
        let stderr = String::from_utf8(out.stderr.clone()).unwrap();
        assert!(
            stderr.contains("--stats") && stderr.contains("--features stats"),
            "{args:?}: {stderr}"
        );
        // Refused before anything ran.
        assert!(out.stdout.is_empty(), "{args:?}");
    }
}

/// `scenario` without NAME: the one-line error must say what is missing.
#[test]
fn a_missing_scenario_name_is_named_in_the_error() {
    let out = locktest()
        .arg("scenario")
        .assert()
        .code(2)
        .get_output()
        .clone();
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(
        err.contains("NAME"),
        "error does not name the argument: {err:?}"
    );
}

/// A lock named twice is tortured once; a statistics interval under 10 ms
/// is refused.
#[test]
fn torture_runs_a_lock_named_twice_once_and_bounds_the_stat_interval() {
    let out = locktest()
        .args([
            "torture",
            "--lock",
            "pl-mutex,pl-mutex",
            "--duration",
            "0.05",
        ])
        .args(["--threads", "2", "--long-hold-ms", "0"])
        .assert()
        .success()
        .get_output()
        .clone();
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert_eq!(stdout.matches("Start of test").count(), 1, "{stdout}");
    let assert = locktest()
        .args(["torture", "--lock", "pl-mutex", "--duration", "0.05"])
        .args(["--stat-interval", "0.001"])
        .assert()
        .code(2)
        .stdout(predicate::str::is_empty());
    let err = String::from_utf8(assert.get_output().stderr.clone()).unwrap();
    assert!(err.contains("--stat-interval"), "{err}");
}

/// `--writers` + `--readers` that overflow usize: a usage error, not a panic.
#[test]
fn a_torture_thread_sum_that_overflows_is_a_usage_error() {
    locktest()
        .args(["torture", "--lock", "pl-mutex", "--duration", "0.01"])
        .args(["--writers", "18446744073709551615", "--readers", "2"])
        .assert()
        .code(2)
        .stdout(predicate::str::is_empty());
}

/// Flags the chosen workload does not use are refused, not ignored, and
/// `--load` is bounded.
#[test]
fn bench_flags_of_the_other_workload_are_refused() {
    for (args, flag) in [
        (&["--kv-writes", "1:1:1"][..], "--kv-writes"),
        (
            &["--workload", "lock", "--kv-writes", "1:1:1"],
            "--kv-writes",
        ),
        (&["--workload", "kv", "--load", "5"], "--load"),
        (&["--load", "10000001"], "--load"),
    ] {
        let assert = locktest()
            .args(["bench", "--lock", "qrwlock", "--threads", "1"])
            .args([
                "--runtime",
                "0.01",
                "--rounds",
                "1",
                "--quiet",
                "--no-plots",
            ])
            .args(args)
            .assert()
            .code(2)
            .stdout(predicate::str::is_empty());
        let err = String::from_utf8(assert.get_output().stderr.clone()).unwrap();
        assert!(
            err.starts_with(&format!("locktest: error: {flag}")),
            "{args:?}: {err}"
        );
        assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
    }
}

/// An output folder that cannot be created is refused before the sweep
/// runs, not after it (when the results would be lost).
#[test]
fn an_unwritable_out_is_refused_before_running() {
    let dir = tempdir("unwritable");
    let file = dir.join("a-file");
    std::fs::write(&file, "x").unwrap();
    locktest()
        .args(["bench", "--lock", "pl-mutex", "--threads", "1"])
        .args(["--runtime", "0.01", "--rounds", "1", "--quiet", "--out"])
        .arg(&file)
        .assert()
        .code(2)
        .stdout(predicate::str::is_empty());
}

/// Settings under which no lock can fail (one thread; no writer) must not
/// report SUCCESS for `busted`, the lock that does not lock.
#[test]
fn torture_settings_that_cannot_fail_are_refused() {
    for threads in [
        &["--threads", "1"][..],
        &["--writers", "0", "--readers", "4"],
    ] {
        locktest()
            .args(["torture", "--lock", "busted", "--duration", "0.1"])
            .args(["--long-hold-ms", "0"])
            .args(threads)
            .assert()
            .failure();
    }
}

/// A sweep that fails part-way (here: no memory for the second run's
/// threads) keeps the runs it made: the JSON holds them and says where it
/// stopped, and the exit status is a failure.
#[cfg(target_os = "linux")]
#[test]
fn a_sweep_that_fails_part_way_writes_the_runs_it_made() {
    let dir = tempdir("stopped-early");
    let json = dir.join("results.json");
    let bin = assert_cmd::cargo::cargo_bin("locktest");
    // 600 MB of address space: one thread runs, 2000 (2 MiB stacks) cannot
    // all start.
    let script = format!(
        "ulimit -v 600000 && exec '{}' bench --lock pl-mutex --threads 1,2000 \
         --runtime 0.01 --rounds 1 --quiet --no-plots --json '{}'",
        bin.display(),
        json.display()
    );
    let out = std::process::Command::new("sh")
        .args(["-c", &script])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("the run before it is in"), "{stderr}");
    let text = std::fs::read_to_string(&json).expect("the runs made were not written");
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(v["runs"].as_array().map(Vec::len), Some(1), "{text}");
    assert!(
        v["stopped_early"]
            .as_str()
            .is_some_and(|s| s.contains("2000")),
        "{text}"
    );
}
