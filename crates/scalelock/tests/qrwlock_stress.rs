//! Stress tests for `QRwLock`: reader/writer exclusion checked with
//! non-atomic data at 2 to 32 threads and read shares of 0-100%, holders that
//! sleep (so waiters park), writers that must not starve under a continuous
//! stream of readers, and upgrade/downgrade hand-offs.
#![cfg(not(loom))]

use std::cell::UnsafeCell;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use lock_api::{RawRwLock, RawRwLockDowngrade, RawRwLockUpgrade};
use scalelock::{QRwLock, RawQRwLock};

const ITERS: usize = if cfg!(miri) { 20 } else { 20_000 };

/// Two words written by writers only, protected only by the raw lock: a
/// reader that overlaps a writer sees them differ (and TSan sees the race).
struct Shared {
    lock: RawQRwLock,
    data: UnsafeCell<[usize; 2]>,
    readers: AtomicUsize,
    writers: AtomicUsize,
}

// SAFETY: `data` is written only under the exclusive lock, read only under a
// shared one.
unsafe impl Sync for Shared {}

fn hammer(threads: usize, iters: usize, read_pct: usize, sleep_every: usize) {
    let s = Arc::new(Shared {
        lock: RawQRwLock::new(),
        data: UnsafeCell::new([0, 0]),
        readers: AtomicUsize::new(0),
        writers: AtomicUsize::new(0),
    });
    let handles: Vec<_> = (0..threads)
        .map(|t| {
            let s = s.clone();
            thread::spawn(move || {
                let mut writes = 0;
                let mut rng = (t as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15);
                for i in 0..iters {
                    rng ^= rng << 13;
                    rng ^= rng >> 7;
                    rng ^= rng << 17;
                    let sleep = sleep_every != 0 && (i + t) % sleep_every == 0;
                    if (rng % 100) as usize >= read_pct {
                        let g = s.lock.lock_exclusive();
                        assert_eq!(s.writers.fetch_add(1, Ordering::Relaxed), 0);
                        assert_eq!(s.readers.load(Ordering::Relaxed), 0);
                        // SAFETY: exclusive lock held.
                        unsafe {
                            let d = &mut *s.data.get();
                            d[0] += 1;
                            if sleep {
                                thread::sleep(Duration::from_micros(30));
                            }
                            d[1] += 1;
                        }
                        writes += 1;
                        s.writers.fetch_sub(1, Ordering::Relaxed);
                        // SAFETY: `g` came from `lock_exclusive` above.
                        unsafe { s.lock.unlock_exclusive(g) };
                    } else {
                        let g = s.lock.lock_shared();
                        s.readers.fetch_add(1, Ordering::Relaxed);
                        assert_eq!(s.writers.load(Ordering::Relaxed), 0);
                        // SAFETY: shared lock held.
                        let d = unsafe { *s.data.get() };
                        assert_eq!(d[0], d[1], "reader overlapped a writer");
                        if sleep {
                            thread::sleep(Duration::from_micros(30));
                        }
                        s.readers.fetch_sub(1, Ordering::Relaxed);
                        // SAFETY: `g` came from `lock_shared` above.
                        unsafe { s.lock.unlock_shared(g) };
                    }
                }
                writes
            })
        })
        .collect();
    let writes: usize = handles.into_iter().map(|h| h.join().unwrap()).sum();
    // SAFETY: all threads joined.
    let d = unsafe { *s.data.get() };
    assert_eq!(d, [writes, writes]);
    assert!(!s.lock.is_locked());
}

#[test]
fn writers_only_2_threads() {
    hammer(2, ITERS * 2, 0, 0);
}

#[test]
fn mixed_50_2_threads() {
    hammer(2, ITERS * 2, 50, 0);
}

#[test]
fn mixed_95_4_threads() {
    hammer(4, ITERS, 95, 0);
}

#[test]
fn mixed_50_16_threads() {
    hammer(16, ITERS / 2, 50, 0);
}

#[test]
fn mixed_95_32_threads() {
    hammer(if cfg!(miri) { 4 } else { 32 }, ITERS / 4, 95, 0);
}

#[test]
fn readers_only_16_threads() {
    hammer(16, ITERS / 2, 100, 0);
}

/// Holders sleep now and then: waiters on the word and in the queue park.
#[test]
fn sleeping_holders_16_threads() {
    hammer(16, ITERS / 20, 70, 7);
}

