//! `RawQRwLock`: an 8-byte queued reader-writer lock.
//!
//! After Linux's `kernel/locking/qrwlock.c` (seed 001): a 32-bit count word
//! that readers and writers update with one atomic each on their fast paths,
//! plus a [`RawQSpinLock`](crate::RawQSpinLock)'s core (`wait_lock`) on which every *contended* acquirer
//! queues, so that contended readers and writers are served in arrival order.
//!
//! # The count word
//!
//! ```text
//!  bit 31 ................ 7   6..5     4        3       2         1          0
//! +--------------------------+------+---------+-------+--------+-----------+----------+
//! | reader count (1 << 7)    | TURN | HANDOFF | QUIET | PARKED | W_WAITING | W_LOCKED |
//! +--------------------------+------+---------+-------+--------+-----------+----------+
//! ```
//!
//! | bits | meaning | set by | cleared by |
//! | --- | --- | --- | --- |
//! | `W_LOCKED` | a writer holds the lock | a writer's `cmpxchg` (fast path: `0` or `QUIET -> W_LOCKED`; slow path: `W_WAITING -> W_LOCKED`, or a free word `-> W_LOCKED` by the `wait_lock` holder) | the writer's `fetch_sub` (unlock) or `downgrade` |
//! | `W_WAITING` | the `wait_lock` holder is a writer waiting for the lock to drain: new readers must queue | the writer holding `wait_lock` | the same writer, by the `cmpxchg` that takes `W_LOCKED` |
//! | `PARKED` | the `wait_lock` holder sleeps in `Platform::wait` on this word | the `wait_lock` holder only | the same thread only |
//! | `QUIET` | the `wait_lock` holder waits out the running threads' batch (see "Fair and fast: batches"): fast paths still take the lock | the `wait_lock` holder, on starting to wait | the same thread, by the RMW that claims the lock (or, giving up at its deadline, that leaves) |
//! | `HANDOFF` | a fair unlock ended the batch: fast paths must not take the lock; only ever set together with `QUIET` | a fair unlock, in its releasing RMW (only while `QUIET` is set) | the `QUIET` owner, in the same RMW that clears `QUIET` |
//! | `TURN` | the number (1 to 3) of the turn the last claimant took (see "Turns"): writers other than its holder queue; 0: no turn | the `wait_lock` holder, in the RMW that claims the lock (as a reader or a writer) | the next claim (which sets the next number), an upgrade (the RMW that sets `W_WAITING`, or its `cmpxchg` to `W_LOCKED`), or any writer taking `W_LOCKED` from a word of nothing but `TURN` when nobody waits for `wait_lock`; a timed claimant or upgrader that gives up puts back the number its claim (or its `W_WAITING`) replaced, and so does an upgrade that steps back from `W_LOCKED` (`undo_upgrade`, `PerCpuRwLock`'s fast readers still inside) |
//! | count | readers holding the lock, plus readers that are about to find out they must queue (they undo their increment) | `fetch_add` by readers | `fetch_sub` by readers |
//!
//! Bit 31 (`READER_OVERFLOW`) is the top of the reader count: readers refuse
//! to take the lock once 2^24 read guards exist (only reachable by forgetting
//! guards), so the count can never wrap into the writer bits. An idle lock
//! may still carry the last `TURN`.
//!
//! # Invariants
//! 1. At most one thread waits on the word itself: the `wait_lock` holder.
//!    Everyone else who is contended sleeps in `wait_lock`'s MCS queue, on a
//!    cache line of its own. So `PARKED` has a single owner and a waker
//!    calls `wake_one`.
//! 2. `W_WAITING` is only set while its writer holds `wait_lock`, so no
//!    reader can join the count through the slow path while it is set.
//!    Likewise `QUIET` is only set while
//!    its owner holds `wait_lock` and has not claimed the lock yet; so the
//!    word never carries `QUIET` together with `W_WAITING` or `PARKED`, and
//!    an upgradable reader (which holds `wait_lock`) never sees either.
//!    `HANDOFF` is only set while `QUIET` is, and cleared with it.
//!    `TURN` never changes under another thread's `W_WAITING`: the RMW
//!    that sets `W_WAITING` clears it, and every other RMW that sets or
//!    clears it finds `W_WAITING` clear (or is the waiter's own final
//!    `cmpxchg`). So a writer or upgrader that waits for an exact word is
//!    not disturbed.
//! 3. `W_LOCKED` is only taken when no reader and no writer is in the word:
//!    from 0 (fast path), from a word of nothing but `QUIET` and `TURN`
//!    (the turn's holder, or past a quiet waiter), or from the word the
//!    `wait_lock` holder saw with nothing but its own bits and `TURN` (slow
//!    path): a writer excludes everyone.
//! 4. A reader holds the lock iff its increment is in the count and it saw
//!    `W_LOCKED` clear *after* the increment (fast path: in the value its own
//!    `fetch_add` returned; slow path: by waiting for it). Once a reader's
//!    increment is in the count, no writer can take `W_LOCKED` (invariant 3),
//!    so readers and a writer exclude each other.
//!
//! # Paths (count the cache lines)
//! - **Read lock, fast**: one `fetch_add(ONE_READER)` on the count word; if
//!   no writer bit was set, done (`QUIET` does not stop it, see "Fair and
//!   fast: batches"). No writer waits, so readers never block each other. **Unlock**: one `fetch_sub`.
//! - **Write lock, fast**: a load of the word and, if it was 0, one
//!   `cmpxchg(0 -> W_LOCKED)`; a word with anything in it goes to the
//!   slow path at once, where one `cmpxchg` takes `QUIET -> QUIET |
//!   W_LOCKED` while a waiter waits out a batch, and `TURN -> TURN |
//!   W_LOCKED` for the turn's holder (see "Turns"). (Without the look, each
//!   of those writes paid a failing `cmpxchg` first: two locked RMWs instead
//!   of one. The look costs an uncontended write nothing measurable.)
//!   **Unlock**: one
//!   `fetch_sub(W_LOCKED)` (a plain byte store in Linux; readers add to the
//!   same word concurrently, and Rust has no mixed-size atomics, so we need
//!   an RMW here, as parking_lot and std do).
//! - **Optimistic spin** (both slow paths, first): a critical section is
//!   usually shorter than queueing, which costs two RMWs on `wait_lock` and,
//!   for a reader, an undo and a redo on the count word (each a transfer of
//!   the line every acquirer writes). So a contended acquirer first spins a
//!   few hundred ns on *loads* of the count word. A reader that saw only
//!   `W_LOCKED` keeps its increment (no other writer can enter, invariant 3)
//!   and holds the read lock once it sees `W_LOCKED` clear; a writer
//!   `cmpxchg`es `0 -> W_LOCKED` when it sees the word 0. Both stop spinning
//!   as soon as a writer waits (`W_WAITING` set; a writer also stops when
//!   anybody holds `wait_lock`), so they pass no queued writer and writers
//!   never starve.
//! - **Read lock, slow** (a writer holds or waits): undo the increment, queue
//!   on `wait_lock`, wait out the batch (below), then increment again (in the
//!   RMW that clears `QUIET`) and wait for `W_LOCKED` to clear,
//!   and release `wait_lock` so the next queued waiter can come in. A stream
//!   of queued readers thus passes through one after another and then runs
//!   concurrently; a writer queued behind them waits for them to drain.
//! - **Write lock, slow**: queue on `wait_lock`, wait out the batch, then in
//!   one RMW that clears `QUIET` take `W_LOCKED` if the word is
//!   free, or else set `W_WAITING` (newcomer readers now queue behind us, so
//!   writers never starve), wait until the word is exactly `W_WAITING`,
//!   `cmpxchg` it to `W_LOCKED`; release `wait_lock`.
//!
//! # Fair and fast: batches
//! Handing the lock to the waiter at every release costs a transfer of the
//! count word's line per operation (at 2 threads and 50% writes, every op).
//! So, as in `qspinlock`, the running threads keep the lock for a bounded
//! *batch* while the one thread waiting on the word stays off its line:
//! - The `wait_lock` holder sets `QUIET` and then polls the word only now
//!   and then (`QuietPoll`: doubling spun intervals, then timed sleeps).
//!   Fast paths ignore `QUIET` (a writer's second `cmpxchg` takes
//!   `QUIET -> QUIET | W_LOCKED`), so the running threads go on at
//!   uncontended speed.
//! - It claims the lock when the batch ends: after the tuning table's
//!   `batch_ns` (or `batch_polls` polls where the platform has no clock,
//!   see `BatchClock`), or at the first poll that finds the lock free and
//!   still free after `settle_relaxes` relaxes (its users are gone; a
//!   running holder re-takes a free lock sooner). A plain unlock wakes
//!   nobody (it cannot know that nobody re-takes the lock), so once the
//!   polls have grown into sleeps a lock its last user left stays free
//!   until the next poll, at the latest the batch's end (`batch_ns`, about
//!   a millisecond; a hand-over between two threads that each leave the
//!   lock for longer than the polls' spins runs at that pace); a fair
//!   unlock hands over at once (below). Its claim is one RMW that clears
//!   `QUIET` and sets `W_WAITING` / its reader increment as above; from
//!   then on the fast paths fail and the running threads queue on
//!   `wait_lock` behind it.
//! - The batch is bounded by the waiter's clock alone, so releases stay one
//!   RMW and a lock freed by the next owner is never written. A waiter that
//!   gets no CPU lets the batch run on until it is scheduled; then its
//!   claim is one RMW, which the running threads cannot outpace for long.
//! - A fair unlock (`RawRwLockFair`) that finds `QUIET` ends the batch at
//!   once: its releasing RMW sets `HANDOFF`, after which every fast path
//!   fails (the running threads queue on `wait_lock` behind the waiter),
//!   and it wakes the waiter's quiet sleep through the parking bucket (a
//!   static word, by address: the lock itself is not touched after the
//!   RMW). The waiter's claim clears `QUIET` and `HANDOFF` together.
//!
//! Bypass is bounded: only fast-path acquirers pass the waiter, and only
//! while `QUIET` is set (one batch); contended acquirers queue on
//! `wait_lock` in arrival order. So every queued thread gets the lock within
//! (queue length x batch), and writers still never starve.
//!
//! # Turns: equal shares when threads outnumber CPUs
//! A batch bounds how long a queued thread waits, not how long the threads
//! it lets pass keep running. With more threads than CPUs, where the
//! threads that run are the few that are not asleep in the queue, two
//! things made some threads run several batches for every one of others
//! (per-thread operation counts over a run differed threefold):
//! - A reader's claim stops nobody (readers share), and a writer's claim
//!   stops only the threads that try to enter while it drains: a running
//!   thread that was between two acquisitions just went on, next to the
//!   claimant, for another batch, and another.
//! - A thread woken to take its turn (from the `wait_lock` queue, or from
//!   its timed sleep at the end of the batch) is often queued on the busy
//!   CPU of the running thread and waits a scheduler tick (milliseconds)
//!   for it, while the running thread's batch goes on.
//!
//! So every claim takes a *turn* (`TURN`, numbered 1, 2, 3, 1, ...): the
//! claimant records the lock and the number in thread-local storage
//! ([`wait::batch`](crate::wait::batch)'s `ClaimedTurn`). While `TURN` is
//! set, a writer's fast `cmpxchg(0 -> W_LOCKED)` fails, and in its slow
//! path only the turn's holder takes the lock past `TURN` (and `QUIET`);
//! any other writer queues on `wait_lock`, so the threads that ran before
//! the claim leave at their next write. (Readers do not look at `TURN`:
//! they pay nothing, and a thread that only reads has not got in a writer's
//! way.) The holder reads the clock on one write in
//! `qrw_turn_clock_writes`; once its turn has lasted `qrw_turn_ns` and
//! someone waits for `wait_lock`, it leaves too: wakes the quiet waiter
//! (which finds the lock free and claims it) and yields its CPU once, then
//! queues. A claimant that hands `wait_lock` to a sleeping waiter yields
//! its CPU once as well (as `qspinlock`'s hand-offs do). When nobody waits
//! for `wait_lock`, the turn serves no one: the next write, the holder's
//! or anyone's, ends it (the lock is then as if no turn had been taken; a
//! rare writer of a read-mostly lock does not queue behind a stale turn);
//! a later claim takes a new one.
//!
//! The turn costs its holder's writes a call and a thread-local lookup
//! (their `cmpxchg` is the one of the slow path: the fast path only looks),
//! and the threads that leave at a claim a trip through the queue; the
//! docs/measurements.md gives the measured figures.
//!
//! # Timed acquisitions (`RawRwLockTimed`, `RawRwLockUpgradeTimed`)
//! A timed acquirer waits as an untimed one, with every wait bounded by its
//! deadline: `wait_lock` is taken with the queued spinlock's own timed
//! acquisition (a waiter that gives up leaves its queue whole, see
//! `qspinlock`), the batch wait ends at the deadline, and the wait on the
//! word gives up there. Giving up undoes exactly what the acquirer had set,
//! all of which only the `wait_lock` holder sets or clears (invariants 1
//! and 2): `QUIET` and `HANDOFF` (in the RMW that would have claimed the
//! lock), `W_WAITING` and its own `PARKED` (one RMW, which also puts back
//! the `TURN` that setting `W_WAITING` ended), or, after a reader's claim,
//! its `PARKED` and the `TURN` its claim replaced, while it still holds
//! `wait_lock`; then it releases `wait_lock`, and a reader takes its
//! increment back out (as an undo: `fetch_sub`, waking a parked waiter if
//! due; after `wait_lock`, which the lock may not outlive once the
//! increment is gone). The turn is the claimant's (`ClaimedTurn`) only
//! once it holds the lock. Readers that queued behind its `W_WAITING`
//! proceed once they get `wait_lock`.
//! (parking_lot's #465 was a timed-out writer clearing its parked bit while
//! a concurrent unlock could clear it too; here wakers never clear
//! `PARKED`.) A timed `try_upgrade_for` that gives up is still the
//! upgradable reader, so it still holds `wait_lock`: plain readers that
//! queued there behind its `W_WAITING` wait until that upgradable read
//! ends (readers that come after the give-up enter beside it as usual).
//! An upgradable reader whose timed upgrade failed must therefore not wait
//! for another reader of the same lock. The untimed paths pass
//! `Deadline::NEVER`, which never reads the clock (their batches and turns
//! still do).
//!
//! # Waiting (16 threads on 2 cores)
//! Once it has claimed the lock (after its quiet wait, see above), the one
//! thread waiting on the word spins with [`Backoff`] for `qrw_spin_steps`
//! steps (which never yield, and are too few for `Backoff`'s timed sleeps),
//! then sets `PARKED` and sleeps with `Platform::wait` on the count word
//! itself (a futex on std), which gives the CPU to a preempted holder.
//! Whoever makes its condition true wakes exactly it:
//! - a writer's unlock or downgrade, when the old word had `PARKED`;
//! - a reader's unlock (or undo) that leaves at most one reader, when the old
//!   word had `PARKED` (a writer waits for zero readers; an upgrader for one,
//!   itself).
//!
//! No lost wake-up: the waiter sets `PARKED` with a `cmpxchg` from the very
//! value in which its condition was false, then sleeps while the word equals
//! that value plus `PARKED`. The releasing RMW is ordered after that
//! `cmpxchg` in the word's modification order (so it sees `PARKED` and wakes)
//! or before it (so the `cmpxchg` fails and the waiter re-checks); and since
//! the release changes the word, a `wait` that starts after it returns at
//! once. Wakers never clear `PARKED` (its owner does), so a waker touches the
//! lock with a single RMW: after it only the wake syscall names the address,
//! as in std's futex locks, and a lock freed by the next owner is never
//! written.
//!
//! Everyone else queues on `wait_lock`, which spins on its own node and then
//! parks (see `qspinlock`): a preempted queued waiter stalls nobody.
//!
//! # Memory orderings
//! - Acquiring (reader `fetch_add`, writer `cmpxchg`, and the waiting loop's
//!   load that sees the condition true) is Acquire; releasing (reader
//!   `fetch_sub`, writer `fetch_sub`, `downgrade`'s `fetch_add`) is Release.
//!   Every write to the word is an RMW, so each release heads a release
//!   sequence that reaches every later acquirer: a writer synchronizes with
//!   all readers before it, and readers with the writer before them.
//! - Setting (and, giving up, clearing) `W_WAITING`, `PARKED`, `QUIET`
//!   and `TURN` is Relaxed: it publishes no data (undoing a reader
//!   increment is a reader's release, Release, though an undo publishes
//!   nothing either); `wait_lock`
//!   (Acquire/Release) orders the queued waiters among themselves. Claims
//!   that take the lock (the reader's increment, the writer's `W_LOCKED`) are
//!   Acquire `cmpxchg`s; all of them are RMWs, so release sequences pass
//!   through them.
//!
//! # Upgradable reads
//! An upgradable reader holds `wait_lock` *and* a reader count: other
//! upgradable readers and contended writers queue behind it, plain readers
//! still enter. `upgrade` is the writer slow path with our own reader counted:
//! set `W_WAITING`, wait for the word to be `W_WAITING | ONE_READER`, then
//! `cmpxchg` to `W_LOCKED`. Downgrading *to* an upgradable lock would need to
//! take `wait_lock` while holding `W_LOCKED`, which deadlocks against a queued
//! reader holding `wait_lock` (it waits for `W_LOCKED` to clear), so
//! `RawRwLockUpgradeDowngrade` is not implemented: its
//! `downgrade_to_upgradable` is exactly that. (Its other half, an
//! upgradable read down to a plain one, would be safe: release `wait_lock`,
//! keep the reader count; lock_api only offers it in the same trait.)
//!
//! # Caveat: recursive reads
//! As in Linux and parking_lot's `read` (not `read_recursive`), a thread
//! that holds a read lock and takes another may deadlock if a writer queued
//! in between: the writer waits for the first read lock, the second waits
//! behind the writer.

