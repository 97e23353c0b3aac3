//! `RawQSpinLock`: a 4-byte queued spinlock with bounded-bypass batching.
//!
//! After Linux's `kernel/locking/qspinlock.c` (seed 001: locked byte, pending
//! bit, MCS tail) and its paravirt "hybrid queued/unfair" mode, made to work in
//! user space where any waiter or holder can be preempted.
//!
//! # The lock word
//!
//! ```text
//!  byte 0        byte 1                    bytes 2..3
//! +--------+-----------------------------+----------------+
//! | locked | flags: PARKED|HANDOFF|PENDING | tail (node idx)|
//! +--------+-----------------------------+----------------+
//! ```
//! Three separate atomics (`AtomicU8`, `AtomicU8`, `AtomicU16`), never
//! accessed with a wider atomic, so the Rust memory model (and Miri, and loom)
//! see no mixed-size accesses. That is what lets unlock be a plain byte store.
//!
//! | field | meaning | written by |
//! | --- | --- | --- |
//! | `locked` = 1 | held | `cmpxchg 0->1` by any acquirer; `store 0` by the holder |
//! | `PENDING` | one thread, the *word waiter*, waits on the word itself; it is next in line | set by the second contender (queue empty) or by the queue head; cleared by its owner when it acquires |
//! | `HANDOFF` | the word waiter has waited a whole batch: the next release is its; fast-path acquirers must not take a free lock | word waiter, `unlock_fair`; cleared with `PENDING` or before the word waiter sleeps |
//! | `PARKED` | someone sleeps on this lock's parking bucket until `locked` clears | the sleeper; cleared by whoever wakes the bucket (`unlock`) |
//! | `HEAD_PARKED` | the queue head sleeps on the bucket until `PENDING` clears | the head; cleared by the word waiter when it acquires |
//! | `tail` | index of the last MCS queue node, 0 if no queue | `swap` by each newcomer; `cmpxchg ->0` by the last node leaving |
//!
//! # Who waits where (count the cache lines)
//! - Uncontended: `lock` is one `cmpxchg` on `locked` (after a load of
//!   `flags` on the same line); `unlock` is one release store plus loads of
//!   `flags` and `tail` (a line the holder already owns).
//! - Any contender first polls the word for about 2 us and takes the lock if
//!   it finds it free and still free `SETTLE_SPINS` relaxes later: a holder
//!   that went off to do other work is replaced by a running thread rather
//!   than by a queued one that must first be woken.
//! - Second contender (no queue, no word waiter): sets `PENDING` and polls the
//!   word with exponential backoff; it touches no queue node (seed: "pending
//!   path").
//! - Third and later contenders queue MCS-style: `tail.swap(me)`, link into the
//!   predecessor's node, then spin on *their own* node's line, and after a
//!   short budget sleep on it (`Platform::wait`). Only the predecessor writes
//!   that line: to make it the queue head, waking it if it sleeps — the waiter
//!   that must run next and no other.
//! - The queue head waits for `PENDING` to clear, takes it, and becomes the
//!   word waiter; once it holds the lock it hands head-ship to its successor.
//!
//! # Fair and fast: batches
//! Strict FIFO hand-off costs a cache-line transfer per acquisition and, when
//! the next waiter is asleep or preempted, a wake-up latency during which the
//! lock sits idle (spin's `TicketMutex`, parking_lot's `FairMutex` collapse at
//! 16 threads on 2 cores). So the running holder may re-take a free lock (the
//! fast path ignores the queue) for one *batch*, and hand-offs happen once per
//! batch instead of once per acquisition:
//! - The holder counts, per thread (`Platform::count_batch`), the releases it
//!   makes while waiters exist; after `BATCH_OPS` of them it raises `HANDOFF`.
//!   That bound holds even when the waiter cannot run (on a busy machine a
//!   runnable thread can wait a whole scheduler tick for a CPU).
//! - The word waiter also raises `HANDOFF` after `BATCH_NS` (or `BATCH_POLLS`
//!   polls where there is no clock), which bounds batches of long critical
//!   sections and covers platforms that do not count.
//! - Meanwhile the word waiter stays off the holder's cache line: a few polls,
//!   then a poll every couple of microseconds with a `yield` between, and it
//!   takes a free lock only if it stays free for `SETTLE_SPINS` relaxes (a
//!   running holder re-takes it sooner), so it does not end a batch early.
//!
//! Once `HANDOFF` is up the fast path refuses a free lock, the holder's next
//! `lock()` queues behind everyone, and the word waiter takes the lock at the
//! next release. Every queued thread thus gets the lock within (queue length x
//! batch) and keeps it for about one batch: per-thread op counts stay close
//! while the holder runs at uncontended speed between hand-offs.
//!
//! Bypass is bounded: a newcomer can take the lock ahead of the word waiter
//! only while `HANDOFF` is clear (one batch), and a newcomer joins the MCS
//! queue whenever one exists (it never takes `PENDING` over a queue).
//! `unlock_fair` raises `HANDOFF` before releasing when a word waiter exists,
//! which is strict FIFO hand-off.
//!
//! # Preemption (the paravirt part)
//! - Queued waiters sleep on their own node, so a preempted queued waiter
//!   delays nobody until it becomes head; the predecessor wakes exactly it.
//! - A word waiter that has claimed `HANDOFF` but still sees the lock held for
//!   `PARK_NS` (the holder is preempted, or sleeps in its critical section)
//!   drops `HANDOFF` before sleeping: while it sleeps the lock is unfair, so a
//!   running thread can use it rather than everyone stalling behind a sleeping
//!   waiter (Linux's pv "hybrid queued/unfair" mode). Woken, it claims
//!   `HANDOFF` again at once.
//! - Spinning backs off to `yield_now` so a preempted holder gets the CPU.
//! - The queue head passes head-ship on as soon as it becomes the word
//!   waiter, so its successor's wake-up overlaps the current batch instead of
//!   following the hand-off.
//!
//! # Sleeping on the word without an atomic unlock
//! A sleeping word waiter sets `PARKED`, then `heavy_fence`, then re-checks
//! `locked`; `unlock` stores `locked = 0`, then `light_fence`, then loads
//! `flags`. The fence pair (membarrier on Linux, see `platform`) guarantees
//! that the sleeper sees the release or the unlocker sees `PARKED` and wakes
//! the bucket, so unlock stays a plain store plus a load. Under loom and Miri
//! both fences are `fence(SeqCst)`, the store-buffering pattern.
//!
//! # Memory orderings
//! - Acquiring `locked` (`cmpxchg` Acquire) pairs with the holder's Release
//!   store: the critical sections are totally ordered.
//! - `tail.swap` is AcqRel: Release publishes our node reset to the successor
//!   who will write into it; Acquire makes the predecessor's node valid to us.
//! - `node.next` store Release / load Acquire and `node.state` swap Release /
//!   load Acquire pass queue position only; no user data flows through them.
//!
//! # Nodes
//! Queue nodes come from the platform (`Platform::queue_node`): one per thread
//! on std. A thread without a node (table exhausted, or locking from a
//! thread-local destructor) waits unqueued: it polls the word and sleeps on the
//! bucket like a word waiter, but never owns `PENDING`; correct, not FIFO.

