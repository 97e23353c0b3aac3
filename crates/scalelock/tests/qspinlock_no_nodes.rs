//! With every queue node taken (more threads than the 16-bit tail can name),
//! waiters fall back to unqueued waiting and the lock still excludes. Its own
//! test binary: hogging the node table is process-wide.
#![cfg(all(not(loom), not(miri)))]

use std::sync::Arc;
use std::thread;

use scalelock::QSpinLock;

#[test]
fn lock_works_without_queue_nodes() {
    let taken = scalelock::__test::hog_queue_nodes(usize::MAX);
    assert!(taken > 60_000, "took only {taken} nodes");
    assert_eq!(scalelock::__test::hog_queue_nodes(1), 0, "table is full");
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
