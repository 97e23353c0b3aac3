//! One lock's torture: writer and reader threads run the operation mix
//! through the shared harness, while the main thread prints statistics,
//! stutters and shuffles them, and watches for a stall.
//!
//! A stall is `--stall-s` (10 s; at least 4 long holds) of the run, not
//! counting stutter pauses, in which no thread completed an operation:
//! the lock's state (its raw `Debug` where it has one, and who is inside)
//! is printed and the run ends as a FAILURE. A lock that then does not let its threads out is caught by the
//! harness's watchdog, which prints the state again and ends the process.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use crossbeam_utils::CachePadded;

use super::checks::{Guarded, TortureData};
use super::ops::{self, Actor, Done, OPS};
use super::output::{Params, Record, Role, role_line};
use super::perturb::{Shuffle, Stutter};
use crate::harness::{self, Monitor, Spec, Tick, cores};
use crate::lockable::Lockable;
use crate::rng::Rng;
use crate::stats::Stats;
use crate::stdout::emit;

/// Failures kept word for word; the rest are counted.
const KEEP_FAILURES: usize = 8;

/// A thread's running totals, read by the main thread for the periodic
/// lines and the stall check.
#[derive(Default)]
struct Tally {
    acquired: AtomicU64,
    fails: AtomicU64,
}

/// What a thread hands back at the end.
struct Outcome {
    ops: [u64; OPS.len()],
    misses: u64,
    fails: u64,
    writes_on: Vec<u64>,
}

/// What the threads share besides the locks.
struct Shared {
    tallies: Vec<CachePadded<Tally>>,
    failures: Mutex<(Vec<String>, u64)>,
    stutter: Stutter,
    shuffle: Option<Shuffle>,
}

impl Shared {
    fn fail(&self, msg: String) {
        let mut f = self.failures.lock().unwrap_or_else(PoisonError::into_inner);
        if f.0.len() < KEEP_FAILURES {
            f.0.push(msg);
        } else {
            f.1 += 1;
        }
    }

    /// `(acquisitions, failures)` per thread so far.
    fn snapshot(&self) -> Vec<(u64, u64)> {
        self.tallies
            .iter()
            // Relaxed: a progress report; exact totals come from the join.
            .map(|t| {
                (
                    t.acquired.load(Ordering::Relaxed),
                    t.fails.load(Ordering::Relaxed),
                )
            })
            .collect()
    }
}

