//! `RawQCondvar`: a condition variable for [`RawQSpinLock`], with lock_api
//! 0.5's [`RawCondvar`] (use it as [`Condvar`]).
//!
//! # What it guarantees
//! - **No spurious wake-ups.** `wait` returns only after a `notify_one` or
//!   `notify_all` chose this waiter (or, for the timed waits, after the
//!   deadline passed while nobody had chosen it). So `notify_one` returns
//!   whether it notified a waiter, and `notify_all` how many it notified,
//!   exactly; lock_api's `wait_while` still re-checks its condition.
//! - **FIFO notification**: `notify_one` notifies the longest waiter.
//! - **No thundering herd**: `notify_all` wakes one waiter; the others are
//!   woken one at a time, each when the previous one has re-acquired the
//!   mutex (a *wake chain*, see below). (Sleepers share the process's
//!   parking buckets, 4,096 with `std`: a wake also stirs, for a moment,
//!   other threads asleep in the same bucket, which find themselves not
//!   chosen and sleep again; about one in a thousand sleepers per wake.)
//! - **One mutex at a time**: all threads waiting at the same moment must
//!   use the same mutex. A `wait` with another mutex while threads wait
//!   panics (before it unlocks anything: the caller's guard stays valid).
//!   Once nobody waits, any mutex may be used.
//! - **The re-lock cannot fail**: `wait` unlocks and re-locks the mutex
//!   through [`RawQSpinLock`]'s own `unlock` and `lock`, so lock statistics
//!   count the re-acquisition and lockdep's held stack stays right.
//!   Lockdep checks the re-lock's order (the mutex taken again under the
//!   locks taken after it) before the wait unlocks anything, as a bump's;
//!   a report then panics with the mutex still held. If the re-lock itself
//!   panics the process aborts, as lock_api requires of a wait that cannot
//!   restore the lock.
//!   If the unlock's long-hold hook panics, the wait ends at once: the
//!   mutex is re-locked and the panic then comes out of `wait`.
//!
//! # Why a wake chain, not a requeue
//! parking_lot's `Condvar::notify_all` wakes one waiter and *requeues* the
//! others onto the mutex's queue in its global parking lot
//! (`unpark_requeue`), so that each mutex unlock wakes one of them: the
//! waiters never run just to find the mutex taken. Linux does the same
//! with `FUTEX_CMP_REQUEUE` when the mutex is a futex word. Our mutex has
//! neither: a queued waiter of [`RawQSpinLock`] puts *itself* in the MCS
//! queue (`tail.swap`) and sleeps on its own queue node, and the word
//! waiter sleeps on a shared parking bucket that every release wakes as a
//! whole, so there is no futex word whose sleepers a release wakes one at a
//! time. Moving a condvar waiter into the MCS queue on its behalf would also
//! skip the mutex's public `lock`, and with it statistics and lockdep.
//!
//! So the waiters requeue themselves, one at a time: `notify_all` takes the
//! whole waiter list at once (all of it is notified at that moment, and
//! counted), marks every waiter but the first *queued*, and wakes the first.
//! Each woken waiter re-locks the mutex through `RawQSpinLock::lock` and
//! then wakes the next one, which finds the mutex held and joins its FIFO
//! queue. At any time at most one waiter of a chain is awake without
//! holding the mutex, and the notified waiters reach the mutex in their
//! waiting order, instead of all of them waking at once to contend for it
//! (and most going back to sleep in its queue).
//!
//! The chain cannot deadlock where a broadcast would not: every waiter in
//! it needs the same mutex (the one-mutex rule above) before its `wait` can
//! return, so a waiter that is woken later than a broadcast would have woken
//! it is only waiting for a mutex it needed anyway. The price is latency
//! behind a slow link: waiter k+1 is woken by waiter k, so while waiter k
//! gets no CPU (preempted or stopped) the rest of the chain waits even if
//! the mutex is free, where a broadcast would have let them run.
//!
//! # State
//! ```text
//! RawQCondvar                      Waiter (on each waiting thread's stack)
//! +-----------+------------+       +-------+------+------+
//! | list_lock | head, tail |  -->  | state | prev | next |  --> ...
//! | (4 bytes) | mutex      |       +-------+------+------+
//! +-----------+------------+
//! ```
//! - `list_lock`: a queued spinlock core (no statistics or lockdep: it is
//!   the condvar's own); it guards the list and `mutex`, held for a few
//!   pointer writes.
//! - `head`/`tail`: a doubly linked list of the waiters that no notify has
//!   chosen yet, oldest first.
//! - `mutex`: the address of the mutex the listed waiters use (0 when the
//!   list is empty).
//! - `Waiter::state`: `WAITING` (listed), `QUEUED` (chosen by `notify_all`,
//!   off the list, waiting for its turn in the wake chain) or `SIGNALED`
//!   (chosen, and may return).
//! - `Waiter::next`: while listed, the next waiter; once chosen, the next
//!   waiter of its wake chain (null for none), read by its owner only.
//!
//! # Invariants
//! 1. A waiter is on the list exactly while its state is `WAITING`, and
//!    `WAITING` is left only under `list_lock`: a timed-out waiter that
//!    finds itself `WAITING` under the lock may unlink itself; one that does
//!    not has been chosen and waits for `SIGNALED` (it was notified: it does
//!    not report a timeout).
//! 2. A waiter's memory is referred to by others only while it is listed
//!    (under `list_lock`) or `QUEUED` (by its predecessor in the chain, the
//!    only thread that will signal it). Its owner leaves `wait` only once it
//!    is off the list and no longer `QUEUED`; the store of `SIGNALED` is the
//!    last access to it by anybody else (the wake that follows touches only a
//!    static parking bucket).
//! 3. A wake chain's links are written under `list_lock` before the chain
//!    is detached and never afterwards; each waiter of the chain is signaled
//!    by exactly one thread (`notify_all` for the first, the previous
//!    waiter for the others), after that thread re-acquired the mutex.
//!
//! # Why no notification is lost
//! A waiter enqueues itself under `list_lock` *before* it unlocks the mutex.
//! A notify that comes after that unlock (the notifier took the mutex
//! after the waiter released it, or is ordered after such a taker) sees the
//! waiter on the list: the mutex's release/acquire orders the enqueue before
//! the notify's look at the list. The sleep itself is the parking module's
//! ticket protocol on the waiter's address: the waiter takes a ticket of
//! its parking bucket, re-checks its state, and sleeps only while the
//! ticket is current; a notifier stores the new state, then bumps the
//! bucket and wakes it.
//!
//! # Memory orderings
//! - `state` is stored `SIGNALED` with Release and loaded with Acquire by
//!   its owner: the chain link `next` (written under `list_lock`, before
//!   the signal) is visible to the owner, and so, through each chain step,
//!   to every later waiter of the chain.
//! - Everything else (`head`, `tail`, `mutex`, `prev`, `next`, the
//!   transitions out of `WAITING`) is written under `list_lock` and needs
//!   only Relaxed; `notify_*`'s unlocked look at `head` (to skip the lock
//!   when nobody waits) is ordered after the waiter's enqueue by the mutex,
//!   as argued above.
//!
//! # Timed waits
//! [`wait_until_ns`](RawQCondvar::wait_until_ns) and
//! [`wait_timeout`](RawQCondvar::wait_timeout) bound the wait by the
//! platform's clock (`Platform::now_ns`), report a timeout only once the
//! clock has reached the deadline (never early), and re-lock with the
//! untimed `lock`. On a platform without a clock (`now_ns` always 0) only a
//! deadline of 0 ever passes. They back lock_api's `RawCondvarTimed`, so
//! [`Condvar::wait_for`](lock_api::Condvar::wait_for), `wait_until` and
//! `wait_while_for` work with a [`QSpinLock`](crate::QSpinLock) guard.

