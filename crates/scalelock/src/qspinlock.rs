//! `RawQSpinLock`: a 4-byte queued spinlock with bounded batches.
//!
//! After Linux's `kernel/locking/qspinlock.c` (locked byte, pending bit, MCS
//! tail) and its paravirt "hybrid queued/unfair" mode, made to work in user
//! space where any waiter or holder can be preempted.
//!
//! # The lock word
//!
//! ```text
//!  byte 0              byte 1                         bytes 2..3
//! +-------------------+------------------------------+-----------------+
//! | locked: FREE /    | flags: KICK|HEAD_PARKED|     | tail (node      |
//! | LOCKED / RESERVED |   GRANTED|HANDOFF|PENDING    | index, 0: none) |
//! +-------------------+------------------------------+-----------------+
//! ```
//! Three separate atomics (`AtomicU8`, `AtomicU8`, `AtomicU16`), never
//! accessed with a wider atomic, so the Rust memory model (and Miri, and
//! loom) see no mixed-size accesses. That is what lets unlock be a plain
//! byte store.
//!
//! | field | meaning | written by |
//! | --- | --- | --- |
//! | `locked` = `FREE` | free; anyone may take it (`cmpxchg FREE -> LOCKED`) | a releaser |
//! | `locked` = `LOCKED` | held | the acquirer's `cmpxchg` |
//! | `locked` = `RESERVED` | free, only the word waiter may take it | a releaser that set `GRANTED` (it saw `HANDOFF`, or is `unlock_fair`) |
//! | `PENDING` | one thread, the *word waiter*, is first in line | a contender that found neither word waiter nor queue, or a queue head without predecessor; cleared by its owner in the RMW after it acquires, or handed on to its queue successor in that RMW; or, by a timed word waiter that gives up, cleared or handed on in an RMW that finds `GRANTED` clear |
//! | `HANDOFF` | the word waiter claims the lock: releases reserve it | the word waiter (or a contender that took a reserved lock whose word waiter did not come); cleared with `PENDING`, or when the word waiter hands `PENDING` on |
//! | `GRANTED` | a release has committed to reserving the lock for the word waiter: `locked` is `RESERVED`, or the releaser stores it next (or a contender that took the reservation clears `GRANTED` next); the word waiter can no longer give up | the releaser, in an RMW that finds `PENDING` (and `HANDOFF`, unless fair); cleared by the RMW of whoever takes the reserved lock |
//! | `HEAD_PARKED` | a queue head without predecessor sleeps until `PENDING` clears | that head; cleared by the word waiter's acquiring RMW, or by its giving-up RMW when it leaves no successor (a give-up that hands `PENDING` on keeps it: then no head without predecessor exists), which then wakes it |
//! | `KICK` | a hint to the word waiter: the lock has room for more threads (a contender found it free, and still free a moment later, during the batch) | such a contender, in an RMW that finds `PENDING` set and `HANDOFF` and `KICK` clear; left set by the word waiter that takes the hint up (one kick per batch), cleared by its acquiring or giving-up RMW |
//! | `tail` | index of the last MCS queue node | `swap` by each newcomer; `cmpxchg -> 0` by the last node leaving; `cmpxchg` back to its predecessor by a last node that gives up |
//!
//! A queue node (`qnode`) is `WAITING`/`PARKED` while its owner waits, and
//! becomes `HEAD` (made head and word waiter by its predecessor, with
//! `PENDING`) or `FIRST` (first in the queue without `PENDING`: its
//! predecessor gave up as a queued waiter, see `qspinlock/queue.rs`).
//!
//! # Invariants
//! 1. `PENDING` is cleared only by its owner: in the RMW that follows its
//!    acquisition (or handed on there), or in the RMW by which a timed word
//!    waiter gives up (handing it on to its queue successor if it has one),
//!    which fails while `GRANTED` is set. So a word waiter exists while
//!    `PENDING` is set, and it exists until it takes a lock that a release
//!    committed to reserve for it.
//! 2. `HANDOFF`, `GRANTED` and `RESERVED` only exist while `PENDING` is set,
//!    so the lock is never reserved for nobody: `HANDOFF` and `GRANTED` are
//!    set only by RMWs that see `PENDING`, and the RMW that clears `PENDING`
//!    clears `HANDOFF` with it and finds `GRANTED` clear; `RESERVED` is
//!    stored only after a `GRANTED` RMW, and stays until someone takes it,
//!    during which `GRANTED` keeps `PENDING` set.
//! 3. A newcomer becomes the word waiter only if there is no queue, and
//!    queues otherwise: it never passes a queued waiter that way.
//! 4. Only its owner and its predecessor write into a queue node (its
//!    successor writes the `next` link), and a node leaves the queue only
//!    with no other thread left to write into it: a waiter that gives up
//!    first unlinks itself from its predecessor (or finds itself already
//!    taken and signalled), then passes its successor on (see
//!    `qspinlock/queue.rs`). So a thread's node is free for its next `lock`
//!    the moment the last one returns.
//!
//! # Who waits where (count the cache lines)
//! - **Uncontended**: `lock` is one `cmpxchg` on `locked`; `unlock` is a
//!   load of `flags` (same line, owned), one release store, and a load of
//!   a static parking bucket that nobody writes unless somebody sleeps.
//!   (While a word waiter sleeps through its batch, `unlock` also counts
//!   down a thread-local counter: see "Preemption".)
//!   After the store, `unlock` touches no memory of the lock: the next owner
//!   may free it at once (as with std's futex mutex).
//! - **Optimistic spin**: a contender polls the word for a moment and takes
//!   a free lock: critical sections between stretches of other work are
//!   over before queueing would be. It takes a free lock only if it is
//!   still free `qs_barge_settle_relaxes` later: a holder in a tight loop
//!   has re-taken it by then, and the contender queues (with nobody first
//!   in line, as the word waiter), so that the holder's batch goes on;
//!   threads that do other work between critical sections leave it free
//!   for longer. Without the settle while a word waiter slept through its
//!   batch, once a preempted holder had made a queue form, every thread
//!   that met the lock held joined the queue, whose sleepers come back one
//!   batch at a time, and one thread ran at a time (a convoy). Without it
//!   while nobody waited on the word, two threads in a tight loop on two
//!   CPUs took the lock from each other at nearly every release, its line
//!   moving each time, at under half the throughput of batches
//!   (docs/measurements.md has the figures for both).
//!   Such a contender also *kicks* the sleeping word waiter (`KICK`, and a
//!   wake-up) before it takes the lock: the lock has room for more threads.
//!   A contender whose last contended take of the lock was in this spin
//!   polls twice as long while a word waiter waits: the lock's holders
//!   leave it free between critical sections, and waiting that out beats
//!   a queue whose sleepers come back one wake-up at a time. Threads in a
//!   tight loop take the lock as word waiters and keep the short budget.
//! - **Word waiter** (`PENDING`): lets the running holder keep the lock for
//!   a batch (`batch_ns`), two short spins and then a timed sleep on the
//!   lock's parking bucket, touching the lock's line twice in all. Then it
//!   claims the lock (`HANDOFF`) and watches closely: the holder's next
//!   release reserves it. It never takes a lock it merely sees free before
//!   its claim: a lock seen free is most often a running holder between
//!   two acquisitions (free a third of the time in a tight loop), and
//!   looking again cannot tell, because our loads take the holder's line
//!   and hold it up, free.
//!   Except after a kick: then it watches the lock for a moment
//!   (`qs_kick_watch_polls`) and takes it, ending the batch early, if it
//!   stays free for `qs_kick_free_ns`, which a holder in a tight loop never
//!   leaves it. Threads that work between critical sections (a
//!   microsecond inside, two outside) leave that room, and without kicks
//!   the threads that queued while a holder was preempted came back one
//!   per batch only: the queue kept most threads asleep and a CPU went
//!   idle, however much room the lock had. It takes one kick up per batch
//!   (it leaves `KICK` set, so no contender wakes it again): on a lock
//!   busy most of the time a watch rarely pays, and each wake-up and
//!   watch takes CPU time the holders need.
//!   And before it sleeps through the batch it measures how long the
//!   holder leaves the lock free between critical sections (three gaps,
//!   closely watched); if every gap lasts `qs_gap_min_ns`, it does not
//!   sleep but takes the lock the moment it is free, as parking_lot's
//!   spinning waiter does (`wait::GapWatch`). Threads with work on both
//!   sides of their critical sections then share the lock, where a
//!   sleeping word waiter left a CPU idle and the lock did one thread's
//!   work; a holder in a tight loop leaves gaps of a cache-line transfer
//!   or two, and keeps its batch. The waiter never yields to learn
//!   whether its CPU has other work: a yield that runs another thread
//!   keeps it away past the end of the batch, and the holder's batch runs
//!   on (it cost 16 threads in a tight loop their fairness). A queue head
//!   whose predecessor took the lock by a hand-off (a tight loop) and
//!   gave it its CPU does not watch: the holder waits for that CPU.
//! - **Queue**: further contenders queue MCS-style: `tail.swap(me)`, link
//!   into the predecessor's node, spin briefly on *their own* node's line,
//!   then sleep on it. Only the predecessor writes that line: when it
//!   *acquires* the lock as word waiter it makes its successor the head and
//!   the word waiter (handing it `PENDING`, and the time, so that the
//!   successor's batch wait runs from then): the successor has a whole batch
//!   to wake up, so the wake-up latency is off the lock's path, and there is
//!   no moment without a word waiter in which newcomers could pass the
//!   queue.
//! - **Head without predecessor** (the queue formed behind a word waiter
//!   that never queued): polls `flags` until `PENDING` clears, then sleeps
//!   with `HEAD_PARKED` until the word waiter's acquiring RMW wakes it.
//!
//! # Timed acquisitions: giving up (`RawMutexTimed`)
//! `try_lock_for`/`try_lock_until` wait as `lock` does, bounding each sleep
//! by the time left; once the deadline has passed (on
//! [`Platform::now_ns`]), the waiter leaves from wherever it is, without a
//! trace:
//! - **Spinning or unqueued**: returns; it left nothing in the lock.
//! - **Queued**: unlinks its node from its predecessor, then hands its
//!   successor to that predecessor (or makes it first) or gives the tail
//!   back, after Linux's `osq_lock` unqueue (see `qspinlock/queue.rs`). If
//!   its predecessor has just taken it as successor (it acquired the lock,
//!   or gave up itself), the signal comes at once: the waiter is then the
//!   word waiter and gives up as such.
//! - **Word waiter**: gives `PENDING` up in one RMW on `flags` (to its queue
//!   successor, made head with a fresh batch, or to nobody, waking a head
//!   without predecessor), which fails if a release has already committed to
//!   reserve the lock for it (`GRANTED`): then it takes the lock (a timed
//!   acquisition may succeed late). A reserving release commits with an RMW
//!   that still finds `PENDING` (and `HANDOFF`, unless fair); the two RMWs
//!   are ordered, so either the release sees the waiter gone and releases
//!   normally, or the waiter sees the reservation and takes it. The lock is
//!   never reserved for nobody (invariant 2) and no hand-off is lost: the
//!   waiter's successor (if any) gets `PENDING`, as when it acquires.
//!
//! A timed-out acquisition returns after the deadline, late by at most the
//! steps above: each waits only for a thread that is in the middle of a
//! few instructions of the lock's protocol (a successor linking itself, a
//! releaser between its `GRANTED` RMW and its store), unless that thread
//! is preempted there; and by the wait between two looks at the clock: a
//! contender's yield (a time slice at worst, when other threads want the
//! CPU) or a word waiter's measure of the holder (`qs_gap_observe_ns`).
//! Where `now_ns` is a constant 0 (no clock), a nonzero timeout never
//! passes (see
//! [`TimedPlatform`](crate::platform::TimedPlatform)).
//!
//! # Fair and fast: batches (see `wait::batch`)
//! The running holder re-takes the lock through the fast path for a batch;
//! then the word waiter gets it through `RESERVED`, and the old holder's
//! next `lock` finds it taken and queues behind everyone. The old holder is
//! still running, though, and a lock it sees free between the new holder's
//! acquisitions would be its for the taking: so its next `lock` skips the
//! optimistic spin and queues (a thread-local note, `wait::batch`; its
//! first attempt almost always finds the lock reserved or held). Bypass is
//! bounded: newcomers pass the word waiter only during its batch, through
//! the fast path or by taking a lock that stays free (see "Optimistic
//! spin"), and never pass a queued waiter to become the word waiter
//! (invariant 3).
//!
//! # Preemption (the paravirt part)
//! - Queued waiters sleep on their own nodes: a preempted queued waiter
//!   delays nobody until it becomes head, and by then it has a batch to
//!   get going.
//! - A head woken late runs its predecessor's batch long: a thread woken
//!   from a busy CPU is often queued on that CPU (behind the new holder,
//!   which has just started its time slice) until its next tick, while the
//!   other CPU goes idle. So a new holder that took the lock by a hand-off
//!   (`RESERVED`: the old holder was running a tight loop) yields once
//!   after waking its successor, which then runs at once, and the holder
//!   gets the CPU back when the successor goes to sleep for the batch
//!   (where the successor was woken on an idle CPU, the yield returns at
//!   once). So does one that found the lock free after its claim if its
//!   own previous take of the lock was a hand-off: in a tight loop that
//!   is an old holder preempted between two critical sections, the CPUs
//!   as busy as before, while threads that work between critical
//!   sections find it free take after take, and there a yield would only
//!   end batches early (`wait::batch::yields_to_successor`). And every
//!   batch a head ends is settled in the holder's *batch debt*
//!   (`wait::batch::BatchDebt`): a holder whose batches ran long gets
//!   shorter ones until it has paid, so that the threads' shares even out
//!   when wake-ups are late for any reason.
//! - What the yield and the debt cannot do: the yield does not always run
//!   the successor (the scheduler picks whom to run), and a successor
//!   that did run on the holder's CPU goes to sleep there, so its timed
//!   wake-up at the end of the batch can wait behind the holder the same
//!   way. The debt is paid back one shorter batch per turn around the
//!   queue, so the shares even out over many turns, not within a few:
//!   with many threads, a run of a few hundred milliseconds can end with
//!   debts unpaid (docs/measurements.md has the figures, traced with
//!   `perf sched`).
//!   So the holder watches too: a release that finds the word waiter
//!   still asleep (`PENDING` without `HANDOFF`) counts down a thread-local
//!   counter, and about every `qs_overrun_check_ns` reads the clock; a
//!   holder that has re-taken the lock for `qs_overrun_yield_ns` past the
//!   batch yields once after that release, so that a waiter whose wake-up
//!   waits behind it on its CPU runs and claims the lock
//!   (`wait::batch::holder_overran`). A holder in a tight loop then queues
//!   at its next `lock`, as after a hand-over; one that works between its
//!   critical sections keeps its spin.
//! - Equal time is still not equal acquisitions: a holder's pace varies
//!   from turn to turn (a woken thread shares its CPU, it is preempted for
//!   part of the turn), so over a short run the threads' counts drift
//!   apart even with the debt settled. So the lock has a *turn quota*
//!   (`wait::quota`): the releases its holders make in `batch_ns`,
//!   averaged over their turns. The holder's watch above counts its
//!   releases anyway; once it has made the quota it hands the lock over to
//!   the sleeping word waiter itself, as a fair unlock does
//!   (`batch::Overran::HandOver`), and its next `lock` queues. A word
//!   waiter of a lock with a quota waits up to `qs_turn_bound_ns` (longer
//!   than `batch_ns`, so a slow turn gets time to make the quota) and
//!   settles no debt. The price: the lock stays reserved while the woken
//!   word waiter gets to run (tens of microseconds per turn on a VM), where
//!   before it woke on its own timer and was running at the claim.
//! - A word waiter that is not running when its batch ends does not reserve
//!   the lock: it claims it only when it runs again, and the running threads
//!   use the lock meanwhile. If it stops running after claiming, a spinning
//!   contender takes the reserved lock after `qs_steal_ns` and reserves it
//!   again on release.
//! - A word waiter that has claimed the lock but still sees it held after
//!   `park_ns` (the holder is preempted, maybe by the waiter itself on the
//!   holder's CPU, or sleeps in its critical section) sleeps until a
//!   release instead of spinning.
//! - A contender that finds the lock held spins a few times, then yields
//!   between its polls for as long as a yield runs another thread (there
//!   are more runnable threads than CPUs): the preempted holder, or a
//!   thread with work to do, gets the CPU, and the contender stays runnable
//!   instead of going to sleep in the queue, which comes back one wake-up
//!   at a time. A yield that returns at once means nobody else wants this
//!   CPU (the holder runs on another one): it spins again
//!   (`wait::SpinThenYield`). Queued waiters never yield, nor does the
//!   word waiter (see `wait::backoff`).
//!
//! # Sleeping until a release without an atomic unlock
//! Releases are plain stores, which return nothing, so a sleeper cannot
//! announce itself in the lock word: it announces itself in the lock's
//! static parking bucket, runs the *heavy* fence and re-checks `locked`;
//! a release stores, runs the *light* fence, and checks the bucket (see
//! `wait::parking`). With membarrier the light fence is a compiler fence.
//!
//! # Memory orderings
//! - Acquiring (`cmpxchg` to `LOCKED`, Acquire) pairs with the previous
//!   holder's Release store (of `FREE` or `RESERVED`): critical sections
//!   are totally ordered.
//! - `tail.swap` is AcqRel: Release publishes our node's reset to the
//!   successor that will write into it; Acquire makes the predecessor's
//!   node valid to us.
//! - `node.next` store Release / taking swap Acquire (its plain loads are
//!   Relaxed) and `node.state` swap Release / load Acquire pass queue
//!   position only; no user data flows through them.
//! - `HEAD_PARKED` is set by a Release RMW and seen by the word waiter's
//!   Acquire RMW, so the head's parking ticket precedes the wake.
//! - `GRANTED` is set and tested by Relaxed RMWs: they only decide, in the
//!   modification order of `flags`, between a reserving release and a word
//!   waiter giving up; the lock itself passes by the `RESERVED` store and
//!   the taker's Acquire `cmpxchg`.
//! - Leaving the queue: links (`next`) are stored Release and taken by
//!   Acquire RMWs, so a node's reset by its owner precedes every write into
//!   it by the thread that takes it from a link; the tail given back to a
//!   predecessor is an AcqRel `cmpxchg`, like the newcomer's `swap`.
//!
//! # Nodes and per-thread state
//! Queue nodes come from the platform (`Platform::queue_node`): one per
//! thread on std. A thread without a node (table exhausted, or locking from
//! a thread-local destructor) never queues: it polls, keeps trying to
//! become the word waiter (possible whenever there is no queue), and sleeps
//! until a release in between. Correct, not FIFO. On a platform without
//! per-thread state (`Platform::with_local`) the thread that handed the lock
//! over spins before queueing like anybody: correct, with more bypass.
//!
//! # What is not supported
//! Locking from a signal handler that interrupted a thread inside this
//! lock (the handler can wait for the interrupted thread: it holds the
//! lock, or its hand-off waits for the thread's unlinked node; the std
//! node table gives the handler no node while the thread's is in use), and
//! sharing a lock between processes (`MAP_SHARED`: futexes are private,
//! queue nodes are per process).

