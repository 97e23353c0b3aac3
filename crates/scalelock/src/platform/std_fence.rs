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
//! Detected at run time: at program start (`decide_at_start`), or else the
//! first fence, asks the kernel to register the process and issues one
//! barrier (once; see `fence_mode.rs` for why the first answer must stick
//! and nobody may act before it exists); where either fails (old kernel,
//! seccomp, non-Linux)
//! or `SCALELOCK_NO_MEMBARRIER` is set (to anything but empty or `0`)
//! both sides are `fence(SeqCst)`. A seccomp filter installed after the
//! registration that refuses `membarrier` leaves no ordering to fall back
//! on: the first heavy fence then aborts with a message that says so
//! (`tests/membarrier_seccomp.rs`); a barrier that fails for want of
//! kernel memory (`ENOMEM`) is tried again (`barrier_retrying`). Under Miri the model
//! cannot express membarrier, so both sides are real fences.

use core::sync::atomic::{Ordering, compiler_fence, fence};

use crate::platform::fence_mode::FenceMode;

static MODE: FenceMode = FenceMode::new();

/// The environment variable that keeps the process from registering
/// (both sides are then `fence(SeqCst)`): for a program that installs a
/// seccomp filter without `membarrier` after it started.
const NO_MEMBARRIER_ENV: &str = "SCALELOCK_NO_MEMBARRIER";

#[cfg(all(target_os = "linux", not(miri)))]
fn register() -> bool {
    use rustix::thread::{MembarrierCommand, MembarrierQuery, membarrier, membarrier_query};
    if std::env::var_os(NO_MEMBARRIER_ENV).is_some_and(|v| !v.is_empty() && v != "0") {
        return false;
    }
    let query = membarrier_query();
    query.contains(MembarrierQuery::PRIVATE_EXPEDITED)
        && membarrier(MembarrierCommand::RegisterPrivateExpedited).is_ok()
        // The barrier itself, once, while no light side relies on it yet:
        // a seccomp filter in place from the start that allows the query
        // and the registration but refuses the barrier (one that sorts
        // `membarrier` by its command) leaves the full fences on both
        // sides (the process aborted at its first heavy fence). In a
        // process that still has one thread it costs microseconds.
        && membarrier(MembarrierCommand::PrivateExpedited).is_ok()
}

#[cfg(not(all(target_os = "linux", not(miri))))]
fn register() -> bool {
    false
}

std::thread_local! {
    /// This thread is deciding (inside `register`).
    static DECIDING_HERE: core::cell::Cell<bool> = const { core::cell::Cell::new(false) };
}

/// `register`, marked on its thread: a lock taken inside it (reading the
/// environment allocates, through a global allocator that may be built on
/// a lock of this crate) must not wait for the decision in progress.
fn register_marked() -> bool {
    DECIDING_HERE.with(|d| d.set(true));
    let answer = register();
    DECIDING_HERE.with(|d| d.set(false));
    answer
}

#[inline]
fn asymmetric() -> bool {
    MODE.asymmetric_unless(register_marked, || {
        DECIDING_HERE.with(core::cell::Cell::get)
    })
}

/// Decides at program start, while the process most likely has one thread:
/// the kernel then registers it in microseconds. Asked later, in a process
/// with several threads, it first waits for an RCU grace period
/// (`synchronize_rcu`), and the thread that asked, the first to release a
/// lock, stalls that long: the first `QSpinLock` lock+unlock in a process
/// with 4 busy threads took 8.5-9.8 ms on a 2-CPU VM, against 1-9 µs after
/// a registration at start. An ELF constructor (`.init_array`, as std's own
/// argument setup on Linux); in a library loaded with `dlopen` it runs at
/// the load. Where it does not run, the first fence decides, as before.
#[cfg(all(target_os = "linux", not(miri)))]
#[used]
#[unsafe(link_section = ".init_array")]
static DECIDE_AT_START: extern "C" fn() = decide_at_start;

#[cfg(all(target_os = "linux", not(miri)))]
extern "C" fn decide_at_start() {
    let _ = asymmetric();
}

/// The fast-path side: a compiler fence when membarrier is registered (a
/// full fence while the first registration is still in progress).
#[inline]
pub(super) fn light() {
    // One test inline, the rest (the full fence where membarrier is
    // unavailable, the first decision) out of line: this sits in every
    // queued lock's release, which must stay small enough to inline into
    // the caller's loop (the guard's drop) with the hooks compiled in too.
    if MODE.light_may_skip_fence_quick() {
        compiler_fence(Ordering::SeqCst);
    } else {
        light_slow();
    }
}