/// Tortures lock type `L` (registry name `name`) under `p`; prints the
/// locktorture lines as it goes and returns the record.
pub fn run<L: Lockable<TortureData>>(name: &str, p: &Params) -> Result<Record, String> {
    // The promises only a quiet lock can show kept (`probe`).
    let probed = super::probe::probe::<L>();
    let main: Guarded<L> = Guarded::new();
    let nested: Vec<Guarded<L>> = (0..p.nested).map(|_| Guarded::new()).collect();
    let threads = p.writers + p.readers;
    let shared = Shared {
        tallies: (0..threads).map(|_| CachePadded::default()).collect(),
        failures: Mutex::new((Vec::new(), 0)),
        stutter: Stutter::default(),
        shuffle: match p.shuffle_ms {
            Some(_) => Some(Shuffle::new(threads)?),
            None => None,
        },
    };
    let writer_mix = ops::mix(L::CAPS, true);
    let reader_mix = ops::mix(L::CAPS, false);
    let names = |m: &[(ops::Op, u32)]| m.iter().map(|o| o.0.name()).collect::<Vec<_>>().join(",");
    emit(&format!(
        "Start of test: {} writer_ops={} reader_ops={}\n",
        p.line(name),
        names(&writer_mix),
        names(&reader_mix)
    ));

    let long_ms = p.long_hold_ms;
    let spec = Spec {
        what: name,
        threads,
        runtime: p.runtime(),
        grace: Duration::from_secs(10)
            .max(p.runtime() * 2)
            .max(Duration::from_millis(4 * long_ms)),
    };
    let mut watch = Watch::new(name, p, &main, &nested, &shared);
    let run = harness::run(&spec, &mut watch, |w| {
        let writer = w.index < p.writers;
        let role_threads = if writer { p.writers } else { p.readers } as u64;
        let mut a = Actor {
            me: w.index as u64 + 1,
            rng: Rng::new(w.index as u64),
            // locktorture: a long delay one time in (threads × 2000 × ms).
            long_every: role_threads * 2000 * long_ms,
            long_hold: Duration::from_millis(long_ms),
            writes_on: vec![0; 1 + nested.len()],
        };
        let mix = if writer { &writer_mix } else { &reader_mix };
        let tally = &shared.tallies[w.index];
        if let Some(s) = &shared.shuffle {
            s.register(w.index);
        }
        let mut out = Outcome {
            ops: [0; OPS.len()],
            misses: 0,
            fails: 0,
            writes_on: Vec::new(),
        };
        let mut acquired = 0u64;
        while !w.stopped() {
            shared.stutter.wait();
            let op = ops::pick(mix, &mut a.rng);
            out.ops[op.index()] += 1;
            match ops::perform(&main, &nested, op, &mut a) {
                Done::Ok => acquired += 1,
                Done::Missed => out.misses += 1,
                Done::Failed(msg) => {
                    acquired += 1;
                    out.fails += 1;
                    tally.fails.store(out.fails, Ordering::Relaxed);
                    shared.fail(msg);
                }
            }
            // Relaxed: this thread's own line, read for progress reports.
            tally.acquired.store(acquired, Ordering::Relaxed);
        }
        out.writes_on = a.writes_on;
        (acquired, out)
    });
    let run = match run {
        Ok(run) => run,
        Err(e) => {
            shared.fail(e);
            return Ok(watch.into_failed_record());
        }
    };
    let w = p.writers;
    let roles = [run.stats_of(0..w), run.stats_of(w..threads)];
    let mut record = watch.finish(run.stats(), roles, &run.found);
    // The final state of every lock: settled, with every write counted.
    // (Listed first: the run's own failures may be many.)
    let mut settled = Vec::new();
    for (i, g) in std::iter::once(&main).chain(&nested).enumerate() {
        let writes: u64 = run.found.iter().map(|o| o.writes_on[i]).sum();
        if let Err(e) = g.lock.with_read(|d| d.settled(writes)) {
            let which = if i == 0 {
                "lock".to_string()
            } else {
                format!("nested lock {i}")
            };
            settled.push(format!("at the end, {which}: {e}"));
            record.verdict = "FAILURE";
        }
    }
    if !probed.is_empty() {
        record.verdict = "FAILURE";
    }
    record
        .failures
        .splice(0..0, probed.into_iter().chain(settled));
    emit(&record.closing());
    Ok(record)
}

/// The main thread's side of a torture run.
struct Watch<'a, L> {
    name: &'a str,
    p: &'a Params,
    main: &'a Guarded<L>,
    nested: &'a [Guarded<L>],
    shared: &'a Shared,
    next_stat: Duration,
    next_stutter: Option<Duration>,
    paused: bool,
    /// When the current pause began.
    paused_at: Duration,
    next_shuffle: Option<Duration>,
    shuffle_error: Option<String>,
    progress: u64,
    last_change: Duration,
    stall: Duration,
    stalled: bool,
}

impl<'a, L: Lockable<TortureData>> Watch<'a, L> {
    fn new(
        name: &'a str,
        p: &'a Params,
        main: &'a Guarded<L>,
        nested: &'a [Guarded<L>],
        shared: &'a Shared,
    ) -> Self {
        let ms = |v: Option<u64>| v.map(Duration::from_millis);
        Watch {
            name,
            p,
            main,
            nested,
            shared,
            next_stat: Duration::from_secs_f64(p.stat_interval),
            next_stutter: ms(p.stutter_ms),
            paused: false,
            paused_at: Duration::ZERO,
            next_shuffle: ms(p.shuffle_ms).map(|_| Duration::ZERO),
            shuffle_error: None,
            progress: 0,
            last_change: Duration::ZERO,
            stall: Duration::from_secs_f64(p.stall_s)
                .max(Duration::from_millis(4 * p.long_hold_ms)),
            stalled: false,
        }
    }

