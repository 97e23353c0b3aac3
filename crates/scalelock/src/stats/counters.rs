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
//! counters ([`FastCounts`]: read and write acquisitions and per-CPU fast
//! reads of the first [`FAST_CLASSES`] classes) published in a thread-local
//! without a destructor (`RECENT`; std compiles such a `thread_local!` to a
//! plain TLS access, with no lazy-initialisation or destructor-registration
//! check). Counting is then a TLS load, a bounds check, one Relaxed load
//! and store of the thread's own counter and the hold-sampling countdown
//! (the sampling rate is read only when the countdown runs out).
//! No clock is read unless this hold is sampled (1 in
//! `stats::hold_sample()`). Classes past the array, and contended
//! acquisitions (whose wait is timed anyway), count in the thread's block
//! for the class: the thread's block list, indexed by class, is also
//! published in `RECENT`, so a class the thread has met costs an indexed
//! load, the epoch check and the update. The `RefCell`ed list itself is
//! only used to add a class the thread meets for the first time.
//!
//! When a thread exits its blocks and its array go to pools and a later
//! thread carries on counting in them, so nothing counted is lost and
//! memory stays bounded by (threads alive at once) x (classes). A thread
//! whose thread-locals are already destroyed (locking from a thread-local
//! destructor) counts into a shared block per class under a mutex.
//!
//! # Reset
//! [`reset`](super::reset) never writes other threads' counters. It bumps
//! a global epoch: a block whose epoch is old counts as zero in snapshots,
//! and its owner zeroes it before its next update. The arrays, which the
//! fast path does not check an epoch for, are rebased instead: reset copies
//! each array's counts to its `base` (under the `FAST_ALL` mutex) and
//! snapshots report the difference.

use core::cell::{Cell, RefCell};
use core::sync::atomic::{AtomicU64, Ordering};
use std::boxed::Box;
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::vec::Vec;

use super::clock::now_ns;
use super::histogram::{LiveHistogram, bump, raise};
use crate::class::Access;

/// Per-kind events counted per class.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Event {
    FastRead,
    FallbackRead,
    SeqlockRetry,
    RefreshCoalesced,
    LongHold,
}

/// Number of `Event`s.
pub(crate) const EVENTS: usize = 5;

/// Slow-path events, counted per class and per read/write.
#[derive(Clone, Copy, Debug)]
pub(crate) enum WaitEvent {
    PendingPath,
    BatchEnd,
    Handoff,
    Park,
    Wake,
    SpuriousWake,
}

/// Number of `WaitEvent`s.
pub(crate) const WAIT_EVENTS: usize = 6;

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
/// Every block ever allocated (blocks are never freed).
static ALL: Mutex<Vec<&'static Block>> = Mutex::new(Vec::new());
/// Blocks of exited threads, by class, for reuse.
static POOL: Mutex<Vec<Vec<&'static Block>>> = Mutex::new(Vec::new());
/// Shared blocks for threads without thread-locals, by class; updated
/// under this mutex.
static FALLBACK: Mutex<Vec<Option<&'static Block>>> = Mutex::new(Vec::new());
/// Events dropped because they happened inside the profiler itself (an
/// allocator built on an instrumented lock, while a block was allocated).
pub(crate) static DROPPED: AtomicU64 = AtomicU64::new(0);