use core::marker::PhantomData;

use lock_api::{GuardSend, RawRwLock, RawRwLockDowngrade, RawRwLockUpgrade};

use crate::class::{Access, ClassRef, LockKind};
use crate::events::Events;
use crate::hook::{self, Held, Pending};
use crate::platform::{DefaultPlatform, Platform};
use crate::qspinlock::QSpinCore;
use crate::sync::atomic::{AtomicU32, Ordering};
use crate::wait::batch::{self, Turn};
use crate::wait::{Backoff, BatchClock, Deadline, QuietPoll, TUNING, parking};

/// A writer holds the lock.
const W_LOCKED: u32 = 1 << 0;
/// The `wait_lock` holder is a writer waiting for the lock: readers queue.
const W_WAITING: u32 = 1 << 1;
/// The `wait_lock` holder sleeps on the count word.
const PARKED: u32 = 1 << 2;
/// The `wait_lock` holder waits quietly while running threads finish a
/// batch: fast paths may still take the lock.
const QUIET: u32 = 1 << 3;
/// A fair unlock ended the batch: fast paths must not take the lock (only
/// set with `QUIET`).
const HANDOFF: u32 = 1 << 4;
/// The number of the last claim's turn (two bits; 0: none): writers other
/// than the turn's holder queue (see "Turns" in the module docs).
const TURN: u32 = 3 << 5;
/// Turn 1.
const TURN_ONE: u32 = 1 << 5;
/// A reader that sees one of these must take the slow path.
const W_MASK: u32 = W_LOCKED | W_WAITING;
/// One reader in the count.
const ONE_READER: u32 = 1 << 7;
/// The reader count.
const READERS_MASK: u32 = !(ONE_READER - 1);
/// Top bit of the reader count: at 2^24 readers new readers refuse (panic).
const READER_OVERFLOW: u32 = 1 << 31;

#[inline]
const fn readers(word: u32) -> u32 {
    (word & READERS_MASK) / ONE_READER
}

/// The turn after the one in `word` (1, 2, 3, 1, ...), in place.
#[inline]
const fn next_turn(word: u32) -> u32 {
    ((word & TURN) / TURN_ONE % 3 + 1) * TURN_ONE
}

/// The lock itself, without statistics or lockdep: the count word and the
/// queue lock described in the module documentation. [`RawQRwLock`] is this
/// plus a lock class and the hooks; `PerCpuRwLock`'s underlying lock is the
/// core, so that one acquisition is counted once, under its class.
#[repr(C, align(4))]
pub(crate) struct QRwCore<P: Platform = DefaultPlatform> {
    /// Reader count and writer bits; see the module documentation.
    cnts: AtomicU32,
    /// Contended acquirers queue here, in arrival order.
    wait_lock: QSpinCore<P>,
    _platform: PhantomData<fn() -> P>,
}

/// A reader-writer lock protecting a `T`, built on [`RawQRwLock`].
pub type QRwLock<T> = lock_api::RwLock<RawQRwLock, T>;
/// A shared guard of a [`QRwLock`].
pub type QRwLockReadGuard<'a, T> = lock_api::RwLockReadGuard<'a, RawQRwLock, T>;
/// The exclusive guard of a [`QRwLock`].
pub type QRwLockWriteGuard<'a, T> = lock_api::RwLockWriteGuard<'a, RawQRwLock, T>;
/// The upgradable guard of a [`QRwLock`].
pub type QRwLockUpgradableReadGuard<'a, T> = lock_api::RwLockUpgradableReadGuard<'a, RawQRwLock, T>;

/// The guard state of an upgradable read: stands for the `wait_lock` it
/// holds (the queue lock is a bare `QSpinCore`, whose acquisitions are not
/// counted on their own).
type WaitGuard<P> = PhantomData<fn() -> P>;

impl<P: Platform> QRwCore<P> {
    /// An unlocked lock.
    #[cfg(not(loom))]
    pub(crate) const fn new() -> Self {
        Self {
            cnts: AtomicU32::new(0),
            wait_lock: QSpinCore::new(),
            _platform: PhantomData,
        }
    }

    /// An unlocked lock.
    #[cfg(loom)]
    pub(crate) fn new() -> Self {
        Self {
            cnts: AtomicU32::new(0),
            wait_lock: QSpinCore::new(),
            _platform: PhantomData,
        }
    }

    /// One more read by a thread that already read-holds the lock (a
    /// recursive read of `PerCpuRwLock`): joins the count without looking
    /// at waiting writers or batches, which wait for our first read anyway.
    #[inline]
    pub(crate) fn lock_shared_recursive(&self) {
        // Acquire: nothing to pair with beyond our own first read; kept for
        // symmetry with `lock_shared`.
        let old = self.cnts.fetch_add(ONE_READER, Ordering::Acquire);
        debug_assert_eq!(old & W_LOCKED, 0, "a recursive read with a writer inside");
        self.check_reader_overflow(old);
    }

    /// A read by a thread that may already read-hold the lock (it holds
    /// reads of `PerCpuRwLock`s it did not record by lock): joins the
    /// count past waiting writers and batches, as `lock_shared_recursive`,
    /// unless a writer is inside or the count is full; then it takes its
    /// increment back and returns false (the thread holds no read of this
    /// lock, invariant 4, and may wait as anyone).
    #[inline]
    pub(crate) fn try_lock_shared_past_waiters(&self) -> bool {
        // Acquire pairs with the Release unlock of the last writer.
        let old = self.cnts.fetch_add(ONE_READER, Ordering::Acquire);
        if old & (W_LOCKED | READER_OVERFLOW) == 0 {
            return true;
        }
        self.reader_leave();
        false
    }

    /// Removes one reader (a release or an undo) and wakes the word waiter
    /// if it may now proceed.
    #[inline]
    fn reader_leave(&self) {
        // Release pairs with the Acquire of the next writer (its cmpxchg or
        // its waiting load): our reads happen before its writes.
        let old = self.cnts.fetch_sub(ONE_READER, Ordering::Release);
        // A writer waits for 0 readers, an upgrader for 1 (itself).
        if old & PARKED != 0 && readers(old) <= 2 {
            self.wake_waiter();
        }
    }

    /// Releases one read lock fairly: as `reader_leave`, but a waiter that
    /// waits out a batch (`QUIET`) gets the lock next (`HANDOFF`).
    pub(crate) fn reader_leave_fair(&self) {
        let old = self.release_fair(ONE_READER);
        if old & PARKED != 0 && readers(old) <= 2 {
            self.wake_waiter();
        }
    }

    /// Whether a contended acquirer queues behind the one that holds
    /// `wait_lock` (a snapshot): besides the waiter that may wait out a
    /// batch, another thread is stuck.
    #[inline]
    pub(crate) fn queued_behind_waiter(&self) -> bool {
        self.wait_lock.has_waiter()
    }

    /// Releases the write lock fairly (see `release_fair`).
    pub(crate) fn unlock_exclusive_fair(&self) {
        let old = self.release_fair(W_LOCKED);
        if old & PARKED != 0 {
            self.wake_waiter();
        }
    }

    /// The releasing RMW of a fair unlock: subtracts `held` (`W_LOCKED` or
    /// `ONE_READER`) and, if a waiter waits out a batch (`QUIET`), sets
    /// `HANDOFF` in the same RMW and wakes its quiet sleep (through the
    /// static parking bucket, by address: the lock is not touched after the
    /// RMW). Returns the old word.
    fn release_fair(&self, held: u32) -> u32 {
        // Taken before the RMW: after it the lock may be freed.
        let addr = self.addr();
        // Release pairs with the next acquirer's Acquire, as in the unfair
        // releases; an RMW, so release sequences carry on.
        let old = self
            .cnts
            .fetch_update(Ordering::Release, Ordering::Relaxed, |v| {
                let handoff = if v & QUIET != 0 { HANDOFF } else { 0 };
                Some((v - held) | handoff)
            })
            .unwrap_or_else(|v| v);
        if old & QUIET != 0 {
            parking::unpark_all::<P>(addr);
        }
        old
    }

    #[inline]
    fn addr(&self) -> usize {
        self as *const Self as usize
    }