use core::marker::PhantomData;
use core::ptr;
use core::time::Duration;

use lock_api::{RawCondvar, RawCondvarTimed, RawMutex};

use crate::events::Events;
use crate::hook::Held;
use crate::platform::{DefaultPlatform, Platform, TimedPlatform};
use crate::qspinlock::{QSpinCore, RawQSpinLock};
use crate::sync::atomic::{AtomicPtr, AtomicU32, AtomicUsize, Ordering};
use crate::wait::parking;

/// `Waiter::state`: on the list, not chosen by any notify.
const WAITING: u32 = 0;
/// `Waiter::state`: chosen by `notify_all`, waiting for its turn in the
/// wake chain.
const QUEUED: u32 = 1;
/// `Waiter::state`: chosen and woken; may return.
const SIGNALED: u32 = 2;

/// `wait_until_ns`'s deadline for "never" (585 years of nanoseconds).
const NEVER: u64 = u64::MAX;

/// A condition variable for [`QSpinLock`](crate::QSpinLock), built on
/// [`RawQCondvar`].
///
/// ```
/// use scalelock::{Condvar, QSpinLock};
/// use std::sync::Arc;
///
/// let pair = Arc::new((QSpinLock::new(false), Condvar::new()));
/// let pair2 = pair.clone();
/// let t = std::thread::spawn(move || {
///     let (ready, cv) = &*pair2;
///     *ready.lock() = true;
///     cv.notify_one();
/// });
/// let (ready, cv) = &*pair;
/// let mut guard = ready.lock();
/// cv.wait_while(&mut guard, |ready| !*ready);
/// drop(guard);
/// t.join().unwrap();
/// ```
pub type Condvar = lock_api::Condvar<RawQCondvar>;

