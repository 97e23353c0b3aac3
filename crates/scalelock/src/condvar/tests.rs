//! Unit tests of `RawQCondvar` (small enough for Miri: they exercise the
//! waiter list's raw pointers, the chain and the timed-out unlink).

use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::thread;

use super::*;
use crate::QSpinLock;

/// Waits until `cv` has `n` listed waiters.
fn until_waiters(cv: &RawQCondvar, n: usize) {
    while cv.waiters() != n {
        thread::yield_now();
    }
}

#[test]
#[cfg(target_pointer_width = "64")]
fn is_32_bytes() {
    // The list lock, the list's ends and the mutex address (documented).
    assert_eq!(core::mem::size_of::<RawQCondvar>(), 32);
}

#[test]
fn notify_without_waiters_notifies_nobody() {
    let cv: RawQCondvar = RawQCondvar::new();
    assert!(!cv.notify_one());
    assert_eq!(cv.notify_all(), 0);
}

#[test]
fn notify_one_wakes_the_waiter() {
    let pair = Arc::new((QSpinLock::new(false), Condvar::new()));
    let p2 = pair.clone();
    let t = thread::spawn(move || {
        let (m, cv) = &*p2;
        let mut g = m.lock();
        cv.wait_while(&mut g, |ready| !*ready);
    });
    until_waiters(pair.1.raw(), 1);
    *pair.0.lock() = true;
    assert!(pair.1.notify_one());
    t.join().unwrap();
    assert_eq!(pair.1.raw().waiters(), 0);
    assert!(!pair.0.is_locked());
}

/// Three waiters: `notify_all` counts all three; the chain wakes them all.
#[test]
fn notify_all_chain_wakes_everyone() {
    let pair = Arc::new((QSpinLock::new(0u32), Condvar::new()));
    let threads: Vec<_> = (0..3)
        .map(|_| {
            let p = pair.clone();
            thread::spawn(move || {
                let (m, cv) = &*p;
                let mut g = m.lock();
                cv.wait(&mut g);
                *g += 1;
            })
        })
        .collect();
    until_waiters(pair.1.raw(), 3);
    let g = pair.0.lock();
    assert_eq!(pair.1.notify_all(), 3);
    assert_eq!(pair.1.raw().waiters(), 0);
    drop(g);
    for t in threads {
        t.join().unwrap();
    }
    assert_eq!(*pair.0.lock(), 3);
}

/// A timed-out waiter leaves the list; its neighbours stay linked.
#[test]
fn timed_out_waiter_unlinks_itself() {
    let raw = Arc::new((RawQSpinLock::<DefaultPlatform>::new(), RawQCondvar::new()));
    let done = Arc::new(AtomicBool::new(false));
    let long = {
        let raw = raw.clone();
        let done = done.clone();
        thread::spawn(move || {
            let (m, cv) = &*raw;
            let mut g = m.lock();
            // SAFETY: `g` is the state of our hold of `m`.
            let timed_out = unsafe { cv.wait_until_ns(m, &mut g, NEVER) };
            assert!(!timed_out);
            done.store(true, core::sync::atomic::Ordering::Relaxed);
            // SAFETY: as above.
            unsafe { m.unlock(g) };
        })
    };
    until_waiters(&raw.1, 1);
    let (m, cv) = &*raw;
    let mut g = m.lock();
    // SAFETY: `g` is the state of our hold of `m`.
    let timed_out = unsafe { cv.wait_timeout(m, &mut g, Duration::from_millis(1)) };
    assert!(timed_out);
    assert_eq!(cv.waiters(), 1);
    assert!(cv.notify_one());
    // SAFETY: as above.
    unsafe { m.unlock(g) };
    long.join().unwrap();
    assert!(done.load(core::sync::atomic::Ordering::Relaxed));
    assert_eq!(cv.waiters(), 0);
}

#[test]
fn two_mutexes_at_once_panic_before_unlocking() {
    let raw = Arc::new((
        RawQSpinLock::<DefaultPlatform>::new(),
        RawQSpinLock::<DefaultPlatform>::new(),
        RawQCondvar::new(),
    ));
    let r2 = raw.clone();
    let waiter = thread::spawn(move || {
        let (a, _, cv) = &*r2;
        let mut g = a.lock();
        // SAFETY: `g` is the state of our hold of `a`.
        unsafe { cv.wait(a, &mut g) };
        // SAFETY: as above.
        unsafe { a.unlock(g) };
    });
    until_waiters(&raw.2, 1);
    let (_, b, cv) = &*raw;
    let mut g = b.lock();
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        // SAFETY: `g` is the state of our hold of `b`.
        unsafe { cv.wait(b, &mut g) }
    }));
    assert!(r.is_err());
    // Still held by us, as before the call.
    assert!(b.is_locked());
    // SAFETY: as above.
    unsafe { b.unlock(g) };
    assert!(cv.notify_one());
    waiter.join().unwrap();
}
