//! A global allocator built on a `PerCpuRwLock`, every allocation through
//! it, in a process started with `SCALELOCK_NO_MEMBARRIER=1` (the setting
//! for programs that sandbox themselves). Before `main` the std platform
//! decides its fences: it reads that variable, which allocates (the value
//! is copied out), while the decision is in progress. The allocation
//! writes the lock, whose first write gives it an id and its mode, which
//! asks the fences' decision: the thread waited for its own decision, and
//! the program hung before `main`.
//!
//! Not with the hooks compiled in: this allocator takes its lock from the
//! process's first allocation on, before its class could be registered
//! (see `LockClass`, "A global allocator on a lock of this crate").
#![cfg(all(
    feature = "std",
    not(any(feature = "stats", feature = "lockdep")),
    target_os = "linux",
    not(any(loom, shuttle, miri))
))]

use std::alloc::{GlobalAlloc, Layout, System};
use std::time::{Duration, Instant};

use scalelock::PerCpuRwLock;

/// The allocator's lock.
static LOCK: PerCpuRwLock<()> = PerCpuRwLock::new(());

struct OnALock;

// SAFETY: `System`'s, with a lock taken around each call.
unsafe impl GlobalAlloc for OnALock {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let _guard = LOCK.write();
        // SAFETY: the caller's contract is `System`'s.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        let _guard = LOCK.write();
        // SAFETY: the caller's contract is `System`'s.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static ALLOCATOR: OnALock = OnALock;

/// Run in a child process by the test below: reaching it is the point.
#[test]
#[ignore = "run in a child process with SCALELOCK_NO_MEMBARRIER=1"]
fn child_reaches_main() {
    assert!(!scalelock::platform::asymmetric_fences_active());
    *LOCK.write() = ();
}

#[test]
fn with_scalelock_no_membarrier_the_program_reaches_main() {
    let mut child = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "child_reaches_main",
            "--ignored",
            "--test-threads=1",
        ])
        .env("SCALELOCK_NO_MEMBARRIER", "1")
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let start = Instant::now();
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            assert!(status.success(), "the child failed: {status}");
            return;
        }
        if start.elapsed() > Duration::from_secs(20) {
            let _ = child.kill();
            let _ = child.wait();
            panic!("the child hung (the fences' decision waited for itself)");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}