/// One waiting thread, on its own stack for the duration of `wait`.
struct Waiter {
    /// `WAITING`, `QUEUED` or `SIGNALED` (see the module docs).
    state: AtomicU32,
    /// The previous listed waiter (towards `head`); under `list_lock`.
    prev: AtomicPtr<Waiter>,
    /// The next listed waiter, or once chosen the next of its wake chain.
    next: AtomicPtr<Waiter>,
}

impl Waiter {
    fn new() -> Self {
        Self {
            state: AtomicU32::new(WAITING),
            prev: AtomicPtr::new(ptr::null_mut()),
            next: AtomicPtr::new(ptr::null_mut()),
        }
    }

    fn ptr(&self) -> *mut Waiter {
        (self as *const Waiter).cast_mut()
    }
}

/// Aborts the process if a wait unwinds between unlocking and re-locking
/// the mutex (lock_api's contract: the guard must be valid on unwind). A
/// panic while panicking aborts, in `no_std` too.
struct AbortOnUnwind;

impl Drop for AbortOnUnwind {
    fn drop(&mut self) {
        panic!("scalelock: a condvar wait panicked while the mutex was unlocked (aborting)");
    }
}

/// Unlocks `mutex` for a wait. With statistics, a panic of the release's
/// long-hold hook is caught and returned, to be resumed once the mutex is
/// re-locked (unwinding with the mutex unlocked would abort).
///
/// # Safety
/// As `RawQSpinLock::unlock`.
#[cfg(feature = "stats")]
unsafe fn unlock_catching_hook_panic<P: Platform>(
    mutex: &RawQSpinLock<P>,
    held: Held,
) -> Option<std::boxed::Box<dyn core::any::Any + Send>> {
    // SAFETY: our contract.
    std::panic::catch_unwind(core::panic::AssertUnwindSafe(|| unsafe {
        mutex.unlock(held)
    }))
    .err()
}

/// Without statistics no hook of the release can panic.
///
/// # Safety
/// As `RawQSpinLock::unlock`.
#[cfg(not(feature = "stats"))]
unsafe fn unlock_catching_hook_panic<P: Platform>(
    mutex: &RawQSpinLock<P>,
    held: Held,
) -> Option<()> {
    // SAFETY: our contract.
    unsafe { mutex.unlock(held) };
    None
}

