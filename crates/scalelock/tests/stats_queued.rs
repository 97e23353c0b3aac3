//! Lock statistics of the queued locks (QSpinLock, QRwLock, PerCpuRwLock),
//! with contention made deterministic: the test holds the lock and waits
//! until the statistics show every contender waiting before it releases.
//! Slow-path events land on the row of the access that waited (a reader's
//! on `read`, a writer's on `write`).
//! Run: `cargo test -p scalelock --features stats --test stats_queued`
#![cfg(feature = "stats")]

mod hook_lock;

use std::sync::Barrier;
use std::thread;
use std::time::Duration;

use hook_lock::{class_stats, stats_setup, wait_until};
use scalelock::stats::{self, WaitEvents, bucket_of};
use scalelock::{
    ClassRef, LockClass, LockKind, PerCpuRwLock, PerCpuRwLockExt, QRwLock, QRwLockReadGuard,
    QRwLockUpgradableReadGuard, QRwLockWriteGuard, QSpinLock, RawPerCpuRwLock, RawQRwLock,
    RawQSpinLock, ReaderTable, SeqLock,
};

fn contended(name: &str) -> u64 {
    stats::snapshot()
        .class(name)
        .map_or(0, |c| c.write.contended)
}

#[test]
fn qspinlock_counts_uncontended_locks_and_try_locks() {
    stats_setup();
    static C: LockClass = LockClass::new("qspin-counts");
    static L: QSpinLock<u64> = QSpinLock::from_raw(RawQSpinLock::with_class(ClassRef::of(&C)), 0);
    for _ in 0..5 {
        *L.lock() += 1;
    }
    *L.try_lock().unwrap() += 1;
    {
        let g = L.lock();
        // A failed try-lock is no acquisition.
        assert!(L.try_lock().is_none());
        drop(g);
    }
    // A fair unlock is a release like any other.
    let g = L.lock();
    scalelock::QSpinLockGuard::unlock_fair(g);
    assert_eq!(*L.lock(), 6);

    let st = class_stats("qspin-counts");
    assert_eq!(st.kind, Some(LockKind::QSpinLock));
    assert_eq!(st.write.acquisitions, 9);
    assert_eq!(st.write.contended, 0);
    assert_eq!(st.write.wait.count, 0);
    assert_eq!(st.write.hold.count, 9);
    assert_eq!(st.read.acquisitions, 0);
}

#[test]
fn qspinlock_contended_acquisitions_wait_for_the_holder() {
    stats_setup();
    const HOLD: Duration = Duration::from_millis(5);
    const WAITERS: usize = 3;
    static C: LockClass = LockClass::new("qspin-contended");
    static L: QSpinLock<u64> = QSpinLock::from_raw(RawQSpinLock::with_class(ClassRef::of(&C)), 0);
    let start = Barrier::new(WAITERS + 1);
    thread::scope(|s| {
        let g = L.lock();
        for _ in 0..WAITERS {
            s.spawn(|| {
                start.wait();
                *L.lock() += 1;
            });
        }
        start.wait();
        // Every waiter has failed the fast path (it cannot succeed while we
        // hold the lock) before we let go.
        wait_until("all waiters are contended", || {
            contended("qspin-contended") == WAITERS as u64
        });
        thread::sleep(HOLD);
        drop(g);
    });
    assert_eq!(*L.lock(), WAITERS as u64);

    let w = class_stats("qspin-contended").write;
    let hold_ns = HOLD.as_nanos() as u64;
    // Ours, the waiters', and the check above.
    assert_eq!(w.acquisitions, WAITERS as u64 + 2);
    assert_eq!(w.contended, WAITERS as u64);
    assert_eq!(w.wait.count, WAITERS as u64);
    // Every waiter waited through our sleep.
    assert_eq!(w.wait.buckets[..bucket_of(hold_ns)].iter().sum::<u64>(), 0);
    assert!(w.wait.max_ns >= hold_ns);
    assert_eq!(w.hold.count, WAITERS as u64 + 2);
    assert!(w.hold.max_ns >= hold_ns);
}

/// Timed acquisitions: one that gets the lock is counted like `lock` (an
/// uncontended one as uncontended, one that waited as contended, with its
/// wait); one that waits and times out is a timeout of its access, neither
/// an acquisition nor a contended one (so `contended <= acquisitions`).
#[test]
fn qspinlock_timed_acquisitions() {
    stats_setup();
    static C: LockClass = LockClass::new("qspin-timed");
    static L: QSpinLock<u64> = QSpinLock::from_raw(RawQSpinLock::with_class(ClassRef::of(&C)), 0);
    *L.try_lock_for(Duration::from_secs(1)).unwrap() += 1;
    thread::scope(|s| {
        let g = L.lock();
        for _ in 0..3 {
            s.spawn(|| assert!(L.try_lock_for(Duration::from_millis(2)).is_none()))
                .join()
                .unwrap();
        }
        let waiter = s.spawn(|| *L.try_lock_for(Duration::from_secs(60)).unwrap() += 1);
        wait_until("the timed waiter is contended", || {
            contended("qspin-timed") == 1
        });
        drop(g);
        waiter.join().unwrap();
    });
    let w = class_stats("qspin-timed").write;
    // The first timed lock, ours, the waiter's.
    assert_eq!(w.acquisitions, 3);
    assert_eq!(w.contended, 1, "{w:?}");
    assert_eq!(w.events.timeouts, 3, "{w:?}");
    assert_eq!(class_stats("qspin-timed").events.timeouts, 3);
    // Only the successful contended one records a wait.
    assert_eq!(w.wait.count, 1);
    assert_eq!(*L.lock(), 2);
    assert!(
        stats::snapshot().to_string().contains("timeouts 3"),
        "the table shows them"
    );
}