    /// The `wait_lock` holder, before it claims the lock: sets `QUIET` and
    /// waits, polling the word only now and then, while running threads
    /// keep using the lock, until the batch is over (`wait::batch`, or a
    /// fair unlock's `HANDOFF`), the lock stays `free` for `settle_relaxes`
    /// (its users are gone), or `deadline` passed. Returns the last word
    /// seen, with `QUIET` (ours) still set.
    #[cold]
    fn wait_batch(&self, free: impl Fn(u32) -> bool, deadline: Deadline, ev: Events) -> u32 {
        debug_assert_eq!(self.cnts.load(Ordering::Relaxed) & QUIET, 0);
        // Each look at the word comes after a parking ticket (the parking
        // protocol), and a sleep uses the ticket of the last look: a
        // wake-up after that look (a fair unlock's `HANDOFF`, or a turn's
        // holder whose turn is over, which leaves the lock free without a
        // bit to see) ends the sleep at once, and what a waker did before
        // the ticket, the look saw. (With the ticket taken after the look,
        // such a wake-up in between went unseen and we slept the rest of
        // a poll, up to the batch.)
        let mut ticket = parking::prepare(self.addr());
        let mut v = self.cnts.fetch_or(QUIET, Ordering::Relaxed) | QUIET;
        let mut batch = BatchClock::start::<P>();
        let mut quiet = QuietPoll::new();
        loop {
            if v & HANDOFF != 0 {
                // A fair unlock ended the batch for us. Checked before
                // `free`: the lock it left is usually free, and fast paths
                // fail from now on, so there is nothing to settle.
                ev.handoff();
                return v;
            }
            if free(v) {
                for _ in 0..TUNING.settle_relaxes {
                    P::relax();
                }
                v = self.cnts.load(Ordering::Relaxed);
                if free(v) {
                    if v & HANDOFF != 0 {
                        // A fair unlock came while we settled.
                        ev.handoff();
                    }
                    return v;
                }
            }
            let Some(rest) = batch.remaining_ns::<P>(TUNING.batch_ns, TUNING.batch_polls) else {
                // We end the batch: our caller claims the lock next.
                ev.batch_end();
                return v;
            };
            if deadline.passed::<P>() {
                return v;
            }
            // Stay off the line the running threads write, for the rest of
            // the batch at most (a sleep cut short, by a wake-up meant for
            // another lock of the parking bucket, does not make the next
            // one outlast the batch).
            let left = deadline.remaining_ns::<P>();
            quiet.wait_with::<P>(|ns| {
                parking::park_timeout::<P>(ticket, ns.min(rest).min(left));
            });
            ticket = parking::prepare(self.addr());
            v = self.cnts.load(Ordering::Relaxed);
        }
    }

    /// Releases `wait_lock` after our claim; if that handed it to its
    /// word waiter, which was asleep, gives the woken thread our CPU once: a
    /// woken thread is often queued on the waker's CPU, where it would wait
    /// a scheduler tick while we run our turn, and the turn after ours
    /// would start that much later. (Where it found an idle CPU, this
    /// returns at once.)
    #[inline]
    fn release_wait_lock_after_claim(&self) {
        if self.wait_lock.release(false) {
            P::yield_now();
        }
    }

    /// Wakes the single thread that may sleep on the count word. Only the
    /// address is used: the lock may already be free, and even freed.
    #[cold]
    fn wake_waiter(&self) {
        P::wake_one(&self.cnts);
    }

    /// The `wait_lock` holder waits until `done(word)`; returns that word.
    /// Spins with backoff, then sleeps on the word with `PARKED` set. `None`
    /// once `deadline` passed (`PARKED` may be left set: it is ours).
    #[cold]
    fn wait_word(&self, done: impl Fn(u32) -> bool, deadline: Deadline, ev: Events) -> Option<u32> {
        let mut backoff = Backoff::new();
        loop {
            // Acquire pairs with the Release RMW that made `done` true.
            let v = self.cnts.load(Ordering::Acquire);
            if done(v) {
                return Some(v);
            }
            if deadline.passed::<P>() {
                return None;
            }
            if backoff.steps() < TUNING.qrw_spin_steps {
                backoff.snooze::<P>();
                continue;
            }
            // Set PARKED from the very value we judged: a release after this
            // cmpxchg sees PARKED; one before it makes the cmpxchg fail.
            if v & PARKED == 0
                && self
                    .cnts
                    .compare_exchange_weak(v, v | PARKED, Ordering::Relaxed, Ordering::Relaxed)
                    .is_err()
            {
                continue;
            }
            ev.park();
            deadline.wait::<P>(&self.cnts, v | PARKED);
            // Spurious: not done yet (we sleep again, or the deadline
            // passed).
            ev.wake(!done(self.cnts.load(Ordering::Relaxed)));
        }
    }

    /// Holding `wait_lock`, with our increment in the count: wait for the
    /// writer (if any) to leave. True holding a read lock; false once
    /// `deadline` passed, with our increment still in the count and our
    /// `PARKED` cleared (the caller undoes the increment).
    #[inline]
    fn wait_writer_exit(&self, old: u32, deadline: Deadline, ev: Events) -> bool {
        debug_assert_eq!(old & W_WAITING, 0, "W_WAITING needs wait_lock");
        if old & W_LOCKED == 0 {
            return true;
        }
        let done = self.wait_word(|v| v & W_LOCKED == 0, deadline, ev);
        if done.is_none_or(|v| v & PARKED != 0) {
            // We own PARKED (invariant 1) and are done sleeping.
            self.cnts.fetch_and(!PARKED, Ordering::Relaxed);
        }
        done.is_some()
    }