fn guard<T>(m: &'static Mutex<T>) -> MutexGuard<'static, T> {
    // Every update of these leaves them consistent; poisoning is moot.
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

fn take_block(class: u32) -> &'static Block {
    if let Some(b) = guard(&POOL)
        .get_mut(class as usize)
        .and_then(|free| free.pop())
    {
        return b;
    }
    let b: &'static Block = Box::leak(Box::new(Block::new(class)));
    guard(&ALL).push(b);
    b
}

/// Classes with an index below this count their uncontended acquisitions
/// and fast reads in the thread's [`FastCounts`]; the others (a process
/// with more classes) count them in their blocks, as everything else.
pub(crate) const FAST_CLASSES: usize = 64;
/// Counters per class in [`FastCounts`]: `FAST_READS`, `FAST_WRITES`,
/// `FAST_PERCPU_READS`.
pub(crate) const FAST_COUNTERS: usize = 3;
/// [`FastCounts`] counter: read acquisitions.
pub(crate) const FAST_READS: usize = 0;
/// [`FastCounts`] counter: write acquisitions.
pub(crate) const FAST_WRITES: usize = 1;
/// [`FastCounts`] counter: per-CPU reads that took their slot's fast path.
pub(crate) const FAST_PERCPU_READS: usize = 2;

/// A thread's counters of the uncontended path: acquisitions and fast
/// reads, indexed by class index, written only by the owner thread.
///
/// Reset does not touch the counts (they belong to their owner): it copies
/// them to `base`, and snapshots report `counts - base`.
pub(crate) struct FastCounts {
    counts: [[AtomicU64; FAST_COUNTERS]; FAST_CLASSES],
    /// The counts at the last reset; written by `reset` under `FAST_ALL`.
    base: [[AtomicU64; FAST_COUNTERS]; FAST_CLASSES],
}

impl FastCounts {
    fn new() -> Self {
        Self {
            counts: [const { [const { AtomicU64::new(0) }; FAST_COUNTERS] }; FAST_CLASSES],
            base: [const { [const { AtomicU64::new(0) }; FAST_COUNTERS] }; FAST_CLASSES],
        }
    }
}

/// Every `FastCounts` ever allocated (never freed); also serialises
/// `reset`'s writes of their bases with snapshots.
static FAST_ALL: Mutex<Vec<&'static FastCounts>> = Mutex::new(Vec::new());
/// `FastCounts` of exited threads, for reuse.
static FAST_POOL: Mutex<Vec<&'static FastCounts>> = Mutex::new(Vec::new());

/// The calling thread's `FastCounts`, allocated (or taken from the pool)
/// and published on first use; `None` if its thread-locals are gone or it
/// is being allocated (a re-entrant call from the allocator).
#[cold]
fn fast_counts() -> Option<&'static FastCounts> {
    SHARD
        .try_with(|s| {
            if let Some(f) = s.fast.get() {
                return Some(f);
            }
            if s.allocating.replace(true) {
                return None;
            }
            let pooled = guard(&FAST_POOL).pop();
            let f = pooled.unwrap_or_else(|| {
                let f: &'static FastCounts = Box::leak(Box::new(FastCounts::new()));
                guard(&FAST_ALL).push(f);
                f
            });
            s.fast.set(Some(f));
            s.allocating.set(false);
            RECENT.with(|r| r.fast.set(f));
            Some(f)
        })
        .ok()
        .flatten()
}

/// A thread's blocks.
struct Shard {
    blocks: RefCell<Vec<Option<&'static Block>>>,
    /// The thread's fast counters, once it counted an uncontended
    /// acquisition.
    fast: Cell<Option<&'static FastCounts>>,
    /// `fast_counts` is allocating them (an allocator that locks an
    /// instrumented lock re-enters it).
    allocating: Cell<bool>,
}

impl Drop for Shard {
    fn drop(&mut self) {
        // The blocks go to the pool, where another thread may take them, and
        // the list is freed: unpublish it first (this thread may still lock
        // in later thread-local destructors; it then counts in the shared
        // blocks).
        let _ = RECENT.try_with(Recent::forget);
        if let Some(fast) = self.fast.take() {
            guard(&FAST_POOL).push(fast);
        }
        let blocks = core::mem::take(self.blocks.get_mut());
        let mut pool = guard(&POOL);
        for b in blocks.into_iter().flatten() {
            let i = b.class as usize;
            if pool.len() <= i {
                pool.resize_with(i + 1, Vec::new);
            }
            pool[i].push(b);
        }
    }
}

