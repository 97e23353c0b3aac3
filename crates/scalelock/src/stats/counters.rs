//! The live counters: one block per (class, thread), written only by its
//! thread.
//!
//! # Why per-thread blocks
//! A profiler that counted in one shared place per class would add the
//! very contended cache line it is there to find. Each thread instead owns
//! a block per class it touches (allocated on the first event), and writes
//! it with plain Relaxed loads and stores, no read-modify-write: the cost of
//! an event is a thread-local lookup and a few stores to a line nobody else
//! writes. Snapshots sum the blocks, reading them Relaxed: while threads run
//! a snapshot may lag by the events in flight; once they have stopped (or
//! been joined) it is exact.
//!
//! # The uncontended path
//! An uncontended acquisition with statistics on (and lockdep off) costs
//! a few ns that an uncontended lock does not have to spare, so it is
//! inlined into the lock and kept short. A class's registry index is cached
//! in its `LockClass` (one load); each thread has a small array of
//! counters ([`FastCounts`]: read and write acquisitions, and per-CPU
//! fast and fallback reads, which count as read acquisitions too, of the
//! first [`FAST_CLASSES`] classes) inside a `const`-initialised
//! thread-local without a destructor (`RECENT`; std compiles such a
//! `thread_local!` to a plain TLS access, with no lazy-initialisation or
//! destructor-registration check), next to the hold-sampling countdown.
//! The countdown doubles as the "this thread's array is registered" flag
//! (it is never above 0 on a thread whose array snapshots cannot see), so
//! counting is a compare of the class index with a constant, one TLS load
//! and store of the countdown, and one Relaxed load and store of the
//! thread's own counter, all at fixed offsets from the thread pointer (the
//! price: every thread of a program built with `stats` carries the array,
//! `FAST_CLASSES * FAST_COUNTERS` words, in its static TLS). The
//! sampling rate is read only when the countdown runs out, on a cold path
//! that also registers the thread's array on its first event.
//! No clock is read unless this hold is sampled (1 in
//! `stats::hold_sample()`). Classes past the array, and contended
//! acquisitions (whose wait is timed anyway), count in the thread's block
//! for the class: the thread's block list, indexed by class, is also
//! published in `RECENT`, so a class the thread has met costs an indexed
//! load, the epoch check and the update. The `RefCell`ed list itself is
//! only used to add a class the thread meets for the first time.
//!
//! When a thread exits its blocks go to a pool and a later thread carries
//! on counting in them, and what its array counted is added to a shared
//! sum of exited threads' counts (the array itself is freed with the
//! thread), so nothing counted is lost and memory stays bounded by
//! (threads alive at once) x (classes). A thread
//! whose thread-locals are already destroyed (locking from a thread-local
//! destructor) counts into a shared block per class under a mutex.
//!
//! # Memory
//! Blocks, the block lists and the registries take their memory from
//! `std::alloc::System`, never from the global allocator (`sys_vec`): a
//! thread's first counted acquisition, its first event of a class (with
//! the lock held, or after a reader's increment is in the word), a
//! revocation under a write lock and a thread's exit all allocate, and a
//! global allocator built on an instrumented lock came back to that lock,
//! held by its own thread (`tests/stats_allocator_on_a_lock*.rs`).
//!
//! # Reset
//! [`reset`](super::reset) never writes other threads' counters. It bumps
//! a global epoch: a block whose epoch is old counts as zero in snapshots,
//! and its owner zeroes it before its next update. The arrays, which the
//! fast path does not check an epoch for, are rebased instead: reset copies
//! each live array's counts to its `base` and zeroes the exited threads'
//! sum (under the `FAST_ALL` mutex), and snapshots report the difference.

use core::cell::{Cell, RefCell};
use core::sync::atomic::{AtomicPtr, AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError};

use super::clock::now_ns;
use super::histogram::{LiveHistogram, bump, raise};
use super::sys_vec::{SysVec, leak};
use crate::class::Access;

/// Per-kind events counted per class.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Event {
    FastRead,
    FallbackRead,
    SeqlockRetry,
    RefreshCoalesced,
    HeavyRevocation,
}

/// Number of `Event`s.
pub(crate) const EVENTS: usize = 5;

/// Events counted per class and per read/write: the slow path's, and long
/// holds.
#[derive(Clone, Copy, Debug)]
pub(crate) enum WaitEvent {
    PendingPath,
    BatchEnd,
    Handoff,
    Park,
    Wake,
    SpuriousWake,
    LongHold,
    Steal,
    /// A timed acquisition that waited gave up (counted as contended when
    /// it began to wait; the snapshot takes it back out of `contended`).
    TimedOut,
}

/// Number of `WaitEvent`s.
pub(crate) const WAIT_EVENTS: usize = 9;

