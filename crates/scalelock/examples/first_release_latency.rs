//! How long the first lock+unlock of a process takes once it already runs
//! other threads.
//!
//! The std platform's asymmetric fences need the process registered for
//! `membarrier`. Registering a process that runs several threads makes the
//! kernel wait for an RCU grace period first (milliseconds), while a
//! process with one thread registers in microseconds. scalelock registers
//! before `main` (an ELF constructor, see `platform/std_fence.rs`), so the
//! first release below does not pay it; where the constructor does not run,
//! the first fence would register instead, inside that release.
//!
//! `cargo run --release -p scalelock --example first_release_latency`
//! starts 4 busy threads, then times the first and the second
//! `QSpinLock` lock+unlock of the process on the main thread, and the
//! registration itself as a later caller sees it (already decided: a load).

use std::hint::black_box;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use scalelock::QSpinLock;

fn main() {
    let stop = Arc::new(AtomicBool::new(false));
    let busy: Vec<_> = (0..4)
        .map(|_| {
            let stop = stop.clone();
            thread::spawn(move || {
                let mut n = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    n = black_box(n.wrapping_add(1));
                }
            })
        })
        .collect();
    // Let the busy threads run on every CPU.
    thread::sleep(Duration::from_millis(50));

    let lock = QSpinLock::new(0u64);
    let t = Instant::now();
    *lock.lock() += 1;
    let first = t.elapsed();
    let t = Instant::now();
    *lock.lock() += 1;
    let second = t.elapsed();
    let t = Instant::now();
    let asymmetric = scalelock::platform::asymmetric_fences_active();
    let ask = t.elapsed();

    stop.store(true, Ordering::Relaxed);
    for b in busy {
        b.join().unwrap();
    }
    println!("first lock+unlock with 4 busy threads: {first:?}");
    println!("second lock+unlock: {second:?}");
    println!("membarrier fences in use: {asymmetric} (asked after main started: {ask:?})");
}
