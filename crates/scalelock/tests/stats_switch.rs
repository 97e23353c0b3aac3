//! Lock statistics switched off and on, reset, and the long-hold hook.
//! One test: the switch, the epoch and the hook are process-wide.
//! Run: `cargo test -p scalelock --features stats --test stats_switch`
#![cfg(feature = "stats")]

mod hook_lock;

use std::sync::Mutex;
use std::time::Duration;

use scalelock::stats::{self, LongHold};
use scalelock::{ClassRef, LockClass, LockKind, QRwLock, RawQRwLock, SeqLock};

static LONG: Mutex<Vec<LongHold>> = Mutex::new(Vec::new());

fn on_long_hold(h: &LongHold) {
    LONG.lock().unwrap().push(h.clone());
}

fn writes(name: &str) -> u64 {
    stats::snapshot()
        .class(name)
        .map_or(0, |c| c.write.acquisitions)
}

#[test]
fn switch_reset_and_long_holds() {
    static C: LockClass = LockClass::new("switch");
    static S: SeqLock<u64> = SeqLock::with_class(0, ClassRef::of(&C));

    // Off by default: nothing is counted.
    assert!(!stats::is_enabled());
    S.write(1);
    assert_eq!(writes("switch"), 0);
    assert!(!stats::snapshot().enabled);

    stats::enable();
    S.write(2);
    S.write(3);
    assert_eq!(writes("switch"), 2);

    // Off again: counts stay, nothing new is added.
    stats::disable();
    S.write(4);
    assert_eq!(writes("switch"), 2);

    // Reset: everything reads zero, the class disappears until it counts.
    stats::reset();
    assert!(stats::snapshot().class("switch").is_none());
    stats::enable();
    S.write(5);
    assert_eq!(writes("switch"), 1);

    // Sampling: 1 in 4 holds timed, per thread.
    stats::reset();
    stats::set_hold_sample(4);
    assert_eq!(stats::hold_sample(), 4);
    for i in 0..40 {
        S.write(i);
    }
    let w = stats::snapshot().class("switch").unwrap().write.clone();
    assert_eq!(w.acquisitions, 40);
    assert_eq!(w.hold.count, 10);
    assert_eq!(stats::snapshot().hold_sample, 4);

    // A new rate reaches another thread at its next sampled hold: the
    // thread's first write is sampled (its countdown refills to 4), the rate
    // drops to 1, and the thread finishes its countdown of 4 (3 unsampled
    // writes, the 4th sampled) before sampling every write (the 5th).
    stats::reset();
    let (ready_tx, ready_rx) = std::sync::mpsc::channel();
    let (go_tx, go_rx) = std::sync::mpsc::channel();
    let t = std::thread::spawn(move || {
        S.write(100);
        ready_tx.send(()).unwrap();
        go_rx.recv().unwrap();
        for i in 0..5 {
            S.write(101 + i);
        }
    });
    ready_rx.recv().unwrap();
    stats::set_hold_sample(1);
    go_tx.send(()).unwrap();
    t.join().unwrap();
    let w = stats::snapshot().class("switch").unwrap().write.clone();
    assert_eq!(w.acquisitions, 6);
    assert_eq!(
        w.hold.count, 3,
        "sampled holds: the first, the 4th after the rate change, the 5th"
    );

    // On the thread that sets it, the rate applies at once.
    stats::reset();
    stats::set_hold_sample(3);
    for i in 0..7 {
        S.write(i);
    }
    let w = stats::snapshot().class("switch").unwrap().write.clone();
    assert_eq!((w.acquisitions, w.hold.count), (7, 3));

    // Long holds: at or above the threshold, counted and handed to the
    // hook after the release.
    stats::reset();
    stats::set_hold_sample(1);
    stats::set_long_hold_hook(1_000_000, Some(on_long_hold));
    S.write(7);
    {
        let g = S.lock();
        std::thread::sleep(Duration::from_millis(3));
        g.publish(8);
    }
    let long = std::mem::take(&mut *LONG.lock().unwrap());
    assert_eq!(long.len(), 1, "{long:?}");
    assert_eq!(long[0].class, "switch");
    assert_eq!(long[0].kind, LockKind::SeqLock);
    assert!(!long[0].read);
    assert!(long[0].hold_ns >= 3_000_000);
    assert!(
        long[0]
            .to_string()
            .starts_with("long hold: switch (SeqLock")
    );
    let s = stats::snapshot();
    assert_eq!(s.class("switch").unwrap().events.long_holds, 1);

    // The hook removed, long holds are still counted.
    stats::set_long_hold_hook(1_000_000, None);
    {
        let _g = S.lock();
        std::thread::sleep(Duration::from_millis(2));
    }
    assert!(LONG.lock().unwrap().is_empty());
    assert_eq!(
        stats::snapshot().class("switch").unwrap().events.long_holds,
        2
    );

    // Counted per access: a long read hold under `read`, a long write hold
    // under `write`, and both in the class's total.
    static RW: LockClass = LockClass::new("switch-rw");
    let rw = QRwLock::from_raw(RawQRwLock::with_class(ClassRef::of(&RW)), 0u64);
    {
        let _r = rw.read();
        std::thread::sleep(Duration::from_millis(2));
    }
    for _ in 0..2 {
        let _w = rw.write();
        std::thread::sleep(Duration::from_millis(2));
    }
    let c = stats::snapshot().class("switch-rw").unwrap().clone();
    assert_eq!((c.read.long_holds, c.write.long_holds), (1, 2));
    assert_eq!(c.events.long_holds, 3);
    let table = stats::snapshot().to_string();
    assert!(table.contains("  read events: long-holds 1"), "{table}");
    assert!(table.contains("  write events: long-holds 2"), "{table}");
    stats::set_long_hold_hook(u64::MAX, None);

    // The snapshot round-trips through serde (here JSON).
    let snap = stats::snapshot();
    let json = serde_json::to_string(&snap).unwrap();
    assert!(json.contains("\"name\":\"switch\""), "{json}");
    let back: stats::Snapshot = serde_json::from_str(&json).unwrap();
    assert_eq!(back, snap);

    waits_begun_switched_off_count_no_events();
    a_revocation_begun_switched_off_records_no_cost();
}

