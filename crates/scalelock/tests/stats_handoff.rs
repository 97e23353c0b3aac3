//! QRwLock's fair hand-off, made deterministic: a waiter that waits out the
//! running threads' batch (`QUIET` in the count word) gets the lock from a
//! fair unlock (`unlock_fair`, which sets `HANDOFF`) before the newcomers
//! that spin on `try_write` (a thread that spins from before the unlock,
//! and the unlocking thread from right after it, long before the sleeping
//! waiter can be running), and statistics count exactly one hand-off, on
//! the row of the waiter's access.
//!
//! A waiter's batch ends when its platform clock says so (1 ms) or after a
//! number of polls. The lock here runs on the std platform without its
//! clock (`now_ns` is 0, as on a platform that has none), so the batch lasts
//! its polls, whose quiet sleeps add up to seconds: long enough for the
//! test to set up the newcomer and unlock while the waiter is still quiet,
//! however the threads are scheduled. The test checks that it was (no batch
//! end counted) rather than assuming it.
//!
//! Run: `cargo test -p scalelock --features stats --test stats_handoff`
#![cfg(feature = "stats")]

mod hook_lock;
mod no_clock_platform;

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::thread;

use hook_lock::{class_stats, stats_setup, wait_until};
use no_clock_platform::NoClock;
use scalelock::stats::{self, WaitEvents};
use scalelock::{ClassRef, LockClass, RawQRwLock};

type Lock = lock_api::RwLock<RawQRwLock<NoClock>, ()>;

/// Whether a waiter waits out a batch on `l` (its count word has `QUIET`).
fn quiet(l: &Lock) -> bool {
    // SAFETY: only reads the raw lock's state, through `Debug`.
    let raw = unsafe { l.raw() };
    format!("{raw:?}").contains("quiet: true")
}

/// The read and write rows' slow-path events of class `name`.
fn rows(name: &str) -> (WaitEvents, WaitEvents) {
    stats::snapshot()
        .class(name)
        .map(|c| (c.read.events.clone(), c.write.events.clone()))
        .unwrap_or_default()
}

/// Who got the lock when: each thread takes the next number while holding
/// the lock, and the waiter and the newcomers exclude each other (the
/// newcomers write), so the numbers give the order of their acquisitions.
struct Order {
    next: AtomicU32,
    waiter: AtomicU32,
    newcomer: AtomicU32,
    unlocker: AtomicU32,
}

impl Order {
    const fn new() -> Self {
        Self {
            next: AtomicU32::new(1),
            waiter: AtomicU32::new(0),
            newcomer: AtomicU32::new(0),
            unlocker: AtomicU32::new(0),
        }
    }

    /// Call while holding the lock.
    fn mark(&self, who: &AtomicU32) {
        who.store(self.next.fetch_add(1, Ordering::Relaxed), Ordering::Relaxed);
    }
}

/// Spins on `try_write` until it gets the lock, and marks `who`; counts
/// its failed tries in `tries`.
fn take_as_newcomer(l: &Lock, order: &Order, who: &AtomicU32, tries: &AtomicU64) {
    loop {
        if let Some(g) = l.try_write() {
            order.mark(who);
            drop(g);
            return;
        }
        tries.fetch_add(1, Ordering::Relaxed);
        std::hint::spin_loop();
    }
}

/// Starts the newcomer thread on `s`, spinning on `try_write` until it
/// gets the lock; returns once it has failed a hundred times (so it
/// competes when the fair unlock comes).
fn spawn_newcomer<'scope, 'env>(
    s: &'scope thread::Scope<'scope, 'env>,
    l: &'env Lock,
    order: &'env Order,
    tries: &'env AtomicU64,
) {
    s.spawn(move || take_as_newcomer(l, order, &order.newcomer, tries));
    wait_until("the newcomer spins on try_write", || {
        tries.load(Ordering::Relaxed) >= 100
    });
}

