//! `RawMutexTimed` for `RawQSpinLock`: `try_lock_for` and `try_lock_until`
//! (how a timed waiter gives up is in the module docs of `qspinlock`).

use core::time::Duration;

use lock_api::RawMutexTimed;

use crate::class::{Access, LockKind};
use crate::events::Events;
use crate::hook::{self, Held};
use crate::platform::{Platform, TimedPlatform};
use crate::wait::Deadline;

use super::{QSpinCore, RawQSpinLock};

impl<P: Platform> QSpinCore<P> {
    /// The contended paths of a timed acquisition (after a failed fast
    /// path): true holding the lock, false once `deadline` passed, with
    /// nothing of ours left in the lock. An expired deadline (a zero
    /// timeout) makes it a failed `try_lock`. `ev`: where its events count.
    #[cold]
    pub(crate) fn lock_slow_until(&self, deadline: Deadline, ev: Events) -> bool {
        !deadline.passed::<P>() && self.lock_contended(deadline, ev)
    }

    /// Takes the lock, waiting until `deadline` at the latest (no
    /// acquisition hooks: `QRwLock`'s queue lock; events go to `ev`).
    #[inline]
    pub(crate) fn lock_until(&self, deadline: Deadline, ev: Events) -> bool {
        self.try_lock_fast() || self.lock_slow_until(deadline, ev)
    }
}

impl<P: Platform> RawQSpinLock<P> {
    /// A timed acquisition with the hooks: counted like `lock` if it gets
    /// the lock, as contended but not acquired if it times out after
    /// waiting; lockdep treats it as a try-lock (`hook::start_timed`). The
    /// deadline is computed only once the fast path failed.
    #[inline]
    fn lock_timed(&self, deadline: impl FnOnce() -> Deadline) -> Option<Held> {
        let mut p = hook::start_timed(self.class, LockKind::QSpinLock, self.addr(), Access::Write);
        if !self.core.try_lock_fast() {
            p.contended();
            if !self.core.lock_slow_until(deadline(), self.events()) {
                p.timed_out();
                return None;
            }
        }
        Some(p.acquired())
    }
}

// SAFETY: a timed acquisition takes the lock exactly as `lock` does (an
// Acquire cmpxchg to LOCKED), and a failed one leaves nothing of the caller
// in the lock word or its queue (module docs, "Timed acquisitions"). It
// returns failure only once `now_ns` has reached the deadline.
unsafe impl<P: TimedPlatform> RawMutexTimed for RawQSpinLock<P> {
    type Duration = Duration;
    type Instant = P::Instant;

    /// Takes the lock, waiting at most about `timeout` (measured with
    /// `Platform::now_ns`: a platform without a clock never times a nonzero
    /// timeout out; see `TimedPlatform`). Never fails early; may succeed a
    /// little after the deadline (a release that already committed to
    /// handing the lock over is taken).
    #[inline]
    fn try_lock_for(&self, timeout: Duration) -> Option<Held> {
        self.lock_timed(|| Deadline::after::<P>(timeout))
    }

    /// Takes the lock, waiting until about `timeout` at the latest.
    #[inline]
    fn try_lock_until(&self, timeout: P::Instant) -> Option<Held> {
        self.lock_timed(|| Deadline::at(P::deadline_ns(&timeout)))
    }
}
