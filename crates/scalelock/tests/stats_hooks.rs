//! Lock statistics through the public hook API: every event lands in its
//! field, and a lock built on the hooks reports exact counts, waits and
//! holds under contention made deterministic with barriers.
//! Run: `cargo test -p scalelock --features stats,lockdep --test stats_hooks`
#![cfg(feature = "stats")]

mod hook_lock;

use std::sync::{Arc, Barrier};
use std::thread;
use std::time::Duration;

use hook_lock::{HookRwLock, class_stats, stats_setup, wait_until};
use scalelock::hook;
use scalelock::stats::{self, bucket_of};
use scalelock::{Access, ClassRef, LockClass, LockKind};

#[test]
fn every_event_hook_lands_in_its_field() {
    stats_setup();
    static EV: LockClass = LockClass::new("events");
    let c = ClassRef::of(&EV);
    let k = LockKind::Other;
    // Slow-path events on the write row.
    let w = Access::Write;
    hook::pending_path(c, k, w);
    for _ in 0..2 {
        hook::batch_end(c, k, w);
    }
    for _ in 0..3 {
        hook::handoff(c, k, w);
    }
    for _ in 0..4 {
        hook::park(c, k, w);
    }
    for _ in 0..5 {
        hook::wake(c, k, w, false);
    }
    for _ in 0..6 {
        hook::wake(c, k, w, true);
    }
    for d in [3, 7, 5] {
        hook::queue_depth(c, k, w, d);
    }
    // And others on the read row (both read accesses land there).
    hook::pending_path(c, k, Access::Read);
    hook::handoff(c, k, Access::RecursiveRead);
    for _ in 0..2 {
        hook::park(c, k, Access::Read);
        hook::wake(c, k, Access::Read, false);
    }
    hook::wake(c, k, Access::RecursiveRead, true);
    hook::batch_end(c, k, Access::Read);
    for d in [2, 9, 4] {
        hook::queue_depth(c, k, Access::Read, d);
    }
    hook::revocation(c, k, 100);
    hook::heavy_revocation(c, k, 5_000);
    for _ in 0..7 {
        hook::seqlock_retry(c, k);
    }
    for _ in 0..8 {
        hook::refresh_coalesced(c, k);
    }
    for i in 0..19 {
        let p = hook::start(c, k, 0x1000, Access::Read);
        if i < 9 {
            p.fast_read();
        } else {
            p.fallback_read();
        }
        p.passed();
    }

    let s = class_stats("events");
    assert_eq!(s.kind, Some(LockKind::Other));
    let we = &s.write.events;
    assert_eq!(we.pending_path, 1);
    assert_eq!(we.batch_ends, 2);
    assert_eq!(we.handoffs, 3);
    assert_eq!(we.parks, 4);
    assert_eq!(we.wakes, 5);
    assert_eq!(we.spurious_wakes, 6);
    assert_eq!(we.queue_depth_max, 7);
    let re = &s.read.events;
    assert_eq!(
        (re.pending_path, re.batch_ends, re.handoffs),
        (1, 1, 1),
        "{re:?}"
    );
    assert_eq!((re.parks, re.wakes, re.spurious_wakes), (2, 2, 1), "{re:?}");
    assert_eq!(re.queue_depth_max, 9);
    // The class totals: sums, and the larger maximum.
    let e = &s.events;
    assert_eq!(e.pending_path, 2);
    assert_eq!(e.batch_ends, 3);
    assert_eq!(e.handoffs, 4);
    assert_eq!(e.parks, 6);
    assert_eq!(e.wakes, 7);
    assert_eq!(e.spurious_wakes, 7);
    assert_eq!(e.queue_depth_max, 9);
    assert_eq!(e.seqlock_retries, 7);
    assert_eq!(e.refresh_coalesced, 8);
    assert_eq!(e.fast_reads, 9);
    assert_eq!(e.fallback_reads, 10);
    assert_eq!(s.read.acquisitions, 19);
    assert_eq!(s.read.contended, 0);
    assert_eq!(s.read.hold.count, 0, "passed() holds nothing");
    assert_eq!(s.write.acquisitions, 0);
    let r = &e.revocations;
    assert_eq!((r.count, r.total_ns, r.max_ns), (2, 5_100, 5_000));
    // Both are revocations; one paid the heavy fence.
    assert_eq!(e.heavy_revocations, 1);
    assert_eq!(r.buckets[bucket_of(100)], 1);
    assert_eq!(r.buckets[bucket_of(5_000)], 1);
    assert_eq!(r.buckets.iter().sum::<u64>(), 2);
    // p50 is the upper bound of 100's bucket [64, 127]; p99 is capped by
    // the maximum.
    assert_eq!((r.p50_ns, r.p99_ns), (127, 5_000));
    // The table shows each row's events on its own line.
    let table = stats::snapshot().to_string();
    let lines: Vec<&str> = table.lines().collect();
    let at = lines
        .iter()
        .position(|l| l.starts_with("events "))
        .expect("the class's row");
    assert!(
        lines[at + 1..]
            .iter()
            .any(|l| l.contains("revocations 2 (") && l.contains("; 1 with a heavy fence)")),
        "{table}"
    );
    assert!(
        lines[at + 1..].contains(
            &"  write events: pending-path 1, queue-max 7, batch-ends 2, handoffs 3, \
              parks 4, wakes 5, spurious-wakes 6"
        ),
        "{table}"
    );
    assert!(
        lines[at + 1..].contains(
            &"  read events: pending-path 1, queue-max 9, batch-ends 1, handoffs 1, \
              parks 2, wakes 2, spurious-wakes 1"
        ),
        "{table}"
    );
}