/// A timed read that gives up while a writer holds the lock is a read
/// timeout: the read row never shows more contended reads than reads.
#[test]
fn qrwlock_timed_read_that_gives_up_is_a_timeout() {
    stats_setup();
    static C: LockClass = LockClass::new("qrw-timed-read");
    static L: QRwLock<u64> = QRwLock::from_raw(RawQRwLock::with_class(ClassRef::of(&C)), 0);
    thread::scope(|s| {
        let g = L.write();
        s.spawn(|| assert!(L.try_read_for(Duration::from_millis(2)).is_none()))
            .join()
            .unwrap();
        drop(g);
    });
    let st = class_stats("qrw-timed-read");
    assert_eq!(st.read.acquisitions, 0);
    assert_eq!(st.read.contended, 0, "{st:?}");
    assert_eq!(st.read.events.timeouts, 1, "{st:?}");
    assert_eq!(st.write.events.timeouts, 0);
    assert!(st.read.contention() <= 1.0);
}

/// A SeqLock's writer lock is a queued spinlock: a contended write counts
/// once, under the SeqLock's class, not also as a QSpinLock acquisition.
#[test]
fn seqlock_writer_lock_is_not_counted_twice() {
    stats_setup();
    static C: LockClass = LockClass::new("qspin-nested-seq");
    static S: SeqLock<u64> = SeqLock::with_class(0, ClassRef::of(&C));
    let g = S.lock();
    thread::scope(|s| {
        s.spawn(|| S.write(2));
        wait_until("the writer is contended", || {
            contended("qspin-nested-seq") == 1
        });
        // The writer lock's slow-path events count for the SeqLock.
        wait_until("the writer waits on the word", || {
            stats::snapshot()
                .class("qspin-nested-seq")
                .is_some_and(|c| c.events.pending_path == 1)
        });
        g.publish(1);
    });
    assert_eq!(S.read(), 2);
    let st = class_stats("qspin-nested-seq");
    assert_eq!(st.kind, Some(LockKind::SeqLock));
    // Counted through both the SeqLock's hooks and the writer lock's, the
    // class would show 4 acquisitions.
    assert_eq!((st.write.acquisitions, st.write.contended), (2, 1));
}

#[test]
fn qrwlock_counts_reads_and_writes_apart() {
    stats_setup();
    static C: LockClass = LockClass::new("qrw-counts");
    static L: QRwLock<u64> = QRwLock::from_raw(RawQRwLock::with_class(ClassRef::of(&C)), 0);
    // Two reads at once, on two threads (lockdep reports a thread's second
    // fair read).
    {
        let r1 = L.read();
        thread::scope(|s| {
            s.spawn(|| assert_eq!(*L.read(), 0));
        });
        // A failed try is no acquisition.
        assert!(L.try_write().is_none());
        assert_eq!(*r1, 0);
    }
    *L.write() += 1;
    assert_eq!(*L.try_read().unwrap(), 1);
    *L.try_write().unwrap() += 1;
    // An upgradable read counts as a write; upgrading keeps that hold.
    let u = L.upgradable_read();
    let mut w = QRwLockUpgradableReadGuard::upgrade(u);
    *w += 1;
    // A downgrade ends the write hold and starts a read hold.
    let r = QRwLockWriteGuard::downgrade(w);
    assert_eq!(*r, 3);
    drop(r);
    assert!(L.try_upgradable_read().is_some());

    let st = class_stats("qrw-counts");
    assert_eq!(st.kind, Some(LockKind::QRwLock));
    // r1, r2, try_read, the downgraded read.
    assert_eq!(st.read.acquisitions, 4);
    assert_eq!(st.read.hold.count, 4);
    // write, try_write, the upgradable read, try_upgradable_read.
    assert_eq!(st.write.acquisitions, 4);
    assert_eq!(st.write.hold.count, 4);
    assert_eq!((st.read.contended, st.write.contended), (0, 0));
}

