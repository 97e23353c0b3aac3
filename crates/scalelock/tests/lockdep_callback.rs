//! Lockdep with a report handler instead of the panic: the report's
//! fields, each cycle reported once, and the acquisition goes ahead. Also
//! switching lockdep off. (One test: the handler and the switch are global.)
//! Run: `cargo test -p scalelock --features lockdep --test lockdep_callback`
#![cfg(feature = "lockdep")]

use std::sync::Mutex;

use scalelock::lockdep::{self, Report, ReportKind};
use scalelock::{Access, ClassRef, LockClass, LockKind, SeqLock};

static REPORTS: Mutex<Vec<Report>> = Mutex::new(Vec::new());

fn record(r: &Report) {
    REPORTS.lock().unwrap().push(r.clone());
}

#[test]
fn handler_gets_structured_reports() {
    lockdep::set_report_handler(Some(record));
    static A: LockClass = LockClass::new("cb-A");
    static B: LockClass = LockClass::new("cb-B");
    static LA: SeqLock<u8> = SeqLock::with_class(0, ClassRef::of(&A));
    static LB: SeqLock<u8> = SeqLock::with_class(0, ClassRef::of(&B));
    std::thread::Builder::new()
        .name("ab".into())
        .spawn(|| {
            let _a = LA.lock();
            let _b = LB.lock();
        })
        .unwrap()
        .join()
        .unwrap();
    for _ in 0..3 {
        let _b = LB.lock();
        let _a = LA.lock(); // reported the first time, then taken anyway
    }
    let reports = std::mem::take(&mut *REPORTS.lock().unwrap());
    assert_eq!(reports.len(), 1, "{reports:?}");
    let r = &reports[0];
    assert_eq!(r.kind, ReportKind::Cycle);
    assert_eq!(r.thread, "handler_gets_structured_reports");
    assert_eq!(r.acquiring.class, "cb-A");
    assert_eq!(r.acquiring.kind, LockKind::SeqLock);
    assert_eq!(r.acquiring.access, Access::Write);
    assert_eq!(r.acquiring.instance, &LA as *const _ as usize);
    assert_eq!(r.held.len(), 1);
    assert_eq!(r.held[r.conflict].class, "cb-B");
    assert_eq!(r.existing.len(), 1);
    let d = &r.existing[0];
    assert_eq!((d.from.as_str(), d.to.as_str()), ("cb-A", "cb-B"));
    assert_eq!(d.thread, "ab");
    assert_eq!(d.holding, ["cb-A"]);
    assert!(r.to_string().contains("chain 2 (recorded earlier):"));

    // A try-lock of a held lock fails instead of waiting: not reported.
    {
        let _a = LA.lock();
        assert!(LA.try_lock().is_none());
    }
    assert!(REPORTS.lock().unwrap().is_empty());

    // Switched off, nothing is checked or recorded.
    lockdep::set_enabled(false);
    static C: LockClass = LockClass::new("cb-C");
    static D: LockClass = LockClass::new("cb-D");
    static LC: SeqLock<u8> = SeqLock::with_class(0, ClassRef::of(&C));
    static LD: SeqLock<u8> = SeqLock::with_class(0, ClassRef::of(&D));
    {
        let _c = LC.lock();
        let _d = LD.lock();
        assert_eq!(lockdep::held_count(), 0);
    }
    lockdep::set_enabled(true);
    {
        let _d = LD.lock();
        let _c = LC.lock(); // C -> D was never recorded
        assert_eq!(lockdep::held_count(), 2);
    }
    assert!(REPORTS.lock().unwrap().is_empty());
    lockdep::set_report_handler(None);

    an_upgrade_whose_report_handler_panics_leaves_nothing_held();
}

fn panicking_handler(r: &Report) {
    panic!("lockdep report: {r}");
}

/// A report handler that panics (a test's `assert!` in it) during an
/// upgrade: the upgradable read is given back and its entry leaves the
/// held stack, as without a handler (the read stayed held for ever).
fn an_upgrade_whose_report_handler_panics_leaves_nothing_held() {
    use scalelock::{QRwLock, QRwLockUpgradableReadGuard, RawQRwLock};
    static C: LockClass = LockClass::new("cb-upgrade-handler-panic");
    static L: QRwLock<u32> = QRwLock::from_raw(RawQRwLock::with_class(ClassRef::of(&C)), 0);
    lockdep::set_report_handler(Some(panicking_handler));
    let r = std::panic::catch_unwind(|| {
        let u = L.upgradable_read();
        let _r = L.read();
        // Upgrading while we read: reported (recursion); the handler panics.
        let _w = QRwLockUpgradableReadGuard::upgrade(u);
    });
    lockdep::set_report_handler(None);
    assert!(r.is_err(), "the handler's panic comes out");
    assert_eq!(lockdep::held_count(), 0, "a stale entry on the held stack");
    assert!(L.try_write().is_some(), "the upgradable read stayed held");
}