#[test]
fn site_classes_are_one_class_per_site() {
    stats_setup();
    let sites: Vec<ClassRef> = (0..3).map(|_| ClassRef::here()).collect();
    for c in &sites {
        hook::park(*c, LockKind::Other, Access::Write);
    }
    let snap = stats::snapshot();
    let mine: Vec<_> = snap
        .classes
        .iter()
        .filter(|c| c.name.contains("stats_hooks.rs"))
        .collect();
    assert_eq!(mine.len(), 1, "{snap}");
    assert_eq!(mine[0].events.parks, 3);
    assert_eq!(mine[0].site.as_deref(), Some(mine[0].name.as_str()));
}

/// A writer holds the lock for HOLD; a second writer arrives (contended,
/// parks), then the holder releases: two acquisitions, one contended, its
/// wait at least HOLD, one hold at least HOLD.
#[test]
fn contended_write_counts_wait_and_hold() {
    stats_setup();
    const HOLD: Duration = Duration::from_millis(5);
    static CW: LockClass = LockClass::new("contended-write");
    static LOCK: HookRwLock = HookRwLock::new(ClassRef::of(&CW));

    let g = LOCK.write();
    let waiter = thread::spawn(|| drop(LOCK.write()));
    wait_until("the waiter is contended", || {
        stats::snapshot()
            .class("contended-write")
            .is_some_and(|c| c.write.contended == 1 && c.events.parks >= 1)
    });
    thread::sleep(HOLD);
    drop(g);
    waiter.join().unwrap();

    let s = class_stats("contended-write");
    let w = &s.write;
    assert_eq!(w.acquisitions, 2);
    assert_eq!(w.contended, 1);
    assert_eq!(w.wait.count, 1);
    let hold_ns = HOLD.as_nanos() as u64;
    assert!(w.wait.max_ns >= hold_ns, "wait {} ns", w.wait.max_ns);
    assert_eq!(
        w.wait.buckets[..bucket_of(hold_ns)].iter().sum::<u64>(),
        0,
        "the one wait lies at or above HOLD's bucket"
    );
    assert_eq!(w.hold.count, 2);
    assert!(w.hold.max_ns >= hold_ns);
    assert!(w.hold.buckets[bucket_of(hold_ns)..].iter().sum::<u64>() >= 1);
    assert_eq!(s.read.acquisitions, 0);
    let e = &s.events;
    assert!(e.parks >= 1);
    assert_eq!(e.parks, e.wakes + e.spurious_wakes, "every sleep ended");
    assert_eq!(e.queue_depth_max, 1);
    assert!(e.handoffs >= 1);
}

/// Readers share the lock (no contention among them); a reader arriving
/// while a writer holds it is contended.
#[test]
fn readers_and_writers_are_counted_apart() {
    stats_setup();
    static RW: LockClass = LockClass::new("readers-writers");
    static LOCK: HookRwLock = HookRwLock::new(ClassRef::of(&RW));
    const READERS: usize = 4;
    let barrier = Arc::new(Barrier::new(READERS + 1));
    // Every reader holds its read lock until all have one.
    let readers: Vec<_> = (0..READERS)
        .map(|_| {
            let barrier = barrier.clone();
            thread::spawn(move || {
                let g = LOCK.read();
                barrier.wait();
                barrier.wait();
                drop(g);
            })
        })
        .collect();
    barrier.wait();
    assert!(LOCK.try_lock(Access::Write).is_none());
    barrier.wait();
    for r in readers {
        r.join().unwrap();
    }
    let w = LOCK.write();
    let reader = thread::spawn(|| drop(LOCK.read()));
    wait_until("the reader is contended", || {
        stats::snapshot()
            .class("readers-writers")
            .is_some_and(|c| c.read.contended == 1)
    });
    drop(w);
    reader.join().unwrap();

    let s = class_stats("readers-writers");
    assert_eq!(s.read.acquisitions, READERS as u64 + 1);
    assert_eq!(s.read.contended, 1);
    assert_eq!(s.write.acquisitions, 1);
    assert_eq!(s.write.contended, 0);
    assert_eq!(s.read.hold.count, READERS as u64 + 1);
    assert!((s.read_share() - 5.0 / 6.0).abs() < 1e-9);
}

/// Counts from threads that exited are kept, and blocks are shared by no
/// two live threads: N threads x M acquisitions sum exactly.
#[test]
fn counts_from_many_threads_sum_exactly() {
    stats_setup();
    static MANY: LockClass = LockClass::new("many-threads");
    static LOCK: HookRwLock = HookRwLock::new(ClassRef::of(&MANY));
    const THREADS: usize = 6;
    const ITERS: usize = 500;
    for round in 0..2 {
        let handles: Vec<_> = (0..THREADS)
            .map(|_| {
                thread::spawn(|| {
                    for _ in 0..ITERS {
                        drop(LOCK.write());
                    }
                })
            })
            .collect();
        for h in handles {
            h.join().unwrap();
        }
        let s = class_stats("many-threads");
        let expect = ((round + 1) * THREADS * ITERS) as u64;
        assert_eq!(s.write.acquisitions, expect);
        assert_eq!(s.write.hold.count, expect);
        assert_eq!(s.write.wait.count, s.write.contended);
    }
}