use core::marker::PhantomData;

use lock_api::{RawMutex, RawMutexFair};

use crate::bump;
use crate::class::{Access, ClassRef, LockKind};
use crate::events::Events;
use crate::hook::{self, Held};

use crate::platform::{DefaultPlatform, Platform};
use crate::qnode::NodeIndex;
use crate::sync::atomic::{AtomicU8, AtomicU16, Ordering};
use crate::wait::{
    Backoff, BatchClock, Deadline, GapWatch, QuietPoll, SpinThenYield, TUNING, WaiterTake, batch,
    parking, quota, shortest_free_gap,
};

/// `locked`: free.
const FREE: u8 = 0;
/// `locked`: held.
const LOCKED: u8 = 1;
/// `locked`: free, reserved for the word waiter.
const RESERVED: u8 = 2;

/// A word waiter exists (the pending bit).
const PENDING: u8 = 1 << 0;
/// The word waiter's batch is over: releases reserve the lock for it.
const HANDOFF: u8 = 1 << 1;
/// A queue head without predecessor sleeps until `PENDING` clears.
const HEAD_PARKED: u8 = 1 << 2;
/// A release committed to reserving the lock for the word waiter, which can
/// no longer give up (see the module docs).
const GRANTED: u8 = 1 << 3;
/// A contender took (or is about to take) a free lock that stayed free
/// while the word waiter slept through its batch: the lock has room for
/// more threads, and the word waiter may come for it early (a hint; see
/// "Word waiter" in the module docs).
const KICK: u8 = 1 << 4;

