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
//! An uncontended acquisition with statistics on costs a few ns that an
//! uncontended lock does not have to spare, so its path is short: the
//! thread's block list (indexed by class) is also published in a
//! thread-local without a destructor (`RECENT`; std compiles such a
//! `thread_local!` to a plain TLS access, with no lazy-initialisation or
//! destructor-registration check), so a class the thread has met costs an
//! indexed load, the epoch check, one counter store and the hold-sampling
//! countdown. No clock is read unless this hold is sampled (1 in
//! `stats::hold_sample()`) or the acquisition waited. The `RefCell`ed list
//! itself is only used to add a class the thread meets for the first time.
//!
//! When a thread exits its blocks go to a pool and a later thread carries
//! on counting in them, so nothing counted is lost and memory stays bounded
//! by (threads alive at once) x (classes). A thread whose thread-locals are
//! already destroyed (locking from a thread-local destructor) counts into
//! a shared block per class under a mutex.
//!
//! # Reset
//! [`reset`](super::reset) bumps a global epoch instead of writing other
//! threads' blocks: a block whose epoch is old counts as zero in snapshots,
//! and its owner zeroes it before its next update.

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

/// A thread's blocks.
struct Shard {
    blocks: RefCell<Vec<Option<&'static Block>>>,
}

impl Drop for Shard {
    fn drop(&mut self) {
        // The blocks go to the pool, where another thread may take them, and
        // the list is freed: unpublish it first (this thread may still lock
        // in later thread-local destructors; it then counts in the shared
        // blocks).
        let _ = RECENT.try_with(Recent::forget);
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
    countdown: Cell<u32>,
}

impl Recent {
    /// Unpublishes the list (before it changes or is freed).
    fn forget(&self) {
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
    #[inline]
    fn sample(&self) -> bool {
        // A lowered rate applies at once (the countdown never exceeds it).
        let every = super::hold_sample();
        let c = self.countdown.get().min(every);
        if c <= 1 {
            self.countdown.set(every);
            true
        } else {
            self.countdown.set(c - 1);
            false
        }
    }
}

std::thread_local! {
    static SHARD: Shard = const {
        Shard {
            blocks: RefCell::new(Vec::new()),
        }
    };
    static RECENT: Recent = const {
        Recent {
            blocks: Cell::new(core::ptr::null()),
            len: Cell::new(0),
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
        RECENT.with(Recent::forget);
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