/// A condition variable for [`RawQSpinLock`]; see the module documentation.
///
/// 32 bytes on 64-bit targets: a 4-byte lock for its waiter list, the list's
/// ends and the address of the mutex its waiters use. Waiters' records live
/// on their own stacks.
#[repr(C)]
pub struct RawQCondvar<P: Platform = DefaultPlatform> {
    list_lock: QSpinCore<P>,
    head: AtomicPtr<Waiter>,
    tail: AtomicPtr<Waiter>,
    /// Address of the mutex of the listed waiters; 0 when there are none.
    mutex: AtomicUsize,
    _platform: PhantomData<fn() -> P>,
}

// SAFETY: the raw pointers in the list are only followed under `list_lock`
// or by the one thread a chained waiter waits for (module docs, invariant
// 2); nothing in the condvar belongs to a particular thread.
unsafe impl<P: Platform> Send for RawQCondvar<P> {}
// SAFETY: as for `Send`: every field is an atomic or the list lock.
unsafe impl<P: Platform> Sync for RawQCondvar<P> {}

impl<P: Platform> RawQCondvar<P> {
    /// A condition variable nobody waits on.
    #[cfg(not(loom))]
    pub const fn new() -> Self {
        Self {
            list_lock: QSpinCore::new(),
            head: AtomicPtr::new(ptr::null_mut()),
            tail: AtomicPtr::new(ptr::null_mut()),
            mutex: AtomicUsize::new(0),
            _platform: PhantomData,
        }
    }

    /// A condition variable nobody waits on.
    #[cfg(loom)]
    pub fn new() -> Self {
        Self {
            list_lock: QSpinCore::new(),
            head: AtomicPtr::new(ptr::null_mut()),
            tail: AtomicPtr::new(ptr::null_mut()),
            mutex: AtomicUsize::new(0),
            _platform: PhantomData,
        }
    }

    /// Like [`RawCondvar::wait`], giving up once `Platform::now_ns` has
    /// reached `deadline_ns`: returns true if it gave up (timed out), false
    /// if a notify chose this waiter. Either way the mutex is held again on
    /// return (re-locked with the untimed `lock`). `u64::MAX` never passes.
    ///
    /// # Safety
    /// As for [`RawCondvar::wait`]: the caller holds `mutex`, with `guard`
    /// the state of that acquisition, and does not touch the protected data
    /// until this returns.
    ///
    /// # Panics
    /// If other threads wait on this condvar with another mutex (then
    /// before unlocking `mutex`).
    pub unsafe fn wait_until_ns(
        &self,
        mutex: &RawQSpinLock<P>,
        guard: &mut Held,
        deadline_ns: u64,
    ) -> bool {
        // Lockdep: the re-lock below takes the mutex again under the locks
        // taken after it; checked now, with the mutex held and nothing
        // changed (a report that panics leaves the caller's guard valid),
        // as a bump checks its re-acquisition. At the re-lock a report
        // came after the mutex was given up, and its panic aborted.
        guard.check_bump(mutex as *const RawQSpinLock<P> as usize);
        let me = Waiter::new();
        self.enqueue(&me, mutex as *const RawQSpinLock<P> as usize);

        let unwinding = AbortOnUnwind;
        let held = core::mem::replace(guard, Held::NONE);
        // SAFETY: the caller holds `mutex` with `held` as its state (our
        // contract); `guard` holds `Held::NONE` until the re-lock below, and
        // nothing between here and there unwinds (`unwinding` aborts if it
        // does).
        let hook_panic = unsafe { unlock_catching_hook_panic(mutex, held) };
        // A panic of the unlock's hooks (a long-hold hook's) cuts the wait
        // short: leave the list (unless chosen), re-lock, then unwind, as
        // lock_api requires of a wait that panics after unlocking.
        let timed_out = self.sleep(&me, if hook_panic.is_some() { 0 } else { deadline_ns });
        *guard = mutex.lock();
        core::mem::forget(unwinding);

        if !timed_out {
            // Chosen: if by `notify_all`, wake the next waiter of the chain
            // now that we hold the mutex again. Relaxed: our Acquire load of
            // SIGNALED made the link (written before it) visible.
            let next = me.next.load(Ordering::Relaxed);
            if !next.is_null() {
                // SAFETY: `next` is QUEUED behind us and waits for this
                // signal before it leaves (invariant 2).
                unsafe { Self::signal(next) };
            }
        }
        #[cfg(feature = "stats")]
        if let Some(payload) = hook_panic {
            std::panic::resume_unwind(payload);
        }
        timed_out
    }

