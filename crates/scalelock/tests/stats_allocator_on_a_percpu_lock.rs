//! A global allocator built on a `PerCpuRwLock` (writes), with statistics
//! on. A write that finds the reader bias on revokes it, and statistics
//! record the revocation in the thread's block for the class, with the
//! write lock held. If that block is allocated through the global
//! allocator (it was, on the thread's first revocation of the class), the
//! allocator's thread comes back to the lock it holds and waits for
//! itself. Run with `--features stats`.
#![cfg(feature = "stats")]

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::time::Duration;

use scalelock::{ClassRef, LockClass, PerCpuRwLock, QSpinLock, RawPerCpuRwLock, RawQSpinLock};

static CLASS: LockClass = LockClass::new("allocator");
/// The allocator's lock; counts the allocations made through it.
static LOCK: PerCpuRwLock<u64> =
    PerCpuRwLock::from_raw(RawPerCpuRwLock::with_class(ClassRef::of(&CLASS)), 0);
static OTHER_CLASS: LockClass = LockClass::new("other");
/// Registers the class, with the allocator plain (the allocator's lock
/// stays fresh: biased at its first write).
static REGISTER: PerCpuRwLock<u64> =
    PerCpuRwLock::from_raw(RawPerCpuRwLock::with_class(ClassRef::of(&CLASS)), 0);
/// Another lock: the thread's first counted acquisition, with the
/// allocator plain.
static OTHER: QSpinLock<()> =
    QSpinLock::from_raw(RawQSpinLock::with_class(ClassRef::of(&OTHER_CLASS)), ());

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
        let mut guard = LOCK.write();
        *guard += 1;
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
fn a_thread_s_first_revocation_does_not_allocate_under_the_write_lock() {
    // A hang fails the test instead of the whole run.
    std::thread::spawn(|| {
        std::thread::sleep(Duration::from_secs(30));
        let _ = std::io::Write::write_all(
            &mut std::io::stderr(),
            b"the allocator's lock waited for itself (revocation statistics)\n",
        );
        std::process::abort();
    });
    scalelock::stats::enable();
    // The class registered with the allocator plain.
    drop(REGISTER.write());
    let revocations = || {
        let snap = scalelock::stats::snapshot();
        let st = snap.class("allocator").expect("the allocator's class");
        st.events.revocations.count
    };
    let before = revocations();
    std::thread::spawn(|| {
        // Counted once with the allocator plain (the thread's counters
        // registered, and a block for the other class).
        drop(OTHER.lock());
        // Reads: the first gives the lock its id and the bias, the next
        // take it, so the next write revokes it.
        for _ in 0..10 {
            drop(LOCK.read());
        }
        THROUGH_LOCK.with(|t| t.set(true));
        drop(std::hint::black_box(Box::new(7u64)));
        THROUGH_LOCK.with(|t| t.set(false));
    })
    .join()
    .unwrap();
    assert!(*LOCK.read() >= 2, "the allocations went through the lock");
    assert!(revocations() > before, "the write revoked the bias");
}
