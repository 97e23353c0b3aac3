//! `Condvar` with `QSpinLock`: producers and consumers, exact notification
//! counts, notify_all's wake chain, conditions that are not yet true when
//! notified, timed waits, and a panicking condition.
#![cfg(not(any(loom, shuttle)))]

use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use lock_api::{RawCondvar, RawMutex};
use scalelock::{Condvar, QSpinLock, RawQCondvar, RawQSpinLock};

/// Polls `cond` until it holds, failing after 30 s.
fn wait_until(what: &str, cond: impl Fn() -> bool) {
    let start = Instant::now();
    while !cond() {
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "timed out waiting until {what}"
        );
        thread::sleep(Duration::from_micros(200));
    }
}

/// A bounded queue: two condvars on one mutex.
struct Queue {
    items: QSpinLock<(VecDeque<u64>, usize)>,
    not_empty: Condvar,
    not_full: Condvar,
}

const CAPACITY: usize = 4;

/// Three producers and three consumers through a queue of four: every item
/// arrives once (count and sum exact), with waits on both sides.
#[test]
fn producers_and_consumers_move_every_item_once() {
    const PRODUCERS: u64 = 3;
    const CONSUMERS: usize = 3;
    const PER_PRODUCER: u64 = 3_000;
    let q = Arc::new(Queue {
        // (items, producers still running)
        items: QSpinLock::new((VecDeque::new(), PRODUCERS as usize)),
        not_empty: Condvar::new(),
        not_full: Condvar::new(),
    });
    let producers: Vec<_> = (0..PRODUCERS)
        .map(|p| {
            let q = q.clone();
            thread::spawn(move || {
                for i in 0..PER_PRODUCER {
                    let mut g = q.items.lock();
                    q.not_full
                        .wait_while(&mut g, |(items, _)| items.len() >= CAPACITY);
                    g.0.push_back(p * PER_PRODUCER + i);
                    drop(g);
                    q.not_empty.notify_one();
                }
                let mut g = q.items.lock();
                g.1 -= 1;
                drop(g);
                // Consumers waiting on an empty queue must see the end.
                q.not_empty.notify_all();
            })
        })
        .collect();
    let consumers: Vec<_> = (0..CONSUMERS)
        .map(|_| {
            let q = q.clone();
            thread::spawn(move || {
                let (mut count, mut sum) = (0u64, 0u64);
                loop {
                    let mut g = q.items.lock();
                    q.not_empty
                        .wait_while(&mut g, |(items, running)| items.is_empty() && *running > 0);
                    let Some(v) = g.0.pop_front() else {
                        break;
                    };
                    drop(g);
                    q.not_full.notify_one();
                    count += 1;
                    sum += v;
                }
                (count, sum)
            })
        })
        .collect();
    for p in producers {
        p.join().unwrap();
    }
    let (mut count, mut sum) = (0, 0);
    for c in consumers {
        let (n, s) = c.join().unwrap();
        count += n;
        sum += s;
    }
    let total = PRODUCERS * PER_PRODUCER;
    assert_eq!(count, total);
    assert_eq!(sum, total * (total - 1) / 2);
    assert!(q.items.lock().0.is_empty());
    assert_eq!(q.not_empty.raw().waiters(), 0);
    assert_eq!(q.not_full.raw().waiters(), 0);
}

/// Starts `n` threads that each wait once on `cv` and then count
/// themselves in `woken`; returns once all `n` are listed as waiting.
fn start_waiters(
    pair: &Arc<(QSpinLock<()>, Condvar)>,
    woken: &Arc<AtomicUsize>,
    n: usize,
) -> Vec<thread::JoinHandle<()>> {
    let threads = (0..n)
        .map(|_| {
            let pair = pair.clone();
            let woken = woken.clone();
            thread::spawn(move || {
                let (m, cv) = &*pair;
                let mut g = m.lock();
                cv.wait(&mut g);
                woken.fetch_add(1, Ordering::SeqCst);
            })
        })
        .collect();
    wait_until("every thread waits", || pair.1.raw().waiters() == n);
    threads
}

/// With waiters, `notify_one` returns true and exactly one `wait` returns
/// (no spurious wake-ups: the others stay listed and asleep).
#[test]
fn notify_one_wakes_exactly_one_waiter() {
    let pair = Arc::new((QSpinLock::new(()), Condvar::new()));
    let woken = Arc::new(AtomicUsize::new(0));
    let threads = start_waiters(&pair, &woken, 4);
    for expect in 1..=4 {
        assert!(pair.1.notify_one());
        wait_until("the notified waiter returns", || {
            woken.load(Ordering::SeqCst) == expect
        });
        // Nobody else comes out meanwhile.
        thread::sleep(Duration::from_millis(20));
        assert_eq!(woken.load(Ordering::SeqCst), expect);
        assert_eq!(pair.1.raw().waiters(), 4 - expect);
    }
    assert!(!pair.1.notify_one());
    for t in threads {
        t.join().unwrap();
    }
}

