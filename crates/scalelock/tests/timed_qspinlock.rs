//! `try_lock_for` / `try_lock_until` on `QSpinLock`: timeouts are honoured
//! (never early, late by a bounded amount) whether the waiter spins, is the
//! word waiter, or is queued, and a waiter that gives up leaves the lock as
//! if it had never come.
#![cfg(not(loom))]

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Barrier};
use std::thread;
use std::time::{Duration, Instant};

use lock_api::{RawMutex, RawMutexFair, RawMutexTimed};
use scalelock::{QSpinLock, RawQSpinLock};

/// How late a timed-out attempt may return on this shared 2-core machine
/// (the lower bound, never early, is exact).
const LATE: Duration = Duration::from_millis(if cfg!(miri) { 2_000 } else { 250 });

fn clean(raw: &RawQSpinLock) {
    assert_eq!(raw.state(), (0, 0, 0), "lock left dirty: {raw:?}");
    let g = raw
        .try_lock()
        .expect("a free lock must be available to try_lock");
    // SAFETY: `g` came from `try_lock` just above.
    unsafe { raw.unlock(g) };
}

#[test]
fn uncontended_timed_locks_succeed_at_once() {
    let lock = QSpinLock::new(1);
    *lock.try_lock_for(Duration::ZERO).unwrap() += 1;
    *lock.try_lock_for(Duration::from_secs(3600)).unwrap() += 1;
    *lock.try_lock_until(Instant::now()).unwrap() += 1;
    // A deadline in the past still succeeds on a free lock.
    let past = Instant::now().checked_sub(Duration::from_secs(1)).unwrap();
    *lock.try_lock_until(past).unwrap() += 1;
    assert_eq!(*lock.lock(), 5);
    // SAFETY: only reads the state word.
    clean(unsafe { lock.raw() });
}

#[test]
fn zero_timeout_on_a_held_lock_fails_promptly() {
    let lock = QSpinLock::new(0);
    let g = lock.lock();
    let start = Instant::now();
    assert!(lock.try_lock_for(Duration::ZERO).is_none());
    let past = Instant::now()
        .checked_sub(Duration::from_millis(5))
        .unwrap();
    assert!(lock.try_lock_until(past).is_none());
    assert!(start.elapsed() < LATE, "took {:?}", start.elapsed());
    drop(g);
    // SAFETY: only reads the state word.
    clean(unsafe { lock.raw() });
}

/// One waiter against a holder that never lets go: it becomes the word
/// waiter (and claims the lock after a batch), then gives up.
#[test]
fn word_waiter_times_out_and_leaves_no_claim() {
    let lock = Arc::new(QSpinLock::new(0));
    for timeout_ms in [1u64, 3, 20] {
        let timeout = Duration::from_millis(timeout_ms);
        let g = lock.lock();
        let l = lock.clone();
        let waited = thread::spawn(move || {
            let start = Instant::now();
            assert!(l.try_lock_for(timeout).is_none());
            start.elapsed()
        })
        .join()
        .unwrap();
        assert!(
            waited >= timeout,
            "returned early: {waited:?} < {timeout:?}"
        );
        assert!(waited < timeout + LATE, "returned late: {waited:?}");
        // The waiter is gone: no PENDING, no HANDOFF, nothing queued.
        // SAFETY: only reads the state word.
        assert_eq!(unsafe { lock.raw() }.state(), (1, 0, 0));
        // A fair unlock now has nobody to hand to: the lock ends up free.
        lock_api::MutexGuard::unlock_fair(g);
        // SAFETY: only reads the state word.
        clean(unsafe { lock.raw() });
    }
}

