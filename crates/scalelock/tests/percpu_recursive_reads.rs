//! A thread's read of a `PerCpuRwLock` it already read-holds never waits,
//! however many locks of one table it holds: with the thread's slot busy,
//! its reads go through the underlying locks, recorded in a short
//! thread-local list; past that list, a recursive read of a lock must
//! still pass a writer that waits for the thread's first read (it queued
//! behind it: a deadlock).
#![cfg(not(any(loom, shuttle)))]

use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use scalelock::{PerCpuRwLock, PerCpuRwLockExt, ReaderTable};

/// Whether a writer of `lock` waits for its readers to leave (its
/// `W_WAITING`: newcomer readers now queue behind it).
fn writer_waits(lock: &PerCpuRwLock<u32>) -> bool {
    // SAFETY: the raw lock is only formatted.
    format!("{:?}", unsafe { lock.raw() }).contains("write_waiting: true")
}

#[test]
fn recursive_reads_pass_waiting_writers_past_the_thread_local_list() {
    static TABLE: ReaderTable = ReaderTable::new();
    let locks: Vec<Arc<PerCpuRwLock<u32>>> = (0..12)
        .map(|_| Arc::new(PerCpuRwLock::with_table(&TABLE, 0)))
        .collect();
    // The first read takes this thread's slot of the table; the others go
    // through the underlying locks.
    let reads: Vec<_> = locks.iter().map(|l| l.read()).collect();
    let contended = [1, 8, 9, 11];
    let writers: Vec<_> = contended
        .iter()
        .map(|&i| {
            let lock = Arc::clone(&locks[i]);
            thread::spawn(move || *lock.write() += 1)
        })
        .collect();
    for &i in &contended {
        let start = Instant::now();
        while !writer_waits(&locks[i]) {
            assert!(
                start.elapsed() < Duration::from_secs(30),
                "the writer of lock {i} never started waiting"
            );
            thread::sleep(Duration::from_millis(1));
        }
    }
    for &i in &contended {
        // A recursive read would wait forever behind the writer; timed, it
        // fails instead of hanging the test.
        let again = locks[i].try_read_for(Duration::from_secs(5));
        assert!(again.is_some(), "lock {i}: a recursive read waited");
        assert!(locks[i].try_read().is_some(), "lock {i}: try_read failed");
    }
    drop(reads);
    for w in writers {
        w.join().unwrap();
    }
    for (i, lock) in locks.iter().enumerate() {
        assert_eq!(*lock.read(), u32::from(contended.contains(&i)));
    }
}