#[test]
fn an_upgradable_read_that_waits_for_a_writer_is_contended() {
    stats_setup();
    static C: LockClass = LockClass::new("qrw-upgradable-behind-writer");
    static L: QRwLock<u64> = QRwLock::from_raw(RawQRwLock::with_class(ClassRef::of(&C)), 0);
    let mut w = L.write();
    *w = 1;
    thread::scope(|s| {
        // The queue lock is free (nobody queues), so the upgradable read
        // takes it at once and then waits, parked, for the writer to leave.
        s.spawn(|| assert_eq!(*L.upgradable_read(), 1));
        wait_until("the upgradable reader sleeps behind the writer", || {
            stats::snapshot()
                .class("qrw-upgradable-behind-writer")
                .is_some_and(|c| c.write.events.parks >= 1)
        });
        std::thread::sleep(Duration::from_millis(5));
        drop(w);
    });
    let st = class_stats("qrw-upgradable-behind-writer");
    // The write and the upgradable read (a write to statistics).
    assert_eq!(st.write.acquisitions, 2);
    // It waited (and parked): a contended acquisition with its wait.
    assert_eq!(st.write.contended, 1, "{st:?}");
    assert_eq!(st.write.wait.count, 1, "{st:?}");
    assert!(st.write.wait.max_ns >= 5_000_000, "{st:?}");
}

fn read_contended(name: &str) -> u64 {
    stats::snapshot()
        .class(name)
        .map_or(0, |c| c.read.contended)
}

#[test]
fn qrwlock_contended_reads_and_writes() {
    stats_setup();
    const HOLD: Duration = Duration::from_millis(5);
    const READERS: usize = 3;
    static C: LockClass = LockClass::new("qrw-contended");
    static L: QRwLock<u64> = QRwLock::from_raw(RawQRwLock::with_class(ClassRef::of(&C)), 0);
    let start = Barrier::new(READERS + 1);
    // Readers wait for our write.
    thread::scope(|s| {
        let mut g = L.write();
        for _ in 0..READERS {
            s.spawn(|| {
                start.wait();
                assert_eq!(*L.read(), 1);
            });
        }
        start.wait();
        wait_until("all readers are contended", || {
            read_contended("qrw-contended") == READERS as u64
        });
        thread::sleep(HOLD);
        *g = 1;
    });
    // A writer waits for our read.
    thread::scope(|s| {
        let r: QRwLockReadGuard<'_, u64> = L.read();
        s.spawn(|| *L.write() += 1);
        wait_until("the writer is contended", || {
            contended("qrw-contended") == 1
        });
        thread::sleep(HOLD);
        drop(r);
    });
    assert_eq!(*L.read(), 2);

    let st = class_stats("qrw-contended");
    let hold_ns = HOLD.as_nanos() as u64;
    // The readers, our read, the check.
    assert_eq!(st.read.acquisitions, READERS as u64 + 2);
    assert_eq!(st.read.contended, READERS as u64);
    assert_eq!(st.read.wait.count, READERS as u64);
    assert_eq!(
        st.read.wait.buckets[..bucket_of(hold_ns)]
            .iter()
            .sum::<u64>(),
        0
    );
    // Our write, the writer's.
    assert_eq!(st.write.acquisitions, 2);
    assert_eq!(st.write.contended, 1);
    assert!(st.write.wait.max_ns >= hold_ns);
    assert!(st.write.hold.max_ns >= hold_ns);
}

/// One thread, one lock: the first read takes the fast path (biased mode),
/// a write revokes the bias, and reads then fast again (the Xen-style
/// default table brings the bias back at unlock).
#[test]
fn percpu_counts_fast_reads_writes_and_revocations() {
    stats_setup();
    static C: LockClass = LockClass::new("percpu-counts");
    static L: PerCpuRwLock<u64> =
        PerCpuRwLock::from_raw(RawPerCpuRwLock::with_class(ClassRef::of(&C)), 0);
    // The first read assigns the lock's id (the slow path, through the
    // underlying lock); the next ones are fast.
    assert_eq!(*L.read(), 0);
    let before = class_stats("percpu-counts");
    assert_eq!(before.kind, Some(LockKind::PerCpuRwLock));
    assert_eq!(before.read.acquisitions, 1);
    assert_eq!(before.events.fast_reads + before.events.fallback_reads, 1);
    for _ in 0..5 {
        assert_eq!(*L.read(), 0);
    }
    *L.write() += 1;
    assert_eq!(*L.try_read().unwrap(), 1);
    *L.try_write().unwrap() += 1;

    let st = class_stats("percpu-counts");
    assert_eq!(st.read.acquisitions, 7);
    assert_eq!(st.read.hold.count, 7);
    assert_eq!(st.events.fast_reads + st.events.fallback_reads, 7);
    assert!(st.events.fast_reads >= 5, "{:?}", st.events);
    assert_eq!(st.write.acquisitions, 2);
    assert_eq!(st.write.hold.count, 2);
    // The write found the bias on (fast reads happened): it revoked it.
    assert!(st.events.revocations.count >= 1, "{:?}", st.events);
    assert_eq!((st.read.contended, st.write.contended), (0, 0));
}