use core::marker::PhantomData;

use lock_api::{GuardSend, RawMutex, RawMutexFair};

use crate::platform::{DefaultPlatform, Platform};
use crate::qnode::{NODE_HEAD, NODE_PARKED, NODE_WAITING, NodeIndex, QNode};
use crate::sync::atomic::{AtomicU8, AtomicU16, Ordering};
use crate::wait::{self, Backoff};

/// `locked` byte value of a held lock.
const LOCKED: u8 = 1;
/// A word waiter exists (the seed's pending bit).
const PENDING: u8 = 1 << 0;
/// The word waiter's batch is over: fast-path acquirers must not take the lock.
const HANDOFF: u8 = 1 << 1;
/// A thread sleeps on this lock's parking bucket until `locked` clears.
const PARKED: u8 = 1 << 2;
/// The queue head sleeps on this lock's parking bucket until `PENDING` clears.
const HEAD_PARKED: u8 = 1 << 3;

/// How long the running holder may keep re-acquiring before the word waiter
/// claims the next release.
const BATCH_NS: u64 = 200_000;
/// The same bound in polls, for platforms whose `now_ns` is constant.
const BATCH_POLLS: u32 = if cfg!(loom) { 3 } else { 1 << 12 };
/// The batch bound counted by the holder: contended releases in a row.
const BATCH_OPS: u32 = 1 << 13;
/// Polls a word waiter spends watching for a free lock before it waits out
/// the rest of the batch quietly.
const BATCH_SPIN_POLLS: u32 = if cfg!(loom) { 1 } else { 16 };
/// Relaxes between two quiet polls (about 2 us at 23 cycles per `pause`).
const QUIET_SPINS: u32 = if cfg!(loom) { 1 } else { 256 };
/// Relaxes a word waiter waits for a free lock to stay free before taking it
/// during a batch (see `try_lock_word_settled`).
const SETTLE_SPINS: u32 = if cfg!(loom) { 1 } else { 64 };
/// Polls of the optimistic spin before a contender queues (about 2 us).
const PRE_QUEUE_POLLS: u32 = if cfg!(loom) { 1 } else { 8 };
/// How long a word waiter holding `HANDOFF` spins before it sleeps.
const PARK_NS: u64 = 100_000;
/// The same bound in polls.
const PARK_POLLS: u32 = if cfg!(loom) { 2 } else { 1 << 12 };
/// How long a queued waiter spins on its node before sleeping on it.
const NODE_SPINS: u32 = if cfg!(loom) { 1 } else { 1 << 10 };
/// Polls the queue head spends waiting for `PENDING` before sleeping, for
/// platforms without a clock (with one, the bound is two batches).
const HEAD_POLLS: u32 = if cfg!(loom) { 2 } else { 1 << 12 };

