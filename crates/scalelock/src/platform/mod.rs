//! The platform layer: how a waiter relaxes, sleeps and is woken, how fences
//! pair, and where queue nodes live.
//!
//! The lock algorithms in this crate are `no_std` and generic over a
//! [`Platform`]. This is the user-space form of the kernel's paravirt hooks
//! (`pv_wait`/`pv_kick` in Linux's qspinlock, seed 001): a waiter that has
//! spun long enough calls [`Platform::wait`] on a 32-bit word, and whoever
//! changes that word calls [`Platform::wake_one`] or [`Platform::wake_all`].
//!
//! Three implementations ship:
//! - [`StdPlatform`] (feature `std`, the default): futex parking through
//!   rustix, `membarrier` asymmetric fences, one queue node per thread.
//! - [`SpinPlatform`] (always available): pure spinning, no queue nodes. It is
//!   the default when `std` is off and the fallback a bare-metal user starts
//!   from.
//! - a loom platform under `cfg(loom)` for the model checks, and a shuttle
//!   platform under `cfg(shuttle)` for the randomized schedules.
//!
//! # Plugging in a kernel or hypervisor
//! Implement [`Platform`] for a zero-sized type and name it as the lock's
//! second type parameter, e.g. `RawQSpinLock<MyKernel>`:
//! - `relax`: `cpu_relax()` / `pause`.
//! - `wait`/`wake_*`: halt the vCPU until kicked (`pv_wait`/`pv_kick`), or
//!   simply spin and return (waiting is allowed to return spuriously).
//! - `queue_node`/`node`: per-CPU nodes, one per nesting context (task,
//!   softirq, hardirq, NMI), indexed `cpu * 4 + ctx + 1` as Linux does. Return
//!   `None` where no node is free: the lock then waits unqueued and stays
//!   correct, just not FIFO.
//! - `light_fence`/`heavy_fence`: both `fence(SeqCst)` unless the kernel has an
//!   IPI-based barrier; `now_ns`: a TSC read, or 0 if there is no clock
//!   (batches are then bounded by a poll count alone).
//! - [`TimedPlatform`], for timed acquisitions (`try_lock_for`,
//!   `try_write_until`, ...): the instant type your callers pass (or
//!   [`ClockInstant`], a `now_ns` reading) and how it maps onto `now_ns`.

use core::time::Duration;

use crate::qnode::{NodeIndex, QNode};
use crate::reader_table::SLOTS;
use crate::sync::atomic::AtomicU32;

mod spin;
pub use self::spin::SpinPlatform;

#[cfg(any(all(feature = "std", not(any(loom, shuttle))), loom))]
mod fence_mode;

#[cfg(all(feature = "std", not(any(loom, shuttle))))]
mod std_impl;
#[cfg(all(feature = "std", not(any(loom, shuttle))))]
pub use self::std_impl::StdPlatform;
#[cfg(all(feature = "std", not(any(loom, shuttle))))]
pub use self::std_impl::asymmetric_fences_active;
#[cfg(all(feature = "std", not(any(loom, shuttle))))]
pub use self::std_impl::{hog_queue_nodes, queue_node_of_this_thread};

#[cfg(loom)]
mod loom_impl;
#[cfg(loom)]
pub use self::loom_impl::LoomPlatform;

#[cfg(shuttle)]
mod shuttle_impl;
#[cfg(shuttle)]
pub use self::shuttle_impl::ShuttlePlatform;

/// The platform the lock aliases (`QSpinLock<T>`, ...) use.
#[cfg(all(feature = "std", not(any(loom, shuttle))))]
pub type DefaultPlatform = StdPlatform;
/// The platform the lock aliases (`QSpinLock<T>`, ...) use.
#[cfg(all(not(feature = "std"), not(any(loom, shuttle))))]
pub type DefaultPlatform = SpinPlatform;
/// The platform the lock aliases (`QSpinLock<T>`, ...) use.
#[cfg(loom)]
pub type DefaultPlatform = LoomPlatform;
/// The platform the lock aliases (`QSpinLock<T>`, ...) use.
#[cfg(shuttle)]
pub type DefaultPlatform = ShuttlePlatform;