/// A revocation counts as heavy when it paid the `membarrier` (a biased
/// lock's) and as a plain one when it paid a full fence (a symmetric
/// lock's): one thread reads fast, then writes, on a table that keeps the
/// bias (Xen's policy) and on one forced symmetric.
#[test]
fn percpu_tells_heavy_revocations_from_symmetric_ones() {
    stats_setup();
    static BIASED: ReaderTable = ReaderTable::with_inhibition(0);
    static SYMMETRIC: ReaderTable = ReaderTable::with_inhibition(0);
    static CB: LockClass = LockClass::new("percpu-heavy-revocations");
    static CS: LockClass = LockClass::new("percpu-symmetric-revocations");
    SYMMETRIC.force_symmetric();
    let biased: PerCpuRwLock<u64> =
        PerCpuRwLock::with_table_and_class(&BIASED, ClassRef::of(&CB), 0);
    let symmetric: PerCpuRwLock<u64> =
        PerCpuRwLock::with_table_and_class(&SYMMETRIC, ClassRef::of(&CS), 0);
    for _ in 0..3 {
        for l in [&biased, &symmetric] {
            // The first read gives the lock its id; the others are fast.
            for _ in 0..4 {
                assert_eq!(*l.read(), 0);
            }
            *l.write() += 0;
        }
    }
    let b = class_stats("percpu-heavy-revocations");
    let s = class_stats("percpu-symmetric-revocations");
    // Where the process has asymmetric fences (`membarrier`), a lock gets
    // the bias with its id. On the forced-symmetric table only the first
    // revocation pays the heavy fence (it makes the lock symmetric; one
    // revocation in `pc_sym_probe` tries the bias again, not within three
    // writes of a fresh table). On the Xen-policy table the first two do
    // (the bias comes back at unlock; two dear fences in a row, as under
    // a loaded machine, may make the third symmetric). Elsewhere every
    // lock is symmetric.
    let (min_heavy, first_heavy) = if scalelock::platform::asymmetric_fences_active() {
        (2, 1)
    } else {
        (0, 0)
    };
    assert_eq!(b.events.revocations.count, 3, "{:?}", b.events);
    assert!(
        (min_heavy..=3).contains(&b.events.heavy_revocations),
        "{:?}",
        b.events
    );
    assert_eq!(s.events.revocations.count, 3, "{:?}", s.events);
    assert_eq!(s.events.heavy_revocations, first_heavy, "{:?}", s.events);
}

/// A lock on a table of its own, made through `PerCpuRwLockExt`, counts
/// in the class it was given, its table's reads and writes included.
#[test]
fn percpu_with_table_and_class_counts_in_its_class() {
    stats_setup();
    static C: LockClass = LockClass::new("percpu-own-table");
    static TABLE: ReaderTable = ReaderTable::new();
    let l: PerCpuRwLock<u64> = PerCpuRwLock::with_table_and_class(&TABLE, ClassRef::of(&C), 0);
    // SAFETY: only reads which table the raw lock uses; no lock state.
    assert!(core::ptr::eq(unsafe { l.raw() }.table(), &TABLE));
    for _ in 0..3 {
        assert_eq!(*l.read(), 0);
    }
    *l.write() += 1;
    let st = class_stats("percpu-own-table");
    assert_eq!(st.kind, Some(LockKind::PerCpuRwLock));
    assert_eq!((st.read.acquisitions, st.write.acquisitions), (3, 1));
}

/// Symmetric reads (a table forced to the symmetric mode, which a lock
/// enters at its first write) are slot reads too: counted inline as fast
/// reads and as read acquisitions with their holds, as biased ones are.
#[test]
fn percpu_symmetric_reads_count_as_fast_reads() {
    stats_setup();
    static C: LockClass = LockClass::new("percpu-symmetric-counts");
    static TABLE: ReaderTable = ReaderTable::new();
    TABLE.force_symmetric();
    let l: PerCpuRwLock<u64> = PerCpuRwLock::with_table_and_class(&TABLE, ClassRef::of(&C), 0);
    *l.write() += 1;
    // SAFETY: only formats the raw lock's state; no lock state changes.
    let raw = format!("{:?}", unsafe { l.raw() });
    assert!(raw.contains("mode: \"symmetric\""), "{raw}");
    let before = class_stats("percpu-symmetric-counts");
    assert_eq!(before.read.acquisitions, 0);
    for _ in 0..6 {
        assert_eq!(*l.read(), 1);
    }
    let st = class_stats("percpu-symmetric-counts");
    assert_eq!(st.read.acquisitions, 6);
    assert_eq!(st.read.hold.count, 6);
    assert_eq!(st.events.fast_reads + st.events.fallback_reads, 6);
    // The first read may take the slow path (the thread's first slot of
    // this table); the others read their slot.
    assert!(st.events.fast_reads >= 5, "{:?}", st.events);
    assert_eq!(st.read.contended, 0);
}

/// A writer waits for another writer (on the underlying lock): contended.
#[test]
fn percpu_contended_writer_waits_for_the_holder() {
    stats_setup();
    const HOLD: Duration = Duration::from_millis(5);
    static C: LockClass = LockClass::new("percpu-contended");
    static L: PerCpuRwLock<u64> =
        PerCpuRwLock::from_raw(RawPerCpuRwLock::with_class(ClassRef::of(&C)), 0);
    thread::scope(|s| {
        let mut g = L.write();
        s.spawn(|| *L.write() += 1);
        wait_until("the writer is contended", || {
            contended("percpu-contended") == 1
        });
        thread::sleep(HOLD);
        *g = 1;
    });
    assert_eq!(*L.read(), 2);
    let st = class_stats("percpu-contended");
    let hold_ns = HOLD.as_nanos() as u64;
    assert_eq!((st.write.acquisitions, st.write.contended), (2, 1));
    assert!(st.write.wait.max_ns >= hold_ns);
    assert!(st.write.hold.max_ns >= hold_ns);
    assert_eq!(st.read.acquisitions, 1);
}

