//! A global allocator built on a lock of this crate, with the hooks
//! compiled in: the hooks' own first steps must not deadlock on it. The
//! first patch of the hooks' switch into the code (x86-64 Linux) allocates
//! while it holds the patching mutex; the allocator's lock then finds the
//! sites unpatched and the switch off, and asks to patch: it must not wait
//! for the mutex its own thread holds (it waited: a hang at
//! `lockdep::set_enabled(false)`).
#![cfg(all(feature = "lockdep", target_arch = "x86_64", target_os = "linux"))]

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use scalelock::{ClassRef, LockClass, SeqLock};

static CLASS: LockClass = LockClass::new("allocator");
static LOCK: SeqLock<u32> = SeqLock::with_class(0, ClassRef::of(&CLASS));
/// The allocator takes `LOCK` only while the test says so.
static THROUGH_LOCK: AtomicBool = AtomicBool::new(false);

struct OnALock;

// SAFETY: `System`'s, with a lock taken around each call.
unsafe impl GlobalAlloc for OnALock {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let _guard = THROUGH_LOCK.load(Ordering::Relaxed).then(|| LOCK.lock());
        // SAFETY: the caller's contract is `System`'s.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        let _guard = THROUGH_LOCK.load(Ordering::Relaxed).then(|| LOCK.lock());
        // SAFETY: the caller's contract is `System`'s.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static ALLOCATOR: OnALock = OnALock;

#[test]
fn the_first_patch_does_not_wait_for_itself() {
    // The class registered while the allocator is plain.
    drop(LOCK.lock());
    // A hang fails the test instead of the whole run.
    std::thread::spawn(|| {
        std::thread::sleep(Duration::from_secs(20));
        // Plain allocations from here (the message allocates).
        THROUGH_LOCK.store(false, Ordering::Relaxed);
        eprintln!("the first patch waited for itself");
        std::process::abort();
    });
    // Lockdep is on from the start when compiled in: the sites are still
    // unpatched.
    assert!(!scalelock::hook::switch_is_patched());
    THROUGH_LOCK.store(true, Ordering::Relaxed);
    // Switching the hooks off patches the sites (and allocates).
    scalelock::lockdep::set_enabled(false);
    drop(LOCK.lock());
    THROUGH_LOCK.store(false, Ordering::Relaxed);
    let refused =
        std::env::var_os("SCALELOCK_NO_CODE_PATCHING").is_some_and(|v| !v.is_empty() && v != "0");
    assert!(scalelock::hook::switch_is_patched() || refused);
}
