//! The uncontended statistics path counts the first classes in a
//! per-thread array and every later class in its per-thread blocks: counts
//! stay exact on both sides of that line, across threads that exit (what
//! their arrays counted is kept in a shared sum) and across a reset (which
//! rebases the arrays instead of writing them).
//! Run: `cargo test -p scalelock --features stats --test stats_fast_classes`
#![cfg(feature = "stats")]

use std::thread;

use scalelock::stats;
use scalelock::{
    ClassRef, LockClass, PerCpuRwLock, QRwLock, QSpinLock, RawPerCpuRwLock, RawQRwLock,
    RawQSpinLock, SeqLock,
};

/// More than the array holds (the crate's other classes take ids too).
const CLASSES: usize = 150;

struct Locks {
    spin: QSpinLock<u64>,
    rw: QRwLock<u64>,
    percpu: PerCpuRwLock<u64>,
    seq: SeqLock<u64>,
}

fn class_locks(i: usize) -> Locks {
    let name: &'static str = format!("fast-classes-{i}").leak();
    let class = ClassRef::of(Box::leak(Box::new(LockClass::new(name))));
    Locks {
        spin: QSpinLock::from_raw(RawQSpinLock::with_class(class), 0),
        rw: QRwLock::from_raw(RawQRwLock::with_class(class), 0),
        percpu: PerCpuRwLock::from_raw(RawPerCpuRwLock::with_class(class), 0),
        seq: SeqLock::with_class(0, class),
    }
}

/// Per class and round: 3 writes (lock, try_lock, rwlock write) and 4 reads
/// (rwlock read, try_read, per-CPU read, seqlock read).
/// The threads share the locks, so a try may fail; it is retried (a failed
/// try is no acquisition), holding nothing meanwhile.
fn round(l: &Locks) {
    *l.spin.lock() += 1;
    loop {
        if let Some(mut g) = l.spin.try_lock() {
            *g += 1;
            break;
        }
        std::hint::spin_loop();
    }
    *l.rw.write() += 1;
    let before = *l.rw.read();
    loop {
        if let Some(g) = l.rw.try_read() {
            assert!(*g >= before, "the count went backwards");
            break;
        }
        std::hint::spin_loop();
    }
    assert_eq!(*l.percpu.read(), 0);
    assert_eq!(l.seq.read(), 0);
}

/// (reads, writes, per-CPU fast + fallback reads) of class `i`.
fn counts(snap: &stats::Snapshot, i: usize) -> (u64, u64, u64) {
    snap.class(&format!("fast-classes-{i}"))
        .map_or((0, 0, 0), |c| {
            (
                c.read.acquisitions,
                c.write.acquisitions,
                c.events.fast_reads + c.events.fallback_reads,
            )
        })
}

// One test: `reset` is process-wide.
#[test]
fn many_classes_threads_and_reset_count_exactly() {
    #[cfg(feature = "lockdep")]
    scalelock::lockdep::set_enabled(false);
    stats::enable();
    let locks: Vec<Locks> = (0..CLASSES).map(class_locks).collect();

    // Threads run side by side, then more threads one after another (each
    // after the previous one exited and left its counts in the shared sum).
    const THREADS: u64 = 3;
    const ROUNDS: u64 = 20;
    thread::scope(|s| {
        for _ in 0..THREADS {
            s.spawn(|| {
                for _ in 0..ROUNDS {
                    locks.iter().for_each(round);
                }
            });
        }
    });
    for _ in 0..THREADS {
        thread::scope(|s| {
            s.spawn(|| {
                for _ in 0..ROUNDS {
                    locks.iter().for_each(round);
                }
            });
        });
    }
    let n = 2 * THREADS * ROUNDS;
    let snap = stats::snapshot();
    for i in 0..CLASSES {
        assert_eq!(counts(&snap, i), (4 * n, 3 * n, n), "class {i}");
    }

    // After a reset only what follows counts, on this thread and others.
    stats::reset();
    let snap = stats::snapshot();
    for i in 0..CLASSES {
        assert_eq!(counts(&snap, i), (0, 0, 0), "class {i} after reset");
    }
    locks.iter().for_each(round);
    thread::scope(|s| {
        s.spawn(|| locks.iter().for_each(round));
    });
    let snap = stats::snapshot();
    for i in 0..CLASSES {
        assert_eq!(counts(&snap, i), (8, 6, 2), "class {i} after reset");
    }

    // Switched off, nothing counts.
    stats::disable();
    locks.iter().for_each(round);
    let snap = stats::snapshot();
    for i in 0..CLASSES {
        assert_eq!(counts(&snap, i), (8, 6, 2), "class {i} while off");
    }
}