/// A read that finds the bias off (a writer revoked it and holds the lock)
/// and its slot free waits for the writer on the underlying lock: a
/// fallback read, and contended.
#[test]
fn percpu_inhibited_read_waits_for_the_writer_contended() {
    stats_setup();
    const HOLD: Duration = Duration::from_millis(5);
    static C: LockClass = LockClass::new("percpu-inhibited-read");
    static L: PerCpuRwLock<u64> =
        PerCpuRwLock::from_raw(RawPerCpuRwLock::with_class(ClassRef::of(&C)), 0);
    // The first read gives the lock its id, so the reader below finds an
    // inhibited lock, not one to set up.
    assert_eq!(*L.read(), 0);
    let start = Barrier::new(2);
    thread::scope(|s| {
        let mut g = L.write();
        s.spawn(|| {
            start.wait();
            assert_eq!(*L.read(), 1);
        });
        start.wait();
        wait_until("the reader is contended", || {
            read_contended("percpu-inhibited-read") == 1
        });
        thread::sleep(HOLD);
        *g = 1;
    });
    let st = class_stats("percpu-inhibited-read");
    let hold_ns = HOLD.as_nanos() as u64;
    // Our first read and the reader's.
    assert_eq!(st.read.acquisitions, 2);
    assert_eq!(st.read.contended, 1);
    assert_eq!(st.read.wait.count, 1);
    assert!(st.read.wait.max_ns >= hold_ns, "{:?}", st.read.wait);
    // The reader went through the underlying lock.
    assert!(st.events.fallback_reads >= 1, "{:?}", st.events);
    assert_eq!(st.events.fast_reads + st.events.fallback_reads, 2);
    assert_eq!((st.write.acquisitions, st.write.contended), (1, 0));
}

/// A bump with nobody waiting is no release: no new acquisition is
/// counted (lock_api's default `bump` released and re-took a QSpinLock,
/// and a PerCpuRwLock's write revoked the bias again), and the guard
/// still holds the lock.
#[test]
fn bumps_with_nobody_waiting_release_nothing() {
    stats_setup();
    static QS: LockClass = LockClass::new("bump-idle-qspin");
    static Q: QSpinLock<u64> = QSpinLock::from_raw(RawQSpinLock::with_class(ClassRef::of(&QS)), 0);
    static QR: LockClass = LockClass::new("bump-idle-qrw");
    static R: QRwLock<u64> = QRwLock::from_raw(RawQRwLock::with_class(ClassRef::of(&QR)), 0);
    static PC: LockClass = LockClass::new("bump-idle-percpu");
    static P: PerCpuRwLock<u64> =
        PerCpuRwLock::from_raw(RawPerCpuRwLock::with_class(ClassRef::of(&PC)), 0);

    let mut g = Q.lock();
    for _ in 0..3 {
        scalelock::QSpinLockGuard::bump(&mut g);
        assert!(Q.try_lock().is_none(), "the bumped guard holds nothing");
    }
    drop(g);
    let st = class_stats("bump-idle-qspin");
    assert_eq!(
        (st.write.acquisitions, st.write.hold.count),
        (1, 1),
        "{st:?}"
    );

    {
        let mut r = R.read();
        QRwLockReadGuard::bump(&mut r);
        drop(r);
        let mut w = R.write();
        QRwLockWriteGuard::bump(&mut w);
        drop(w);
        let mut u = R.upgradable_read();
        QRwLockUpgradableReadGuard::bump(&mut u);
    }
    // The upgradable read counts on the write row.
    let st = class_stats("bump-idle-qrw");
    assert_eq!(
        (st.read.acquisitions, st.write.acquisitions),
        (1, 2),
        "{st:?}"
    );

    // A few reads first: the bias is on, the read below is a fast one.
    for _ in 0..4 {
        drop(P.read());
    }
    let before = class_stats("bump-idle-percpu");
    {
        let mut r = P.read();
        lock_api::RwLockReadGuard::bump(&mut r);
        assert!(P.try_write().is_none(), "the bumped read holds nothing");
        drop(r);
        let mut w = P.write();
        for _ in 0..3 {
            lock_api::RwLockWriteGuard::bump(&mut w);
            assert!(P.try_read().is_none(), "the bumped write holds nothing");
        }
        drop(w);
        let mut u = P.upgradable_read();
        lock_api::RwLockUpgradableReadGuard::bump(&mut u);
        assert!(
            P.try_write().is_none(),
            "the bumped upgradable holds nothing"
        );
    }
    let st = class_stats("bump-idle-percpu");
    assert_eq!(
        (st.read.acquisitions, st.write.acquisitions),
        (before.read.acquisitions + 1, before.write.acquisitions + 2),
        "{st:?}"
    );
    assert_eq!(
        st.events.revocations.count,
        before.events.revocations.count + 1,
        "one write, one revocation: {:?}",
        st.events
    );
}

