//! Lockdep and `bump`: a bump re-acquires the bumped lock whenever somebody
//! waits, so bumping A while holding B (taken after A) is the B -> A order
//! that deadlocks against A -> B (the waiter gets A, then wants B). Lockdep
//! reports it from a run that never raced, as it does for the relock of any
//! bump: the report must not depend on whether a thread happened to wait
//! at the moment of the bump.
//! Run: `cargo test -p scalelock --features lockdep --test lockdep_bump`
#![cfg(feature = "lockdep")]

use std::sync::Mutex;

use scalelock::lockdep::{self, Report};
use scalelock::{
    ClassRef, LockClass, PerCpuRwLock, QRwLock, QSpinLock, RawPerCpuRwLock, RawQRwLock,
    RawQSpinLock,
};

static REPORTS: Mutex<Vec<String>> = Mutex::new(Vec::new());

fn record(r: &Report) {
    REPORTS.lock().unwrap().push(format!("{r}"));
}

fn reports() -> usize {
    REPORTS.lock().unwrap().len()
}

/// One test: the report handler is process-wide.
#[test]
fn an_idle_bump_under_a_later_lock_is_reported() {
    lockdep::set_report_handler(Some(record));

    // QSpinLock: A, then B, then bump A (nobody waits).
    static QA: LockClass = LockClass::new("bump-order-qs-A");
    static QB: LockClass = LockClass::new("bump-order-qs-B");
    static A: QSpinLock<u32> = QSpinLock::from_raw(RawQSpinLock::with_class(ClassRef::of(&QA)), 0);
    static B: QSpinLock<u32> = QSpinLock::from_raw(RawQSpinLock::with_class(ClassRef::of(&QB)), 0);
    let before = reports();
    {
        let mut a = A.lock();
        let _b = B.lock();
        scalelock::QSpinLockGuard::bump(&mut a);
    }
    let qspin = reports() - before;

    // PerCpuRwLock write: the same.
    static PA: LockClass = LockClass::new("bump-order-pc-A");
    static PB: LockClass = LockClass::new("bump-order-pc-B");
    static WA: PerCpuRwLock<u32> =
        PerCpuRwLock::from_raw(RawPerCpuRwLock::with_class(ClassRef::of(&PA)), 0);
    static WB: QSpinLock<u32> = QSpinLock::from_raw(RawQSpinLock::with_class(ClassRef::of(&PB)), 0);
    let before = reports();
    {
        let mut a = WA.write();
        let _b = WB.lock();
        lock_api::RwLockWriteGuard::bump(&mut a);
    }
    let percpu = reports() - before;

    // QRwLock write (its bumps skipped the relock when idle already).
    static RA: LockClass = LockClass::new("bump-order-qrw-A");
    static RB: LockClass = LockClass::new("bump-order-qrw-B");
    static XA: QRwLock<u32> = QRwLock::from_raw(RawQRwLock::with_class(ClassRef::of(&RA)), 0);
    static XB: QSpinLock<u32> = QSpinLock::from_raw(RawQSpinLock::with_class(ClassRef::of(&RB)), 0);
    let before = reports();
    {
        let mut a = XA.write();
        let _b = XB.lock();
        lock_api::RwLockWriteGuard::bump(&mut a);
    }
    let qrw = reports() - before;

    lockdep::set_report_handler(None);
    assert_eq!(
        (qspin, percpu, qrw),
        (1, 1, 1),
        "the B -> A order of each bump's relock is reported: {:#?}",
        REPORTS.lock().unwrap()
    );
}