/// The index of `access` in a block's per-access arrays (0: reads, 1:
/// writes, an upgradable read being a write).
#[inline]
pub(crate) fn side(access: Access) -> usize {
    usize::from(!access.is_read())
}

/// Per read or write: counts, and wait and hold histograms.
pub(crate) struct LiveAccess {
    pub(crate) acquisitions: AtomicU64,
    pub(crate) contended: AtomicU64,
    pub(crate) wait: LiveHistogram,
    pub(crate) hold: LiveHistogram,
}

impl LiveAccess {
    const fn new() -> Self {
        Self {
            acquisitions: AtomicU64::new(0),
            contended: AtomicU64::new(0),
            wait: LiveHistogram::new(),
            hold: LiveHistogram::new(),
        }
    }

    fn zero(&self) {
        self.acquisitions.store(0, Ordering::Relaxed);
        self.contended.store(0, Ordering::Relaxed);
        self.wait.zero();
        self.hold.zero();
    }
}

/// One class's counters of one thread.
pub(crate) struct Block {
    /// The reset epoch these counts belong to.
    epoch: AtomicU64,
    pub(crate) class: u32,
    /// Index 0: reads, 1: writes.
    pub(crate) access: [LiveAccess; 2],
    pub(crate) events: [AtomicU64; EVENTS],
    /// Slow-path events; index 0: reads, 1: writes (`side`).
    pub(crate) wait_events: [[AtomicU64; WAIT_EVENTS]; 2],
    /// Longest wait queue seen; index 0: reads, 1: writes (`side`).
    pub(crate) queue_depth_max: [AtomicU64; 2],
    pub(crate) revocations: LiveHistogram,
    /// The next block of this class in the pool (`POOL`'s mutex).
    next_free: AtomicPtr<Block>,
}

impl Block {
    fn new(class: u32) -> Self {
        Self {
            epoch: AtomicU64::new(EPOCH.load(Ordering::Relaxed)),
            class,
            access: [LiveAccess::new(), LiveAccess::new()],
            events: [const { AtomicU64::new(0) }; EVENTS],
            wait_events: [const { [const { AtomicU64::new(0) }; WAIT_EVENTS] }; 2],
            queue_depth_max: [const { AtomicU64::new(0) }; 2],
            revocations: LiveHistogram::new(),
            next_free: AtomicPtr::new(core::ptr::null_mut()),
        }
    }

    /// Zeroes a block left over from before a reset (owner only).
    #[inline]
    fn refresh_epoch(&self) {
        let e = EPOCH.load(Ordering::Relaxed);
        if self.epoch.load(Ordering::Relaxed) != e {
            self.zero_for(e);
        }
    }

    #[cold]
    fn zero_for(&self, epoch: u64) {
        for a in &self.access {
            a.zero();
        }
        for e in self.events.iter().chain(self.wait_events.iter().flatten()) {
            e.store(0, Ordering::Relaxed);
        }
        for q in &self.queue_depth_max {
            q.store(0, Ordering::Relaxed);
        }
        self.revocations.zero();
        // Release pairs with the Acquire epoch load in `live_blocks`: a
        // snapshot that sees the new epoch sees the zeroes.
        self.epoch.store(epoch, Ordering::Release);
    }

    #[inline]
    fn access(&self, access: Access) -> &LiveAccess {
        &self.access[usize::from(!access.is_read())]
    }
}

/// The reset epoch.
static EPOCH: AtomicU64 = AtomicU64::new(0);
// The statistics' memory (blocks, the lists below, the threads' block
// lists and the registry of their fast counters) comes from `System`,
// never from the global allocator (`sys_vec`): some of it is allocated
// with a lock held or waited for, and a global allocator may be built on a
// lock of this crate (`tests/stats_allocator_on_a_lock*.rs`).

/// Every block ever allocated (blocks are never freed).
static ALL: Mutex<SysVec<&'static Block>> = Mutex::new(SysVec::new());
/// Blocks of exited threads, for reuse: by class, the first of a list
/// linked through `Block::next_free`.
static POOL: Mutex<SysVec<Option<&'static Block>>> = Mutex::new(SysVec::new());
/// Shared blocks for threads without thread-locals, by class; updated
/// under this mutex.
static FALLBACK: Mutex<SysVec<Option<&'static Block>>> = Mutex::new(SysVec::new());
/// Events dropped because they happened inside the profiler itself (an
/// allocator built on an instrumented lock, while a block was allocated).
pub(crate) static DROPPED: AtomicU64 = AtomicU64::new(0);

/// Serialises [`reset`] and snapshots (`snapshot::collect`): reset bumps
/// the epoch (the blocks read as zero at once) and then rebases the fast
/// arrays; a snapshot between the two would add the arrays' old counts to
/// the blocks' new ones. Taken first, before any other of these mutexes,
/// and only by those two calls (never by counting), so a global allocator
/// on an instrumented lock cannot wait for it.
static RESET_GATE: Mutex<()> = Mutex::new(());

