//! Stress for timed acquisitions: many waiters with tiny random timeouts
//! against holders that keep the lock for random short stretches, beside
//! untimed and fair-unlocking threads. A waiter that gives up must never
//! break the queue: the count of successful acquisitions equals the
//! protected counter, nothing hangs (a watchdog prints the lock's state and
//! fails), no failed attempt returns before its timeout nor very long after
//! it, and the lock is clean at the end.
#![cfg(not(loom))]

use std::cell::UnsafeCell;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use lock_api::{
    RawMutex, RawMutexFair, RawMutexTimed, RawRwLock, RawRwLockFair, RawRwLockTimed,
    RawRwLockUpgradeFair, RawRwLockUpgradeTimed,
};
use scalelock::platform::StdPlatform;
use scalelock::{RawPerCpuRwLock, RawQRwLock, RawQSpinLock};

const RUN: Duration = Duration::from_millis(1500);
const WATCHDOG: Duration = Duration::from_secs(60);
/// How late a failed attempt may return on a shared 2-core machine with a
/// dozen busy threads (a preempted waiter returns when it runs again; debug
/// builds, as CI's ThreadSanitizer run, are many times slower). The lower
/// bound, never early, is exact.
const LATE: Duration = Duration::from_secs(if cfg!(debug_assertions) { 10 } else { 2 });

/// xorshift64*: each thread its own stream.
struct Rng(u64);

impl Rng {
    fn new(seed: usize) -> Self {
        Self(0x9E37_79B9_7F4A_7C15 ^ (seed as u64 + 1).wrapping_mul(0xBF58_476D_1CE4_E5B9))
    }
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D) % n
    }
    /// A tiny timeout: zero, a few microseconds, or up to 2 ms.
    fn timeout(&mut self) -> Duration {
        match self.below(4) {
            0 => Duration::ZERO,
            1 => Duration::from_nanos(self.below(5_000)),
            2 => Duration::from_micros(self.below(200)),
            _ => Duration::from_micros(self.below(2_000)),
        }
    }
}

/// Joins `handles`, failing with `state()` if they are not all done within
/// the watchdog's time.
fn join_watched<T>(handles: Vec<JoinHandle<T>>, state: impl Fn() -> String) -> Vec<T> {
    let end = Instant::now() + WATCHDOG;
    while !handles.iter().all(JoinHandle::is_finished) {
        assert!(Instant::now() < end, "hung: {}", state());
        thread::sleep(Duration::from_millis(10));
    }
    handles.into_iter().map(|h| h.join().unwrap()).collect()
}

struct Shared<L> {
    lock: L,
    count: UnsafeCell<usize>,
    inside: AtomicUsize,
    readers: AtomicUsize,
}

// SAFETY: `count` is only touched with `lock` held exclusively, which the
// `inside` counter checks.
unsafe impl<L: Sync> Sync for Shared<L> {}

impl<L> Shared<L> {
    fn new(lock: L) -> Arc<Self> {
        Arc::new(Self {
            lock,
            count: UnsafeCell::new(0),
            inside: AtomicUsize::new(0),
            readers: AtomicUsize::new(0),
        })
    }

    /// The critical section of an exclusive holder; `hold`: keep the lock
    /// for up to 300 us (spinning or sleeping).
    fn bump(&self, rng: &mut Rng, hold: bool) {
        assert_eq!(self.inside.fetch_add(1, Ordering::Relaxed), 0, "two inside");
        assert_eq!(
            self.readers.load(Ordering::Relaxed),
            0,
            "a writer beside readers"
        );
        // SAFETY: held exclusively (checked just above).
        unsafe { *self.count.get() += 1 };
        if hold {
            hold_for(rng);
        }
        self.inside.fetch_sub(1, Ordering::Relaxed);
    }

