//! MCS queue nodes: where a queued waiter spins, on a cache line of its own.
//!
//! A node is named in a lock word by a 16-bit index (`NodeIndex`, 1..=65535),
//! as Linux names its per-CPU nodes by `(cpu + 1, idx)` in the qspinlock tail.
//! The platform owns the nodes (`Platform::queue_node` / `Platform::node`): the
//! std platform hands each thread one node from a global, never-freed table and
//! recycles it when the thread exits; a kernel would use per-CPU nodes.
//!
//! A node is only in use while its owner waits inside `lock()`: a word
//! waiter that came from the queue keeps its successor linked in its node
//! until it acquires or gives up; once the owner holds the lock nothing
//! refers to it any more, so lock guards never carry nodes and callers
//! never pass them. The owner tells the platform when its wait is over
//! (`Platform::queue_node_returned`): a lock taken inside the wait (a
//! global allocator on a lock of this crate) must not get the same node.
//!
//! Node memory is never freed while any lock may still name it: a predecessor
//! may issue a late futex wake on a node whose owner already left; that costs
//! the next owner one spurious wake-up, never a use-after-free. A waiter that
//! gives up (a timed lock) unlinks its node before it leaves, so that no
//! other thread writes into it once its owner reuses it (see
//! `qspinlock/queue.rs`).

use core::num::NonZeroU16;

use crate::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use crate::wait::BatchDebt;

/// The node's owner is queued behind another waiter.
pub(crate) const NODE_WAITING: u32 = 0;
/// The owner gave up spinning and sleeps in `Platform::wait(state, NODE_PARKED)`.
pub(crate) const NODE_PARKED: u32 = 1;
/// The predecessor acquired the lock (or gave up waiting as the word waiter):
/// the owner is now the queue head and the word waiter (it owns `PENDING`).
pub(crate) const NODE_HEAD: u32 = 2;
/// The predecessor gave up waiting without owning `PENDING` (a timed lock):
/// the owner is first in the queue, with no predecessor, and takes `PENDING`
/// when the word waiter is done.
pub(crate) const NODE_FIRST: u32 = 3;

/// Index of a queue node: what a lock word's tail field stores.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NodeIndex(NonZeroU16);

impl NodeIndex {
    /// Wraps a raw index; `None` for 0, which lock words use for "no node".
    #[inline]
    pub const fn new(raw: u16) -> Option<Self> {
        match NonZeroU16::new(raw) {
            Some(n) => Some(Self(n)),
            None => None,
        }
    }

    /// The raw index, 1..=65535.
    #[inline]
    pub const fn get(self) -> u16 {
        self.0.get()
    }
}

/// One MCS queue node. Aligned to 128 bytes so that two waiters never share a
/// cache line (x86-64 prefetches line pairs; see crossbeam's `CachePadded`).
#[repr(C, align(128))]
pub struct QNode {
    /// `NODE_WAITING`, `NODE_PARKED`, `NODE_HEAD` or `NODE_FIRST`; written
    /// by the owner (WAITING -> PARKED) and by the predecessor (-> HEAD, or
    /// -> FIRST from a predecessor that gives up without one of its own).
    pub(crate) state: AtomicU32,
    /// Raw `NodeIndex` of the successor, 0 until the successor links itself
    /// (and again while a successor that gives up unlinks itself).
    pub(crate) next: AtomicU32,
    /// Raw `NodeIndex` of the predecessor, 0 for none: set by the owner
    /// before it links itself, rewritten by a predecessor that gives up
    /// (its own predecessor becomes ours). Read only by an owner that gives
    /// up, to unlink itself.
    pub(crate) prev: AtomicU32,
    /// When the predecessor made this node head (its clock), so that the
    /// owner's wait is timed from then, not from when it woke up. Written by
    /// the predecessor before its `state` Release.
    pub(crate) since: AtomicU64,
    /// Raw `NodeIndex` of the predecessor that made this node head by
    /// acquiring the lock (0: made head by one that gave up), written with
    /// `since`: the owner settles that holder's batch in its `debt` when it
    /// takes the lock over. Bit 16: that predecessor found the lock's
    /// holders in a tight loop and gave the owner its CPU (the queued
    /// spinlock's `MADE_BY_YIELDING`; the owner then does not watch the
    /// holder's gaps).
    pub(crate) made_by: AtomicU32,
    /// How much longer than a batch this node's owner held locks lately
    /// (see `wait::batch`). Written by the waiters that end its batches,
    /// read by them when they set one; `reset` keeps it.
    pub(crate) debt: BatchDebt,
    /// Statistics only: the node's place in the order of arrival of its
    /// queue (its predecessor's plus one, 1 with none; 0 until set), from
    /// which a new queue head reads the queue's depth (`qspinlock/queue.rs`).
    #[cfg(feature = "stats")]
    pub(crate) seq: AtomicU32,
}

impl QNode {
    /// A fresh, unused node.
    #[cfg(not(loom))]
    pub const fn new() -> Self {
        Self {
            state: AtomicU32::new(NODE_WAITING),
            next: AtomicU32::new(0),
            prev: AtomicU32::new(0),
            since: AtomicU64::new(0),
            made_by: AtomicU32::new(0),
            debt: BatchDebt::new(),
            #[cfg(feature = "stats")]
            seq: AtomicU32::new(0),
        }
    }

    /// A fresh, unused node.
    #[cfg(loom)]
    pub fn new() -> Self {
        Self {
            state: AtomicU32::new(NODE_WAITING),
            next: AtomicU32::new(0),
            prev: AtomicU32::new(0),
            since: AtomicU64::new(0),
            made_by: AtomicU32::new(0),
            debt: BatchDebt::new(),
            #[cfg(feature = "stats")]
            seq: AtomicU32::new(0),
        }
    }

    /// Prepares the node for a new wait. Only the owner calls this, while no
    /// lock names the node.
    #[inline]
    pub(crate) fn reset(&self) {
        self.state.store(NODE_WAITING, Ordering::Relaxed);
        self.next.store(0, Ordering::Relaxed);
        self.prev.store(0, Ordering::Relaxed);
        #[cfg(feature = "stats")]
        self.seq.store(0, Ordering::Relaxed);
    }
}

impl Default for QNode {
    fn default() -> Self {
        Self::new()
    }
}
