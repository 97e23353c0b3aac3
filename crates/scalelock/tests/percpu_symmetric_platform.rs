//! PerCpuRwLock on a platform whose fences are not asymmetric (as the std
//! platform where `membarrier` is unavailable): no lock may ever be biased,
//! since a biased read uses the unchecked light fence. This platform's
//! `light_fence_asymmetric` panics, so any biased read fails the test:
//! through an `INIT` lock on the default table (its first use decides),
//! a lock built `with_table`, a Xen-style table (the bias comes back at
//! every write unlock) and writes rare enough to bring a symmetric lock
//! back to the bias.
//!
//! One test binary, so that the default table is bound to this platform.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering, fence};
use std::thread;
use std::time::Duration;

use scalelock::platform::{LocalState, Platform, StdPlatform};
use scalelock::qnode::{NodeIndex, QNode};
use scalelock::{RawPerCpuRwLock, ReaderTable};

#[derive(Debug, Clone, Copy, Default)]
struct Symmetric;

// SAFETY: the std platform's mechanisms, with both fences full
// `fence(SeqCst)`s (a correct symmetric pair), `asymmetric_fences` false
// and `light_fence_asymmetric` never to be called.
unsafe impl Platform for Symmetric {
    fn relax() {
        StdPlatform::relax()
    }
    fn yield_now() {
        StdPlatform::yield_now()
    }
    fn now_ns() -> u64 {
        StdPlatform::now_ns()
    }
    fn wait(word: &AtomicU32, expected: u32) {
        StdPlatform::wait(word, expected)
    }
    fn wake_one(word: &AtomicU32) {
        StdPlatform::wake_one(word)
    }
    fn wake_all(word: &AtomicU32) {
        StdPlatform::wake_all(word)
    }
    fn light_fence() {
        fence(Ordering::SeqCst);
    }
    fn heavy_fence() {
        fence(Ordering::SeqCst);
    }
    fn asymmetric_fences() -> bool {
        false
    }
    fn light_fence_asymmetric() {
        panic!("a biased read on a platform without asymmetric fences");
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
    fn reader_slot() -> Option<usize> {
        StdPlatform::reader_slot()
    }
    fn reader_slot_bound() -> usize {
        StdPlatform::reader_slot_bound()
    }
    fn reader_slots_in_use(f: impl FnMut(usize)) {
        StdPlatform::reader_slots_in_use(f)
    }
    fn with_local<R>(f: impl FnOnce(&LocalState) -> R) -> Option<R> {
        StdPlatform::with_local(f)
    }
    fn sleep_ns(ns: u64) {
        StdPlatform::sleep_ns(ns)
    }
}

type Lock<T> = lock_api::RwLock<RawPerCpuRwLock<Symmetric>, T>;

static TABLE: ReaderTable = ReaderTable::new();
static XEN: ReaderTable = ReaderTable::with_inhibition(0);

/// Readers and a writer on `lock`, with gaps between writes that cover
/// dense, in-between and rare (> `pc_rare_ns`) writes.
fn exercise(lock: Arc<Lock<u64>>) {
    // A read first: on a fresh lock, the one that meets its initial state.
    let _ = *lock.read();
    let readers: Vec<_> = (0..2)
        .map(|_| {
            let lock = lock.clone();
            thread::spawn(move || {
                let mut seen = 0;
                for _ in 0..20_000 {
                    let v = *lock.read();
                    assert!(v >= seen, "reads went backwards");
                    seen = v;
                }
            })
        })
        .collect();
    for gap_us in [0u64, 0, 5, 50, 1_000, 2_000, 0, 1_000] {
        *lock.write() += 1;
        thread::sleep(Duration::from_micros(gap_us));
        // A read alone, after the gap: the one most likely to be biased.
        let _ = *lock.read();
    }
    for r in readers {
        r.join().unwrap();
    }
    assert_eq!(*lock.read(), 8);
}

#[test]
fn never_biased_without_asymmetric_fences() {
    // `INIT` on the default table: the first use assigns the id and decides.
    exercise(Arc::new(Lock::new(0)));
    exercise(Arc::new(lock_api::RwLock::from_raw(
        RawPerCpuRwLock::with_table(&TABLE),
        0,
    )));
    exercise(Arc::new(lock_api::RwLock::from_raw(
        RawPerCpuRwLock::with_table(&XEN),
        0,
    )));
}