    /// Like [`RawCondvar::wait`], giving up after `timeout` (measured with
    /// `Platform::now_ns`): returns true if it timed out; see
    /// [`wait_until_ns`](Self::wait_until_ns).
    ///
    /// # Safety
    /// As for [`RawCondvar::wait`].
    ///
    /// # Panics
    /// As [`wait_until_ns`](Self::wait_until_ns).
    pub unsafe fn wait_timeout(
        &self,
        mutex: &RawQSpinLock<P>,
        guard: &mut Held,
        timeout: Duration,
    ) -> bool {
        let ns = u64::try_from(timeout.as_nanos()).unwrap_or(NEVER);
        let deadline = P::now_ns().saturating_add(ns);
        // SAFETY: our caller's contract is `wait_until_ns`'s.
        unsafe { self.wait_until_ns(mutex, guard, deadline) }
    }

    /// Puts `me` at the tail of the list, checking the one-mutex rule.
    fn enqueue(&self, me: &Waiter, mutex: usize) {
        self.list_lock.lock(Events::NONE);
        let tail = self.tail.load(Ordering::Relaxed);
        if !tail.is_null() && self.mutex.load(Ordering::Relaxed) != mutex {
            self.list_lock.release(false);
            panic!("scalelock: a condvar was waited on with two different mutexes at once");
        }
        self.mutex.store(mutex, Ordering::Relaxed);
        me.prev.store(tail, Ordering::Relaxed);
        if tail.is_null() {
            self.head.store(me.ptr(), Ordering::Relaxed);
        } else {
            // SAFETY: `tail` is listed, so alive, and we hold `list_lock`
            // (invariant 2).
            unsafe { (*tail).next.store(me.ptr(), Ordering::Relaxed) };
        }
        self.tail.store(me.ptr(), Ordering::Relaxed);
        self.list_lock.release(false);
    }

    /// Takes `w` off the list. Caller holds `list_lock`; `w` is listed.
    fn unlink(&self, w: &Waiter) {
        let prev = w.prev.load(Ordering::Relaxed);
        let next = w.next.load(Ordering::Relaxed);
        if prev.is_null() {
            self.head.store(next, Ordering::Relaxed);
        } else {
            // SAFETY: listed neighbours are alive under `list_lock`.
            unsafe { (*prev).next.store(next, Ordering::Relaxed) };
        }
        if next.is_null() {
            self.tail.store(prev, Ordering::Relaxed);
        } else {
            // SAFETY: as above.
            unsafe { (*next).prev.store(prev, Ordering::Relaxed) };
        }
        if self.head.load(Ordering::Relaxed).is_null() {
            self.mutex.store(0, Ordering::Relaxed);
        }
    }

    /// Sleeps until `me` is signaled (false) or, while it is still
    /// listed, the deadline passes and it leaves the list (true).
    fn sleep(&self, me: &Waiter, deadline_ns: u64) -> bool {
        let addr = me.ptr() as usize;
        loop {
            // The ticket before the check: a signal after it bumps the
            // bucket (see `wait::parking`).
            let ticket = parking::prepare(addr);
            // Acquire pairs with the Release store in `signal`.
            let state = me.state.load(Ordering::Acquire);
            if state == SIGNALED {
                return false;
            }
            // A chosen (QUEUED) waiter was notified: it waits for its turn,
            // whatever the deadline.
            if state == QUEUED || deadline_ns == NEVER {
                parking::park::<P>(ticket);
                continue;
            }
            let now = P::now_ns();
            if now < deadline_ns {
                parking::park_timeout::<P>(ticket, deadline_ns - now);
                continue;
            }
            // The deadline passed: leave the list unless a notify chose us
            // meanwhile (WAITING is left only under the lock, invariant 1).
            self.list_lock.lock(Events::NONE);
            let listed = me.state.load(Ordering::Relaxed) == WAITING;
            if listed {
                self.unlink(me);
            }
            self.list_lock.release(false);
            if listed {
                return true;
            }
        }
    }