/// A 4-byte queued spinlock; see the module documentation.
///
/// `P` is the platform: how waiters sleep and where queue nodes live.
#[repr(C, align(4))]
pub struct RawQSpinLock<P: Platform = DefaultPlatform> {
    locked: AtomicU8,
    flags: AtomicU8,
    tail: AtomicU16,
    _platform: PhantomData<fn() -> P>,
}

/// A mutual-exclusion lock protecting a `T`, built on [`RawQSpinLock`].
pub type QSpinLock<T> = lock_api::Mutex<RawQSpinLock, T>;
/// The guard of a [`QSpinLock`].
pub type QSpinLockGuard<'a, T> = lock_api::MutexGuard<'a, RawQSpinLock, T>;

impl<P: Platform> RawQSpinLock<P> {
    /// An unlocked lock.
    #[cfg(not(loom))]
    pub const fn new() -> Self {
        Self {
            locked: AtomicU8::new(0),
            flags: AtomicU8::new(0),
            tail: AtomicU16::new(0),
            _platform: PhantomData,
        }
    }

    /// An unlocked lock.
    #[cfg(loom)]
    pub fn new() -> Self {
        Self {
            locked: AtomicU8::new(0),
            flags: AtomicU8::new(0),
            tail: AtomicU16::new(0),
            _platform: PhantomData,
        }
    }

    #[inline]
    fn addr(&self) -> usize {
        self as *const Self as usize
    }

    /// The fast path: take a free lock unless a word waiter claimed it.
    #[inline]
    fn try_lock_fast(&self) -> bool {
        self.flags.load(Ordering::Relaxed) & HANDOFF == 0
            && self
                .locked
                // Acquire pairs with the previous holder's Release store.
                .compare_exchange(0, LOCKED, Ordering::Acquire, Ordering::Relaxed)
                .is_ok()
    }

