//! `RawQSpinLock::wait_unlocked`: Xen's `spin_barrier` (seed 003).
//!
//! Returns once the lock has been seen free at some moment after the call
//! began, with Acquire semantics: everything the holder did before that
//! release happens before our return. If the lock is free on entry, that
//! takes one load and a fence.
//!
//! What it can promise is "the holder at the time of the call has released,
//! and so has every holder before the first moment we saw the lock free".
//! Between two holders the lock byte is free only for an instant, so under
//! continuous contention a waiter may miss it and wait for a later holder
//! too; it never returns *before* the current holder released. The seed's
//! pmtimer fix needs a stronger promise (wait for the *next* complete update,
//! never longer), which [`crate::RefreshOnce`] gives with its own generation
//! word rather than with this barrier.
//!
//! Waiting is [`Backoff`]: spin on loads, yielding the CPU once the budget
//! is spent so a preempted holder can finish; a holder that keeps the lock
//! longer than that (it sleeps in its critical section, say) is waited for
//! asleep, with the lock's own word-waiter protocol (`PARKED`, woken by the
//! release; see `qspinlock`).

use lock_api::RawMutex;

use crate::platform::Platform;
use crate::qspinlock::RawQSpinLock;
use crate::sync::atomic::{Ordering, fence};
use crate::wait::Backoff;

/// Backoff steps before sleeping (the last few of them yield).
const SPIN_STEPS: u32 = if cfg!(loom) { 2 } else { 16 };

impl<P: Platform> RawQSpinLock<P> {
    /// Waits until the current holder, if any, has released the lock
    /// (see the module docs of `spin_barrier` for the exact promise).
    ///
    /// Synchronizes with that release: the holder's writes are visible
    /// afterwards. Does not acquire the lock.
    #[inline]
    pub fn wait_unlocked(&self) {
        if self.is_locked() {
            self.wait_unlocked_slow();
        }
        // `is_locked` is a Relaxed load; this fence makes it Acquire. Pairs
        // with the holder's Release store that freed the lock.
        fence(Ordering::Acquire);
    }

    #[cold]
    fn wait_unlocked_slow(&self) {
        let mut backoff = Backoff::new();
        while self.is_locked() {
            if backoff.steps() > SPIN_STEPS {
                self.sleep_until_unlocked(0);
            } else {
                backoff.snooze::<P>();
            }
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use crate::QSpinLock;
    use crate::sync::atomic::{AtomicBool, AtomicU64, Ordering};
    use std::sync::Arc;
    use std::thread;
    use std::time::Duration;

    #[test]
    fn free_lock_returns_at_once() {
        let lock = QSpinLock::new(());
        // SAFETY: only `wait_unlocked` is used on the raw lock.
        unsafe { lock.raw() }.wait_unlocked();
    }

    /// A holder that sleeps in its critical section: the barrier sleeps too
    /// and is woken by the release.
    #[test]
    fn sleeps_through_a_long_hold() {
        if cfg!(miri) {
            return;
        }
        let lock = Arc::new(QSpinLock::new(()));
        let released = Arc::new(AtomicBool::new(false));
        let g = lock.lock();
        let waiter = {
            let (lock, released) = (lock.clone(), released.clone());
            thread::spawn(move || {
                // SAFETY: only `wait_unlocked` is used on the raw lock.
                unsafe { lock.raw() }.wait_unlocked();
                assert!(released.load(Ordering::Relaxed), "returned early");
            })
        };
        thread::sleep(Duration::from_millis(30));
        released.store(true, Ordering::Relaxed);
        drop(g);
        waiter.join().unwrap();
    }

    /// The barrier returns only after the holder released, and sees what the
    /// holder wrote before releasing.
    #[test]
    fn waits_for_the_holder_and_sees_its_writes() {
        let rounds = if cfg!(miri) { 3 } else { 50 };
        for _ in 0..rounds {
            let lock = Arc::new(QSpinLock::new(()));
            let data = Arc::new(AtomicU64::new(0));
            let released = Arc::new(AtomicBool::new(false));
            let g = lock.lock();
            let waiter = {
                let (lock, data, released) = (lock.clone(), data.clone(), released.clone());
                thread::spawn(move || {
                    // SAFETY: only `wait_unlocked` is used on the raw lock.
                    unsafe { lock.raw() }.wait_unlocked();
                    assert!(released.load(Ordering::Relaxed), "returned early");
                    assert_eq!(data.load(Ordering::Relaxed), 42);
                })
            };
            if !cfg!(miri) {
                thread::sleep(Duration::from_micros(200));
            }
            data.store(42, Ordering::Relaxed);
            released.store(true, Ordering::Relaxed);
            drop(g);
            waiter.join().unwrap();
        }
    }
}