/// Per-context scratch state that the waiting layer and the per-CPU rwlock
/// keep; a platform stores one per waiting context and hands it out with
/// [`Platform::with_local`]. Its contents are private to the crate.
#[derive(Debug)]
pub struct LocalState {
    pub(crate) handed_off: crate::wait::batch::HandedOff,
    pub(crate) claimed_turn: crate::wait::batch::ClaimedTurn,
    pub(crate) holder_stretch: crate::wait::batch::HolderStretch,
    pub(crate) held_reads: crate::reader_table::HeldReads,
    pub(crate) counted_reads: crate::reader_table::CountedReads,
    /// The context's reader slot index as the std platform's
    /// [`Platform::reader_slot_inline`] returns it (`SLOTS`: none); other
    /// platforms may leave it unused (without `std`, no platform here
    /// reads it).
    #[cfg_attr(not(feature = "std"), allow(dead_code))]
    pub(crate) slot_inline: core::cell::Cell<usize>,
}

impl LocalState {
    /// Fresh state.
    pub const fn new() -> Self {
        Self {
            handed_off: crate::wait::batch::HandedOff::new(),
            claimed_turn: crate::wait::batch::ClaimedTurn::new(),
            holder_stretch: crate::wait::batch::HolderStretch::new(),
            held_reads: crate::reader_table::HeldReads::new(),
            counted_reads: crate::reader_table::CountedReads::new(),
            slot_inline: core::cell::Cell::new(SLOTS),
        }
    }
}

/// The same as [`LocalState::new`] (a derived `Default` would start
/// `slot_inline` at index 0, a slot the context does not own).
impl Default for LocalState {
    fn default() -> Self {
        Self::new()
    }
}

