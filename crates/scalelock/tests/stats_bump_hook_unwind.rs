//! A long-hold hook that panics in a release made inside `QRwLock`'s
//! `bump` (shared, exclusive, upgradable; another thread waits) or
//! `downgrade`. lock_api lets `bump_*` unwind only with the hold restored
//! (its guard stays alive and unlocks at its drop): the bumped guard must
//! hold the lock again when the panic comes out (it held nothing, and its
//! drop released the lock a second time). A `downgrade` that panics
//! returns no read guard: it must leave nothing held (its read stayed
//! held for ever). Its own test binary: the hook and the sampling rate
//! are process-wide.
//! Run: `cargo test -p scalelock --features stats --test stats_bump_hook_unwind`
#![cfg(feature = "stats")]

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;
use std::time::Duration;

use lock_api::{RwLockReadGuard, RwLockUpgradableReadGuard, RwLockWriteGuard};
use scalelock::{ClassRef, LockClass, PerCpuRwLock, QRwLock, RawPerCpuRwLock, RawQRwLock, stats};

fn panicking_hook(_: &stats::LongHold) {
    panic!("the long-hold hook panics");
}

/// `lock`, held by `hold` (which returns the guard), a waiter thread
/// (`wait`: a blocking acquisition) that flags when it is in, and `bump`
/// of the guard; checks that the bump's panic leaves the
/// guard holding the lock and the lock whole after the guard's drop.
fn check<G>(
    lock: &'static QRwLock<u64>,
    hold: fn(&'static QRwLock<u64>) -> G,
    wait: fn(&QRwLock<u64>, &AtomicBool),
    bump: fn(&mut G),
) {
    let in_ = Arc::new(AtomicBool::new(false));
    stats::set_long_hold_hook(1_000_000, Some(panicking_hook));
    let mut g = hold(lock);
    let waiter = {
        let in_ = in_.clone();
        thread::spawn(move || wait(lock, &in_))
    };
    // The waiter queues (nobody_waits() is false from now on), and our
    // hold outlasts the hook's threshold.
    thread::sleep(Duration::from_millis(50));
    assert!(!in_.load(Ordering::SeqCst));
    let r = catch_unwind(AssertUnwindSafe(|| bump(&mut g)));
    assert!(r.is_err(), "the hook's panic comes out of the bump");
    stats::set_long_hold_hook(u64::MAX, None);
    // The bump handed the lock to the waiter, which is done by now.
    waiter.join().unwrap();
    assert!(in_.load(Ordering::SeqCst));
    // The guard holds the lock again.
    assert!(
        lock.try_write().is_none(),
        "the bumped guard holds nothing after the panic"
    );
    drop(g);
    // The lock is whole: free, and every mode can be taken.
    assert!(lock.try_write().is_some(), "the lock is free again");
    drop(lock.read());
    drop(lock.upgradable_read());
    drop(lock.write());
}

fn wait_write(l: &QRwLock<u64>, in_: &AtomicBool) {
    let _w = l.write();
    in_.store(true, Ordering::SeqCst);
}

fn wait_read(l: &QRwLock<u64>, in_: &AtomicBool) {
    let _r = l.read();
    in_.store(true, Ordering::SeqCst);
}

/// The hook and the sampling rate are process-wide: one test at a time.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    let g = SERIAL
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    stats::enable();
    stats::set_hold_sample(1);
    g
}

#[test]
fn a_read_bump_whose_release_panics_keeps_its_hold() {
    static C: LockClass = LockClass::new("bump-unwind-shared");
    static L: QRwLock<u64> = QRwLock::from_raw(RawQRwLock::with_class(ClassRef::of(&C)), 0);
    let _s = serial();
    check(&L, |l| l.read(), wait_write, RwLockReadGuard::bump);
}

#[test]
fn a_write_bump_whose_release_panics_keeps_its_hold() {
    static C: LockClass = LockClass::new("bump-unwind-exclusive");
    static L: QRwLock<u64> = QRwLock::from_raw(RawQRwLock::with_class(ClassRef::of(&C)), 0);
    let _s = serial();
    check(&L, |l| l.write(), wait_read, RwLockWriteGuard::bump);
}

#[test]
fn an_upgradable_bump_whose_release_panics_keeps_its_hold() {
    static C: LockClass = LockClass::new("bump-unwind-upgradable");
    static L: QRwLock<u64> = QRwLock::from_raw(RawQRwLock::with_class(ClassRef::of(&C)), 0);
    let _s = serial();
    check(
        &L,
        |l| l.upgradable_read(),
        wait_write,
        RwLockUpgradableReadGuard::bump,
    );
}

/// A downgrade whose release of the write hold runs a long-hold hook that
/// panics: the panic comes out of `downgrade`, which then returns no read
/// guard, so nobody would ever release the read the downgrade took (every
/// later writer waited for ever). As a plain unlock whose hook panics, it
/// leaves nothing held.
#[test]
fn a_downgrade_whose_release_panics_leaves_nothing_held() {
    static C: LockClass = LockClass::new("downgrade-unwind");
    static L: QRwLock<u64> = QRwLock::from_raw(RawQRwLock::with_class(ClassRef::of(&C)), 0);
    let _s = serial();
    stats::set_long_hold_hook(1_000_000, Some(panicking_hook));
    let w = L.write();
    thread::sleep(Duration::from_millis(2));
    let r = catch_unwind(AssertUnwindSafe(|| drop(RwLockWriteGuard::downgrade(w))));
    stats::set_long_hold_hook(u64::MAX, None);
    assert!(r.is_err(), "the hook's panic comes out of the downgrade");
    assert!(
        L.try_write().is_some(),
        "the read taken by the downgrade stayed held, with no guard"
    );
}

/// The same for `PerCpuRwLock`'s downgrade.
#[test]
fn a_percpu_downgrade_whose_release_panics_leaves_nothing_held() {
    static C: LockClass = LockClass::new("percpu-downgrade-unwind");
    static L: PerCpuRwLock<u64> =
        PerCpuRwLock::from_raw(RawPerCpuRwLock::with_class(ClassRef::of(&C)), 0);
    let _s = serial();
    stats::set_long_hold_hook(1_000_000, Some(panicking_hook));
    let w = L.write();
    thread::sleep(Duration::from_millis(2));
    let r = catch_unwind(AssertUnwindSafe(|| drop(RwLockWriteGuard::downgrade(w))));
    stats::set_long_hold_hook(u64::MAX, None);
    assert!(r.is_err(), "the hook's panic comes out of the downgrade");
    assert!(
        L.try_write().is_some(),
        "the read taken by the downgrade stayed held, with no guard"
    );
}
