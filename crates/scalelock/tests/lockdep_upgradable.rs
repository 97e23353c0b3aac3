//! Lockdep and upgradable reads (`Access::Upgradable`): the holder of an
//! upgradable read may read the same lock (no writer can queue ahead of
//! that read: the upgradable reader holds the queue), but an upgrade while
//! it also reads waits for its own read, and a read before an upgradable
//! read can wait behind a writer that waits for it. Both locks that have
//! upgradable reads, `QRwLock` and `PerCpuRwLock`.
//! Run: `cargo test -p scalelock --features lockdep --test lockdep_upgradable`
#![cfg(feature = "lockdep")]

mod hook_lock;

use std::sync::Arc;

use hook_lock::on_thread;
use lock_api::RawRwLockUpgrade as RwLockUpgradeRaw;
use lock_api::{RwLock, RwLockUpgradableReadGuard};
use scalelock::lockdep;
use scalelock::{ClassRef, LockClass, QSpinLock, RawPerCpuRwLock, RawQRwLock, RawQSpinLock};

/// The upgradable-read scenarios, for any rwlock `R` with upgradable reads.
mod scenarios {
    use super::*;

    /// Reading a lock while holding its upgradable read is fine, in
    /// either order of release; an upgrade after the read is released is
    /// fine too.
    pub fn read_under_upgradable_passes<R: RwLockUpgradeRaw + Send + Sync + 'static>(
        l: Arc<RwLock<R, u32>>,
    ) {
        let r = on_thread("upgradable-then-read", move || {
            let u = l.upgradable_read();
            let r = l.read();
            assert_eq!(*r + *u, 0);
            assert_eq!(lockdep::held_count(), 2);
            drop(r);
            let mut w = RwLockUpgradableReadGuard::upgrade(u);
            *w += 1;
            assert_eq!(lockdep::held_count(), 1);
            drop(w);
            let u = l.upgradable_read();
            let r = l.read();
            drop(u);
            assert_eq!(*r, 1);
            drop(r);
            assert_eq!(lockdep::held_count(), 0);
        });
        assert_eq!(r, None, "a read under an upgradable read never waits");
    }

    /// Upgrading while this thread also reads the lock: the upgrade would
    /// wait for that read for ever. Reported before it waits.
    pub fn upgrade_while_reading_is_reported<R: RwLockUpgradeRaw + Send + Sync + 'static>(
        l: Arc<RwLock<R, u32>>,
    ) {
        let l2 = l.clone();
        let r = on_thread("upgrade-while-reading", move || {
            let u = l2.upgradable_read();
            let _r = l2.read();
            let _w = RwLockUpgradableReadGuard::upgrade(u); // waits for _r
            unreachable!("lockdep must report the upgrade");
        })
        .expect("an upgrade while reading must be reported");
        assert!(r.contains("possible recursive locking"), "{r}");
        assert!(r.contains("is taking"), "{r}");
        assert!(r.contains("(write,"), "{r}");
        assert!(
            r.contains("this thread's own read included: it would wait for itself"),
            "{r}"
        );
        // Reported before waiting: nothing stayed locked.
        assert!(l.try_write().is_some());
    }

    /// After an upgrade the hold is a write: a read of the lock is a
    /// recursion.
    pub fn read_after_upgrade_is_reported<R: RwLockUpgradeRaw + Send + Sync + 'static>(
        l: Arc<RwLock<R, u32>>,
    ) {
        let r = on_thread("read-after-upgrade", move || {
            let u = l.upgradable_read();
            let _w = RwLockUpgradableReadGuard::upgrade(u);
            let _r = l.read(); // the write is ours
            unreachable!("lockdep must report the read");
        })
        .expect("a read of an upgraded lock must be reported");
        assert!(r.contains("possible recursive locking"), "{r}");
        assert!(r.contains("the lock is not recursive"), "{r}");
    }

    /// A try-upgrade that succeeds also turns the hold into a write.
    pub fn read_after_try_upgrade_is_reported<R: RwLockUpgradeRaw + Send + Sync + 'static>(
        l: Arc<RwLock<R, u32>>,
    ) {
        let r = on_thread("read-after-try-upgrade", move || {
            let u = l.upgradable_read();
            let Ok(_w) = RwLockUpgradableReadGuard::try_upgrade(u) else {
                panic!("nobody else reads");
            };
            let _r = l.read();
            unreachable!("lockdep must report the read");
        })
        .expect("a read of an upgraded lock must be reported");
        assert!(r.contains("the lock is not recursive"), "{r}");
    }

    /// A read first, then an upgradable read of the same lock: a writer
    /// that queued in between holds the queue the upgradable read needs and
    /// waits for the read.
    pub fn upgradable_after_read_is_reported<R: RwLockUpgradeRaw + Send + Sync + 'static>(
        l: Arc<RwLock<R, u32>>,
    ) {
        let r = on_thread("upgradable-after-read", move || {
            let _r = l.read();
            let _u = l.upgradable_read();
            unreachable!("lockdep must report the upgradable read");
        })
        .expect("an upgradable read after a read must be reported");
        assert!(r.contains("(upgradable read,"), "{r}");
        assert!(
            r.contains("an upgradable read queues behind any writer"),
            "{r}"
        );
    }
}

