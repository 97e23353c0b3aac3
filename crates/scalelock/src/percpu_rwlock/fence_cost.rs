//! What one full fence costs a reader on this machine, measured once per
//! process: the symmetric mode's price per read, which a revoking writer
//! weighs against the heavy fence (`membarrier`) the biased mode pays per
//! write (see "Modes" in `percpu_rwlock.rs`).
//!
//! The figure differs by an order of magnitude between machines (`mfence`
//! takes a few cycles on some recent cores, dozens on others), so it is
//! measured rather than tuned: a batch of slot-read-shaped sequences
//! (`store; fence; load`) against the same batch with a compiler fence,
//! the minimum over a few rounds of each (a preempted round only ever
//! inflates its batch). About 5 µs, on the first revocation that needs it.

#[cfg(not(any(loom, shuttle, miri)))]
use core::sync::atomic::{AtomicU32, AtomicU64, Ordering, compiler_fence, fence};

use crate::platform::Platform;

/// The figure used while nothing could be measured (the model checkers',
/// and a platform whose clock did not advance yet): 2 ns.
const UNMEASURED_X16: u64 = 32;

/// A figure measured once per process: `measure`'s result on the first
/// call that gets one, the cached one after. `cell` starts at `u32::MAX`
/// (not measured yet; a measurement is kept below it). A `measure` that
/// could not time anything (`None`: a clock that did not advance, as a
/// no_std platform's before its timer runs, or one without a clock)
/// leaves the cell unmeasured and gives [`UNMEASURED_X16`]: caching a
/// figure from a stopped clock would keep it for the process's life.
#[cfg(not(any(loom, shuttle, miri)))]
fn measured_once(cell: &AtomicU32, measure: impl FnOnce() -> Option<u32>) -> u64 {
    // Relaxed: a plain number; two first callers measure twice, harmlessly.
    match cell.load(Ordering::Relaxed) {
        u32::MAX => match measure() {
            Some(v) => {
                let v = v.min(u32::MAX - 1);
                cell.store(v, Ordering::Relaxed);
                u64::from(v)
            }
            None => UNMEASURED_X16,
        },
        v => u64::from(v),
    }
}

/// The cost of one full fence in a reader's sequence, in 1/16 ns.
#[cfg(not(any(loom, shuttle, miri)))]
pub(super) fn full_fence_x16<P: Platform>() -> u64 {
    static MEASURED: AtomicU32 = AtomicU32::new(u32::MAX);
    measured_once(&MEASURED, measure::<P>)
}

/// Under the model checkers and Miri nothing is timed: 2 ns.
#[cfg(any(loom, shuttle, miri))]
pub(super) fn full_fence_x16<P: Platform>() -> u64 {
    UNMEASURED_X16
}

// With std the clock is std's, and `P` only matters without it.
#[cfg_attr(feature = "std", allow(clippy::extra_unused_type_parameters))]
#[cfg(not(any(loom, shuttle, miri)))]
fn measure<P: Platform>() -> Option<u32> {
    const BATCH: u64 = 256;
    const ROUNDS: usize = 5;
    // Escaped, so that the compiler keeps every access (and the fences).
    let (word, flag) = (AtomicU64::new(0), AtomicU64::new(1));
    let (word, flag) = core::hint::black_box((&word, &flag));
    // A real clock: a platform's may be a test's stepped one.
    #[cfg(feature = "std")]
    let base = std::time::Instant::now();
    #[cfg(feature = "std")]
    let now = || u64::try_from(base.elapsed().as_nanos()).unwrap_or(u64::MAX);
    #[cfg(not(feature = "std"))]
    let now = P::now_ns;
    let batch = |full: bool| {
        let start = now();
        let mut seen = 0u64;
        // The shape of a slot read: store, fence, Acquire re-load. Nothing
        // pairs with these fences and loads (no other thread touches the
        // two words); they are here to be timed.
        for i in 0..BATCH {
            word.store(i, Ordering::Relaxed);
            if full {
                fence(Ordering::SeqCst);
            } else {
                compiler_fence(Ordering::SeqCst);
            }
            seen = seen.wrapping_add(flag.load(Ordering::Acquire));
        }
        core::hint::black_box(seen);
        now().saturating_sub(start)
    };
    let (mut full, mut plain) = (u64::MAX, u64::MAX);
    for _ in 0..ROUNDS {
        full = full.min(batch(true));
        plain = plain.min(batch(false));
    }
    // A clock that did not move over a batch of fences timed nothing.
    if full == 0 {
        return None;
    }
    let x16 = full.saturating_sub(plain).saturating_mul(16) / BATCH;
    Some(u32::try_from(x16).unwrap_or(u32::MAX).max(1))
}

#[cfg(all(test, feature = "std", not(any(loom, shuttle, miri))))]
mod tests {
    use super::*;
    use crate::platform::StdPlatform;

    /// The measurement is a plausible figure (a full fence costs something,
    /// and far less than a microsecond) and is taken once.
    #[test]
    fn measured_once_and_plausible() {
        let first = full_fence_x16::<StdPlatform>();
        std::eprintln!("full fence: {first}/16 ns");
        assert!((1..16 * 1000).contains(&first), "{first}/16 ns");
        assert_eq!(full_fence_x16::<StdPlatform>(), first);
    }

    /// A clock that did not advance times nothing: the default figure is
    /// used and nothing is cached, so that a later call, with the clock
    /// running, measures (a stopped clock's 1/16 ns was kept for good).
    #[test]
    fn a_stopped_clock_caches_nothing() {
        let cell = AtomicU32::new(u32::MAX);
        assert_eq!(measured_once(&cell, || None), UNMEASURED_X16);
        assert_eq!(cell.load(Ordering::Relaxed), u32::MAX);
        assert_eq!(measured_once(&cell, || Some(40)), 40);
        assert_eq!(measured_once(&cell, || Some(7)), 40, "cached");
    }
}
