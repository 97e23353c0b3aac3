//! The std platform without a clock (`now_ns` is 0, as on a platform that
//! has none, so batches and steal waits end by their poll counts), for
//! tests that need a slow path to last as long as they set it up; `W`
//! says how its threads wait (the std platform's futex by default).

use std::marker::PhantomData;
use std::sync::atomic::AtomicU32;

use scalelock::platform::{LocalState, Platform, StdPlatform};
use scalelock::qnode::{NodeIndex, QNode};

/// How a [`NoClock`] platform's threads wait on a word.
///
/// # Safety
/// As [`Platform::wait`] and [`Platform::wait_timeout`]: return once the
/// word may have changed or spuriously, never miss a wake-up for good.
pub unsafe trait Waits: 'static {
    fn wait(word: &AtomicU32, expected: u32);
    fn wait_timeout(word: &AtomicU32, expected: u32, timeout_ns: u64);
}

/// The std platform's waits.
pub struct StdWaits;

// SAFETY: the std platform's, which uphold the contract.
unsafe impl Waits for StdWaits {
    fn wait(word: &AtomicU32, expected: u32) {
        StdPlatform::wait(word, expected)
    }
    fn wait_timeout(word: &AtomicU32, expected: u32, timeout_ns: u64) {
        StdPlatform::wait_timeout(word, expected, timeout_ns)
    }
}

/// The std platform with `now_ns` always 0 and `W`'s waits.
pub struct NoClock<W: Waits = StdWaits>(PhantomData<fn() -> W>);

// SAFETY: everything is the std platform's (which upholds the contract),
// except `now_ns`, a constant 0 as the trait allows for a platform without
// a clock, and the waits, `W`'s (which uphold it: `Waits`' contract).
unsafe impl<W: Waits> Platform for NoClock<W> {
    fn relax() {
        StdPlatform::relax()
    }
    fn yield_now() {
        StdPlatform::yield_now()
    }
    fn sleep_ns(ns: u64) {
        StdPlatform::sleep_ns(ns)
    }
    fn now_ns() -> u64 {
        0
    }
    fn wait(word: &AtomicU32, expected: u32) {
        W::wait(word, expected)
    }
    fn wait_timeout(word: &AtomicU32, expected: u32, timeout_ns: u64) {
        W::wait_timeout(word, expected, timeout_ns)
    }
    fn wake_one(word: &AtomicU32) {
        StdPlatform::wake_one(word)
    }
    fn wake_all(word: &AtomicU32) {
        StdPlatform::wake_all(word)
    }
    fn light_fence() {
        StdPlatform::light_fence()
    }
    fn heavy_fence() {
        StdPlatform::heavy_fence()
    }
    fn with_local<R>(f: impl FnOnce(&LocalState) -> R) -> Option<R> {
        StdPlatform::with_local(f)
    }
    fn queue_node() -> Option<NodeIndex> {
        StdPlatform::queue_node()
    }
    fn node(index: NodeIndex) -> &'static QNode {
        StdPlatform::node(index)
    }
    fn cpu_id() -> usize {
        StdPlatform::cpu_id()
    }
    fn cpu_count() -> usize {
        StdPlatform::cpu_count()
    }
}