/// What a waiter made head by its predecessor knows of the batch it waits
/// out: when it started, and whose it is (the predecessor's node, if it
/// acquired the lock; `None` if it gave up); and whether the predecessor
/// judged the holders to run a tight loop (`batch::yields_to_successor`).
#[derive(Clone, Copy)]
pub(crate) struct MadeHead {
    since: u64,
    by: Option<NodeIndex>,
    tight_loop: bool,
}

/// The lock itself, without statistics or lockdep: the word described in
/// the module documentation. [`RawQSpinLock`] is this plus a lock class and
/// the hooks; locks built on a queued spinlock (`RawQRwLock`'s queue lock,
/// `SeqLock`'s writer lock) use the core directly, so that one acquisition
/// is counted once, under the outer lock's class.
#[repr(C, align(4))]
pub(crate) struct QSpinCore<P: Platform = DefaultPlatform> {
    locked: AtomicU8,
    flags: AtomicU8,
    tail: AtomicU16,
    _platform: PhantomData<fn() -> P>,
}

/// A mutual-exclusion lock protecting a `T`, built on [`RawQSpinLock`].
pub type QSpinLock<T> = lock_api::Mutex<RawQSpinLock, T>;
/// The guard of a [`QSpinLock`].
pub type QSpinLockGuard<'a, T> = lock_api::MutexGuard<'a, RawQSpinLock, T>;

