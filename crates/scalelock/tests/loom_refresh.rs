//! Loom models of `RefreshOnce`: every caller gets a value from an update
//! that started after it arrived, updates never overlap, and nobody sleeps
//! through the update it waits for.
//!
//! The value is `[started, finished]` counters of updates; each `f` checks
//! that no other update runs (`started == finished` on entry). A caller
//! records the number of updates that had *started* before it arrived (a
//! shared counter bumped inside `f`) and checks the returned value counts at
//! least one more.
//!
//! Run: `RUSTFLAGS="--cfg loom" LOOM_MAX_PREEMPTIONS=2 cargo test -p scalelock
//! --release --test loom_refresh`
#![cfg(loom)]

use loom::sync::Arc;
use loom::sync::atomic::{AtomicU64, Ordering};
use loom::thread;

use scalelock::RefreshOnce;

fn caller(r: &RefreshOnce<[u64; 2]>, started: &AtomicU64) -> [u64; 2] {
    let before = started.load(Ordering::SeqCst);
    let v = r.refresh(|old| {
        assert_eq!(old[0], old[1], "updates overlap");
        let n = started.fetch_add(1, Ordering::SeqCst) + 1;
        [n, n]
    });
    assert!(
        v[0] > before,
        "stale: {v:?}, {before} updates began before arrival"
    );
    v
}

#[test]
fn two_callers() {
    loom::model(|| {
        let r = Arc::new(RefreshOnce::new([0u64, 0]));
        let started = Arc::new(AtomicU64::new(0));
        let t = {
            let (r, started) = (r.clone(), started.clone());
            thread::spawn(move || caller(&r, &started))
        };
        caller(&r, &started);
        t.join().unwrap();
        let g = r.generation() as u64;
        assert!((1..=2).contains(&g));
        assert_eq!(r.get(), [g, g]);
    });
}

#[test]
fn three_callers() {
    let mut b = loom::model::Builder::new();
    b.preemption_bound = Some(1);
    b.check(|| {
        let r = Arc::new(RefreshOnce::new([0u64, 0]));
        let started = Arc::new(AtomicU64::new(0));
        let ts: Vec<_> = (0..2)
            .map(|_| {
                let (r, started) = (r.clone(), started.clone());
                thread::spawn(move || caller(&r, &started))
            })
            .collect();
        caller(&r, &started);
        for t in ts {
            t.join().unwrap();
        }
        assert!(r.generation() >= 1 && r.generation() <= 3);
    });
}
