//! Many sleeping threads (a big host's thread pool): a `notify_one` wakes
//! the one waiter it chose, not every thread whose sleep hashes to the same
//! parking bucket. The parking lot had 64 buckets for the whole process, and
//! each wake is a `wake_all` of its bucket, so with N sleepers one notify
//! woke about N/64 threads (each re-checks and sleeps again), and a
//! `notify_all` wake chain of N waiters cost about N * N/64 wake-ups:
//! invisible with the handful of threads of a small machine.
#![cfg(all(target_os = "linux", not(any(loom, shuttle, miri))))]

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use scalelock::platform::{LocalState, Platform, StdPlatform};
use scalelock::qnode::{NodeIndex, QNode};
use scalelock::{RawQCondvar, RawQSpinLock};

/// Returns from `Platform::wait` (a sleeper woken, or its word changed).
static WAKES: AtomicUsize = AtomicUsize::new(0);

/// The std platform, counting the returns of its waits.
struct Counting;

// SAFETY: every hook is the std platform's (which upholds the contract);
// the waits only count their returns.
unsafe impl Platform for Counting {
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
        StdPlatform::now_ns()
    }
    fn wait(word: &AtomicU32, expected: u32) {
        StdPlatform::wait(word, expected);
        WAKES.fetch_add(1, Ordering::Relaxed);
    }
    fn wait_timeout(word: &AtomicU32, expected: u32, timeout_ns: u64) {
        StdPlatform::wait_timeout(word, expected, timeout_ns);
        WAKES.fetch_add(1, Ordering::Relaxed);
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
    fn queue_node_returned(index: NodeIndex) {
        StdPlatform::queue_node_returned(index)
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

type Mutex<T> = lock_api::Mutex<RawQSpinLock<Counting>, T>;
type Condvar = lock_api::Condvar<RawQCondvar<Counting>>;

/// Waits until `WAKES` has not moved for 300 ms (every sleeper asleep).
fn settle() -> usize {
    let start = Instant::now();
    let mut last = WAKES.load(Ordering::Relaxed);
    loop {
        thread::sleep(Duration::from_millis(300));
        let now = WAKES.load(Ordering::Relaxed);
        if now == last {
            return now;
        }
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "sleepers never settled"
        );
        last = now;
    }
}

/// 1,024 threads wait on one condvar (a thread pool's idle workers); one
/// `notify_one` should wake one thread, give or take one.
#[test]
fn notify_one_among_a_thousand_sleepers_wakes_about_one_thread() {
    const SLEEPERS: usize = 1024;
    let state = Arc::new((Mutex::new(0usize), Condvar::new()));
    let done = Arc::new(AtomicUsize::new(0));
    let threads: Vec<_> = (0..SLEEPERS)
        .map(|_| {
            let state = state.clone();
            let done = done.clone();
            thread::Builder::new()
                .stack_size(128 * 1024)
                .spawn(move || {
                    let (m, cv) = &*state;
                    let mut g = m.lock();
                    // Wait for a permit (no spurious returns: one wait).
                    while *g == 0 {
                        cv.wait(&mut g);
                    }
                    *g -= 1;
                    drop(g);
                    done.fetch_add(1, Ordering::Relaxed);
                })
                .unwrap()
        })
        .collect();
    let (m, cv) = &*state;
    let start = Instant::now();
    while cv.raw().waiters() < SLEEPERS {
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "threads never all waited"
        );
        thread::sleep(Duration::from_millis(10));
    }
    let before = settle();
    *m.lock() += 1;
    assert!(cv.notify_one());
    let start = Instant::now();
    while done.load(Ordering::Relaxed) < 1 {
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "the notified thread never ran"
        );
        thread::sleep(Duration::from_millis(1));
    }
    let after = settle();
    let woken = after - before;
    // Let everybody go.
    *m.lock() += SLEEPERS - 1;
    cv.notify_all();
    for t in threads {
        t.join().unwrap();
    }
    assert!(
        woken <= 4,
        "one notify_one among {SLEEPERS} sleepers woke {woken} of them (the parking \
         bucket's sleepers, about {SLEEPERS}/buckets)"
    );
}