    /// The periodic `Writes:`/`Reads:` lines, from the running totals.
    fn stat_lines(&self) -> String {
        let snap = self.shared.snapshot();
        let (w, r) = snap.split_at(self.p.writers);
        let line = |label, part: &[(u64, u64)]| {
            let counts: Vec<u64> = part.iter().map(|t| t.0).collect();
            role_line(label, &counts, part.iter().map(|t| t.1).sum())
        };
        format!("{}\n{}\n", line("Writes", w), line("Reads", r))
    }

    /// Every lock's state, for a stall or hang report.
    fn states(&self) -> String {
        let mut out = format!("{} state: {}\n", self.name, self.main.describe());
        for (i, g) in self.nested.iter().enumerate() {
            out += &format!("{} nested lock {}: {}\n", self.name, i + 1, g.describe());
        }
        out
    }

    fn stop_perturbing(&mut self) {
        if self.paused {
            self.shared.stutter.resume();
            self.paused = false;
        }
        if let Some(s) = &self.shared.shuffle
            && self.shuffle_error.is_none()
            && let Err(e) = s.restore()
        {
            self.shuffle_error = Some(e);
        }
    }

    /// The record once the threads are joined: all threads' statistics,
    /// the writers' and the readers'.
    fn finish(mut self, stats: Stats, roles: [Stats; 2], found: &[Outcome]) -> Record {
        self.stop_perturbing();
        let w = self.p.writers;
        let [writes, reads] = roles;
        let fails = |part: &[Outcome]| part.iter().map(|o| o.fails).sum();
        let mut ops = BTreeMap::new();
        for (i, op) in OPS.iter().enumerate() {
            let n: u64 = found.iter().map(|o| o.ops[i]).sum();
            if n > 0 {
                ops.insert(op.name(), n);
            }
        }
        let (failures, more) = std::mem::take(
            &mut *self
                .shared
                .failures
                .lock()
                .unwrap_or_else(PoisonError::into_inner),
        );
        let mut failures = failures;
        if self.stalled {
            failures.insert(
                0,
                format!("stall: no operation completed for {:?}", self.stall),
            );
        }
        // With no write, or one thread alone, no check could have failed.
        let holders = stats.counts.iter().filter(|&&c| c > 0).count();
        if failures.is_empty() && (writes.total == 0 || holders < 2) {
            failures.push(format!(
                "nothing was checked: {} write(s), {holders} thread(s) got the lock \
                 (too short a --duration, or starved writers)",
                writes.total
            ));
        }
        Record {
            lock: self.name.to_string(),
            kind: L::KIND.as_str(),
            verdict: if failures.is_empty() {
                "SUCCESS"
            } else {
                "FAILURE"
            },
            params: self.p.clone(),
            writes: Role {
                stats: writes,
                fail: fails(&found[..w]),
            },
            reads: Role {
                stats: reads,
                fail: fails(&found[w..]),
            },
            ops,
            try_misses: found.iter().map(|o| o.misses).sum(),
            failures,
            more_failures: more,
            shuffle_error: self.shuffle_error.take(),
            stats,
        }
    }

    /// A record for a run whose threads could not be run or joined.
    fn into_failed_record(self) -> Record {
        let threads = self.p.writers + self.p.readers;
        let found: Vec<Outcome> = (0..threads)
            .map(|_| Outcome {
                ops: [0; OPS.len()],
                misses: 0,
                fails: 0,
                writes_on: Vec::new(),
            })
            .collect();
        let none = |n: usize| Stats::new(vec![0; n], Duration::ZERO, 0.0, cores());
        let roles = [none(self.p.writers), none(self.p.readers)];
        let mut r = self.finish(none(threads), roles, &found);
        r.verdict = "FAILURE";
        emit(&r.closing());
        r
    }
}