/// A bump with a thread waiting hands the lock over: a QSpinLock's word
/// waiter gets it reserved (a hand-off) and is done by the time the bump
/// has re-taken it; a PerCpuRwLock's write lets a queued reader in.
#[test]
fn bumps_with_a_waiter_hand_the_lock_over() {
    stats_setup();
    static QS: LockClass = LockClass::new("bump-busy-qspin");
    static Q: QSpinLock<u64> = QSpinLock::from_raw(RawQSpinLock::with_class(ClassRef::of(&QS)), 0);
    thread::scope(|s| {
        let mut g = Q.lock();
        s.spawn(|| *Q.lock() += 1);
        wait_until("the waiter is the word waiter", || {
            events("bump-busy-qspin").pending_path == 1
        });
        scalelock::QSpinLockGuard::bump(&mut g);
        assert_eq!(*g, 1, "the waiter had the lock during the bump");
    });
    let e = class_stats("bump-busy-qspin").events;
    assert_eq!(e.handoffs, 1, "{e:?}");

    static PC: LockClass = LockClass::new("bump-busy-percpu");
    static P: PerCpuRwLock<u64> =
        PerCpuRwLock::from_raw(RawPerCpuRwLock::with_class(ClassRef::of(&PC)), 0);
    assert_eq!(*P.read(), 0);
    let seen = std::sync::atomic::AtomicU64::new(u64::MAX);
    thread::scope(|s| {
        let mut w = P.write();
        *w = 1;
        s.spawn(|| seen.store(*P.read(), std::sync::atomic::Ordering::SeqCst));
        wait_until("the reader is contended", || {
            read_contended("bump-busy-percpu") == 1
        });
        lock_api::RwLockWriteGuard::bump(&mut w);
        *w = 2;
    });
    assert_eq!(seen.into_inner(), 1, "the reader got in during the bump");
}

fn events(name: &str) -> stats::Events {
    stats::snapshot()
        .class(name)
        .map(|c| c.events.clone())
        .unwrap_or_default()
}

/// Waits on its barrier when dropped, also while a failed check unwinds.
struct WaitOnDrop<'a>(&'a Barrier);

impl Drop for WaitOnDrop<'_> {
    fn drop(&mut self) {
        self.0.wait();
    }
}

/// The slow-path events of class `name`'s reads and writes.
fn row_events(name: &str) -> (WaitEvents, WaitEvents) {
    stats::snapshot()
        .class(name)
        .map(|c| (c.read.events.clone(), c.write.events.clone()))
        .unwrap_or_default()
}

/// The class totals are the sums of the rows (the larger queue maximum).
fn assert_totals(st: &stats::ClassStats) {
    let (r, w, e) = (&st.read.events, &st.write.events, &st.events);
    assert_eq!(e.pending_path, r.pending_path + w.pending_path, "{st:?}");
    assert_eq!(e.batch_ends, r.batch_ends + w.batch_ends, "{st:?}");
    assert_eq!(e.handoffs, r.handoffs + w.handoffs, "{st:?}");
    assert_eq!(e.parks, r.parks + w.parks, "{st:?}");
    assert_eq!(e.wakes, r.wakes + w.wakes, "{st:?}");
    assert_eq!(e.spurious_wakes, r.spurious_wakes + w.spurious_wakes);
    assert_eq!(e.timeouts, r.timeouts + w.timeouts);
    assert_eq!(
        e.queue_depth_max,
        r.queue_depth_max.max(w.queue_depth_max),
        "{st:?}"
    );
}

/// The tail of a queued spinlock's word (0: no queue).
fn qspin_tail(l: &QSpinLock<u64>) -> u16 {
    // SAFETY: only reads the raw lock's state word.
    unsafe { l.raw() }.state().2
}

