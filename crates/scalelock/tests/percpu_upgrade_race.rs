//! `PerCpuRwLock::upgradable_read` + `upgrade` against concurrent readers,
//! on real threads: after `upgrade` returns, no reader may be inside.
//!
//! This failed within a second before the fix (a reproduction of the bug
//! shuttle found, `tests/shuttle_locks.rs`, `percpu_upgrade_vs_slow_readers`):
//! `upgrade` revoked the bias (cleared `FAST`, waited out fast readers)
//! while it held only the underlying upgradable read, so readers arriving
//! then still got the underlying *read* lock (slow path); such a slow
//! reader's `maybe_reenable` set `FAST` again, fast readers entered through
//! their slots, and the underlying upgrade, which waits only for the
//! underlying readers, returned with fast readers inside. Now `upgrade`
//! upgrades the underlying lock first and revokes after.
#![cfg(not(any(loom, shuttle)))]

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use lock_api::RwLockUpgradableReadGuard;
use scalelock::PerCpuRwLock;

#[test]
fn upgrade_excludes_readers() {
    upgrades_exclude_readers(|g| Some(RwLockUpgradableReadGuard::upgrade(g)), 0);
}

/// `try_upgrade`: takes the write only if no reader, fast or slow, is left,
/// and a failed try leaves the upgradable read (and the readers) as they were.
/// A try waits for no reader beyond a short spin, so the readers here
/// pause now and then: four readers in a tight loop on two CPUs always
/// have one preempted inside its read, and no try would ever succeed.
#[test]
fn try_upgrade_excludes_readers() {
    upgrades_exclude_readers(|g| RwLockUpgradableReadGuard::try_upgrade(g).ok(), 16);
}

type Upgradable<'a> = RwLockUpgradableReadGuard<'a, scalelock::RawPerCpuRwLock, u64>;
type Write<'a> = lock_api::RwLockWriteGuard<'a, scalelock::RawPerCpuRwLock, u64>;

/// `pause_every`: 0, readers read in a tight loop; else each sleeps 50 us
/// after every `pause_every` reads.
fn upgrades_exclude_readers(
    upgrade: impl Fn(Upgradable<'_>) -> Option<Write<'_>>,
    pause_every: u32,
) {
    let lock = Arc::new(PerCpuRwLock::new(0u64));
    let inside = Arc::new(AtomicUsize::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let readers: Vec<_> = (0..4)
        .map(|_| {
            let (lock, inside, stop) = (lock.clone(), inside.clone(), stop.clone());
            thread::spawn(move || {
                let mut reads = 0u32;
                while !stop.load(Ordering::Relaxed) {
                    reads = reads.wrapping_add(1);
                    if pause_every != 0 && reads.is_multiple_of(pause_every) {
                        thread::sleep(Duration::from_micros(50));
                    }
                    let g = lock.read();
                    inside.fetch_add(1, Ordering::SeqCst);
                    for _ in 0..50 {
                        std::hint::spin_loop();
                    }
                    let _ = *g;
                    inside.fetch_sub(1, Ordering::SeqCst);
                }
            })
        })
        .collect();
    let start = Instant::now();
    let (mut upgrades, mut overlaps) = (0u64, 0u64);
    // Two seconds, or longer (up to 30 s) until a first upgrade succeeded:
    // a `try_upgrade` succeeds only when it finds no reader inside.
    let go_on = |upgrades: u64| {
        let t = start.elapsed();
        t < Duration::from_secs(2) || (upgrades == 0 && t < Duration::from_secs(30))
    };
    while go_on(upgrades) && overlaps == 0 {
        let Some(mut w) = upgrade(lock.upgradable_read()) else {
            continue;
        };
        for _ in 0..50 {
            if inside.load(Ordering::SeqCst) != 0 {
                overlaps += 1;
                break;
            }
            std::hint::spin_loop();
        }
        *w += 1;
        upgrades += 1;
    }
    stop.store(true, Ordering::Relaxed);
    for r in readers {
        r.join().unwrap();
    }
    eprintln!("{upgrades} upgrades in {:?}", start.elapsed());
    assert!(
        upgrades > 0,
        "no upgrade succeeded: the test proved nothing"
    );
    assert_eq!(
        overlaps, 0,
        "a reader was inside while `upgrade`'s write guard was held (after {upgrades} upgrades)"
    );
}