    /// Takes a free lock regardless of `HANDOFF` (word waiters only).
    #[inline]
    fn try_lock_word(&self) -> bool {
        self.locked.load(Ordering::Relaxed) == 0
            && self
                .locked
                // Acquire pairs with the previous holder's Release store.
                .compare_exchange(0, LOCKED, Ordering::Acquire, Ordering::Relaxed)
                .is_ok()
    }

    /// Like `try_lock_word`, but only takes a lock that stays free for a
    /// moment. Between its release and its next `lock()` a running holder
    /// leaves the word free for a few cycles (longer when our own poll just
    /// stole its cache line); taking it then would end the holder's batch
    /// early and move the line on every acquisition. A lock still free after
    /// `SETTLE_SPINS` relaxes has really been let go.
    #[inline]
    fn try_lock_word_settled(&self) -> bool {
        if self.locked.load(Ordering::Relaxed) != 0 {
            return false;
        }
        if self.flags.load(Ordering::Relaxed) & HANDOFF == 0 {
            for _ in 0..SETTLE_SPINS {
                P::relax();
            }
        }
        self.try_lock_word()
    }

    #[cold]
    fn lock_slow(&self) {
        // A short optimistic spin, taking the lock only if it stays free for
        // SETTLE_SPINS: a holder that left (critical sections between long
        // stretches of other work) is replaced by a running thread instead of
        // a queued one that first has to be woken, while a thread that just
        // lost a hand-off cannot steal the lock back from the new batch owner
        // (that owner re-takes it sooner than the settle delay).
        let mut backoff = Backoff::new();
        for _ in 0..PRE_QUEUE_POLLS {
            if self.locked.load(Ordering::Relaxed) == 0 {
                for _ in 0..SETTLE_SPINS {
                    P::relax();
                }
                if self.try_lock_fast() {
                    return;
                }
            }
            backoff.snooze::<P>();
        }
        // The second contender waits on the word, without a queue node.
        if self.try_become_pending() {
            self.wait_as_pending();
            return;
        }
        match P::queue_node() {
            Some(index) => self.lock_queued(index),
            None => self.lock_unqueued(),
        }
    }

    /// Sets `PENDING` if there is neither a word waiter nor a queue.
    #[inline]
    fn try_become_pending(&self) -> bool {
        loop {
            if self.tail.load(Ordering::Relaxed) != 0 {
                return false;
            }
            let flags = self.flags.load(Ordering::Relaxed);
            if flags & PENDING != 0 {
                return false;
            }
            if self
                .flags
                .compare_exchange_weak(flags, flags | PENDING, Ordering::Relaxed, Ordering::Relaxed)
                .is_ok()
            {
                return true;
            }
        }
    }

    /// The word waiter's loop: owns `PENDING`, returns holding the lock with
    /// `PENDING`, `HANDOFF` and `PARKED` cleared.
    fn wait_as_pending(&self) {
        let mut start = P::now_ns();
        let mut polls: u32 = 0;
        let mut handoff = false;
        let mut backoff = Backoff::new();
        loop {
            if self.try_lock_word_settled() {
                let old = self.flags.fetch_and(
                    !(PENDING | HANDOFF | PARKED | HEAD_PARKED),
                    Ordering::Relaxed,
                );
                if old & (PARKED | HEAD_PARKED) != 0 {
                    // A queue head or unqueued waiter sleeps until PENDING
                    // clears (or a later release); it re-checks on waking.
                    wait::unpark_all::<P>(self.addr());
                }
                return;
            }
            polls = polls.wrapping_add(1);
            let now = P::now_ns();
            if !handoff {
                let waited = now.wrapping_sub(start);
                if polls >= BATCH_POLLS || waited >= BATCH_NS {
                    self.flags.fetch_or(HANDOFF, Ordering::Relaxed);
                    handoff = true;
                    start = now;
                    polls = 0;
                    backoff = Backoff::new();
                } else if polls >= BATCH_SPIN_POLLS {
                    // The holder is still busy: wait out the rest of its batch
                    // off its cache line, polling only now and then. Spin and
                    // yield rather than sleep: a sleeper needs a wake-up at
                    // the end of the batch, and with every CPU busy a woken
                    // thread can wait a whole scheduler tick for one.
                    for _ in 0..QUIET_SPINS {
                        P::relax();
                    }
                    P::yield_now();
                    continue;
                }
            } else if polls >= PARK_POLLS || now.wrapping_sub(start) >= PARK_NS {
                // The holder keeps the lock although we claimed it: it is
                // preempted or sleeping. Sleep too, and open the lock to
                // running threads meanwhile (hybrid mode).
                self.sleep_until_unlocked(HANDOFF);
                // We have waited long enough: claim the next release at once.
                self.flags.fetch_or(HANDOFF, Ordering::Relaxed);
                start = P::now_ns();
                polls = 0;
                backoff = Backoff::new();
                continue;
            }
            backoff.snooze::<P>();
        }
    }

