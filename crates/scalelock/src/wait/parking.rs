//! Sleeping on an address: a tiny parking lot.
//!
//! A sleeper sleeps on one of `BUCKETS` futex words chosen by the lock's
//! address; whoever makes its condition true bumps the word and wakes the
//! bucket. Buckets are static, so a waker touches no memory of the lock
//! after the state change it wakes for, and the lock may be freed by its
//! next owner at once. Collisions between locks only cause spurious
//! wake-ups; every sleeper re-checks its condition.
//!
//! The no-lost-wake-up rule: a sleeper reads the bucket's sequence (its
//! *ticket*) *before* its final check of the condition, then sleeps while
//! the sequence is unchanged; a waker changes the state *before* bumping the
//! sequence. Either the sleeper's check sees the new state, or the bump
//! comes after its ticket and the futex compare fails or the wake arrives.
//! Two ways to know whether anybody sleeps:
//!
//! - **Until an RMW of the lock word says so** ([`prepare`], [`park`],
//!   [`unpark_all`]): the sleeper announces itself with an RMW on the lock
//!   word (a `*_PARKED` bit); the waker's RMW that makes the condition true
//!   returns that bit. RMWs on one word are totally ordered, so one of them
//!   sees the other.
//! - **Until a release** ([`sleep_until_released`], [`wake_after_release`]):
//!   for locks whose release is a plain store (no RMW to return a bit). The
//!   sleeper announces itself in the bucket (`parked`, an RMW), runs the
//!   *heavy* fence, and re-checks the lock; the releaser stores, runs the
//!   *light* fence, and loads `parked`. That is the store-buffering pattern:
//!   with the fences pairing like `fence(SeqCst)` (membarrier on Linux; see
//!   `platform`), at least one side sees the other's store. The releaser's
//!   check reads only the static bucket.

use crate::platform::Platform;
use crate::sync::atomic::{AtomicU32, Ordering};

/// Number of parking buckets; a power of two. Every wake is a `wake_all`
/// of its bucket, so each sleeper shares the wake-ups of every other
/// sleeper in its bucket: with thousands of threads asleep at once (a big
/// host's thread pool on condvars, many contended locks' word waiters),
/// 64 buckets made one `notify_one` wake about threads/64 of them. 4,096
/// (512 KiB of zeroed statics, touched only where sleepers hash) keep that
/// under one extra wake-up up to 4,096 sleepers. (64 under the model
/// checkers and Miri, whose atomics are costly: Miri ran the qspinlock
/// unit tests 5x slower with 4,096; and without `std`, where a kernel or
/// an embedded target may not spare the memory.)
const BUCKETS: usize = if cfg!(any(loom, shuttle, miri)) || !cfg!(feature = "std") {
    64
} else {
    4096
};

/// One bucket, on a cache-line pair of its own.
#[repr(C, align(128))]
pub(crate) struct Bucket {
    /// Bumped by every wake; sleepers futex-wait on it.
    seq: AtomicU32,
    /// Nonzero: somebody sleeps until a release (see the module docs).
    parked: AtomicU32,
}

#[cfg(not(any(loom, shuttle)))]
static TABLE: [Bucket; BUCKETS] = [const {
    Bucket {
        seq: AtomicU32::new(0),
        parked: AtomicU32::new(0),
    }
}; BUCKETS];

// Model checkers: fresh for every model execution (see `sync`).
#[cfg(any(loom, shuttle))]
crate::sync::model_lazy_static! {
    static ref TABLE: [Bucket; BUCKETS] = core::array::from_fn(|_| Bucket {
        seq: AtomicU32::new(0),
        parked: AtomicU32::new(0),
    });
}

#[inline]
fn bucket(addr: usize) -> &'static Bucket {
    // Fibonacci hashing of the address; locks are at least 4-byte aligned.
    let h = (addr as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> (64 - BUCKETS.trailing_zeros());
    &TABLE[h as usize % BUCKETS]
}

/// A sleeper's snapshot of its bucket, taken before its final check.
#[derive(Clone, Copy)]
pub(crate) struct Ticket {
    bucket: &'static Bucket,
    seq: u32,
}

/// Step 1 of sleeping on `addr`: the ticket. Check the condition *after*
/// this, then [`park`] if it still holds.
#[inline]
pub(crate) fn prepare(addr: usize) -> Ticket {
    let bucket = bucket(addr);
    // Acquire pairs with the Release bump in `unpark_all`: a waker's state
    // change before its bump is visible to our subsequent check.
    let seq = bucket.seq.load(Ordering::Acquire);
    Ticket { bucket, seq }
}

/// Step 2: sleeps until a wake of the bucket after the ticket (or
/// spuriously).
#[inline]
#[track_caller]
pub(crate) fn park<P: Platform>(ticket: Ticket) {
    P::wait(&ticket.bucket.seq, ticket.seq);
}

/// Like [`park`], returning after about `timeout_ns` at the latest.
#[inline]
pub(crate) fn park_timeout<P: Platform>(ticket: Ticket, timeout_ns: u64) {
    P::wait_timeout(&ticket.bucket.seq, ticket.seq, timeout_ns);
}