    /// Holding `wait_lock` with `W_WAITING` set and `own` (0 or
    /// `ONE_READER`) in the count: wait for everyone else to leave, then
    /// take `W_LOCKED` (clearing `W_WAITING`, `PARKED` and `own`; setting
    /// `turn`, 0 or our new `TURN`). False once `deadline` passed:
    /// `W_WAITING` and `PARKED` (ours) are cleared again, `own` stays, and
    /// `TURN` is `replaced` again (the turn that the RMW which set
    /// `W_WAITING` ended), as if we had never come.
    fn take_from_waiting(
        &self,
        own: u32,
        turn: u32,
        replaced: u32,
        deadline: Deadline,
        ev: Events,
    ) -> bool {
        loop {
            let Some(v) = self.wait_word(|v| v & !PARKED == W_WAITING | own, deadline, ev) else {
                // Only we (the wait_lock holder) set or clear them, and
                // nobody sets `TURN` under our `W_WAITING` (invariant 2).
                let _ = self
                    .cnts
                    .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |v| {
                        debug_assert_eq!(v & TURN, 0, "a turn taken under W_WAITING");
                        Some(v & !(W_WAITING | PARKED) | replaced)
                    });
                return false;
            };
            // Acquire pairs with the Release of the readers and writer that
            // left (their release sequences end in `v`).
            if self
                .cnts
                .compare_exchange(v, W_LOCKED | turn, Ordering::Acquire, Ordering::Relaxed)
                .is_ok()
            {
                return true;
            }
        }
    }

    /// Panics (after undoing our increment) if the reader count overflowed.
    #[inline]
    fn check_reader_overflow(&self, old: u32) {
        if old & READER_OVERFLOW != 0 {
            self.reader_leave();
            reader_overflow();
        }
    }

    /// A reader whose increment is in the count, and that saw only
    /// `W_LOCKED` (a writer holds; none waits): keeps its increment (so no
    /// other writer can enter, invariant 3) and spins on loads for the
    /// writer to leave. True once it holds the read lock; false if a writer
    /// started waiting (`W_WAITING`: readers must queue behind it), the
    /// writer left with a fair unlock (`HANDOFF`: the lock is the quiet
    /// waiter's, and a fast path must not take it) or the spin budget ran
    /// out, with the increment still in.
    #[inline]
    fn spin_writer_exit(&self) -> bool {
        let mut backoff = Backoff::new();
        while backoff.steps() < TUNING.qrw_optimistic_steps {
            backoff.snooze::<P>();
            // Acquire pairs with the writer's Release unlock (or downgrade).
            let v = self.cnts.load(Ordering::Acquire);
            if v & (W_WAITING | HANDOFF) != 0 {
                return false;
            }
            if v & W_LOCKED == 0 {
                return true;
            }
        }
        false
    }

    #[cold]
    fn lock_shared_slow(&self, old: u32, ev: Events) {
        let acquired = self.lock_shared_contended(old, Deadline::NEVER, ev);
        debug_assert!(acquired);
    }

    /// A reader's contended path, its increment (`old` before it) in the
    /// count. True holding a read lock; false once `deadline` passed, with
    /// nothing of ours left in the lock.
    #[inline]
    fn lock_shared_contended(&self, old: u32, deadline: Deadline, ev: Events) -> bool {
        if old & (W_MASK | READER_OVERFLOW | HANDOFF) == 0 {
            // Only QUIET: we hold the read lock, past a waiter, in its batch.
            return true;
        }
        self.check_reader_overflow(old);
        if old & (W_MASK | HANDOFF) == W_LOCKED && self.spin_writer_exit() {
            return true;
        }
        // A writer holds or waits, or a fair unlock handed the lock to the
        // waiter: undo, and queue behind everyone waiting.
        self.reader_leave();
        if !self.lock_wait_lock(deadline, ev) {
            return false;
        }
        // Let the running threads finish their batch; then join the count
        // and drop QUIET and HANDOFF in one RMW. Acquire pairs with the last
        // writer's Release unlock (when it is already gone); otherwise
        // `wait_writer_exit` acquires.
        let mut v = self.wait_batch(|v| v & W_LOCKED == 0, deadline, ev);
        let (old, turn) = loop {
            let (new, leaving) = if v & W_LOCKED != 0 && deadline.passed::<P>() {
                // Out of time with a writer inside: leave, dropping our
                // QUIET and HANDOFF.
                (v & !(QUIET | HANDOFF), true)
            } else {
                // Our claim takes the next turn.
                let turn = next_turn(v);
                (
                    (v & !(QUIET | HANDOFF | TURN) | turn).wrapping_add(ONE_READER),
                    false,
                )
            };
            match self
                .cnts
                .compare_exchange_weak(v, new, Ordering::Acquire, Ordering::Relaxed)
            {
                Ok(_) if leaving => {
                    self.wait_lock.release(false);
                    return false;
                }
                Ok(old) => break (old, new & TURN),
                Err(now) => v = now,
            }
        };
        if old & READER_OVERFLOW != 0 {
            // `wait_lock` first: our reader count keeps the lock alive while
            // we touch it; after `reader_leave` a writer may take the lock
            // and its owner free it.
            self.wait_lock.release(false);
            self.reader_leave();
            reader_overflow();
        }
        let acquired = self.wait_writer_exit(old, deadline, ev);
        if acquired {
            // The turn is ours once we are in (as a writer's, after its
            // drain).
            batch::claim_turn::<P>(self.addr(), turn);
        } else {
            // Out of time: the turn our claim replaced comes back. Nobody
            // else changes `TURN` meanwhile: claims and upgrades need
            // `wait_lock`, and a writer needs a word without readers.
            let _ = self
                .cnts
                .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |v| {
                    Some(v & !TURN | old & TURN)
                });
        }
        self.release_wait_lock_after_claim();
        if !acquired {
            // Out of time: our increment goes (after `wait_lock`, as above).
            self.reader_leave();
        }
        acquired
    }

    /// Takes `wait_lock`, by `deadline` at the latest (false: not taken);
    /// its slow-path events count for `ev`, ours.
    #[inline]
    fn lock_wait_lock(&self, deadline: Deadline, ev: Events) -> bool {
        if deadline.is_never() {
            self.wait_lock.lock(ev);
            true
        } else {
            self.wait_lock.lock_until(deadline, ev)
        }
    }

    /// The read fast path's RMW alone, for a caller that must look at
    /// what it already holds before it may wait (`PerCpuRwLock`'s
    /// inhibited read): true holding a read lock, as `lock_shared_hooked`
    /// would hold it without waiting; false with our increment undone (a
    /// writer holds or waits, or a fair unlock handed the lock over): the
    /// caller takes its slow path.
    #[inline]
    pub(crate) fn try_lock_shared_quick(&self) -> bool {
        // Acquire pairs with the Release unlock of the last writer.
        let old = self.cnts.fetch_add(ONE_READER, Ordering::Acquire);
        // Only QUIET: a fast-path acquisition past a quiet waiter, in its
        // batch (see `lock_shared_contended`).
        if old & (W_MASK | READER_OVERFLOW | HANDOFF) == 0 {
            return true;
        }
        self.undo_read();
        false
    }

    /// `try_lock_shared_quick` failed: takes our increment back out.
    #[cold]
    fn undo_read(&self) {
        self.reader_leave();
    }

    /// The read fast path; `contended` is called if the read must wait
    /// (statistics: [`RawQRwLock`] passes its hook, the core nothing), and
    /// the slow path's events count for `ev`.
    #[inline]
    pub(crate) fn lock_shared_hooked(&self, contended: impl FnOnce(), ev: Events) {
        // Acquire pairs with the Release unlock of the last writer.
        let old = self.cnts.fetch_add(ONE_READER, Ordering::Acquire);
        if old & (W_MASK | READER_OVERFLOW | QUIET) != 0 {
            // Only QUIET: a fast-path acquisition past a quiet waiter.
            if old & (W_MASK | READER_OVERFLOW | HANDOFF) != 0 {
                contended();
            }
            self.lock_shared_slow(old, ev);
        }
    }

    /// The write fast path; `contended` and `ev` as in `lock_shared_hooked`.
    #[inline]
    pub(crate) fn lock_exclusive_hooked(&self, contended: impl FnOnce(), ev: Events) {
        if let Err(v) = self.try_lock_exclusive_fast() {
            if self.try_lock_in_turn(v) {
                return;
            }
            self.lock_exclusive_slow(v, contended, ev);
        }
    }

    /// The turn holder's write, inline (`v`: the word the fast path saw):
    /// the lock holds nothing but a turn and maybe a quiet waiter, the turn
    /// is ours (a thread-local check, which counts the write in it), and
    /// someone waits for the lock; then take it past them, as the slow path
    /// would (`lock_exclusive_contended`, `Turn::Ours`). Anything else, and
    /// the one write in `qrw_turn_clock_writes` that reads the clock, is
    /// the slow path's (should the `cmpxchg` fail, the slow path counts
    /// this write in the turn a second time). A turn holder writes many
    /// times in a row while others wait, and each of those writes used to
    /// pay the slow path's call.
    #[inline]
    fn try_lock_in_turn(&self, v: u32) -> bool {
        v & !(QUIET | TURN) == 0
            && v & TURN != 0
            && self.wait_lock.is_wanted()
            && batch::count_write_in_turn::<P>(self.addr(), v & TURN)
            && self.try_lock_past(v)
    }

    /// The write fast paths' attempt (untimed and timed): takes a free
    /// word, or returns the word it saw. A look first: a word with anything
    /// in it (a turn, a quiet waiter, holders) goes to the slow path without
    /// a failing `cmpxchg`.
    #[inline]
    pub(crate) fn try_lock_exclusive_fast(&self) -> Result<(), u32> {
        let v = self.cnts.load(Ordering::Relaxed);
        if v != 0 {
            return Err(v);
        }
        // Acquire pairs with the previous holders' Release.
        self.cnts
            .compare_exchange(0, W_LOCKED, Ordering::Acquire, Ordering::Relaxed)
            .map(drop)
    }

    /// The upgradable-read acquisition; `contended` as in
    /// `lock_shared_hooked` (called, once, if the queue lock is taken or a
    /// writer holds the lock), `ev` too.
    pub(crate) fn lock_upgradable_hooked(&self, contended: impl FnOnce(), ev: Events) {
        let mut contended = Some(contended);
        if !self.wait_lock.try_lock_fast() {
            if let Some(c) = contended.take() {
                c();
            }
            self.wait_lock.lock_slow(ev);
        }
        let acquired = self.join_as_upgradable(Deadline::NEVER, ev, || {
            if let Some(c) = contended.take() {
                c();
            }
        });
        debug_assert!(acquired);
    }

    /// Holding `wait_lock`: adds our reader and waits for a writer inside to
    /// leave (`contended` is called first if there is one). True holding
    /// the upgradable read; false once `deadline` passed, with `wait_lock`
    /// released and nothing of ours left.
    #[inline]
    fn join_as_upgradable(&self, deadline: Deadline, ev: Events, contended: impl FnOnce()) -> bool {
        // Acquire pairs with the last writer's Release unlock.
        let old = self.cnts.fetch_add(ONE_READER, Ordering::Acquire);
        if old & W_LOCKED != 0 && old & READER_OVERFLOW == 0 {
            // A writer holds the lock: we wait for it (statistics: this
            // acquisition is contended, and its wait starts now).
            contended();
        }
        let acquired = old & READER_OVERFLOW == 0 && self.wait_writer_exit(old, deadline, ev);
        if acquired {
            return true;
        }
        // `wait_lock` first: our reader count keeps the lock alive while we
        // touch it; after `reader_leave` a writer may take the lock and its
        // owner free it.
        self.wait_lock.release(false);
        self.reader_leave();
        if old & READER_OVERFLOW != 0 {
            reader_overflow();
        }
        false
    }

    #[cold]
    fn lock_exclusive_slow(&self, v: u32, contended: impl FnOnce(), ev: Events) {
        let acquired = self.lock_exclusive_contended(v, contended, Deadline::NEVER, ev);
        debug_assert!(acquired);
    }

    /// A writer's contended path (`v`: the word its fast path saw;
    /// `contended` as in `lock_shared_hooked`). True holding the write
    /// lock; false once `deadline` passed, with nothing of ours left in the
    /// lock.
    #[inline]
    fn lock_exclusive_contended(
        &self,
        v: u32,
        contended: impl FnOnce(),
        deadline: Deadline,
        ev: Events,
    ) -> bool {
        // The turn we hold (0: none): a free lock is ours past it.
        let turn = match v & TURN {
            0 => 0,
            turn => match batch::turn_of::<P>(self.addr(), turn) {
                // Nobody waits for the lock: the turn serves no one; it
                // ends here (whoever holds it), and a free lock is ours.
                // (Queueing would only leave the lock idle, and cost a
                // rare writer of a read-mostly lock a trip through the
                // queue on every write.)
                t if !self.wait_lock.is_wanted() => {
                    if v & !TURN == 0
                        && self
                            .cnts
                            // Acquire pairs with the previous holders' Release.
                            .compare_exchange(v, W_LOCKED, Ordering::Acquire, Ordering::Relaxed)
                            .is_ok()
                    {
                        // Our turn is gone: a later claim, numbered from
                        // 0, gets our number again; forget it.
                        if t == Turn::Ours {
                            batch::turn_ends::<P>(self.addr());
                        }
                        return true;
                    }
                    if t == Turn::Ours { turn } else { 0 }
                }
                Turn::Theirs => 0,
                Turn::Ours => turn,
                // Over, with someone waiting: we queue, and leave the lock
                // to them, waking a waiter that sleeps through its batch
                // (it finds the lock free and claims it) and giving it our
                // CPU once, as after a hand-off.
                Turn::Over => {
                    parking::unpark_all::<P>(self.addr());
                    P::yield_now();
                    0
                }
            },
        };
        // Only a quiet waiter is there (and our turn): its batch lasts,
        // take the lock.
        if v & !QUIET == turn && self.try_lock_past(v) {
            return true;
        }
        contended();
        // Spin on loads while nobody queues (a queued writer sets
        // W_WAITING; a queued reader is in the count or about to be), and
        // take the lock if it comes free: free of everything but a quiet
        // waiter and our turn if it is ours, entirely free otherwise.
        let mut backoff = Backoff::new();
        while backoff.steps() < TUNING.qrw_optimistic_steps {
            backoff.snooze::<P>();
            let v = self.cnts.load(Ordering::Relaxed);
            let ours = turn != 0 && v & TURN == turn;
            if v & W_WAITING != 0 || (!ours && self.wait_lock.is_locked()) {
                break;
            }
            let free = if ours { v & !QUIET == turn } else { v == 0 };
            if free && self.try_lock_past(v) {
                return true;
            }
        }
        if !self.lock_wait_lock(deadline, ev) {
            return false;
        }
        // Let the running threads finish their batch. Then, in one RMW that
        // also drops QUIET and HANDOFF: take the lock if it is free, or set
        // W_WAITING (from here on newcomer readers queue behind us,
        // invariant 2) and wait for the holders to drain; out of time, just
        // leave.
        let mut v = self.wait_batch(|v| v & !(QUIET | HANDOFF | TURN) == 0, deadline, ev);
        let acquired = loop {
            // Our claim ends the turn and takes the next one (with
            // `W_LOCKED`, now or once the word drained).
            let rest = v & !(QUIET | HANDOFF | TURN);
            let turn = next_turn(v);
            let (new, outcome) = if rest == 0 {
                (W_LOCKED | turn, Some(true))
            } else if deadline.passed::<P>() {
                // Out of time: leave, dropping our QUIET and HANDOFF
                // (and nothing else: the turn stays whoever's it was).
                (v & !(QUIET | HANDOFF), Some(false))
            } else {
                (rest | W_WAITING, None)
            };
            // Acquire pairs with the previous holders' Release (when taking).
            match self
                .cnts
                .compare_exchange_weak(v, new, Ordering::Acquire, Ordering::Relaxed)
            {
                Ok(_) => {
                    let taken = outcome
                        .unwrap_or_else(|| self.take_from_waiting(0, turn, v & TURN, deadline, ev));
                    if taken {
                        batch::claim_turn::<P>(self.addr(), turn);
                    }
                    break taken;
                }
                Err(now) => v = now,
            }
        };
        self.release_wait_lock_after_claim();
        acquired
    }

    /// The word was `v`, free but for `QUIET` (a waiter lets the running
    /// threads finish their batch) and `TURN`: take the write lock past
    /// them, keeping them.
    #[inline]
    fn try_lock_past(&self, v: u32) -> bool {
        debug_assert_eq!(v & !(QUIET | TURN), 0);
        self.cnts
            // Acquire pairs with the previous holders' Release.
            .compare_exchange(v, v | W_LOCKED, Ordering::Acquire, Ordering::Relaxed)
            .is_ok()
    }
}

#[cold]
#[inline(never)]
fn reader_overflow() -> ! {
    panic!("QRwLock: too many read guards (2^24; are guards being forgotten?)")
}

impl<P: Platform> Default for QRwCore<P> {
    fn default() -> Self {
        Self::new()
    }
}

impl<P: Platform> core::fmt::Debug for QRwCore<P> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        let v = self.cnts.load(Ordering::Relaxed);
        f.debug_struct("RawQRwLock")
            .field("readers", &readers(v))
            .field("write_locked", &(v & W_LOCKED != 0))
            .field("write_waiting", &(v & W_WAITING != 0))
            .field("parked", &(v & PARKED != 0))
            .field("quiet", &(v & QUIET != 0))
            .field("handoff", &(v & HANDOFF != 0))
            .field("turn", &((v & TURN) / TURN_ONE))
            .field("wait_lock", &self.wait_lock)
            .finish()
    }
}

// SAFETY: readers and writers exclude each other by invariants 3 and 4 of
// the module docs; acquiring is Acquire and releasing Release on the count
// word. Guard state is stateless (`GuardSend`); the upgradable guard stands
// for the `wait_lock` its reader holds. Forgetting a guard leaves the lock (and
// possibly `wait_lock`) held, which is safe; the reader count refuses to
// overflow. Nothing outside the lock refers to it after an acquisition
// returns (queue nodes belong to the platform), so a locked lock can be moved
// or dropped. A panic (reader overflow) leaves no new acquisition behind.
unsafe impl<P: Platform> RawRwLock for QRwCore<P> {
    #[allow(clippy::declare_interior_mutable_const)]
    #[cfg(not(loom))]
    const INIT: Self = Self::new();
    #[allow(clippy::declare_interior_mutable_const)]
    #[cfg(loom)]
    const INIT: Self = panic!("use QRwCore::new() under loom");

    type SharedGuard = GuardSend;
    type ExclusiveGuard = GuardSend;

    #[inline]
    fn lock_shared(&self) -> GuardSend {
        self.lock_shared_hooked(|| {}, Events::NONE);
        GuardSend::new()
    }

    #[inline]
    fn try_lock_shared(&self) -> Option<GuardSend> {
        let mut v = self.cnts.load(Ordering::Relaxed);
        loop {
            if v & (W_MASK | READER_OVERFLOW | HANDOFF) != 0 {
                return None;
            }
            // Acquire pairs with the Release unlock of the last writer.
            match self.cnts.compare_exchange_weak(
                v,
                v + ONE_READER,
                Ordering::Acquire,
                Ordering::Relaxed,
            ) {
                Ok(_) => return Some(GuardSend::new()),
                Err(now) => v = now,
            }
        }
    }

    #[inline]
    unsafe fn unlock_shared(&self, _guard: GuardSend) {
        self.reader_leave();
    }

    #[inline]
    fn lock_exclusive(&self) -> GuardSend {
        self.lock_exclusive_hooked(|| {}, Events::NONE);
        GuardSend::new()
    }

    #[inline]
    fn try_lock_exclusive(&self) -> Option<GuardSend> {
        // Acquire pairs with the previous holders' Release.
        match self
            .cnts
            .compare_exchange(0, W_LOCKED, Ordering::Acquire, Ordering::Relaxed)
        {
            Ok(_) => Some(GuardSend::new()),
            Err(v) if v & !(QUIET | TURN) == 0 && self.try_lock_past(v) => Some(GuardSend::new()),
            Err(_) => None,
        }
    }

    #[inline]
    unsafe fn unlock_exclusive(&self, _guard: GuardSend) {
        // Release pairs with the next acquirer's Acquire. `fetch_sub` (xadd)
        // rather than `fetch_and`, which needs a cmpxchg loop on x86.
        let old = self.cnts.fetch_sub(W_LOCKED, Ordering::Release);
        if old & PARKED != 0 {
            self.wake_waiter();
        }
    }

