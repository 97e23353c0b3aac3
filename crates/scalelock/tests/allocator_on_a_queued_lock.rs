//! A global allocator built on a `QSpinLock`. A thread's first queued wait
//! takes a queue node, and the thread that takes the first node of a new
//! segment of the node table allocates that segment: through the
//! allocator, so on the allocator's lock, while it waits for that lock.
//! If that inner acquisition must queue too, it must not ask for a node
//! again (it did: each level took a fresh index in the same unallocated
//! segment and allocated it again, until the lock came free or the stack
//! overflowed).

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use scalelock::QSpinLock;

/// The allocator's lock; counts the allocations made through it.
static LOCK: QSpinLock<u64> = QSpinLock::new(0);
/// Allocations of 4 KiB or more (a node segment is one).
static BIG: AtomicUsize = AtomicUsize::new(0);
/// Allocations counted outside the lock, to compare with the locked count.
static COUNTED: AtomicU64 = AtomicU64::new(0);

std::thread_local! {
    /// Whether this thread's allocations take `LOCK`.
    static THROUGH_LOCK: Cell<bool> = const { Cell::new(false) };
}

struct OnALock;

impl OnALock {
    fn locked<R>(&self, size: usize, f: impl FnOnce() -> R) -> R {
        if size >= 4096 {
            BIG.fetch_add(1, Ordering::Relaxed);
        }
        if !THROUGH_LOCK.with(Cell::get) {
            return f();
        }
        let mut guard = LOCK.lock();
        *guard += 1;
        COUNTED.fetch_add(1, Ordering::Relaxed);
        f()
    }
}

// SAFETY: `System`'s, with a lock taken around each call.
unsafe impl GlobalAlloc for OnALock {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller's contract is `System`'s.
        self.locked(layout.size(), || unsafe { System.alloc(layout) })
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: the caller's contract is `System`'s.
        self.locked(0, || unsafe { System.dealloc(ptr, layout) })
    }
}

#[global_allocator]
static ALLOCATOR: OnALock = OnALock;

/// Takes node indices until one starts a new segment of the node table
/// (its allocation is seen), then the rest of that segment: the next
/// thread that asks for a node allocates the next segment. (Indices start
/// at 1, so the first segment seen may hold 255: wait for a second.)
fn use_up_the_current_segment() {
    let mut starts_seen = 0;
    for _ in 0..2 * 256 {
        let before = BIG.load(Ordering::Relaxed);
        assert_eq!(scalelock::__test::hog_queue_nodes(1), 1);
        if BIG.load(Ordering::Relaxed) > before {
            starts_seen += 1;
            if starts_seen == 2 {
                assert_eq!(scalelock::__test::hog_queue_nodes(255), 255);
                return;
            }
        }
    }
    panic!("no two node segments were allocated in 512 nodes");
}

#[test]
fn a_wait_inside_the_node_segments_allocation_does_not_queue_again() {
    // A hang fails the test instead of the whole run (a stack overflow
    // aborts the process by itself).
    std::thread::spawn(|| {
        std::thread::sleep(Duration::from_secs(60));
        let _ = std::io::Write::write_all(
            &mut std::io::stderr(),
            b"the allocator's lock waited for itself\n",
        );
        std::process::abort();
    });
    use_up_the_current_segment();
    let big_before = BIG.load(Ordering::Relaxed);
    // A holder keeps the lock for a while, and a second thread waits as
    // the word waiter (the pending path, no node): a third must queue.
    let (held_tx, held_rx) = std::sync::mpsc::channel();
    let holder = std::thread::spawn(move || {
        let guard = LOCK.lock();
        held_tx.send(()).unwrap();
        std::thread::sleep(Duration::from_millis(400));
        drop(guard);
    });
    held_rx.recv().unwrap();
    let word_waiter = std::thread::spawn(|| drop(LOCK.lock()));
    std::thread::sleep(Duration::from_millis(50));
    // The queued thread allocates through the lock, on a small stack: its
    // queue node starts a new segment, allocated while it waits.
    let queued = std::thread::Builder::new()
        .stack_size(128 << 10)
        .spawn(|| {
            THROUGH_LOCK.with(|t| t.set(true));
            let mut guard = LOCK.lock();
            *guard += 1;
            COUNTED.fetch_add(1, Ordering::Relaxed);
            drop(guard);
            THROUGH_LOCK.with(|t| t.set(false));
        })
        .unwrap();
    queued.join().unwrap();
    word_waiter.join().unwrap();
    holder.join().unwrap();
    assert_eq!(
        BIG.load(Ordering::Relaxed) - big_before,
        1,
        "the node segment was allocated once"
    );
    let locked = *LOCK.lock();
    assert_eq!(
        locked,
        COUNTED.load(Ordering::Relaxed),
        "an update was lost"
    );
    assert!(
        locked >= 2,
        "the segment's allocation went through the lock"
    );
}