/// `notify_all` counts and wakes every waiter, with the mutex held by the
/// notifier (the chain starts when it unlocks) and without.
#[test]
fn notify_all_wakes_all_waiters() {
    for hold_while_notifying in [false, true] {
        let pair = Arc::new((QSpinLock::new(()), Condvar::new()));
        let woken = Arc::new(AtomicUsize::new(0));
        let threads = start_waiters(&pair, &woken, 8);
        let g = hold_while_notifying.then(|| pair.0.lock());
        assert_eq!(pair.1.notify_all(), 8);
        assert_eq!(pair.1.raw().waiters(), 0);
        assert_eq!(pair.1.notify_all(), 0);
        drop(g);
        for t in threads {
            t.join().unwrap();
        }
        assert_eq!(woken.load(Ordering::SeqCst), 8);
        assert!(!pair.0.is_locked());
    }
}

/// A notify for a condition that is not yet true (as a spurious wake-up
/// would be): `wait_while` waits again until it is.
#[test]
fn wait_while_waits_again_until_the_condition_holds() {
    let pair = Arc::new((QSpinLock::new(0u32), Condvar::new()));
    let threads: Vec<_> = (0..3)
        .map(|_| {
            let pair = pair.clone();
            thread::spawn(move || {
                let (m, cv) = &*pair;
                let mut g = m.lock();
                cv.wait_while(&mut g, |v| *v < 3);
                assert_eq!(*g, 3);
            })
        })
        .collect();
    for step in 1..=3 {
        wait_until("every thread waits", || pair.1.raw().waiters() == 3);
        *pair.0.lock() = step;
        assert_eq!(pair.1.notify_all(), 3);
    }
    for t in threads {
        t.join().unwrap();
    }
}

/// Timed waits never return early, time out within a generous bound, and
/// a deadline already passed returns at once.
#[test]
fn timed_waits_time_out_not_early() {
    let m: RawQSpinLock = RawQSpinLock::new();
    let cv: RawQCondvar = RawQCondvar::new();
    for ms in [1, 5, 20] {
        let timeout = Duration::from_millis(ms);
        let mut g = m.lock();
        let start = Instant::now();
        // SAFETY: `g` is the state of our hold of `m`.
        let timed_out = unsafe { cv.wait_timeout(&m, &mut g, timeout) };
        let took = start.elapsed();
        assert!(timed_out);
        assert!(
            took >= timeout,
            "returned after {took:?}, before {timeout:?}"
        );
        assert!(took < timeout + Duration::from_secs(5), "took {took:?}");
        assert!(m.is_locked());
        // SAFETY: as above.
        unsafe { m.unlock(g) };
    }
    let mut g = m.lock();
    // SAFETY: as above.
    assert!(unsafe { cv.wait_until_ns(&m, &mut g, 0) });
    // SAFETY: as above.
    unsafe { m.unlock(g) };
    assert_eq!(cv.waiters(), 0);
}

/// lock_api's timed waits on a `QSpinLock` guard (`RawCondvarTimed`):
/// `wait_for` and `wait_until` time out not early, `wait_while_for` returns
/// as soon as a notifier makes the condition false, and reports no timeout.
#[test]
fn lock_api_timed_waits_on_a_qspinlock_guard() {
    let m = QSpinLock::new(false);
    let cv = Condvar::new();
    let mut g = m.lock();
    for ms in [1, 10] {
        let timeout = Duration::from_millis(ms);
        let start = Instant::now();
        assert!(cv.wait_for(&mut g, timeout).timed_out());
        let took = start.elapsed();
        assert!(took >= timeout, "wait_for returned after {took:?}");
        assert!(took < timeout + Duration::from_secs(5), "took {took:?}");
        let deadline = Instant::now() + timeout;
        assert!(cv.wait_until(&mut g, deadline).timed_out());
        assert!(Instant::now() >= deadline, "wait_until returned early");
    }
    drop(g);
    let shared = Arc::new((m, cv));
    let notifier = {
        let shared = shared.clone();
        thread::spawn(move || {
            thread::sleep(Duration::from_millis(20));
            *shared.0.lock() = true;
            shared.1.notify_all();
        })
    };
    let mut g = shared.0.lock();
    let start = Instant::now();
    let r = shared
        .1
        .wait_while_for(&mut g, |ready| !*ready, Duration::from_secs(30));
    assert!(!r.timed_out(), "notified, yet timed out");
    assert!(*g);
    assert!(start.elapsed() < Duration::from_secs(20));
    drop(g);
    notifier.join().unwrap();
}