/// The thread's block list as published for the fast path, and its
/// hold-sampling countdown: no destructor, so always accessible and as
/// cheap as TLS gets.
struct Recent {
    /// The buffer of this thread's `Shard::blocks`, valid for `len`
    /// entries (0: nothing published).
    blocks: Cell<*const Option<&'static Block>>,
    len: Cell<usize>,
    /// This thread's `Shard::fast` (null: none yet, or handed back to the
    /// pool at thread exit).
    fast: Cell<*const FastCounts>,
    countdown: Cell<u32>,
}

impl Recent {
    /// Unpublishes the list (before it changes or is freed) and the fast
    /// counters (before another thread may take them).
    fn forget(&self) {
        self.len.set(0);
        self.fast.set(core::ptr::null());
    }

    /// Unpublishes the block list only.
    fn forget_blocks(&self) {
        self.len.set(0);
    }

    /// This thread's fast counter `k` of class index `class`, if the class
    /// has one and the thread's array is published.
    #[inline(always)]
    fn fast_counter(&self, class: u32, k: usize) -> Option<&'static AtomicU64> {
        self.fast_counters(class).map(|c| &c[k])
    }

    /// This thread's fast counters of class index `class`, if the class
    /// has them and the thread's array is published.
    #[inline(always)]
    fn fast_counters(&self, class: u32) -> Option<&'static [AtomicU64; FAST_COUNTERS]> {
        let fast = self.fast.get();
        if (class as usize) < FAST_CLASSES && !fast.is_null() {
            // SAFETY: a non-null `fast` is this thread's own array
            // (`fast_counts` published it); arrays are leaked, never freed,
            // and it is unpublished (`forget`) before the pool may give it
            // to another thread, so only this thread writes through it.
            // `class < FAST_CLASSES` keeps the index in bounds.
            Some(unsafe { &(*fast).counts[class as usize] })
        } else {
            None
        }
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
            self.countdown.set(super::hold_sample());
            true
        }
    }
}

