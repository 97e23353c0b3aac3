//! Loom models of the queued spinlock's protocols: the uncontended fast
//! path, the pending (second contender) path, MCS queue hand-off, the batch
//! hand-off flag, and sleeping on the word (under loom a sleep is a yield, so
//! every interleaving around PARKED is explored).
//!
//! Run: `RUSTFLAGS="--cfg loom" LOOM_MAX_PREEMPTIONS=2 cargo test -p scalelock
//! --release --test loom_qspinlock`
#![cfg(loom)]

use loom::cell::UnsafeCell;
use loom::sync::Arc;
use loom::thread;

use lock_api::{RawMutex, RawMutexFair};
use scalelock::RawQSpinLock;

struct Shared {
    lock: RawQSpinLock,
    data: UnsafeCell<usize>,
}

// SAFETY: `data` is only touched with `lock` held; loom checks that claim.
unsafe impl Sync for Shared {}
unsafe impl Send for Shared {}

impl Shared {
    fn new() -> Arc<Self> {
        Arc::new(Shared {
            lock: RawQSpinLock::new(),
            data: UnsafeCell::new(0),
        })
    }

    fn increment(&self, fair: bool) {
        let guard = self.lock.lock();
        // SAFETY: the lock is held; loom reports a race if exclusion fails.
        self.data.with_mut(|d| unsafe { *d += 1 });
        // SAFETY: `guard` came from `lock()` above.
        unsafe {
            if fair {
                self.lock.unlock_fair(guard)
            } else {
                self.lock.unlock(guard)
            }
        }
    }

    fn value(&self) -> usize {
        // SAFETY: called after every other thread was joined.
        self.data.with(|d| unsafe { *d })
    }
}

fn model(f: impl Fn() + Sync + Send + 'static) {
    let mut builder = loom::model::Builder::new();
    if builder.preemption_bound.is_none() {
        builder.preemption_bound = Some(2);
    }
    builder.check(f);
}

/// Two threads: the fast path and the pending path, with exclusion and
/// a release/acquire hand-over of the data.
#[test]
fn two_threads_fast_and_pending_path() {
    model(|| {
        let s = Shared::new();
        let s2 = s.clone();
        let t = thread::spawn(move || s2.increment(false));
        s.increment(false);
        t.join().unwrap();
        assert_eq!(s.value(), 2);
        assert!(!s.lock.is_locked());
    });
}

/// A holder that re-acquires while another waits: exercises the batch end
/// (HANDOFF) and the word waiter's take-over.
#[test]
fn holder_reacquires_while_waiter_waits() {
    model(|| {
        let s = Shared::new();
        let s2 = s.clone();
        let t = thread::spawn(move || s2.increment(false));
        for _ in 0..2 {
            s.increment(false);
        }
        t.join().unwrap();
        assert_eq!(s.value(), 3);
    });
}

/// Three threads: the third contender queues on an MCS node and is handed
/// head-ship; fair unlocks reserve the lock for the word waiter.
#[test]
fn three_threads_queue_hand_off() {
    model(|| {
        let s = Shared::new();
        let handles: Vec<_> = (0..2)
            .map(|i| {
                let s = s.clone();
                thread::spawn(move || s.increment(i == 0))
            })
            .collect();
        s.increment(true);
        for h in handles {
            h.join().unwrap();
        }
        assert_eq!(s.value(), 3);
        assert!(!s.lock.is_locked());
    });
}

/// A model thread that takes `lock`, reads `x` (returned) and sets `y`
/// inside (the holders of the `wait_unlocked` models).
fn spawn_holder(
    lock: &Arc<RawQSpinLock>,
    x: &Arc<loom::sync::atomic::AtomicUsize>,
    y: &Arc<loom::sync::atomic::AtomicUsize>,
) -> thread::JoinHandle<usize> {
    use loom::sync::atomic::Ordering;
    let (lock, x, y) = (lock.clone(), x.clone(), y.clone());
    thread::spawn(move || {
        let g = lock.lock();
        let seen = x.load(Ordering::Relaxed);
        y.store(1, Ordering::Relaxed);
        // SAFETY: `g` came from `lock()` above.
        unsafe { lock.unlock(g) };
        seen
    })
}

/// Xen's `spin_barrier` contract: the caller's store before
/// `wait_unlocked` is seen by every holder that enters after the barrier
/// looked at the lock, and the barrier waits for a holder that entered
/// before (so the caller sees that holder's writes). Either the holder saw
/// `x`, or the caller saw `y`.
#[test]
fn wait_unlocked_orders_the_callers_store() {
    use loom::sync::atomic::{AtomicUsize, Ordering};
    model(|| {
        let lock: Arc<RawQSpinLock> = Arc::new(RawQSpinLock::new());
        let x = Arc::new(AtomicUsize::new(0));
        let y = Arc::new(AtomicUsize::new(0));
        let holder = spawn_holder(&lock, &x, &y);
        x.store(1, Ordering::Relaxed);
        lock.wait_unlocked();
        let after = y.load(Ordering::Relaxed);
        let seen = holder.join().unwrap();
        assert!(
            seen == 1 || after == 1,
            "the holder missed the caller's store, and the barrier did not wait for it"
        );
    });
}

/// The same with two holders, one of which may acquire after the barrier
/// first found the lock held and then saw it free: each holder saw `x`, or
/// the caller saw its `y`. Failed while the barrier's later looks were
/// plain loads (the second holder acquired from the first one's release
/// store, which the caller's load had read, so nothing ordered `x` before
/// it), as Linux's `spin_unlock_wait()` could.
#[test]
fn wait_unlocked_orders_the_callers_store_for_every_holder() {
    use loom::sync::atomic::{AtomicUsize, Ordering};
    model(|| {
        let lock: Arc<RawQSpinLock> = Arc::new(RawQSpinLock::new());
        let x = Arc::new(AtomicUsize::new(0));
        let ys = [Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0))];
        let holders = [
            spawn_holder(&lock, &x, &ys[0]),
            spawn_holder(&lock, &x, &ys[1]),
        ];
        x.store(1, Ordering::Relaxed);
        lock.wait_unlocked();
        let after = [ys[0].load(Ordering::Relaxed), ys[1].load(Ordering::Relaxed)];
        for (i, h) in holders.into_iter().enumerate() {
            let seen = h.join().unwrap();
            assert!(
                seen == 1 || after[i] == 1,
                "holder {i} missed the caller's store, and the barrier did not wait for it"
            );
        }
    });
}
