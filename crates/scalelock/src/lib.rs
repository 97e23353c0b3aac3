//! # scalelock
//!
//! Locks that keep scaling when many CPUs hammer the same data.
//!
//! | lock | use it for |
//! | --- | --- |
//! | [`QSpinLock`] | a 4-byte mutex: uncontended cost of a spinlock, FIFO queueing under contention, parks instead of burning a CPU when a waiter or holder is preempted |
//! | [`QRwLock`] | an 8-byte reader-writer lock: one atomic per read or write when uncontended, readers never block each other while no writer waits, contended readers and writers queue in arrival order (writers never starve) |
//! | [`PerCpuRwLock`] | read-mostly data read by many threads at once: a read writes only the reading thread's own cache line (no shared atomic); a write revokes that bias with a membarrier and a scan of the reader slots. The lock picks its read mode from the writes it sees: biased (rare writes), symmetric (readers pay a full fence so writers need no membarrier, when the reads between writes pay for a plain revocation but not for a membarrier) or inhibited (few reads per write: reads take the underlying `QRwLock` for a window sized from the revocation cost, after BRAVO); 16 bytes plus a [`ReaderTable`] shared by every lock on that table (by default one process-wide table, whatever the lock class; [`PerCpuRwLockExt::with_table`] for another) |
//! | [`SeqLock`] | a small value without padding ([`NoUninit`]: primitive scalars, arrays of them, or a `#[repr(C)]` type you vouch for) read far more often than written: readers write nothing shared and retry if a write overlapped; no data race in the Rust memory model |
//! | [`ReentrantMutex`] | a mutex the holding thread may lock again (callbacks that re-enter, layered code taking the same lock): a [`QSpinLock`] plus an owner and a count; needs `std` |
//! | [`RefreshOnce`] | a value many threads want recomputed (a clock, a cache; [`NoUninit`], as for [`SeqLock`]): one recomputes while the others wait and share its result; every caller gets a result computed after it arrived and waits for at most one update beyond the one in progress (one more after an update whose closure panicked) |
//!
//! The mutexes and rwlocks implement the [`lock_api`] 0.5 raw traits, so
//! they come with the usual `Mutex`/`RwLock` guards ([`SeqLock`] and
//! [`RefreshOnce`] have APIs of their own). A [`Condvar`] waits with a [`QSpinLock`]
//! (FIFO, no spurious wake-ups, `notify_all` wakes the waiters one after
//! another as each re-takes the mutex instead of all at once). The algorithms are `no_std`; how a waiter
//! sleeps and wakes is the [`platform::Platform`] trait, implemented for
//! Linux user space by [`platform::StdPlatform`] (feature `std`, default).
//! `QSpinLock`, `QRwLock` and `PerCpuRwLock` also implement lock_api's
//! timed and fair traits (`try_lock_for`, `try_write_until`,
//! `try_upgradable_read_for`, `try_upgrade_for`, `unlock_fair`, `bump`
//! (which releases nothing when nobody waits); not
//! `RawRwLockUpgradeDowngrade`, see [`RawQRwLock`]); the timed ones need
//! a platform with a clock ([`platform::TimedPlatform`]; `StdPlatform` takes
//! `std::time::Instant`). A waiter that times out leaves no trace in the
//! lock (for `QSpinLock`: it leaves the MCS queue, after Linux's `osq_lock`
//! unqueue), with one exception: a `try_upgrade_for` that gives up still
//! holds the upgradable read, and readers that queued behind it wait until
//! that upgradable read ends (see [`RawQRwLock`]).
//!
//! # Coming from parking_lot
//! The types are lock_api's, as parking_lot's are, so code moves over by
//! changing type names: `Mutex` → [`QSpinLock`], `RwLock` → [`QRwLock`] (or
//! [`PerCpuRwLock`] for read-mostly data), `ReentrantMutex` stays
//! [`ReentrantMutex`]; guards, `try_lock`, `unlock_fair`, upgradable reads,
//! upgrades, a write's downgrade to a read, `map` and the
//! `arc_lock`/`serde` features work the same. What lock_api ties to
//! `RawRwLockUpgradeDowngrade` does not exist here (see [`RawQRwLock`]):
//! `RwLockWriteGuard::downgrade_to_upgradable`,
//! `RwLockUpgradableReadGuard::downgrade`, `with_upgraded` and
//! `try_with_upgraded*`.
//! The repository's `examples/migrate_from_parking_lot.rs` shows a program
//! on both.
//!
//! ```
//! use scalelock::{QRwLock, QRwLockUpgradableReadGuard, QRwLockWriteGuard};
//!
//! let lock = QRwLock::new(1);
//! let up = lock.upgradable_read();
//! let mut w = QRwLockUpgradableReadGuard::upgrade(up);
//! *w += 1;
//! let r = QRwLockWriteGuard::downgrade(w);
//! assert_eq!(*r, 2);
//! ```
//! An upgradable read does not go down to a plain read:
//! ```compile_fail,E0599
//! use scalelock::{QRwLock, QRwLockUpgradableReadGuard};
//!
//! let lock = QRwLock::new(1);
//! let up = lock.upgradable_read();
//! let _r = QRwLockUpgradableReadGuard::downgrade(up);
//! ```
//!
//! # Features
//! - `std` (default): the [`platform::StdPlatform`] (futexes,
//!   `membarrier`, per-thread queue nodes) and [`ReentrantMutex`]. On
//!   Linux the process registers for `membarrier` before `main` (an ELF
//!   constructor; microseconds while the process has one thread): asked
//!   first by a lock release in a process that already runs several
//!   threads, the kernel waits for an RCU grace period, milliseconds during
//!   which that thread stalls. A program that later installs a seccomp
//!   filter must allow `membarrier` (the locks' fast paths rely on it
//!   from the registration on; a refused one aborts, saying so), or run
//!   with `SCALELOCK_NO_MEMBARRIER=1`, which keeps the process from
//!   registering (both sides of the fences are then full fences).
//! - `arc_lock`: lock_api's guards that own an `Arc` of their lock
//!   (`lock_arc`, `read_arc`, `write_arc`, `upgradable_read_arc` and their
//!   `try_` forms), as parking_lot's feature of that name. Needs `alloc`
//!   only.
//! - `serde`: the lock types serialize as their data and deserialize into
//!   a new unlocked lock, as parking_lot's feature of that name. Serializing
//!   takes the lock (a read for the rwlocks), so a thread must not serialize
//!   a mutex it holds. `no_std`-clean.
//! - `stats`, `lockdep`: see [below](#seeing-what-the-locks-do).
//!
//! # Not supported
//! - **Locking from a signal handler** that interrupted the same thread
//!   inside one of these locks: the handler can wait for the interrupted
//!   thread (it holds the lock, or it has joined the queue and not yet
//!   linked its node, so the holder's hand-off waits for it: both wait
//!   forever, as Linux requires irqsave locking for this), and it would
//!   share the thread's reader slot and recursion record (`PerCpuRwLock`)
//!   and per-thread waiting state, which are not written to be
//!   signal-safe. (The std queue-node table hands a handler no node while
//!   the thread's is in use: it waits unqueued. Linux's qspinlock has one
//!   node per nesting context; a kernel platform can do the same, see
//!   [`platform`].)
//! - **Sharing a lock between processes** (`MAP_SHARED` memory): futexes are
//!   private (`FUTEX_PRIVATE_FLAG`), `membarrier` covers this process only,
//!   and queue nodes, reader slots and parking buckets live in each
//!   process's own memory.
//! - **`fork` with a lock held** (or waited on) by another thread: the
//!   child has only the forking thread, so a lock held or queued on by
//!   others stays so forever in the child, as with any mutex. The child may
//!   use locks that were free at the fork (the crate's own state in default
//!   builds takes no lock: queue nodes, reader slots, parking buckets).
//!   With `stats` or `lockdep`, their registries sit behind internal
//!   mutexes: a child forked while another thread registered a class,
//!   took a snapshot or recorded a lock order waits forever at its first
//!   such step.
//! - **Calling [`RefreshOnce::refresh`] from inside its own update**: it
//!   waits for itself.
//! - **A `#[global_allocator]` built on these locks where std registers
//!   thread-local destructors through the global allocator** (targets
//!   without `__cxa_thread_atexit_impl`, such as musl): a thread's first
//!   queued wait, first reader slot or first statistics event registers
//!   one, inside the allocator's lock. On glibc it is supported (see the
//!   README and `LockClass`'s docs for the steps `stats` and `lockdep`
//!   need).
//!
//! # Seeing what the locks do
//! Locks belong to [lock classes](LockClass) (Linux's idea): a `static`
//! class, the construction site, or by default their type. Two optional
//! features build on them, both needing `std` and costing nothing when
//! left out of the build (no code, no bytes; see [`hook`] for the cost when
//! compiled in). Compiled in, every lock carries its class (16 bytes: a
//! `QSpinLock` or `QRwLock` is 24 bytes, a `PerCpuRwLock` 32) and its guards
//! the hooks' state; statistics start switched off (`stats::enable`),
//! lockdep starts switched on (`lockdep::set_enabled`), and a lockdep report
//! panics unless `lockdep::set_report_handler` installs a handler:
//! - `stats`: lockstat per class, wait and hold times, what the algorithms
//!   saw, a `/proc/lock_stat`-style table and an advisor that says which
//!   lock a class should be (`stats` module). Every lock reports through
//!   it: [`SeqLock`] and [`RefreshOnce`] (with retries, coalesced
//!   callers), [`QSpinLock`], [`QRwLock`] and [`PerCpuRwLock`]
//!   (acquisitions, contended acquisitions, wait and hold times, reads and
//!   writes apart; `PerCpuRwLock` also fast and fallback reads and
//!   revocations with their cost), and the queued locks' slow-path events
//!   (pending path, queue depth, batch ends, hand-offs, steals, parks and
//!   wakes),
//!   also per read/write.
//! - `lockdep`: lock-order checking that reports a possible deadlock at the
//!   first acquisition that closes a cycle, and recursive locking
//!   (`lockdep` module), for the locks that call the hooks (the same ones
//!   as `stats`, and locks of your own through [`hook`]).
//!
//! On x86-64 Linux, a build with either feature patches its own code: each
//! fast path tests the run-time switch as a constant in its instructions
//! (after Linux's static keys), rewritten when the features are switched,
//! with the code page made writable (`mprotect`) for the moment of the
//! store. Where the system refuses that
//! (an SELinux `execmem` denial, PaX), or the environment variable
//! `SCALELOCK_NO_CODE_PATCHING` is set (to anything but empty or `0`), the
//! locks load the switch instead; [`hook::switch_is_patched`] tells which.
//! (Under valgrind, which translates code once, use `--smc-check=all` or
//! set that variable, or switching may not reach code already run.)
#![cfg_attr(not(feature = "std"), no_std)]
// The docs link `ReentrantMutex` and `StdPlatform`, which exist with `std`
// only: a `no_std` build's docs leave those links unresolved.
#![cfg_attr(not(feature = "std"), allow(rustdoc::broken_intra_doc_links))]
#![warn(missing_docs)]

mod bump;
mod class;
mod condvar;
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
#[cfg(all(feature = "std", not(any(loom, shuttle))))]
mod remutex;
mod seqlock;
mod spin_barrier;
#[cfg(feature = "stats")]
pub mod stats;
mod sync;
#[cfg(any(feature = "stats", feature = "lockdep"))]
mod sys_vec;
#[cfg(all(feature = "std", not(any(loom, shuttle))))]
mod thread_id;
mod wait;

pub use crate::class::{Access, ClassRef, LockClass, LockKind};
pub use crate::condvar::{Condvar, RawQCondvar};
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
#[cfg(all(feature = "std", not(any(loom, shuttle))))]
pub use crate::remutex::{MappedReentrantMutexGuard, ReentrantMutex, ReentrantMutexGuard};
pub use crate::seqlock::{NoUninit, SeqLock, SeqLockWriteGuard};
#[cfg(all(feature = "std", not(any(loom, shuttle))))]
pub use crate::thread_id::RawThreadId;

/// Test support, not part of the API.
#[doc(hidden)]
pub mod __test {
    #[cfg(all(feature = "std", not(any(loom, shuttle))))]
    pub use crate::platform::{hog_queue_nodes, queue_node_of_this_thread};
}
