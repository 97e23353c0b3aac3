//! # scalelock
//!
//! Locks that keep scaling when many CPUs hammer the same data.
//!
//! | lock | use it for |
//! | --- | --- |
//! | [`QSpinLock`] | a 4-byte mutex: uncontended cost of a spinlock, FIFO queueing under contention, parks instead of burning a CPU when a waiter or holder is preempted |
//! | [`QRwLock`] | an 8-byte reader-writer lock: one atomic per read or write when uncontended, readers never block each other while no writer waits, contended readers and writers queue in arrival order (writers never starve) |
//! | [`PerCpuRwLock`] | read-mostly data read by many threads at once: a read writes only the reading thread's own cache line (no shared atomic); a write revokes that bias with a membarrier and a scan of the reader slots. The lock picks its read mode from the writes it sees: biased (rare writes), symmetric (readers pay a full fence so writers need no membarrier, when membarrier is dear) or inhibited (dense writes: reads take the underlying `QRwLock` for a window sized from the revocation cost, after BRAVO); 16 bytes plus a [`ReaderTable`] shared by a class of locks |
//! | [`SeqLock`] | a small `Copy` value read far more often than written: readers write nothing shared and retry if a write overlapped; no data race in the Rust memory model |
//! | [`RefreshOnce`] | a value many threads want recomputed (a clock, a cache): one recomputes while the others wait and share its result; every caller gets a result computed after it arrived and waits for at most one update beyond the one in progress |
//!
//! All locks implement the [`lock_api`] 0.5 raw traits, so they come with the
//! usual `Mutex`/`RwLock` guards. The algorithms are `no_std`; how a waiter
//! sleeps and wakes is the [`platform::Platform`] trait, implemented for
//! Linux user space by [`platform::StdPlatform`] (feature `std`, default).
//!
//! # Not supported
//! - **Locking from a signal handler** that interrupted the same thread
//!   inside one of these locks: the handler would reuse the thread's queue
//!   node (`QSpinLock`, `QRwLock`'s queue) or its reader slot and recursion
//!   record (`PerCpuRwLock`), and corrupt the interrupted wait. (Linux's
//!   qspinlock has one node per nesting context for this; a kernel platform
//!   can do the same, see [`platform`].)
//! - **Sharing a lock between processes** (`MAP_SHARED` memory): futexes are
//!   private (`FUTEX_PRIVATE_FLAG`), `membarrier` covers this process only,
//!   and queue nodes, reader slots and parking buckets live in each
//!   process's own memory.
//! - **`fork` with a lock held** (or waited on) by another thread: the
//!   child has only the forking thread, so a lock held or queued on by
//!   others stays so forever in the child, as with any mutex. The child may
//!   use locks that were free at the fork.
//! - **Calling [`RefreshOnce::refresh`] from inside its own update**: it
//!   waits for itself.
//!
//! # Seeing what the locks do
//! Locks belong to [lock classes](LockClass) (Linux's idea): a `static`
//! class, the construction site, or by default their type. Two optional
//! features build on them, both needing `std` and costing nothing when
//! off (no code, no bytes; see [`hook`] for the cost when on):
//! - `stats`: lockstat per class, wait and hold times, what the algorithms
//!   saw, a `/proc/lock_stat`-style table and an advisor that says which
//!   lock a class should be (`stats` module). Every lock reports through
//!   it: [`SeqLock`] and [`RefreshOnce`] (with retries, coalesced
//!   callers), [`QSpinLock`], [`QRwLock`] and [`PerCpuRwLock`]
//!   (acquisitions, contended acquisitions, wait and hold times, reads and
//!   writes apart; `PerCpuRwLock` also fast and fallback reads and
//!   revocations with their cost). Not reported yet: the queued locks'
//!   slow-path events (pending path, queue depth, batch ends, hand-offs,
//!   parks and wakes), and a `PerCpuRwLock` read that waits for a writer
//!   while the bias is off counts as a fallback read but not as contended.
//! - `lockdep`: lock-order checking that reports a possible deadlock at the
//!   first acquisition that closes a cycle, and recursive locking
//!   (`lockdep` module), for the locks that call the hooks (the same ones
//!   as `stats`, and locks of your own through [`hook`]).
#![cfg_attr(not(feature = "std"), no_std)]
#![warn(missing_docs)]

mod class;
mod events;
pub mod hook;
#[cfg(feature = "lockdep")]
pub mod lockdep;
mod percpu_rwlock;
pub mod platform;
pub mod qnode;
mod qrwlock;
mod qspinlock;
pub mod reader_table;
mod refresh;
mod seqlock;
mod spin_barrier;
#[cfg(feature = "stats")]
pub mod stats;
mod sync;
mod wait;

pub use crate::class::{Access, ClassRef, LockClass, LockKind};
pub use crate::percpu_rwlock::{
    PerCpuReadToken, PerCpuRwLock, PerCpuRwLockExt, PerCpuRwLockReadGuard,
    PerCpuRwLockUpgradableReadGuard, PerCpuRwLockWriteGuard, PerCpuWriteToken, RawPerCpuRwLock,
};
pub use crate::qrwlock::{
    QRwLock, QRwLockReadGuard, QRwLockUpgradableReadGuard, QRwLockWriteGuard, RawQRwLock,
};
pub use crate::qspinlock::{QSpinLock, QSpinLockGuard, RawQSpinLock};
pub use crate::reader_table::ReaderTable;
pub use crate::refresh::RefreshOnce;
pub use crate::seqlock::{NoUninit, SeqLock, SeqLockWriteGuard};

/// Test support, not part of the API.
#[doc(hidden)]
pub mod __test {
    #[cfg(all(feature = "std", not(any(loom, shuttle))))]
    pub use crate::platform::hog_queue_nodes;
}