impl<L: Lockable<TortureData>> Monitor for Watch<'_, L> {
    fn tick(&mut self, now: Duration) -> Tick {
        if now >= self.next_stat {
            emit(&self.stat_lines());
            self.next_stat = now + Duration::from_secs_f64(self.p.stat_interval);
        }
        if let (Some(next), Some(ms)) = (self.next_stutter, self.p.stutter_ms)
            && now >= next
        {
            if self.paused {
                self.shared.stutter.resume();
                // The pause does not count towards a stall (nor does it
                // end one: a hang spans many pauses).
                self.last_change = (self.last_change + (now - self.paused_at)).min(now);
            } else {
                self.shared.stutter.pause();
                self.paused_at = now;
            }
            self.paused = !self.paused;
            self.next_stutter = Some(now + Duration::from_millis(ms));
        }
        if let (Some(next), Some(ms), Some(s)) =
            (self.next_shuffle, self.p.shuffle_ms, &self.shared.shuffle)
            && now >= next
        {
            match s.shuffle() {
                Ok(()) => self.next_shuffle = Some(now + Duration::from_millis(ms)),
                Err(e) => {
                    eprintln!("locktest: torture {}: shuffling stopped: {e}", self.name);
                    self.shuffle_error = Some(e);
                    self.next_shuffle = None;
                }
            }
        }
        let progress: u64 = self.shared.snapshot().iter().map(|t| t.0).sum();
        if progress != self.progress {
            self.progress = progress;
            self.last_change = now;
        } else if !self.paused && now - self.last_change > self.stall {
            self.stalled = true;
            emit(&format!(
                "Stall: no operation completed for {:?}\n{}",
                self.stall,
                self.states()
            ));
            return Tick::Stop;
        }
        let next = [Some(self.next_stat), self.next_stutter, self.next_shuffle]
            .into_iter()
            .flatten()
            .min()
            .unwrap_or(now)
            .min(now + Duration::from_millis(100));
        Tick::After(next.saturating_sub(now))
    }

    fn stopping(&mut self) {
        self.stop_perturbing();
    }

    fn hung(&mut self) -> String {
        emit(&format!(
            "{}Failure: threads still inside the lock after the stop: deadlock or lost wake-up\n\
             End of test: FAILURE: {}\n",
            self.stat_lines(),
            self.p.line(self.name)
        ));
        self.states()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A run in which no writer completed a write, or only one thread got
    /// the lock (too short a run, or starved writers), could not have
    /// failed: it is no success, whatever the lock.
    #[test]
    fn a_run_that_could_not_fail_is_not_a_success() {
        let p = Params {
            writers: 1,
            readers: 1,
            duration: 0.001,
            long_hold_ms: 0,
            stutter_ms: None,
            shuffle_ms: None,
            nested: 0,
            stat_interval: 1.0,
            stall_s: 10.0,
        };
        let main: Guarded<crate::busted::Busted<TortureData>> = Guarded::new();
        let shared = Shared {
            tallies: (0..2).map(|_| CachePadded::default()).collect(),
            failures: Mutex::new((Vec::new(), 0)),
            stutter: Stutter::default(),
            shuffle: None,
        };
        let stats = |c: &[u64]| Stats::new(c.to_vec(), Duration::from_millis(1), 0.0, 2);
        let found = || {
            [0, 1].map(|_| Outcome {
                ops: [0; OPS.len()],
                misses: 0,
                fails: 0,
                writes_on: vec![0],
            })
        };
        // The reader alone, or the writer alone, got the lock.
        for counts in [[0, 7], [7, 0], [0, 0]] {
            let watch = Watch::new("busted", &p, &main, &[], &shared);
            let roles = [stats(&counts[..1]), stats(&counts[1..])];
            let r = watch.finish(stats(&counts), roles, &found());
            assert!(!r.passed(), "{counts:?}: {r:?}");
            assert!(r.failures[0].starts_with("nothing was checked"), "{r:?}");
        }
        let watch = Watch::new("busted", &p, &main, &[], &shared);
        let r = watch.finish(stats(&[3, 5]), [stats(&[3]), stats(&[5])], &found());
        assert!(r.passed(), "{r:?}");
    }
}
