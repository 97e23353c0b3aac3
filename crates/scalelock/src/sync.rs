//! The atomics and hints every protocol in this crate uses.
//!
//! Normal builds re-export `core`; `RUSTFLAGS="--cfg loom"` swaps in loom's
//! model-checked versions so the same protocol code runs under `cargo test
//! --test loom_*` (see `tests/loom_*.rs`). Nothing outside this module names
//! `core::sync::atomic` directly, so no access escapes the model checker.

#[cfg(not(loom))]
#[allow(unused_imports)] // the shim offers the full set; each lock uses some
pub(crate) mod atomic {
    pub(crate) use core::sync::atomic::{
        AtomicBool, AtomicPtr, AtomicU8, AtomicU16, AtomicU32, AtomicU64, AtomicUsize, Ordering,
        compiler_fence, fence,
    };
}

#[cfg(loom)]
#[allow(unused_imports)]
pub(crate) mod atomic {
    pub(crate) use loom::sync::atomic::{
        AtomicBool, AtomicPtr, AtomicU8, AtomicU16, AtomicU32, AtomicU64, AtomicUsize, Ordering,
        fence,
    };
    /// loom has no compiler fence; a full fence is the conservative stand-in.
    pub(crate) fn compiler_fence(order: Ordering) {
        loom::sync::atomic::fence(order)
    }
}

#[cfg(not(loom))]
#[allow(unused_imports)]
pub(crate) use core::cell::UnsafeCell;
#[cfg(loom)]
#[allow(unused_imports)]
pub(crate) use loom::cell::UnsafeCell;

/// One step of a wait for another thread's progress: a `pause` (a yield to
/// the model's scheduler under loom).
#[allow(dead_code)] // used by the std platform and loom models only
#[inline]
pub(crate) fn spin_wait_hint() {
    #[cfg(not(loom))]
    core::hint::spin_loop();
    #[cfg(loom)]
    loom::thread::yield_now();
}