    /// Lets a chosen waiter return and wakes it.
    ///
    /// # Safety
    /// `w` is QUEUED behind the caller (so alive). After this call `w` may
    /// be gone.
    unsafe fn signal(w: *mut Waiter) {
        // SAFETY: our contract.
        let addr = unsafe { Self::set_signaled(w) };
        parking::unpark_all::<P>(addr);
    }

    /// Lets a chosen waiter return: the last access to `w` by anybody but
    /// its owner. Returns its address, for the wake (which touches only the
    /// static parking bucket: `w` may be gone by then).
    ///
    /// # Safety
    /// `w` is alive: listed (caller holds `list_lock`) or QUEUED behind the
    /// caller.
    unsafe fn set_signaled(w: *mut Waiter) -> usize {
        // Release pairs with the owner's Acquire load in `sleep`: the chain
        // link in `w.next` is visible to it.
        // SAFETY: `w` is alive until this store is seen (our contract).
        unsafe { (*w).state.store(SIGNALED, Ordering::Release) };
        w as usize
    }

    /// Number of threads waiting and not yet notified (a snapshot), for
    /// tests and diagnostics.
    #[doc(hidden)]
    pub fn waiters(&self) -> usize {
        self.list_lock.lock(Events::NONE);
        let mut n = 0;
        let mut w = self.head.load(Ordering::Relaxed);
        while !w.is_null() {
            n += 1;
            // SAFETY: listed waiters are alive under `list_lock`.
            w = unsafe { (*w).next.load(Ordering::Relaxed) };
        }
        self.list_lock.release(false);
        n
    }
}

impl<P: Platform> Default for RawQCondvar<P> {
    fn default() -> Self {
        Self::new()
    }
}

impl<P: Platform> core::fmt::Debug for RawQCondvar<P> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("RawQCondvar")
            .field("waiters", &self.waiters())
            .finish()
    }
}

// SAFETY: `wait` enqueues the waiter before it unlocks the mutex, so every
// notify ordered after the unlock sees it (module docs, "Why no
// notification is lost"); it re-locks the mutex before it returns and
// stores the new acquisition's state in `guard`; it panics only before
// unlocking (two mutexes) or after re-locking (a long-hold hook's panic
// out of the unlock, held until then), and aborts if anything unwinds
// between unlock and re-lock. No waiter record is referred to after its
// owner returns (invariant 2).
unsafe impl<P: Platform> RawCondvar for RawQCondvar<P> {
    #[allow(clippy::declare_interior_mutable_const)]
    #[cfg(not(loom))]
    const INIT: Self = Self::new();
    #[allow(clippy::declare_interior_mutable_const)]
    #[cfg(loom)]
    const INIT: Self = panic!("use RawQCondvar::new() under loom");

    type RawMutex = RawQSpinLock<P>;

    /// Unlocks `mutex`, sleeps until a notify chooses this thread (no
    /// spurious returns), re-locks `mutex`. Panics if other threads wait
    /// with another mutex.
    #[inline]
    unsafe fn wait(&self, mutex: &RawQSpinLock<P>, guard: &mut Held) {
        // SAFETY: our caller's contract is `wait_until_ns`'s.
        let _ = unsafe { self.wait_until_ns(mutex, guard, NEVER) };
    }