/// Hooks the lock algorithms need from their environment.
///
/// # Safety
/// Locks rely on these guarantees for mutual exclusion and progress:
/// - `wait(word, v)` returns if `word != v` when checked atomically against
///   concurrent `wake_*` calls, or after a `wake_*` on `word` that began after
///   it went to sleep; it may also return spuriously at any time.
/// - `light_fence` in one thread and `heavy_fence` in another order their
///   surrounding accesses as a pair of `fence(SeqCst)` would: for
///   `store A; light_fence; load B` against `store B; heavy_fence; load A`, at
///   least one of the loads sees the other thread's store.
/// - `queue_node` never returns an index that another context is using to wait
///   at the same time, and `node(i)` always returns the same, never-freed node
///   for the indices `queue_node` hands out.
/// - `reader_slot` never returns an index that another context may write a
///   reader slot with at the same time (a context keeps its index while any
///   of its read guards lives); `reader_slot_inline` returns at most
///   `reader_table::SLOTS`, and a smaller value only if it is the index
///   `reader_slot` handed the calling context; and `reader_slot_bound` is
///   at least one past every index returned by a `reader_slot` call that
///   precedes the caller's preceding `heavy_fence`/`fence(SeqCst)`;
///   `reader_slots_in_use` visits each such index that a context may still
///   have a read recorded in.
pub unsafe trait Platform: 'static {
    /// One iteration of a busy-wait loop (`pause` on x86).
    fn relax();
    /// Gives up the CPU to another runnable thread, if any.
    fn yield_now();
    /// Gives up the CPU for about `ns` nanoseconds (a timed sleep), for a
    /// waiter that nobody will wake. Unlike `yield_now`, which may hand the
    /// CPU to any runnable task (even a low-priority one) for a whole time
    /// slice, the sleeper is back when its timer fires. The default spins
    /// for about that long (platforms without a timer).
    #[inline]
    fn sleep_ns(ns: u64) {
        for _ in 0..ns / 32 {
            Self::relax();
        }
    }
    /// A monotonic clock in nanoseconds, or a constant 0 where none exists.
    fn now_ns() -> u64;
    /// Sleeps while `*word == expected` (see the trait's safety contract).
    fn wait(word: &AtomicU32, expected: u32);
    /// Like `wait`, but returns after about `timeout_ns` at the latest. The
    /// default polls the word for about that long.
    #[inline]
    fn wait_timeout(word: &AtomicU32, expected: u32, timeout_ns: u64) {
        for _ in 0..timeout_ns / 32 {
            if word.load(crate::sync::atomic::Ordering::Relaxed) != expected {
                return;
            }
            Self::relax();
        }
    }
    /// Wakes at least one thread sleeping in `wait(word, _)`, if any.
    fn wake_one(word: &AtomicU32);
    /// Wakes every thread sleeping in `wait(word, _)`.
    fn wake_all(word: &AtomicU32);
    /// The cheap side of an asymmetric fence; used on lock fast paths.
    fn light_fence();
    /// The expensive side of an asymmetric fence; used before going to sleep
    /// or by writers that must see every reader.
    fn heavy_fence();
    /// Whether [`light_fence_asymmetric`](Self::light_fence_asymmetric)
    /// pairs with [`heavy_fence`](Self::heavy_fence). Once true, true for
    /// the life of the process; the first call may decide it (std: asks the
    /// kernel for `membarrier`). The default, true, goes with the default
    /// `light_fence_asymmetric`.
    #[inline]
    fn asymmetric_fences() -> bool {
        true
    }
    /// The light fence of a fast path that knows, from state published
    /// after [`asymmetric_fences`](Self::asymmetric_fences) returned true,
    /// that the heavy side is asymmetric: no check on the way (std: a
    /// compiler fence). The default is [`light_fence`](Self::light_fence).
    #[inline]
    fn light_fence_asymmetric() {
        Self::light_fence();
    }
    /// Runs `f` on the calling context's [`LocalState`] (std: one per
    /// thread; a kernel: one per CPU and nesting context, with preemption
    /// off), or returns `None` where there is none (then batches are ended
    /// by their waiters alone). The default has none.
    #[inline]
    fn with_local<R>(f: impl FnOnce(&LocalState) -> R) -> Option<R> {
        let _ = f;
        None
    }
    /// The queue node of the calling context, or `None` if it has none.
    /// The caller waits on it until it calls
    /// [`queue_node_returned`](Self::queue_node_returned); a lock taken
    /// inside that wait (through a global allocator built on a lock of
    /// this crate, or from a signal handler) asks again, and must get
    /// another node or `None` (then it waits unqueued), never the one in
    /// use.
    fn queue_node() -> Option<NodeIndex>;
    /// The wait on `index` (from [`queue_node`](Self::queue_node)) is over:
    /// the calling context may get it again. The default does nothing
    /// (for a platform whose `queue_node` never hands out a node in use).
    #[inline]
    fn queue_node_returned(index: NodeIndex) {
        let _ = index;
    }
    /// The node `queue_node` handed out as `index`.
    fn node(index: NodeIndex) -> &'static QNode;
    /// The CPU the caller probably runs on (it may migrate at any moment).
    fn cpu_id() -> usize;
    /// An upper bound on `cpu_id() + 1` (possible CPUs, not online ones).
    fn cpu_count() -> usize;
    /// The calling context's reader slot index in every
    /// [`ReaderTable`](crate::ReaderTable) (below
    /// [`reader_table::SLOTS`](crate::reader_table::SLOTS)), or `None` to
    /// take reads through the underlying lock. Std: one index per thread;
    /// a kernel with preemption off during read sections may return
    /// `cpu_id()`. The default has no slots.
    #[inline]
    fn reader_slot() -> Option<usize> {
        None
    }
    /// [`reader_slot`](Platform::reader_slot) if the calling context
    /// already has its index, else `None`, even where `reader_slot` would
    /// hand one out now. A per-CPU rwlock's inline read uses it (a `None`
    /// sends that read to the path that calls `reader_slot`), so the
    /// inline read never joins the code that hands out an index. The
    /// default is `reader_slot`.
    #[inline]
    fn reader_slot_assigned() -> Option<usize> {
        Self::reader_slot()
    }
    /// [`reader_slot_assigned`](Platform::reader_slot_assigned) for a
    /// per-CPU rwlock's inline read, as a plain number: the index, or
    /// [`SLOTS`] for none. Never above `SLOTS`
    /// (the read looks at "slot" `SLOTS`, a table's never-free word, with
    /// no bounds check). The default derives it from
    /// `reader_slot_assigned`; a platform that keeps the index where one
    /// load fetches it can return that load (std: a thread-local).
    #[inline]
    fn reader_slot_inline() -> usize {
        Self::reader_slot_assigned().map_or(SLOTS, |i| i.min(SLOTS))
    }
    /// One past every index `reader_slot` has returned so far, in any
    /// context.
    #[inline]
    fn reader_slot_bound() -> usize {
        0
    }
    /// Calls `f` for every slot index a per-CPU rwlock writer must scan: a
    /// superset of the indices held by contexts that may read with a slot
    /// (the same visibility rule as `reader_slot_bound`). The default
    /// scans `0..reader_slot_bound()`; the std platform scans the indices
    /// of live threads only.
    #[inline]
    fn reader_slots_in_use(mut f: impl FnMut(usize)) {
        for i in 0..Self::reader_slot_bound() {
            f(i);
        }
    }
}

