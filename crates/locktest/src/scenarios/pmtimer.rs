//! `pmtimer` (seed 003, Xen's `handle_pmt_io`): every vCPU that reads the
//! ACPI PM timer wants a value computed after it asked.
//!
//! - before: take the lock, recompute (`pmt_update_time`: read the hardware
//!   counter, advance the timer value, a few µs of emulation work), return,
//!   unlock. Every call recomputes, one at a time.
//! - after: [`scalelock::RefreshOnce`]. One caller recomputes; everyone who
//!   arrived before that recomputation started shares its result, and nobody
//!   gets a value from before its arrival (the seed's rejected patches either
//!   returned stale values or waited for an unbounded number of updates).
//!
//! Checked on every call: the value's counter reading is not older than the
//! caller's arrival (`stale`), and a thread's timer values never go
//! backwards. Both count as violations. Metric: `recomputes/call` (1 for
//! before; under contention well below 1 for after).

use std::hint::black_box;
use std::sync::atomic::Ordering;
use std::time::Instant;

use scalelock::RefreshOnce;

use super::{Outcome, RunFn, Scenario, Setup, before_fn, harness};
use crate::locks::Lockable;

/// The timer state: `[counter reading in ns, timer value in ticks]`.
type Pmt = [u64; 2];

/// Dependent multiply-adds per recompute: about 2-3 µs of emulation work.
const WORK: u32 = 2_000;

/// The PM timer's frequency, Hz.
const PMT_HZ: u128 = 3_579_545;

pub const SCENARIO: Scenario = Scenario {
    name: "pmtimer",
    about: "seed 003: N vCPUs read a fresh timer; lock + recompute each vs RefreshOnce",
    default_locks: &["qspinlock", "pl-mutex"],
    before: before_for,
    after_name: "after-refresh-once",
    after,
};

fn before_for(lock: &str) -> Option<RunFn> {
    before_fn!(lock, before, Pmt)
}

/// The "hardware" counter: nanoseconds since `base` (monotonic).
fn hw_ns(base: Instant) -> u64 {
    base.elapsed().as_nanos() as u64
}

/// `pmt_update_time`: read the counter, advance the timer by the elapsed
/// ticks, and pay the emulation's cost.
fn update(base: Instant, s: &Pmt) -> Pmt {
    let now = hw_ns(base);
    let mut x = s[1] | 1;
    for _ in 0..black_box(WORK) {
        // Nonlinear, so the compiler cannot fold unrolled steps together.
        x = (x ^ (x >> 29)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    }
    black_box(x);
    let ticks = (u128::from(now.saturating_sub(s[0])) * PMT_HZ / 1_000_000_000) as u64;
    [now, s[1] + ticks]
}

fn before<L: Lockable<Pmt>>(setup: &Setup) -> Result<Outcome, String> {
    let base = Instant::now();
    let lock = L::new([0, 0]);
    drive(setup, base, |recomputes| {
        *recomputes += 1;
        lock.with_write(|s| {
            *s = update(base, s);
            *s
        })
    })
}

fn after(setup: &Setup) -> Result<Outcome, String> {
    let base = Instant::now();
    let timer: RefreshOnce<Pmt> = RefreshOnce::new([0, 0]);
    drive(setup, base, |recomputes| {
        timer.refresh(|s| {
            *recomputes += 1;
            update(base, s)
        })
    })
}

/// Every thread reads the timer until stopped; `read` returns a value and
/// counts the recomputations its thread ran.
fn drive(
    setup: &Setup,
    base: Instant,
    read: impl Fn(&mut u64) -> Pmt + Sync,
) -> Result<Outcome, String> {
    let run = harness::timed(&setup.what, setup.threads, setup.runtime, |_, stop| {
        let (mut calls, mut recomputes, mut bad, mut last) = (0u64, 0u64, 0u64, 0u64);
        // Relaxed: "stop soon"; the counts travel through the join.
        while !stop.load(Ordering::Relaxed) {
            let arrival = hw_ns(base);
            let [read_at, value] = read(&mut recomputes);
            bad += u64::from(read_at < arrival) + u64::from(value < last);
            last = value;
            calls += 1;
        }
        (calls, (recomputes, bad))
    })?;
    let calls: u64 = run.sample.counts.iter().sum();
    let recomputes: u64 = run.found.iter().map(|f| f.0).sum();
    Ok(Outcome {
        metrics: vec![("recomputes/call", recomputes as f64 / calls.max(1) as f64)],
        violations: run.found.iter().map(|f| f.1).sum(),
        cpu: run.cpu,
        sample: run.sample,
    })
}
