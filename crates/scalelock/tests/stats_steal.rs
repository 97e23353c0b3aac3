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
mod no_clock_platform;

use std::cell::Cell;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::thread;

use hook_lock::{class_stats, stats_setup, wait_until};
use no_clock_platform::{NoClock, StdWaits, Waits};
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

/// The waits of [`Gated`]: a gated thread sleeps through wake-ups until
/// the gate opens, any other waits as on the std platform.
struct GatedWaits;

// SAFETY: the std platform's waits, except a gated thread's, which return
// only once the test opens the gate (a late return: the thread was not
// scheduled; returning without the word changing is a permitted spurious
// return).
unsafe impl Waits for GatedWaits {
    fn wait(word: &AtomicU32, expected: u32) {
        if !gated_wait() {
            StdWaits::wait(word, expected)
        }
    }
    fn wait_timeout(word: &AtomicU32, expected: u32, timeout_ns: u64) {
        if !gated_wait() {
            StdWaits::wait_timeout(word, expected, timeout_ns)
        }
    }
}

/// The std platform without a clock (batches and the steal wait count
/// polls), whose gated threads sleep through wake-ups until the gate opens.
type Gated = NoClock<GatedWaits>;

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
        // Held by nobody, but reserved: `is_locked` counts it (as
        // parking_lot reports a hand-off), and no try gets it.
        assert!(L.is_locked(), "reserved for the waiter");
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
