//! Timed and fair acquisitions of `RawQRwLock`: `RawRwLockTimed`,
//! `RawRwLockUpgradeTimed`, `RawRwLockFair`, `RawRwLockUpgradeFair` (the
//! protocol is in the module docs of `qrwlock`: "Timed acquisitions" and
//! "Fair and fast: batches").

use core::time::Duration;

use lock_api::{
    RawRwLock, RawRwLockFair, RawRwLockTimed, RawRwLockUpgrade, RawRwLockUpgradeFair,
    RawRwLockUpgradeTimed,
};

use crate::bump;
use crate::class::{Access, LockKind};
use crate::events::Events;
use crate::hook::{self, Held, Pending};
use crate::platform::{Platform, TimedPlatform};
use crate::sync::atomic::Ordering;
use crate::wait::Deadline;

use super::{
    HANDOFF, ONE_READER, PARKED, QRwCore, QUIET, READER_OVERFLOW, RawQRwLock, W_MASK, W_WAITING,
};

impl<P: Platform> QRwCore<P> {
    /// A read lock by `deadline` (computed only if the fast path fails;
    /// `contended` as in `lock_shared_hooked`). False, with nothing of ours
    /// left in the lock, once the deadline passed.
    #[inline]
    pub(crate) fn lock_shared_until(
        &self,
        contended: impl FnOnce(),
        deadline: impl FnOnce() -> Deadline,
        ev: Events,
    ) -> bool {
        // Acquire pairs with the Release unlock of the last writer.
        let old = self.cnts.fetch_add(ONE_READER, Ordering::Acquire);
        if old & (W_MASK | READER_OVERFLOW | QUIET) == 0 {
            return true;
        }
        if old & (W_MASK | READER_OVERFLOW | HANDOFF) != 0 {
            contended();
        }
        self.lock_shared_timed(old, deadline(), ev)
    }

    #[cold]
    fn lock_shared_timed(&self, old: u32, deadline: Deadline, ev: Events) -> bool {
        self.lock_shared_contended(old, deadline, ev)
    }

    /// The write lock by `deadline` (computed only if the fast path fails).
    #[inline]
    pub(crate) fn lock_exclusive_until(
        &self,
        contended: impl FnOnce(),
        deadline: impl FnOnce() -> Deadline,
        ev: Events,
    ) -> bool {
        match self.try_lock_exclusive_fast() {
            Ok(()) => true,
            Err(v) => self.lock_exclusive_timed(v, contended, deadline(), ev),
        }
    }

    #[cold]
    fn lock_exclusive_timed(
        &self,
        v: u32,
        contended: impl FnOnce(),
        deadline: Deadline,
        ev: Events,
    ) -> bool {
        self.lock_exclusive_contended(v, contended, deadline, ev)
    }

    /// An upgradable read by `deadline`; `contended` is called (once) if the
    /// queue lock is taken or a writer holds the lock.
    pub(crate) fn lock_upgradable_until(
        &self,
        contended: impl FnOnce(),
        deadline: Deadline,
        ev: Events,
    ) -> bool {
        let mut contended = Some(contended);
        if !self.wait_lock.try_lock_fast() {
            if let Some(c) = contended.take() {
                c();
            }
            if !self.wait_lock.lock_slow_until(deadline, ev) {
                return false;
            }
        }
        self.join_as_upgradable(deadline, ev, || {
            if let Some(c) = contended.take() {
                c();
            }
        })
    }

    /// Upgrades by `deadline`; on failure the upgradable read is still
    /// held, as it was.
    ///
    /// # Safety
    /// The caller holds an upgradable read of this lock.
    pub(crate) unsafe fn upgrade_until(&self, deadline: Deadline, ev: Events) -> bool {
        // SAFETY: the caller's contract is ours.
        if unsafe { self.upgrade_until_keeping_queue(deadline, ev) }.is_none() {
            return false;
        }
        // The upgradable read's `wait_lock` (caller's contract).
        self.wait_lock.release(false);
        true
    }

    /// `upgrade_until`, keeping `wait_lock` on success (for a wrapper that
    /// must check something of its own once the lock is exclusive; then
    /// `finish_upgrade` or `undo_upgrade`, which puts back the `TURN` the
    /// upgrade ended, returned here).
    ///
    /// # Safety
    /// The caller holds an upgradable read of this lock.
    pub(crate) unsafe fn upgrade_until_keeping_queue(
        &self,
        deadline: Deadline,
        ev: Events,
    ) -> Option<u32> {
        let replaced = self.start_upgrade();
        // None: W_WAITING and our PARKED are gone again, and the turn
        // that `start_upgrade` ended is back; our reader count and
        // `wait_lock` stay: still the upgradable reader.
        self.take_from_waiting(ONE_READER, 0, replaced, deadline, ev)
            .then_some(replaced)
    }

