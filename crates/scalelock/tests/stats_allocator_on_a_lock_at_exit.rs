//! A global allocator built on a `QSpinLock`, with statistics on, and a
//! thread that exits with statistics blocks: its thread-local destructor
//! gives them to the pool (under the pool's mutex) and frees its block
//! list. If that went through the global allocator (it did: the pool's
//! `Vec`s grew and the list was freed under the mutex), the exiting thread
//! took the allocator's lock, whose acquisition, the thread's counters
//! gone, counts in the shared fallback blocks: allocated (under the lock)
//! on first use, from the pool (under its mutex, held by this thread).
//! Run with `--features stats`.
#![cfg(feature = "stats")]

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::time::Duration;

use scalelock::{ClassRef, LockClass, QSpinLock, RawQSpinLock};

static CLASS: LockClass = LockClass::new("allocator");
/// The allocator's lock.
static LOCK: QSpinLock<()> =
    QSpinLock::from_raw(RawQSpinLock::with_class(ClassRef::of(&CLASS)), ());
static OTHER_CLASS: LockClass = LockClass::new("other");
/// Another lock, whose sampled hold gives the thread a statistics block.
static OTHER: QSpinLock<()> =
    QSpinLock::from_raw(RawQSpinLock::with_class(ClassRef::of(&OTHER_CLASS)), ());

std::thread_local! {
    /// Whether this thread's allocations take `LOCK`: a const
    /// thread-local without a destructor, readable in every thread-local
    /// destructor.
    static THROUGH_LOCK: Cell<bool> = const { Cell::new(false) };
}

/// Makes the thread's allocations take `LOCK` when it is destroyed: at
/// thread exit, before the thread-local destructors registered before it
/// (they run in reverse order), the statistics' among them.
struct ThroughLockFromHere;

impl Drop for ThroughLockFromHere {
    fn drop(&mut self) {
        THROUGH_LOCK.with(|t| t.set(true));
    }
}

std::thread_local! {
    static AT_EXIT: ThroughLockFromHere = const { ThroughLockFromHere };
}

struct OnALock;

impl OnALock {
    fn locked<R>(&self, f: impl FnOnce() -> R) -> R {
        let _guard = THROUGH_LOCK.with(Cell::get).then(|| LOCK.lock());
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
fn an_exiting_thread_gives_its_statistics_blocks_back_without_the_global_allocator() {
    // A hang fails the test instead of the whole run.
    std::thread::spawn(|| {
        std::thread::sleep(Duration::from_secs(30));
        let _ = std::io::Write::write_all(
            &mut std::io::stderr(),
            b"the exiting thread waited for itself (statistics)\n",
        );
        std::process::abort();
    });
    scalelock::stats::enable();
    // The class registered with the allocator plain.
    drop(LOCK.lock());
    std::thread::spawn(|| {
        // A thread's first hold is sampled: its release records the hold
        // time in the thread's block for `OTHER`'s class.
        drop(OTHER.lock());
        AT_EXIT.with(|_| {});
    })
    .join()
    .unwrap();
    // And a second one, whose blocks join the first's in the pool.
    std::thread::spawn(|| {
        drop(OTHER.lock());
        drop(LOCK.lock());
        AT_EXIT.with(|_| {});
    })
    .join()
    .unwrap();
}