    /// Sleeps on the parking bucket until `locked` was seen 0 (or a spurious
    /// wake-up). Clears `drop_bits` from `flags` when setting `PARKED`.
    #[cold]
    pub(crate) fn sleep_until_unlocked(&self, drop_bits: u8) {
        let ticket = wait::park_prepare(self.addr());
        let _ = self
            .flags
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |f| {
                Some((f & !drop_bits) | PARKED)
            });
        // Pairs with `light_fence` in `unlock`: either we see the release
        // below, or the unlocker sees PARKED and wakes the bucket.
        P::heavy_fence();
        if self.locked.load(Ordering::Relaxed) != 0 {
            wait::park::<P>(ticket);
        }
    }

    /// MCS queueing with node `index`; returns holding the lock.
    fn lock_queued(&self, index: NodeIndex) {
        let node = P::node(index);
        node.reset();
        // AcqRel: Release publishes the reset above to our successor, Acquire
        // makes the predecessor's node (named by the old tail) valid to us.
        let prev = self.tail.swap(index.get(), Ordering::AcqRel);
        if let Some(prev) = NodeIndex::new(prev) {
            // Release pairs with the predecessor's Acquire load of `next`.
            P::node(prev)
                .next
                .store(u32::from(index.get()), Ordering::Release);
            Self::wait_for_head(node);
        }

        // Queue head: wait for the word waiter to finish, then become it.
        self.become_pending_as_head();

        // As the word waiter we no longer need the queue: pass head-ship on
        // now, so that our successor wakes up while we wait out the holder's
        // batch rather than after we took the lock (a wake-up can take a
        // scheduler tick when every CPU is busy).
        if self.tail.load(Ordering::Relaxed) != index.get()
            || self
                .tail
                .compare_exchange(index.get(), 0, Ordering::Relaxed, Ordering::Relaxed)
                .is_err()
        {
            let next = P::node(Self::wait_for_successor(node));
            // Release pairs with the successor's Acquire load in `wait_for_head`.
            if next.state.swap(NODE_HEAD, Ordering::Release) == NODE_PARKED {
                P::wake_one(&next.state);
            }
        }
        self.wait_as_pending();
    }

    /// Spins on our own node until the predecessor makes us head; sleeps on
    /// it after `NODE_SPINS`.
    fn wait_for_head(node: &QNode) {
        let mut spins = 0;
        loop {
            // Acquire pairs with the predecessor's Release swap.
            match node.state.load(Ordering::Acquire) {
                NODE_HEAD => return,
                NODE_PARKED => P::wait(&node.state, NODE_PARKED),
                _ if spins < NODE_SPINS => {
                    spins += 1;
                    P::relax();
                }
                _ => {
                    // WAITING -> PARKED; fails only if we just became head.
                    let _ = node.state.compare_exchange(
                        NODE_WAITING,
                        NODE_PARKED,
                        Ordering::Relaxed,
                        Ordering::Relaxed,
                    );
                }
            }
        }
    }

    /// Our successor swapped the tail but may not have linked itself yet.
    fn wait_for_successor(node: &QNode) -> NodeIndex {
        let mut backoff = Backoff::new();
        loop {
            // Acquire pairs with the successor's Release store of `next`.
            if let Some(next) = u16::try_from(node.next.load(Ordering::Acquire))
                .ok()
                .and_then(NodeIndex::new)
            {
                return next;
            }
            // The successor can be preempted between its swap and its store:
            // back off to yielding so it gets to run.
            backoff.snooze::<P>();
        }
    }

    /// The queue head takes `PENDING` once the current word waiter is done.
    /// That takes up to a batch, so the head spins (yielding the CPU when
    /// others need it) for two batches before it sleeps: a sleeping head
    /// would need a wake-up right when the lock changes hands.
    fn become_pending_as_head(&self) {
        let mut backoff = Backoff::new();
        let mut start = P::now_ns();
        let mut polls = 0u32;
        loop {
            let flags = self.flags.load(Ordering::Relaxed);
            if flags & PENDING == 0 {
                if self
                    .flags
                    .compare_exchange_weak(
                        flags,
                        flags | PENDING,
                        Ordering::Relaxed,
                        Ordering::Relaxed,
                    )
                    .is_ok()
                {
                    return;
                }
                continue;
            }
            polls += 1;
            if polls < HEAD_POLLS && P::now_ns().wrapping_sub(start) < 2 * BATCH_NS {
                backoff.snooze::<P>();
                continue;
            }
            // Sleep until the word waiter clears PENDING (it wakes the
            // bucket when it sees HEAD_PARKED).
            let ticket = wait::park_prepare(self.addr());
            // RMWs on `flags` are totally ordered: either the word waiter's
            // clearing fetch_and sees HEAD_PARKED and wakes us, or we see
            // PENDING already clear and do not sleep.
            let old = self.flags.fetch_or(HEAD_PARKED, Ordering::Relaxed);
            if old & PENDING != 0 {
                wait::park::<P>(ticket);
            }
            polls = 0;
            start = P::now_ns();
            backoff = Backoff::new();
        }
    }

    /// No queue node: poll the word, sleep on the bucket when it stays held.
    fn lock_unqueued(&self) {
        let mut backoff = Backoff::new();
        loop {
            if self.try_lock_fast() {
                return;
            }
            if backoff.steps() > 12 {
                self.sleep_until_unlocked(0);
                backoff = Backoff::new();
            } else {
                backoff.snooze::<P>();
            }
        }
    }

    #[cold]
    fn wake_parked(&self) {
        let old = self.flags.fetch_and(!PARKED, Ordering::Relaxed);
        if old & PARKED != 0 {
            wait::unpark_all::<P>(self.addr());
        }
    }

    /// Releases the lock: a Release store, then a check for sleepers.
    #[inline]
    fn release(&self) {
        // Release pairs with the next acquirer's Acquire cmpxchg.
        self.locked.store(0, Ordering::Release);
        // Pairs with `heavy_fence` in `sleep_until_unlocked`.
        P::light_fence();
        let flags = self.flags.load(Ordering::Relaxed);
        if flags & (PARKED | PENDING) != 0 || self.tail.load(Ordering::Relaxed) != 0 {
            self.release_contended(flags);
        }
    }

    /// A word waiter or a queue exists, or someone sleeps: wake sleepers,
    /// and end our batch once we have released `BATCH_OPS` times in a row
    /// with waiters present. The word waiter also ends it by time, but its
    /// clock only runs while it gets a CPU: on a busy machine it can wait a
    /// scheduler tick for one, and batch lengths would vary a hundredfold.
    #[inline]
    fn release_contended(&self, flags: u8) {
        // Also with a queue but no word waiter yet (the new head is still
        // waking up): the lock then waits for the head, at most a scheduler
        // tick. Letting the holder run on instead (counting but not ending
        // its batch) measured 1.4x the throughput at 16 threads on 2 cores
        // but per-thread op counts 0.2-0.3 apart (min/max) instead of 0.8.
        if flags & HANDOFF == 0 && P::count_batch(self.addr(), BATCH_OPS) {
            self.end_batch();
        }
        if flags & PARKED != 0 {
            self.wake_parked();
        }
    }

    #[cold]
    fn end_batch(&self) {
        P::restart_batch();
        self.flags.fetch_or(HANDOFF, Ordering::Relaxed);
    }
}

