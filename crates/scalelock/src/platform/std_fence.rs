//! Asymmetric fences: `membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED)`.
//!
//! A lock fast path (`light`) that must be ordered against a rare slow path
//! (`heavy`) would normally need a full `fence(SeqCst)` (x86 `mfence`, about
//! as dear as the lock's own RMW). With membarrier the fast path needs only a
//! compiler fence: the slow path asks the kernel to run a full barrier on
//! every CPU currently running one of our threads (and a thread that is not
//! running passes a barrier when it is switched back in). For
//! `store A; light; load B` against `store B; heavy; load A`: if the barrier
//! lands in the light thread before its `load B`, that load sees B (which was
//! globally visible before the IPI); if after, A was visible before membarrier
//! returned, so the heavy thread's `load A` sees it. This is the
//! `sys_membarrier` pattern of liburcu and folly's `asymmetricHeavyBarrier`.
//!
//! Detected at run time: the first fence asks the kernel to register the
//! process (once; see `fence_mode.rs` for why the first answer must stick
//! and nobody may act before it exists); where that fails (old kernel,
//! seccomp, non-Linux) both sides are `fence(SeqCst)`. Under Miri the model
//! cannot express membarrier, so both sides are real fences.

use core::sync::atomic::{Ordering, compiler_fence, fence};

use crate::platform::fence_mode::FenceMode;

static MODE: FenceMode = FenceMode::new();

#[cfg(all(target_os = "linux", not(miri)))]
fn register() -> bool {
    use rustix::thread::{MembarrierCommand, MembarrierQuery, membarrier, membarrier_query};
    let query = membarrier_query();
    query.contains(MembarrierQuery::PRIVATE_EXPEDITED)
        && membarrier(MembarrierCommand::RegisterPrivateExpedited).is_ok()
}

#[cfg(not(all(target_os = "linux", not(miri))))]
fn register() -> bool {
    false
}

#[inline]
fn asymmetric() -> bool {
    MODE.asymmetric(register)
}

/// The fast-path side: a compiler fence when membarrier is registered (a
/// full fence while the first registration is still in progress).
#[inline]
pub(super) fn light() {
    if MODE.light_may_skip_fence(register) == Some(true) {
        compiler_fence(Ordering::SeqCst);
    } else {
        fence(Ordering::SeqCst);
    }
}

/// The fast-path side for a caller that knows membarrier is registered
/// (it saw state that was published after `asymmetric()` returned true,
/// which stays true): a compiler fence, without looking at the mode. Every
/// heavy side then issues the membarrier, since the decision sticks.
#[inline]
pub(super) fn light_asymmetric() {
    compiler_fence(Ordering::SeqCst);
}

/// The slow-path side: a process-wide barrier when membarrier is registered.
#[inline]
pub(super) fn heavy() {
    fence(Ordering::SeqCst);
    #[cfg(all(target_os = "linux", not(miri)))]
    if asymmetric() {
        use rustix::thread::{MembarrierCommand, membarrier};
        // Registration succeeded, so this cannot fail with EPERM; should the
        // kernel still refuse, abort rather than lose the ordering.
        if membarrier(MembarrierCommand::PrivateExpedited).is_err() {
            std::process::abort();
        }
    }
}

/// Whether the std platform uses membarrier asymmetric fences (registered on
/// first use); `false` means both sides are `fence(SeqCst)`.
pub fn asymmetric_fences_active() -> bool {
    asymmetric()
}
