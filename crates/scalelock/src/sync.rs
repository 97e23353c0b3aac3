//! The atomics and hints every protocol in this crate uses.
//!
//! Normal builds re-export `core`; `RUSTFLAGS="--cfg loom"` swaps in loom's
//! model-checked versions so the same protocol code runs under `cargo test
//! --test loom_*` (see `tests/loom_*.rs`), and `RUSTFLAGS="--cfg shuttle"`
//! swaps in shuttle's, whose every access is a scheduling point of shuttle's
//! randomized schedulers (`tests/shuttle_locks.rs`). Nothing outside this
//! module names `core::sync::atomic` directly, so no access escapes the model
//! checker.
//!
//! The two checkers complement each other: loom explores every interleaving
//! and the weak-memory behaviours of each ordering, for two or three
//! threads; shuttle samples interleavings (random and PCT schedules) of a
//! dozen threads, with every atomic access sequentially consistent (so it
//! finds protocol races, lost wake-ups and deadlocks, not missing fences).

#[cfg(all(loom, shuttle))]
compile_error!("`--cfg loom` and `--cfg shuttle` are two different model checkers: pick one");

#[cfg(not(any(loom, shuttle)))]
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

/// shuttle provides every width the locks use, with `const fn new` (so the
/// locks' `const` constructors stay `const`). It runs every access as
/// `SeqCst` whatever the ordering says, so its `fence` is a no-op and its
/// `compiler_fence` is core's.
#[cfg(shuttle)]
#[allow(unused_imports)]
pub(crate) mod atomic {
    pub(crate) use shuttle::sync::atomic::{
        AtomicBool, AtomicPtr, AtomicU8, AtomicU16, AtomicU32, AtomicU64, AtomicUsize, Ordering,
        compiler_fence, fence,
    };
}

// shuttle has no cell type of its own: it runs one model thread at a time,
// so a plain `UnsafeCell` cannot race in its executions.
#[cfg(not(loom))]
#[allow(unused_imports)]
pub(crate) use core::cell::UnsafeCell;
#[cfg(loom)]
#[allow(unused_imports)]
pub(crate) use loom::cell::UnsafeCell;

/// `static`s that hold model atomics under a model checker: lazily built,
/// once per model execution (loom's atomics cannot be built in a `const`;
/// shuttle's can, but a plain `static` would carry one execution's state,
/// e.g. slot indices handed out or a parked count, into the next and make a
/// failing schedule impossible to replay). Same syntax as `lazy_static!`.
#[cfg(loom)]
#[allow(unused_imports)]
pub(crate) use loom::lazy_static as model_lazy_static;
#[cfg(shuttle)]
#[allow(unused_imports)]
pub(crate) use shuttle::lazy_static as model_lazy_static;

/// Per-model-thread storage under a model checker (`thread_local!` syntax).
/// std's `thread_local!` would be wrong there: both checkers run every model
/// thread as a coroutine on the one OS thread of the test, so std's storage
/// would be shared by all model threads (two of them would, e.g., wait on
/// one queue node).
#[cfg(loom)]
#[allow(unused_imports)]
pub(crate) use loom::thread_local as model_thread_local;
#[cfg(shuttle)]
#[allow(unused_imports)]
pub(crate) use shuttle::thread_local as model_thread_local;

/// One step of a wait for another thread's progress: a `pause` (a yield to
/// the model's scheduler under loom and shuttle).
#[allow(dead_code)] // used by the std platform and loom models only
#[inline]
pub(crate) fn spin_wait_hint() {
    #[cfg(not(any(loom, shuttle)))]
    core::hint::spin_loop();
    #[cfg(loom)]
    loom::thread::yield_now();
    #[cfg(shuttle)]
    shuttle::thread::yield_now();
}