fn qrw(class: &'static LockClass) -> Arc<RwLock<RawQRwLock, u32>> {
    Arc::new(RwLock::from_raw(
        RawQRwLock::with_class(ClassRef::of(class)),
        0,
    ))
}

fn percpu(class: &'static LockClass) -> Arc<RwLock<RawPerCpuRwLock, u32>> {
    Arc::new(RwLock::from_raw(
        RawPerCpuRwLock::with_class(ClassRef::of(class)),
        0,
    ))
}

#[test]
fn qrwlock_read_under_upgradable_passes() {
    static C: LockClass = LockClass::new("upg-qrw-pass");
    scenarios::read_under_upgradable_passes(qrw(&C));
}

#[test]
fn percpu_read_under_upgradable_passes() {
    static C: LockClass = LockClass::new("upg-percpu-pass");
    scenarios::read_under_upgradable_passes(percpu(&C));
}

#[test]
fn qrwlock_upgrade_while_reading_is_reported() {
    static C: LockClass = LockClass::new("upg-qrw-upgrade");
    scenarios::upgrade_while_reading_is_reported(qrw(&C));
}

#[test]
fn percpu_upgrade_while_reading_is_reported() {
    static C: LockClass = LockClass::new("upg-percpu-upgrade");
    scenarios::upgrade_while_reading_is_reported(percpu(&C));
}

#[test]
fn qrwlock_read_after_upgrade_is_reported() {
    static C: LockClass = LockClass::new("upg-qrw-after");
    scenarios::read_after_upgrade_is_reported(qrw(&C));
}

#[test]
fn percpu_read_after_upgrade_is_reported() {
    static C: LockClass = LockClass::new("upg-percpu-after");
    scenarios::read_after_upgrade_is_reported(percpu(&C));
}

#[test]
fn qrwlock_read_after_try_upgrade_is_reported() {
    static C: LockClass = LockClass::new("upg-qrw-try");
    scenarios::read_after_try_upgrade_is_reported(qrw(&C));
}

#[test]
fn percpu_read_after_try_upgrade_is_reported() {
    static C: LockClass = LockClass::new("upg-percpu-try");
    scenarios::read_after_try_upgrade_is_reported(percpu(&C));
}

#[test]
fn qrwlock_upgradable_after_read_is_reported() {
    static C: LockClass = LockClass::new("upg-qrw-read-first");
    scenarios::upgradable_after_read_is_reported(qrw(&C));
}

#[test]
fn percpu_upgradable_after_read_is_reported() {
    static C: LockClass = LockClass::new("upg-percpu-read-first");
    scenarios::upgradable_after_read_is_reported(percpu(&C));
}

