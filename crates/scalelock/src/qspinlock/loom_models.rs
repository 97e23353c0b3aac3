//! Loom models that need the lock's internals: each waits until a waiter
//! really sleeps before releasing, so the sleep/wake protocols are explored,
//! not just spinning; a lost wake-up is a loom deadlock.

use super::*;
use crate::platform::LoomPlatform;
use crate::qnode::NODE_PARKED;
use loom::sync::Arc;
use loom::thread;

type Lock = RawQSpinLock<LoomPlatform>;

fn until(cond: impl Fn() -> bool) {
    while !cond() {
        thread::yield_now();
    }
}

fn model(f: impl Fn() + Sync + Send + 'static) {
    // These models run sleep/poll loops: one preemption keeps them to
    // seconds while still interleaving the release with every step of the
    // sleeper's announce / fence / re-check / sleep sequence.
    let mut builder = loom::model::Builder::new();
    builder.preemption_bound = Some(1);
    builder.check(f);
}

fn lock_unlock(l: &Lock) {
    let g = l.lock();
    // SAFETY: `g` came from `lock()` just above.
    unsafe { l.unlock(g) };
}

/// The word waiter claims the lock, the holder keeps it, the waiter sleeps
/// until a release (hybrid mode); the holder's plain-store release must
/// wake it through the parking bucket and the fence pair.
#[test]
fn word_waiter_sleeps_until_the_release() {
    model(|| {
        let lock = Arc::new(Lock::new());
        let g = lock.lock();
        let t = {
            let l = lock.clone();
            thread::spawn(move || lock_unlock(&l))
        };
        until(|| parking::announced(lock.addr()));
        // SAFETY: `g` came from `lock()` above.
        unsafe { lock.unlock(g) };
        t.join().unwrap();
        assert!(!lock.is_locked());
    });
}

/// A queue head without predecessor sleeps (HEAD_PARKED) until the word
/// waiter takes the lock and clears PENDING.
#[test]
fn queue_head_sleeps_until_pending_clears() {
    model(|| {
        let lock = Arc::new(Lock::new());
        let g = lock.lock();
        let waiters: Vec<_> = (0..2)
            .map(|_| {
                let l = lock.clone();
                thread::spawn(move || lock_unlock(&l))
            })
            .collect();
        until(|| lock.core.flags.load(Ordering::SeqCst) & HEAD_PARKED != 0);
        // SAFETY: `g` came from `lock()` above.
        unsafe { lock.unlock(g) };
        for t in waiters {
            t.join().unwrap();
        }
        assert!(!lock.is_locked());
        assert_eq!(lock.state(), (FREE, 0, 0));
    });
}

/// A node queued behind the head sleeps on its node until its predecessor,
/// now the word waiter, acquires the lock and makes it head (handing it
/// PENDING). Four threads: explored without preemptions (switches only where
/// a thread blocks or spins), which still interleaves every sleep with every
/// wake of this protocol.
#[test]
fn queued_node_sleeps_until_made_head() {
    let mut builder = loom::model::Builder::new();
    builder.preemption_bound = Some(0);
    builder.check(|| {
        let lock = Arc::new(Lock::new());
        let g = lock.lock();
        let spawn = |lock: &Arc<Lock>| {
            let l = lock.clone();
            thread::spawn(move || lock_unlock(&l))
        };
        // The word waiter first, so the next two queue.
        let w = spawn(&lock);
        until(|| lock.core.flags.load(Ordering::SeqCst) & PENDING != 0);
        let a = spawn(&lock);
        until(|| lock.core.tail.load(Ordering::SeqCst) != 0);
        let b = spawn(&lock);
        // Wait for the last node to be asleep on its node.
        until(|| {
            let tail = lock.core.tail.load(Ordering::SeqCst);
            NodeIndex::new(tail).is_some_and(|i| {
                <LoomPlatform as Platform>::node(i)
                    .state
                    .load(Ordering::SeqCst)
                    == NODE_PARKED
            })
        });
        // SAFETY: `g` came from `lock()` above.
        unsafe { lock.unlock(g) };
        for t in [w, a, b] {
            t.join().unwrap();
        }
        assert_eq!(lock.state(), (FREE, 0, 0));
    });
}