/// Holds off [`reset`] (or waits for one to finish) while a snapshot sums
/// the counts.
pub(crate) fn reset_gate() -> MutexGuard<'static, ()> {
    guard(&RESET_GATE)
}

/// Test hook: `reset` sleeps this many milliseconds between its epoch bump
/// and its rebasing of the fast arrays, with `IN_RESET_PAUSE` set.
#[cfg(test)]
pub(crate) static RESET_PAUSE_MS: AtomicU64 = AtomicU64::new(0);
#[cfg(test)]
pub(crate) static IN_RESET_PAUSE: core::sync::atomic::AtomicBool =
    core::sync::atomic::AtomicBool::new(false);

fn guard<T>(m: &'static Mutex<T>) -> MutexGuard<'static, T> {
    // Every update of these leaves them consistent; poisoning is moot.
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

fn take_block(class: u32) -> &'static Block {
    {
        let mut pool = guard(&POOL);
        if let Some(head) = pool.get_mut(class as usize)
            && let Some(b) = *head
        {
            // SAFETY: pool links are null or point to leaked blocks.
            *head = unsafe { b.next_free.load(Ordering::Relaxed).as_ref() };
            return b;
        }
    }
    let b = leak(Block::new(class));
    guard(&ALL).push(b);
    b
}

/// Classes with an index below this count their uncontended acquisitions
/// and fast reads in the thread's [`FastCounts`]; the others (a process
/// with more classes) count them in their blocks, as everything else.
pub(crate) const FAST_CLASSES: usize = 64;
/// Counters per class in [`FastCounts`]: `FAST_READS`, `FAST_WRITES`,
/// `FAST_PERCPU_READS`, `FAST_FALLBACK_READS`.
pub(crate) const FAST_COUNTERS: usize = 4;
/// [`FastCounts`] counter: read acquisitions.
pub(crate) const FAST_READS: usize = 0;
/// [`FastCounts`] counter: write acquisitions.
pub(crate) const FAST_WRITES: usize = 1;
/// [`FastCounts`] counter: uncontended per-CPU read acquisitions that took
/// their slot's fast path (each a read acquisition and a fast read).
pub(crate) const FAST_PERCPU_READS: usize = 2;
/// [`FastCounts`] counter: uncontended per-CPU read acquisitions that fell
/// back to the underlying lock (each a read acquisition and a fallback
/// read).
pub(crate) const FAST_FALLBACK_READS: usize = 3;

/// A thread's counters of the uncontended path: acquisitions and fast
/// reads, indexed by counter (`FAST_READS`, ...) and class index, written
/// only by the owner thread. It lives in the thread's `RECENT`, and is
/// registered in `FAST_ALL` for snapshots from the thread's first counted
/// event to its exit.
pub(crate) struct FastCounts {
    counts: [[AtomicU64; FAST_CLASSES]; FAST_COUNTERS],
}

impl FastCounts {
    const fn new() -> Self {
        Self {
            counts: [const { [const { AtomicU64::new(0) }; FAST_CLASSES] }; FAST_COUNTERS],
        }
    }

    /// Counter `k` of class index `class` (`class < FAST_CLASSES`).
    #[inline(always)]
    fn counter(&self, k: usize, class: u32) -> &AtomicU64 {
        &self.counts[k][class as usize]
    }
}

/// Counts of the uncontended path, per class index and counter.
type FastSums = [[u64; FAST_COUNTERS]; FAST_CLASSES];

/// A live thread's registered `FastCounts`.
#[derive(Clone, Copy)]
struct FastEntry {
    /// The `FastCounts` in the thread's `RECENT`.
    counts: *const FastCounts,
    /// The counts at the last reset (or 0, registered after it).
    base: FastSums,
}

// SAFETY: `counts` points into a live thread's `RECENT`; other threads only
// read its atomics, under the `FAST_ALL` mutex, and the owner unregisters
// it (`unregister_fast`, under that mutex) before its thread-locals are
// freed, so the pointer may move between threads with the entry.
unsafe impl Send for FastEntry {}

impl FastEntry {
    /// `f(k, class, count)` for each of the thread's counts.
    fn for_each(&self, mut f: impl FnMut(usize, usize, u64)) {
        // SAFETY: see `FastEntry`'s Send: while the entry is in `FAST_ALL`
        // (we hold its mutex) the thread has not freed its `RECENT`.
        let fast = unsafe { &*self.counts };
        for (k, counts) in fast.counts.iter().enumerate() {
            for (class, c) in counts.iter().enumerate() {
                // Relaxed: snapshots and resets tolerate lag (a count
                // stored but not yet seen counts after them).
                f(k, class, c.load(Ordering::Relaxed));
            }
        }
    }
}

/// The registered `FastCounts` and what exited threads counted.
struct FastRegistry {
    live: SysVec<FastEntry>,
    /// What exited threads' arrays counted since the last reset.
    exited: FastSums,
}

/// The live threads' `FastCounts` and the exited threads' sum; also
/// serialises `reset`'s writes of the bases with snapshots and exits.
static FAST_ALL: Mutex<FastRegistry> = Mutex::new(FastRegistry {
    live: SysVec::new(),
    exited: [[0; FAST_COUNTERS]; FAST_CLASSES],
});

/// Registers the calling thread's `FastCounts` (once; its `Shard`'s
/// destructor unregisters them): whether they are registered, false if its
/// thread-locals are gone or it is registering them (a re-entrant call
/// from the allocator).
#[cold]
fn register_fast() -> bool {
    RECENT.with(|r| {
        if r.registered.get() {
            return true;
        }
        SHARD
            .try_with(|s| {
                if s.allocating.replace(true) {
                    return false;
                }
                let entry = FastEntry {
                    counts: &r.fast,
                    base: [[0; FAST_COUNTERS]; FAST_CLASSES],
                };
                guard(&FAST_ALL).live.push(entry);
                r.registered.set(true);
                s.allocating.set(false);
                true
            })
            .unwrap_or(false)
    })
}

/// The calling thread exits: its counts go to the exited threads' sum and
/// its `FastCounts` leave the registry (before its thread-locals are freed).
fn unregister_fast(r: &Recent) {
    if !r.registered.replace(false) {
        return;
    }
    // From now on every event takes the cold paths, which find the thread
    // unregistered (and its `Shard` gone) and count in the shared blocks.
    r.countdown.set(0);
    let mine: *const FastCounts = &r.fast;
    let mut all = guard(&FAST_ALL);
    let FastRegistry { live, exited } = &mut *all;
    if let Some(i) = live.iter().position(|e| core::ptr::eq(e.counts, mine)) {
        let entry = live.swap_remove(i);
        entry.for_each(|k, class, c| {
            exited[class][k] += c.saturating_sub(entry.base[class][k]);
        });
    }
}

/// A thread's blocks.
struct Shard {
    blocks: RefCell<SysVec<Option<&'static Block>>>,
    /// `register_fast` is registering the thread's `FastCounts` (an
    /// allocator that locks an instrumented lock re-enters it).
    allocating: Cell<bool>,
}

impl Drop for Shard {
    fn drop(&mut self) {
        // The blocks go to the pool, where another thread may take them, and
        // the list is freed: unpublish it first (this thread may still lock
        // in later thread-local destructors; it then counts in the shared
        // blocks). Its fast counts go to the exited threads' sum.
        RECENT.with(|r| {
            r.forget_blocks();
            unregister_fast(r);
        });
        let blocks = core::mem::replace(self.blocks.get_mut(), SysVec::new());
        let mut pool = guard(&POOL);
        for &b in blocks.iter().flatten() {
            let i = b.class as usize;
            pool.grow_to(i + 1, None);
            let next = pool[i].map_or(core::ptr::null_mut(), |n| core::ptr::from_ref(n).cast_mut());
            b.next_free.store(next, Ordering::Relaxed);
            pool[i] = Some(b);
        }
    }
}

/// The thread's fast counters, its hold-sampling countdown and its block
/// list as published for the fast path: no destructor, so always
/// accessible and as cheap as TLS gets.
struct Recent {
    /// Holds to go until the next sampled one, counting this one: the
    /// sampling countdown. Never above 0 unless `registered` (so a
    /// countdown above 0 lets the fast path count in `fast`); 0 makes the
    /// next event take the cold path, which registers the thread and then
    /// samples a hold, or, for a holdless event, sets the countdown to 1.
    countdown: Cell<u32>,
    /// `fast` is in `FAST_ALL` (from the thread's first counted event to
    /// its exit).
    registered: Cell<bool>,
    /// The thread's counters of the uncontended path.
    fast: FastCounts,
    /// The buffer of this thread's `Shard::blocks`, valid for `len`
    /// entries (0: nothing published).
    blocks: Cell<*const Option<&'static Block>>,
    len: Cell<usize>,
}

impl Recent {
    /// Unpublishes the block list (before it changes or is freed).
    fn forget_blocks(&self) {
        self.len.set(0);
    }

    /// Publishes `blocks` (this thread's `Shard::blocks`).
    fn publish(&self, blocks: &[Option<&'static Block>]) {
        self.blocks.set(blocks.as_ptr());
        self.len.set(blocks.len());
    }

    /// This thread's block for class index `i`, if published.
    #[inline]
    fn block(&self, i: usize) -> Option<&'static Block> {
        if i < self.len.get() {
            // SAFETY: `blocks` and `len` describe the buffer of this
            // thread's own `Shard::blocks` (`publish`); it is only resized
            // (in `new_block`) and freed (in `Shard::drop`) on this thread,
            // each time after `forget` set `len` to 0, so while `len` is
            // not 0 the buffer is live and `i < len` is in bounds. Nothing
            // else writes it while we read (one thread).
            unsafe { *self.blocks.get().add(i) }
        } else {
            None
        }
    }

    /// Whether this acquisition's hold time is sampled (1 in N).
    ///
    /// The countdown is the thread's own: the rate is read only when it
    /// runs out (at a sampled hold), so the unsampled acquisitions, nearly
    /// all of them, touch nothing global. A new rate therefore applies to a
    /// thread from its next sampled hold on (at once on the thread that
    /// set it, see [`restart_sampling`]).
    #[inline(always)]
    fn sample(&self) -> bool {
        let c = self.countdown.get();
        if c > 1 {
            self.countdown.set(c - 1);
            false
        } else {
            self.restart_countdown();
            true
        }
    }

    /// The countdown ran out (or was never started): restarts it at the
    /// current rate, registering the thread's `FastCounts` first (a thread
    /// that cannot register them keeps 0, see `countdown`).
    #[cold]
    fn restart_countdown(&self) {
        let every = if self.registered.get() || register_fast() {
            super::hold_sample()
        } else {
            0
        };
        self.countdown.set(every);
    }
}

std::thread_local! {
    static SHARD: Shard = const {
        Shard {
            blocks: RefCell::new(SysVec::new()),
            allocating: Cell::new(false),
        }
    };
    static RECENT: Recent = const {
        Recent {
            countdown: Cell::new(0),
            registered: Cell::new(false),
            fast: FastCounts::new(),
            blocks: Cell::new(core::ptr::null()),
            len: Cell::new(0),
        }
    };
}

impl Shard {
    /// This thread's block for `class`, or `None` if called re-entrantly
    /// while the block list is being grown.
    #[inline]
    fn block(&self, class: u32) -> Option<&'static Block> {
        let i = class as usize;
        if let Ok(blocks) = self.blocks.try_borrow()
            && let Some(&Some(b)) = blocks.get(i)
        {
            return Some(b);
        }
        self.new_block(class)
    }

    #[cold]
    fn new_block(&self, class: u32) -> Option<&'static Block> {
        let mut blocks = self.blocks.try_borrow_mut().ok()?;
        // Resizing frees the published buffer, and `take_block` may
        // allocate (with an allocator that locks an instrumented lock, this
        // is re-entered): nothing published until the list is whole again.
        RECENT.with(Recent::forget_blocks);
        let i = class as usize;
        blocks.grow_to(i + 1, None);
        let b = take_block(class);
        blocks[i] = Some(b);
        RECENT.with(|r| r.publish(&blocks));
        Some(b)
    }
}