    /// Notifies the longest waiter; true if there was one (exact: that
    /// waiter's `wait` returns as notified, not timed out).
    fn notify_one(&self) -> bool {
        // Nobody waits: see "Memory orderings" for why Relaxed suffices.
        if self.head.load(Ordering::Relaxed).is_null() {
            return false;
        }
        self.list_lock.lock(Events::NONE);
        let w = self.head.load(Ordering::Relaxed);
        if w.is_null() {
            self.list_lock.release(false);
            return false;
        }
        // SAFETY: `w` is listed and we hold `list_lock`.
        let waiter = unsafe { &*w };
        self.unlink(waiter);
        // Not part of a chain.
        waiter.next.store(ptr::null_mut(), Ordering::Relaxed);
        // SAFETY: `w` is alive: it leaves only once SIGNALED, and we hold
        // `list_lock`, which a timed-out waiter needs to leave the list.
        let addr = unsafe { Self::set_signaled(w) };
        self.list_lock.release(false);
        // The wake outside `list_lock`: nobody should wait for the lock
        // through a futex call.
        parking::unpark_all::<P>(addr);
        true
    }

    /// Notifies every waiter (returns how many): wakes the longest one and
    /// makes the others a wake chain, each woken by the previous one once
    /// it re-acquired the mutex (see the module docs).
    fn notify_all(&self) -> usize {
        if self.head.load(Ordering::Relaxed).is_null() {
            return 0;
        }
        self.list_lock.lock(Events::NONE);
        let first = self.head.load(Ordering::Relaxed);
        if first.is_null() {
            self.list_lock.release(false);
            return 0;
        }
        self.head.store(ptr::null_mut(), Ordering::Relaxed);
        self.tail.store(ptr::null_mut(), Ordering::Relaxed);
        self.mutex.store(0, Ordering::Relaxed);
        // The list's `next` links become the chain's (invariant 3).
        let mut count = 1;
        // SAFETY: `first` was listed; we hold `list_lock`.
        let mut w = unsafe { (*first).next.load(Ordering::Relaxed) };
        while !w.is_null() {
            count += 1;
            // SAFETY: `w` was listed; we hold `list_lock`, so it has not
            // left (it leaves only once signaled, invariant 2).
            let waiter = unsafe { &*w };
            // Relaxed: only the owner reads it, and it is signaled (with
            // Release) later through the chain.
            waiter.state.store(QUEUED, Ordering::Relaxed);
            w = waiter.next.load(Ordering::Relaxed);
        }
        // SAFETY: `first` is alive: we hold `list_lock` and it is not yet
        // signaled.
        let addr = unsafe { Self::set_signaled(first) };
        self.list_lock.release(false);
        parking::unpark_all::<P>(addr);
        count
    }
}

// SAFETY: `wait_until` and `wait_for` are `wait` with a deadline
// (`wait_until_ns`): the same enqueue before the unlock, the same untimed
// re-lock before returning, the same abort if it unwinds unlocked. A timeout
// is reported only once `now_ns` has reached the deadline and the waiter
// left the list unchosen (invariant 1): never early, and never for a waiter
// that a notify counted.
unsafe impl<P: TimedPlatform> RawCondvarTimed for RawQCondvar<P> {
    #[inline]
    fn checked_duration_to_instant(timeout: &Duration) -> Option<P::Instant> {
        P::instant_after(*timeout)
    }

    #[inline]
    unsafe fn wait_until(
        &self,
        mutex: &RawQSpinLock<P>,
        guard: &mut Held,
        timeout: &P::Instant,
    ) -> bool {
        // SAFETY: our caller's contract (lock_api's `RawCondvar::wait`) is
        // `wait_until_ns`'s.
        unsafe { self.wait_until_ns(mutex, guard, P::deadline_ns(timeout)) }
    }

    #[inline]
    unsafe fn wait_for(
        &self,
        mutex: &RawQSpinLock<P>,
        guard: &mut Held,
        timeout: &Duration,
    ) -> bool {
        // SAFETY: as in `wait_until`; `wait_timeout` has the same contract.
        unsafe { self.wait_timeout(mutex, guard, *timeout) }
    }
}

#[cfg(all(test, not(loom)))]
mod tests;
