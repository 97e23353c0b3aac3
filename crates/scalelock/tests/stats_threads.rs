//! Lock statistics stay exact on the per-thread fast path: a thread that
//! moves between many classes (its block list grows while the fast path
//! reads it), and threads that exit and leave their blocks to later ones.
//! Run: `cargo test -p scalelock --features stats --test stats_threads`
#![cfg(feature = "stats")]

use std::thread;

use scalelock::stats;
use scalelock::{ClassRef, LockClass, QSpinLock, RawQSpinLock};

fn class_lock(name: String) -> QSpinLock<u64> {
    let class: &'static LockClass = Box::leak(Box::new(LockClass::new(name.leak())));
    QSpinLock::from_raw(RawQSpinLock::with_class(ClassRef::of(class)), 0)
}

fn writes(name: &str) -> u64 {
    stats::snapshot()
        .class(name)
        .map_or(0, |c| c.write.acquisitions)
}

#[test]
fn one_thread_many_classes_interleaved() {
    stats::enable();
    const CLASSES: usize = 40;
    const ROUNDS: u64 = 50;
    let locks: Vec<QSpinLock<u64>> = (0..CLASSES)
        .map(|i| class_lock(format!("threads-many-{i}")))
        .collect();
    // Each round takes every class once: the first round meets each class
    // for the first time, growing the thread's block list between two
    // fast-path lookups.
    for _ in 0..ROUNDS {
        for l in &locks {
            *l.lock() += 1;
        }
    }
    for i in 0..CLASSES {
        assert_eq!(writes(&format!("threads-many-{i}")), ROUNDS, "class {i}");
    }
}

#[test]
fn exited_threads_blocks_carry_on_counting() {
    stats::enable();
    const THREADS: u64 = 8;
    const OPS: u64 = 1000;
    let a = class_lock("threads-exit-a".into());
    let b = class_lock("threads-exit-b".into());
    // One after another: each new thread may take the blocks the previous
    // one left in the pool.
    for _ in 0..THREADS {
        thread::scope(|s| {
            s.spawn(|| {
                for _ in 0..OPS {
                    *a.lock() += 1;
                    *b.lock() += 1;
                }
            });
        });
    }
    // And two at once.
    thread::scope(|s| {
        for _ in 0..2 {
            s.spawn(|| {
                for _ in 0..OPS {
                    *b.lock() += 1;
                    *a.lock() += 1;
                }
            });
        }
    });
    assert_eq!(writes("threads-exit-a"), (THREADS + 2) * OPS);
    assert_eq!(writes("threads-exit-b"), (THREADS + 2) * OPS);
    assert_eq!(*a.lock(), (THREADS + 2) * OPS);
}