    #[inline]
    fn is_locked(&self) -> bool {
        self.cnts.load(Ordering::Relaxed) & (READERS_MASK | W_LOCKED) != 0
    }

    #[inline]
    fn is_locked_exclusive(&self) -> bool {
        self.cnts.load(Ordering::Relaxed) & W_LOCKED != 0
    }
}

// SAFETY: `downgrade` turns W_LOCKED into one reader in a single RMW, so no
// writer can slip in between; it is Release, so later readers see our writes.
unsafe impl<P: Platform> RawRwLockDowngrade for QRwCore<P> {
    #[inline]
    unsafe fn downgrade(&self, _guard: GuardSend) -> GuardSend {
        // W_LOCKED is set, so adding ONE_READER - W_LOCKED clears it without
        // a borrow and adds one reader. Release pairs with the Acquire of
        // the readers that see W_LOCKED clear.
        let old = self
            .cnts
            .fetch_add(ONE_READER - W_LOCKED, Ordering::Release);
        debug_assert_ne!(old & W_LOCKED, 0);
        if old & PARKED != 0 {
            self.wake_waiter();
        }
        GuardSend::new()
    }
}

// SAFETY: an upgradable reader holds `wait_lock` and a reader count, so at
// most one exists and it excludes writers (invariant 3); `upgrade` takes
// W_LOCKED with an Acquire cmpxchg only once every other reader left, after
// their Release `fetch_sub`s. Forgetting the guard leaves both held.
impl<P: Platform> QRwCore<P> {
    /// `try_upgrade` in two steps, for a wrapper that must check something
    /// of its own once the lock is exclusive (`PerCpuRwLock`'s fast
    /// readers): takes `W_LOCKED` if we are the only reader, keeping
    /// `wait_lock`, and returns the `TURN` that ended (to give to
    /// `undo_upgrade`). Then either `finish_upgrade` or `undo_upgrade`.
    ///
    /// # Safety
    /// The caller holds an upgradable read of this lock.
    pub(crate) unsafe fn try_upgrade_keeping_queue(&self) -> Option<u32> {
        self.try_take_as_sole_reader()
    }

    /// An upgradable reader's `try_upgrade`: takes `W_LOCKED` (dropping our
    /// reader count and any `TURN`, which it returns) if we are the only
    /// reader. Only the `wait_lock` holder (us) sets `W_WAITING`, `PARKED`
    /// or `TURN`, so the word but `TURN` is exactly `ONE_READER` iff we are
    /// the only reader.
    #[inline]
    fn try_take_as_sole_reader(&self) -> Option<u32> {
        let mut v = self.cnts.load(Ordering::Relaxed);
        while v & !TURN == ONE_READER {
            // Acquire pairs with the other readers' Release `fetch_sub`.
            match self
                .cnts
                .compare_exchange(v, W_LOCKED, Ordering::Acquire, Ordering::Relaxed)
            {
                Ok(_) => return Some(v & TURN),
                Err(now) => v = now,
            }
        }
        None
    }

    /// An upgradable reader starts to upgrade: sets `W_WAITING` (newcomer
    /// readers now queue, behind us on `wait_lock`) and ends any `TURN`
    /// (from now on the word is ours to wait on: `take_from_waiting`),
    /// which it returns (a timed upgrade that gives up puts it back).
    /// Relaxed, as setting `W_WAITING` elsewhere.
    #[inline]
    fn start_upgrade(&self) -> u32 {
        let old = self
            .cnts
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |v| {
                Some(v & !TURN | W_WAITING)
            })
            .unwrap_or_else(|v| v);
        old & TURN
    }

    /// Completes `try_upgrade_keeping_queue`: releases `wait_lock`.
    ///
    /// # Safety
    /// `guard` is the upgradable read's, upgraded by
    /// `try_upgrade_keeping_queue`.
    pub(crate) unsafe fn finish_upgrade(&self, guard: WaitGuard<P>) {
        // An upgradable guard stands for the held `wait_lock`.
        let _ = guard;
        self.wait_lock.release(false);
    }

    /// Steps back from `try_upgrade_keeping_queue` (or
    /// `upgrade_until_keeping_queue`) to the upgradable read (still holding
    /// `wait_lock`), putting back `turn`, the `TURN` that the upgrade ended
    /// (as a timed upgrade that gives up while draining does).
    ///
    /// # Safety
    /// The caller took the write with `try_upgrade_keeping_queue` or
    /// `upgrade_until_keeping_queue`, which returned `turn`, and has not
    /// finished it.
    pub(crate) unsafe fn undo_upgrade(&self, turn: u32) {
        debug_assert_eq!(turn & !TURN, 0);
        // One RMW trades W_LOCKED for our reader count and the turn. Nobody
        // sleeps on the word (only the `wait_lock` holder, us, would), so
        // nobody to wake; fast readers spinning on W_LOCKED see it clear
        // and are in. Nobody set `TURN` under our `W_LOCKED` (claims need
        // `wait_lock`, ours; writers a word without a writer), so it is 0
        // and the add puts `turn` in. Release pairs with their Acquire: our
        // write section (empty, but the wrapper's) happens before their
        // reads.
        let old = self.cnts.fetch_add(
            ONE_READER.wrapping_sub(W_LOCKED).wrapping_add(turn),
            Ordering::Release,
        );
        debug_assert_eq!(old & TURN, 0, "a turn taken under W_LOCKED");
    }
}

unsafe impl<P: Platform> RawRwLockUpgrade for QRwCore<P> {
    type UpgradableGuard = WaitGuard<P>;

    fn lock_upgradable(&self) -> WaitGuard<P> {
        self.lock_upgradable_hooked(|| {}, Events::NONE);
        PhantomData
    }

    fn try_lock_upgradable(&self) -> Option<WaitGuard<P>> {
        if !self.wait_lock.try_lock_fast() {
            return None;
        }
        if self.try_lock_shared().is_some() {
            return Some(PhantomData);
        }
        self.wait_lock.release(false);
        None
    }

    unsafe fn unlock_upgradable(&self, guard: WaitGuard<P>) {
        // Release `wait_lock` first: our reader count keeps the lock alive
        // (no one can take it exclusively and free it) until `reader_leave`.
        // An upgradable guard stands for the held `wait_lock` (caller's
        // contract).
        let _ = guard;
        self.wait_lock.release(false);
        self.reader_leave();
    }

    unsafe fn upgrade(&self, guard: WaitGuard<P>) -> GuardSend {
        let replaced = self.start_upgrade();
        let upgraded =
            self.take_from_waiting(ONE_READER, 0, replaced, Deadline::NEVER, Events::NONE);
        debug_assert!(upgraded);
        // An upgradable guard stands for the held `wait_lock`.
        let _ = guard;
        self.wait_lock.release(false);
        GuardSend::new()
    }

    unsafe fn try_upgrade(&self, guard: WaitGuard<P>) -> Result<GuardSend, WaitGuard<P>> {
        if self.try_take_as_sole_reader().is_some() {
            // An upgradable guard stands for the held `wait_lock`.
            let _ = guard;
            self.wait_lock.release(false);
            Ok(GuardSend::new())
        } else {
            Err(guard)
        }
    }
}

/// An 8-byte queued reader-writer lock; see the module documentation.
///
/// `P` is the platform: how waiters sleep and where queue nodes live.
///
/// A lock is in a [lock class](crate::LockClass): `new` and `INIT` put it in
/// the `QRwLock` type class, [`with_class`](Self::with_class) in another.
/// Without the `stats` and `lockdep` features the class is zero-sized and
/// the lock is its 8 bytes; with them it is 24 bytes, and the guard state
/// ([`Held`]) carries what the release must record. Reads are counted and
/// checked as [`Access::Read`] (fair: a read queues behind a waiting
/// writer, so lockdep reports a thread's second read); upgradable reads as
/// [`Access::Upgradable`]: statistics count them as writes (they exclude
/// writers and each other); lockdep lets their holder read the lock (no
/// writer can be waiting then: the upgradable reader holds the queue),
/// counts them as exclusive against other threads, and checks an upgrade
/// as waiting for the readers inside (reported if the thread reads the
/// lock too).
///
/// Timed acquisitions (`try_read_for`, `try_write_until`,
/// `try_upgradable_read_for`, `try_upgrade_for`, ...) need a platform with
/// a clock ([`TimedPlatform`](crate::platform::TimedPlatform)); fair
/// unlocks (`unlock_fair`, `bump`) hand the lock to the thread waiting on
/// it. `RawRwLockUpgradeDowngrade` is not implemented: downgrading a write
/// to an upgradable read would take the queue lock while holding the write
/// lock, which deadlocks against a reader queued there (see the module
/// docs, "Upgradable reads").
///
/// Guards are `Send`: with lockdep, a guard released on another thread
/// leaves its entry on the held stack of the thread that took it (see the
/// `lockdep` module).
#[repr(C)]
pub struct RawQRwLock<P: Platform = DefaultPlatform> {
    pub(crate) core: QRwCore<P>,
    /// Zero-sized without the `stats` and `lockdep` features.
    class: ClassRef,
}

impl<P: Platform> RawQRwLock<P> {
    /// An unlocked lock, in the `QRwLock` type class.
    #[cfg(not(loom))]
    pub const fn new() -> Self {
        Self::with_class(ClassRef::TYPE)
    }

    /// An unlocked lock, in the `QRwLock` type class.
    #[cfg(loom)]
    pub fn new() -> Self {
        Self::with_class(ClassRef::TYPE)
    }

    /// An unlocked lock in lock class `class`; with lock_api's `const`
    /// `RwLock::from_raw` it makes a classed `static`:
    ///
    /// ```
    /// use scalelock::{ClassRef, LockClass, QRwLock, RawQRwLock};
    ///
    /// static GNTTAB: LockClass = LockClass::new("gnttab");
    /// static TABLE: QRwLock<u64> =
    ///     QRwLock::from_raw(RawQRwLock::with_class(ClassRef::of(&GNTTAB)), 0);
    /// # *TABLE.write() += 1;
    /// ```
    #[cfg(not(loom))]
    pub const fn with_class(class: ClassRef) -> Self {
        Self {
            core: QRwCore::new(),
            class,
        }
    }

    /// An unlocked lock in lock class `class`.
    #[cfg(loom)]
    pub fn with_class(class: ClassRef) -> Self {
        Self {
            core: QRwCore::new(),
            class,
        }
    }

    #[inline]
    fn addr(&self) -> usize {
        self as *const Self as usize
    }

    #[inline]
    fn start(&self, access: Access) -> Pending {
        hook::start(self.class, LockKind::QRwLock, self.addr(), access)
    }

    /// Where the core's slow-path events count: this lock's class, on the
    /// row of `access` (the waiting acquisition's: `Read`, or `Write` for
    /// writes, upgradable reads and upgrades).
    #[inline]
    pub(crate) fn events(&self, access: Access) -> Events {
        Events::of(self.class, LockKind::QRwLock, access)
    }

    #[inline]
    fn try_acquired(&self, access: Access) -> Held {
        hook::try_acquired(self.class, LockKind::QRwLock, self.addr(), access)
    }
}

impl<P: Platform> Default for RawQRwLock<P> {
    fn default() -> Self {
        Self::new()
    }
}

impl<P: Platform> core::fmt::Debug for RawQRwLock<P> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        self.core.fmt(f)
    }
}

impl<P: Platform> RawQRwLock<P> {
    /// `lock_shared` with statistics or lockdep switched on.
    #[inline]
    fn lock_shared_recorded(&self) -> Held {
        let mut p = self.start(Access::Read);
        let ev = p.events(self.events(Access::Read));
        self.core.lock_shared_hooked(|| p.contended(), ev);
        p.acquired()
    }

    /// `lock_exclusive` with statistics or lockdep switched on.
    #[inline]
    fn lock_exclusive_recorded(&self) -> Held {
        let mut p = self.start(Access::Write);
        let ev = p.events(self.events(Access::Write));
        self.core.lock_exclusive_hooked(|| p.contended(), ev);
        p.acquired()
    }
}

// SAFETY: every acquisition and release is the core's (whose safety
// argument is above); the hooks only record them. The guard state is the
// hooks' `Held`, which owns nothing of the lock.
unsafe impl<P: Platform> RawRwLock for RawQRwLock<P> {
    #[allow(clippy::declare_interior_mutable_const)]
    #[cfg(not(loom))]
    const INIT: Self = Self::new();
    #[allow(clippy::declare_interior_mutable_const)]
    #[cfg(loom)]
    const INIT: Self = panic!("use RawQRwLock::new() under loom");

    /// What statistics and lockdep remember of the hold (zero-sized
    /// without the features).
    type SharedGuard = Held;
    /// As `SharedGuard`.
    type ExclusiveGuard = Held;

    #[inline]
    fn lock_shared(&self) -> Held {
        // With the hooks switched off (or not compiled in), the core's own
        // path, with no hook state at all: a `Pending` that the slow path's
        // callback refers to is built on the stack before the RMW, which
        // then waits for those stores (an uncontended write took 1.2x as
        // long). Acquisitions begun switched off count no slow-path events.
        if !hook::any_active() {
            self.core.lock_shared_hooked(|| {}, Events::NONE);
            return Held::NONE;
        }
        self.lock_shared_recorded()
    }

