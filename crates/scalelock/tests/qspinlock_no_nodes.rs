//! With every queue node taken (more threads than the 16-bit tail can name),
//! waiters fall back to unqueued waiting and the lock still excludes and
//! still makes progress. Its own test binary: hogging the node table is
//! process-wide.
#![cfg(all(not(loom), not(miri)))]

use std::sync::{Arc, Once};
use std::thread;
use std::time::{Duration, Instant};

use scalelock::QSpinLock;

fn hog_all_nodes() {
    static HOG: Once = Once::new();
    HOG.call_once(|| {
        let taken = scalelock::__test::hog_queue_nodes(usize::MAX);
        assert!(taken > 60_000, "took only {taken} nodes");
        assert_eq!(scalelock::__test::hog_queue_nodes(1), 0, "table is full");
    });
}

#[test]
fn lock_works_without_queue_nodes() {
    hog_all_nodes();
    let lock = Arc::new(QSpinLock::new(0usize));
    let threads = 8;
    let iters = 20_000;
    let handles: Vec<_> = (0..threads)
        .map(|_| {
            let lock = lock.clone();
            thread::spawn(move || {
                for _ in 0..iters {
                    *lock.lock() += 1;
                }
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    assert_eq!(*lock.lock(), threads * iters);
}

/// Node-less waiters sleep on the lock while holders keep it for a while,
/// so releases see sleepers but no word waiter for thousands of batches.
/// No batch end may leave the lock reserved for a word waiter that does not
/// exist: every thread finishes, and a free lock can be taken by `try_lock`.
#[test]
fn batch_ends_without_a_word_waiter_leave_the_lock_usable() {
    hog_all_nodes();
    let lock = Arc::new(QSpinLock::new(0usize));
    let threads = 4;
    let deadline = Instant::now() + Duration::from_millis(1500);
    let handles: Vec<_> = (0..threads)
        .map(|t| {
            let lock = lock.clone();
            thread::spawn(move || {
                let mut n = 0usize;
                while Instant::now() < deadline {
                    let mut g = lock.lock();
                    *g += 1;
                    n += 1;
                    if (n + t).is_multiple_of(4) {
                        // Long enough for the others to go to sleep.
                        thread::sleep(Duration::from_micros(30));
                    }
                }
                n
            })
        })
        .collect();
    // Every thread must get out; a thread stuck behind a phantom reservation
    // never does.
    let watchdog = Instant::now() + Duration::from_secs(30);
    for h in &handles {
        while !h.is_finished() {
            assert!(
                Instant::now() < watchdog,
                "a waiter is stuck: {:?}",
                unsafe {
                    // SAFETY: only formats the state word.
                    lock.raw()
                }
            );
            thread::sleep(Duration::from_millis(10));
        }
    }
    let total: usize = handles.into_iter().map(|h| h.join().unwrap()).sum();
    assert_eq!(*lock.lock(), total);
    let mut free = false;
    for _ in 0..1000 {
        if lock.try_lock().is_some() {
            free = true;
            break;
        }
        thread::sleep(Duration::from_millis(1));
    }
    assert!(free, "try_lock fails on a free lock: {:?}", unsafe {
        // SAFETY: only formats the state word.
        lock.raw()
    });
}
