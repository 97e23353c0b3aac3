//! `ShuttlePlatform`: the platform for shuttle's randomized schedules (PCT
//! and random; `tests/shuttle_locks.rs`). It follows `LoomPlatform`:
//!
//! - `wait` really blocks, on a shuttle condition variable, re-checking the
//!   word under its mutex (the futex contract), so a lost wake-up leaves a
//!   thread blocked for good and shuttle reports the deadlock;
//! - `relax`, `yield_now`, `sleep_ns` and `wait_timeout` yield to shuttle's
//!   scheduler (under PCT a yield lowers the thread's priority, so a spinning
//!   waiter lets the thread it waits for run) and return;
//! - fences are shuttle's: every shuttle atomic access is `SeqCst`, so both
//!   fence kinds are satisfied by construction (weak-memory behaviour is
//!   loom's job);
//! - per-thread state (queue node index, `LocalState`, reader slot) lives in
//!   shuttle's `thread_local!`, which is per model thread. std's would be
//!   wrong: shuttle runs all model threads as coroutines on the test's one OS
//!   thread, so they would share one queue node and one `LocalState`;
//! - statics are shuttle lazy statics, rebuilt for every execution, so a
//!   failing schedule replays from the same state.
//!
//! Unlike loom's, its clock moves: each `now_ns` reading advances a
//! per-execution clock by a step drawn from shuttle's random source (part of
//! the recorded schedule, so replays are exact), and a timed sleep or wait
//! advances it by its timeout. Batches then end by time as well as by
//! polls, and the per-CPU rwlock's revocation costs and write gaps vary, so
//! its biased, symmetric and inhibited modes are all reached.
//!
//! Seven queue nodes are handed out per execution (as under loom): with
//! more model threads than that, the later ones wait without a node, so
//! both the queued and the node-less paths run.

use core::sync::atomic::AtomicU64 as ClockWord;

use shuttle::rand::RngCore;
use shuttle::sync::{Condvar, Mutex};

use super::{ClockInstant, Platform, TimedPlatform};
use crate::qnode::{NodeIndex, QNode};
use crate::sync::atomic::{AtomicU32, Ordering};

/// Queue node table size; index 0 is never handed out.
const NODES: usize = 8;

/// Largest clock step of one `now_ns` reading, in ns (exclusive). Around
/// the model tuning's `pc_sym_cost_ns`, so a revocation is sometimes dear.
const CLOCK_STEP_NS: u64 = 4_096;

/// The platform used under `cfg(shuttle)`.
#[derive(Debug, Clone, Copy, Default)]
pub struct ShuttlePlatform;

crate::sync::model_lazy_static! {
    static ref TABLE: [QNode; NODES] = core::array::from_fn(|_| QNode::new());
    static ref NEXT: AtomicU32 = AtomicU32::new(1);
    /// The futex: one wait queue for every word (wakes are broadcast, so
    /// sharing it only adds spurious wake-ups, which the contract allows).
    static ref FUTEX: (Mutex<()>, Condvar) = (Mutex::new(()), Condvar::new());
    /// The execution's clock. A plain atomic, not a model one: reading the
    /// time is no access to the locks' shared memory, and a scheduling point
    /// at every reading would only lengthen the schedules.
    static ref CLOCK: ClockWord = ClockWord::new(0);
}

crate::sync::model_thread_local! {
    static MINE: core::cell::Cell<u16> = core::cell::Cell::new(0);
    static LOCAL: super::LocalState = super::LocalState::new();
}

/// Lets `ns` of model time pass.
fn advance(ns: u64) -> u64 {
    // Relaxed: model threads run one at a time on one OS thread.
    CLOCK.fetch_add(ns, core::sync::atomic::Ordering::Relaxed) + ns
}

/// Timed acquisitions on the model clock (`now_ns`), which moves by a
/// random step at each reading: deadlines pass at random points of the
/// schedule.
impl TimedPlatform for ShuttlePlatform {
    type Instant = ClockInstant;

    fn deadline_ns(deadline: &ClockInstant) -> u64 {
        deadline.as_ns()
    }

    fn instant_after(timeout: core::time::Duration) -> Option<ClockInstant> {
        ClockInstant::now::<Self>().checked_add(timeout)
    }
}

// SAFETY: `wait` re-checks the word under the mutex that every `wake_*`
// takes before notifying, so a wake that follows a change of the word is
// never lost; every shuttle atomic access is SeqCst, which gives the
// light/heavy fence pair its store-buffering guarantee; each model thread
// gets a distinct node index from `NEXT` (fresh per execution), and the
// reader slot indices come from `reader_table::thread_slot`, which hands
// each model thread its own and bounds them by `NEXT`'s high-water mark.
unsafe impl Platform for ShuttlePlatform {
    fn relax() {
        shuttle::thread::yield_now();
    }
    fn yield_now() {
        shuttle::thread::yield_now();
    }
    fn now_ns() -> u64 {
        advance(shuttle::rand::thread_rng().next_u64() % CLOCK_STEP_NS)
    }
    fn sleep_ns(ns: u64) {
        advance(ns);
        shuttle::thread::yield_now();
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
    fn wait_timeout(_: &AtomicU32, _: u32, timeout_ns: u64) {
        // A timed wait that times out: a (permitted) spurious return after
        // its timeout, which lets the waiter's next poll run.
        advance(timeout_ns);
        shuttle::thread::yield_now();
    }
    fn with_local<R>(f: impl FnOnce(&super::LocalState) -> R) -> Option<R> {
        // `None` (no local state) once the thread's locals are being torn
        // down, e.g. for a guard dropped by another thread-local's
        // destructor.
        LOCAL.try_with(f).ok()
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
        crate::sync::atomic::fence(Ordering::SeqCst);
    }
    fn heavy_fence() {
        crate::sync::atomic::fence(Ordering::SeqCst);
    }
    fn queue_node() -> Option<NodeIndex> {
        MINE.try_with(|m| {
            if m.get() == 0 {
                let i = NEXT.fetch_add(1, Ordering::Relaxed);
                if i as usize >= NODES {
                    return None;
                }
                m.set(i as u16);
            }
            NodeIndex::new(m.get())
        })
        .ok()
        .flatten()
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
