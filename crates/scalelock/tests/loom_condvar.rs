//! Loom models of the condition variable: a notify between the waiter's
//! unlock and its sleep is not lost (the waiter has no spurious returns, so
//! a lost notify is a loom deadlock), `notify_all`'s wake chain reaches
//! every waiter, and a timed-out waiter and a notify agree on who was
//! notified (`notify_one` true exactly when the wait reports a
//! notification).
//!
//! Run: `RUSTFLAGS="--cfg loom" LOOM_MAX_PREEMPTIONS=2 cargo test -p scalelock
//! --release --test loom_condvar`
#![cfg(loom)]

use loom::cell::UnsafeCell;
use loom::sync::Arc;
use loom::thread;

use lock_api::{RawCondvar, RawMutex};
use scalelock::{RawQCondvar, RawQSpinLock};

struct Shared {
    lock: RawQSpinLock,
    cv: RawQCondvar,
    /// Set under `lock`; loom checks that claim.
    ready: UnsafeCell<bool>,
}

// SAFETY: `ready` is only touched with `lock` held; loom checks that claim.
unsafe impl Sync for Shared {}
unsafe impl Send for Shared {}

impl Shared {
    fn new() -> Arc<Self> {
        Arc::new(Shared {
            lock: RawQSpinLock::new(),
            cv: RawQCondvar::new(),
            ready: UnsafeCell::new(false),
        })
    }

    /// `wait_while(!ready)` on the raw API.
    fn wait_until_ready(&self) {
        let mut g = self.lock.lock();
        // SAFETY: the lock is held (loom reports a race otherwise).
        while !self.ready.with(|r| unsafe { *r }) {
            // SAFETY: `g` is the state of our hold of `lock`.
            unsafe { self.cv.wait(&self.lock, &mut g) };
        }
        // SAFETY: as above.
        unsafe { self.lock.unlock(g) };
    }

    /// Sets `ready` under the lock; notifies inside or after the critical
    /// section. Returns what the notify returned.
    fn set_ready(&self, all: bool, inside: bool) -> usize {
        let g = self.lock.lock();
        // SAFETY: the lock is held.
        self.ready.with_mut(|r| unsafe { *r = true });
        let notify = || {
            if all {
                self.cv.notify_all()
            } else {
                usize::from(self.cv.notify_one())
            }
        };
        let n = if inside { notify() } else { 0 };
        // SAFETY: `g` came from `lock()` above.
        unsafe { self.lock.unlock(g) };
        if inside { n } else { notify() }
    }
}

fn model(f: impl Fn() + Sync + Send + 'static) {
    let mut builder = loom::model::Builder::new();
    if builder.preemption_bound.is_none() {
        builder.preemption_bound = Some(2);
    }
    builder.check(f);
}

/// The notify after the notifier's unlock races with every step of the
/// waiter's enqueue / unlock / ticket / re-check / sleep.
#[test]
fn notify_one_after_unlock_is_not_lost() {
    model(|| {
        let s = Shared::new();
        let s2 = s.clone();
        let t = thread::spawn(move || s2.wait_until_ready());
        s.set_ready(false, false);
        t.join().unwrap();
        assert!(!s.lock.is_locked());
    });
}

/// The notify inside the critical section: the waiter wakes, finds the
/// mutex held, and re-locks after the notifier's unlock.
#[test]
fn notify_one_inside_the_lock_is_not_lost() {
    model(|| {
        let s = Shared::new();
        let s2 = s.clone();
        let t = thread::spawn(move || s2.wait_until_ready());
        s.set_ready(false, true);
        t.join().unwrap();
        assert!(!s.lock.is_locked());
    });
}

/// Two waiters, one `notify_all`: the first is woken, the second only
/// through the chain, after the first re-locked. A chain that stops is a
/// loom deadlock.
#[test]
fn notify_all_chain_reaches_every_waiter() {
    // Two preemptions are needed for both waiters to sleep before the
    // notify (with one, no execution has two waiters to chain).
    model(|| {
        let s = Shared::new();
        let waiters: Vec<_> = (0..2)
            .map(|_| {
                let s = s.clone();
                thread::spawn(move || s.wait_until_ready())
            })
            .collect();
        s.set_ready(true, false);
        for w in waiters {
            w.join().unwrap();
        }
        assert!(!s.lock.is_locked());
    });
}

/// A wait whose deadline has passed (loom's clock reads 0) races with
/// `notify_one`: either the notify chose the waiter (true, and the wait
/// reports a notification) or the waiter left the list first (false, and
/// it reports a timeout). Never both, never neither.
#[test]
fn timed_out_waiter_and_notify_agree() {
    model(|| {
        let s = Shared::new();
        let s2 = s.clone();
        let notifier = thread::spawn(move || s2.cv.notify_one());
        let mut g = s.lock.lock();
        // SAFETY: `g` is the state of our hold of `lock`.
        let timed_out = unsafe { s.cv.wait_until_ns(&s.lock, &mut g, 0) };
        // SAFETY: as above.
        unsafe { s.lock.unlock(g) };
        let notified = notifier.join().unwrap();
        assert_eq!(notified, !timed_out);
        assert_eq!(s.cv.waiters(), 0);
    });
}