    /// Releases an upgradable read fairly: `wait_lock` to the next queued
    /// acquirer (reserved), then our reader count, fairly.
    ///
    /// # Safety
    /// The caller holds an upgradable read of this lock.
    pub(crate) unsafe fn unlock_upgradable_fair(&self) {
        // `wait_lock` first, as in `unlock_upgradable`.
        self.wait_lock.release(true);
        self.reader_leave_fair();
    }

    /// Whether nobody waits for the lock (a snapshot): nobody queued on
    /// `wait_lock` or holding it (but us, if `we_hold_queue`: an
    /// upgradable reader), nobody waiting on the word. What the `bump_*`
    /// methods skip their unlock-and-relock on.
    pub(crate) fn nobody_waits(&self, we_hold_queue: bool) -> bool {
        let (locked, flags, tail) = self.wait_lock.state();
        self.cnts.load(Ordering::Relaxed) & (QUIET | PARKED | W_WAITING) == 0
            && flags == 0
            && tail == 0
            && (we_hold_queue || locked == 0)
    }
}

impl<P: Platform> RawQRwLock<P> {
    #[inline]
    fn start_timed(&self, access: Access) -> Pending {
        hook::start_timed(self.class, LockKind::QRwLock, self.addr(), access)
    }

    /// A timed read with the hooks: counted like `lock_shared` if it gets
    /// the lock, as contended but not acquired if it times out after
    /// waiting; lockdep treats it as a try-lock (`hook::start_timed`).
    #[inline]
    fn read_timed(&self, deadline: impl FnOnce() -> Deadline) -> Option<Held> {
        let mut p = self.start_timed(Access::Read);
        let ev = p.events(self.events(Access::Read));
        let acquired = if hook::COMPILED {
            self.core.lock_shared_until(|| p.contended(), deadline, ev)
        } else {
            self.core.lock_shared_until(|| {}, deadline, ev)
        };
        timed_end(p, acquired)
    }

    /// As `read_timed`, for the write lock.
    #[inline]
    fn write_timed(&self, deadline: impl FnOnce() -> Deadline) -> Option<Held> {
        let mut p = self.start_timed(Access::Write);
        let ev = p.events(self.events(Access::Write));
        let acquired = if hook::COMPILED {
            self.core
                .lock_exclusive_until(|| p.contended(), deadline, ev)
        } else {
            self.core.lock_exclusive_until(|| {}, deadline, ev)
        };
        timed_end(p, acquired)
    }

    /// As `read_timed`, for an upgradable read.
    fn upgradable_timed(&self, deadline: Deadline) -> Option<Held> {
        let mut p = self.start_timed(Access::Upgradable);
        let ev = p.events(self.events(Access::Write));
        let acquired = self
            .core
            .lock_upgradable_until(|| p.contended(), deadline, ev);
        timed_end(p, acquired)
    }
}

/// Ends a timed acquisition's hooks.
#[inline]
pub(crate) fn timed_end(p: Pending, acquired: bool) -> Option<Held> {
    if acquired {
        Some(p.acquired())
    } else {
        p.timed_out();
        None
    }
}

// SAFETY: the timed paths take the lock exactly as the untimed ones do and,
// on giving up, undo only what they set themselves, while they still hold
// `wait_lock` (module docs, "Timed acquisitions"); they fail only once
// `now_ns` reached the deadline.
unsafe impl<P: TimedPlatform> RawRwLockTimed for RawQRwLock<P> {
    type Duration = Duration;
    type Instant = P::Instant;

    #[inline]
    fn try_lock_shared_for(&self, timeout: Duration) -> Option<Held> {
        self.read_timed(|| Deadline::after::<P>(timeout))
    }

    #[inline]
    fn try_lock_shared_until(&self, timeout: P::Instant) -> Option<Held> {
        self.read_timed(|| Deadline::at(P::deadline_ns(&timeout)))
    }

    #[inline]
    fn try_lock_exclusive_for(&self, timeout: Duration) -> Option<Held> {
        self.write_timed(|| Deadline::after::<P>(timeout))
    }

