//! `LoomPlatform`: the platform for loom model checks. `wait` really blocks
//! (on a loom condition variable, re-checking the word under its mutex, which
//! is the futex contract), so a lost wake-up shows up as a loom deadlock;
//! `relax` yields to the model's scheduler; fences are SeqCst fences; a
//! handful of queue nodes are handed out per model thread. The clock reads 0,
//! except in a model thread that started a ticking clock
//! ([`LoomPlatform::start_ticking_clock`]): there each reading is one
//! nanosecond later than the last, so a model can let a timed wait expire
//! after a given number of clock readings.

use core::cell::Cell;
use core::time::Duration;

use super::{ClockInstant, Platform, TimedPlatform};
use crate::qnode::{NodeIndex, QNode};
use crate::sync::atomic::{AtomicU32, Ordering, fence};

const NODES: usize = 8;

/// The platform used under `cfg(loom)`.
#[derive(Debug, Clone, Copy, Default)]
pub struct LoomPlatform;

loom::lazy_static! {
    static ref TABLE: [QNode; NODES] = core::array::from_fn(|_| QNode::new());
    static ref NEXT: AtomicU32 = AtomicU32::new(1);
    /// The futex: one wait queue for every word (wakes are broadcast, so
    /// sharing it only adds spurious wake-ups, which the contract allows).
    static ref FUTEX: (loom::sync::Mutex<()>, loom::sync::Condvar) =
        (loom::sync::Mutex::new(()), loom::sync::Condvar::new());
}

loom::thread_local! {
    static MINE: core::cell::Cell<u16> = core::cell::Cell::new(0);
    static LOCAL: super::LocalState = super::LocalState::new();
    static CLOCK: Cell<Option<u64>> = Cell::new(None);
}

impl LoomPlatform {
    /// Model support: from now on, the calling model thread's clock reads
    /// 1, 2, 3, ... (one nanosecond per reading); the other threads' clocks
    /// stay at 0. A thread-local, not an atomic: it adds no state to the
    /// model.
    #[doc(hidden)]
    pub fn start_ticking_clock() {
        CLOCK.with(|c| c.set(Some(1)));
    }
}

impl TimedPlatform for LoomPlatform {
    type Instant = ClockInstant;

    fn deadline_ns(deadline: &ClockInstant) -> u64 {
        deadline.as_ns()
    }

    fn instant_after(timeout: Duration) -> Option<ClockInstant> {
        ClockInstant::now::<Self>().checked_add(timeout)
    }
}

// SAFETY: `wait` re-checks the word under the mutex that every `wake_*`
// takes before notifying, fences are SeqCst, and each model thread gets a
// distinct index from `NEXT`.
unsafe impl Platform for LoomPlatform {
    fn relax() {
        loom::thread::yield_now();
    }
    fn yield_now() {
        loom::thread::yield_now();
    }
    fn now_ns() -> u64 {
        CLOCK.with(|c| match c.get() {
            None => 0,
            Some(t) => {
                c.set(Some(t + 1));
                t
            }
        })
    }
    fn sleep_ns(_: u64) {
        loom::thread::yield_now();
    }
    #[track_caller]
    fn wait(word: &AtomicU32, expected: u32) {
        let guard = FUTEX.0.lock().unwrap();
        // Checked under the mutex every waker takes: no wake-up is lost
        // between this check and the sleep.
        if word.load(Ordering::SeqCst) == expected {
            drop(FUTEX.1.wait(guard).unwrap());
        }
    }
    fn wait_timeout(_: &AtomicU32, _: u32, _: u64) {
        // No time in a model: a timed wait is a (permitted) spurious return.
        loom::thread::yield_now();
    }
    fn with_local<R>(f: impl FnOnce(&super::LocalState) -> R) -> Option<R> {
        Some(LOCAL.with(f))
    }
    fn wake_one(_: &AtomicU32) {
        let _guard = FUTEX.0.lock().unwrap();
        FUTEX.1.notify_all();
    }
    fn wake_all(_: &AtomicU32) {
        let _guard = FUTEX.0.lock().unwrap();
        FUTEX.1.notify_all();
    }
    fn light_fence() {
        fence(Ordering::SeqCst);
    }
    fn heavy_fence() {
        fence(Ordering::SeqCst);
    }
    fn queue_node() -> Option<NodeIndex> {
        MINE.with(|m| {
            if m.get() == 0 {
                let i = NEXT.fetch_add(1, Ordering::Relaxed);
                if i as usize >= NODES {
                    return None;
                }
                m.set(i as u16);
            }
            NodeIndex::new(m.get())
        })
    }
    fn node(index: NodeIndex) -> &'static QNode {
        &TABLE[index.get() as usize]
    }
    fn cpu_id() -> usize {
        0
    }
    fn cpu_count() -> usize {
        2
    }
    fn reader_slot() -> Option<usize> {
        crate::reader_table::thread_slot::current()
    }
    fn reader_slot_bound() -> usize {
        crate::reader_table::thread_slot::bound()
    }
}
