//! The std platform's queue nodes: one per thread, from a global table that
//! grows in segments and is never freed; a thread's index returns to a free
//! list when the thread exits.
//!
//! Capacity is 65,535 nodes (what a 16-bit lock tail can name). A thread that
//! finds none free, or that locks from a thread-local destructor after its
//! node was released, gets `None` and waits unqueued (see `qspinlock.rs`):
//! still correct, no longer FIFO. One that found the table full asks again
//! once an exited thread has given a node back (a Relaxed load of the free
//! stack's top per ask until then). Threads may come and go without limit.
//! So does a lock taken while the thread's node is being set up or waited
//! on (a new segment is allocated through the global allocator, which may
//! sit on a lock of this crate): `tests/allocator_on_a_queued_lock.rs`.

use std::boxed::Box;
use std::cell::Cell;

use core::sync::atomic::{AtomicPtr, AtomicU16, AtomicU32, AtomicU64, Ordering};

use crate::qnode::{NODE_WAITING, NodeIndex, QNode};

const _: () = assert!(NODE_WAITING == 0, "segments are allocated zeroed");

const SEGMENT_SHIFT: u32 = 8;
const SEGMENT_LEN: usize = 1 << SEGMENT_SHIFT;
const SEGMENTS: usize = (u16::MAX as usize + 1) / SEGMENT_LEN;

type Segment = [QNode; SEGMENT_LEN];

/// Lazily allocated segments; a published segment is never freed.
static TABLE: [AtomicPtr<Segment>; SEGMENTS] =
    [const { AtomicPtr::new(core::ptr::null_mut()) }; SEGMENTS];
/// Next never-used index (indices start at 1).
static HIGH_WATER: AtomicU32 = AtomicU32::new(1);
/// Indices released by exited threads: a lock-free stack (Treiber's) with
/// its links in static memory (128 KiB, untouched until threads exit), so
/// that giving an index back allocates nothing and takes no lock. (A `Vec`
/// grew under a mutex: through a global allocator on a lock of this crate,
/// that lock's first queued wait on another thread could wait for the
/// mutex held by an exiting thread that waited for the lock. And a process
/// that forked while another thread held that mutex, exiting or taking its
/// first node, left it held for ever in the child, whose threads then hung
/// at their first queued wait or at their exit.)
///
/// The top index in the low 16 bits (0: empty); above them a count of
/// the stack's changes, so that a pop that read the link of a top that
/// other threads popped and pushed back meanwhile fails its cmpxchg (ABA;
/// 48 bits do not wrap).
static FREE_TOP: AtomicU64 = AtomicU64::new(0);
/// `FREE_NEXT[i]`: the index below `i` while `i` is on the stack (0:
/// none). Every index is in the table once, and at most once on the stack.
static FREE_NEXT: [AtomicU16; SEGMENTS * SEGMENT_LEN] =
    [const { AtomicU16::new(0) }; SEGMENTS * SEGMENT_LEN];

/// Whether an exited thread's index is free (a thread that found the table
/// full asks again only then). Relaxed: a hint; a stale answer only delays
/// the next ask to a later wait.
fn free_nonempty() -> bool {
    FREE_TOP.load(Ordering::Relaxed) & 0xffff != 0
}

/// `FREE_TOP`'s next value, with `index` on top.
fn free_top(old: u64, index: u16) -> u64 {
    ((old >> 16).wrapping_add(1) << 16) | u64::from(index)
}

/// Pops an exited thread's index, if any.
fn pop_free() -> Option<NodeIndex> {
    // Acquire pairs with the Release cmpxchg of the push that put the top
    // there (every later change of `FREE_TOP` is an RMW, in its release
    // sequence): its link and its thread's last use of the node precede
    // our reads and the node's next use.
    let mut top = FREE_TOP.load(Ordering::Acquire);
    loop {
        let index = NodeIndex::new(top as u16)?;
        // Relaxed: ordered by the Acquire above. A link rewritten since (the
        // index popped and pushed again) comes with a changed count, and
        // the cmpxchg fails.
        let below = FREE_NEXT[usize::from(index.get())].load(Ordering::Relaxed);
        // Acquire as above.
        match FREE_TOP.compare_exchange_weak(
            top,
            free_top(top, below),
            Ordering::Acquire,
            Ordering::Acquire,
        ) {
            Ok(_) => return Some(index),
            Err(now) => top = now,
        }
    }
}