impl<P: Platform> Default for RawQSpinLock<P> {
    fn default() -> Self {
        Self::new()
    }
}

impl<P: Platform> core::fmt::Debug for RawQSpinLock<P> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("RawQSpinLock")
            .field("locked", &self.locked.load(Ordering::Relaxed))
            .field("flags", &self.flags.load(Ordering::Relaxed))
            .field("tail", &self.tail.load(Ordering::Relaxed))
            .finish()
    }
}

// SAFETY: `locked` goes 0 -> 1 only by a successful Acquire cmpxchg and
// 1 -> 0 only by the holder's Release store, so at most one guard exists per
// lock and critical sections are ordered. No waiter keeps a reference into
// the lock word after `lock` returns (nodes belong to the platform), so
// forgetting a guard only leaves the lock held, and moving or dropping a
// locked lock is sound.
unsafe impl<P: Platform> RawMutex for RawQSpinLock<P> {
    #[allow(clippy::declare_interior_mutable_const)]
    #[cfg(not(loom))]
    const INIT: Self = Self::new();
    #[allow(clippy::declare_interior_mutable_const)]
    #[cfg(loom)]
    const INIT: Self = panic!("use RawQSpinLock::new() under loom");

    type Guard = GuardSend;

    #[inline]
    fn lock(&self) -> GuardSend {
        if !self.try_lock_fast() {
            self.lock_slow();
        }
        GuardSend::new()
    }

