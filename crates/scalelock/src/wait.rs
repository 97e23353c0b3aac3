//! How a waiter waits: bounded spinning, then sleeping on an address.
//!
//! Two tools, used by every lock in the crate:
//! - [`Backoff`]: exponential spinning on loads (never on RMWs, to be easy on
//!   the cache line), capped; past the cap each step also yields the CPU so a
//!   preempted lock holder can run.
//! - Address parking (`park_prepare` / `park` / `unpark_all`): a tiny parking
//!   lot. A waiter sleeps on one of `BUCKETS` event counters chosen by the
//!   lock's address; the thread that changes the lock state bumps the counter
//!   and wakes the bucket. Collisions only cause spurious wake-ups.
//!
//! The no-lost-wake-up rule: the waiter reads the bucket's counter *before*
//! its final check of the lock state, then sleeps only while the counter is
//! unchanged; a waker changes the state *before* bumping the counter (Release,
//! read with Acquire by the waiter). Either the waiter's check sees the new
//! state, or the bump happens after its read and the futex compare fails or
//! the wake arrives. Locks add a `PARKED` bit so wakers can skip the syscall
//! when nobody sleeps; that bit needs its own fence pairing (see each lock).

use crate::platform::Platform;
use crate::sync::atomic::{AtomicU32, Ordering};

/// Exponential backoff for spin loops (after crossbeam's `Backoff`).
#[derive(Debug, Default)]
pub(crate) struct Backoff {
    step: u32,
}

impl Backoff {
    /// Spins at most 2^SPIN_LIMIT relax steps per call (one under loom, where
    /// every relax is a scheduling point).
    const SPIN_LIMIT: u32 = if cfg!(loom) { 0 } else { 6 };
    /// After this many capped steps, each step also yields the CPU.
    const YIELD_AFTER: u32 = if cfg!(loom) { 1 } else { 10 };

    #[inline]
    pub(crate) const fn new() -> Self {
        Self { step: 0 }
    }

    /// Waits a little longer than last time.
    #[inline]
    pub(crate) fn snooze<P: Platform>(&mut self) {
        if self.step <= Self::SPIN_LIMIT {
            for _ in 0..(1u32 << self.step) {
                P::relax();
            }
        } else {
            for _ in 0..(1u32 << Self::SPIN_LIMIT) {
                P::relax();
            }
            if self.step > Self::YIELD_AFTER {
                P::yield_now();
            }
        }
        self.step = self.step.saturating_add(1);
    }

    /// Number of steps taken so far.
    #[inline]
    pub(crate) fn steps(&self) -> u32 {
        self.step
    }
}

/// Number of parking buckets; a power of two.
const BUCKETS: usize = 64;

#[repr(align(128))]
struct Bucket(AtomicU32);

#[cfg(not(loom))]
static TABLE: [Bucket; BUCKETS] = [const { Bucket(AtomicU32::new(0)) }; BUCKETS];

#[cfg(loom)]
loom::lazy_static! {
    static ref TABLE: [Bucket; BUCKETS] = core::array::from_fn(|_| Bucket(AtomicU32::new(0)));
}

#[inline]
fn bucket(addr: usize) -> &'static AtomicU32 {
    // Fibonacci hashing of the address; locks are at least 4-byte aligned.
    let h = (addr as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 58;
    &TABLE[h as usize % BUCKETS].0
}

/// A waiter's snapshot of its bucket, taken before its final state check.
#[derive(Clone, Copy)]
pub(crate) struct ParkTicket {
    bucket: &'static AtomicU32,
    seq: u32,
}

/// Step 1 of sleeping on `addr`: snapshot the bucket. Check the condition
/// *after* this, then call [`park`] if it still holds.
#[inline]
pub(crate) fn park_prepare(addr: usize) -> ParkTicket {
    let bucket = bucket(addr);
    // Acquire pairs with the Release bump in `unpark_all`: a waker's state
    // change before its bump is visible to our subsequent condition check.
    let seq = bucket.load(Ordering::Acquire);
    ParkTicket { bucket, seq }
}

/// Step 2: sleep until some `unpark_all` on an address in the same bucket
/// (or spuriously).
#[inline]
pub(crate) fn park<P: Platform>(ticket: ParkTicket) {
    P::wait(ticket.bucket, ticket.seq);
}

/// Wakes every thread parked on `addr` (and any that share its bucket). Call
/// it after making the state change the sleepers wait for.
#[cold]
pub(crate) fn unpark_all<P: Platform>(addr: usize) {
    let bucket = bucket(addr);
    // Release pairs with the Acquire in `park_prepare`.
    bucket.fetch_add(1, Ordering::Release);
    P::wake_all(bucket);
}