/// Reads under this thread's own upgradable read never wait, whatever the
/// thread took in between: "upgradable A; lock B; read A" and "upgradable
/// A; read A; read A" are no report (the reads add no dependency into A).
#[test]
fn qrwlock_reads_under_the_own_upgradable_read_never_report() {
    static A: LockClass = LockClass::new("upg-own-A");
    static B: LockClass = LockClass::new("upg-own-B");
    let la = qrw(&A);
    static LB: QSpinLock<u32> = QSpinLock::from_raw(RawQSpinLock::with_class(ClassRef::of(&B)), 0);
    let a = la.clone();
    let r = on_thread("upg-own", move || {
        let u = a.upgradable_read();
        let b = LB.lock();
        let r = a.read();
        drop((r, b));
        let r1 = a.read();
        let r2 = a.read();
        assert_eq!(*r1 + *r2 + *u, 0);
    });
    assert_eq!(r, None);
}

/// The upgradable read released first, the read taken under it is held
/// alone: lockdep's stack keeps that read, not the upgradable read (a
/// release pops the entry of its own hold, not the latest of the lock). A
/// second fair read can then queue behind a writer that waits for the
/// first: reported, as without the upgradable read.
#[test]
fn qrwlock_read_kept_past_its_upgradable_read_is_still_a_read() {
    static C: LockClass = LockClass::new("upg-qrw-read-kept");
    let l = qrw(&C);
    let r = on_thread("read-kept-past-upgradable", move || {
        let u = l.upgradable_read();
        let r = l.read();
        drop(u); // the read stays
        assert_eq!(lockdep::held_count(), 1);
        let _again = l.read(); // a second fair read
        drop(r);
        unreachable!("lockdep must report the second fair read");
    })
    .expect("a second fair read must be reported");
    assert!(r.contains("a second fair read queues behind"), "{r}");
}

/// Across two classes: T1 holds an upgradable read of A and takes B; T2
/// holds B and reads A. That can deadlock: if a writer held A when T2
/// read it, T2 queued on A's queue lock, which T1's upgradable read then
/// holds until it gets B. Reported.
#[test]
fn qrwlock_read_against_an_upgradable_holder_is_a_cycle() {
    static A: LockClass = LockClass::new("upg-cycle-A");
    static B: LockClass = LockClass::new("upg-cycle-B");
    let la = qrw(&A);
    static LB: QSpinLock<u32> = QSpinLock::from_raw(RawQSpinLock::with_class(ClassRef::of(&B)), 0);

    let a = la.clone();
    let first = on_thread("upg-cycle-first", move || {
        let _u = a.upgradable_read();
        let _b = LB.lock();
    });
    assert_eq!(first, None);
    let a = la.clone();
    let second = on_thread("upg-cycle-read", move || {
        let _b = LB.lock();
        let _r = a.read(); // may queue behind T1's upgradable read
        unreachable!("lockdep must report B -> A (read) against A (upgradable) -> B");
    })
    .expect("a read against an upgradable holder that waits for us must be reported");
    assert!(
        second.contains("possible circular locking dependency"),
        "{second}"
    );
    assert!(
        second.contains(
            "\"upg-cycle-A\" (upgradable read) -> \"upg-cycle-B\" (write): first on thread 'upg-cycle-first'"
        ),
        "{second}"
    );
}

/// An upgrade waits for the lock's readers and nothing else: no other
/// thread can hold the lock exclusively while we hold its upgradable
/// read. So taking B under the upgradable read of A and then upgrading A
/// is no cycle, on one thread or against another thread's write of A
/// followed by B.
#[test]
fn qrwlock_upgrade_under_a_lock_taken_after_the_upgradable_read_is_no_cycle() {
    static A: LockClass = LockClass::new("upg-nocycle-A");
    static B: LockClass = LockClass::new("upg-nocycle-B");
    let la = qrw(&A);
    static LB: QSpinLock<u32> = QSpinLock::from_raw(RawQSpinLock::with_class(ClassRef::of(&B)), 0);

    let a = la.clone();
    let writer = on_thread("upg-nocycle-writer", move || {
        let _w = a.write();
        let _b = LB.lock();
    });
    assert_eq!(writer, None);
    let a = la.clone();
    let upgrader = on_thread("upg-nocycle-upgrader", move || {
        let u = a.upgradable_read();
        let _b = LB.lock();
        let mut w = RwLockUpgradableReadGuard::upgrade(u);
        *w += 1;
    });
    assert_eq!(upgrader, None, "an upgrade waits for readers only");
    assert_eq!(*la.read(), 1);
}