    /// The critical section of a reader.
    fn read(&self, rng: &mut Rng, hold: bool) {
        self.readers.fetch_add(1, Ordering::Relaxed);
        assert_eq!(
            self.inside.load(Ordering::Relaxed),
            0,
            "a reader beside a writer"
        );
        if hold {
            hold_for(rng);
        }
        self.readers.fetch_sub(1, Ordering::Relaxed);
    }

    fn count(&self) -> usize {
        // SAFETY: called after every thread was joined.
        unsafe { *self.count.get() }
    }
}

fn hold_for(rng: &mut Rng) {
    let us = rng.below(300);
    if us > 150 {
        thread::sleep(Duration::from_micros(us));
    } else {
        for _ in 0..us * 20 {
            std::hint::spin_loop();
        }
    }
}

/// A failed attempt returns neither before its timeout nor much after it.
fn check_failed_in_time(start: Instant, timeout: Duration) {
    let waited = start.elapsed();
    assert!(waited >= timeout, "gave up early: {waited:?} < {timeout:?}");
    assert!(
        waited <= timeout + LATE,
        "gave up late: {waited:?} for {timeout:?}"
    );
}

fn mutex_stress(timed: usize, untimed: usize) {
    let s = Shared::new(RawQSpinLock::<StdPlatform>::new());
    let mut handles = Vec::new();
    for t in 0..timed + untimed + 1 {
        let s = s.clone();
        handles.push(thread::spawn(move || {
            let mut rng = Rng::new(t);
            let mut got = 0usize;
            let end = Instant::now() + RUN;
            while Instant::now() < end {
                let fair = rng.below(4) == 0;
                let guard = if t == 0 || t > timed {
                    // t == 0: the holder, keeping the lock for a while;
                    // the untimed lockers after the timed ones.
                    Some(s.lock.lock())
                } else {
                    let timeout = rng.timeout();
                    let start = Instant::now();
                    let g = if rng.below(2) == 0 {
                        s.lock.try_lock_for(timeout)
                    } else {
                        s.lock.try_lock_until(start + timeout)
                    };
                    if g.is_none() {
                        check_failed_in_time(start, timeout);
                    }
                    g
                };
                if let Some(g) = guard {
                    s.bump(&mut rng, t == 0);
                    got += 1;
                    // SAFETY: `g` came from this lock's acquisition above.
                    unsafe {
                        if fair {
                            s.lock.unlock_fair(g)
                        } else {
                            s.lock.unlock(g)
                        }
                    }
                }
            }
            got
        }));
    }
    let total: usize = join_watched(handles, || format!("{:?}", s.lock))
        .into_iter()
        .sum();
    assert_eq!(s.count(), total);
    assert_eq!(s.lock.state(), (0, 0, 0), "dirty: {:?}", s.lock);
    let g = s.lock.try_lock().expect("free after the run");
    // SAFETY: `g` came from `try_lock` just above.
    unsafe { s.lock.unlock(g) };
}

#[test]
fn qspinlock_tiny_timeouts_against_a_holder() {
    mutex_stress(12, 2);
}

#[test]
fn qspinlock_timed_waiters_only() {
    mutex_stress(8, 0);
}

/// What the rwlock stress needs of a lock.
trait TimedRw:
    RawRwLockTimed<Duration = Duration, Instant = Instant>
    + RawRwLockFair
    + RawRwLockUpgradeFair
    + RawRwLockUpgradeTimed
    + Send
    + Sync
    + 'static
{
}

impl<L> TimedRw for L where
    L: RawRwLockTimed<Duration = Duration, Instant = Instant>
        + RawRwLockFair
        + RawRwLockUpgradeFair
        + RawRwLockUpgradeTimed
        + Send
        + Sync
        + 'static
{
}