impl<P: Platform> QSpinCore<P> {
    /// An unlocked lock.
    #[cfg(not(loom))]
    pub(crate) const fn new() -> Self {
        Self {
            locked: AtomicU8::new(FREE),
            flags: AtomicU8::new(0),
            tail: AtomicU16::new(0),
            _platform: PhantomData,
        }
    }

    /// An unlocked lock.
    #[cfg(loom)]
    pub(crate) fn new() -> Self {
        Self {
            locked: AtomicU8::new(FREE),
            flags: AtomicU8::new(0),
            tail: AtomicU16::new(0),
            _platform: PhantomData,
        }
    }

    #[inline]
    fn addr(&self) -> usize {
        self as *const Self as usize
    }

    /// Takes the lock if it is `from` (`FREE`, or `RESERVED` for the word
    /// waiter and for a steal).
    #[inline]
    fn take(&self, from: u8) -> bool {
        self.locked
            // Acquire pairs with the previous holder's Release store.
            .compare_exchange(from, LOCKED, Ordering::Acquire, Ordering::Relaxed)
            .is_ok()
    }

    /// The fast path: take a free lock.
    #[inline]
    pub(crate) fn try_lock_fast(&self) -> bool {
        self.take(FREE)
    }

    /// The contended paths of `lock`; `ev`: where their events count.
    #[cold]
    pub(crate) fn lock_slow(&self, ev: Events) {
        let acquired = self.lock_contended(Deadline::NEVER, ev);
        debug_assert!(acquired);
    }

    /// The contended paths: true holding the lock, false once `deadline`
    /// passed (then nothing of ours is left in the lock). A lock taken here
    /// starts a new turn of the caller's (`batch::stretch_restarts`).
    #[inline]
    fn lock_contended(&self, deadline: Deadline, ev: Events) -> bool {
        let took = self.lock_contended_paths(deadline, ev);
        if took {
            batch::stretch_restarts::<P>(self.addr());
        }
        took
    }

    /// `lock_contended`'s paths: spin, wait as the word waiter, or queue.
    #[inline]
    fn lock_contended_paths(&self, deadline: Deadline, ev: Events) -> bool {
        // A thread that just handed the lock to the word waiter is still
        // running and would take it back whenever it finds it free between
        // the new holder's acquisitions: it queues at once instead.
        if !batch::just_handed_off::<P>(self.addr()) {
            let after_spin = batch::took_in_spin::<P>(self.addr());
            let took = self.spin_before_queueing(deadline, ev, after_spin);
            batch::record_contended_take::<P>(self.addr(), took);
            if took {
                return true;
            }
        }
        if self.try_become_pending() {
            ev.pending_path();
            return self.wait_as_pending(None, None, deadline, ev);
        }
        match P::queue_node() {
            Some(index) => {
                let took = self.lock_queued(index, deadline, ev);
                P::queue_node_returned(index);
                took
            }
            None => self.lock_unqueued(deadline, ev),
        }
    }

    /// The optimistic spin: takes a lock that is free and stays free, or a
    /// reserved lock whose word waiter does not come for `qs_steal_ns` (it
    /// is not running). True if it took the lock. Between polls it spins,
    /// then yields while yields run other threads (`SpinThenYield`); a
    /// yield can last a time slice, so it stops once `deadline` passed. It
    /// gives up at once (false: queue) when a lock it saw free is taken
    /// again within the settle.
    ///
    /// `after_spin`: the thread's last contended take of this lock was in
    /// this spin. Then, while a word waiter waits, it polls up to
    /// `qs_pre_queue_polls_after_spin` times: with a microsecond inside the
    /// critical sections and two outside, 8-16 threads on 2 CPUs, 10 polls
    /// sent most contenders into the queue, whose sleepers come back one
    /// wake-up at a time, and qspinlock ran at 0.7-0.8x parking_lot. Only
    /// then: a second contender polling longer in a tight loop takes the
    /// holder's line (2 threads on 2 CPUs, where no word waiter waits, ran
    /// at 0.38x), and threads in a tight loop take the lock as word
    /// waiters, so they keep the short budget and the queue's order (more
    /// polls for everyone cost 16 threads' fairness). docs/measurements.md
    /// has the figures.
    fn spin_before_queueing(&self, deadline: Deadline, ev: Events, after_spin: bool) -> bool {
        let mut wait = SpinThenYield::new();
        let mut reserved: Option<BatchClock> = None;
        while (wait.waits() < TUNING.qs_pre_queue_polls
            || (after_spin
                && wait.waits() < TUNING.qs_pre_queue_polls_after_spin
                && self.flags.load(Ordering::Relaxed) & PENDING != 0))
            && !deadline.passed::<P>()
        {
            match self.locked.load(Ordering::Relaxed) {
                // Take a lock that stays free (its holder does other work
                // between critical sections), not one a running holder is
                // about to re-take.
                FREE => {
                    for _ in 0..TUNING.qs_barge_settle_relaxes {
                        P::relax();
                    }
                    if self.locked.load(Ordering::Relaxed) != FREE {
                        // Re-taken within the settle: a holder running a
                        // batch in a tight loop. Queue (and sleep) now: more
                        // polls and yields here only pull the lock's line
                        // away from it, and while they last the process
                        // keeps a second CPU busy for nothing (threads
                        // outnumbering CPUs ran at 0.3-0.6x parking_lot in
                        // such spells, which then lasted whole runs). With
                        // nobody on the word we become its waiter, and the
                        // holder runs its batch alone instead of trading
                        // the lock with us at every release.
                        return false;
                    }
                    // The lock has room: wake a sleeping word waiter to use
                    // it too (before we take it, so that it is not our
                    // critical section its wake-up interrupts).
                    if self.flags.load(Ordering::Relaxed) & (PENDING | HANDOFF | KICK) == PENDING {
                        self.kick_word_waiter();
                    }
                    if self.try_lock_fast() {
                        return true;
                    }
                }
                RESERVED => {
                    // Keep watching while the lock is reserved: it is about
                    // to change hands, or its word waiter cannot run.
                    let clock = reserved.get_or_insert_with(BatchClock::start::<P>);
                    if clock.elapsed::<P>(TUNING.qs_steal_ns, TUNING.qs_steal_polls) {
                        if self.take(RESERVED) {
                            self.took_reservation();
                            ev.steal();
                            return true;
                        }
                        reserved = None;
                    }
                    wait.spin::<P>();
                    continue;
                }
                _ => reserved = None,
            }
            wait.wait::<P>(TUNING.qs_pre_queue_spins);
        }
        false
    }