/// Timed waiters with tiny timeouts against a notifier: every waiter that
/// `notify_one` or `notify_all` reports matches exactly one wait that
/// reports a notification (a timed-out waiter is never counted, a notified one never
/// reports a timeout).
#[test]
fn notify_one_counts_match_timed_waits() {
    const WAITERS: usize = 4;
    let shared = Arc::new((
        RawQSpinLock::<scalelock::platform::DefaultPlatform>::new(),
        RawQCondvar::new(),
    ));
    let stop = Arc::new(AtomicBool::new(false));
    let waiters: Vec<_> = (0..WAITERS)
        .map(|i| {
            let shared = shared.clone();
            let stop = stop.clone();
            thread::spawn(move || {
                let (m, cv) = &*shared;
                let (mut notified, mut timeouts) = (0usize, 0usize);
                let mut x = i as u64 + 1;
                while !stop.load(Ordering::Relaxed) {
                    // xorshift: timeouts of 0 to 255 µs.
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    let timeout = Duration::from_micros(x % 256);
                    let mut g = m.lock();
                    // SAFETY: `g` is the state of our hold of `m`.
                    if unsafe { cv.wait_timeout(m, &mut g, timeout) } {
                        timeouts += 1;
                    } else {
                        notified += 1;
                    }
                    // SAFETY: as above.
                    unsafe { m.unlock(g) };
                }
                (notified, timeouts)
            })
        })
        .collect();
    // Waiters chosen by a notify: `notify_one`'s trues and `notify_all`'s
    // counts.
    let mut sent = 0;
    let start = Instant::now();
    let mut round = 0u64;
    while start.elapsed() < Duration::from_millis(300) {
        round += 1;
        if round.is_multiple_of(4) {
            sent += shared.1.notify_all();
        } else if shared.1.notify_one() {
            sent += 1;
        }
        thread::yield_now();
    }
    stop.store(true, Ordering::Relaxed);
    let (mut notified, mut timeouts) = (0, 0);
    for w in waiters {
        let (n, t) = w.join().unwrap();
        notified += n;
        timeouts += t;
    }
    assert_eq!(notified, sent, "{timeouts} timeouts");
    assert!(timeouts > 0);
    assert_eq!(shared.1.waiters(), 0);
    assert!(!shared.0.is_locked());
}

/// A condition that panics after a wait: the guard unwinds and unlocks the
/// mutex, the condvar has no waiter left, and both work afterwards.
#[test]
fn panicking_condition_leaves_mutex_and_condvar_consistent() {
    let pair = Arc::new((QSpinLock::new(0u32), Condvar::new()));
    let p2 = pair.clone();
    let t = thread::spawn(move || {
        let (m, cv) = &*p2;
        let mut g = m.lock();
        cv.wait_while(&mut g, |v| {
            assert!(*v != 1, "condition panics");
            *v == 0
        });
    });
    wait_until("the thread waits", || pair.1.raw().waiters() == 1);
    *pair.0.lock() = 1;
    assert!(pair.1.notify_one());
    assert!(t.join().is_err());
    assert!(!pair.0.is_locked());
    assert_eq!(pair.1.raw().waiters(), 0);

    // Both still work.
    let p3 = pair.clone();
    let t = thread::spawn(move || {
        let (m, cv) = &*p3;
        let mut g = m.lock();
        cv.wait_while(&mut g, |v| *v != 2);
    });
    wait_until("the thread waits", || pair.1.raw().waiters() == 1);
    *pair.0.lock() = 2;
    assert!(pair.1.notify_one());
    t.join().unwrap();
}

/// A `static` condvar with a `static` mutex (both `const`).
#[test]
fn static_condvar() {
    static M: QSpinLock<bool> = QSpinLock::new(false);
    static CV: Condvar = Condvar::new();
    let t = thread::spawn(|| {
        let mut g = M.lock();
        CV.wait_while(&mut g, |ready| !*ready);
    });
    wait_until("the thread waits", || CV.raw().waiters() == 1);
    *M.lock() = true;
    CV.notify_all();
    t.join().unwrap();
}