/// An upgrade waits for the lock's readers: a lock the upgrader took after
/// its upgradable read, which a reader of the lock may be waiting for,
/// closes a cycle. T2 reads A and takes B; T1 holds A's upgradable read,
/// takes B, and upgrades A: reported at the upgrade.
#[test]
fn qrwlock_upgrade_that_waits_for_a_reader_of_a_held_lock_is_reported() {
    static A: LockClass = LockClass::new("upg-wait-A");
    static B: LockClass = LockClass::new("upg-wait-B");
    let la = qrw(&A);
    static LB: QSpinLock<u32> = QSpinLock::from_raw(RawQSpinLock::with_class(ClassRef::of(&B)), 0);

    let a = la.clone();
    let reader = on_thread("upg-wait-reader", move || {
        let _r = a.read();
        let _b = LB.lock();
    });
    assert_eq!(reader, None);
    let a = la.clone();
    let upgrader = on_thread("upg-wait-upgrader", move || {
        let u = a.upgradable_read();
        let _b = LB.lock(); // fine so far: A (upgradable) -> B
        let _w = RwLockUpgradableReadGuard::upgrade(u); // waits for A's readers
        unreachable!("lockdep must report B -> A (write) against A (read) -> B");
    })
    .expect("the upgrade must be reported");
    assert!(
        upgrader.contains("possible circular locking dependency"),
        "{upgrader}"
    );
    assert!(
        upgrader.contains("\"upg-wait-A\" (read) -> \"upg-wait-B\" (write)"),
        "{upgrader}"
    );
}

/// An upgrade that lockdep reports (a read of the same lock under the
/// upgradable read) gives the upgradable read back as the report's panic
/// unwinds: with statistics, its sampled hold ends there too (it was never
/// recorded: 1 hold for 2 write-side acquisitions), for QRwLock and
/// PerCpuRwLock alike.
#[cfg(feature = "stats")]
#[test]
fn a_reported_upgrade_records_its_hold() {
    use scalelock::{PerCpuRwLock, QRwLock, RawPerCpuRwLock, RawQRwLock, stats};
    static QC: LockClass = LockClass::new("upgrade-report-hold-qrw");
    static QL: QRwLock<u32> = QRwLock::from_raw(RawQRwLock::with_class(ClassRef::of(&QC)), 0);
    static PC: LockClass = LockClass::new("upgrade-report-hold-percpu");
    static PL: PerCpuRwLock<u32> =
        PerCpuRwLock::from_raw(RawPerCpuRwLock::with_class(ClassRef::of(&PC)), 0);
    stats::enable();
    stats::set_hold_sample(1);
    let reported = std::panic::catch_unwind(|| {
        let u = QL.upgradable_read();
        let _r = QL.read();
        let _w = RwLockUpgradableReadGuard::upgrade(u);
    });
    assert!(reported.is_err(), "reported");
    let reported = std::panic::catch_unwind(|| {
        let u = PL.upgradable_read();
        let _r = PL.read();
        let _w = RwLockUpgradableReadGuard::upgrade(u);
    });
    assert!(reported.is_err(), "reported");
    assert_eq!(lockdep::held_count(), 0);
    assert!(QL.try_write().is_some());
    assert!(PL.try_write().is_some());
    for name in ["upgrade-report-hold-qrw", "upgrade-report-hold-percpu"] {
        let snap = stats::snapshot();
        let w = &snap.class(name).unwrap().write;
        // The upgradable read and the try_write above.
        assert_eq!(
            (w.acquisitions, w.hold.count),
            (2, 2),
            "{name}: the reported upgrade's hold"
        );
    }
}
