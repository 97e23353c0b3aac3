//! Timed and fair acquisitions of `RawPerCpuRwLock`: `RawRwLockTimed`,
//! `RawRwLockUpgradeTimed`, `RawRwLockFair`, `RawRwLockUpgradeFair`.
//!
//! - A timed read tries the common read paths without waiting; if it must
//!   wait, it waits as the underlying `QRwLock`'s timed read (the bias is
//!   off, or a writer is revoking it).
//! - A timed write takes the underlying write lock by the deadline, then
//!   revokes the bias, waiting for fast readers until the deadline at the
//!   latest. Out of time with a fast reader still inside, it gives the bias
//!   back (`FAST` set again, as `try_lock_exclusive` does; it holds the
//!   underlying write lock, so nothing else changed the bias meanwhile) and
//!   releases the underlying write lock: the lock is as it found it.
//! - A timed upgrade upgrades the underlying lock keeping its queue lock,
//!   then revokes as a timed write does; out of time at either step it
//!   steps back to the upgradable read.
//! - Fair unlocks release the underlying lock fairly (a fast read holds
//!   nothing of it, and its release wakes a revoking writer anyway).
//!
//! `RawRwLockUpgradeDowngrade` is not implemented, for the reason given in
//! `qrwlock`: a write downgraded to an upgradable read would take the
//! queue lock while holding the write, which deadlocks against a reader
//! queued there.

use core::cell::Cell;
use core::marker::PhantomData;
use core::time::Duration;

use lock_api::{
    GuardSend, RawRwLock, RawRwLockFair, RawRwLockTimed, RawRwLockUpgrade, RawRwLockUpgradeFair,
    RawRwLockUpgradeTimed,
};

use crate::bump;
use crate::class::{Access, LockKind};
use crate::hook::{self, Held, Pending};
use crate::platform::{Platform, TimedPlatform};
use crate::sync::atomic::Ordering;
use crate::wait::Deadline;

use super::{FAST, ID_MASK, PerCpuReadToken, PerCpuWriteToken, RawPerCpuRwLock};

impl<P: Platform> RawPerCpuRwLock<P> {
    #[inline]
    fn start_timed(&self, access: Access) -> Pending {
        hook::start_timed(self.class, LockKind::PerCpuRwLock, self.addr(), access)
    }

    /// A timed read: the common paths without waiting, then the slow path
    /// with the underlying lock's timed read. Counted like `lock_shared` if
    /// it gets the lock, contended but not acquired if it times out after
    /// waiting; lockdep treats it as a try-lock.
    #[inline]
    fn read_timed(&self, deadline: impl FnOnce() -> Deadline) -> Option<PerCpuReadToken> {
        let mut p = self.start_timed(Access::ReentrantRead);
        let token = match self.try_lock_shared_fast() {
            Some(token) => Some(token),
            None if hook::COMPILED => self.lock_shared_slow_until(|| p.contended(), deadline()),
            None => self.lock_shared_slow_until(|| {}, deadline()),
        };
        let Some(mut token) = token else {
            p.timed_out();
            return None;
        };
        Self::count_read_path(&p, &token);
        token.held = p.acquired();
        Some(token)
    }

    /// The slow read with a deadline (`lock_shared_slow`'s steps).
    #[cold]
    fn lock_shared_slow_until(
        &self,
        contended: impl FnOnce(),
        deadline: Deadline,
    ) -> Option<PerCpuReadToken> {
        self.ensure_id();
        let s = self.state.load(Ordering::Relaxed);
        let mine = self.my_slot();
        // A read of a lock this thread already read-holds never waits.
        if let Some(token) = self.recursive_read(s, mine) {
            return Some(token);
        }
        if let Some(token) = self.try_lock_shared_fast() {
            return Some(token);
        }
        if !self
            .inner
            .lock_shared_until(contended, || deadline, self.events(Access::ReentrantRead))
        {
            return None;
        }
        Some(self.enter_underlying(mine))
    }