fn segment(seg: usize) -> &'static Segment {
    // Acquire pairs with the Release in the compare_exchange below, so the
    // node initialisation is visible before the pointer.
    let mut ptr = TABLE[seg].load(Ordering::Acquire);
    if ptr.is_null() {
        // Allocated zeroed straight on the heap: `Box::new([..; 256])` may
        // build the 32 KiB array on the caller's stack first (it does in
        // debug builds), and the caller may be a thread with a small stack.
        // SAFETY: an all-zero `QNode` is `QNode::new()` (atomics only:
        // `NODE_WAITING` = 0, no successor, no predecessor), so the zeroed array is
        // initialised.
        let fresh = Box::into_raw(unsafe { Box::<Segment>::new_zeroed().assume_init() });
        match TABLE[seg].compare_exchange(
            core::ptr::null_mut(),
            fresh,
            Ordering::AcqRel,
            Ordering::Acquire,
        ) {
            Ok(_) => ptr = fresh,
            Err(winner) => {
                // SAFETY: `fresh` came from Box::into_raw above and was never
                // published, so this is its only owner.
                drop(unsafe { Box::from_raw(fresh) });
                ptr = winner;
            }
        }
    }
    // SAFETY: non-null pointers in TABLE come from Box::into_raw and are never
    // freed, so the segment lives for 'static.
    unsafe { &*ptr }
}

pub(super) fn get(index: NodeIndex) -> &'static QNode {
    let i = index.get() as usize;
    &segment(i >> SEGMENT_SHIFT)[i & (SEGMENT_LEN - 1)]
}

fn allocate() -> Option<NodeIndex> {
    if let Some(index) = pop_free() {
        // An exited thread's node: its batch debt was the dead owner's.
        // (A waiter that settles a debt on it after this, for a batch
        // the old owner ran, leaves the new owner that one batch's
        // debt: a hint, see `BatchDebt`.)
        get(index).debt.clear();
        return Some(index);
    }
    let i = HIGH_WATER
        .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |i| {
            (i <= u16::MAX as u32).then_some(i + 1)
        })
        .ok()?;
    let index = NodeIndex::new(i as u16)?;
    // Allocate the segment now, before the caller's node is in a queue (a
    // lock taken inside the allocation waits unqueued: see `IN_USE`).
    get(index);
    Some(index)
}

fn release(index: NodeIndex) {
    let mut top = FREE_TOP.load(Ordering::Relaxed);
    loop {
        // Relaxed: published by the Release cmpxchg below.
        FREE_NEXT[usize::from(index.get())].store(top as u16, Ordering::Relaxed);
        // Release pairs with the Acquire loads of `pop_free`: the link, and
        // our last use of the node, precede its next owner's.
        match FREE_TOP.compare_exchange_weak(
            top,
            free_top(top, index.get()),
            Ordering::Release,
            Ordering::Relaxed,
        ) {
            Ok(_) => return,
            Err(now) => top = now,
        }
    }
}

/// A thread's claim on its node (returned to the free list at thread
/// exit), and whether `current` may hand it out now (`HAND_OUT`).
struct Slot(Cell<Option<NodeIndex>>, Cell<u8>);

/// `current` may hand the node out (or allocate one).
const HAND_OUT: u8 = 0;
/// The table was full when the thread asked: it waits unqueued until an
/// exited thread gives a node back (`free_nonempty`), then asks again.
const NONE_LEFT: u8 = 1;
/// The node is being allocated or waited on: a lock taken meanwhile on
/// this thread (a global allocator built on a lock of this crate, when
/// the node's segment is allocated or while the thread waits) waits
/// unqueued. Asking again during the allocation took another index in the
/// same unallocated segment and allocated it again, one level deeper each
/// time; during the wait it would reuse the node in use.
const IN_USE: u8 = 2;

