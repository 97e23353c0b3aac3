//! The advisor on synthetic snapshots: each rule fires on the figures it
//! names, cites its threshold constant, and the first matching rule wins.
//! Run: `cargo test -p scalelock --features stats --test stats_advisor`
#![cfg(feature = "stats")]

use scalelock::LockKind;
use scalelock::stats::advisor::{self, Recommendation};
use scalelock::stats::{AccessStats, ClassStats, Events, Snapshot, TimeStats, advise};

/// A class with `reads`/`writes` acquisitions, `contended` of each kind,
/// and every sampled hold lasting `hold_ns`.
fn class(
    kind: LockKind,
    reads: u64,
    writes: u64,
    contended: (u64, u64),
    hold_ns: &[u64],
) -> ClassStats {
    ClassStats {
        name: format!("{kind}-class"),
        site: None,
        kind: Some(kind),
        read: AccessStats {
            acquisitions: reads,
            contended: contended.0,
            wait: TimeStats::from_samples(&vec![500; contended.0.min(100) as usize]),
            hold: TimeStats::from_samples(if reads != 0 { hold_ns } else { &[] }),
            ..AccessStats::default()
        },
        write: AccessStats {
            acquisitions: writes,
            contended: contended.1,
            wait: TimeStats::from_samples(&vec![500; contended.1.min(100) as usize]),
            hold: TimeStats::from_samples(if writes != 0 { hold_ns } else { &[] }),
            ..AccessStats::default()
        },
        events: Events::default(),
    }
}

fn advice_for(c: ClassStats) -> scalelock::stats::Advice {
    let snap = Snapshot {
        enabled: true,
        hold_sample: 16,
        dropped_events: 0,
        classes: vec![c],
    };
    let mut a = advise(&snap);
    assert_eq!(a.len(), 1);
    a.pop().unwrap()
}

fn cites(a: &scalelock::stats::Advice, constant: &str) -> bool {
    a.figures
        .iter()
        .any(|f| f.threshold.as_ref().is_some_and(|t| t.0 == constant))
}

#[test]
fn read_mostly_with_contending_readers_wants_percpu() {
    let a = advice_for(class(
        LockKind::QRwLock,
        995_000,
        5_000,
        (2_000, 300),
        &[40; 100],
    ));
    assert_eq!(a.recommendation, Recommendation::PerCpuRwLock);
    assert!(cites(&a, "PERCPU_READ_SHARE"));
    assert!(cites(&a, "MIN_READ_CONTENTION"));
    let text = a.to_string();
    assert!(
        text.starts_with("QRwLock-class (QRwLock): use PerCpuRwLock: "),
        "{text}"
    );
    assert!(
        text.contains("read share 99.5% (PERCPU_READ_SHARE: >= 99.0%)"),
        "{text}"
    );

    // Already a PerCpuRwLock: no such advice (uncontended overall: keep).
    let a = advice_for(class(
        LockKind::PerCpuRwLock,
        995_000,
        5_000,
        (2_000, 300),
        &[40; 100],
    ));
    assert_eq!(a.recommendation, Recommendation::Keep);
    // 98% reads is below the threshold.
    let a = advice_for(class(
        LockKind::QRwLock,
        980_000,
        20_000,
        (2_000, 300),
        &[40; 100],
    ));
    assert_ne!(a.recommendation, Recommendation::PerCpuRwLock);
}

#[test]
fn half_reads_with_short_holds_want_a_mutex() {
    let a = advice_for(class(
        LockKind::QRwLock,
        50_000,
        50_000,
        (3_000, 4_000),
        &[40; 100],
    ));
    assert_eq!(a.recommendation, Recommendation::QSpinLock);
    assert!(cites(&a, "MUTEX_MAX_READ_SHARE"));
    assert!(cites(&a, "SHORT_HOLD_NS"));
    assert!(a.reason.contains("an rwlock buys nothing over QSpinLock"));
    assert!(
        a.to_string()
            .contains("hold p50 40ns (SHORT_HOLD_NS: <= 1.0us)"),
        "{a}"
    );
    // Long holds: readers overlapping is worth it, keep the rwlock.
    let a = advice_for(class(
        LockKind::QRwLock,
        50_000,
        50_000,
        (3_000, 4_000),
        &[50_000; 100],
    ));
    assert_eq!(a.recommendation, Recommendation::Keep);
}