std::thread_local! {
    static SHARD: Shard = const {
        Shard {
            blocks: RefCell::new(Vec::new()),
            fast: Cell::new(None),
            allocating: Cell::new(false),
        }
    };
    static RECENT: Recent = const {
        Recent {
            blocks: Cell::new(core::ptr::null()),
            len: Cell::new(0),
            fast: Cell::new(core::ptr::null()),
            countdown: Cell::new(0),
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
        if blocks.len() <= i {
            blocks.resize(i + 1, None);
        }
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
    if shared.len() <= i {
        shared.resize(i + 1, None);
    }
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

/// An uncontended acquisition (no wait to record): counts it; returns the
/// clock if this hold is sampled, else 0. Inlined into the lock: for a
/// class with a fast counter, a thread-local load, one counter store and
/// the sampling countdown.
#[inline(always)]
pub(crate) fn acquired_uncontended(class: u32, access: Access) -> u64 {
    let sampled = RECENT.with(|r| {
        let c = r.fast_counter(class, fast_index(access))?;
        bump(c, 1);
        Some(r.sample())
    });
    match sampled {
        Some(false) => 0,
        Some(true) => sample_start(),
        None => acquired_slow(class, access),
    }
}

/// An uncontended per-CPU read that took its slot's fast path: counts the
/// fast read and the read acquisition with one thread-local access; returns
/// the clock if this hold is sampled, else 0 (as `acquired_uncontended`).
#[inline(always)]
pub(crate) fn fast_read_acquired(class: u32) -> u64 {
    let sampled = RECENT.with(|r| {
        let c = r.fast_counters(class)?;
        bump(&c[FAST_PERCPU_READS], 1);
        bump(&c[FAST_READS], 1);
        Some(r.sample())
    });
    match sampled {
        Some(false) => 0,
        Some(true) => sample_start(),
        None => {
            fast_read(class);
            acquired_slow(class, Access::Read)
        }
    }
}

/// A sampled hold begins: the clock.
#[cold]
fn sample_start() -> u64 {
    now_ns()
}

/// `acquired_uncontended` without a published fast counter: publishes the
/// thread's array, or counts in the class's block.
#[cold]
fn acquired_slow(class: u32, access: Access) -> u64 {
    if (class as usize) < FAST_CLASSES
        && let Some(f) = fast_counts()
    {
        bump(&f.counts[class as usize][fast_index(access)], 1);
        return if RECENT.with(Recent::sample) {
            now_ns()
        } else {
            0
        };
    }
    acquired(class, access, 0)
}

/// Counted like an uncontended acquisition, but nothing is held (no hold
/// to sample).
#[inline(always)]
pub(crate) fn passed_uncontended(class: u32, access: Access) {
    if !count_fast(class, fast_index(access)) {
        passed(class, access, 0);
    }
}

/// A per-CPU read took its slot's fast path.
#[inline(always)]
pub(crate) fn fast_read(class: u32) {
    if !count_fast(class, FAST_PERCPU_READS) {
        event(class, Event::FastRead);
    }
}

/// Counts fast counter `k` of `class`; false if it has none (the caller
/// counts in the block).
#[inline(always)]
fn count_fast(class: u32, k: usize) -> bool {
    if let Some(c) = RECENT.with(|r| r.fast_counter(class, k)) {
        bump(c, 1);
        return true;
    }
    count_fast_slow(class, k)
}

/// `count_fast` without a published array.
#[cold]
fn count_fast_slow(class: u32, k: usize) -> bool {
    if (class as usize) < FAST_CLASSES
        && let Some(f) = fast_counts()
    {
        bump(&f.counts[class as usize][k], 1);
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
            bump(&b.events[Event::LongHold as usize], 1);
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

pub(crate) fn revocation(class: u32, cost_ns: u64) {
    with_block(class, |b, _| b.revocations.record(cost_ns));
}

/// Starts a new epoch: every count reads as zero from now on.
pub(crate) fn reset() {
    // Relaxed: owners and snapshots compare epochs; a late view only makes
    // a few in-flight events count in the old epoch.
    EPOCH.fetch_add(1, Ordering::Relaxed);
    // The fast counts: what they hold now is the new zero. Relaxed: a
    // count stored by its owner that this load does not see yet counts
    // after the reset (as an event in flight above).
    for f in guard(&FAST_ALL).iter() {
        for (counts, base) in f.counts.iter().zip(&f.base) {
            for (c, b) in counts.iter().zip(base) {
                b.store(c.load(Ordering::Relaxed), Ordering::Relaxed);
            }
        }
    }
}

/// Runs `f(class, counts)` for every class with fast counts since the last
/// reset, once per thread array (`counts` indexed by `FAST_READS`, ...).
pub(crate) fn fast_counts_since_reset(mut f: impl FnMut(u32, [u64; FAST_COUNTERS])) {
    // A copy, so that `f` may allocate (with an allocator on an
    // instrumented lock, that may publish a new array) without the mutex.
    let all = guard(&FAST_ALL).clone();
    for fast in all {
        for (class, (counts, base)) in fast.counts.iter().zip(&fast.base).enumerate() {
            let mut since = [0; FAST_COUNTERS];
            for (k, (c, b)) in counts.iter().zip(base).enumerate() {
                // Relaxed: snapshots tolerate lag. After a reset that
                // released the mutex before we took it, a count is at
                // least its base (the reset read it); a reset running
                // meanwhile may be seen ahead of the count: 0, not a
                // wrapped difference.
                since[k] = c
                    .load(Ordering::Relaxed)
                    .saturating_sub(b.load(Ordering::Relaxed));
            }
            if since != [0; FAST_COUNTERS] {
                f(class as u32, since);
            }
        }
    }
}

/// Runs `f` on every block that counts in the current epoch.
pub(crate) fn live_blocks(mut f: impl FnMut(&Block)) {
    let e = EPOCH.load(Ordering::Relaxed);
    let all = guard(&ALL).clone();
    for b in all {
        // Acquire pairs with the Release in `zero_for`.
        if b.epoch.load(Ordering::Acquire) == e {
            f(b);
        }
    }
}