impl Drop for Slot {
    fn drop(&mut self) {
        // The thread is exiting, so it is not waiting in any lock: the node is
        // unused. A late futex wake from a past predecessor may still hit it;
        // the next owner treats that as a spurious wake.
        if let Some(index) = self.0.take() {
            release(index);
        }
    }
}

std::thread_local! {
    static SLOT: Slot = const { Slot(Cell::new(None), Cell::new(HAND_OUT)) };
}

/// The calling thread's node, allocated on first use; `None` while it is
/// in use (until `returned`), or if the table was full.
#[inline]
pub(super) fn current() -> Option<NodeIndex> {
    SLOT.try_with(|slot| {
        match slot.1.get() {
            HAND_OUT => {}
            NONE_LEFT if free_nonempty() => {}
            _ => return None,
        }
        slot.1.set(IN_USE);
        if let Some(i) = slot.0.get() {
            return Some(i);
        }
        let got = allocate();
        slot.0.set(got);
        if got.is_none() {
            slot.1.set(NONE_LEFT);
        }
        got
    })
    .ok()
    .flatten()
}

/// The wait on the thread's node `index` is over.
#[inline]
pub(super) fn returned(index: NodeIndex) {
    let _ = SLOT.try_with(|slot| {
        debug_assert_eq!(slot.0.get(), Some(index), "not this thread's node");
        if slot.1.get() == IN_USE {
            slot.1.set(HAND_OUT);
        }
    });
}

/// Test support: the calling thread's queue node index, as a lock's slow
/// path would get it (allocated on first use), and given back at once;
/// `None` if it would wait unqueued.
#[doc(hidden)]
pub fn queue_node_of_this_thread() -> Option<u16> {
    let node = current()?;
    returned(node);
    Some(node.get())
}

