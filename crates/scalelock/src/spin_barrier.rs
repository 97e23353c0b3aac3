//! `RawQSpinLock::wait_unlocked`: Xen's `spin_barrier`.
//!
//! Waits until the holder at the time of the call (if any) has released
//! the lock, without taking part in the lock's queue unless it must:
//!
//! 1. **Look, with a StoreLoad barrier.** A free lock is confirmed with a
//!    `cmpxchg` that writes the value it reads (AcqRel), where Xen's
//!    `spin_barrier` starts with `smp_mb()`: every later acquirer's
//!    `cmpxchg` reads from it (or from a later write), so it sees the
//!    caller's earlier stores, and nothing more is owed. Acquire: the last
//!    holder's writes are visible. A held lock is left unwritten.
//! 2. **Watch the holder** for `qs_barrier_steps` of backoff, each look the
//!    same `cmpxchg` as step 1: once the lock is seen not held, the holder
//!    present at step 1 has released (Acquire: its writes are visible), and
//!    the `cmpxchg` that saw it is what every later acquirer reads from, as
//!    in step 1. (A plain load here, as Linux's `spin_unlock_wait()` did,
//!    left the caller's stores unordered against a holder that acquired
//!    after that load, from the release store the load saw: with two
//!    holders, the second could miss them while the barrier did not wait
//!    for it, the store-buffering case that made Linux give the primitive
//!    up. The loom model `wait_unlocked_orders_the_callers_store_for_every_holder`
//!    finds it.)
//! 3. **Otherwise take the lock and release it.** Under saturation the lock
//!    is free only for an instant between holders and a watcher may never
//!    see it free; an acquisition ends in bounded time (batches are bounded
//!    and the queue is FIFO) and comes after the holder present at step 1.
//!    This is what Linux did when it removed `spin_unlock_wait()` (2017):
//!    every caller became `spin_lock(); spin_unlock();`. The cost is that
//!    the barrier may wait for waiters queued before it too.
//!
//! Returns with Acquire semantics: everything the awaited holder did before
//! releasing happens before the return. A caller that holds the lock itself
//! deadlocks, as with any lock.

use lock_api::RawMutex;

use crate::platform::Platform;
use crate::qspinlock::RawQSpinLock;
use crate::wait::{Backoff, TUNING};

impl<P: Platform> RawQSpinLock<P> {
    /// Waits until the current holder, if any, has released the lock (see
    /// the module docs of `spin_barrier` for the exact promise). Does not
    /// acquire the lock unless the holder keeps it (or the lock keeps being
    /// re-taken) for longer than a short spin; the caller's stores before
    /// the call are visible to every holder that acquires after it.
    #[inline]
    pub fn wait_unlocked(&self) {
        if self.core.barrier_look() {
            self.wait_unlocked_slow();
        }
    }

    #[cold]
    fn wait_unlocked_slow(&self) {
        let mut backoff = Backoff::new();
        while backoff.steps() < TUNING.qs_barrier_steps {
            backoff.snooze::<P>();
            if !self.core.barrier_look() {
                return;
            }
        }
        let guard = self.lock();
        // SAFETY: `guard` came from `lock()` just above.
        unsafe { self.unlock(guard) };
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use crate::QSpinLock;
    use crate::sync::atomic::{AtomicBool, AtomicU64, Ordering};
    use std::sync::Arc;
    use std::thread;
    use std::time::{Duration, Instant};

    #[test]
    fn free_lock_returns_at_once() {
        let lock = QSpinLock::new(());
        // SAFETY: only `wait_unlocked` is used on the raw lock.
        unsafe { lock.raw() }.wait_unlocked();
        assert!(!lock.is_locked());
    }

    /// A holder that sleeps in its critical section: the barrier waits for
    /// it (taking the lock after its spin).
    #[test]
    fn waits_through_a_long_hold() {
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

    /// Under saturation (two threads re-taking the lock back to back, so it
    /// is free only for instants) every barrier still returns promptly.
    #[test]
    fn terminates_under_saturation() {
        if cfg!(miri) {
            return;
        }
        let lock = Arc::new(QSpinLock::new(0u64));
        let stop = Arc::new(AtomicBool::new(false));
        let hammers: Vec<_> = (0..2)
            .map(|_| {
                let (lock, stop) = (lock.clone(), stop.clone());
                thread::spawn(move || {
                    while !stop.load(Ordering::Relaxed) {
                        *lock.lock() += 1;
                    }
                })
            })
            .collect();
        thread::sleep(Duration::from_millis(20));
        let start = Instant::now();
        for _ in 0..20 {
            // SAFETY: only `wait_unlocked` is used on the raw lock.
            unsafe { lock.raw() }.wait_unlocked();
        }
        let took = start.elapsed();
        stop.store(true, Ordering::Relaxed);
        for h in hammers {
            h.join().unwrap();
        }
        assert!(took < Duration::from_secs(10), "20 barriers took {took:?}");
    }
}