/// Many timed waiters queue behind a holder: each returns after its own
/// timeout, in whatever order they gave up, and the queue is empty after.
#[test]
fn queued_waiters_time_out_within_tolerance() {
    let lock = Arc::new(QSpinLock::new(0));
    let n = if cfg!(miri) { 3 } else { 12 };
    let g = lock.lock();
    let barrier = Arc::new(Barrier::new(n));
    let handles: Vec<_> = (0..n)
        .map(|i| {
            let (l, b) = (lock.clone(), barrier.clone());
            thread::spawn(move || {
                // Different timeouts, so waiters leave from the middle of the
                // queue, its head and its tail.
                let timeout = Duration::from_millis(5 + 7 * ((i * 5) % n) as u64);
                b.wait();
                let start = Instant::now();
                let got = l.try_lock_for(timeout).is_some();
                (got, start.elapsed(), timeout)
            })
        })
        .collect();
    for h in handles {
        let (got, waited, timeout) = h.join().unwrap();
        assert!(!got);
        assert!(
            waited >= timeout,
            "returned early: {waited:?} < {timeout:?}"
        );
        assert!(waited < timeout + LATE, "returned late: {waited:?}");
    }
    // SAFETY: only reads the state word.
    assert_eq!(unsafe { lock.raw() }.state(), (1, 0, 0));
    drop(g);
    // SAFETY: only reads the state word.
    clean(unsafe { lock.raw() });
}

/// Timed waiters give up around untimed ones (queued before and after
/// them): the untimed ones still get the lock, in order, and nobody hangs.
#[test]
fn untimed_waiters_survive_timed_neighbours() {
    let lock = Arc::new(QSpinLock::new(0usize));
    let rounds = if cfg!(miri) { 2 } else { 20 };
    for round in 0..rounds {
        let g = lock.lock();
        let done = Arc::new(AtomicUsize::new(0));
        let handles: Vec<_> = (0..8)
            .map(|i| {
                let (l, done) = (lock.clone(), done.clone());
                thread::spawn(move || {
                    if (i + round) % 2 == 0 {
                        *l.lock() += 1;
                        done.fetch_add(1, Ordering::Relaxed);
                        true
                    } else {
                        let t = Duration::from_micros(200 * (i as u64 + 1));
                        match l.try_lock_for(t) {
                            Some(mut g) => {
                                *g += 1;
                                true
                            }
                            None => false,
                        }
                    }
                })
            })
            .collect();
        thread::sleep(Duration::from_millis(3));
        drop(g);
        let got = handles
            .into_iter()
            .map(|h| h.join().unwrap())
            .filter(|&g| g)
            .count();
        assert_eq!(done.load(Ordering::Relaxed), 4);
        assert!(got >= 4);
        // SAFETY: only reads the state word.
        clean(unsafe { lock.raw() });
    }
}

/// A waiter that has claimed the lock (HANDOFF) when the holder releases
/// fairly at about its deadline: either it takes the reserved lock or the
/// release leaves the lock free; never reserved for nobody.
#[test]
fn fair_unlock_racing_a_timeout_never_strands_the_lock() {
    let lock = Arc::new(QSpinLock::new(0usize));
    let rounds = if cfg!(miri) { 3 } else { 300 };
    for i in 0..rounds {
        let g = lock.lock();
        let l = lock.clone();
        let timeout = Duration::from_micros(50 + (i % 7) * 300);
        let waiter = thread::spawn(move || l.try_lock_for(timeout).map(|mut g| *g += 1).is_some());
        thread::sleep(Duration::from_micros((i % 11) * 200));
        if i % 2 == 0 {
            lock_api::MutexGuard::unlock_fair(g);
        } else {
            drop(g);
        }
        let _ = waiter.join().unwrap();
        // SAFETY: only reads the state word.
        clean(unsafe { lock.raw() });
    }
}

/// The raw trait, as a generic caller would use it.
#[test]
fn raw_timed_trait() {
    fn grab<R: RawMutexTimed<Duration = Duration> + RawMutexFair>(r: &R) -> bool {
        match r.try_lock_for(Duration::from_millis(1)) {
            Some(g) => {
                // SAFETY: `g` came from `try_lock_for` just above.
                unsafe { r.unlock_fair(g) };
                true
            }
            None => false,
        }
    }
    let raw: RawQSpinLock = RawQSpinLock::new();
    assert!(grab(&raw));
    let g = raw.lock();
    assert!(!grab(&raw));
    // SAFETY: `g` came from `lock` above.
    unsafe { raw.unlock(g) };
    clean(&raw);
}