/// What an update may ask of its thread: whether to sample a hold time.
pub(crate) struct Sampler(bool);

impl Sampler {
    /// Whether this acquisition's hold time is sampled (never in the
    /// shared fallback blocks, which have no per-thread countdown).
    #[inline]
    fn sample(&self) -> bool {
        self.0 && RECENT.with(Recent::sample)
    }
}

/// Runs `f` on the calling thread's block for `class`.
#[inline]
fn with_block<R>(class: u32, f: impl FnOnce(&Block, Sampler) -> R) -> Option<R> {
    if let Some(b) = RECENT.with(|r| r.block(class as usize)) {
        b.refresh_epoch();
        return Some(f(b, Sampler(true)));
    }
    with_block_slow(class, f)
}

/// `with_block` for a class the thread has no block for yet (or a thread
/// whose list is gone).
#[inline(never)]
fn with_block_slow<R>(class: u32, f: impl FnOnce(&Block, Sampler) -> R) -> Option<R> {
    let mut f = Some(f);
    let got = SHARD.try_with(|s| {
        let b = s.block(class)?;
        b.refresh_epoch();
        let f = f.take().expect("runs once");
        Some(f(b, Sampler(true)))
    });
    match got {
        Ok(Some(r)) => Some(r),
        Ok(None) => {
            DROPPED.fetch_add(1, Ordering::Relaxed);
            None
        }
        // `try_with` did not run the closure: `f` is still there.
        Err(_) => f.take().map(|f| with_fallback_block(class, f)),
    }
}