#[test]
fn hold_tails_with_parks_are_not_a_lock_type_problem() {
    let mut holds = vec![200u64; 98];
    holds.extend([5_000_000, 5_000_000]);
    let mut c = class(LockKind::QSpinLock, 0, 100_000, (0, 5_000), &holds);
    c.events.parks = 1_000;
    let a = advice_for(c.clone());
    assert_eq!(a.recommendation, Recommendation::FixLongHolds);
    for k in [
        "LONG_HOLD_P99_NS",
        "HOLD_TAIL_RATIO",
        "MIN_PARK_SHARE",
        "MIN_CONTENTION",
    ] {
        assert!(cites(&a, k), "{a}");
    }
    assert!(a.reason.contains("preempted"));
    // Without parks the same holds are not blamed on descheduling.
    c.events.parks = 0;
    assert_ne!(advice_for(c).recommendation, Recommendation::FixLongHolds);
}

#[test]
fn a_median_hold_under_short_hold_ns_is_short_whatever_the_tail() {
    // 90% of the holds take 600 ns, under SHORT_HOLD_NS (1 us): the median
    // is short. A tail of 5 us holds must not make it long (the median's
    // bucket, [512 ns, 1 us), has 1023 ns for its upper bound).
    let mut holds = vec![600u64; 90];
    holds.extend([5_000; 10]);
    let a = advice_for(class(
        LockKind::QRwLock,
        50_000,
        50_000,
        (3_000, 4_000),
        &holds,
    ));
    assert_eq!(a.recommendation, Recommendation::QSpinLock, "{a}");
}

#[test]
fn a_p99_hold_under_long_hold_p99_ns_is_not_a_long_tail() {
    // The 99th percentile hold is 70 us, under LONG_HOLD_P99_NS (100 us);
    // one hold in 100 takes 10 ms. Its bucket, [65.5 us, 131 us), must not
    // count as a p99 of 131 us.
    let mut holds = vec![200u64; 95];
    holds.extend([70_000; 4]);
    holds.push(10_000_000);
    let mut c = class(LockKind::QSpinLock, 0, 100_000, (0, 5_000), &holds);
    c.events.parks = 1_000;
    let a = advice_for(c);
    assert_ne!(a.recommendation, Recommendation::FixLongHolds, "{a}");
}

#[test]
fn percpu_with_frequent_writes_wants_qrwlock() {
    let mut c = class(LockKind::PerCpuRwLock, 90_000, 10_000, (0, 100), &[40; 100]);
    c.events.revocations = TimeStats::from_samples(&[16_000; 50]);
    c.events.heavy_revocations = 48;
    let a = advice_for(c);
    assert_eq!(a.recommendation, Recommendation::QRwLock);
    assert!(cites(&a, "PERCPU_MAX_WRITE_SHARE"));
    assert!(a.to_string().contains("revocation mean cost 16.0us"), "{a}");
    assert!(
        a.to_string().contains("revocations with a heavy fence 48"),
        "{a}"
    );
}

#[test]
fn retrying_seqlock_readers_want_qrwlock() {
    let mut c = class(
        LockKind::SeqLock,
        100_000,
        20_000,
        (30_000, 2_000),
        &[40; 100],
    );
    c.events.seqlock_retries = 40_000;
    let a = advice_for(c);
    assert_eq!(a.recommendation, Recommendation::QRwLock);
    assert!(cites(&a, "SEQLOCK_MAX_RETRY_SHARE"));
}

#[test]
fn little_data_or_little_contention() {
    let a = advice_for(class(LockKind::QSpinLock, 0, 999, (0, 900), &[40]));
    assert_eq!(a.recommendation, Recommendation::NotEnoughData);
    assert!(cites(&a, "MIN_ACQUISITIONS"));
    let a = advice_for(class(LockKind::QSpinLock, 0, 100_000, (0, 999), &[40]));
    assert_eq!(a.recommendation, Recommendation::Keep);
    assert!(cites(&a, "MIN_CONTENTION"));
    assert!(a.reason.contains("rarely contended"));
    // Contended mutex, nothing better to offer.
    let a = advice_for(class(LockKind::QSpinLock, 0, 100_000, (0, 30_000), &[40]));
    assert_eq!(a.recommendation, Recommendation::Keep);
    assert!(a.reason.contains("split the data"));
}

