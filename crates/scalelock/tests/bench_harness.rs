//! The side-by-side benches' shared harness (benches/common), checked
//! without running a benchmark.
#![allow(dead_code)]

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

#[path = "../benches/common/mod.rs"]
mod common;

use common::timed;

static SHARED_AT: AtomicUsize = AtomicUsize::new(0);
static STOP_AT: AtomicUsize = AtomicUsize::new(0);

/// The cache lines `size` bytes at `addr` touch.
fn lines(addr: usize, size: usize) -> std::ops::RangeInclusive<usize> {
    addr / 64..=(addr + size.max(1) - 1) / 64
}

/// Where `timed` put the shared value and the stop flag, for a lock built
/// as the benches build theirs (`Arc::new(L::new())` right before `timed`).
fn probe<S: Send + Sync + 'static>(shared: S) -> (usize, usize, usize) {
    timed(
        1,
        Duration::from_millis(1),
        Arc::new(shared),
        |_, s: &S, stop| {
            SHARED_AT.store(s as *const S as usize, Ordering::Relaxed);
            STOP_AT.store(stop as *const _ as usize, Ordering::Relaxed);
            0
        },
    );
    (
        SHARED_AT.load(Ordering::Relaxed),
        size_of::<S>(),
        STOP_AT.load(Ordering::Relaxed),
    )
}

/// Every worker reads the stop flag once per operation (qspinlock,
/// qrwlock) or per 64 (percpu_rwlock): it must not sit on the measured
/// lock's line, where each lock type's size and the allocator decided
/// whether it did (locktest gave its lock a line of its own in 276d82f;
/// the benches did not).
#[test]
fn the_stop_flag_is_not_on_the_measured_locks_line() {
    let mut shared_lines = Vec::new();
    // Whatever the heap held before (a few small blocks live or freed, as
    // the benches' earlier rounds and printing leave it).
    for junk in 0..16usize {
        let _live: Vec<Box<[u8]>> = (0..junk)
            .map(|i| vec![0u8; 8 + 8 * (i % 5)].into())
            .collect();
        for (name, (lock, size, stop)) in [
            ("pl-mutex", probe(parking_lot::Mutex::new(0u64))),
            ("qspinlock", probe(scalelock::QSpinLock::new(0u64))),
            ("std-mutex", probe(std::sync::Mutex::new(0u64))),
            ("pl-fairmutex", probe(parking_lot::FairMutex::new(0u64))),
            ("spin-mutex", probe(<spin::Mutex<u64>>::new(0u64))),
            (
                "spin-ticket",
                probe(<spin::mutex::TicketMutex<u64>>::new(0u64)),
            ),
            ("pl-rwlock", probe(parking_lot::RwLock::new([0u64; 4]))),
            ("qrwlock", probe(scalelock::QRwLock::new([0u64; 4]))),
            ("std-rwlock", probe(std::sync::RwLock::new([0u64; 4]))),
        ] {
            if lines(lock, size).contains(&(stop / 64)) {
                shared_lines.push(format!(
                    "{name}: lock at {lock:#x} ({size} bytes), stop flag at {stop:#x}"
                ));
            }
        }
    }
    assert!(shared_lines.is_empty(), "{shared_lines:#?}");
}

/// The share of reads the percpu_rwlock bench runs for `READS=r`: one
/// write every `write_period(r)` ops of each thread.
fn share_run(r: f64) -> Option<f64> {
    std::panic::catch_unwind(|| match common::write_period(r) {
        0 => 100.0,
        n => 100.0 - 100.0 / n as f64,
    })
    .ok()
}

/// `READS=60` ran 66.7% reads (a write every round(2.5) = 3 ops), as did
/// `READS=70`, and `READS=10,20,30` ran no read at all (a write every op),
/// while the table printed the share asked for. A share is run as given or
/// refused.
#[test]
fn the_percpu_benchs_read_share_is_the_one_printed() {
    for r in [0.0, 50.0, 75.0, 90.0, 95.0, 99.0, 99.5, 99.9, 100.0] {
        assert_eq!(
            share_run(r).map(|s| (s * 1e6).round()),
            Some((r * 1e6).round()),
            "READS={r}"
        );
    }
    for r in [10.0, 30.0, 60.0, 70.0, 97.0, 150.0] {
        if let Some(s) = share_run(r) {
            assert!((s - r).abs() < 1e-6, "READS={r} runs {s:.2}% reads");
        }
    }
}