/// `light` where membarrier is not (yet) known to be registered.
#[cold]
#[inline(never)]
fn light_slow() {
    if MODE.light_may_skip_fence(register_marked) == Some(true) {
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
        if let Err(e) = barrier_retrying(|| membarrier(MembarrierCommand::PrivateExpedited)) {
            membarrier_refused(e);
        }
    }
}

/// Issues a barrier with `call`, again while the kernel answers `ENOMEM`:
/// on kernels built with `CONFIG_CPUMASK_OFFSTACK` (a large `NR_CPUS`, as
/// in distributions' kernels for many-CPU hosts) each barrier allocates a
/// CPU mask and fails with `ENOMEM` when that allocation does, a passing
/// shortage the heavy side can wait out (the light sides rely on the
/// barrier: there is nothing to fall back on). Between tries it yields,
/// then sleeps from 1 us up to 1 ms. Any other error is returned.
#[cfg(all(target_os = "linux", not(miri)))]
#[cold]
#[inline(never)]
fn barrier_retrying(
    mut call: impl FnMut() -> Result<(), rustix::io::Errno>,
) -> Result<(), rustix::io::Errno> {
    let mut pause_us = 0u64;
    loop {
        match call() {
            Err(rustix::io::Errno::NOMEM) => {}
            answer => return answer,
        }
        if pause_us == 0 {
            std::thread::yield_now();
            pause_us = 1;
        } else {
            std::thread::sleep(std::time::Duration::from_micros(pause_us));
            pause_us = (pause_us * 2).min(1000);
        }
    }
}

/// The kernel refused a `membarrier` after the process registered: a
/// seccomp filter installed since (sandboxes commonly answer `EPERM` to
/// what they do not list). The light sides already run with compiler
/// fences only, so no ordering is left to fall back on: say why, and
/// abort.
#[cfg(all(target_os = "linux", not(miri)))]
#[cold]
#[inline(never)]
fn membarrier_refused(e: rustix::io::Errno) -> ! {
    use std::io::Write;
    // Stderr is unbuffered; the message is built without allocating.
    let _ = writeln!(
        std::io::stderr(),
        "scalelock: membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED) failed after the \
         process registered for it ({e}); a seccomp filter installed later must \
         allow membarrier, or start the program with {NO_MEMBARRIER_ENV}=1. Aborting: \
         the locks' ordering depends on it."
    );
    std::process::abort();
}

/// Whether the std platform uses membarrier asymmetric fences (on Linux
/// the process registers before `main`; elsewhere, or where that did not
/// run, on first use); `false` means both sides are `fence(SeqCst)`.
pub fn asymmetric_fences_active() -> bool {
    asymmetric()
}

#[cfg(all(test, target_os = "linux", not(miri)))]
mod tests {
    use super::*;

    /// Run alone in a child process by `decided_at_program_start`: nothing
    /// there used a fence before it, so only the constructor can have
    /// decided.
    #[test]
    #[ignore = "run in a child process by decided_at_program_start"]
    fn child_finds_the_fences_decided() {
        assert!(MODE.decided().is_some(), "undecided at the first use");
    }

    /// A barrier the kernel could not allocate for (`ENOMEM`) is tried
    /// again until it is made (it aborted the process); other errors come
    /// back at once.
    #[test]
    fn a_barrier_short_of_memory_is_tried_again() {
        use rustix::io::Errno;
        let mut calls = 0;
        let answer = barrier_retrying(|| {
            calls += 1;
            if calls <= 5 {
                Err(Errno::NOMEM)
            } else {
                Ok(())
            }
        });
        assert_eq!((answer, calls), (Ok(()), 6));
        let mut calls = 0;
        let answer = barrier_retrying(|| {
            calls += 1;
            Err(Errno::PERM)
        });
        assert_eq!((answer, calls), (Err(Errno::PERM), 1));
    }

    /// The process registers for `membarrier` before `main`, not at its
    /// first lock release (see `DECIDE_AT_START`).
    #[test]
    fn decided_at_program_start() {
        super::super::run_ignored_test_in_child(
            "platform::std_impl::fence::tests::child_finds_the_fences_decided",
        );
    }
}