    /// A timed write: the underlying write lock, then the revocation, both
    /// by the deadline (computed once, when first needed).
    fn write_timed(&self, deadline: impl FnOnce() -> Deadline) -> Option<PerCpuWriteToken> {
        let mut p = self.start_timed(Access::Write);
        let mut waited = false;
        let lazy = LazyDeadline::new(deadline);
        let ev = p.events(self.events(Access::Write));
        let locked = if hook::COMPILED {
            self.inner.lock_exclusive_until(
                || {
                    waited = true;
                    p.contended();
                },
                || lazy.get(),
                ev,
            )
        } else {
            self.inner.lock_exclusive_until(|| {}, || lazy.get(), ev)
        };
        if !locked {
            p.timed_out();
            return None;
        }
        // With the underlying write lock held the state is ours alone: an
        // inhibited lock with an id has no fast reader to wait for, and
        // its revocation step needs no deadline (no clock read).
        let s = self.state.load(Ordering::Relaxed);
        let revoke_by = if s & FAST == 0 && s & ID_MASK != 0 {
            Deadline::NEVER
        } else {
            lazy.get()
        };
        match self.revoke_and_decide_until(revoke_by) {
            Some(next) => Some(PerCpuWriteToken {
                next,
                held: p.acquired(),
            }),
            None => {
                // The bias is back as it was; the underlying write goes.
                // SAFETY: we took the underlying write lock above.
                unsafe { self.inner.unlock_exclusive(GuardSend::new()) };
                // It waited (for the fast readers) even if the underlying
                // lock was free: a timeout, as `start_timed` documents.
                if !waited {
                    p.contended();
                }
                p.timed_out();
                None
            }
        }
    }

    /// A timed upgradable read.
    fn upgradable_timed(&self, deadline: Deadline) -> Option<Held> {
        self.ensure_id();
        let mut p = self.start_timed(Access::Upgradable);
        let ev = p.events(self.events(Access::Write));
        if self
            .inner
            .lock_upgradable_until(|| p.contended(), deadline, ev)
        {
            Some(p.acquired())
        } else {
            p.timed_out();
            None
        }
    }

    /// A timed upgrade; on failure the upgradable read is held as before.
    ///
    /// # Safety
    /// The caller holds an upgradable read of this lock, whose hooks' state
    /// is `guard`.
    unsafe fn upgrade_timed(
        &self,
        guard: Held,
        deadline: Deadline,
    ) -> Result<PerCpuWriteToken, Held> {
        // As in `upgrade`: the underlying lock first (keeping its queue
        // lock, so that we can step back), then the revocation.
        // SAFETY: we hold an upgradable read (caller's contract).
        let Some(turn) = (unsafe {
            self.inner
                .upgrade_until_keeping_queue(deadline, self.events(Access::Write))
        }) else {
            return Err(guard);
        };
        match self.revoke_and_decide_until(deadline) {
            Some(next) => {
                // SAFETY: the upgradable read's, now a write.
                unsafe { self.inner.finish_upgrade(PhantomData) };
                guard.upgraded(self.addr());
                Ok(PerCpuWriteToken { next, held: guard })
            }
            None => {
                // Fast readers are still inside (the bias is back): back to
                // the upgradable read, with the turn the upgrade ended.
                // SAFETY: we took the write by the upgrade above.
                unsafe { self.inner.undo_upgrade(turn) };
                Err(guard)
            }
        }
    }
}

/// A deadline computed at most once, when first asked for (a `try_*_for`
/// reads the clock only if it must wait).
struct LazyDeadline<F> {
    make: Cell<Option<F>>,
    value: Cell<Option<Deadline>>,
}

impl<F: FnOnce() -> Deadline> LazyDeadline<F> {
    fn new(make: F) -> Self {
        Self {
            make: Cell::new(Some(make)),
            value: Cell::new(None),
        }
    }

    fn get(&self) -> Deadline {
        if let Some(d) = self.value.get() {
            return d;
        }
        let d = self.make.take().map_or(Deadline::NEVER, |f| f());
        self.value.set(Some(d));
        d
    }
}

// SAFETY: the timed paths take the lock as the untimed ones do (the
// underlying lock's timed paths, then the same revocation), and a failed
// one leaves the lock as it found it (module docs above); they fail only
// once `now_ns` reached the deadline.
unsafe impl<P: TimedPlatform> RawRwLockTimed for RawPerCpuRwLock<P> {
    type Duration = Duration;
    type Instant = P::Instant;

    #[inline]
    fn try_lock_shared_for(&self, timeout: Duration) -> Option<PerCpuReadToken> {
        self.read_timed(|| Deadline::after::<P>(timeout))
    }

    #[inline]
    fn try_lock_shared_until(&self, timeout: P::Instant) -> Option<PerCpuReadToken> {
        self.read_timed(|| Deadline::at(P::deadline_ns(&timeout)))
    }

    fn try_lock_exclusive_for(&self, timeout: Duration) -> Option<PerCpuWriteToken> {
        self.write_timed(|| Deadline::after::<P>(timeout))
    }

    fn try_lock_exclusive_until(&self, timeout: P::Instant) -> Option<PerCpuWriteToken> {
        self.write_timed(|| Deadline::at(P::deadline_ns(&timeout)))
    }
}