    #[inline]
    fn try_lock_exclusive_until(&self, timeout: P::Instant) -> Option<Held> {
        self.write_timed(|| Deadline::at(P::deadline_ns(&timeout)))
    }
}

// SAFETY: as `RawRwLockTimed` above; a failed timed upgrade leaves the
// upgradable read exactly as it was (its hold and its `Held`).
unsafe impl<P: TimedPlatform> RawRwLockUpgradeTimed for RawQRwLock<P> {
    fn try_lock_upgradable_for(&self, timeout: Duration) -> Option<Held> {
        self.upgradable_timed(Deadline::after::<P>(timeout))
    }

    fn try_lock_upgradable_until(&self, timeout: P::Instant) -> Option<Held> {
        self.upgradable_timed(Deadline::at(P::deadline_ns(&timeout)))
    }

    unsafe fn try_upgrade_for(&self, guard: Held, timeout: Duration) -> Result<Held, Held> {
        // SAFETY: we hold an upgradable read (caller's contract).
        if unsafe {
            self.core
                .upgrade_until(Deadline::after::<P>(timeout), self.events(Access::Write))
        } {
            guard.upgraded(self.addr());
            Ok(guard)
        } else {
            Err(guard)
        }
    }

    unsafe fn try_upgrade_until(&self, guard: Held, timeout: P::Instant) -> Result<Held, Held> {
        let deadline = Deadline::at(P::deadline_ns(&timeout));
        // SAFETY: we hold an upgradable read (caller's contract).
        if unsafe {
            self.core
                .upgrade_until(deadline, self.events(Access::Write))
        } {
            guard.upgraded(self.addr());
            Ok(guard)
        } else {
            Err(guard)
        }
    }
}

// SAFETY: a fair unlock releases exactly as the unfair one (one Release RMW
// that removes our hold, waking a parked waiter as due); it may also set
// HANDOFF, which only makes the fast paths fail.
unsafe impl<P: Platform> RawRwLockFair for RawQRwLock<P> {
    /// Releases a read lock; a waiter that lets the running threads finish
    /// their batch gets the lock next (fast paths fail until it has it).
    #[inline]
    unsafe fn unlock_shared_fair(&self, guard: Held) {
        // Taken before the release: the lock may be freed after it.
        let addr = self.addr();
        self.core.reader_leave_fair();
        guard.release(addr);
    }

    /// Releases the write lock; a waiter that lets the running threads
    /// finish their batch gets the lock next.
    #[inline]
    unsafe fn unlock_exclusive_fair(&self, guard: Held) {
        let addr = self.addr();
        self.core.unlock_exclusive_fair();
        guard.release(addr);
    }

    /// Lets a waiting thread have the lock, if any: a fair unlock and a new
    /// read; nothing if nobody waits.
    unsafe fn bump_shared(&self, guard: &mut Held) {
        // SAFETY: we hold a read lock, whose state is `guard`.
        unsafe {
            bump::bump(
                guard,
                |h| h,
                self.addr(),
                || !self.core.nobody_waits(false),
                |h| self.unlock_shared_fair(h),
                || self.lock_shared(),
            );
        }
    }

    /// As `bump_shared`, for the write lock.
    unsafe fn bump_exclusive(&self, guard: &mut Held) {
        // SAFETY: we hold the write lock, whose state is `guard`.
        unsafe {
            bump::bump(
                guard,
                |h| h,
                self.addr(),
                || !self.core.nobody_waits(false),
                |h| self.unlock_exclusive_fair(h),
                || self.lock_exclusive(),
            );
        }
    }
}

// SAFETY: releases `wait_lock` fairly (the next queued acquirer gets it,
// reserved) and then our reader count, fairly; as `unlock_upgradable`.
unsafe impl<P: Platform> RawRwLockUpgradeFair for RawQRwLock<P> {
    unsafe fn unlock_upgradable_fair(&self, guard: Held) {
        let addr = self.addr();
        // SAFETY: we hold an upgradable read (caller's contract).
        unsafe { self.core.unlock_upgradable_fair() };
        guard.release(addr);
    }

    /// As `bump_shared`, for the upgradable read.
    unsafe fn bump_upgradable(&self, guard: &mut Held) {
        // SAFETY: we hold an upgradable read, whose state is `guard`.
        unsafe {
            bump::bump(
                guard,
                |h| h,
                self.addr(),
                || !self.core.nobody_waits(true),
                |h| self.unlock_upgradable_fair(h),
                || self.lock_upgradable(),
            );
        }
    }
}