    /// Tells the word waiter, asleep through its batch, that the lock has
    /// room (`KICK`), and wakes it: in one RMW that still finds the word
    /// waiter there (`PENDING`) before it claimed (`HANDOFF`) or was kicked
    /// (`KICK`). (A plain `fetch_or` after the look could land after the
    /// word waiter's acquiring RMW and leave `KICK` on a lock without a word
    /// waiter, found by the `qspinlock_timed_waiters_give_up` shuttle
    /// model.) Relaxed: a hint; the lock itself passes by `locked`. At most
    /// one wake-up per batch: the word waiter leaves `KICK` set once it
    /// took a kick up.
    #[cold]
    fn kick_word_waiter(&self) {
        let kicked = self
            .flags
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |f| {
                (f & (PENDING | HANDOFF | KICK) == PENDING).then_some(f | KICK)
            })
            .is_ok();
        if kicked {
            parking::unpark_all::<P>(self.addr());
        }
    }

    /// A kicked word waiter's test of a lock seen free: whether it stays
    /// free for `qs_kick_free_ns` (or `qs_kick_free_polls` polls). A holder
    /// running a tight loop re-takes it within that (even if our loads slow
    /// it down), one that works between critical sections does not.
    fn stays_free(&self) -> bool {
        let mut clock = BatchClock::start::<P>();
        loop {
            for _ in 0..TUNING.qs_barge_settle_relaxes {
                P::relax();
            }
            if self.locked.load(Ordering::Relaxed) != FREE {
                return false;
            }
            if clock.elapsed::<P>(TUNING.qs_kick_free_ns, TUNING.qs_kick_free_polls) {
                return true;
            }
        }
    }

    /// One wait of a word waiter's `GapWatch` (out of line: most word
    /// waiters watch once per batch and then sleep through it, and the loop
    /// they wait in stays small); false once it does not watch.
    #[cold]
    #[inline(never)]
    fn watch_gaps(&self, gaps: &mut GapWatch) -> bool {
        gaps.wait::<P>(|| shortest_free_gap::<P>(|| self.locked.load(Ordering::Relaxed) == FREE))
    }

    /// We took a reserved lock whose word waiter did not come: the
    /// reservation is consumed (`GRANTED` goes), and our release must
    /// reserve the lock again. `GRANTED` was set until now, so the word
    /// waiter could not give up: `PENDING` is set (invariant 2), and
    /// `HANDOFF` says so to every release. Relaxed: see `GRANTED`.
    #[cold]
    fn took_reservation(&self) {
        let _ = self
            .flags
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |f| {
                let handoff = if f & PENDING != 0 { HANDOFF } else { 0 };
                Some((f & !GRANTED) | handoff)
            });
    }

    /// The re-check of a sleeper until a release (after its heavy fence):
    /// whether the lock is still held.
    #[inline]
    fn still_held(&self) -> bool {
        self.locked.load(Ordering::Relaxed) == LOCKED
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
            // Relaxed: publishes nothing; the lock itself is taken by an
            // Acquire cmpxchg on `locked`.
            if self
                .flags
                .compare_exchange_weak(flags, flags | PENDING, Ordering::Relaxed, Ordering::Relaxed)
                .is_ok()
            {
                return true;
            }
        }
    }

    /// The word waiter's loop: owns `PENDING`. `queue` is our queue node if
    /// a successor is linked behind it (we take it from there at the end);
    /// `head` says when the holder's batch started and whose it is, if our
    /// predecessor made us head.
    /// Returns true holding the lock, with `PENDING`,
    /// `HANDOFF`, `GRANTED` and `HEAD_PARKED` cleared and our successor (if
    /// any) made head and word waiter; false once `deadline` passed and we
    /// gave `PENDING` up (see `give_up_pending`).
    fn wait_as_pending(
        &self,
        mut queue: Option<NodeIndex>,
        head: Option<MadeHead>,
        deadline: Deadline,
        ev: Events,
    ) -> bool {
        let mut batch = match head {
            Some(h) => BatchClock::since(h.since),
            None => BatchClock::start::<P>(),
        };
        // The holder's batch: with a turn quota (`wait::quota`) the longer
        // bound, within which the holder hands the lock over when it made
        // the quota; else `batch_ns`, shorter if it owes batch time
        // (`wait::batch`).
        let holder = head.and_then(|h| h.by);
        let quota = quota::of(self.addr());
        let batch_ns = match holder {
            Some(n) if quota == 0 => P::node(n).debt.batch_ns(self.addr()),
            _ => batch::turn_bound(quota),
        };
        let mut quiet = QuietPoll::new();
        // Once we set HANDOFF: the clock of our wait for the holder.
        let mut claimed: Option<BatchClock> = None;
        // Our successor, once taken from our node (`give_up_pending`).
        let mut successor = None;
        // How we took the lock (a hand-off: the holder was running a tight
        // loop); it decides whether our successor gets our CPU once
        // (`make_head`, `batch::yields_to_successor`).
        let mut take = WaiterTake::Early;
        // Polls left in which we watch the lock after a kick: we take it
        // early if it stays free.
        let mut watch = 0u32;
        // Whether we took a kick up in this batch. We leave `KICK` set
        // after it, so that no contender wakes us again before our batch
        // ends: with the lock busy most of the time (a microsecond inside
        // the critical sections, one outside, 8-16 threads on 2 CPUs) a
        // watch rarely finds it free for long, while every contender that
        // saw it free for a moment kicked again, each kick a wake-up and a
        // watch of spinning taken from the two CPUs the holders need
        // (qspinlock ran at 0.7x parking_lot there; docs/measurements.md has
        // the figures).
        let mut kicked = false;
        // First we measure the holder's gaps; long ones, and we take the
        // lock in one instead of sleeping through the batch (`GapWatch`).
        // Not after a predecessor that found the holders in a tight loop
        // (it took the lock by a hand-off) and gave us its CPU: the holder
        // it left waits for that CPU while we would watch (16 threads in a
        // tight loop were a little fairer without that watch;
        // docs/measurements.md has the figures).
        let mut gaps = GapWatch::new(!head.is_some_and(|h| h.tight_loop));
        // Past our deadline, while a release that committed to reserve the
        // lock for us (`GRANTED`) has yet to store it.
        let mut granted = Backoff::new();
        loop {
            // Our ticket, before we look: a reserving release after this
            // (a fair unlock) ends our quiet sleep below.
            let ticket = parking::prepare(self.addr());
            let taken = match self.locked.load(Ordering::Relaxed) {
                // Reserved for us: handed over by a release.
                RESERVED => {
                    let taken = self.take(RESERVED);
                    if taken {
                        ev.handoff();
                        take = WaiterTake::HandedOff;
                    }
                    taken
                }
                // A free lock once we claimed it; before that the running
                // threads have their batch, unless a kick says the lock has
                // room and it stays free a while. (A lock seen free is often
                // a running holder between two acquisitions, and a second
                // look soon after cannot tell: our loads take the holder's
                // cache line and hold it up, free.)
                FREE if claimed.is_some() => {
                    let taken = self.try_lock_fast();
                    if taken {
                        take = WaiterTake::FreeAfterClaim;
                    }
                    taken
                }
                FREE if watch > 0 => self.stays_free() && self.try_lock_fast(),
                // The holder works between its critical sections: take it
                // the moment it is free.
                FREE if gaps.grabs() => self.try_lock_fast(),
                _ => false,
            };
            if taken {
                break;
            }
            if deadline.passed::<P>() {
                if self.give_up_pending(&mut queue, &mut successor) {
                    return false;
                }
                // A release reserves the lock for us (GRANTED): it is ours
                // within moments, unless the releaser was preempted between
                // its RMW and its store, maybe on our CPU: back off to
                // sleeping so that it gets to run.
                granted.snooze::<P>();
                continue;
            }
            let left = deadline.remaining_ns::<P>();
            match &mut claimed {
                None => match batch.remaining_ns::<P>(batch_ns, TUNING.batch_polls) {
                    // The batch is over: claim the next release. Relaxed: a
                    // request; the lock passes by the release store and our
                    // Acquire cmpxchg.
                    None => {
                        self.flags.fetch_or(HANDOFF, Ordering::Relaxed);
                        ev.batch_end();
                        claimed = Some(BatchClock::start::<P>());
                    }
                    // Kicked: watch the lock for a moment.
                    Some(_) if watch > 0 => {
                        watch -= 1;
                        for _ in 0..TUNING.claimed_poll_relaxes {
                            P::relax();
                        }
                    }
                    // A kick: take it up, once a batch (`KICK` stays set:
                    // no later one wakes us). Relaxed: a hint, as the kick.
                    Some(_) if !kicked && self.flags.load(Ordering::Relaxed) & KICK != 0 => {
                        kicked = true;
                        watch = TUNING.qs_kick_watch_polls;
                    }
                    // Watch the holder's gaps (`GapWatch`).
                    Some(_) if gaps.watching() && self.watch_gaps(&mut gaps) => {}
                    // The holder runs its batch: wait quietly, off its line
                    // (a couple of short spins, then a sleep for the rest of
                    // the batch, cut short by a kick).
                    Some(rest) => quiet.wait_with::<P>(|ns| {
                        parking::park_timeout::<P>(ticket, ns.min(rest).min(left));
                    }),
                },
                Some(clock) => {
                    if !clock.elapsed::<P>(TUNING.park_ns, TUNING.park_polls) {
                        // Claimed: the holder's next release is ours; watch
                        // closely (never yield: the lock would wait for us).
                        for _ in 0..TUNING.claimed_poll_relaxes {
                            P::relax();
                        }
                        continue;
                    }
                    // The holder keeps the lock although we claimed it: it
                    // is preempted (maybe by us, on its CPU) or sleeps.
                    // Sleep until a release.
                    self.sleep_until_released(left, ev);
                    *clock = BatchClock::start::<P>();
                }
            }
        }
        if let (Some(h), Some(n), 0) = (head, holder, quota) {
            // The holder's batch ends here: settle it in its debt (with a
            // quota the holder's share is counted in acquisitions instead).
            P::node(n)
                .debt
                .settle(self.addr(), P::now_ns().saturating_sub(h.since));
        }
        if let Some(index) = queue {
            successor = self.take_successor(index);
        }
        // Invariant 1: only we clear PENDING, and only now. With a queued
        // successor we do not clear it but hand it on: the successor owns
        // it from here, so there is no moment without a word waiter in
        // which newcomers could pass the queue. Acquire pairs with a
        // sleeping head's Release `HEAD_PARKED` (its ticket precedes our
        // wake).
        let keep = if successor.is_some() { PENDING } else { 0 };
        let old = self.flags.fetch_and(
            !(PENDING | HANDOFF | GRANTED | HEAD_PARKED | KICK) | keep,
            Ordering::Acquire,
        );
        if old & HEAD_PARKED != 0 {
            parking::unpark_all::<P>(self.addr());
        }
        let yield_after = batch::yields_to_successor::<P>(self.addr(), take);
        if let Some(next) = successor {
            // Our successor is queue head and word waiter now: it has our
            // whole batch to wake up, timed from now.
            Self::make_head(next, queue, yield_after);
        }
        true
    }

    /// A word waiter whose deadline passed gives `PENDING` up: hands it to
    /// its queue successor (taken from `queue` into `successor`; made head
    /// with a fresh batch) or clears it (waking a head without predecessor
    /// that sleeps until it clears). One RMW decides against the reserving
    /// release's (`reserve_for_waiter`): it fails if a release has already
    /// committed to reserve the lock for us (`GRANTED`); then we keep
    /// waiting, and keep the successor we took, for the lock is ours within
    /// moments.
    #[cold]
    fn give_up_pending(
        &self,
        queue: &mut Option<NodeIndex>,
        successor: &mut Option<NodeIndex>,
    ) -> bool {
        if let Some(index) = queue.take() {
            *successor = self.take_successor(index);
        }
        // Our successor starts its own batch: no claim of ours stays.
        let clear = match successor {
            Some(_) => HANDOFF | KICK,
            None => PENDING | HANDOFF | HEAD_PARKED | KICK,
        };
        // Acquire pairs with a sleeping head's Release `HEAD_PARKED`, as in
        // the acquiring RMW.
        let Ok(old) = self
            .flags
            .fetch_update(Ordering::Acquire, Ordering::Relaxed, |f| {
                (f & GRANTED == 0).then_some(f & !clear)
            })
        else {
            return false;
        };
        if old & clear & HEAD_PARKED != 0 {
            parking::unpark_all::<P>(self.addr());
        }
        if let Some(next) = successor.take() {
            Self::make_head(next, None, false);
        }
        true
    }

    /// No queue node: poll; become the word waiter when there is no queue;
    /// take a reserved lock whose word waiter does not come; sleep until a
    /// release in between. False once `deadline` passed.
    fn lock_unqueued(&self, deadline: Deadline, ev: Events) -> bool {
        loop {
            if self.spin_before_queueing(deadline, ev, false) || self.try_lock_fast() {
                return true;
            }
            if self.try_become_pending() {
                ev.pending_path();
                return self.wait_as_pending(None, None, deadline, ev);
            }
            if deadline.passed::<P>() {
                return false;
            }
            let mut backoff = Backoff::new();
            while backoff.steps() < TUNING.qs_unqueued_steps {
                if self.locked.load(Ordering::Relaxed) != LOCKED {
                    break;
                }
                backoff.snooze::<P>();
            }
            self.sleep_until_released(deadline.remaining_ns::<P>(), ev);
        }
    }

    /// Sleeps until a release (see `parking::sleep_until_released`), for
    /// at most `timeout_ns`; a sleep is a park, and a wake that finds the
    /// lock still held is spurious.
    fn sleep_until_released(&self, timeout_ns: u64, ev: Events) {
        if parking::sleep_until_released::<P>(
            self.addr(),
            || self.still_held(),
            || ev.park(),
            timeout_ns,
        ) {
            ev.wake(self.still_held());
        }
    }

    /// Releases the lock: one Release store, then only the static parking
    /// bucket is read. With a word waiter that claimed the lock (or a fair
    /// unlock) see `reserve_for_waiter`; true if it reserved the lock for
    /// the word waiter (and woke it).
    #[inline]
    pub(crate) fn release(&self, fair: bool) -> bool {
        // A word waiter seen here may give up before we store (a timed
        // one): the reservation is decided by an RMW that still sees it.
        let flags = self.flags.load(Ordering::Relaxed);
        if flags & PENDING != 0 && (fair || flags & HANDOFF != 0) && self.reserve_for_waiter(fair) {
            return true;
        }
        self.release_free();
        false
    }

    /// The release's store of `FREE`, and the wake-up of anyone asleep
    /// until a release.
    #[inline(always)]
    fn release_free(&self) {
        // The address is taken before the store: after it the lock may be
        // freed, and even a `&self` made from it would dangle.
        let addr = self.addr();
        // Release pairs with the next acquirer's Acquire cmpxchg.
        self.locked.store(FREE, Ordering::Release);
        // Pairs with the heavy fence of `parking::sleep_until_released`.
        P::light_fence();
        parking::wake_after_release::<P>(addr);
    }

    /// `RawQSpinLock`'s unfair release: [`release`](Self::release), and a
    /// holder that has re-taken the lock long past the batch while the word
    /// waiter has not claimed it yet yields its CPU once after the release
    /// (`batch::holder_overran`): the waiter's wake-up is most likely
    /// queued behind it.
    #[inline(always)]
    pub(crate) fn release_watching(&self) {
        // As in `release`; the fast path's code is as small as there.
        let flags = self.flags.load(Ordering::Relaxed);
        if flags & PENDING != 0
            && (flags & HANDOFF != 0 || batch::overrun_check_due::<P>())
            && self.release_with_waiter(flags)
        {
            return;
        }
        self.release_free();
    }

    /// `release_watching` with a word waiter (`flags`, as loaded) that
    /// claimed the lock, or whose batch's clock is due
    /// (`batch::overrun_check_due`): true if it released the lock,
    /// reserving it for a waiter that claimed it, or releasing it and
    /// yielding (`batch::holder_overran`; then our next `lock` queues, as
    /// after a hand-over: the waiter we yield to takes the lock); false if
    /// the caller releases it as usual.
    #[cold]
    #[inline(never)]
    fn release_with_waiter(&self, flags: u8) -> bool {
        let addr = self.addr();
        if flags & HANDOFF != 0 {
            let handed = self.reserve_for_waiter(false);
            if handed {
                batch::turn_ended::<P>(addr);
            }
            return handed;
        }
        let overran = batch::holder_overran::<P>(addr);
        if overran == batch::Overran::No {
            return false;
        }
        if overran == batch::Overran::HandOver {
            // Our turn's quota is made: hand the lock over as a fair unlock
            // does (the word waiter wakes and takes it; our next `lock`
            // queues). If the word waiter gave up or handed its place on
            // meanwhile, this is a plain release.
            if self.release(true) {
                batch::turn_ended::<P>(addr);
            }
            return true;
        }
        if self.release(false) {
            // The word waiter claimed meanwhile and we reserved the lock
            // for it: a hand-over, which ends our turn.
            batch::turn_ended::<P>(addr);
        } else {
            if overran == batch::Overran::YieldAndQueue {
                batch::handing_off::<P>(addr);
            }
            P::yield_now();
        }
        true
    }

    /// A release that hands the lock to the word waiter, which claimed it
    /// (`HANDOFF`) or is handed it by a fair unlock: commits with an RMW that
    /// still finds the word waiter there (`GRANTED`, invariant 2), then
    /// reserves the lock and wakes the waiter. False, with nothing done, if
    /// the word waiter gave up meanwhile or handed its place on (its
    /// successor has not claimed yet).
    #[cold]
    fn reserve_for_waiter(&self, fair: bool) -> bool {
        // Relaxed: see `GRANTED` in the module docs.
        if self
            .flags
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |f| {
                (f & PENDING != 0 && (fair || f & HANDOFF != 0)).then_some(f | GRANTED)
            })
            .is_err()
        {
            return false;
        }
        // As in `release`: nothing of `self` is used after the store.
        let addr = self.addr();
        // We hand the lock over: our next `lock` must not take it back.
        batch::handing_off::<P>(addr);
        // Release pairs with the word waiter's Acquire cmpxchg.
        self.locked.store(RESERVED, Ordering::Release);
        // Pairs with the heavy fence of `parking::sleep_until_released`.
        P::light_fence();
        // The word waiter may sleep on its ticket alone (quietly).
        parking::wake_all_after_release::<P>(addr);
        true
    }

    /// `wait_unlocked`'s first look; true if the lock is held. A free (or
    /// reserved) lock is confirmed with a `cmpxchg` that writes the value it
    /// reads (AcqRel): every later acquirer's `cmpxchg` reads from it (or
    /// from a later write), so it sees the caller's earlier stores
    /// (StoreLoad), and Acquire pairs with the release of the last holder.
    /// A held lock is not written: the caller waits for its holder.
    #[inline]
    pub(crate) fn barrier_look(&self) -> bool {
        let mut v = self.locked.load(Ordering::Relaxed);
        while v != LOCKED {
            match self
                .locked
                .compare_exchange(v, v, Ordering::AcqRel, Ordering::Relaxed)
            {
                Ok(_) => return false,
                Err(now) => v = now,
            }
        }
        true
    }

    /// The state word, for diagnostics: (locked, flags, tail).
    pub(crate) fn state(&self) -> (u8, u8, u16) {
        (
            self.locked.load(Ordering::Relaxed),
            self.flags.load(Ordering::Relaxed),
            self.tail.load(Ordering::Relaxed),
        )
    }

    /// Takes the lock (no acquisition hooks; slow-path events go to `ev`).
    #[inline]
    pub(crate) fn lock(&self, ev: Events) {
        if !self.try_lock_fast() {
            self.lock_slow(ev);
        }
    }

    /// Whether the lock is held (a reserved lock is not held).
    #[inline]
    pub(crate) fn is_locked(&self) -> bool {
        self.locked.load(Ordering::Relaxed) == LOCKED
    }

    /// Whether the lock is held or reserved for the word waiter (a
    /// snapshot): `RawMutex::is_locked`.
    #[inline]
    pub(crate) fn is_locked_or_reserved(&self) -> bool {
        self.locked.load(Ordering::Relaxed) != FREE
    }

    /// Whether anybody holds the lock, has it reserved, or waits for it (a
    /// snapshot).
    #[inline]
    pub(crate) fn is_wanted(&self) -> bool {
        self.locked.load(Ordering::Relaxed) != FREE || self.has_waiter()
    }

    /// Tests: sets or clears `PENDING`, standing in for a first waiter.
    #[cfg(all(test, not(loom)))]
    pub(crate) fn set_pending_for_test(&self, on: bool) {
        if on {
            self.flags.fetch_or(PENDING, Ordering::Relaxed);
        } else {
            self.flags.fetch_and(!PENDING, Ordering::Relaxed);
        }
    }

    /// Whether a thread waits for the lock, first in line or queued (a
    /// snapshot).
    #[inline]
    pub(crate) fn has_waiter(&self) -> bool {
        self.flags.load(Ordering::Relaxed) & PENDING != 0 || self.tail.load(Ordering::Relaxed) != 0
    }
}