/// The rwlock version: timed readers, writers and upgradable readers
/// (with timed upgrades) against a long writer and long readers, fair and
/// unfair unlocks at random. Readers check that no writer is inside;
/// writers that they are alone.
fn rwlock_stress<L: TimedRw>(lock: L, debug: fn(&L) -> String, clean: fn(&L) -> bool) {
    let s = Shared::new(lock);
    let threads = 12;
    let mut handles = Vec::new();
    for t in 0..threads {
        let s = s.clone();
        handles.push(thread::spawn(move || {
            let mut rng = Rng::new(t + 100);
            let mut writes = 0usize;
            let end = Instant::now() + RUN;
            while Instant::now() < end {
                let op = if t == 0 { 0 } else { rng.below(6) };
                let timed = t > 1;
                let fair = rng.below(3) == 0;
                let timeout = rng.timeout();
                let start = Instant::now();
                match op {
                    0 | 1 => {
                        let g = if timed {
                            s.lock.try_lock_exclusive_for(timeout)
                        } else {
                            Some(s.lock.lock_exclusive())
                        };
                        let Some(g) = g else {
                            check_failed_in_time(start, timeout);
                            continue;
                        };
                        s.bump(&mut rng, t == 0);
                        writes += 1;
                        // SAFETY: `g` came from an exclusive acquisition above.
                        unsafe {
                            if fair {
                                s.lock.unlock_exclusive_fair(g)
                            } else {
                                s.lock.unlock_exclusive(g)
                            }
                        }
                    }
                    2 => {
                        // An upgradable read, upgraded in time or not.
                        let g = if timed {
                            s.lock.try_lock_upgradable_until(start + timeout)
                        } else {
                            Some(s.lock.lock_upgradable())
                        };
                        let Some(g) = g else {
                            check_failed_in_time(start, timeout);
                            continue;
                        };
                        s.read(&mut rng, false);
                        let up_timeout = rng.timeout();
                        let up_start = Instant::now();
                        // SAFETY: `g` is our upgradable read of this lock.
                        match unsafe { s.lock.try_upgrade_for(g, up_timeout) } {
                            Ok(w) => {
                                s.bump(&mut rng, false);
                                writes += 1;
                                // SAFETY: `w` is our write lock, from the upgrade.
                                unsafe { s.lock.unlock_exclusive(w) };
                            }
                            Err(g) => {
                                check_failed_in_time(up_start, up_timeout);
                                s.read(&mut rng, false);
                                // SAFETY: still our upgradable read.
                                unsafe {
                                    if fair {
                                        s.lock.unlock_upgradable_fair(g)
                                    } else {
                                        s.lock.unlock_upgradable(g)
                                    }
                                }
                            }
                        }
                    }
                    _ => {
                        let g = if timed {
                            s.lock.try_lock_shared_for(timeout)
                        } else {
                            Some(s.lock.lock_shared())
                        };
                        let Some(g) = g else {
                            check_failed_in_time(start, timeout);
                            continue;
                        };
                        s.read(&mut rng, t == 1);
                        // SAFETY: `g` came from a shared acquisition above.
                        unsafe {
                            if fair {
                                s.lock.unlock_shared_fair(g)
                            } else {
                                s.lock.unlock_shared(g)
                            }
                        }
                    }
                }
            }
            writes
        }));
    }
    let writes: usize = join_watched(handles, || debug(&s.lock)).into_iter().sum();
    assert_eq!(s.count(), writes);
    assert!(clean(&s.lock), "dirty: {}", debug(&s.lock));
    let g = s.lock.try_lock_exclusive().expect("free after the run");
    // SAFETY: `g` came from `try_lock_exclusive` just above.
    unsafe { s.lock.unlock_exclusive(g) };
}

#[test]
fn qrwlock_tiny_timeouts() {
    rwlock_stress(
        RawQRwLock::<StdPlatform>::new(),
        |l| format!("{l:?}"),
        |l| !l.is_locked() && format!("{l:?}").contains("tail: 0"),
    );
}

#[test]
fn percpu_rwlock_tiny_timeouts() {
    rwlock_stress(
        RawPerCpuRwLock::<StdPlatform>::new(),
        |l| format!("{l:?}"),
        |l| !l.is_locked(),
    );
}