/// A writer arriving while readers overlap continuously must still get in:
/// W_WAITING turns newcomer readers away.
#[test]
#[cfg_attr(miri, ignore)]
fn writer_does_not_starve() {
    let lock = Arc::new(QRwLock::new(0u64));
    let stop = Arc::new(AtomicBool::new(false));
    let readers: Vec<_> = (0..4)
        .map(|_| {
            let (lock, stop) = (lock.clone(), stop.clone());
            thread::spawn(move || {
                let mut n = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    let r = lock.read();
                    // Hold long enough that readers always overlap.
                    let until = Instant::now() + Duration::from_micros(20);
                    while Instant::now() < until {
                        std::hint::spin_loop();
                    }
                    n += *r;
                }
                n
            })
        })
        .collect();
    thread::sleep(Duration::from_millis(20));
    let start = Instant::now();
    for _ in 0..50 {
        *lock.write() += 1;
    }
    let took = start.elapsed();
    stop.store(true, Ordering::Relaxed);
    for r in readers {
        r.join().unwrap();
    }
    assert_eq!(*lock.read(), 50);
    assert!(took < Duration::from_secs(5), "writer starved: {took:?}");
}

/// Upgradable readers, upgrades and downgrades mixed with plain readers and
/// writers, counting every write.
#[test]
fn upgrade_downgrade_mix() {
    let threads = if cfg!(miri) { 3 } else { 8 };
    let iters = ITERS / 4;
    let s = Arc::new(Shared {
        lock: RawQRwLock::new(),
        data: UnsafeCell::new([0, 0]),
        readers: AtomicUsize::new(0),
        writers: AtomicUsize::new(0),
    });
    let handles: Vec<_> = (0..threads)
        .map(|t| {
            let s = s.clone();
            thread::spawn(move || {
                let mut writes = 0;
                for i in 0..iters {
                    let write = |writes: &mut usize| {
                        assert_eq!(s.writers.fetch_add(1, Ordering::Relaxed), 0);
                        assert_eq!(s.readers.load(Ordering::Relaxed), 0);
                        // SAFETY: exclusive lock held by the caller.
                        unsafe {
                            let d = &mut *s.data.get();
                            d[0] += 1;
                            d[1] += 1;
                        }
                        *writes += 1;
                        s.writers.fetch_sub(1, Ordering::Relaxed);
                    };
                    let read = || {
                        s.readers.fetch_add(1, Ordering::Relaxed);
                        assert_eq!(s.writers.load(Ordering::Relaxed), 0);
                        // SAFETY: a shared or upgradable lock is held.
                        let d = unsafe { *s.data.get() };
                        assert_eq!(d[0], d[1]);
                        s.readers.fetch_sub(1, Ordering::Relaxed);
                    };
                    // SAFETY (all unlock/upgrade/downgrade calls below): each
                    // guard state came from the matching acquisition above it.
                    match (i + t) % 5 {
                        0 => {
                            let u = s.lock.lock_upgradable();
                            read();
                            let w = unsafe { s.lock.upgrade(u) };
                            write(&mut writes);
                            let r = unsafe { s.lock.downgrade(w) };
                            read();
                            unsafe { s.lock.unlock_shared(r) };
                        }
                        1 => {
                            let u = s.lock.lock_upgradable();
                            read();
                            match unsafe { s.lock.try_upgrade(u) } {
                                Ok(w) => {
                                    write(&mut writes);
                                    unsafe { s.lock.unlock_exclusive(w) };
                                }
                                Err(u) => unsafe { s.lock.unlock_upgradable(u) },
                            }
                        }
                        2 => {
                            let w = s.lock.lock_exclusive();
                            write(&mut writes);
                            unsafe { s.lock.unlock_exclusive(w) };
                        }
                        _ => {
                            let r = s.lock.lock_shared();
                            read();
                            unsafe { s.lock.unlock_shared(r) };
                        }
                    }
                }
                writes
            })
        })
        .collect();
    let writes: usize = handles.into_iter().map(|h| h.join().unwrap()).sum();
    // SAFETY: all threads joined.
    assert_eq!(unsafe { *s.data.get() }, [writes, writes]);
    assert!(!s.lock.is_locked());
}

/// Threads come and go while the lock is contended.
#[test]
fn threads_come_and_go() {
    let lock = Arc::new(QRwLock::new(0usize));
    let rounds = if cfg!(miri) { 2 } else { 20 };
    for _ in 0..rounds {
        let hs: Vec<_> = (0..6)
            .map(|t| {
                let lock = lock.clone();
                thread::spawn(move || {
                    for i in 0..ITERS / 100 {
                        if (i + t) % 3 == 0 {
                            *lock.write() += 1;
                        } else {
                            let _ = *lock.read();
                        }
                    }
                })
            })
            .collect();
        for h in hs {
            h.join().unwrap();
        }
    }
    assert!(!lock.is_locked());
}