    #[inline]
    fn try_lock_shared(&self) -> Option<Held> {
        self.core
            .try_lock_shared()
            .map(|_| self.try_acquired(Access::Read))
    }

    #[inline]
    unsafe fn unlock_shared(&self, guard: Held) {
        // Taken before the release: the lock may be freed after it.
        let addr = self.addr();
        self.core.reader_leave();
        guard.release(addr);
    }

    #[inline]
    fn lock_exclusive(&self) -> Held {
        // As in `lock_shared`.
        let active = hook::active_bits();
        if active == 0 {
            self.core.lock_exclusive_hooked(|| {}, Events::NONE);
            return Held::NONE;
        }
        // Statistics alone: a write that takes a free lock is counted after
        // it (see `RawQSpinLock::lock`); any other word goes the recorded
        // way, which tries the fast path again.
        if hook::stats_alone(active) && self.core.try_lock_exclusive_fast().is_ok() {
            return hook::counted_at_once(self.class, LockKind::QRwLock, Access::Write);
        }
        self.lock_exclusive_recorded()
    }

    #[inline]
    fn try_lock_exclusive(&self) -> Option<Held> {
        self.core
            .try_lock_exclusive()
            .map(|_| self.try_acquired(Access::Write))
    }

    #[inline]
    unsafe fn unlock_exclusive(&self, guard: Held) {
        // As in `unlock_shared`.
        let addr = self.addr();
        // SAFETY: we hold the write lock (caller's contract); the core's
        // guard state is stateless.
        unsafe { self.core.unlock_exclusive(GuardSend::new()) };
        guard.release(addr);
    }

    #[inline]
    fn is_locked(&self) -> bool {
        self.core.is_locked()
    }

    #[inline]
    fn is_locked_exclusive(&self) -> bool {
        self.core.is_locked_exclusive()
    }
}

// SAFETY: the core's downgrade; a downgrade never waits, so the read is
// recorded as a try-lock (no lockdep dependency into it).
unsafe impl<P: Platform> RawRwLockDowngrade for RawQRwLock<P> {
    #[inline]
    unsafe fn downgrade(&self, guard: Held) -> Held {
        // SAFETY: we hold the write lock (caller's contract).
        unsafe { self.core.downgrade(GuardSend::new()) };
        // A panic out of the write hold's release (a long-hold hook's)
        // returns no read guard: nobody would release the read. Given
        // back as it unwinds, as a plain unlock whose hook panics leaves
        // nothing held.
        struct LeaveOnUnwind<'a, P: Platform>(&'a QRwCore<P>);
        impl<P: Platform> Drop for LeaveOnUnwind<'_, P> {
            fn drop(&mut self) {
                self.0.reader_leave();
            }
        }
        let leave = LeaveOnUnwind(&self.core);
        // We still read-hold the lock: it stays alive.
        guard.release(self.addr());
        core::mem::forget(leave);
        self.try_acquired(Access::Read)
    }
}

// SAFETY: the core's upgradable reads; the hold keeps its `Held` through an
// upgrade (lockdep's entry becomes a write).
unsafe impl<P: Platform> RawRwLockUpgrade for RawQRwLock<P> {
    /// As `SharedGuard`.
    type UpgradableGuard = Held;

    fn lock_upgradable(&self) -> Held {
        let mut p = self.start(Access::Upgradable);
        let ev = p.events(self.events(Access::Write));
        // Without the hooks, the core's own (empty) callback: the same code
        // as the core's, no reference to `p` passed into the slow path.
        if hook::COMPILED {
            self.core.lock_upgradable_hooked(|| p.contended(), ev);
        } else {
            self.core.lock_upgradable_hooked(|| {}, ev);
        }
        p.acquired()
    }

    fn try_lock_upgradable(&self) -> Option<Held> {
        self.core
            .try_lock_upgradable()
            .map(|_| self.try_acquired(Access::Upgradable))
    }

    unsafe fn unlock_upgradable(&self, guard: Held) {
        let addr = self.addr();
        // SAFETY: we hold an upgradable read (caller's contract).
        unsafe { self.core.unlock_upgradable(PhantomData) };
        guard.release(addr);
    }

    unsafe fn upgrade(&self, guard: Held) -> Held {
        // Lockdep first: a read of ours would keep the upgrade waiting for
        // ever. A report that panics gives the upgradable read back first.
        // SAFETY (the closure): called at most once, instead of the
        // upgrade, just before the panic unwinds out of it; we hold the
        // upgradable read (caller's contract) and lock_api's guard no
        // longer owns it.
        guard.upgrading(self.addr(), || unsafe {
            self.core.unlock_upgradable(PhantomData)
        });
        // The core's `upgrade`, with our events.
        // SAFETY: we hold an upgradable read (caller's contract).
        let upgraded = unsafe {
            self.core
                .upgrade_until(Deadline::NEVER, self.events(Access::Write))
        };
        debug_assert!(upgraded);
        guard
    }

    unsafe fn try_upgrade(&self, guard: Held) -> Result<Held, Held> {
        // SAFETY: we hold an upgradable read (caller's contract).
        match unsafe { self.core.try_upgrade(PhantomData) } {
            Ok(_) => {
                guard.upgraded(self.addr());
                Ok(guard)
            }
            Err(_) => Err(guard),
        }
    }
}

mod timed;

/// Test support for the locks built on the core (`PerCpuRwLock`'s tests).
#[cfg(all(test, not(loom)))]
impl<P: Platform> QRwCore<P> {
    /// Marks a waiter that waits out a batch (`QUIET`), as `wait_batch`
    /// does.
    pub(crate) fn mark_quiet_for_test(&self) {
        self.cnts.fetch_or(QUIET, Ordering::Relaxed);
    }

    /// Stands in (or no longer) for a thread queued behind the `wait_lock`
    /// holder (`queued_behind_waiter`).
    pub(crate) fn mark_queued_for_test(&self, on: bool) {
        self.wait_lock.set_pending_for_test(on);
    }

    /// Takes the waiter's `QUIET` (and a `HANDOFF` left for it) back, as
    /// its claim would.
    pub(crate) fn clear_quiet_for_test(&self) {
        self.cnts.fetch_and(!(QUIET | HANDOFF), Ordering::Relaxed);
    }

    /// Whether the word has `QUIET`, `HANDOFF` and `W_LOCKED` set.
    pub(crate) fn batch_bits_for_test(&self) -> (bool, bool, bool) {
        let v = self.cnts.load(Ordering::Relaxed);
        (v & QUIET != 0, v & HANDOFF != 0, v & W_LOCKED != 0)
    }