// SAFETY: as `RawRwLockTimed` above; a failed timed upgrade leaves the
// upgradable read exactly as it was.
unsafe impl<P: TimedPlatform> RawRwLockUpgradeTimed for RawPerCpuRwLock<P> {
    fn try_lock_upgradable_for(&self, timeout: Duration) -> Option<Held> {
        self.upgradable_timed(Deadline::after::<P>(timeout))
    }

    fn try_lock_upgradable_until(&self, timeout: P::Instant) -> Option<Held> {
        self.upgradable_timed(Deadline::at(P::deadline_ns(&timeout)))
    }

    unsafe fn try_upgrade_for(
        &self,
        guard: Held,
        timeout: Duration,
    ) -> Result<PerCpuWriteToken, Held> {
        // SAFETY: the caller's contract is ours.
        unsafe { self.upgrade_timed(guard, Deadline::after::<P>(timeout)) }
    }

    unsafe fn try_upgrade_until(
        &self,
        guard: Held,
        timeout: P::Instant,
    ) -> Result<PerCpuWriteToken, Held> {
        // SAFETY: the caller's contract is ours.
        unsafe { self.upgrade_timed(guard, Deadline::at(P::deadline_ns(&timeout))) }
    }
}

// SAFETY: fair unlocks release exactly what the unfair ones do; the
// underlying lock's fair releases only make its fast paths fail until its
// waiter has the lock.
unsafe impl<P: Platform> RawRwLockFair for RawPerCpuRwLock<P> {
    /// Releases a read; one through the underlying lock hands it to the
    /// waiter that waits out a batch there (a fast read holds nothing of
    /// it).
    #[inline]
    unsafe fn unlock_shared_fair(&self, token: PerCpuReadToken) {
        let addr = self.addr();
        // SAFETY: the token came from a read of this lock (caller's
        // contract).
        unsafe { self.release_read(token.slot, true) };
        token.held.release(addr);
    }

    /// Releases the write lock; the underlying lock's waiter gets it next.
    unsafe fn unlock_exclusive_fair(&self, token: PerCpuWriteToken) {
        let addr = self.addr();
        self.leave(token.next);
        self.inner.unlock_exclusive_fair();
        token.held.release(addr);
    }

    /// Lets a waiting thread have the lock, if any: a fair unlock and a new
    /// read; nothing if nobody waits. Whoever waits for a read waits on
    /// the underlying lock: a writer queues there, or holds it while it
    /// revokes the bias (waiting for fast reads like ours), and an upgrader
    /// holds its queue lock.
    unsafe fn bump_shared(&self, token: &mut PerCpuReadToken) {
        // SAFETY: we hold a read, whose state is `token`.
        unsafe {
            bump::bump(
                token,
                |t| &t.held,
                self.addr(),
                || !self.inner.nobody_waits(false) || self.inner.is_locked_exclusive(),
                |t| self.unlock_shared_fair(t),
                || self.lock_shared(),
            );
        }
    }

    /// As `bump_shared`, for the write lock: nothing if nobody waits (a
    /// reader stepping aside from our revocation queues on the underlying
    /// lock). A bump that yields pays a revocation on re-taking the lock if
    /// the bias came back meanwhile.
    unsafe fn bump_exclusive(&self, token: &mut PerCpuWriteToken) {
        // SAFETY: we hold the write lock, whose state is `token`.
        unsafe {
            bump::bump(
                token,
                |t| &t.held,
                self.addr(),
                || !self.inner.nobody_waits(false),
                |t| self.unlock_exclusive_fair(t),
                || self.lock_exclusive(),
            );
        }
    }
}

// SAFETY: the underlying lock's fair upgradable unlock; as
// `unlock_upgradable`.
unsafe impl<P: Platform> RawRwLockUpgradeFair for RawPerCpuRwLock<P> {
    unsafe fn unlock_upgradable_fair(&self, guard: Held) {
        let addr = self.addr();
        // SAFETY: we hold an upgradable read (caller's contract).
        unsafe { self.inner.unlock_upgradable_fair() };
        guard.release(addr);
    }

    /// As `bump_shared`, for the upgradable read: the underlying lock's.
    unsafe fn bump_upgradable(&self, guard: &mut Held) {
        // SAFETY: we hold an upgradable read, whose state is `guard`.
        unsafe {
            bump::bump(
                guard,
                |h| h,
                self.addr(),
                || !self.inner.nobody_waits(true),
                |h| self.unlock_upgradable_fair(h),
                || self.lock_upgradable(),
            );
        }
    }
}
