//! Lock statistics of SeqLock and RefreshOnce, with contention made
//! deterministic (a held lock, a gate the test opens).
//! Run: `cargo test -p scalelock --features stats --test stats_seqlock`
#![cfg(feature = "stats")]

mod hook_lock;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread;
use std::time::Duration;

use hook_lock::{class_stats, stats_setup, wait_until};
use scalelock::stats::{self, bucket_of};
use scalelock::{ClassRef, LockClass, LockKind, RefreshOnce, SeqLock};

#[test]
fn seqlock_counts_reads_and_writes() {
    stats_setup();
    static C: LockClass = LockClass::new("seq-counts");
    let s: SeqLock<u64> = SeqLock::with_class(0, ClassRef::of(&C));
    for _ in 0..10 {
        assert_eq!(s.read(), s.read());
    }
    s.write(1);
    s.write(2);
    s.update(|v| *v += 1);
    s.try_lock().unwrap().publish(7);
    assert_eq!(s.try_read(), Some(7));
    let st = class_stats("seq-counts");
    assert_eq!(st.kind, Some(LockKind::SeqLock));
    // 10 iterations of two reads, plus try_read.
    assert_eq!(st.read.acquisitions, 21);
    assert_eq!(st.read.contended, 0);
    assert_eq!(st.read.hold.count, 0, "reads hold nothing");
    assert_eq!(st.write.acquisitions, 4);
    assert_eq!(st.write.contended, 0);
    assert_eq!(st.write.hold.count, 4);
    assert_eq!(st.events.seqlock_retries, 0);
}

#[test]
fn seqlock_contended_writer_waits() {
    stats_setup();
    const HOLD: Duration = Duration::from_millis(5);
    static C: LockClass = LockClass::new("seq-contended");
    static S: SeqLock<u64> = SeqLock::with_class(0, ClassRef::of(&C));
    let g = S.lock();
    let writer = thread::spawn(|| S.write(5));
    wait_until("the writer is contended", || {
        stats::snapshot()
            .class("seq-contended")
            .is_some_and(|c| c.write.contended == 1)
    });
    thread::sleep(HOLD);
    g.publish(4);
    writer.join().unwrap();
    assert_eq!(S.read(), 5);

    let w = class_stats("seq-contended").write;
    let hold_ns = HOLD.as_nanos() as u64;
    assert_eq!((w.acquisitions, w.contended, w.wait.count), (2, 1, 1));
    assert!(w.wait.max_ns >= hold_ns);
    assert_eq!(w.wait.buckets[..bucket_of(hold_ns)].iter().sum::<u64>(), 0);
    assert_eq!(w.hold.count, 2);
    assert!(w.hold.max_ns >= hold_ns);
}

/// A writer publishing a large value keeps the sequence odd for a while;
/// a reader that overlaps it retries. Every read is counted; retried ones
/// are contended, with at least one retry each.
#[test]
fn seqlock_retrying_reads_are_contended() {
    stats_setup();
    static C: LockClass = LockClass::new("seq-retries");
    let s: Arc<SeqLock<[u64; 512]>> = Arc::new(SeqLock::with_class([0; 512], ClassRef::of(&C)));
    let stop = Arc::new(AtomicBool::new(false));
    let writer = {
        let (s, stop) = (s.clone(), stop.clone());
        thread::spawn(move || {
            let mut i = 0u64;
            while !stop.load(Ordering::Relaxed) {
                i += 1;
                s.write([i; 512]);
            }
        })
    };
    let reads = AtomicU64::new(0);
    wait_until("a read retried", || {
        for _ in 0..1000 {
            let v = s.read();
            assert!(v.iter().all(|&x| x == v[0]), "torn read");
            reads.fetch_add(1, Ordering::Relaxed);
        }
        stats::snapshot()
            .class("seq-retries")
            .is_some_and(|c| c.events.seqlock_retries > 0)
    });
    stop.store(true, Ordering::Relaxed);
    writer.join().unwrap();
    let st = class_stats("seq-retries");
    assert_eq!(st.read.acquisitions, reads.load(Ordering::Relaxed));
    assert!(st.read.contended >= 1);
    assert!(st.events.seqlock_retries >= st.read.contended);
    assert_eq!(st.read.wait.count, st.read.contended);
}

/// A's update runs until the test opens a gate; B and C arrive meanwhile
/// and sleep. Then one of them runs the next update and the other is
/// served by it: 3 calls, 2 contended, 1 coalesced, 2 updates held.
#[test]
fn refresh_counts_coalesced_callers_and_parks() {
    stats_setup();
    static C: LockClass = LockClass::new("refresh");
    static R: RefreshOnce<u64> = RefreshOnce::with_class(0, ClassRef::of(&C));
    let gate1 = Arc::new(AtomicBool::new(false));
    let gate2 = Arc::new(AtomicBool::new(false));
    let a = {
        let gate1 = gate1.clone();
        thread::spawn(move || {
            R.refresh(|_| {
                while !gate1.load(Ordering::Acquire) {
                    thread::yield_now();
                }
                1
            })
        })
    };
    wait_until("A updates", || R.is_refreshing());
    let waiters: Vec<_> = (0..2)
        .map(|_| {
            let gate2 = gate2.clone();
            thread::spawn(move || {
                R.refresh(|old| {
                    while !gate2.load(Ordering::Acquire) {
                        thread::yield_now();
                    }
                    old + 10
                })
            })
        })
        .collect();
    wait_until("both waiters sleep", || R.sleepers() == (true, true));
    thread::sleep(Duration::from_millis(2));
    gate1.store(true, Ordering::Release);
    assert_eq!(a.join().unwrap(), 1);
    wait_until("the second update runs", || {
        R.generation() == 1 && R.is_refreshing()
    });
    gate2.store(true, Ordering::Release);
    for w in waiters {
        assert_eq!(w.join().unwrap(), 11);
    }

    let st = class_stats("refresh");
    assert_eq!(st.kind, Some(LockKind::RefreshOnce));
    let w = &st.write;
    assert_eq!(w.acquisitions, 3);
    assert_eq!(w.contended, 2);
    assert_eq!(w.wait.count, 2);
    assert_eq!(st.events.refresh_coalesced, 1);
    assert_eq!(w.hold.count, 2, "two updates");
    assert!(w.hold.max_ns >= 2_000_000, "A's update outlasted the sleep");
    let e = &st.events;
    assert!(e.parks >= 2, "{e:?}");
    assert_eq!(e.parks, e.wakes + e.spurious_wakes, "every sleep ended");
}
