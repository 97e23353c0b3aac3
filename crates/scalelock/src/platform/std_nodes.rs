//! The std platform's queue nodes: one per thread, from a global table that
//! grows in segments and is never freed; a thread's index returns to a free
//! list when the thread exits.
//!
//! Capacity is 65,535 nodes (what a 16-bit lock tail can name). A thread that
//! finds none free, or that locks from a thread-local destructor after its
//! node was released, gets `None` and waits unqueued (see `qspinlock.rs`):
//! still correct, no longer FIFO. One that found the table full asks again
//! once an exited thread has given a node back (a Relaxed load of the free
//! count per ask until then). Threads may come and go without limit.
//! So does a lock taken while the thread's node is being set up or waited
//! on (a new segment is allocated through the global allocator, which may
//! sit on a lock of this crate): `tests/allocator_on_a_queued_lock.rs`.

use std::boxed::Box;
use std::cell::Cell;
use std::sync::Mutex;

use core::sync::atomic::{AtomicPtr, AtomicU32, Ordering};

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
/// Indices released by exited threads: a stack in static memory (128 KiB,
/// untouched until threads exit), so that giving an index back allocates
/// nothing. (A `Vec` grew under the mutex: through a global allocator on a
/// lock of this crate, that lock's first queued wait on another thread
/// could wait for the mutex held by an exiting thread that waited for the
/// lock.)
static FREE: Mutex<FreeList> = Mutex::new(FreeList {
    len: 0,
    indices: [0; SEGMENTS * SEGMENT_LEN],
});

struct FreeList {
    len: usize,
    /// Every index is in the table once, and at most once here, so the
    /// stack cannot overflow.
    indices: [u16; SEGMENTS * SEGMENT_LEN],
}

/// `FreeList::len`, readable without the mutex: a thread that found the
/// table full asks again only when it is not 0. Relaxed: a hint; a stale
/// 0 only delays the next ask to a later wait.
static FREE_LEN: AtomicU32 = AtomicU32::new(0);

fn free_list() -> std::sync::MutexGuard<'static, FreeList> {
    // Every update leaves the list consistent.
    FREE.lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
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
    {
        let mut free = free_list();
        if free.len > 0 {
            free.len -= 1;
            FREE_LEN.store(free.len as u32, Ordering::Relaxed);
            let index = NodeIndex::new(free.indices[free.len]);
            // An exited thread's node: its batch debt was the dead owner's.
            // (A waiter that settles a debt on it after this, for a batch
            // the old owner ran, leaves the new owner that one batch's
            // debt: a hint, see `BatchDebt`.)
            if let Some(index) = index {
                get(index).debt.clear();
            }
            return index;
        }
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
    let mut free = free_list();
    let len = free.len;
    free.indices[len] = index.get();
    free.len = len + 1;
    FREE_LEN.store(free.len as u32, Ordering::Relaxed);
}

/// A thread's claim on its node (returned to the free list at thread
/// exit), and whether `current` may hand it out now (`HAND_OUT`).
struct Slot(Cell<Option<NodeIndex>>, Cell<u8>);

/// `current` may hand the node out (or allocate one).
const HAND_OUT: u8 = 0;
/// The table was full when the thread asked: it waits unqueued until an
/// exited thread gives a node back (`FREE_LEN`), then asks again.
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
            NONE_LEFT if FREE_LEN.load(Ordering::Relaxed) != 0 => {}
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