/// A platform whose clock times lock acquisitions: what lock_api's timed
/// traits (`RawMutexTimed`, `RawRwLockTimed`, `RawRwLockUpgradeTimed`) need on top
/// of [`Platform`]. `StdPlatform` implements it with
/// `std::time::Instant`, so `try_lock_until` takes the same instants as
/// parking_lot's; a kernel names its own instant type, or uses
/// [`ClockInstant`].
///
/// Timeouts are measured with [`Platform::now_ns`]. Where `now_ns` is a
/// constant 0 (no clock), no nonzero timeout is ever seen to pass: a timed
/// acquisition with a zero timeout (or a deadline at or before `now_ns`, 0)
/// is one `try_lock`, and any other waits until it gets the lock, like
/// `lock` (lock_api allows a failed attempt to return late, never early).
/// That is why the clock-less [`SpinPlatform`] does not implement this
/// trait.
pub trait TimedPlatform: Platform {
    /// The instant type of `try_lock_until`, `wait_until`, ...
    type Instant;
    /// The `now_ns` reading at which `deadline` is reached (at or before
    /// `now_ns()` if it has passed); saturates at `u64::MAX`, which is
    /// never reached.
    fn deadline_ns(deadline: &Self::Instant) -> u64;
    /// The instant `timeout` from now, or `None` if the instant type cannot
    /// represent it (lock_api then waits without a timeout).
    fn instant_after(timeout: Duration) -> Option<Self::Instant>;
}

/// An instant on a platform's [`Platform::now_ns`] clock: the instant type
/// for a [`TimedPlatform`] that has no other. Compare only instants of one
/// platform's clock.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ClockInstant {
    ns: u64,
}

impl ClockInstant {
    /// The instant at `now_ns` reading `ns`.
    pub const fn from_ns(ns: u64) -> Self {
        Self { ns }
    }

    /// The `now_ns` reading of this instant.
    pub const fn as_ns(self) -> u64 {
        self.ns
    }

    /// Now, on `P`'s clock.
    pub fn now<P: Platform>() -> Self {
        Self { ns: P::now_ns() }
    }

    /// `self + d`, or `None` past `u64::MAX` nanoseconds.
    pub fn checked_add(self, d: Duration) -> Option<Self> {
        let d = u64::try_from(d.as_nanos()).ok()?;
        Some(Self {
            ns: self.ns.checked_add(d)?,
        })
    }
}
