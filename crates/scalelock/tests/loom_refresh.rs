//! Loom models of `RefreshOnce`: every caller gets a value from an update
//! that started after it arrived, waits for at most one update beyond the
//! one running at its arrival, updates never overlap, and nobody sleeps
//! through the update it waits for (loom's blocking futex turns a lost
//! wake-up into a deadlock). Under loom waiters do not spin: a waiter that
//! finds an update running sleeps at once (the head on the state word, the
//! others on their gate); `parked_*` force both kinds of sleep.
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

/// `[started, finished]`: `started` is bumped at the top of `f`, so a value
/// `[n, n]` comes from the `n`-th update to start.
type Val = [u64; 2];

/// A call that checks freshness (the "at most one more" promise is checked
/// exactly by the `parked_*` models). `hold` runs inside `f`, keeping the
/// update running until something happened.
fn caller_with(r: &RefreshOnce<Val>, started: &AtomicU64, hold: impl Fn()) -> Val {
    let before = started.load(Ordering::SeqCst);
    let v = r.refresh(|old| {
        assert_eq!(old[0], old[1], "updates overlap");
        let n = started.fetch_add(1, Ordering::SeqCst) + 1;
        hold();
        [n, n]
    });
    assert!(
        v[0] > before,
        "stale: {v:?}, {before} updates began before arrival"
    );
    v
}

fn caller(r: &RefreshOnce<Val>, started: &AtomicU64) -> Val {
    caller_with(r, started, || {})
}

/// Spins (yielding to loom's scheduler) until `cond`.
fn until(cond: impl Fn() -> bool) {
    while !cond() {
        thread::yield_now();
    }
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

/// B arrives while A's update runs and becomes the head of the next one;
/// A's update does not finish until B sleeps on the state word. A's
/// completion must wake B, which then runs the next update itself.
#[test]
fn parked_head_is_woken() {
    loom::model(|| {
        let r = Arc::new(RefreshOnce::new([0u64, 0]));
        let started = Arc::new(AtomicU64::new(0));
        let b = {
            let (r, started) = (r.clone(), started.clone());
            thread::spawn(move || {
                until(|| r.is_refreshing());
                caller(&r, &started)
            })
        };
        let a = caller_with(&r, &started, || until(|| r.sleepers().0));
        assert_eq!(a, [1, 1]);
        assert_eq!(b.join().unwrap(), [2, 2], "B needs the update after A's");
        assert_eq!(r.generation(), 2);
    });
}

/// B and C arrive while A's update runs; A's update does not finish until
/// both sleep (one as the head on the state word, one on its gate). Both
/// must be served by the single next update.
#[test]
fn parked_head_and_gate_share_one_update() {
    let mut b = loom::model::Builder::new();
    b.preemption_bound = Some(1);
    b.check(|| {
        let r = Arc::new(RefreshOnce::new([0u64, 0]));
        let started = Arc::new(AtomicU64::new(0));
        let ts: Vec<_> = (0..2)
            .map(|_| {
                let (r, started) = (r.clone(), started.clone());
                thread::spawn(move || {
                    until(|| r.is_refreshing());
                    caller(&r, &started)
                })
            })
            .collect();
        let a = caller_with(&r, &started, || until(|| r.sleepers() == (true, true)));
        assert_eq!(a, [1, 1]);
        for t in ts {
            assert_eq!(t.join().unwrap(), [2, 2], "one shared next update");
        }
        assert_eq!(r.generation(), 2);
    });
}

/// Silences the panics the models below provoke (loom runs them thousands
/// of times); any other panic is reported as usual.
fn quiet_boom() {
    let prev = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        if info.payload().downcast_ref::<&str>() != Some(&"boom") {
            prev(info);
        }
    }));
}

/// An update that panics (caught by its caller) while B waits as the head
/// (asleep on the state word) and C waits on its gate: the abandon must
/// wake both, and each must still get a value from an update that started
/// after it arrived.
#[test]
fn panicking_update_wakes_head_and_gate_sleepers() {
    quiet_boom();
    let mut b = loom::model::Builder::new();
    b.preemption_bound = Some(1);
    b.check(|| {
        let r = Arc::new(RefreshOnce::new([0u64, 0]));
        let started = Arc::new(AtomicU64::new(0));
        let ts: Vec<_> = (0..2)
            .map(|_| {
                let (r, started) = (r.clone(), started.clone());
                thread::spawn(move || {
                    until(|| r.is_refreshing());
                    caller(&r, &started)
                })
            })
            .collect();
        let res = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            r.refresh(|_| {
                until(|| r.sleepers() == (true, true));
                panic!("boom")
            })
        }));
        assert!(res.is_err());
        for t in ts {
            let v = t.join().unwrap();
            assert!(v[0] >= 1 && v[0] <= 2, "{v:?}");
        }
        assert!(!r.is_refreshing());
        let g = r.generation() as u64;
        assert!((1..=2).contains(&g));
        assert_eq!(r.get(), [g, g]);
    });
}

/// A panicking update racing with one other caller (no forced sleeps).
#[test]
fn panicking_update_and_a_caller() {
    quiet_boom();
    loom::model(|| {
        let r = Arc::new(RefreshOnce::new([0u64, 0]));
        let started = Arc::new(AtomicU64::new(0));
        let t = {
            let (r, started) = (r.clone(), started.clone());
            thread::spawn(move || caller(&r, &started))
        };
        let res = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            r.refresh(|_| -> [u64; 2] { panic!("boom") })
        }));
        let v = t.join().unwrap();
        match res {
            // The panicking call ran its f: the caller got its own update.
            Err(_) => assert_eq!(v, [1, 1]),
            // The caller's update served the other call.
            Ok(w) => assert_eq!(w, v),
        }
        assert!(!r.is_refreshing());
        assert_eq!(r.generation(), 1);
    });
}
