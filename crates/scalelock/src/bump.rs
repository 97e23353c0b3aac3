//! The `bump` of a guard (lock_api's `RawMutexFair::bump`,
//! `RawRwLockFair::bump_shared` / `bump_exclusive`,
//! `RawRwLockUpgradeFair::bump_upgradable`): a fair unlock and a
//! re-acquisition, made only when somebody waits, as parking_lot's
//! `bump` does. lock_api's default does both even when nobody waits; for a
//! QSpinLock that is a release and a re-take, and for a PerCpuRwLock's
//! write a revocation of the readers' bias each time. Lockdep checks the
//! re-acquisition whether or not it is made: an order that deadlocks
//! when somebody waits is reported when nobody does too, and with the
//! lock still held.
//!
//! The re-acquisition is made when the guard's new state is dropped into
//! place, after the fair release or while a panic unwinds out of it (a
//! long-hold hook that panics in the release's hooks): lock_api lets a bump
//! unwind only with the hold restored, since the guard that owns it stays
//! alive and unlocks at its drop. If the re-acquisition itself panics (a
//! lockdep report), the process aborts, as lock_api's own `bump`s do.

use core::ptr;

use crate::hook::Held;

/// A guard's `bump` of the lock at `addr`: lockdep checks the
/// re-acquisition first (the hold state `held(guard)`, see
/// `Held::check_bump`), whether or not it is made, so that an order it
/// would take the lock in is reported with the lock still held; then, if
/// `waits()`, moves the state out, releases it with `unlock_fair`, and
/// re-acquires with `relock` into `guard` (also while a panic of
/// `unlock_fair` unwinds).
///
/// # Safety
///
/// `guard` is the state of a hold of the lock `unlock_fair` releases and
/// `relock` re-takes in the same mode.
#[inline]
pub(crate) unsafe fn bump<G>(
    guard: &mut G,
    held: impl FnOnce(&G) -> &Held,
    addr: usize,
    waits: impl FnOnce() -> bool,
    unlock_fair: impl FnOnce(G),
    relock: impl FnOnce() -> G,
) {
    held(guard).check_bump(addr);
    if !waits() {
        return;
    }
    /// Writes the re-acquired state into the guard when dropped.
    struct Relock<'a, G, F: FnOnce() -> G> {
        guard: &'a mut G,
        relock: Option<F>,
    }

    impl<G, F: FnOnce() -> G> Drop for Relock<'_, G, F> {
        fn drop(&mut self) {
            /// Panics while a panic of the re-acquisition unwinds: an abort.
            struct AbortOnUnwind;
            impl Drop for AbortOnUnwind {
                fn drop(&mut self) {
                    panic!("aborting: a bump could not re-acquire its lock");
                }
            }
            let abort = AbortOnUnwind;
            if let Some(relock) = self.relock.take() {
                let state = relock();
                // SAFETY: the state that was here was moved out by
                // `bump` (and consumed by the release): overwriting it
                // without a drop is the move back.
                unsafe { ptr::write(self.guard, state) };
            }
            core::mem::forget(abort);
        }
    }

    // SAFETY: moved out here and written back by `Relock`'s drop before
    // `bump` returns or unwinds; nothing reads `guard` in between.
    let state = unsafe { ptr::read(guard) };
    let _relock = Relock {
        guard,
        relock: Some(relock),
    };
    unlock_fair(state);
}