/// What both tests check once the threads are done.
fn check(name: &str, order: &Order, before: (WaitEvents, WaitEvents), waiter_reads: bool) {
    let (w, n, u) = (
        order.waiter.load(Ordering::Relaxed),
        order.newcomer.load(Ordering::Relaxed),
        order.unlocker.load(Ordering::Relaxed),
    );
    assert!(
        w != 0 && n != 0 && u != 0 && w < n && w < u,
        "acquisition order: waiter {w}, newcomer {n}, unlocker {u} (0: never); the fair \
         unlock did not hand the lock to the waiter"
    );
    let (r, wr) = rows(name);
    let (mine, other, mine_before, other_before) = if waiter_reads {
        (&r, &wr, &before.0, &before.1)
    } else {
        (&wr, &r, &before.1, &before.0)
    };
    // The batch did not run out: the hand-off ended it.
    assert_eq!(mine.batch_ends, mine_before.batch_ends, "{mine:?}");
    assert_eq!(
        mine.handoffs,
        mine_before.handoffs + 1,
        "one hand-off on the waiter's row: {mine:?}"
    );
    assert_eq!(other.handoffs, other_before.handoffs, "{other:?}");
    let st = class_stats(name);
    assert_eq!(st.events.handoffs, r.handoffs + wr.handoffs);
}

/// A writer waits out the batch behind our read; our fair read unlock
/// hands the lock to it, not to the newcomers spinning on `try_write`.
#[test]
fn fair_read_unlock_hands_the_lock_to_the_waiting_writer() {
    stats_setup();
    const NAME: &str = "qrw-handoff-to-writer";
    static C: LockClass = LockClass::new(NAME);
    static L: Lock = Lock::from_raw(RawQRwLock::with_class(ClassRef::of(&C)), ());
    static ORDER: Order = Order::new();
    let before = rows(NAME);
    let tries = AtomicU64::new(0);
    thread::scope(|s| {
        let r = L.read();
        s.spawn(|| {
            let g = L.write();
            ORDER.mark(&ORDER.waiter);
            drop(g);
        });
        wait_until("the writer waits out the batch", || quiet(&L));
        spawn_newcomer(s, &L, &ORDER, &tries);
        assert!(
            quiet(&L),
            "the writer's batch ran out before the fair unlock"
        );
        lock_api::RwLockReadGuard::unlock_fair(r);
        // We compete too, from right after the release.
        take_as_newcomer(&L, &ORDER, &ORDER.unlocker, &AtomicU64::new(0));
    });
    check(NAME, &ORDER, before, false);
    let st = class_stats(NAME);
    assert_eq!(st.write.contended, 1, "{st:?}");
}

/// A reader waits out the batch behind our write; our fair write unlock
/// hands the lock to it, not to the newcomers spinning on `try_write`.
#[test]
fn fair_write_unlock_hands_the_lock_to_the_waiting_reader() {
    stats_setup();
    const NAME: &str = "qrw-handoff-to-reader";
    static C: LockClass = LockClass::new(NAME);
    static L: Lock = Lock::from_raw(RawQRwLock::with_class(ClassRef::of(&C)), ());
    static ORDER: Order = Order::new();
    let before = rows(NAME);
    let tries = AtomicU64::new(0);
    thread::scope(|s| {
        let w = L.write();
        s.spawn(|| {
            let g = L.read();
            ORDER.mark(&ORDER.waiter);
            drop(g);
        });
        wait_until("the reader waits out the batch", || quiet(&L));
        spawn_newcomer(s, &L, &ORDER, &tries);
        assert!(
            quiet(&L),
            "the reader's batch ran out before the fair unlock"
        );
        lock_api::RwLockWriteGuard::unlock_fair(w);
        take_as_newcomer(&L, &ORDER, &ORDER.unlocker, &AtomicU64::new(0));
    });
    check(NAME, &ORDER, before, true);
    let st = class_stats(NAME);
    assert_eq!(st.read.contended, 1, "{st:?}");
}
