//! Before the threads run: what a try, a timed try and a try upgrade
//! promise, checked where the answer is known (the lock free, or held by
//! another thread for far longer than the timeout). The threaded run
//! cannot tell a try that never succeeds, or a timed try that does not
//! wait or waits too long, from bad luck under contention.

use std::sync::Barrier;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use super::checks::TortureData;
use super::ops::TIMEOUT;
use crate::lockable::{Caps, Lockable};

/// How long the helper holds the lock: far beyond [`TIMEOUT`]. A timed try
/// must give up within half of it: a thread preempted for that long (200
/// ms) on a loaded machine would fail the probe, one that ignores its
/// timeout waits the whole hold.
const HOLD: Duration = Duration::from_millis(400);

/// The broken promises, if any.
pub fn probe<L: Lockable<TortureData>>() -> Vec<String> {
    let caps = L::CAPS;
    let l = L::new(TortureData::default());
    let mut out = Vec::new();
    let mut expect = |ok: bool, what: &str| {
        if !ok {
            out.push(format!("probe: {what}"));
        }
    };
    // Free: every try gets in.
    expect(
        l.try_with_write(|_| ()).is_some(),
        "a try-write on a free lock missed",
    );
    expect(
        l.try_with_read(|_| ()).is_some(),
        "a try-read on a free lock missed",
    );
    if caps.has(Caps::TIMED) {
        expect(
            l.try_with_write_for(TIMEOUT, |_| ()).is_some(),
            "a timed write on a free lock timed out",
        );
        expect(
            l.try_with_read_for(TIMEOUT, |_| ()).is_some(),
            "a timed read on a free lock timed out",
        );
    }
    if caps.has(Caps::UPGRADE) {
        expect(
            l.try_with_upgradable(|_| ()).is_some(),
            "a try of an upgradable read on a free lock missed",
        );
        expect(
            l.with_upgradable_then_try_write(|_| (), |_, _| true, |_, _| false),
            "a try upgrade with no other reader failed",
        );
    }
    if caps.has(Caps::TIMED_UPGRADE) {
        expect(
            l.try_with_upgradable_for(TIMEOUT, |_| ()).is_some(),
            "a timed upgradable read on a free lock timed out",
        );
        expect(
            l.with_upgradable_then_write_for(TIMEOUT, |_| (), |_, _| true, |_, _| false),
            "a timed upgrade with no other reader timed out",
        );
    }
    // Held by another thread for HOLD: every try misses, and a timed one
    // only after its timeout, well before the holder lets go.
    let timed = |f: &dyn Fn() -> bool| {
        let t = Instant::now();
        let got = f();
        (got, t.elapsed())
    };
    let gate = Barrier::new(2);
    let held: Vec<String> = std::thread::scope(|s| {
        s.spawn(|| {
            l.with_write(|_| {
                gate.wait();
                std::thread::sleep(HOLD);
            })
        });
        gate.wait();
        let mut out = Vec::new();
        let mut expect = |ok: bool, what: String| {
            if !ok {
                out.push(format!("probe: {what}"));
            }
        };
        expect(
            l.try_with_write(|_| ()).is_none(),
            "a try-write on a held lock got in".into(),
        );
        expect(
            l.try_with_read(|_| ()).is_none(),
            "a try-read on a write-held lock got in".into(),
        );
        let mut check_timed = |what: &str, f: &dyn Fn() -> bool| {
            let (got, took) = timed(f);
            expect(
                !got,
                format!("a {what} on a held lock got in (after {took:?})"),
            );
            expect(
                took >= TIMEOUT,
                format!("a {what} on a held lock gave up after {took:?}, before its {TIMEOUT:?}"),
            );
            expect(
                took < HOLD / 2,
                format!("a {what} with a {TIMEOUT:?} timeout waited {took:?}"),
            );
        };
        if caps.has(Caps::TIMED) {
            check_timed("timed write", &|| {
                l.try_with_write_for(TIMEOUT, |_| ()).is_some()
            });
            check_timed("timed read", &|| {
                l.try_with_read_for(TIMEOUT, |_| ()).is_some()
            });
        }
        if caps.has(Caps::TIMED_UPGRADE) {
            check_timed("timed upgradable read", &|| {
                l.try_with_upgradable_for(TIMEOUT, |_| ()).is_some()
            });
        }
        out
    });
    out.extend(held);
    // Read-held, a timed upgrade times out, in time, and is still an
    // upgradable read: once the reader is gone, a writer still cannot get in.
    if caps.has(Caps::TIMED_UPGRADE) && L::KIND == crate::lockable::Kind::RwLock {
        let gate = Barrier::new(2);
        let released = AtomicBool::new(false);
        let more: Vec<String> = std::thread::scope(|s| {
            s.spawn(|| {
                l.with_read(|_| {
                    gate.wait();
                    std::thread::sleep(HOLD);
                });
                released.store(true, Ordering::Release);
            });
            gate.wait();
            let t = Instant::now();
            let after = l.with_upgradable_then_write_for(
                TIMEOUT,
                |_| (),
                |_, _| None,
                |_, _| {
                    let took = t.elapsed();
                    while !released.load(Ordering::Acquire) {
                        std::thread::sleep(Duration::from_millis(1));
                    }
                    let writer_got_in = std::thread::scope(|s| {
                        s.spawn(|| l.try_with_write(|_| ()).is_some()).join()
                    })
                    .unwrap_or(false);
                    Some((took, writer_got_in))
                },
            );
            let took = t.elapsed();
            let mut out = Vec::new();
            match after {
                None => out.push(format!(
                    "probe: a timed upgrade under a reader upgraded (after {took:?})"
                )),
                Some((took, _)) if took < TIMEOUT || took >= HOLD / 2 => out.push(format!(
                    "probe: a timed upgrade under a reader timed out after {took:?} \
                     (timeout {TIMEOUT:?})"
                )),
                Some((_, true)) => out.push(
                    "probe: a timed upgrade that timed out let a writer in under its \
                     upgradable read"
                        .into(),
                ),
                Some(_) => {}
            }
            out
        });
        out.extend(more);
    }
    out
}
