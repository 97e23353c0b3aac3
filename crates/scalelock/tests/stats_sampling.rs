//! Hold-time sampling per class and per access, at the default rate: a
//! thread that takes locks in a short fixed cycle (one lock then another, a
//! read then a write) must still get hold samples of every lock and access
//! in the cycle, as the docs' "a uniform sample" promises. (The countdown
//! is a systematic 1 in N over all of a thread's acquisitions: a cycle
//! whose length shares a factor with N is sampled unevenly.)
//! Run: `cargo test -p scalelock --features stats --test stats_sampling`
#![cfg(feature = "stats")]

use scalelock::stats;
use scalelock::{ClassRef, LockClass, QRwLock, QSpinLock, RawQRwLock, RawQSpinLock};

/// Rounds of the cycle: 64 sampled holds or so in all.
fn rounds() -> u64 {
    32 * u64::from(stats::DEFAULT_HOLD_SAMPLE)
}

#[test]
fn two_locks_taken_in_turn_are_both_sampled() {
    stats::enable();
    assert_eq!(stats::hold_sample(), stats::DEFAULT_HOLD_SAMPLE);
    static A: LockClass = LockClass::new("sampling-a");
    static B: LockClass = LockClass::new("sampling-b");
    static LA: QSpinLock<u64> = QSpinLock::from_raw(RawQSpinLock::with_class(ClassRef::of(&A)), 0);
    static LB: QSpinLock<u64> = QSpinLock::from_raw(RawQSpinLock::with_class(ClassRef::of(&B)), 0);
    for _ in 0..rounds() {
        *LA.lock() += 1;
        *LB.lock() += 1;
    }
    let snap = stats::snapshot();
    let holds = |n: &str| snap.class(n).unwrap().write.hold.count;
    let (a, b) = (holds("sampling-a"), holds("sampling-b"));
    assert!(
        a >= 8 && b >= 8,
        "sampled holds: {a} of lock a, {b} of lock b ({} acquisitions each, 1 in {})",
        rounds(),
        stats::hold_sample()
    );
}

#[test]
fn reads_and_writes_in_turn_are_both_sampled() {
    stats::enable();
    static C: LockClass = LockClass::new("sampling-rw");
    static L: QRwLock<u64> = QRwLock::from_raw(RawQRwLock::with_class(ClassRef::of(&C)), 0);
    for _ in 0..rounds() {
        let _ = *L.read();
        *L.write() += 1;
    }
    let c = stats::snapshot().class("sampling-rw").unwrap().clone();
    let (r, w) = (c.read.hold.count, c.write.hold.count);
    assert!(
        r >= 8 && w >= 8,
        "sampled holds: {r} reads, {w} writes ({} of each, 1 in {})",
        rounds(),
        stats::hold_sample()
    );
}