#[cold]
fn with_fallback_block<R>(class: u32, f: impl FnOnce(&Block, Sampler) -> R) -> R {
    let mut shared = guard(&FALLBACK);
    let i = class as usize;
    shared.grow_to(i + 1, None);
    let b = *shared[i].get_or_insert_with(|| take_block(class));
    b.refresh_epoch();
    // Updated under the mutex, so the one-writer rule holds.
    f(b, Sampler(false))
}

/// Which `FastCounts` counter counts acquisitions of `access`.
#[inline(always)]
fn fast_index(access: Access) -> usize {
    if access.is_read() {
        FAST_READS
    } else {
        FAST_WRITES
    }
}

/// The inline step of an uncontended acquisition of a class with fast
/// counters whose hold is not sampled, on a registered thread: steps the
/// countdown and runs `count` on the thread's fast counters. False (nothing
/// done) otherwise: the caller takes its cold path.
#[inline(always)]
fn count_unsampled(class: u32, count: impl FnOnce(&FastCounts)) -> bool {
    (class as usize) < FAST_CLASSES
        && RECENT.with(|r| {
            let c = r.countdown.get();
            // Above 1: registered (see `Recent::countdown`), not sampled.
            if c > 1 {
                r.countdown.set(c - 1);
                count(&r.fast);
            }
            c > 1
        })
}

