//! Timed and fair operations of the reader-writer locks, one at a time:
//! timeouts are honoured (never early, late by a bounded amount) for reads,
//! writes, upgradable reads and upgrades, a timed-out attempt leaves the
//! lock usable, a timed-out upgrade still holds its upgradable read, and
//! fair unlocks and bumps hand the lock to a waiting thread.
#![cfg(not(any(loom, shuttle)))]

use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use lock_api::{
    RawRwLockFair, RawRwLockTimed, RawRwLockUpgradeFair, RawRwLockUpgradeTimed, RwLock,
    RwLockReadGuard, RwLockUpgradableReadGuard, RwLockWriteGuard,
};
use scalelock::{RawPerCpuRwLock, RawQRwLock};

/// How late a timed-out attempt may return on a shared 2-core machine
/// (more in debug builds).
const LATE: Duration = Duration::from_millis(if cfg!(debug_assertions) { 2_000 } else { 500 });
const SHORT: Duration = Duration::from_millis(20);

trait Lock:
    RawRwLockTimed<Duration = Duration, Instant = Instant>
    + RawRwLockFair
    + RawRwLockUpgradeFair
    + RawRwLockUpgradeTimed
    + Send
    + Sync
{
}

impl<L> Lock for L where
    L: RawRwLockTimed<Duration = Duration, Instant = Instant>
        + RawRwLockFair
        + RawRwLockUpgradeFair
        + RawRwLockUpgradeTimed
        + Send
        + Sync
{
}

/// `f` fails, after `SHORT` and not much later.
fn times_out<T>(f: impl FnOnce() -> Option<T>) {
    let start = Instant::now();
    assert!(f().is_none(), "acquired although it should time out");
    let waited = start.elapsed();
    assert!(waited >= SHORT, "gave up early: {waited:?}");
    assert!(waited <= SHORT + LATE, "gave up late: {waited:?}");
}

fn uncontended<L: Lock>(lock: RwLock<L, u32>) {
    *lock.try_write_for(Duration::ZERO).unwrap() += 1;
    *lock.try_write_until(Instant::now()).unwrap() += 1;
    assert_eq!(*lock.try_read_for(Duration::ZERO).unwrap(), 2);
    assert_eq!(*lock.try_read_until(Instant::now()).unwrap(), 2);
    let u = lock.try_upgradable_read_for(Duration::ZERO).unwrap();
    let mut w = RwLockUpgradableReadGuard::try_upgrade_for(u, Duration::ZERO)
        .unwrap_or_else(|_| panic!("upgrade of the only reader"));
    *w += 1;
    drop(w);
    let u = lock.try_upgradable_read_until(Instant::now()).unwrap();
    let w = RwLockUpgradableReadGuard::try_upgrade_until(u, Instant::now())
        .unwrap_or_else(|_| panic!("upgrade of the only reader"));
    RwLockWriteGuard::unlock_fair(w);
    assert_eq!(*lock.read(), 3);
    assert!(!lock.is_locked());
}

fn timeouts_against_holders<L: Lock>(lock: RwLock<L, u32>) {
    thread::scope(|s| {
        // A writer inside: reads, writes and upgradable reads time out.
        let w = lock.write();
        s.spawn(|| {
            times_out(|| lock.try_read_for(SHORT));
            times_out(|| lock.try_write_for(SHORT));
            times_out(|| lock.try_upgradable_read_for(SHORT));
            times_out(|| lock.try_write_until(Instant::now() + SHORT));
        })
        .join()
        .unwrap();
        drop(w);
        // A reader inside: writes time out, reads do not.
        let r = lock.read();
        s.spawn(|| {
            times_out(|| lock.try_write_for(SHORT));
            assert!(lock.try_read_for(SHORT).is_some());
            // An upgradable read gets in beside the reader; its upgrade
            // times out and it still holds the upgradable read.
            let u = lock.try_upgradable_read_for(SHORT).unwrap();
            let start = Instant::now();
            let u = RwLockUpgradableReadGuard::try_upgrade_for(u, SHORT)
                .expect_err("upgrade beside a reader");
            let waited = start.elapsed();
            assert!(waited >= SHORT && waited <= SHORT + LATE, "{waited:?}");
            assert_eq!(*u, 0);
            // Still upgradable-held: another upgradable read times out.
            times_out(|| lock.try_upgradable_read_for(SHORT));
            drop(u);
        })
        .join()
        .unwrap();
        drop(r);
    });
    // Nothing was left behind.
    *lock.try_write().expect("free after the timeouts") += 1;
    assert!(lock.try_upgradable_read().is_some());
    assert!(!lock.is_locked());
}