    #[inline]
    fn try_lock(&self) -> Option<GuardSend> {
        self.try_lock_fast().then(GuardSend::new)
    }

    #[inline]
    unsafe fn unlock(&self, _guard: GuardSend) {
        self.release();
    }

    #[inline]
    fn is_locked(&self) -> bool {
        self.locked.load(Ordering::Relaxed) != 0
    }
}

// SAFETY: `unlock_fair` releases exactly like `unlock`; it only additionally
// raises HANDOFF, which restricts who may acquire next.
unsafe impl<P: Platform> RawMutexFair for RawQSpinLock<P> {
    /// Strict FIFO hand-off: if a word waiter exists, the lock is reserved
    /// for it (HANDOFF) before release, so no newcomer can take it first.
    #[inline]
    unsafe fn unlock_fair(&self, _guard: GuardSend) {
        if self.flags.load(Ordering::Relaxed) & PENDING != 0 {
            self.flags.fetch_or(HANDOFF, Ordering::Relaxed);
        }
        self.release();
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn is_four_bytes() {
        assert_eq!(core::mem::size_of::<RawQSpinLock>(), 4);
        assert_eq!(core::mem::align_of::<RawQSpinLock>(), 4);
    }

    #[test]
    fn lock_unlock_try_lock() {
        let lock = QSpinLock::new(5);
        {
            let mut g = lock.lock();
            *g += 1;
            assert!(lock.is_locked());
            assert!(lock.try_lock().is_none());
        }
        assert!(!lock.is_locked());
        assert_eq!(*lock.try_lock().unwrap(), 6);
        let g = lock.lock();
        lock_api::MutexGuard::unlock_fair(g);
        assert!(!lock.is_locked());
    }

    #[test]
    fn unlock_fair_reserves_for_the_word_waiter() {
        let raw: RawQSpinLock = RawQSpinLock::new();
        let g = raw.lock();
        // Simulate a word waiter: PENDING set.
        raw.flags.fetch_or(PENDING, Ordering::Relaxed);
        // SAFETY: `g` came from `raw.lock()` above.
        unsafe { raw.unlock_fair(g) };
        assert!(!raw.is_locked());
        assert!(
            raw.try_lock().is_none(),
            "a fair unlock must keep newcomers out"
        );
        assert!(raw.try_lock_word(), "the word waiter can take it");
        raw.flags.fetch_and(!(PENDING | HANDOFF), Ordering::Relaxed);
        raw.release();
    }

    #[test]
    fn contended_counts_are_exact() {
        use std::sync::Arc;
        let threads = if cfg!(miri) { 3 } else { 8 };
        let iters = if cfg!(miri) { 50 } else { 20_000 };
        let lock = Arc::new(QSpinLock::new(0u64));
        let handles: Vec<_> = (0..threads)
            .map(|_| {
                let lock = lock.clone();
                std::thread::spawn(move || {
                    for _ in 0..iters {
                        *lock.lock() += 1;
                    }
                })
            })
            .collect();
        for h in handles {
            h.join().unwrap();
        }
        assert_eq!(*lock.lock(), threads * iters);
        // SAFETY: only reads the state word; the lock is not used through it.
        let raw = unsafe { lock.raw() };
        assert_eq!(raw.flags.load(Ordering::Relaxed) & (PENDING | HANDOFF), 0);
        assert_eq!(raw.tail.load(Ordering::Relaxed), 0);
    }
}

/// Loom models that need the lock's internals: they wait until a waiter is
/// really asleep on the word before releasing, so the sleep/wake protocol
/// (PARKED with the fence pair, HEAD_PARKED with the flags RMW order) is
/// explored, not just spinning. A lost wake-up is a loom deadlock. Run:
/// `RUSTFLAGS="--cfg loom" cargo test -p scalelock --lib --release qspinlock::loom_models`
#[cfg(all(test, loom))]
mod loom_models {
    use super::*;
    use crate::platform::LoomPlatform;
    use loom::sync::Arc;
    use loom::thread;