/// An uncontended acquisition (no wait to record): counts it; returns the
/// clock if this hold is sampled, else 0. Inlined into the lock: for a
/// class with a fast counter and a hold not sampled, the countdown's TLS
/// load and store and the counter's (see the module docs).
#[inline(always)]
pub(crate) fn acquired_uncontended(class: u32, access: Access) -> u64 {
    if count_unsampled(class, |f| bump(f.counter(fast_index(access), class), 1)) {
        return 0;
    }
    acquired_slow(class, access)
}

/// Which `FastCounts` counter counts a per-CPU read that took its slot's
/// fast path (`fast`) or fell back to the underlying lock.
#[inline(always)]
fn per_cpu_index(fast: bool) -> usize {
    if fast {
        FAST_PERCPU_READS
    } else {
        FAST_FALLBACK_READS
    }
}

/// An uncontended per-CPU read, `fast` if it took its slot's fast path:
/// counts the read acquisition and its path with one increment, of
/// `FAST_PERCPU_READS` or `FAST_FALLBACK_READS` (a snapshot counts each of
/// those as a read acquisition too; a second increment was a second chain
/// through memory on the cheapest path there is); returns the clock if this
/// hold is sampled, else 0 (as `acquired_uncontended`).
#[inline(always)]
pub(crate) fn per_cpu_read_acquired(class: u32, fast: bool) -> u64 {
    if count_unsampled(class, |f| bump(f.counter(per_cpu_index(fast), class), 1)) {
        return 0;
    }
    per_cpu_read_acquired_slow(class, fast)
}

/// `per_cpu_read_acquired` for a sampled hold, a class without fast
/// counters or a thread not registered yet (as `acquired_slow`).
#[cold]
fn per_cpu_read_acquired_slow(class: u32, fast: bool) -> u64 {
    count_fast_sampled(class, per_cpu_index(fast)).unwrap_or_else(|| {
        per_cpu_read(class, fast);
        acquired(class, Access::Read, 0)
    })
}

/// `acquired_uncontended` for a sampled hold, a class without fast
/// counters or a thread not registered yet: registers the thread's array
/// (or counts in the class's block if it cannot), samples.
#[cold]
fn acquired_slow(class: u32, access: Access) -> u64 {
    count_fast_sampled(class, fast_index(access)).unwrap_or_else(|| acquired(class, access, 0))
}

/// The cold half of an uncontended acquisition counted in the thread's
/// array: registers the array (once), counts fast counter `k` of `class`
/// and steps the sampling countdown; the clock if this hold is sampled,
/// else 0. `None` if the class has no fast counters or the thread cannot
/// register its array: the caller counts in the class's block.
#[inline]
fn count_fast_sampled(class: u32, k: usize) -> Option<u64> {
    ((class as usize) < FAST_CLASSES && register_fast()).then(|| {
        RECENT.with(|r| {
            bump(r.fast.counter(k, class), 1);
            if r.sample() { now_ns() } else { 0 }
        })
    })
}

/// Counted like an uncontended acquisition, but nothing is held (no hold
/// to sample).
#[inline(always)]
pub(crate) fn passed_uncontended(class: u32, access: Access) {
    if !count_fast(class, fast_index(access)) {
        passed(class, access, 0);
    }
}

/// A per-CPU read took its slot's fast path (`fast`) or fell back to the
/// underlying lock; its acquisition is counted apart (by `acquired`, or
/// `acquired_uncontended` for a try-lock read), so
/// the event goes to the class's block: the fast counters of per-CPU reads
/// also count acquisitions (`per_cpu_read_acquired`).
#[inline(always)]
pub(crate) fn per_cpu_read(class: u32, fast: bool) {
    event(
        class,
        if fast {
            Event::FastRead
        } else {
            Event::FallbackRead
        },
    );
}