/// Statistics switched on while `waiter` waits for a lock held here (taken
/// switched off; `release` lets it go): the wait, begun switched off, counts
/// no events (its parks and wakes were counted, for an acquisition never
/// counted, by QRwLock's upgradable and timed paths and, with lockdep on,
/// by every lock's recorded path).
fn wait_begun_switched_off_counts_no_events(
    name: &str,
    waiter: impl FnOnce() + Send + 'static,
    release: impl FnOnce(),
) {
    let t = std::thread::spawn(waiter);
    // The waiter spins, then parks.
    std::thread::sleep(Duration::from_millis(200));
    stats::enable();
    release();
    t.join().unwrap();
    let snap = stats::snapshot();
    if let Some(c) = snap.class(name) {
        for (acc, a) in [("read", &c.read), ("write", &c.write)] {
            let e = &a.events;
            assert_eq!(
                (a.acquisitions, e.parks, e.wakes, e.spurious_wakes),
                (0, 0, 0, 0),
                "{name} {acc}: events of an acquisition begun switched off: {a:?}"
            );
        }
    }
}

fn waits_begun_switched_off_count_no_events() {
    use scalelock::{PerCpuRwLock, QSpinLock, RawPerCpuRwLock, RawQSpinLock};
    static UP: LockClass = LockClass::new("switch-upgradable-begun-off");
    static UL: QRwLock<u32> = QRwLock::from_raw(RawQRwLock::with_class(ClassRef::of(&UP)), 0);
    stats::disable();
    let w = UL.write();
    wait_begun_switched_off_counts_no_events(
        "switch-upgradable-begun-off",
        || drop(UL.upgradable_read()),
        || drop(w),
    );
    static QS: LockClass = LockClass::new("switch-qspinlock-begun-off");
    static QL: QSpinLock<u32> = QSpinLock::from_raw(RawQSpinLock::with_class(ClassRef::of(&QS)), 0);
    stats::disable();
    let g = QL.lock();
    wait_begun_switched_off_counts_no_events(
        "switch-qspinlock-begun-off",
        || drop(QL.lock()),
        || drop(g),
    );
    static QW: LockClass = LockClass::new("switch-qrwlock-begun-off");
    static WL: QRwLock<u32> = QRwLock::from_raw(RawQRwLock::with_class(ClassRef::of(&QW)), 0);
    stats::disable();
    let g = WL.write();
    wait_begun_switched_off_counts_no_events(
        "switch-qrwlock-begun-off",
        || drop(WL.write()),
        || drop(g),
    );
    static PW: LockClass = LockClass::new("switch-percpu-write-begun-off");
    static PL: PerCpuRwLock<u32> =
        PerCpuRwLock::from_raw(RawPerCpuRwLock::with_class(ClassRef::of(&PW)), 0);
    stats::disable();
    let g = PL.write();
    wait_begun_switched_off_counts_no_events(
        "switch-percpu-write-begun-off",
        || drop(PL.write()),
        || drop(g),
    );
}

/// A PerCpuRwLock revocation that began switched off (no clock read) and
/// ended switched on: no cost recorded (it recorded the statistics clock's
/// whole age as its cost).
fn a_revocation_begun_switched_off_records_no_cost() {
    use scalelock::{PerCpuRwLock, RawPerCpuRwLock, hook};
    use std::thread;
    static C: LockClass = LockClass::new("switch-revocation-begun-off");
    static L: PerCpuRwLock<u64> =
        PerCpuRwLock::from_raw(RawPerCpuRwLock::with_class(ClassRef::of(&C)), 0);
    // Start the statistics clock, let it run, switch statistics off.
    stats::enable();
    assert_ne!(hook::clock_ns(), 0);
    thread::sleep(Duration::from_millis(500));
    stats::disable();

    // A reader holds a fast read; a writer revokes and waits for it.
    let reader = hook_lock::FastReader::hold(&L);
    let writer = thread::spawn(|| *L.write() += 1);
    while !L.is_locked_exclusive() {
        thread::yield_now();
    }
    // The writer is past its revocation's start, waiting for the slot.
    thread::sleep(Duration::from_millis(50));
    stats::enable();
    thread::sleep(Duration::from_millis(10));
    reader.release();
    writer.join().unwrap();

    let snap = stats::snapshot();
    let Some(c) = snap.class("switch-revocation-begun-off") else {
        return; // nothing recorded: right
    };
    let r = &c.events.revocations;
    assert!(
        r.max_ns < 300_000_000,
        "a ~60 ms revocation recorded as {} ms",
        r.max_ns / 1_000_000
    );
}