/// A 4-byte queued spinlock; see the module documentation.
///
/// `P` is the platform: how waiters sleep and where queue nodes live.
///
/// A lock is in a [lock class](crate::LockClass): `new` and `INIT` put it in
/// the `QSpinLock` type class, [`with_class`](Self::with_class) in another.
/// Without the `stats` and `lockdep` features the class is zero-sized and
/// the lock is its 4-byte word; with them it is 24 bytes, and the guard
/// state ([`Held`]) carries what the release must record.
///
/// Guards are `Send`: with lockdep, a guard released on another thread
/// leaves its entry on the held stack of the thread that took it (see the
/// `lockdep` module).
#[repr(C)]
pub struct RawQSpinLock<P: Platform = DefaultPlatform> {
    pub(crate) core: QSpinCore<P>,
    /// Zero-sized without the `stats` and `lockdep` features.
    pub(crate) class: ClassRef,
}

impl<P: Platform> RawQSpinLock<P> {
    /// An unlocked lock, in the `QSpinLock` type class.
    #[cfg(not(loom))]
    pub const fn new() -> Self {
        Self::with_class(ClassRef::TYPE)
    }

    /// An unlocked lock, in the `QSpinLock` type class.
    #[cfg(loom)]
    pub fn new() -> Self {
        Self::with_class(ClassRef::TYPE)
    }