/// The slow-path events of a QSpinLock, step by step: the first waiter
/// takes the pending path, ends our batch and parks on the word; two more
/// queue (the second behind the first) and park on their nodes; our
/// release hands the lock to the word waiter, whose successor then sees a
/// queue two deep.
#[test]
fn qspinlock_slow_path_events() {
    stats_setup();
    static C: LockClass = LockClass::new("qspin-events");
    static L: QSpinLock<u64> = QSpinLock::from_raw(RawQSpinLock::with_class(ClassRef::of(&C)), 0);
    thread::scope(|s| {
        let g = L.lock();
        s.spawn(|| *L.lock() += 1);
        wait_until("the first waiter is the word waiter", || {
            events("qspin-events").pending_path == 1
        });
        s.spawn(|| *L.lock() += 1);
        wait_until("the second waiter is queued", || qspin_tail(&L) != 0);
        let second = qspin_tail(&L);
        s.spawn(|| *L.lock() += 1);
        wait_until("the third waiter is queued", || {
            let tail = qspin_tail(&L);
            tail != 0 && tail != second
        });
        // The word waiter claims the lock once the batch is over; it and
        // both queued waiters then sleep, as we keep holding.
        wait_until("the batch is over and all three waiters sleep", || {
            let e = events("qspin-events");
            e.batch_ends >= 1 && e.parks >= 3
        });
        drop(g);
    });
    assert_eq!(*L.lock(), 3);

    let e = class_stats("qspin-events").events;
    // Only the first waiter found neither word waiter nor queue.
    assert_eq!(e.pending_path, 1, "{e:?}");
    // The second waiter, made word waiter, saw itself and the third.
    assert_eq!(e.queue_depth_max, 2, "{e:?}");
    // Our release reserved the lock for the claiming word waiter.
    assert!(e.handoffs >= 1, "{e:?}");
    assert!(e.batch_ends >= 1, "{e:?}");
    // Every sleep ended (with a wake, spurious or not).
    assert_eq!(e.wakes + e.spurious_wakes, e.parks, "{e:?}");
    // A QSpinLock is all writes: every event is on the write row.
    let st = class_stats("qspin-events");
    assert_eq!(st.read.events, WaitEvents::default(), "{st:?}");
    assert_eq!(st.write.events.parks, e.parks, "{st:?}");
    assert_eq!(st.write.events.queue_depth_max, 2, "{st:?}");
    assert_totals(&st);
}

/// A fair unlock reserves the lock for the word waiter: a hand-off, batch
/// or not.
#[test]
fn qspinlock_fair_unlock_hands_off() {
    stats_setup();
    static C: LockClass = LockClass::new("qspin-fair");
    static L: QSpinLock<u64> = QSpinLock::from_raw(RawQSpinLock::with_class(ClassRef::of(&C)), 0);
    thread::scope(|s| {
        let g = L.lock();
        s.spawn(|| *L.lock() += 1);
        wait_until("the waiter is the word waiter", || {
            events("qspin-fair").pending_path == 1
        });
        scalelock::QSpinLockGuard::unlock_fair(g);
    });
    assert_eq!(*L.lock(), 1);
    let e = class_stats("qspin-fair").events;
    assert_eq!((e.pending_path, e.handoffs), (1, 1), "{e:?}");
    assert_eq!(e.queue_depth_max, 0, "{e:?}");
}

/// QRwLock: a reader behind our write waits out the batch (ends it), then
/// sleeps on the word until we unlock; a second writer behind the first
/// waits on the queue lock, whose events count for the QRwLock's class.
#[test]
fn qrwlock_slow_path_events() {
    stats_setup();
    static C: LockClass = LockClass::new("qrw-events");
    static L: QRwLock<u64> = QRwLock::from_raw(RawQRwLock::with_class(ClassRef::of(&C)), 0);
    thread::scope(|s| {
        let mut g = L.write();
        s.spawn(|| assert!(*L.read() >= 1));
        wait_until("the reader ended the batch and sleeps", || {
            let e = events("qrw-events");
            e.batch_ends == 1 && e.parks == 1
        });
        // The reader holds the queue lock while it waits: a writer now
        // becomes its word waiter.
        s.spawn(|| *L.write() += 1);
        wait_until("the writer waits on the queue lock", || {
            events("qrw-events").pending_path == 1
        });
        *g = 1;
    });
    assert_eq!(*L.read(), 2);
    let st = class_stats("qrw-events");
    let e = &st.events;
    assert_eq!(e.pending_path, 1, "{e:?}");
    assert!(e.batch_ends >= 1, "{e:?}");
    assert!(e.parks >= 1, "{e:?}");
    assert_eq!(e.wakes + e.spurious_wakes, e.parks, "{e:?}");
    // The reader's batch end and sleep are reads; the writer's wait on the
    // queue lock is a write.
    let (r, w) = (&st.read.events, &st.write.events);
    assert!(r.batch_ends >= 1 && r.parks >= 1, "{st:?}");
    assert_eq!(r.pending_path, 0, "{st:?}");
    assert_eq!(w.pending_path, 1, "{st:?}");
    assert_totals(&st);
}