/// Counts fast counter `k` of `class`; false if it has none (the caller
/// counts in the block).
#[inline(always)]
fn count_fast(class: u32, k: usize) -> bool {
    if (class as usize) < FAST_CLASSES
        && RECENT.with(|r| {
            // Above 0: registered (see `Recent::countdown`).
            let registered = r.countdown.get() != 0;
            if registered {
                bump(r.fast.counter(k, class), 1);
            }
            registered
        })
    {
        return true;
    }
    count_fast_slow(class, k)
}

/// `count_fast` for a class without fast counters or a thread whose
/// countdown is 0 (not registered yet, or sampling restarted).
#[cold]
fn count_fast_slow(class: u32, k: usize) -> bool {
    if (class as usize) < FAST_CLASSES && register_fast() {
        RECENT.with(|r| {
            bump(r.fast.counter(k, class), 1);
            // Registered: let the next count take the inline path. 1 keeps
            // the countdown's meaning (the next hold is sampled, then the
            // rate applies); left at 0, a thread that only counts holdless
            // acquisitions (SeqLock reads) came here every time.
            if r.countdown.get() == 0 {
                r.countdown.set(1);
            }
        });
        return true;
    }
    false
}

/// The calling thread samples its next hold and then follows the current
/// rate (`stats::set_hold_sample` on this thread). Other threads' countdowns
/// are theirs alone: they pick the rate up at their next sampled hold.
pub(crate) fn restart_sampling() {
    let _ = RECENT.try_with(|r| r.countdown.set(0));
}

/// The slow path was entered: counts it, returns the clock for the wait.
pub(crate) fn contended(class: u32, access: Access) -> u64 {
    with_block(class, |b, _| bump(&b.access(access).contended, 1));
    now_ns()
}

/// The lock is held: counts the acquisition and its wait (if `wait_start`
/// is not 0); returns the clock if this hold is sampled, else 0.
pub(crate) fn acquired(class: u32, access: Access, wait_start: u64) -> u64 {
    with_block(class, |b, sample| {
        let a = b.access(access);
        bump(&a.acquisitions, 1);
        let mut now = 0;
        if wait_start != 0 {
            now = now_ns();
            a.wait.record(now.saturating_sub(wait_start));
        }
        if sample.sample() {
            if now == 0 {
                now = now_ns();
            }
            now
        } else {
            0
        }
    })
    .unwrap_or(0)
}

/// Counted like an acquisition, with its wait, but nothing is held.
pub(crate) fn passed(class: u32, access: Access, wait_start: u64) {
    with_block(class, |b, _| {
        let a = b.access(access);
        bump(&a.acquisitions, 1);
        if wait_start != 0 {
            a.wait.record(now_ns().saturating_sub(wait_start));
        }
    });
}

/// A sampled hold that began at `start` ended now.
pub(crate) fn released(class: u32, access: Access, start: u64) {
    let held = now_ns().saturating_sub(start);
    let long = held >= super::long_hold_threshold();
    with_block(class, |b, _| {
        b.access(access).hold.record(held);
        if long {
            bump(
                &b.wait_events[side(access)][WaitEvent::LongHold as usize],
                1,
            );
        }
    });
    if long {
        super::report_long_hold(class, access, held);
    }
}

pub(crate) fn event(class: u32, event: Event) {
    with_block(class, |b, _| bump(&b.events[event as usize], 1));
}

pub(crate) fn wait_event(class: u32, access: Access, event: WaitEvent) {
    with_block(class, |b, _| {
        bump(&b.wait_events[side(access)][event as usize], 1);
    });
}

pub(crate) fn queue_depth(class: u32, access: Access, depth: u64) {
    with_block(class, |b, _| raise(&b.queue_depth_max[side(access)], depth));
}

/// A revocation that took `cost_ns`; `heavy`: it paid the heavy fence.
pub(crate) fn revocation(class: u32, cost_ns: u64, heavy: bool) {
    with_block(class, |b, _| {
        b.revocations.record(cost_ns);
        if heavy {
            bump(&b.events[Event::HeavyRevocation as usize], 1);
        }
    });
}

/// Starts a new epoch: every count reads as zero from now on.
pub(crate) fn reset() {
    let _gate = reset_gate();
    // Relaxed: owners and snapshots compare epochs; a late view only makes
    // a few in-flight events count in the old epoch.
    EPOCH.fetch_add(1, Ordering::Relaxed);
    #[cfg(test)]
    {
        let ms = RESET_PAUSE_MS.load(Ordering::Relaxed);
        if ms != 0 {
            IN_RESET_PAUSE.store(true, Ordering::SeqCst);
            std::thread::sleep(std::time::Duration::from_millis(ms));
            IN_RESET_PAUSE.store(false, Ordering::SeqCst);
        }
    }
    // "Zeroes every count": the dropped events too.
    DROPPED.store(0, Ordering::Relaxed);
    // The fast counts: what the live arrays hold now is the new zero, and
    // what exited threads counted is gone.
    let mut all = guard(&FAST_ALL);
    let FastRegistry { live, exited } = &mut *all;
    for entry in live.iter_mut() {
        let mut base = entry.base;
        entry.for_each(|k, class, c| base[class][k] = c);
        entry.base = base;
    }
    *exited = [[0; FAST_COUNTERS]; FAST_CLASSES];
}