    /// An unlocked lock in lock class `class`; with lock_api's `const`
    /// `Mutex::from_raw` it makes a classed `static`:
    ///
    /// ```
    /// use scalelock::{ClassRef, LockClass, QSpinLock, RawQSpinLock};
    ///
    /// static P2M: LockClass = LockClass::new("p2m");
    /// static TABLE: QSpinLock<u64> =
    ///     QSpinLock::from_raw(RawQSpinLock::with_class(ClassRef::of(&P2M)), 0);
    /// # *TABLE.lock() += 1;
    /// ```
    #[cfg(not(loom))]
    pub const fn with_class(class: ClassRef) -> Self {
        Self {
            core: QSpinCore::new(),
            class,
        }
    }

    /// An unlocked lock in lock class `class`.
    #[cfg(loom)]
    pub fn with_class(class: ClassRef) -> Self {
        Self {
            core: QSpinCore::new(),
            class,
        }
    }

    #[inline]
    fn addr(&self) -> usize {
        self as *const Self as usize
    }

    /// Where the core's slow-path events count: this lock's class, as
    /// writes (a mutex's acquisitions are exclusive).
    #[inline]
    pub(crate) fn events(&self) -> Events {
        Events::of(self.class, LockKind::QSpinLock, Access::Write)
    }

