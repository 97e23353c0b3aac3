//! A global allocator built on two locks of this crate, one taken inside
//! the other (a heap lock, then an arena lock), with lockdep on. The
//! order heap -> arena is recorded once, with the allocator plain; a new
//! thread's first nested acquisition then only looks the dependency up.
//! If that lookup allocates (it did: each thread remembered the
//! dependencies it had seen in a `HashSet`, which allocated on its first
//! insert, with the heap lock held), the allocator's thread comes back to
//! the heap lock it holds and waits for itself.
//! Run with `--features lockdep`.
#![cfg(feature = "lockdep")]

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::time::Duration;

use scalelock::{ClassRef, LockClass, QSpinLock, RawQSpinLock};

static HEAP_CLASS: LockClass = LockClass::new("heap");
static ARENA_CLASS: LockClass = LockClass::new("arena");
static HEAP: QSpinLock<u64> =
    QSpinLock::from_raw(RawQSpinLock::with_class(ClassRef::of(&HEAP_CLASS)), 0);
static ARENA: QSpinLock<u64> =
    QSpinLock::from_raw(RawQSpinLock::with_class(ClassRef::of(&ARENA_CLASS)), 0);

std::thread_local! {
    /// Whether this thread's allocations take the locks.
    static THROUGH_LOCKS: Cell<bool> = const { Cell::new(false) };
}

struct OnTwoLocks;

impl OnTwoLocks {
    fn locked<R>(&self, f: impl FnOnce() -> R) -> R {
        if !THROUGH_LOCKS.with(Cell::get) {
            return f();
        }
        let mut heap = HEAP.lock();
        let mut arena = ARENA.lock();
        *heap += 1;
        *arena += 1;
        f()
    }
}

// SAFETY: `System`'s, with locks taken around each call.
unsafe impl GlobalAlloc for OnTwoLocks {
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
static ALLOCATOR: OnTwoLocks = OnTwoLocks;

#[test]
fn a_known_dependency_is_looked_up_without_allocating() {
    // A hang fails the test instead of the whole run.
    std::thread::spawn(|| {
        std::thread::sleep(Duration::from_secs(30));
        let _ = std::io::Write::write_all(
            &mut std::io::stderr(),
            b"the allocator's heap lock waited for itself (lockdep)\n",
        );
        std::process::abort();
    });
    assert!(scalelock::lockdep::is_enabled());
    // Both classes registered, and the order recorded, with the allocator
    // plain (as class registration must be: see `LockClass`).
    {
        let _heap = HEAP.lock();
        let _arena = ARENA.lock();
    }
    for _ in 0..4 {
        std::thread::spawn(|| {
            THROUGH_LOCKS.with(|t| t.set(true));
            drop(std::hint::black_box(Box::new(7u64)));
            THROUGH_LOCKS.with(|t| t.set(false));
        })
        .join()
        .unwrap();
    }
    assert!(*HEAP.lock() >= 8, "the allocations went through the locks");
}