    type Lock = RawQSpinLock<LoomPlatform>;

    fn wait_for_flag(lock: &Lock, bit: u8) {
        // SeqCst: a test-side observation only; the model's verdict does not
        // depend on it pairing with anything.
        while lock.flags.load(Ordering::SeqCst) & bit == 0 {
            thread::yield_now();
        }
    }

    fn model(f: impl Fn() + Sync + Send + 'static) {
        // These models run long sleep/poll loops: one preemption keeps them
        // to seconds while still interleaving the release with every step of
        // the sleeper's PARKED / fence / re-check / sleep sequence.
        let mut builder = loom::model::Builder::new();
        builder.preemption_bound = Some(1);
        builder.check(f);
    }

    /// The word waiter sleeps (PARKED) while the holder releases with a plain
    /// store: the light/heavy fence pair must never lose the wake-up.
    #[test]
    fn word_waiter_sleep_and_wake() {
        model(|| {
            let lock = Arc::new(Lock::new());
            let g = lock.lock();
            let l2 = lock.clone();
            let t = thread::spawn(move || {
                let g = l2.lock();
                // SAFETY: `g` came from `lock()` above.
                unsafe { l2.unlock(g) };
            });
            wait_for_flag(&lock, PARKED);
            // SAFETY: `g` came from `lock()` above.
            unsafe { lock.unlock(g) };
            t.join().unwrap();
            assert!(!lock.is_locked());
        });
    }

    /// The queue head sleeps (HEAD_PARKED) until the word waiter takes the
    /// lock and clears PENDING.
    #[test]
    fn queue_head_sleep_and_wake() {
        model(|| {
            let lock = Arc::new(Lock::new());
            let g = lock.lock();
            let waiters: Vec<_> = (0..2)
                .map(|_| {
                    let l = lock.clone();
                    thread::spawn(move || {
                        let g = l.lock();
                        // SAFETY: `g` came from `lock()` above.
                        unsafe { l.unlock(g) };
                    })
                })
                .collect();
            wait_for_flag(&lock, HEAD_PARKED);
            // SAFETY: `g` came from `lock()` above.
            unsafe { lock.unlock(g) };
            for t in waiters {
                t.join().unwrap();
            }
            assert!(!lock.is_locked());
        });
    }
}