    /// Leaves turn `n` (1 to 3) in the word, as the last claim would.
    pub(crate) fn set_turn_for_test(&self, n: u32) {
        debug_assert!((1..=3).contains(&n));
        let _ = self
            .cnts
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |v| {
                Some(v & !TURN | (n * TURN_ONE))
            });
    }

    /// The number of the turn in the word (0: none).
    pub(crate) fn turn_for_test(&self) -> u32 {
        (self.cnts.load(Ordering::Relaxed) & TURN) / TURN_ONE
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::AtomicUsize;
    use std::thread;

    /// The lock without hooks: the tests of its mechanics take a second
    /// read on one thread, which lockdep (rightly, in general) reports.
    type CoreRwLock<T> = lock_api::RwLock<QRwCore, T>;

    fn word(lock: &QRwCore) -> u32 {
        lock.cnts.load(Ordering::Relaxed)
    }

    /// A lock word's address and a waker's step on it (`MidPoll`).
    type WakerStep = (usize, fn(&AtomicU32));

    std::thread_local! {
        /// `MidPoll`'s clock (ns), moved one per reading.
        static MID_POLL_CLOCK: core::cell::Cell<u64> = const { core::cell::Cell::new(1 << 40) };
        /// The word and the waker's step `MidPoll` plays on it, once armed.
        static MID_POLL_EVENT: core::cell::Cell<Option<WakerStep>> = const { core::cell::Cell::new(None) };
        /// Sleeps so far; sleeps after the simulated waker.
        static MID_POLL_SLEEPS: core::cell::Cell<(u32, u32)> = const { core::cell::Cell::new((0, 0)) };
        /// Whether the simulated waker came.
        static MID_POLL_FIRED: core::cell::Cell<bool> = const { core::cell::Cell::new(false) };
    }

    /// The std platform's thread-local state, with a clock that moves one
    /// ns per reading and, once armed (`MID_POLL_EVENT`), makes the next
    /// clock reading a waker's step on the word and its wake-up: between
    /// the waiter's look at the word (the batch clock comes after it) and
    /// its sleep. Sleeps only count, and only where a futex would sleep
    /// (the parking word unchanged since the ticket).
    #[derive(Debug)]
    struct MidPoll;

    // SAFETY: the std platform's thread-local state; nothing here waits
    // (the test's waiter is the only thread, and its sleeps only count).
    unsafe impl Platform for MidPoll {
        fn relax() {}
        fn yield_now() {}
        fn now_ns() -> u64 {
            if let Some((word, step)) = MID_POLL_EVENT.with(|e| e.replace(None)) {
                // SAFETY: the test's lock word, alive for the whole test.
                step(unsafe { &*(word as *const AtomicU32) });
                crate::wait::parking::unpark_all::<MidPoll>(word);
                MID_POLL_FIRED.with(|f| f.set(true));
            }
            MID_POLL_CLOCK.with(|c| {
                c.set(c.get() + 1);
                c.get()
            })
        }
        fn wait(_: &AtomicU32, _: u32) {}
        fn wait_timeout(word: &AtomicU32, expected: u32, _: u64) {
            // A futex: a word that moved since the ticket returns at once.
            if word.load(Ordering::Relaxed) != expected {
                return;
            }
            let fired = MID_POLL_FIRED.with(core::cell::Cell::get);
            MID_POLL_SLEEPS.with(|s| {
                let (all, after) = s.get();
                s.set((all + 1, after + u32::from(fired)));
            });
        }
        fn wake_one(_: &AtomicU32) {}
        fn wake_all(_: &AtomicU32) {}
        fn light_fence() {
            crate::sync::atomic::fence(Ordering::SeqCst)
        }
        fn heavy_fence() {
            crate::sync::atomic::fence(Ordering::SeqCst)
        }
        fn with_local<R>(f: impl FnOnce(&crate::platform::LocalState) -> R) -> Option<R> {
            crate::platform::StdPlatform::with_local(f)
        }
        fn queue_node() -> Option<crate::qnode::NodeIndex> {
            None
        }
        fn node(_: crate::qnode::NodeIndex) -> &'static crate::qnode::QNode {
            unreachable!("no nodes are handed out")
        }
        fn cpu_id() -> usize {
            0
        }
        fn cpu_count() -> usize {
            1
        }
    }

    /// A waiter waiting out a batch (`wait_batch`, `free` its test) on a
    /// word that starts as `start`, and a waker that does `step` to the
    /// word and wakes the waiter between one of its looks and the sleep
    /// after it (armed once the waiter has slept twice: its polls grow
    /// from spins to sleeps). Returns the word `wait_batch` returned and
    /// the waiter's sleeps after the waker came, on a thread of its own.
    fn sleeps_after_a_wake_mid_poll(
        start: u32,
        free: fn(u32) -> bool,
        step: fn(&AtomicU32),
    ) -> (u32, u32) {
        std::thread::spawn(move || {
            let lock: QRwCore<MidPoll> = QRwCore::new();
            lock.cnts.store(start, Ordering::Relaxed);
            let addr = &lock.cnts as *const AtomicU32 as usize;
            let v = {
                let armed = core::cell::Cell::new(false);
                let free = |v: u32| {
                    if !armed.get() && MID_POLL_SLEEPS.with(|s| s.get().0) >= 2 {
                        armed.set(true);
                        MID_POLL_EVENT.with(|e| e.set(Some((addr, step))));
                    }
                    free(v)
                };
                lock.wait_batch(free, Deadline::NEVER, Events::NONE)
            };
            assert!(MID_POLL_FIRED.with(core::cell::Cell::get), "the waker came");
            (v, MID_POLL_SLEEPS.with(core::cell::Cell::get).1)
        })
        .join()
        .unwrap()
    }

    /// A waiter that waits out a batch (`wait_batch`) sees a fair unlock
    /// (`HANDOFF` and a wake-up) that came between its last look at the
    /// word and its sleep: its wait ends at once instead of after a sleep.
    #[test]
    fn a_fair_unlock_before_the_ticket_is_seen_before_the_sleep() {
        // A writer holds the lock (not free for the waiter), then leaves it
        // with a fair unlock.
        let (v, after) = sleeps_after_a_wake_mid_poll(
            W_LOCKED,
            |v| v & W_LOCKED == 0,
            |cnts| {
                cnts.fetch_or(HANDOFF, Ordering::Relaxed);
            },
        );
        assert_ne!(v & HANDOFF, 0, "the waiter returned with the hand-off");
        assert_eq!(after, 0, "slept after the fair unlock it had not seen");
    }

    /// A turn holder whose turn is over wakes the quiet waiter "which finds
    /// the lock free and claims it" (module docs, "Turns"). Its unlock and
    /// wake-up between the waiter's last look and its sleep must not leave
    /// the waiter asleep for the rest of its poll (up to the batch's end)
    /// while the lock stays free and the holder queues.
    #[test]
    fn a_turn_holder_leaving_before_the_ticket_is_seen_before_the_sleep() {
        // The turn's holder writes, then unlocks (a plain unlock) and, at
        // its next write, finds its turn over and wakes the waiter.
        let (v, after) = sleeps_after_a_wake_mid_poll(
            TURN_ONE | W_LOCKED,
            |v| v & !(QUIET | HANDOFF | TURN) == 0,
            |cnts| {
                cnts.fetch_sub(W_LOCKED, Ordering::Release);
            },
        );
        assert_eq!(v & W_LOCKED, 0, "the waiter returned with the lock free");
        assert_eq!(after, 0, "slept after the wake-up it had not seen");
    }

    std::thread_local! {
        /// The word `FairUnlockMidSpin` plays a writer's fair unlock on, at
        /// its next relax (0: none).
        static MID_SPIN_WORD: core::cell::Cell<usize> = const { core::cell::Cell::new(0) };
    }

    /// The std platform's thread-local state, where the first relax after
    /// arming plays a writer's fair unlock on the armed word: `W_LOCKED`
    /// off, `HANDOFF` on (the word has a quiet waiter's `QUIET`).
    #[derive(Debug)]
    struct FairUnlockMidSpin;

    // SAFETY: the std platform's thread-local state; nothing here waits
    // (the test's reader is the only thread).
    unsafe impl Platform for FairUnlockMidSpin {
        fn relax() {
            let word = MID_SPIN_WORD.with(|w| w.replace(0));
            if word != 0 {
                // SAFETY: the test's lock word, alive for the whole test.
                let cnts = unsafe { &*(word as *const AtomicU32) };
                let v = cnts.fetch_xor(W_LOCKED | HANDOFF, Ordering::Relaxed);
                assert_eq!(v & (W_LOCKED | HANDOFF | QUIET), W_LOCKED | QUIET);
            }
        }
        fn yield_now() {}
        fn now_ns() -> u64 {
            crate::platform::StdPlatform::now_ns()
        }
        fn wait(_: &AtomicU32, _: u32) {}
        fn wait_timeout(_: &AtomicU32, _: u32, _: u64) {}
        fn wake_one(_: &AtomicU32) {}
        fn wake_all(_: &AtomicU32) {}
        fn light_fence() {
            crate::sync::atomic::fence(Ordering::SeqCst)
        }
        fn heavy_fence() {
            crate::sync::atomic::fence(Ordering::SeqCst)
        }
        fn with_local<R>(f: impl FnOnce(&crate::platform::LocalState) -> R) -> Option<R> {
            crate::platform::StdPlatform::with_local(f)
        }
        fn queue_node() -> Option<crate::qnode::NodeIndex> {
            None
        }
        fn node(_: crate::qnode::NodeIndex) -> &'static crate::qnode::QNode {
            unreachable!("no nodes are handed out")
        }
        fn cpu_id() -> usize {
            0
        }
        fn cpu_count() -> usize {
            1
        }
    }

    /// A reader that kept its increment to spin for a writer's exit does
    /// not take the lock when the writer leaves with a fair unlock: the
    /// lock is the quiet waiter's (`HANDOFF`), and the reader queues.
    #[test]
    fn a_reader_spinning_for_the_writer_does_not_pass_a_hand_off() {
        let lock: QRwCore<FairUnlockMidSpin> = QRwCore::new();
        // A writer holds, a waiter waits out the batch, and our reader's
        // increment is in (it saw only `W_LOCKED` and `QUIET`).
        lock.cnts
            .store(W_LOCKED | QUIET | ONE_READER, Ordering::Relaxed);
        MID_SPIN_WORD.with(|w| w.set(&lock.cnts as *const AtomicU32 as usize));
        assert!(!lock.spin_writer_exit(), "took the lock past the hand-off");
        assert_eq!(MID_SPIN_WORD.with(core::cell::Cell::get), 0, "no relax");
        assert_eq!(
            lock.cnts.load(Ordering::Relaxed),
            QUIET | HANDOFF | ONE_READER
        );
    }

    std::thread_local! {
        /// `SteppedClock`'s clock (ns), moved `STEP_NS` per reading.
        static STEPPED_CLOCK: core::cell::Cell<u64> = const { core::cell::Cell::new(1 << 40) };
    }

    /// What `SteppedClock`'s clock moves per reading.
    const STEP_NS: u64 = 10_000;

    /// The std platform's thread-local state, with a clock that moves
    /// `STEP_NS` per reading, and waits and sleeps that return at once
    /// (spurious returns, as the contract allows): a timed acquisition by
    /// a single thread, against a word the test sets up, runs out its
    /// batch and then its deadline deterministically.
    #[derive(Debug)]
    struct SteppedClock;

    // SAFETY: the std platform's thread-local state; nothing here waits
    // (each test's acquirer is the only thread on its lock).
    unsafe impl Platform for SteppedClock {
        fn relax() {}
        fn yield_now() {}
        fn sleep_ns(_: u64) {}
        fn now_ns() -> u64 {
            STEPPED_CLOCK.with(|c| {
                c.set(c.get() + STEP_NS);
                c.get()
            })
        }
        fn wait(_: &AtomicU32, _: u32) {}
        fn wait_timeout(_: &AtomicU32, _: u32, _: u64) {}
        fn wake_one(_: &AtomicU32) {}
        fn wake_all(_: &AtomicU32) {}
        fn light_fence() {
            crate::sync::atomic::fence(Ordering::SeqCst)
        }
        fn heavy_fence() {
            crate::sync::atomic::fence(Ordering::SeqCst)
        }
        fn with_local<R>(f: impl FnOnce(&crate::platform::LocalState) -> R) -> Option<R> {
            crate::platform::StdPlatform::with_local(f)
        }
        fn queue_node() -> Option<crate::qnode::NodeIndex> {
            None
        }
        fn node(_: crate::qnode::NodeIndex) -> &'static crate::qnode::QNode {
            unreachable!("no nodes are handed out")
        }
        fn cpu_id() -> usize {
            0
        }
        fn cpu_count() -> usize {
            1
        }
    }

    /// A deadline `ns` from now on `SteppedClock`.
    fn stepped_deadline(ns: u64) -> Deadline {
        Deadline::at(SteppedClock::now_ns() + ns)
    }

    /// A timed reader that claims the lock while a writer is inside (its
    /// batch ends first) and then runs out of time waiting for the writer
    /// leaves the word as it found it: no reader increment, no `PARKED`,
    /// and no `TURN` of its claim; nor does it hold that turn.
    #[test]
    fn a_timed_reader_that_gives_up_after_its_claim_leaves_no_turn() {
        std::thread::spawn(|| {
            let lock: QRwCore<SteppedClock> = QRwCore::new();
            lock.cnts.store(W_LOCKED, Ordering::Relaxed);
            // 50 ms: far past the 1 ms batch.
            let deadline = stepped_deadline(50_000_000);
            assert!(!lock.lock_shared_until(|| {}, || deadline, Events::NONE));
            assert_eq!(
                lock.cnts.load(Ordering::Relaxed),
                W_LOCKED,
                "the reader that gave up left something"
            );
            assert_eq!(
                batch::turn_of::<SteppedClock>(lock.addr(), TURN_ONE),
                Turn::Theirs
            );
            assert!(!lock.wait_lock.is_wanted());
        })
        .join()
        .unwrap();
    }

    /// A timed writer that gives up leaves another thread's turn as it
    /// found it: both when it runs out of time waiting out the batch (its
    /// claim would have been its leaving RMW) and when it runs out of time
    /// draining the readers (`W_WAITING`, whose RMW ended the turn).
    #[test]
    fn a_timed_writer_that_gives_up_leaves_the_turn_it_found() {
        // 200 us: within the batch; 50 ms: past it, while draining.
        for within in [200_000, 50_000_000] {
            std::thread::spawn(move || {
                let lock: QRwCore<SteppedClock> = QRwCore::new();
                // Another thread's turn 1, and a reader inside.
                lock.cnts.store(TURN_ONE | ONE_READER, Ordering::Relaxed);
                let deadline = stepped_deadline(within);
                assert!(!lock.lock_exclusive_until(|| {}, || deadline, Events::NONE));
                assert_eq!(
                    lock.cnts.load(Ordering::Relaxed),
                    TURN_ONE | ONE_READER,
                    "the writer that gave up ({within} ns) changed the word"
                );
                assert!(!lock.wait_lock.is_wanted());
            })
            .join()
            .unwrap();
        }
    }

    /// A timed upgrade that gives up (another reader stays inside) leaves
    /// the word as it found it, the turn included: still the upgradable
    /// read, nothing else.
    #[test]
    fn a_timed_upgrade_that_gives_up_leaves_the_turn_it_found() {
        std::thread::spawn(|| {
            let lock: QRwCore<SteppedClock> = QRwCore::new();
            // As if we held an upgradable read (`wait_lock` and a reader),
            // beside another reader, after a claim's turn 2.
            lock.wait_lock.lock(Events::NONE);
            lock.cnts
                .store((2 * TURN_ONE) | (2 * ONE_READER), Ordering::Relaxed);
            let deadline = stepped_deadline(50_000_000);
            // SAFETY: we stand for an upgradable reader (above).
            assert!(unsafe { lock.upgrade_until_keeping_queue(deadline, Events::NONE) }.is_none());
            assert_eq!(
                lock.cnts.load(Ordering::Relaxed),
                (2 * TURN_ONE) | (2 * ONE_READER),
                "the upgrade that gave up changed the word"
            );
            lock.wait_lock.release(false);
        })
        .join()
        .unwrap();
    }

    #[test]
    fn is_eight_bytes() {
        assert_eq!(core::mem::size_of::<QRwCore>(), 8);
        assert_eq!(core::mem::align_of::<QRwCore>(), 4);
        if crate::hook::COMPILED {
            // The lock class follows the word and the queue lock.
            assert_eq!(core::mem::size_of::<RawQRwLock>(), 24);
        } else {
            assert_eq!(core::mem::size_of::<RawQRwLock>(), 8);
            assert_eq!(core::mem::align_of::<RawQRwLock>(), 4);
        }
    }

    #[test]
    fn read_write_try() {
        let lock = CoreRwLock::new(1);
        {
            let r1 = lock.read();
            let r2 = lock.read();
            assert_eq!(*r1 + *r2, 2);
            assert!(lock.try_write().is_none());
            assert!(lock.try_read().is_some());
            assert!(lock.is_locked());
            assert!(!lock.is_locked_exclusive());
        }
        {
            let mut w = lock.write();
            *w = 7;
            assert!(lock.try_read().is_none());
            assert!(lock.try_write().is_none());
            assert!(lock.try_upgradable_read().is_none());
            assert!(lock.is_locked_exclusive());
        }
        assert!(!lock.is_locked());
        assert_eq!(*lock.try_read().unwrap(), 7);
        // SAFETY: reading the raw word only.
        assert_eq!(word(unsafe { lock.raw() }), 0);
    }

    #[test]
    fn downgrade_keeps_writers_out() {
        let lock = QRwLock::new(0);
        let mut w = lock.write();
        *w = 3;
        let r = lock_api::RwLockWriteGuard::downgrade(w);
        assert_eq!(*r, 3);
        assert!(lock.try_write().is_none());
        assert!(lock.try_read().is_some());
        drop(r);
        assert!(lock.try_write().is_some());
        // SAFETY: reading the raw word only.
        assert_eq!(word(&unsafe { lock.raw() }.core), 0);
    }

    #[test]
    fn upgradable() {
        let lock = CoreRwLock::new(0);
        let u = lock.upgradable_read();
        assert!(lock.try_upgradable_read().is_none());
        assert!(lock.try_write().is_none());
        {
            let r = lock.read();
            assert_eq!(*r, 0);
        }
        let r = lock.read();
        let u = lock_api::RwLockUpgradableReadGuard::try_upgrade(u).unwrap_err();
        drop(r);
        let mut w = lock_api::RwLockUpgradableReadGuard::try_upgrade(u).unwrap();
        *w = 5;
        drop(w);
        let u = lock.upgradable_read();
        let w = lock_api::RwLockUpgradableReadGuard::upgrade(u);
        assert_eq!(*w, 5);
        drop(w);
        assert!(!lock.is_locked());
        // SAFETY: reading the raw word only.
        assert_eq!(word(unsafe { lock.raw() }), 0);
    }

    #[test]
    fn forgetting_guards_is_safe() {
        let lock = QRwLock::new(0);
        core::mem::forget(lock.read());
        assert!(lock.try_write().is_none());
        assert!(lock.try_read().is_some());
        let lock = QRwLock::new(0);
        core::mem::forget(lock.upgradable_read());
        assert!(lock.try_upgradable_read().is_none());
        let _ = lock.into_inner();
    }

    #[test]
    fn reader_overflow_panics_without_acquiring() {
        let raw: QRwCore = QRwCore::new();
        raw.cnts.store(READER_OVERFLOW, Ordering::Relaxed);
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| raw.lock_shared()));
        assert!(r.is_err());
        assert_eq!(word(&raw), READER_OVERFLOW);
        assert!(!raw.wait_lock.is_locked());
        assert!(raw.try_lock_shared().is_none());
    }

    /// While a waiter waits out a batch (`QUIET`) fast paths pass it and
    /// releases keep its bit.
    type P = DefaultPlatform;

    /// A timed write lock of `raw` that gives up after `ms`; unlocks it
    /// again if taken.
    fn write_within(raw: &QRwCore, ms: u64) -> bool {
        let deadline = || Deadline::after::<P>(core::time::Duration::from_millis(ms));
        let taken = raw.lock_exclusive_until(|| {}, deadline, Events::NONE);
        if taken {
            // SAFETY: we hold the write lock we just took.
            unsafe { raw.unlock_exclusive(GuardSend::new()) };
        }
        taken
    }

    #[test]
    fn turns_count_one_two_three() {
        assert_eq!(next_turn(0), TURN_ONE);
        assert_eq!(next_turn(TURN_ONE | W_LOCKED), 2 * TURN_ONE);
        assert_eq!(next_turn(2 * TURN_ONE), 3 * TURN_ONE);
        assert_eq!(next_turn((3 * TURN_ONE) | QUIET | ONE_READER), TURN_ONE);
    }

    #[test]
    fn a_turn_lets_only_its_holder_write_while_someone_waits() {
        let raw: QRwCore = QRwCore::new();
        // As if we had claimed turn 1, and another thread waits (it holds
        // the queue lock, as a word waiter does).
        raw.cnts.store(TURN_ONE, Ordering::Relaxed);
        batch::claim_turn::<P>(raw.addr(), TURN_ONE);
        raw.wait_lock.lock(Events::NONE);
        let w = raw.lock_exclusive();
        assert_eq!(
            word(&raw),
            TURN_ONE | W_LOCKED,
            "the holder writes past its turn"
        );
        // SAFETY: `w` came from `lock_exclusive` above.
        unsafe { raw.unlock_exclusive(w) };
        assert_eq!(word(&raw), TURN_ONE);
        // A thread that ran before the claim (no turn of its own) finds the
        // lock free, but queues behind the waiter.
        thread::scope(|s| {
            s.spawn(|| assert!(!write_within(&raw, 20), "a writer passed the turn"));
        });
        assert_eq!(word(&raw), TURN_ONE, "the writer that gave up left nothing");
        // And readers do not look at turns.
        let r = raw.try_lock_shared().unwrap();
        // SAFETY: `r` came from `try_lock_shared` above.
        unsafe { raw.unlock_shared(r) };
        raw.wait_lock.release(false);
    }

    #[test]
    fn a_turn_ends_when_nobody_waits() {
        let raw: QRwCore = QRwCore::new();
        raw.cnts.store(TURN_ONE, Ordering::Relaxed);
        batch::claim_turn::<P>(raw.addr(), TURN_ONE);
        let w = raw.lock_exclusive();
        assert_eq!(word(&raw), W_LOCKED, "the holder's write ended the turn");
        // SAFETY: `w` came from `lock_exclusive` above.
        unsafe { raw.unlock_exclusive(w) };
        assert_eq!(word(&raw), 0);
    }

    /// A turn ended by its holder's write, nobody waiting (`TURN` back to
    /// 0), left the holder's record behind; the next claim, numbered from
    /// an empty `TURN`, is turn 1 again, and the old holder, whose record
    /// still named turn 1 of this lock, wrote past the new claimant's turn
    /// while a waiter waited. (Not covered: a turn ended by another
    /// thread's write or an upgrade, or a number come round after three
    /// claims; those records last until the holder's next clock read.)
    #[test]
    fn an_ended_turn_is_not_its_old_holders_when_its_number_comes_back() {
        let raw: QRwCore = QRwCore::new();
        let (ended_tx, ended_rx) = std::sync::mpsc::channel();
        let (claimed_tx, claimed_rx) = std::sync::mpsc::channel::<()>();
        thread::scope(|s| {
            let raw = &raw;
            s.spawn(move || {
                // We claimed turn 1; nobody waits, so our write ends it.
                raw.cnts.store(TURN_ONE, Ordering::Relaxed);
                batch::claim_turn::<P>(raw.addr(), TURN_ONE);
                assert!(write_within(raw, 20));
                assert_eq!(word(raw), 0, "our write ended the turn");
                ended_tx.send(()).unwrap();
                claimed_rx.recv().unwrap();
                // Another thread's turn, and a waiter: we must queue.
                assert!(
                    !write_within(raw, 20),
                    "the old turn's holder wrote past another thread's turn 1"
                );
            });
            ended_rx.recv().unwrap();
            // Another thread claims: its turn is numbered from the empty
            // `TURN`, 1 again; then someone waits for the queue lock.
            assert_eq!(next_turn(word(raw)), TURN_ONE);
            raw.cnts.store(next_turn(word(raw)), Ordering::Relaxed);
            batch::claim_turn::<P>(raw.addr(), TURN_ONE);
            raw.wait_lock.lock(Events::NONE);
            claimed_tx.send(()).unwrap();
        });
        raw.wait_lock.release(false);
        assert_eq!(word(&raw), TURN_ONE);
    }

    #[test]
    fn a_writer_that_queued_takes_the_next_turn() {
        let raw: QRwCore = QRwCore::new();
        // Another thread's turn 1 (the writer, on a fresh thread, holds
        // none), and a waiter holds the queue lock: the writer queues.
        raw.cnts.store(TURN_ONE, Ordering::Relaxed);
        raw.wait_lock.lock(Events::NONE);
        thread::scope(|s| {
            s.spawn(|| {
                let w = raw.lock_exclusive();
                assert_eq!(word(&raw), W_LOCKED | (2 * TURN_ONE));
                assert_eq!(batch::turn_of::<P>(raw.addr(), 2 * TURN_ONE), Turn::Ours);
                // SAFETY: `w` came from `lock_exclusive` above.
                unsafe { raw.unlock_exclusive(w) };
            });
            // Until the writer waits for the queue lock (a fixed sleep was
            // too short under Miri: the writer found nobody waiting).
            while !raw.wait_lock.has_waiter() {
                thread::yield_now();
            }
            assert_eq!(word(&raw), TURN_ONE, "the writer passed the turn");
            raw.wait_lock.release(false);
        });
        assert_eq!(word(&raw), 2 * TURN_ONE);
    }

    #[test]
    fn anyone_ends_a_turn_nobody_waits_for() {
        let raw: QRwCore = QRwCore::new();
        // Another thread's turn; nobody waits.
        raw.cnts.store(TURN_ONE, Ordering::Relaxed);
        thread::scope(|s| {
            s.spawn(|| {
                let w = raw.lock_exclusive();
                assert_eq!(word(&raw), W_LOCKED, "the turn ended at once");
                // SAFETY: `w` came from `lock_exclusive` above.
                unsafe { raw.unlock_exclusive(w) };
            });
        });
        assert_eq!(word(&raw), 0);
    }

    #[test]
    fn a_queued_reader_takes_a_turn_from_a_running_writer() {
        let raw: QRwCore = QRwCore::new();
        let w = raw.lock_exclusive();
        thread::scope(|s| {
            let reader = s.spawn(|| {
                let r = raw.lock_shared();
                let turn = word(&raw) & TURN;
                assert_eq!(turn, TURN_ONE);
                assert_eq!(batch::turn_of::<P>(raw.addr(), turn), Turn::Ours);
                // SAFETY: `r` came from `lock_shared` above.
                unsafe { raw.unlock_shared(r) };
            });
            // The reader queues and waits out our batch (`QUIET`); then it
            // claims (`TURN`). (Released before, our lock could go to the
            // reader's optimistic spin, which takes no turn.) Either bit
            // will do: where our batch is over by the time the reader
            // queues (under Miri), `QUIET` lasts only until its claim.
            while word(&raw) & (QUIET | TURN) == 0 {
                thread::yield_now();
            }
            // SAFETY: `w` came from `lock_exclusive` above.
            unsafe { raw.unlock_exclusive(w) };
            reader.join().unwrap();
        });
        // The running writer (us) is not the turn's holder; with nobody
        // waiting, its write ends the turn.
        assert_eq!(batch::turn_of::<P>(raw.addr(), TURN_ONE), Turn::Theirs);
        assert!(write_within(&raw, 1_000));
        assert_eq!(word(&raw), 0);
    }

    #[test]
    fn a_turn_that_lasted_is_left_to_a_waiter() {
        let raw: QRwCore = QRwCore::new();
        raw.cnts.store(TURN_ONE, Ordering::Relaxed);
        batch::claim_turn::<P>(raw.addr(), TURN_ONE);
        raw.wait_lock.lock(Events::NONE);
        thread::sleep(core::time::Duration::from_nanos(TUNING.qrw_turn_ns));
        // The holder reads the clock on one write in
        // `qrw_turn_clock_writes`: the writes before go on...
        for _ in 1..TUNING.qrw_turn_clock_writes {
            assert!(write_within(&raw, 1_000));
        }
        // ... and at that one it finds its turn over: it queues behind the
        // waiter (and gives up here, its deadline passing).
        assert!(!write_within(&raw, 20));
        assert_eq!(batch::turn_of::<P>(raw.addr(), TURN_ONE), Turn::Theirs);
        raw.wait_lock.release(false);
        assert_eq!(word(&raw), TURN_ONE);
    }

    #[test]
    fn upgrades_pass_a_turn() {
        let raw: QRwCore = QRwCore::new();
        raw.cnts.store(2 * TURN_ONE, Ordering::Relaxed);
        let u = raw.lock_upgradable();
        // SAFETY: `u` came from `lock_upgradable` above.
        let w = unsafe { raw.upgrade(u) };
        assert_eq!(word(&raw), W_LOCKED, "the upgrade ended the turn");
        // SAFETY: `w` came from `upgrade` above.
        unsafe { raw.unlock_exclusive(w) };
        raw.cnts.store(3 * TURN_ONE, Ordering::Relaxed);
        let u = raw.lock_upgradable();
        // SAFETY: `u` came from `lock_upgradable` above.
        let w = unsafe { raw.try_upgrade(u) }.unwrap_or_else(|_| panic!("try_upgrade failed"));
        assert_eq!(word(&raw), W_LOCKED);
        // SAFETY: `w` came from `try_upgrade` above.
        unsafe { raw.unlock_exclusive(w) };
    }

    #[test]
    fn quiet_batch_lets_fast_paths_pass() {
        let raw: QRwCore = QRwCore::new();
        raw.cnts.store(QUIET, Ordering::Relaxed);
        let r = raw.lock_shared();
        assert!(raw.try_lock_exclusive().is_none());
        // SAFETY: `r` came from `lock_shared` above.
        unsafe { raw.unlock_shared(r) };
        let w = raw.lock_exclusive();
        assert_eq!(word(&raw), QUIET | W_LOCKED);
        // SAFETY: `w` came from `lock_exclusive` above.
        unsafe { raw.unlock_exclusive(w) };
        let w = raw.try_lock_exclusive().unwrap();
        // SAFETY: `w` came from `try_lock_exclusive` above.
        unsafe { raw.unlock_exclusive(w) };
        assert_eq!(word(&raw), QUIET);
    }

    /// Readers and writers exclude each other; writers see every write.
    #[test]
    fn mixed_contention() {
        let threads = if cfg!(miri) { 3 } else { 8 };
        let iters = if cfg!(miri) { 50 } else { 10_000 };
        let lock = Arc::new(QRwLock::new((0usize, 0usize)));
        let writes = Arc::new(AtomicUsize::new(0));
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                let (lock, writes) = (lock.clone(), writes.clone());
                thread::spawn(move || {
                    for i in 0..iters {
                        match (i + t) % 4 {
                            0 => {
                                let mut w = lock.write();
                                w.0 += 1;
                                w.1 += 1;
                                writes.fetch_add(1, Ordering::Relaxed);
                            }
                            1 if i % 8 == 1 => {
                                let u = lock.upgradable_read();
                                assert_eq!(u.0, u.1);
                                let mut w = lock_api::RwLockUpgradableReadGuard::upgrade(u);
                                w.0 += 1;
                                w.1 += 1;
                                writes.fetch_add(1, Ordering::Relaxed);
                                let r = lock_api::RwLockWriteGuard::downgrade(w);
                                assert_eq!(r.0, r.1);
                            }
                            _ => {
                                let r = lock.read();
                                assert_eq!(r.0, r.1);
                            }
                        }
                    }
                })
            })
            .collect();
        for h in handles {
            h.join().unwrap();
        }
        let v = lock.read();
        assert_eq!(v.0, writes.load(Ordering::Relaxed));
        drop(v);
        // SAFETY: reading the raw word only. (An idle lock may still carry
        // the last turn.)
        assert_eq!(word(&unsafe { lock.raw() }.core) & !TURN, 0);
    }
}
