//! A global allocator built on a `QSpinLock`, with statistics on. A
//! thread's first counted acquisition registers its fast counters in a
//! shared list (and, with lockdep on too, allocates the thread's block for
//! the class): after the lock is taken. If that allocates through the
//! global allocator (it did: the list is a `Vec` that grows at the 1st,
//! 2nd, 3rd, 5th, ... live thread, and the block a `Box`), the allocator's
//! thread comes back to the lock it holds and waits for itself.
//! Run with `--features stats`, and with `--features stats,lockdep`.
#![cfg(feature = "stats")]

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Barrier};
use std::time::Duration;

use scalelock::{ClassRef, LockClass, QSpinLock, RawQSpinLock};

static CLASS: LockClass = LockClass::new("allocator");
/// The allocator's lock; counts the allocations made through it.
static LOCK: QSpinLock<u64> =
    QSpinLock::from_raw(RawQSpinLock::with_class(ClassRef::of(&CLASS)), 0);
/// Allocations counted outside the lock, to compare with the locked count.
static COUNTED: AtomicU64 = AtomicU64::new(0);

std::thread_local! {
    /// Whether this thread's allocations take `LOCK`.
    static THROUGH_LOCK: Cell<bool> = const { Cell::new(false) };
}

struct OnALock;

impl OnALock {
    fn locked<R>(&self, f: impl FnOnce() -> R) -> R {
        if !THROUGH_LOCK.with(Cell::get) {
            return f();
        }
        let mut guard = LOCK.lock();
        *guard += 1;
        COUNTED.fetch_add(1, Ordering::Relaxed);
        f()
    }
}

// SAFETY: `System`'s, with a lock taken around each call.
unsafe impl GlobalAlloc for OnALock {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller's contract is `System`'s.
        self.locked(|| unsafe { System.alloc(layout) })
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: the caller's contract is `System`'s.
        self.locked(|| unsafe { System.dealloc(ptr, layout) })
    }
}

#[global_allocator]
static ALLOCATOR: OnALock = OnALock;

#[test]
fn a_thread_s_first_counted_acquisition_does_not_allocate_under_the_lock() {
    // A hang fails the test instead of the whole run.
    std::thread::spawn(|| {
        std::thread::sleep(Duration::from_secs(30));
        let _ = std::io::Write::write_all(
            &mut std::io::stderr(),
            b"the allocator's lock waited for itself (statistics)\n",
        );
        std::process::abort();
    });
    scalelock::stats::enable();
    // The class registered (and this thread's counters) with the allocator
    // plain.
    drop(LOCK.lock());
    // Threads that stay alive until all have allocated once through the
    // lock, their first acquisition of it: the list of live threads'
    // counters grows while one of them holds the lock.
    const THREADS: usize = 8;
    let all_done = Arc::new(Barrier::new(THREADS + 1));
    let threads: Vec<_> = (0..THREADS)
        .map(|_| {
            let all_done = Arc::clone(&all_done);
            std::thread::spawn(move || {
                THROUGH_LOCK.with(|t| t.set(true));
                drop(std::hint::black_box(Box::new(7u64)));
                THROUGH_LOCK.with(|t| t.set(false));
                all_done.wait();
            })
        })
        .collect();
    all_done.wait();
    for t in threads {
        t.join().unwrap();
    }
    let locked = *LOCK.lock();
    assert_eq!(
        locked,
        COUNTED.load(Ordering::Relaxed),
        "an update was lost"
    );
    assert!(
        locked >= 2 * THREADS as u64,
        "the allocations went through the lock"
    );
}