/// [`park`] (`timeout_ns == u64::MAX`) or [`park_timeout`].
#[inline]
pub(crate) fn park_for<P: Platform>(ticket: Ticket, timeout_ns: u64) {
    if timeout_ns == u64::MAX {
        park::<P>(ticket);
    } else {
        park_timeout::<P>(ticket, timeout_ns);
    }
}

/// Wakes every thread sleeping on `addr`'s bucket. Call it after the state
/// change the sleepers wait for.
#[cold]
pub(crate) fn unpark_all<P: Platform>(addr: usize) {
    wake_bucket::<P>(bucket(addr));
}

#[inline]
fn wake_bucket<P: Platform>(bucket: &'static Bucket) {
    // Release pairs with the Acquire ticket load in `prepare`.
    bucket.seq.fetch_add(1, Ordering::Release);
    P::wake_all(&bucket.seq);
}

/// Sleeps until a release of the lock at `addr` (or spuriously):
/// announces the sleeper in the bucket, runs the heavy fence, and sleeps
/// only if `still_held()` then. The lock's releases must call
/// [`wake_after_release`] after their release store. Returns after about
/// `timeout_ns` at the latest (`u64::MAX`: no timeout). `parking` runs
/// right before the sleep (statistics); returns whether it slept.
#[cold]
pub(crate) fn sleep_until_released<P: Platform>(
    addr: usize,
    still_held: impl Fn() -> bool,
    parking: impl FnOnce(),
    timeout_ns: u64,
) -> bool {
    let ticket = prepare(addr);
    // An RMW, Release: a releaser whose Acquire swap in `wake_released`
    // reads this (or a later announce, which continues its release
    // sequence) knows our ticket came before its bump.
    ticket.bucket.parked.swap(1, Ordering::Release);
    // Pairs with the light fence of the releaser: it sees our announce, or
    // we see its release below.
    P::heavy_fence();
    if still_held() {
        parking();
        park_for::<P>(ticket, timeout_ns);
        return true;
    }
    false
}

/// Called by a release after its release store and the light fence: wakes
/// the bucket if anybody announced a sleep until a release. Reads only the
/// static bucket, never the lock.
#[inline]
pub(crate) fn wake_after_release<P: Platform>(addr: usize) {
    let bucket = bucket(addr);
    if bucket.parked.load(Ordering::Relaxed) != 0 {
        wake_released::<P>(bucket);
    }
}

/// A release that hands the lock to a particular sleeper (a reservation):
/// wakes the bucket whether or not a sleep was announced (the sleeper may
/// sleep on a ticket alone), consuming any announce. Reads only the static
/// bucket.
#[cold]
pub(crate) fn wake_all_after_release<P: Platform>(addr: usize) {
    let bucket = bucket(addr);
    if bucket.parked.load(Ordering::Relaxed) != 0 {
        // Acquire pairs with the sleepers' Release announce (as in
        // `wake_released`).
        bucket.parked.swap(0, Ordering::Acquire);
    }
    wake_bucket::<P>(bucket);
}

#[cold]
#[inline(never)]
fn wake_released<P: Platform>(bucket: &'static Bucket) {
    // Acquire pairs with the sleepers' Release announce. Consuming the flag
    // makes one release pay the wake-up; sleepers that are still not done
    // (other locks of the bucket) announce themselves again.
    if bucket.parked.swap(0, Ordering::Acquire) != 0 {
        wake_bucket::<P>(bucket);
    }
}

/// Whether a sleep until a release of `addr` was announced and not yet
/// consumed by a release (loom models wait for it before releasing).
#[cfg(all(test, loom))]
pub(crate) fn announced(addr: usize) -> bool {
    bucket(addr).parked.load(Ordering::SeqCst) != 0
}

/// Loom model of the sleep-until-a-release protocol alone: the releaser's
/// plain store + light fence + bucket check against the sleeper's announce
/// + heavy fence + re-check (store buffering). A lost wake-up is a loom
/// deadlock.
#[cfg(all(test, loom))]
mod loom_models {
    use super::*;
    use crate::platform::LoomPlatform;
    use loom::sync::Arc;
    use loom::sync::atomic::AtomicU8;
    use loom::thread;

    #[test]
    fn release_wakes_a_sleeper_until_released() {
        loom::model(|| {
            let locked = Arc::new(AtomicU8::new(1));
            let addr = &*locked as *const AtomicU8 as usize;
            let releaser = {
                let locked = locked.clone();
                thread::spawn(move || {
                    locked.store(0, Ordering::Release);
                    LoomPlatform::light_fence();
                    wake_after_release::<LoomPlatform>(addr);
                })
            };
            while locked.load(Ordering::Acquire) != 0 {
                sleep_until_released::<LoomPlatform>(
                    addr,
                    || locked.load(Ordering::Relaxed) != 0,
                    || {},
                    u64::MAX,
                );
            }
            releaser.join().unwrap();
        });
    }
}