/// Runs `f(class, counts)` for every class with fast counts since the last
/// reset, summed over threads (`counts` indexed by `FAST_READS`, ...).
pub(crate) fn fast_counts_since_reset(mut f: impl FnMut(u32, [u64; FAST_COUNTERS])) {
    let mut sums;
    {
        // Summed under the mutex, without allocating (an allocator on an
        // instrumented lock would count, and may register an array).
        let all = guard(&FAST_ALL);
        sums = all.exited;
        for entry in all.live.iter() {
            entry.for_each(|k, class, c| {
                // After a reset that released the mutex before we took
                // it, a count is at least its base (the reset read it).
                sums[class][k] += c.saturating_sub(entry.base[class][k]);
            });
        }
    }
    for (class, since) in sums.into_iter().enumerate() {
        if since != [0; FAST_COUNTERS] {
            f(class as u32, since);
        }
    }
}

/// Runs `f` on every block that counts in the current epoch.
pub(crate) fn live_blocks(mut f: impl FnMut(&Block)) {
    let e = EPOCH.load(Ordering::Relaxed);
    let all = guard(&ALL).copied();
    for &b in all.iter() {
        // Acquire pairs with the Release in `zero_for`.
        if b.epoch.load(Ordering::Acquire) == e {
            f(b);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The countdown of a fresh thread, after `f` ran on it.
    fn countdown_after(f: impl FnOnce() + Send) -> u32 {
        std::thread::scope(|s| {
            s.spawn(|| {
                f();
                RECENT.with(|r| r.countdown.get())
            })
            .join()
            .unwrap()
        })
    }

    // A class index with fast counters that no lock of these tests uses.
    const CLASS: u32 = FAST_CLASSES as u32 - 1;

    #[test]
    fn a_holdless_count_registers_the_thread_for_the_inline_path() {
        // Without holds the countdown never runs out and restarts; the
        // first count must still leave it above 0, or every count would
        // take the cold path.
        assert_eq!(
            countdown_after(|| passed_uncontended(CLASS, Access::Read)),
            1
        );
        assert_eq!(
            countdown_after(|| {
                passed_uncontended(CLASS, Access::Read);
                passed_uncontended(CLASS, Access::Read);
            }),
            1
        );
    }

    #[test]
    fn reset_zeroes_the_dropped_events() {
        DROPPED.store(3, Ordering::Relaxed);
        reset();
        assert_eq!(super::super::snapshot().dropped_events, 0);
    }

    #[test]
    fn the_first_hold_after_holdless_counts_is_still_sampled() {
        std::thread::scope(|s| {
            s.spawn(|| {
                passed_uncontended(CLASS, Access::Read);
                // Countdown 1: this hold is sampled (a clock is returned)
                // and the countdown restarts at the rate.
                assert_ne!(acquired_uncontended(CLASS, Access::Write), 0);
                assert_eq!(
                    RECENT.with(|r| r.countdown.get()),
                    super::super::hold_sample()
                );
            });
        });
    }

    #[test]
    fn a_snapshot_during_a_reset_is_all_before_or_all_after_it() {
        use crate::class::{ClassRef, LockClass, LockKind};
        static C: LockClass = LockClass::new("counters-reset-gate");
        let class = ClassRef::of(&C).resolve(LockKind::QRwLock).index;
        let reads = |snap: &super::super::Snapshot| {
            snap.class("counters-reset-gate")
                .map_or(0, |c| c.read.acquisitions)
        };
        // Ten reads in the thread's fast array, one (with a wait) in its
        // block: a reset zeroes the block at its epoch bump and the array
        // at its rebasing.
        std::thread::scope(|s| {
            s.spawn(|| {
                for _ in 0..10 {
                    passed_uncontended(class, Access::Read);
                }
                passed(class, Access::Read, now_ns());
            });
        });
        let before = reads(&super::super::snapshot());
        assert!(before == 11 || before == 0, "{before}");
        RESET_PAUSE_MS.store(300, Ordering::Relaxed);
        std::thread::scope(|s| {
            let r = s.spawn(reset);
            let start = std::time::Instant::now();
            while !IN_RESET_PAUSE.load(Ordering::SeqCst) && !r.is_finished() {
                assert!(start.elapsed().as_secs() < 60, "reset never paused");
                std::thread::yield_now();
            }
            // Inside the pause (or after the reset): 0, never the array's
            // 10 without the block's 1.
            let during = reads(&super::super::snapshot());
            assert_eq!(during, 0);
        });
        RESET_PAUSE_MS.store(0, Ordering::Relaxed);
    }
}