/// QRwLock: a writer waiting behind readers counts its batch end and its
/// sleep on the write row; a reader arriving behind the waiting writer
/// queues on the queue lock (pending path, batch end, sleep, and the
/// hand-off of the queue lock when the writer is done) on the read row.
#[test]
fn qrwlock_events_land_on_the_waiting_access_row() {
    stats_setup();
    const NAME: &str = "qrw-rows";
    static C: LockClass = LockClass::new(NAME);
    static L: QRwLock<u64> = QRwLock::from_raw(RawQRwLock::with_class(ClassRef::of(&C)), 0);
    let held = Barrier::new(2);
    let release = Barrier::new(2);
    thread::scope(|s| {
        // Two readers hold the lock: we and a thread. Both let go at the
        // end of this scope, also when a check below fails (the scope then
        // joins the threads before it panics).
        let r = L.read();
        s.spawn(|| {
            let r = L.read();
            held.wait();
            release.wait();
            drop(r);
        });
        held.wait();
        let _release = WaitOnDrop(&release);
        s.spawn(|| *L.write() += 1);
        wait_until("the writer ended the batch and sleeps", || {
            let (_, w) = row_events(NAME);
            w.batch_ends == 1 && w.parks >= 1
        });
        // Only the writer waits so far, and its events are writes.
        assert_eq!(row_events(NAME).0, WaitEvents::default());
        // The writer set W_WAITING: a new reader queues behind it, on the
        // queue lock the writer holds.
        s.spawn(|| assert_eq!(*L.read(), 1));
        wait_until("the reader waits on the queue lock and sleeps", || {
            let (r, _) = row_events(NAME);
            r.pending_path == 1 && r.batch_ends >= 1 && r.parks >= 1
        });
        drop(r);
    });
    assert_eq!(*L.read(), 1);

    let st = class_stats(NAME);
    let (r, w) = (&st.read.events, &st.write.events);
    // The writer: one batch end, its sleeps on the count word, no queue.
    assert_eq!(w.batch_ends, 1, "{st:?}");
    assert!(w.parks >= 1, "{st:?}");
    assert_eq!(w.wakes + w.spurious_wakes, w.parks, "{st:?}");
    assert_eq!((w.pending_path, w.handoffs), (0, 0), "{st:?}");
    // The reader: the pending path of the queue lock, whose release by the
    // writer was reserved for it.
    assert_eq!(r.pending_path, 1, "{st:?}");
    assert!(r.batch_ends >= 1 && r.parks >= 1, "{st:?}");
    assert_eq!(r.wakes + r.spurious_wakes, r.parks, "{st:?}");
    assert_eq!(r.handoffs, 1, "{st:?}");
    // Contended: the writer and the late reader.
    assert_eq!((st.write.contended, st.read.contended), (1, 1), "{st:?}");
    assert_totals(&st);
}

/// PerCpuRwLock: a writer revoking the bias parks on the slot of our fast
/// read until we release it.
#[test]
fn percpu_writer_parks_on_a_fast_read() {
    stats_setup();
    static C: LockClass = LockClass::new("percpu-events");
    static L: PerCpuRwLock<u64> =
        PerCpuRwLock::from_raw(RawPerCpuRwLock::with_class(ClassRef::of(&C)), 0);
    // The first read assigns the lock's id; the next one is fast.
    assert_eq!(*L.read(), 0);
    let fast = events("percpu-events").fast_reads;
    thread::scope(|s| {
        let r = L.read();
        assert_eq!(events("percpu-events").fast_reads, fast + 1);
        s.spawn(|| *L.write() += 1);
        wait_until("the writer sleeps on our slot", || {
            events("percpu-events").parks >= 1
        });
        drop(r);
    });
    assert_eq!(*L.read(), 1);
    let st = class_stats("percpu-events");
    let e = &st.events;
    assert!(e.parks >= 1, "{e:?}");
    assert_eq!(e.wakes + e.spurious_wakes, e.parks, "{e:?}");
    // The writer did not wait for the underlying lock.
    assert_eq!(st.write.contended, 0);
    // Its slot waits are writes.
    assert_eq!(st.write.events.parks, e.parks, "{st:?}");
    assert_eq!(st.read.events, WaitEvents::default(), "{st:?}");
    assert_totals(&st);
}

/// A timed PerCpuRwLock write that takes the underlying lock at once and
/// then times out waiting for a fast reader waited its whole timeout: a
/// timeout, like any timed acquisition that waited and gave up (it was
/// counted nowhere).
#[test]
fn a_timed_percpu_write_that_timed_out_on_readers_counts_a_timeout() {
    static C: LockClass = LockClass::new("percpu-timed-write-readers");
    static L: PerCpuRwLock<u64> =
        PerCpuRwLock::from_raw(RawPerCpuRwLock::with_class(ClassRef::of(&C)), 0);
    stats::enable();
    let reader = hook_lock::FastReader::hold(&L);
    let t = std::time::Instant::now();
    assert!(L.try_write_for(Duration::from_millis(30)).is_none());
    assert!(t.elapsed() >= Duration::from_millis(30), "it waited");
    reader.release();

    let c = stats::snapshot()
        .class("percpu-timed-write-readers")
        .cloned()
        .unwrap();
    assert_eq!(c.write.acquisitions, 0);
    assert_eq!(c.write.events.timeouts, 1, "{:?}", c.write);
}

/// A PerCpuRwLock downgrade's read (through the underlying lock) counts as
/// a fallback read, as every read counts as a fast or a fallback one (it
/// counted as a read acquisition only).
#[test]
fn a_percpu_downgrade_read_counts_its_path() {
    use lock_api::RwLockWriteGuard;
    static C: LockClass = LockClass::new("percpu-downgrade-path");
    static L: PerCpuRwLock<u32> =
        PerCpuRwLock::from_raw(RawPerCpuRwLock::with_class(ClassRef::of(&C)), 0);
    stats_setup();
    drop(RwLockWriteGuard::downgrade(L.write()));
    let c = class_stats("percpu-downgrade-path");
    assert_eq!(c.read.acquisitions, 1);
    assert_eq!(
        (c.events.fast_reads, c.events.fallback_reads),
        (0, 1),
        "the downgrade's read took no path"
    );
}