#[test]
fn one_advice_per_class_in_order() {
    let snap = Snapshot {
        enabled: true,
        hold_sample: 16,
        dropped_events: 0,
        classes: vec![
            class(LockKind::QRwLock, 995_000, 5_000, (2_000, 300), &[40; 100]),
            class(LockKind::QSpinLock, 0, 10, (0, 0), &[40]),
        ],
    };
    let a = advise(&snap);
    assert_eq!(a.len(), 2);
    assert_eq!(a[0].class, "QRwLock-class");
    assert_eq!(a[1].recommendation, Recommendation::NotEnoughData);
    // The constants are public, for tools that print them.
    assert_eq!(advisor::PERCPU_READ_SHARE, 0.99);
}

#[test]
fn a_tail_ratio_under_hold_tail_ratio_inside_its_buckets_is_not_a_tail() {
    // Median 7.5 us (bucket [4 us, 8 us)), p99 140 us (bucket [131 us,
    // 262 us)), one 10 ms hold: the true ratio is 18.7, under
    // HOLD_TAIL_RATIO (20); the buckets' tops alone would read 262143 /
    // 8191 = 32. The smallest ratio the buckets allow is 16.
    let mut holds = vec![7_500u64; 90];
    holds.extend([140_000; 9]);
    holds.push(10_000_000);
    let mut c = class(LockKind::QSpinLock, 0, 100_000, (0, 5_000), &holds);
    c.events.parks = 1_000;
    let a = advice_for(c.clone());
    assert_ne!(a.recommendation, Recommendation::FixLongHolds, "{a}");
    // A median of 600 ns under the same tail is far enough from it.
    let mut holds = vec![600u64; 90];
    holds.extend([140_000; 9]);
    holds.push(10_000_000);
    let mut c = class(LockKind::QSpinLock, 0, 100_000, (0, 5_000), &holds);
    c.events.parks = 1_000;
    let a = advice_for(c);
    assert_eq!(a.recommendation, Recommendation::FixLongHolds, "{a}");
    assert!(
        a.to_string()
            .contains("hold p99/p50 (at least) 128 (HOLD_TAIL_RATIO: >= 20)"),
        "{a}"
    );
}

#[test]
fn the_hold_rules_need_min_sampled_holds() {
    // Five sampled holds, two of them 5 ms: with parks and contention the
    // tail rule would blame preemption on two samples.
    let holds = [200u64, 200, 200, 5_000_000, 5_000_000];
    let mut c = class(LockKind::QSpinLock, 0, 100_000, (0, 5_000), &holds);
    c.events.parks = 1_000;
    let a = advice_for(c);
    assert_ne!(a.recommendation, Recommendation::FixLongHolds, "{a}");
    assert!(cites(&a, "MIN_SAMPLED_HOLDS"), "{a}");
    // Half reads, a handful of short holds: too few to call the critical
    // sections short.
    let a = advice_for(class(
        LockKind::QRwLock,
        50_000,
        50_000,
        (3_000, 4_000),
        &[40; 40],
    ));
    assert_eq!(a.recommendation, Recommendation::Keep, "{a}");
    assert!(cites(&a, "MIN_SAMPLED_HOLDS"), "{a}");
    // Enough of them (two rows of 50): short.
    let a = advice_for(class(
        LockKind::QRwLock,
        50_000,
        50_000,
        (3_000, 4_000),
        &[40; 50],
    ));
    assert_eq!(a.recommendation, Recommendation::QSpinLock, "{a}");
}

#[test]
fn percpu_with_exactly_the_max_write_share_is_not_over_it() {
    // 5% writes exactly: rule 3 is for writes that *exceed*
    // PERCPU_MAX_WRITE_SHARE. The write share must be the writes' own
    // ratio: `1.0 - read_share` reads 0.95 reads as 0.050000000000000044
    // writes, over the threshold.
    let mut c = class(LockKind::PerCpuRwLock, 95_000, 5_000, (0, 100), &[40; 100]);
    c.events.revocations = TimeStats::from_samples(&[16_000; 50]);
    let a = advice_for(c);
    assert_ne!(a.recommendation, Recommendation::QRwLock, "{a}");
    // Just over it: 5.01% writes.
    let mut c = class(LockKind::PerCpuRwLock, 94_990, 5_010, (0, 100), &[40; 100]);
    c.events.revocations = TimeStats::from_samples(&[16_000; 50]);
    assert_eq!(advice_for(c).recommendation, Recommendation::QRwLock);
}