    /// The state word, for diagnostics: (locked, flags, tail).
    #[doc(hidden)]
    pub fn state(&self) -> (u8, u8, u16) {
        self.core.state()
    }
}

impl<P: Platform> Default for RawQSpinLock<P> {
    fn default() -> Self {
        Self::new()
    }
}

impl<P: Platform> core::fmt::Debug for RawQSpinLock<P> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        self.core.fmt(f)
    }
}

impl<P: Platform> core::fmt::Debug for QSpinCore<P> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        let (locked, flags, tail) = self.state();
        f.debug_struct("RawQSpinLock")
            .field(
                "locked",
                &match locked {
                    FREE => "free",
                    LOCKED => "locked",
                    RESERVED => "reserved",
                    _ => "?",
                },
            )
            .field("pending", &(flags & PENDING != 0))
            .field("handoff", &(flags & HANDOFF != 0))
            .field("granted", &(flags & GRANTED != 0))
            .field("head_parked", &(flags & HEAD_PARKED != 0))
            .field("tail", &tail)
            .finish()
    }
}

// SAFETY: `locked` becomes LOCKED only by a successful Acquire cmpxchg (from
// FREE, or from RESERVED) and leaves LOCKED only by the holder's Release
// store, so at most one guard exists per lock and critical sections are
// ordered. No waiter keeps a reference into the lock word after `lock`
// returns (nodes and parking buckets belong to the platform and the crate,
// not the lock), and `unlock` reads no memory of the lock after its release
// store, so forgetting a guard only leaves the lock held, and moving,
// dropping or freeing an unlocked lock is sound even right after another
// thread's `unlock` made it available.
unsafe impl<P: Platform> RawMutex for RawQSpinLock<P> {
    #[allow(clippy::declare_interior_mutable_const)]
    #[cfg(not(loom))]
    const INIT: Self = Self::new();
    #[allow(clippy::declare_interior_mutable_const)]
    #[cfg(loom)]
    const INIT: Self = panic!("use RawQSpinLock::new() under loom");

    /// What statistics and lockdep remember of the hold (zero-sized
    /// without the features).
    type Guard = Held;

    // Always: with the hooks compiled in, the compiler left it out of line
    // in `locktest`'s loop, a call on every acquisition (0.5-0.7x the
    // contended throughput).
    #[inline(always)]
    fn lock(&self) -> Held {
        // With the hooks switched off (or not compiled in), the plain fast
        // path, apart from the recorded one: sharing one path, the two kept
        // the hook state alive through it and re-tested it (18 more
        // instructions per lock/unlock than no hooks at all, against 10).
        // Acquisitions begun switched off count no slow-path events.
        let active = hook::active_bits();
        if active == 0 {
            if !self.core.try_lock_fast() {
                self.core.lock_slow(Events::NONE);
            }
            return Held::NONE;
        }
        // Statistics alone: an acquisition that does not wait is counted
        // after it (`hook::counted_at_once`), with no `Pending` built before
        // it and no wait tested after it; a failed fast path starts over
        // below, counted as contended if it fails again.
        if hook::stats_alone(active) && self.core.try_lock_fast() {
            return hook::counted_at_once(self.class, LockKind::QSpinLock, Access::Write);
        }
        let mut p = hook::start(self.class, LockKind::QSpinLock, self.addr(), Access::Write);
        if !self.core.try_lock_fast() {
            p.contended();
            self.core.lock_slow(p.events(self.events()));
        }
        p.acquired()
    }

    /// Takes the lock if it is free. Fails while the lock is reserved for
    /// the word waiter, the thread first in line (see the module docs).
    #[inline]
    fn try_lock(&self) -> Option<Held> {
        if self.core.try_lock_fast() {
            Some(hook::try_acquired(
                self.class,
                LockKind::QSpinLock,
                self.addr(),
                Access::Write,
            ))
        } else {
            None
        }
    }

    #[inline(always)]
    unsafe fn unlock(&self, guard: Held) {
        // Taken before the release: the lock may be freed after it.
        let addr = self.addr();
        self.core.release_watching();
        guard.release(addr);
    }

    /// Whether the lock is held, or reserved for the word waiter (a fair
    /// unlock or a hand-off has passed it on: no `try_lock` can take it, and
    /// its next holder is decided).
    #[inline]
    fn is_locked(&self) -> bool {
        self.core.is_locked_or_reserved()
    }
}

// SAFETY: `unlock_fair` releases exactly like `unlock`; it only stores
// RESERVED instead of FREE (for a word waiter that cannot give up any more,
// invariant 2), which restricts who may acquire next.
unsafe impl<P: Platform> RawMutexFair for RawQSpinLock<P> {
    /// Hands the lock to the thread first in line. If a word waiter exists
    /// (and is not giving up, a timed one), the lock is reserved for it: no
    /// other thread can take it first (a
    /// spinning contender takes it only if the word waiter does not come
    /// within `qs_steal_ns`, i.e. is not running, and reserves it again on
    /// release). If nobody waits on the word — no waiter at all, or the
    /// queue's head is still waking up to claim it — the lock is released
    /// as by `unlock`, and a newcomer may take it before that head.
    #[inline]
    unsafe fn unlock_fair(&self, guard: Held) {
        // As in `unlock`.
        let addr = self.addr();
        self.core.release(true);
        guard.release(addr);
    }

    /// Lets the thread first in line have the lock, if any: a fair unlock
    /// and a new `lock`; nothing if nobody waits on the word or in the
    /// queue (a thread still spinning before it queues is not seen, as
    /// parking_lot's `bump` does not see one that has not parked).
    #[inline]
    unsafe fn bump(&self, guard: &mut Held) {
        // SAFETY: we hold the lock, whose state is `guard`.
        unsafe {
            bump::bump(
                guard,
                |h| h,
                self.addr(),
                || self.core.has_waiter(),
                |h| self.unlock_fair(h),
                || self.lock(),
            );
        }
    }
}

mod queue;
mod timed;

#[cfg(all(test, not(loom)))]
mod tests;

/// Loom models that need the lock's internals: they wait until a waiter is
/// really asleep (or reserved for) before releasing, so the sleep/wake
/// protocols are explored, not just spinning. A lost wake-up is a loom
/// deadlock. Run: `RUSTFLAGS="--cfg loom" cargo test -p scalelock --lib
/// --release qspinlock::loom_models`
#[cfg(all(test, loom))]
mod loom_models;
