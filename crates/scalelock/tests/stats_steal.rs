//! QSpinLock's steal, made deterministic: a fair unlock reserves the lock
//! for its word waiter, the waiter cannot run (its platform's `wait` keeps
//! it asleep, as a preempted thread would be), and a contender spinning
//! before it queues takes the reserved lock once the waiter has not come
//! for `qs_steal_polls` polls (this platform has no clock). Statistics
//! count exactly one steal, on the write row, and the waiter still gets the
//! lock after the thief (its release reserves the lock again).
//!
//! Run: `cargo test -p scalelock --features stats --test stats_steal`
#![cfg(feature = "stats")]

mod hook_lock;

use std::cell::Cell;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::thread;

use hook_lock::{class_stats, stats_setup, wait_until};
use scalelock::platform::{LocalState, Platform, StdPlatform};
use scalelock::qnode::{NodeIndex, QNode};
use scalelock::{ClassRef, LockClass, RawQSpinLock};

/// Set while the gated threads must stay asleep.
static GATE_CLOSED: AtomicBool = AtomicBool::new(true);
/// Gated threads now inside `wait` or `wait_timeout`.
static GATED_WAITING: AtomicU32 = AtomicU32::new(0);

std::thread_local! {
    /// This thread's waits last until the gate opens.
    static GATED: Cell<bool> = const { Cell::new(false) };
}

/// A gated thread's wait: asleep until the gate opens, whatever wakes it
/// meanwhile (as a thread the scheduler does not run); then it returns,
/// which the contract allows as a spurious return.
fn gated_wait() -> bool {
    if !GATED.with(Cell::get) {
        return false;
    }
    GATED_WAITING.fetch_add(1, Ordering::SeqCst);
    while GATE_CLOSED.load(Ordering::SeqCst) {
        std::thread::sleep(std::time::Duration::from_micros(100));
    }
    GATED_WAITING.fetch_sub(1, Ordering::SeqCst);
    true
}

/// The std platform without a clock (batches and the steal wait count
/// polls), whose gated threads sleep through wake-ups until the gate opens.
struct Gated;

// SAFETY: everything is the std platform's (which upholds the contract),
// except `now_ns`, a constant 0 as the trait allows for a platform without
// a clock, and a gated thread's `wait` / `wait_timeout`, which return only
// once the test opens the gate (a late return: the thread was not
// scheduled; returning without the word changing is a permitted spurious
// return).
unsafe impl Platform for Gated {
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
        if !gated_wait() {
            StdPlatform::wait(word, expected)
        }
    }
    fn wait_timeout(word: &AtomicU32, expected: u32, timeout_ns: u64) {
        if !gated_wait() {
            StdPlatform::wait_timeout(word, expected, timeout_ns)
        }
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

type Lock = lock_api::Mutex<RawQSpinLock<Gated>, Vec<&'static str>>;

#[test]
fn a_reserved_lock_whose_waiter_cannot_run_is_stolen_and_counted() {
    stats_setup();
    const NAME: &str = "qspin-steal";
    static C: LockClass = LockClass::new(NAME);
    static L: Lock = Lock::from_raw(RawQSpinLock::with_class(ClassRef::of(&C)), Vec::new());
    // (No statistics for the class before its first acquisition.)
    let before = scalelock::stats::snapshot()
        .class(NAME)
        .map_or(0, |c| c.write.events.steals);
    /// Opens the gate when dropped: a failed assertion must not leave the
    /// waiter asleep, or the scope would wait for it for ever.
    struct OpenGate;
    impl Drop for OpenGate {
        fn drop(&mut self) {
            GATE_CLOSED.store(false, Ordering::SeqCst);
        }
    }
    thread::scope(|s| {
        let open = OpenGate;
        let mut g = L.lock();
        g.push("holder");
        // The waiter: the word waiter (nobody else waits), asleep through
        // its batch in its platform's wait, which lasts until the gate
        // opens.
        s.spawn(|| {
            GATED.with(|g| g.set(true));
            L.lock().push("waiter");
        });
        wait_until("the waiter sleeps on the word", || {
            GATED_WAITING.load(Ordering::SeqCst) == 1
        });
        // Reserved for the waiter, which cannot come for it.
        lock_api::MutexGuard::unlock_fair(g);
        assert!(!L.is_locked(), "reserved, not held");
        assert!(
            L.try_lock().is_none(),
            "reserved: no newcomer's try gets it"
        );
        // The thief spins before queueing and takes it.
        s.spawn(|| L.lock().push("thief")).join().unwrap();
        assert_eq!(
            class_stats(NAME).write.events.steals,
            before + 1,
            "one steal, on the write row"
        );
        drop(open);
    });
    assert_eq!(*L.lock(), ["holder", "thief", "waiter"]);
    let st = class_stats(NAME);
    assert_eq!(
        st.events.steals,
        st.read.events.steals + st.write.events.steals
    );
    assert_eq!(st.read.events.steals, 0);
}