/// Test support: takes up to `n` free node indices forever, so that a test can
/// exercise the unqueued fallback without 65,535 live threads. Returns how many
/// it took.
#[doc(hidden)]
pub fn hog_queue_nodes(n: usize) -> usize {
    (0..n).map_while(|_| allocate()).count()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A node index given back by an exited thread reaches its next owner
    /// without the old owner's batch debt.
    #[test]
    fn a_reused_node_owes_no_batch_debt() {
        use crate::wait::TUNING;
        const LOCK: usize = 0x5eed_0000;
        let full = TUNING.batch_ns;
        for _ in 0..100 {
            let index = allocate().expect("a node");
            get(index).debt.settle(LOCK, full + 1_000_000);
            assert!(get(index).debt.batch_ns(LOCK) < full, "the debt counts");
            release(index);
            // Other tests' threads may give their nodes back meanwhile:
            // whichever comes out, it owes nothing on LOCK.
            let again = allocate().expect("a node");
            assert_eq!(get(again).debt.batch_ns(LOCK), full);
            release(again);
            if again == index {
                return;
            }
        }
        panic!("never got the node back");
    }

    /// Run alone in a child process by
    /// `a_child_forked_while_threads_give_nodes_back_gets_a_node`: one
    /// thread keeps giving a node back and taking one (as exiting and new
    /// threads do), and the process forks meanwhile, 20 times; each forked
    /// child (the forking thread alone) takes a node and gives it back. A
    /// child that waits for a free-list lock that the other thread held at
    /// the fork waits for ever: SIGALRM ends it.
    #[test]
    #[cfg(target_os = "linux")]
    #[ignore = "run in a child process by a_child_forked_while_threads_give_nodes_back_gets_a_node"]
    fn child_forks_while_a_thread_gives_nodes_back() {
        use std::sync::Arc;
        use std::sync::atomic::AtomicBool;
        unsafe extern "C" {
            fn fork() -> i32;
            fn alarm(seconds: u32) -> u32;
            fn waitpid(pid: i32, status: *mut i32, options: i32) -> i32;
            fn _exit(status: i32) -> !;
        }
        let stop = Arc::new(AtomicBool::new(false));
        let churn = {
            let stop = stop.clone();
            std::thread::spawn(move || {
                let mut index = allocate().expect("a node");
                while !stop.load(Ordering::Relaxed) {
                    release(index);
                    index = allocate().expect("a node");
                }
                release(index);
            })
        };
        for round in 0..20 {
            std::thread::sleep(std::time::Duration::from_millis(1));
            // SAFETY: the child calls only `allocate`, `release`, `alarm`
            // and `_exit`.
            let pid = unsafe { fork() };
            assert!(pid >= 0, "fork failed");
            if pid == 0 {
                // SAFETY: plain libc calls.
                unsafe { alarm(5) };
                let got = allocate();
                if let Some(index) = got {
                    release(index);
                }
                // SAFETY: ends the child without running the parent's
                // destructors or atexit handlers.
                unsafe { _exit(if got.is_some() { 0 } else { 1 }) };
            }
            let mut status = 0;
            // SAFETY: waits for our child.
            assert_eq!(unsafe { waitpid(pid, &mut status, 0) }, pid);
            assert!(
                status == 0,
                "round {round}: the child {} (status {status:#x}; signal 14: SIGALRM, \
                 it hung)",
                if status & 0x7f != 0 {
                    "was killed"
                } else {
                    "failed"
                }
            );
        }
        stop.store(true, Ordering::Relaxed);
        churn.join().unwrap();
    }

    /// Runs the ignored test `name` of this module alone in a child process.
    fn run_child(name: &str) {
        super::super::run_ignored_test_in_child(&format!(
            "platform::std_impl::nodes::tests::{name}"
        ));
    }

    /// A process that forks while another thread gives its queue node back
    /// (it exits) or takes one: the child may use the locks (the crate
    /// docs), so its threads must get nodes.
    #[test]
    #[cfg(target_os = "linux")]
    #[cfg_attr(miri, ignore = "fork")]
    fn a_child_forked_while_threads_give_nodes_back_gets_a_node() {
        run_child("child_forks_while_a_thread_gives_nodes_back");
    }

    /// Run alone in a child process by
    /// `the_free_list_hands_an_index_to_one_thread_at_a_time` (the other
    /// tests' nodes stay out of its churn).
    #[test]
    #[ignore = "run in a child process by the_free_list_hands_an_index_to_one_thread_at_a_time"]
    fn child_churns_the_free_list() {
        use std::sync::atomic::AtomicBool;
        static HELD: [AtomicBool; SEGMENTS * SEGMENT_LEN] =
            [const { AtomicBool::new(false) }; SEGMENTS * SEGMENT_LEN];
        std::thread::scope(|s| {
            for _ in 0..8 {
                s.spawn(|| {
                    for _ in 0..200_000 {
                        let index = allocate().expect("a node");
                        let i = usize::from(index.get());
                        assert!(
                            !HELD[i].swap(true, Ordering::Relaxed),
                            "{i} handed out twice"
                        );
                        HELD[i].store(false, Ordering::Relaxed);
                        release(index);
                    }
                });
            }
        });
        // Eight threads at a time needed at most eight indices.
        assert!(HIGH_WATER.load(Ordering::Relaxed) <= 9);
    }

    /// Threads that take indices from the free list and give them back
    /// concurrently never hold one index at the same time.
    #[test]
    #[cfg_attr(miri, ignore = "a child process")]
    fn the_free_list_hands_an_index_to_one_thread_at_a_time() {
        run_child("child_churns_the_free_list");
    }

    #[test]
    fn a_node_in_use_is_not_handed_out_again() {
        std::thread::spawn(|| {
            let node = current().expect("a node");
            assert_eq!(current(), None, "handed out the node in use");
            returned(node);
            assert_eq!(current(), Some(node), "the same node, once returned");
            returned(node);
        })
        .join()
        .unwrap();
    }
}