/// A timed writer waits while readers come and go, then gets the lock when
/// the last one leaves before its deadline.
fn timed_writer_gets_the_lock<L: Lock>(lock: RwLock<L, u32>) {
    thread::scope(|s| {
        let r = lock.read();
        let writer = s.spawn(|| {
            *lock
                .try_write_for(Duration::from_secs(30))
                .expect("in time") += 1;
        });
        thread::sleep(SHORT);
        drop(r);
        writer.join().unwrap();
    });
    assert_eq!(*lock.read(), 1);
}

/// Fair unlocks and bumps of every guard kind, with a thread waiting for
/// the lock: the waiter gets it, nothing is lost.
fn fair_unlocks<L: Lock>(lock: RwLock<L, u32>) {
    let done = AtomicBool::new(false);
    thread::scope(|s| {
        let mut w = lock.write();
        let waiter = s.spawn(|| {
            *lock.write() += 1;
            done.store(true, Ordering::Relaxed);
        });
        // Bumps until the waiter has had the lock.
        let end = Instant::now() + Duration::from_secs(30);
        while !done.load(Ordering::Relaxed) {
            assert!(Instant::now() < end, "the waiter never got the lock");
            RwLockWriteGuard::bump(&mut w);
            thread::yield_now();
        }
        RwLockWriteGuard::unlock_fair(w);
        waiter.join().unwrap();

        let mut r = lock.read();
        RwLockReadGuard::bump(&mut r);
        let writer = s.spawn(|| *lock.write() += 1);
        thread::sleep(Duration::from_millis(5));
        RwLockReadGuard::unlock_fair(r);
        writer.join().unwrap();

        let mut u = lock.upgradable_read();
        RwLockUpgradableReadGuard::bump(&mut u);
        let writer = s.spawn(|| *lock.write() += 1);
        thread::sleep(Duration::from_millis(5));
        RwLockUpgradableReadGuard::unlock_fair(u);
        writer.join().unwrap();
    });
    assert_eq!(*lock.read(), 3);
    assert!(!lock.is_locked());
}

macro_rules! suite {
    ($name:ident, $raw:ty) => {
        mod $name {
            use super::*;

            fn new() -> RwLock<$raw, u32> {
                RwLock::from_raw(<$raw>::new(), 0)
            }

            #[test]
            fn uncontended_timed_ops_succeed() {
                uncontended(new());
            }

            #[test]
            fn timeouts_are_honoured_against_holders() {
                timeouts_against_holders(new());
            }

            #[test]
            fn timed_writer_gets_the_lock_in_time() {
                timed_writer_gets_the_lock(new());
            }

            #[test]
            fn fair_unlocks_and_bumps() {
                fair_unlocks(new());
            }
        }
    };
}

suite!(qrwlock, RawQRwLock);
suite!(percpu_rwlock, RawPerCpuRwLock);

/// A timed write that runs out of time while a fast (biased) read is inside
/// gives the bias back as it found it and leaves no underlying write held:
/// the read goes on, and the next writer and readers get the lock.
#[test]
fn percpu_timed_write_gives_the_bias_back() {
    let lock: RwLock<RawPerCpuRwLock, u32> = RwLock::from_raw(RawPerCpuRwLock::new(), 0);
    let mode = |l: &RwLock<RawPerCpuRwLock, u32>| {
        // SAFETY: only reads the state for its Debug output.
        format!("{:?}", unsafe { l.raw() })
    };
    assert!(mode(&lock).contains("biased"), "{}", mode(&lock));
    let r = lock.read();
    thread::scope(|s| {
        s.spawn(|| {
            times_out(|| lock.try_write_for(SHORT));
            times_out(|| lock.try_write_until(Instant::now() + SHORT));
        })
        .join()
        .unwrap();
    });
    assert!(mode(&lock).contains("biased"), "{}", mode(&lock));
    assert!(!lock.is_locked_exclusive());
    // Another thread still reads (beside ours) while we hold the read.
    thread::scope(|s| {
        s.spawn(|| assert_eq!(*lock.try_read_for(SHORT).expect("a read"), 0))
            .join()
            .unwrap();
    });
    drop(r);
    *lock.try_write_for(Duration::from_secs(30)).expect("free") += 1;
    assert_eq!(*lock.read(), 1);
    assert!(!lock.is_locked());
}
