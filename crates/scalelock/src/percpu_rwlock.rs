//! `RawPerCpuRwLock`: a reader-writer lock whose read fast path writes no
//! cache line that any other reader writes.
//!
//! After Xen's per-CPU rwlocks (the grant-table and p2m locks), BRAVO (Dice
//! & Kogan, ATC'19) and folly's `SharedMutex`.
//!
//! # The algorithm
//! Each lock is a [`RawQRwLock`] (the *underlying* lock: fair, queued) plus a
//! state word with a unique lock id and the reader bias (`FAST`; Xen's
//! barrier is `FAST` clear). Locks of one class share a [`ReaderTable`];
//! every reader context (thread) owns one slot in it.
//!
//! - **Read, fast**: if `FAST` is set and the thread's slot is free, store
//!   the lock's id in the slot, fence, and re-check `FAST`. Still set: the
//!   read lock is held. Cleared meanwhile: a writer is revoking; clear the
//!   slot and take the slow path. Unlock: store 0 to the slot, then wake a
//!   writer if one sleeps on that slot.
//! - **Read, slow** (bias off, slot busy with another lock, or no slot):
//!   take the underlying read lock. Readers that arrive during a write thus
//!   queue fairly behind it. The read is recorded (in the thread's slot with
//!   `UNDERLYING`, or in a thread-local list when the thread has no slot),
//!   so a recursive read never queues behind a writer that waits for the
//!   outer one. An inhibited read tries the underlying lock's read RMW
//!   first and records itself after (it holds the lock then, so it needs
//!   no recursion check); if a writer holds or waits, it takes the RMW back
//!   and looks for an outer read of its own before it queues.
//! - **Write**: take the underlying write lock (excluding other writers and
//!   slow readers). If `FAST` is set, *revoke* it: clear `FAST`, fence, then
//!   for every slot in use (the platform's `reader_slots_in_use`) wait
//!   while that slot names this lock (spin, then park on the slot).
//!   Unlock: release the underlying lock, first setting the state the
//!   next readers find (see "Modes");
//!   where that state has `FAST`, writes are sparse and threads queue on
//!   the underlying lock, fairly (see "Writes end the underlying lock's
//!   batches").
//!
//! # Modes: which fence a read pays, chosen by the writes
//! The fast read and the revoking write are the store-buffering pattern
//! (`store slot; fence; load state` against `RMW state; fence; load slot`):
//! both fences are needed, and one of them may be dear. Three modes:
//!
//! | mode | state | a read costs | a write costs | chosen when |
//! | --- | --- | --- | --- | --- |
//! | biased | `FAST` | slot store, *compiler* fence, two loads | a `membarrier` (the *heavy* fence) and a slot scan | writes are rare against the revocation's cost, or the reads between them pay for it |
//! | symmetric | `FAST \| SYM` | slot store, a full fence, two loads | a plain full fence and a slot scan | from biased: the reads per write pay for a symmetric revocation, and their full fences cost less than the membarrier (which also interrupts other busy CPUs); then as long as the class reads faster symmetric than inhibited (measured) |
//! | inhibited | no `FAST` | the underlying read lock, plus a load | the underlying write lock | too few reads per write, a revocation was just paid (BRAVO), or the class read faster inhibited than symmetric (measured) |
//!
//! Each write decides the next mode, under the underlying write lock. Slot
//! reads (biased and symmetric) count themselves on their slot's line; a
//! revoking writer sums the counts while it scans, so it knows the reads
//! since the class's last revocation; `R` is the class's average of those
//! per revocation (each new figure weighing 1/8: two writes that meet by
//! chance say little of the read share), or the latest figure if more.
//! - from **biased**, after a revocation costing `C`, of which the heavy
//!   fence `F`:
//!   - if the bias had been on for at least `pc_keep_factor × C'`, where
//!     `C'` is the cheaper of `C` and the class's previous revocation (one
//!     revocation that waited for a preempted reader is not the typical
//!     cost), the writes are sparse enough that revoking at each costs
//!     little; or if `R × S ≥ C + F`, `S` being what a slot read saves
//!     (`pc_read_saving_ns` while one thread has a reader slot,
//!     `pc_read_saving_shared_ns` once several do, whose reads on the
//!     underlying lock would bounce its line; the reads paid for
//!     the revocation against reads on the underlying lock; the fence
//!     counts twice, as the CPUs it interrupted spent about as long in
//!     it) and `R × Φ ≥ 2F`, `Φ` being what a full fence costs a reader
//!     on this machine (measured once per process, `fence_cost.rs`; the
//!     symmetric mode would have cost the reads that much): stay
//!     **biased** (the bias comes back at unlock);
//!   - else, if its heavy fence, and the class's previous one, each took
//!     at least `pc_sym_cost_ns` (other CPUs ran our threads; one dear
//!     fence alone is more likely an interrupt), or the reads paid for the
//!     revocation but their full fences cost less than the heavy one, or
//!     the reads would pay for a symmetric revocation (`R` at least
//!     `pc_sym_min_reads`, and `R × S` at least `pc_sym_pay_factor` times
//!     `C − F`), go **symmetric**;
//!   - else stay **inhibited** for `m × C` (BRAVO), where the class's
//!     multiplier `m` doubles when a revocation follows the bias's return
//!     quickly and shrinks when it does not; a slow reader re-enables the
//!     bias once the window is over (reading the clock on one slow read in
//!     `pc_clock_every`).
//! - from **symmetric**: two writes in a row further apart than
//!   `pc_rare_ns`, or than `pc_keep_factor` heavy fences (the cheaper of
//!   the class's last two; one long gap among writes at random times is
//!   chance), and one symmetric revocation in `pc_sym_probe` once the
//!   class's last heavy fence began `pc_probe_fences` times its cost ago
//!   (to measure the heavy fence again, at a small share of the time), go
//!   back to **biased**; else, if the class's average reads per write
//!   number fewer than `pc_sym_min_reads` (a handful of reads between
//!   writes never pays for revoking at each), go **inhibited** for
//!   `pc_dense_window_ns` (with `SYM` kept, so the bias comes back
//!   symmetric); else the *mode race* decides
//!   (`percpu_rwlock/mode_race.rs`): the class measures its reads per
//!   millisecond in symmetric phases and in inhibited windows, and a
//!   symmetric phase that read slower than the last window ends in a
//!   window. Whether the symmetric mode's full fence and revocations cost
//!   less than the underlying lock's read RMWs depends on what moving that
//!   lock's line between CPUs costs, which differs by an order of
//!   magnitude between machines (next to nothing between two vCPUs that
//!   share a core, 100+ ns across sockets), so no constant decides it.
//! - a table built `with_inhibition(0)` never inhibits (Xen's policy): each
//!   write re-enables the bias at unlock.
//!
//! Mode changes are race-free: `SYM` is read by the reader *before* it
//! chooses its fence, and only a writer changes it; the revocation that
//! follows the state a reader's re-check reads uses that state's fence.
//! So a read holds only if its re-check finds a mode whose revocation
//! pairs with the fence it paid: a full-fence read, `FAST` in either mode
//! (the heavy fence and the full one both pair with it); a light-fence
//! read, the biased mode itself. Going symmetric, the writer has cleared
//! `FAST` and issued the heavy fence (a biased revocation; `SYM` comes
//! with `FAST` at its unlock): a reader that read the old mode and stored
//! to its slot before that fence is waited for, and one that stored after
//! it finds `FAST | SYM` and steps aside (else the next, symmetric,
//! revocation's plain fence would meet its compiler fence: store
//! buffering with one fence). Leaving symmetric, the bias comes back with
//! `SYM` clear and every later revocation issues the heavy fence, which
//! also pairs with a reader's full fence. (`tests/loom_percpu.rs` models
//! both switches with SeqCst light fences; `loom_models.rs`,
//! `a_stale_biased_read_vs_a_symmetric_revocation`, the light fence a
//! compiler fence.)
//!
//! # Fences
//! The biased read's fence is the platform's *unchecked* light fence
//! ([`Platform::light_fence_asymmetric`]; std: a compiler fence, paired with
//! `membarrier`), so the read fast path never looks at how the process's
//! fences were set up. That is sound because a lock is biased (`FAST`
//! without `SYM`) only after [`Platform::asymmetric_fences`] said yes, which
//! then stays true: where `membarrier` is unavailable, a lock that would
//! become biased becomes symmetric instead (`bias()`: at construction, at
//! an `INIT` lock's first use, and when a write brings the bias back). A
//! biased read marks its slot word `BIASED`, so that its unlock, too, uses
//! the unchecked fence; the other reads use the checked one.
//!
//! # Why per-thread slots, not per-CPU
//! In user space a thread can be preempted between "which CPU am I on" and
//! the slot store, and another thread then runs on that CPU: a per-CPU slot
//! must be claimed with a compare-and-swap (plus a `getcpu`), and the guard
//! must remember the slot because the reader may migrate before unlock. A
//! per-thread slot is written only by its thread, so the fast path is a
//! plain store and migration is harmless (`cargo bench -p scalelock --bench
//! percpu_rwlock`, section "primitives", compares the two). A kernel
//! platform whose read sections run with preemption off can return the CPU
//! id from [`Platform::reader_slot`]: the algorithm is the same.
//!
//! # Layout (16 bytes + the shared table)
//! ```text
//! inner: RawQRwLock<P>   8 bytes: count word + queue lock
//! state: AtomicU64       bit 63 MARK | 62..24 id | 23..8 stamp | 7..2 table | 1 SYM | 0 FAST
//! ```
//! - `MARK`: always set, so that a test of the mode's two bits can carry
//!   the hooks' run-time switch in its mask's top bits (`lock_shared`).
//! - `id` (39 bits): unique per lock (wrapping after 2^39 locks, never 0),
//!   assigned on first use (0 = none yet; `INIT` must be a constant). Slots
//!   name locks by id, never by address, so a lock dropped while a
//!   forgotten guard still names it in a slot cannot make a new lock at
//!   that address wait for the ghost.
//! - `stamp` (16 bits, units of 2^6 ns, compared with wrapping arithmetic
//!   over 4.2 ms): inhibited, the end of the window; symmetric, the time of
//!   the last write; biased, when the bias came back (the slow read that
//!   found the window over, or the write unlock that brought it back).
//! - `table`: registry index of the lock's [`ReaderTable`] (0 = default).
//! - `SYM`: the symmetric mode (see above).
//! - `FAST`: the reader bias. Set only by someone holding the underlying
//!   lock (a slow reader, or a writer at unlock); cleared only by a writer
//!   holding it exclusively (an upgrade revokes only once the underlying
//!   upgrade made it exclusive).
//!
//! A slot word is `id | BIASED | UNDERLYING | depth` (see `reader_table`).
//!
//! # Invariants
//! 1. A thread read-holds the lock iff its slot names the lock with depth
//!    ≥ 1 and it saw `FAST` set after storing it (a read that paid the
//!    light fence: `FAST` without `SYM`) (fast), or it holds the
//!    underlying read lock (slow; marked `UNDERLYING` in its slot or its
//!    thread-local list, or only counted in its thread-local
//!    `CountedReads`: the common inhibited read).
//! 2. Only a slot's owner thread writes it. Read guards are `!Send`, so the
//!    unlock happens on that thread; the thread keeps its index until it
//!    exits with its slot free in every table (else the index is retired).
//! 3. While a writer holds the lock, no slot names it without `UNDERLYING`,
//!    and `FAST` is clear or the writer is the one who will clear it before
//!    returning from `lock_exclusive`.
//! 4. `FAST` clear implies the lock has its id: every constructor sets
//!    `FAST`, and only a revocation clears it, after `ensure_id` (no write
//!    of the state drops the id). So an inhibited state is one test,
//!    `FAST` clear, on the inline read and write paths.
//! 5. `FAST` without `SYM` (biased) implies the lock has its id: a lock
//!    built without one starts symmetric (`NO_ID_YET`), and `assign_id`
//!    sets the id and the mode in one write. So the biased read, the
//!    commonest, tests the mode alone; the symmetric read also tests for
//!    the id (an id-less lock's reads take the slow path, which assigns
//!    it).
//!
//! # Why it is correct
//! A fast reader does `store slot; fence; load state`, a revoking writer
//! `store state (clear FAST); fence; load slot` — the store-buffering
//! pattern. Biased, the reader's light fence pairs with the writer's heavy
//! one (membarrier's contract, see `platform/std_fence.rs`); symmetric,
//! both are `fence(SeqCst)`. Either way at least one side sees the other: if the
//! reader sees `FAST` clear, it backs out; otherwise the writer's scan,
//! which reads `Platform::reader_slot_bound` after its fence, sees the slot
//! (the reader raised the bound before its slot store) and waits for it. A
//! writer that finds `FAST` clear skips the scan: `FAST` was cleared by a
//! previous writer that waited out every fast reader, and since then only
//! holders of the underlying lock could have set it, which the writer's
//! Acquire of the underlying lock would have shown it.
//!
//! # Memory orderings
//! - Fast read: the state re-load is Acquire and pairs with the Release
//!   write that last set `FAST`: a writer's unlock (a store, made holding
//!   the underlying lock exclusively: a writer is the state's only writer
//!   then) or a slow reader's re-enabling CAS (made holding the underlying
//!   read lock, so after the last writer's release of it). Either way the
//!   reader happens after the last writer, with no release sequence
//!   needed (the state's Relaxed writes either clear `FAST`, which sends
//!   the reader away, or give an `INIT` lock its id and mode before any
//!   writer).
//! - Fast unlock: Release store of 0 (pairs with the writer's Acquire scan),
//!   light fence, Relaxed load of the slot's waiter count (pairs with the
//!   writer's heavy fence before it parks: either the reader sees the waiter
//!   and wakes it, or the writer's re-check sees 0).
//! - Slow paths and writers inherit Acquire/Release from the underlying lock.
//!
//! # Recursive reads
//! Supported on one thread in any nesting and unlock order, and a read of a
//! lock the thread already read-holds never waits. A fast read counts its
//! depth in the slot, up to `DEPTH_MASK` (16,383) reads of the lock held at
//! once: one more panics, before it takes anything. A read through the
//! underlying lock is recorded by lock in the slot or the thread-local list
//! (`HeldReads`, a few entries) when it had to wait, but the common
//! inhibited read, which did not, is only counted, per thread
//! (`CountedReads`): storing to the slot there doubled the cost of an
//! inhibited read. A read that finds the list full is counted too (left
//! unrecorded, its recursive read queued behind a writer waiting for it: a
//! deadlock). So a read whose quick attempt fails (a writer holds or
//! waits), by a thread that holds counted reads, cannot tell whether it
//! holds *this* lock: it joins the underlying readers past waiting writers
//! unless a writer is inside, which means it holds none of it (then it
//! waits as anyone). The price: such a thread may pass a waiting writer of
//! a lock it does not hold, once per read, as a recursive read would; and
//! threads that hold counted reads of other locks and keep reading this
//! one in overlapping sections keep its waiting writer out for as long as
//! they keep that up (a writer starves behind them). Telling the locks
//! apart would take a record per read on the inhibited path, whose cost
//! that path was shortened to avoid.
//! Platforms without per-thread state (`Platform::with_local`) record
//! inhibited reads in the slot, and give slot-less contexts no list: their
//! recursive reads behave like `QRwLock`'s (they may wait behind a queued
//! writer).
//!
//! # Upgradable reads
//! An upgradable read takes the underlying lock's upgradable read (it holds
//! the queue lock, so at most one exists, and excludes writers, while plain
//! readers, fast and slow, go on). `upgrade` first upgrades the underlying
//! lock (slow readers drain, new ones queue) and only then revokes the bias
//! (fast readers drain): revoking earlier would let a slow reader that is
//! still inside re-enable the bias behind the revocation's back.
//! `try_upgrade` is the other way round: it revokes first, with the state
//! stamped with a window that keeps slow readers from re-enabling the bias
//! (about a millisecond, the longest a stamp tells; a try preempted for
//! longer, that finds the bias back once the underlying lock is exclusive,
//! fails), and makes the underlying lock exclusive only once no fast
//! reader is left. A try that fails then leaves no plain reader waiting:
//! one that stepped aside during the revocation took the underlying read
//! beside us, where exclusive first it would have queued on the queue lock
//! the upgradable read holds.
//!
//! # Writes end the underlying lock's batches
//! A contended acquirer of the underlying lock sleeps through a *batch*
//! (see `qrwlock`, "Fair and fast: batches"): up to a millisecond while the
//! running threads keep using that lock, which amortises the hand-off when
//! they hold it back to back, as an inhibited lock's readers and writers
//! do. With `FAST` set (biased or symmetric) and writes sparse, that lock
//! has no such stream: the readers are on their slots, and its holders are
//! single writes far apart, each a revocation and a critical section. A
//! waiter that met one of them (a slow reader that met a revocation, or a
//! writer behind another) slept through the batch anyway, with the lock
//! free nearly all that time, and where threads outnumber CPUs the writers
//! that queued behind it slept too, until whole CPUs stood idle. So a
//! write that leaves `FAST` set while the class averages `pc_handoff_reads`
//! slot reads per write or more, and while another thread queues behind
//! the waiter (`QRwCore::queued_behind_waiter`), releases the underlying
//! lock fairly: the waiter gets the lock next (`HANDOFF`, and its sleep is
//! woken). A lone waiter keeps its batch (the other threads run: no CPU
//! stands idle for it, and a hand-off would make the next write wait for
//! its wake-up), and so do denser writes (fewer reads between them), which
//! the batches pay off for.
//!
//! # Timed and fair operations
//! `try_read_for`, `try_write_until`, `try_upgradable_read_for`,
//! `try_upgrade_for`, ... (`RawRwLockTimed`, `RawRwLockUpgradeTimed`) and
//! the fair unlocks (`RawRwLockFair`, `RawRwLockUpgradeFair`) build on the
//! underlying lock's (see `qrwlock`). A timed read tries the common read
//! paths without waiting, then waits as the underlying lock's timed read.
//! A timed write takes the underlying write lock by its deadline, then
//! revokes the bias waiting for fast readers until the deadline at the
//! latest; out of time with a fast reader still inside, it gives the bias
//! back (`FAST` set again, as `try_lock_exclusive` does: it holds the
//! underlying write lock, so no slow reader changed the bias meanwhile) and
//! releases the underlying write lock. A timed upgrade does the same from
//! the upgradable read, which it still holds if it fails; as with
//! `QRwLock`'s, plain readers that arrived while it waited (and queued on
//! the queue lock the upgradable read holds) then wait until that
//! upgradable read ends, so an upgradable reader whose timed upgrade
//! failed must not wait for another reader of the lock. A fair unlock of
//! a read through the underlying lock, of a write or of an upgradable read
//! is the underlying lock's fair unlock (a fast read holds nothing of it).
//! `RawRwLockUpgradeDowngrade` is not implemented, for `QRwLock`'s reason:
//! a write downgraded to an upgradable read would take the queue lock while
//! holding the write, which deadlocks against a reader queued there.
//!
//! # What is not supported
//! Reading from a signal handler that interrupted a read section of the same
//! thread (the handler shares the thread's slot), and sharing a lock between
//! processes (`MAP_SHARED`: slots and futexes are per process).

use core::marker::PhantomData;

use lock_api::{GuardNoSend, GuardSend, RawRwLock, RawRwLockDowngrade, RawRwLockUpgrade};

use crate::class::{Access, ClassRef, LockKind};
use crate::events::Events;
use crate::hook::{self, Held, Pending};
use crate::platform::{DefaultPlatform, Platform};
use crate::qrwlock::QRwCore;
use crate::reader_table::{ReaderTable, Slot, listed_marker, table_at};
use crate::sync::atomic::{AtomicU64, Ordering, fence};
use crate::wait::parking::{park_for, prepare as park_prepare, unpark_all};
use crate::wait::{Backoff, Deadline, TUNING};
use mode_race::Verdict;

/// The reader bias: readers may use their slots.
const FAST: u64 = 1 << 0;
/// Symmetric mode: readers fence fully, writers need no heavy fence.
const SYM: u64 = 1 << 1;
/// Shift of the 6-bit table index in the state word.
const TABLE_SHIFT: u32 = 2;
/// The table index bits.
const TABLE_MASK: u64 = 0x3f << TABLE_SHIFT;
/// Shift of the 16-bit stamp in the state word.
const STAMP_SHIFT: u32 = 8;
/// The stamp bits.
const STAMP_MASK: u64 = 0xffff << STAMP_SHIFT;
/// `now_ns >> UNIT_SHIFT` is the stamp's clock (64 ns).
const UNIT_SHIFT: u32 = 6;
/// Shift of the lock id, in both the state word and slot words.
pub(crate) const ID_SHIFT: u32 = 24;
/// The state's top bit, set for good: the read's mode test relies on it
/// where the hooks' switch is folded into that test
/// (`hook::masked_or_maybe_active`: while the hooks may be on, a word with
/// its top bit set fails the test, so no read takes the unrecorded biased
/// path then, whether the lock has an id yet or not).
const MARK: u64 = 1 << 63;
const _: () = assert!(hook::SEQ_BASE == 0 || hook::SEQ_BASE as u64 == MARK);
/// The lock id bits (in slot words too, where the top bit is not used).
pub(crate) const ID_MASK: u64 = !((1 << ID_SHIFT) - 1) & !MARK;
/// The id as a slot read stores it in its slot word: with the state's
/// `MARK`, which slot words ignore, so that the mask is one sign-extended
/// 32-bit immediate on x86-64 (`ID_MASK` alone takes a 64-bit one).
const SLOT_ID: u64 = MARK | ID_MASK;
const _: () = assert!(SLOT_ID as i64 == -(1 << ID_SHIFT));
/// The state of a lock that has no id yet (`INIT`, `new`, `with_class`):
/// symmetric, so that the biased read, the commonest, need not test for
/// the id (invariant 5); the symmetric read does. Its first slow path
/// gives it an id and its real mode at once (`assign_id`).
const NO_ID_YET: u64 = MARK | FAST | SYM;
/// One more recursive read in a slot word.
pub(crate) const ONE_DEPTH: u64 = 1;
/// The read depth bits of a slot word.
pub(crate) const DEPTH_MASK: u64 = (1 << 14) - 1;
/// The slot's owner holds the underlying read lock (a slow read).
pub(crate) const UNDERLYING: u64 = 1 << 14;
/// The slot's fast read was taken biased, so the platform's fences are
/// known to be asymmetric: its unlock may use the unchecked light fence.
pub(crate) const BIASED: u64 = 1 << 15;
/// The slot word's flags and depth: its low 16 bits, so that the unlock
/// tells a biased read at depth 1 by one zero-extending load of them and a
/// compare (the mask over 17 bits took a copy and an `and` more).
const SLOT_LOW: u64 = 0xffff;
const _: () = assert!((DEPTH_MASK | UNDERLYING | BIASED) == SLOT_LOW);

/// Longest stamp interval that compares exactly (half the 16-bit range).
const MAX_STAMP_UNITS: u64 = 1 << 14;
// Every window is set at most `MAX_STAMP_UNITS` ahead (`window_over`).
const _: () = assert!(TUNING.pc_dense_window_ns <= MAX_STAMP_UNITS << UNIT_SHIFT);

#[cfg(not(any(loom, shuttle)))]
static NEXT_ID: AtomicU64 = AtomicU64::new(1);
#[cfg(any(loom, shuttle))]
crate::sync::model_lazy_static! {
    static ref NEXT_ID: AtomicU64 = AtomicU64::new(1);
}

/// The stamp for time `now_ns`.
#[inline]
fn stamp_at(now_ns: u64) -> u64 {
    ((now_ns >> UNIT_SHIFT) & 0xffff) << STAMP_SHIFT
}

/// Nanoseconds from the stamp in `state` to `now_ns` (negative: the stamp
/// is in the future), exact within ±2^14 units.
#[inline]
fn since_stamp(state: u64, now_ns: u64) -> i64 {
    let then = ((state & STAMP_MASK) >> STAMP_SHIFT) as u16;
    let now = (now_ns >> UNIT_SHIFT) as u16;
    i64::from(now.wrapping_sub(then) as i16) << UNIT_SHIFT
}

/// Whether the inhibition window of state `s` is over at `now_ns`. A
/// platform without a clock (`now_ns` a constant 0) never reaches a window's
/// end: its windows end at the first slow read that looks at the clock (one
/// in `pc_clock_every` of a thread's), a window bounded by a count of reads.
/// The stamp tells a past end from a future one only within half its
/// period (2.1 ms): a window is set at most `MAX_STAMP_UNITS` ahead, so an
/// end that looks further ahead is past; and one that looks less far
/// ahead may be a past one seen a period (4.2 ms) later, which the class's
/// latest window end (`ReaderTable::windows_over`, exact) tells.
#[inline]
fn window_over(s: u64, now_ns: u64) -> bool {
    if now_ns == 0 {
        return true;
    }
    let since = since_stamp(s, now_ns);
    since >= 0
        || since < -((MAX_STAMP_UNITS as i64) << UNIT_SHIFT)
        || table_of(s).windows_over(now_ns)
}

/// A reader-writer lock whose read fast path writes only the reading
/// thread's own slot; see the module documentation.
///
/// 16 bytes, plus a [`ReaderTable`] shared by many locks.
///
/// A lock is in a [lock class](crate::LockClass): `new`, `INIT` and
/// `with_table` put it in the `PerCpuRwLock` type class, `with_class` and
/// `with_table_and_class` in another. Without the `stats` and `lockdep`
/// features the class is zero-sized; with them the lock is 32 bytes and the
/// tokens carry the hooks' [`Held`]. Reads are [`Access::ReentrantRead`]
/// to lockdep (a read of a lock the thread already read-holds never waits;
/// a first read may queue behind a waiting writer); an upgradable read is
/// [`Access::Upgradable`] (a write to statistics; its holder may read the
/// lock, but not upgrade while it does).
///
/// Timed operations need a platform with a clock
/// ([`TimedPlatform`](crate::platform::TimedPlatform)); a timed write that
/// runs out of time while fast readers drain leaves the bias as it found
/// it. `RawRwLockUpgradeDowngrade` is not implemented (see the module docs,
/// "Timed and fair operations").
///
/// # Panics
/// A read by a thread that already holds 16,383 reads of the lock through
/// its reader slot (recursive reads whose guards are all alive) panics,
/// before it takes anything.
#[repr(C)]
pub struct RawPerCpuRwLock<P: Platform = DefaultPlatform> {
    /// Writers and slow readers.
    inner: QRwCore<P>,
    /// `id | stamp | table | SYM | FAST`; see the module documentation.
    state: AtomicU64,
    /// The lock class (zero-sized without the `stats` and `lockdep`
    /// features).
    class: ClassRef,
    _platform: PhantomData<fn() -> P>,
}

/// A per-CPU reader-writer lock protecting a `T`, on the default
/// [`ReaderTable`]. Use [`PerCpuRwLockExt::with_table`] for another table.
pub type PerCpuRwLock<T> = lock_api::RwLock<RawPerCpuRwLock, T>;
/// A shared guard of a [`PerCpuRwLock`] (`Sync`, not `Send`: it names the
/// reading thread's slot).
pub type PerCpuRwLockReadGuard<'a, T> = lock_api::RwLockReadGuard<'a, RawPerCpuRwLock, T>;
/// The exclusive guard of a [`PerCpuRwLock`].
pub type PerCpuRwLockWriteGuard<'a, T> = lock_api::RwLockWriteGuard<'a, RawPerCpuRwLock, T>;
/// The upgradable guard of a [`PerCpuRwLock`].
pub type PerCpuRwLockUpgradableReadGuard<'a, T> =
    lock_api::RwLockUpgradableReadGuard<'a, RawPerCpuRwLock, T>;

/// Constructs a [`PerCpuRwLock`] bound to a user-declared [`ReaderTable`].
pub trait PerCpuRwLockExt<T> {
    /// A lock holding `value` whose readers use slots of `table`.
    ///
    /// # Panics
    /// As [`RawPerCpuRwLock::with_table`].
    fn with_table(table: &'static ReaderTable, value: T) -> Self;

    /// A lock holding `value` whose readers use slots of `table`, in lock
    /// class `class` (statistics and lockdep; see
    /// [`LockClass`](crate::LockClass)).
    ///
    /// # Panics
    /// As [`RawPerCpuRwLock::with_table`].
    fn with_table_and_class(table: &'static ReaderTable, class: ClassRef, value: T) -> Self;
}

impl<T, P: Platform> PerCpuRwLockExt<T> for lock_api::RwLock<RawPerCpuRwLock<P>, T> {
    fn with_table(table: &'static ReaderTable, value: T) -> Self {
        lock_api::RwLock::from_raw(RawPerCpuRwLock::with_table(table), value)
    }

    fn with_table_and_class(table: &'static ReaderTable, class: ClassRef, value: T) -> Self {
        lock_api::RwLock::from_raw(RawPerCpuRwLock::with_table_and_class(table, class), value)
    }
}

/// Guard state of a shared acquisition: the slot the read used, none for a
/// counted read (it holds the underlying read lock, counted thread-locally:
/// the common inhibited read, whose release then tests one pointer), or
/// the marker slot of a listed read (it holds the underlying read lock,
/// recorded in the thread-local list). Not `Send` (unlocking writes the slot or the
/// thread-local state, which only its owner thread may do),
/// but `Sync`: a read guard can be shared with other threads by reference,
/// as std's and parking_lot's can.
pub struct PerCpuReadToken {
    slot: Option<&'static Slot>,
    /// Statistics and lockdep state of the hold (zero-sized without them).
    held: Held,
    _not_send: PhantomData<GuardNoSend>,
}

impl PerCpuReadToken {
    #[inline]
    fn slot(slot: &'static Slot) -> Self {
        Self {
            slot: Some(slot),
            held: Held::NONE,
            _not_send: PhantomData,
        }
    }
    /// A read of the underlying lock recorded in the thread-local list: it
    /// names the marker slot.
    #[inline]
    fn underlying() -> Self {
        Self::slot(listed_marker())
    }
    /// A read of the underlying lock recorded only in the thread's count
    /// (`CountedReads`): it names no slot.
    #[inline]
    fn counted() -> Self {
        Self {
            slot: None,
            held: Held::NONE,
            _not_send: PhantomData,
        }
    }
}

/// Guard state of an exclusive acquisition: the state the write unlock
/// leaves (its mode bits and stamp), decided by the write.
pub struct PerCpuWriteToken {
    next: u64,
    /// Statistics and lockdep state of the hold (zero-sized without them).
    held: Held,
}

impl<P: Platform> RawPerCpuRwLock<P> {
    /// An unlocked lock on the default [`ReaderTable`].
    #[cfg(not(loom))]
    pub const fn new() -> Self {
        Self {
            inner: QRwCore::new(),
            state: AtomicU64::new(NO_ID_YET),
            class: ClassRef::TYPE,
            _platform: PhantomData,
        }
    }

    /// An unlocked lock on the default [`ReaderTable`].
    #[cfg(loom)]
    pub fn new() -> Self {
        Self {
            inner: QRwCore::new(),
            state: AtomicU64::new(NO_ID_YET),
            class: ClassRef::TYPE,
            _platform: PhantomData,
        }
    }

    /// An unlocked lock whose readers use slots of `table`. The lock keeps
    /// the table for life.
    ///
    /// # Panics
    /// If more than 63 distinct user tables are used in the process, or
    /// `table` already serves locks of another [`Platform`].
    pub fn with_table(table: &'static ReaderTable) -> Self {
        Self::with_table_and_class(table, ClassRef::TYPE)
    }

    /// An unlocked lock on the default [`ReaderTable`], in lock class
    /// `class` (see [`LockClass`](crate::LockClass)).
    #[cfg(not(loom))]
    pub const fn with_class(class: ClassRef) -> Self {
        Self {
            inner: QRwCore::new(),
            state: AtomicU64::new(NO_ID_YET),
            class,
            _platform: PhantomData,
        }
    }

    /// An unlocked lock whose readers use slots of `table`, in lock class
    /// `class`.
    ///
    /// # Panics
    /// As [`with_table`](Self::with_table).
    pub fn with_table_and_class(table: &'static ReaderTable, class: ClassRef) -> Self {
        table.bind::<P>();
        let index = u64::from(table.register());
        let id = next_id();
        Self {
            inner: QRwCore::new(),
            state: AtomicU64::new(MARK | id << ID_SHIFT | index << TABLE_SHIFT | bias::<P>()),
            class,
            _platform: PhantomData,
        }
    }

    #[inline]
    fn addr(&self) -> usize {
        self as *const Self as usize
    }

    #[inline]
    fn start(&self, access: Access) -> Pending {
        hook::start(self.class, LockKind::PerCpuRwLock, self.addr(), access)
    }

    /// Where the slow paths' events count (the underlying lock's and the
    /// writer's slot waits): this lock's class, on the row of `access` (the
    /// waiting acquisition's; a writer's slot waits are writes).
    #[inline]
    fn events(&self, access: Access) -> Events {
        Events::of(self.class, LockKind::PerCpuRwLock, access)
    }

    #[inline]
    fn try_acquired(&self, access: Access) -> Held {
        hook::try_acquired(self.class, LockKind::PerCpuRwLock, self.addr(), access)
    }

    /// Statistics: whether a read took its slot's fast path (else the
    /// underlying lock).
    #[inline]
    fn took_fast_path(token: &PerCpuReadToken) -> bool {
        token.slot.is_some_and(|s| {
            !core::ptr::eq(s, listed_marker()) && s.word().load(Ordering::Relaxed) & UNDERLYING == 0
        })
    }

    /// Statistics: whether a read took its slot's fast path or the
    /// underlying lock. Only with the hooks compiled in.
    #[inline]
    fn count_read_path(p: &Pending, token: &PerCpuReadToken) {
        if hook::COMPILED {
            if Self::took_fast_path(token) {
                p.fast_read();
            } else {
                p.fallback_read();
            }
        }
    }

    /// `lock_shared` with statistics or lockdep switched on, past the
    /// statistics-only slot read that `lock_shared` counts inline (this
    /// one is the inhibited read, the slot read once the state moved, and
    /// every read with lockdep on). `active`: the hooks' switch bits
    /// `lock_shared` loaded (`hook::active_bits`).
    #[cold]
    #[inline(never)]
    fn lock_shared_hooked(&self, active: u8) -> PerCpuReadToken {
        // Statistics alone: a read that gets the lock without waiting is
        // counted after it, with no `Pending` kept across it (the closures
        // handed to the out-of-line modes would keep one on the stack).
        // Which of `try_lock_shared_fast`'s two reads got the lock says
        // which path it took (the slot read never holds the underlying
        // lock, the inhibited read always does), with no reload of the
        // slot word just stored (`took_fast_path`).
        if hook::stats_alone(active)
            && let Some((mut token, fast)) =
                match self.try_read_slot(self.state.load(Ordering::Relaxed)) {
                    Some(slot) => Some((PerCpuReadToken::slot(slot), true)),
                    None => self.try_read_inhibited().map(|token| (token, false)),
                }
        {
            debug_assert_eq!(fast, Self::took_fast_path(&token));
            token.held = hook::per_cpu_read_counted(
                self.class,
                LockKind::PerCpuRwLock,
                Access::ReentrantRead,
                fast,
            );
            return token;
        }
        self.lock_shared_recorded()
    }

    /// `lock_shared_hooked` once the statistics-only read did not apply:
    /// the read with a `Pending` (lockdep, or a wait to time). Out of line,
    /// so that the statistics-only read stays a small function with few
    /// registers to save.
    #[cold]
    #[inline(never)]
    fn lock_shared_recorded(&self) -> PerCpuReadToken {
        // Reads are reentrant reads to lockdep: a read of a lock the
        // thread already read-holds never waits (see "Recursive reads"),
        // a first one may wait behind a writer.
        let mut p = self.start(Access::ReentrantRead);
        let mut token = match self.try_lock_shared_fast() {
            Some(token) => token,
            None => self.lock_shared_slow(|| p.contended()),
        };
        token.held = p.acquired_per_cpu_read(Self::took_fast_path(&token));
        token
    }

    /// `lock_exclusive` with statistics or lockdep switched on.
    #[inline]
    fn lock_exclusive_recorded(&self) -> PerCpuWriteToken {
        let mut p = self.start(Access::Write);
        let ev = p.events(self.events(Access::Write));
        self.inner.lock_exclusive_hooked(|| p.contended(), ev);
        let next = self.revoke_and_decide();
        PerCpuWriteToken {
            next,
            held: p.acquired(),
        }
    }

    /// A successful `try_lock_shared` with statistics or lockdep switched
    /// on: counted, and recorded in `token`.
    #[cold]
    #[inline(never)]
    fn try_read_hooked(&self, token: &mut PerCpuReadToken) {
        let p = hook::start_optimistic(self.class, LockKind::PerCpuRwLock, Access::Read);
        Self::count_read_path(&p, token);
        let _ = p;
        token.held = self.try_acquired(Access::ReentrantRead);
    }

    /// The table this lock's readers use.
    pub fn table(&self) -> &'static ReaderTable {
        table_of(self.state.load(Ordering::Relaxed))
    }

    /// The common read paths, none of which waits: biased or symmetric,
    /// the slot (free); inhibited, the underlying lock if it is free of
    /// writers, recorded in the slot. `None` means take the slow path.
    #[inline(always)]
    fn try_lock_shared_fast(&self) -> Option<PerCpuReadToken> {
        if let Some(slot) = self.try_read_slot(self.state.load(Ordering::Relaxed)) {
            return Some(PerCpuReadToken::slot(slot));
        }
        self.try_read_inhibited()
    }

    /// The slot read (biased or symmetric), inline in the caller: `None`
    /// if the lock is inhibited or has no id yet, if the slot is busy, or
    /// if a writer is revoking. It is kept to one call site for everything
    /// else (`lock_shared_other`, or the caller's own slow path), so that a
    /// read and its guard's release stay small enough for the compiler to
    /// inline into the reading loop. The two modes differ only in the
    /// fence: biased, the platform's unchecked light fence (the lock is
    /// biased only with asymmetric fences, see "Fences"), paired with a
    /// revoking writer's heavy fence; symmetric, a full fence, paired with
    /// the writer's.
    #[inline(always)]
    fn try_read_slot(&self, s: u64) -> Option<&'static Slot> {
        // One copy of the read per mode, the biased one first: each is a
        // straight path, with its fence known.
        if s & (FAST | SYM) == FAST {
            self.try_read_slot_as::<false>(s)
        } else if s & FAST != 0 {
            self.try_read_slot_as::<true>(s)
        } else {
            None
        }
    }

    /// `try_read_slot` in a state `s` with `FAST` set, symmetric or not.
    #[inline(always)]
    fn try_read_slot_as<const SYMMETRIC: bool>(&self, s: u64) -> Option<&'static Slot> {
        // Biased implies an id (invariant 5); a symmetric lock may have
        // none yet (`NO_ID_YET`).
        debug_assert!(SYMMETRIC || s & ID_MASK != 0, "a biased lock without an id");
        if SYMMETRIC && s & ID_MASK == 0 {
            return None;
        }
        // Only an index the thread already has: a thread's first read
        // gets one on the slow path (`my_slot`), which then retries this.
        // (Taking `reader_slot` here joined its hand-out path to this one,
        // and the compiler then checked the index against the table twice.)
        let i = P::reader_slot_inline();
        let table = table_of(s);
        // SAFETY: `reader_slot_inline` returns at most `SLOTS` (`Platform`'s
        // contract).
        if unsafe { table.word_or_busy(i) }.load(Ordering::Relaxed) != 0 {
            // Busy: a recursive read, a read of another lock of the table,
            // or no slot (`i == SLOTS`: the table's never-free word). Rare:
            // the free slot's store is the straight line (with the hooks
            // compiled in, the compiler otherwise laid it out of line, a
            // taken jump more on the commonest read).
            core::hint::cold_path();
            return None;
        }
        // SAFETY: only a slot's word reads 0, so `i < SLOTS`.
        let slot = unsafe { table.slot_unchecked(i) };
        let biased = if SYMMETRIC { 0 } else { BIASED };
        // Relaxed: the fence orders it; nothing is published through it.
        // (A SeqCst `swap` and load would do for the symmetric read in the
        // C++ model, but loom models SeqCst accesses as AcqRel and could not
        // check the pairing.)
        slot.word()
            .store((s & SLOT_ID) | biased | ONE_DEPTH, Ordering::Relaxed);
        // What a slot read buys, for the writers' rules (counted before the
        // re-check: a read that steps aside bought little, but the count
        // stays off the path after the fence).
        slot.count_fast_read();
        if SYMMETRIC {
            // Pairs with a symmetric writer's full fence after it clears
            // FAST (store buffering: one of us sees the other).
            fence(Ordering::SeqCst);
        } else {
            // Pairs with a revoking writer's heavy fence; unchecked, as the
            // lock is biased only with asymmetric fences (see "Fences").
            P::light_fence_asymmetric();
        }
        // Acquire pairs with the Release write that last set FAST. A
        // biased read needs the state still biased, not only `FAST`: its
        // light fence pairs only with a heavy one, and a lock that went
        // symmetric since our first load (a write's biased revocation,
        // whose heavy fence came before our slot store, left it `FAST |
        // SYM`) is revoked next with a plain full fence.
        let mode = if SYMMETRIC { FAST } else { FAST | SYM };
        if self.state.load(Ordering::Acquire) & mode == FAST {
            return Some(slot);
        }
        // A writer is revoking: step aside (the caller queues on the inner
        // lock).
        step_aside::<P>(slot, !SYMMETRIC);
        None
    }

    /// The common inhibited read, inline in the caller: the underlying
    /// lock's read RMW and the thread-local count (`read_inhibited`) in an
    /// inhibited state `s`. `None` (nothing held) in any
    /// other mode or if a writer holds or waits: the caller then takes
    /// `lock_shared_other`, which tries the same again (once more, only on
    /// those rarer paths) and the rest.
    #[inline(always)]
    fn try_read_counted(&self, s: u64) -> Option<PerCpuReadToken> {
        if s & FAST != 0 {
            return None;
        }
        // Invariant 4.
        debug_assert_ne!(s & ID_MASK, 0, "an inhibited lock without an id");
        self.read_inhibited(s)
    }

    /// `try_lock_shared_fast` once the slot read did not get the lock:
    /// the inhibited read, or `None`.
    #[inline(always)]
    fn try_read_inhibited(&self) -> Option<PerCpuReadToken> {
        self.try_read_counted(self.state.load(Ordering::Relaxed))
    }

    /// `lock_shared` once the inline reads did not get the lock: the
    /// inhibited read once more (the state may have moved), then the slow
    /// path. One call from the inline read.
    #[inline(never)]
    fn lock_shared_other(&self) -> PerCpuReadToken {
        match self.try_read_inhibited() {
            Some(token) => token,
            None => self.lock_shared_slow(|| {}),
        }
    }

    /// `try_lock_shared_fast` in an inhibited state `s`.
    ///
    /// The underlying lock's read RMW, then a thread-local count
    /// (`count_read`): nothing else. Recording the read in the slot here (a
    /// store whose address is a chain of dependent loads: the state's table
    /// index, the table, the thread's slot index; and its clearing at
    /// unlock) made an inhibited read and its unlock cost up to twice the
    /// underlying lock's on x86, where the next locked RMW waits for those
    /// stores; an update at a fixed offset from the thread pointer costs far
    /// less (`benches/percpu_rwlock.rs`, section "primitives", times the
    /// mixed loop). A read that would have to wait (a writer holds or
    /// waits) takes its increment back and returns `None`: the slow path
    /// looks for a read this thread already holds before it waits. Where
    /// the platform has no per-thread state, a read that got the lock
    /// records itself in its free slot, or else as `enter_underlying` does
    /// (a slot taken by an outer read, of this lock or another; holding the
    /// lock already, this read needs no recursion check).
    #[inline(always)]
    fn read_inhibited(&self, s: u64) -> Option<PerCpuReadToken> {
        if !self.inner.try_lock_shared_quick() {
            return None;
        }
        if let Some(token) = self.count_read(s) {
            return Some(token);
        }
        Some(self.record_inhibited(s))
    }

    /// The rest of `read_inhibited` where the platform keeps no per-thread
    /// state (or the thread's is gone: it is exiting): holding the
    /// underlying read lock, taken in state `s`, record the read in the
    /// thread's free slot, or as `enter_underlying` does.
    #[cold]
    #[inline(never)]
    fn record_inhibited(&self, s: u64) -> PerCpuReadToken {
        let mine = P::reader_slot().and_then(|i| table_of(s).slot(i));
        if let Some(slot) = mine
            && slot.word().load(Ordering::Relaxed) == 0
            && slot.listed().load(Ordering::Relaxed) == 0
        {
            return self.enter_inhibited(s, slot);
        }
        self.enter_underlying(mine)
    }

    /// Holding the underlying read lock with `slot` (ours) free, the state
    /// `s` read before queueing: maybe re-enable the bias (if a writer moved
    /// the state meanwhile, the re-enabling CAS fails and the writer's
    /// decision stands), and record the read in the slot.
    #[inline(always)]
    fn enter_inhibited(&self, s: u64, slot: &'static Slot) -> PerCpuReadToken {
        if slot.count_slow_read(TUNING.pc_clock_every) {
            self.reenable_if_due(s);
        }
        // Relaxed: while we hold the underlying read lock no writer scans;
        // the clear before our unlock is ordered by it.
        slot.word()
            .store((s & ID_MASK) | UNDERLYING | ONE_DEPTH, Ordering::Relaxed);
        PerCpuReadToken::slot(slot)
    }

    /// One slow read in `pc_clock_every`: re-enable the bias if the
    /// inhibition window of state `s` is over. Nothing if `s` has `FAST`
    /// (a counted read that joined the readers in `recursive_read` took
    /// its state with the bias on): the stamp of a biased state is when
    /// the bias came back, of a symmetric one the last write, which the
    /// writers' rules weigh; a CAS here would move it to now.
    #[cold]
    fn reenable_if_due(&self, s: u64) {
        if s & FAST != 0 {
            return;
        }
        let now = P::now_ns();
        if window_over(s, now) {
            self.reenable(s, now);
        }
    }

    /// Sets `FAST` (the inhibition window is over), holding the underlying
    /// read lock, so no writer is inside, and stamps the state with `now`:
    /// the bias is on from now, which the next revocation's keep rule
    /// weighs (the window's end may lie up to `pc_clock_every` slow reads
    /// back, which would make the bias look long-lived). Release pairs with
    /// fast readers' Acquire re-load of the state: they happen after our
    /// acquisition, hence after the last writer.
    #[cold]
    fn reenable(&self, judged: u64, now: u64) {
        // Only from the state we judged: a state that moved meanwhile was
        // moved by a writer's decision, which wins.
        if self
            .state
            .compare_exchange(
                judged,
                (judged & !STAMP_MASK) | stamp_at(now) | FAST,
                Ordering::Release,
                Ordering::Relaxed,
            )
            .is_ok()
        {
            table_of(judged).stamped_at(now);
        }
    }

    /// With the underlying read lock held and `slot` (ours) free: maybe
    /// re-enable the bias, record the read in the slot.
    #[inline]
    fn enter_underlying_slot(&self, slot: &'static Slot) -> PerCpuReadToken {
        self.maybe_reenable(Some(slot));
        let s = self.state.load(Ordering::Relaxed);
        // Relaxed: while we hold the underlying read lock no writer scans;
        // the clear before our unlock is ordered by it.
        slot.word()
            .store((s & ID_MASK) | UNDERLYING | ONE_DEPTH, Ordering::Relaxed);
        PerCpuReadToken::slot(slot)
    }

    /// With the underlying read lock held: re-enables the bias once the
    /// inhibition window passed, looking at the clock on one slow read in
    /// `pc_clock_every` of this thread (a clock read costs more than the
    /// underlying read lock).
    #[inline]
    fn maybe_reenable(&self, mine: Option<&'static Slot>) {
        let s = self.state.load(Ordering::Relaxed);
        if s & FAST == 0 && mine.is_none_or(|m| m.count_slow_read(TUNING.pc_clock_every)) {
            let now = P::now_ns();
            if window_over(s, now) {
                self.reenable(s, now);
            }
        }
    }

    #[cold]
    fn lock_shared_slow(&self, contended: impl FnOnce()) -> PerCpuReadToken {
        self.ensure_id();
        let s = self.state.load(Ordering::Relaxed);
        let mine = self.my_slot();
        // A read of a lock this thread already read-holds never waits: a
        // writer queued since would wait for the outer read, and we for it.
        if let Some(token) = self.recursive_read(s, mine) {
            return token;
        }
        // Inhibited, the fast path already tried the underlying lock
        // (`read_inhibited`): wait on it.
        if s & FAST != 0
            && let Some(token) = self.try_lock_shared_fast()
        {
            return token;
        }
        self.inner
            .lock_shared_hooked(contended, self.events(Access::ReentrantRead));
        self.enter_underlying(mine)
    }

    /// A read of a lock the calling thread already read-holds: deepen the
    /// record (fast: no fence needed, the outer read keeps writers out).
    #[inline]
    fn recursive_read(&self, s: u64, mine: Option<&'static Slot>) -> Option<PerCpuReadToken> {
        let id = s & ID_MASK;
        if let Some(slot) = mine {
            let cur = slot.word().load(Ordering::Relaxed);
            if cur != 0 && (cur ^ id) & ID_MASK == 0 {
                assert!(
                    cur & DEPTH_MASK != DEPTH_MASK,
                    "PerCpuRwLock: read depth overflow"
                );
                // Relaxed: only this thread reads its own depth.
                slot.word().store(cur + ONE_DEPTH, Ordering::Relaxed);
                return Some(PerCpuReadToken::slot(slot));
            }
        }
        if held_list::deepen::<P>(id) {
            // We hold the underlying read lock (recorded below): take one
            // more, bypassing queued writers.
            self.inner.lock_shared_recursive();
            return Some(PerCpuReadToken::underlying());
        }
        // We hold counted reads, maybe of this lock: join its readers past
        // waiting writers unless a writer is inside (then we hold none of
        // it, and wait as anyone). See "Recursive reads".
        if P::with_local(|l| l.counted_reads.any()).unwrap_or(false)
            && self.inner.try_lock_shared_past_waiters()
        {
            return Some(
                self.count_read(s)
                    .unwrap_or_else(|| self.enter_underlying(mine)),
            );
        }
        None
    }

    /// Holding the underlying read lock (taken in state `s`): counts the
    /// read in the thread's `CountedReads` and, on one read in
    /// `pc_clock_every`, re-enables the bias if the inhibition window is
    /// over. `None` (nothing counted) where the platform has no per-thread
    /// state.
    #[inline(always)]
    fn count_read(&self, s: u64) -> Option<PerCpuReadToken> {
        if P::with_local(|l| l.counted_reads.enter(TUNING.pc_clock_every))? {
            self.sample_counted_read(s);
        }
        Some(PerCpuReadToken::counted())
    }

    /// The counted read that looks at the clock (one in `pc_clock_every`
    /// of the thread's), taken in state `s`: counts the thread's counted
    /// reads since the last such one in its slot's slow reads (the mode
    /// race's inhibited read rate), and re-enables the bias if the window
    /// is over.
    #[cold]
    fn sample_counted_read(&self, s: u64) {
        if let Some(slot) = P::reader_slot().and_then(|i| table_of(s).slot(i)) {
            slot.add_slow_reads(TUNING.pc_clock_every);
        }
        self.reenable_if_due(s);
    }

    /// This thread's slot in the lock's table (free or not), if it has one.
    #[inline]
    fn my_slot(&self) -> Option<&'static Slot> {
        let s = self.state.load(Ordering::Relaxed);
        table_of(s).slot(P::reader_slot()?)
    }

    /// Finishes a slow read, with the underlying read lock held: re-enables
    /// the bias if due, records the read in the thread's slot `mine` if that
    /// is free, else in the thread-local list, else (the list is full)
    /// counts it in the thread's `CountedReads`.
    fn enter_underlying(&self, mine: Option<&'static Slot>) -> PerCpuReadToken {
        // Only this thread writes its slot, so the slot is still as free as
        // it was before we queued on the underlying lock.
        if let Some(slot) = mine.filter(|m| m.word().load(Ordering::Relaxed) == 0) {
            return self.enter_underlying_slot(slot);
        }
        self.maybe_reenable(mine);
        let s = self.state.load(Ordering::Relaxed);
        if held_list::push::<P>(s & ID_MASK, mine) {
            return PerCpuReadToken::underlying();
        }
        // The list is full: count the read as the common inhibited read is,
        // so that a recursive read of this lock still joins its readers
        // past waiting writers (a thread with counted reads does, see
        // "Recursive reads"); unrecorded, it queued behind a writer that
        // waits for this read. Without per-thread state, unrecorded.
        self.count_read(s)
            .unwrap_or_else(PerCpuReadToken::underlying)
    }

    /// Gives the lock a unique id on first use (an `INIT` lock), and binds
    /// the default table to our platform.
    #[inline]
    fn ensure_id(&self) {
        if self.state.load(Ordering::Relaxed) & ID_MASK == 0 {
            self.assign_id();
        }
    }

    #[cold]
    fn assign_id(&self) {
        let mut s = self.state.load(Ordering::Relaxed);
        table_of(s).bind::<P>();
        let id = next_id();
        // Without an id the state is `NO_ID_YET` (no write changes it
        // before the id: writers assign it first, slow readers too); with
        // the id, the lock's mode: biased, or symmetric where the fences
        // are not asymmetric (invariant 5: both in one write; no reader
        // used a slot before it).
        debug_assert!(s & ID_MASK != 0 || s == NO_ID_YET, "{s:#x}");
        while s & ID_MASK == 0 {
            // Relaxed: the id publishes nothing; racing assigners agree on
            // the first one in the word's modification order. A reader
            // that saw the biased mode it brings reads the slot (or the
            // revoking writer's `FAST` clear) on its own Acquire re-load.
            match self.state.compare_exchange_weak(
                s,
                (s & !(FAST | SYM)) | id << ID_SHIFT | bias::<P>(),
                Ordering::Relaxed,
                Ordering::Relaxed,
            ) {
                Ok(_) => return,
                Err(now) => s = now,
            }
        }
    }

    /// With the underlying lock held exclusively: clears `FAST` if set and waits until no slot names this
    /// lock; returns the state the next unlock should leave.
    #[inline]
    fn revoke_and_decide(&self) -> u64 {
        // Inhibited (the common write under dense writes): no reader uses a
        // slot; keep the window and mode. Inline whatever the compiler
        // makes of the rest.
        let s = self.state.load(Ordering::Relaxed);
        if s & FAST == 0 {
            // Invariant 4.
            debug_assert_ne!(s & ID_MASK, 0, "an inhibited lock without an id");
            return s;
        }
        self.revoke_and_decide_slow()
    }

    /// `revoke_and_decide` past its inhibited case.
    #[inline(never)]
    fn revoke_and_decide_slow(&self) -> u64 {
        let next = self.revoke_and_decide_until(Deadline::NEVER);
        debug_assert!(next.is_some());
        next.unwrap_or(0)
    }

    /// `revoke_and_decide`, giving up at `deadline` (a timed write or
    /// upgrade): `None` if fast readers are still inside then; the bias is
    /// back as it was (`FAST` set again, as `try_revoke` does), and the
    /// caller still holds the underlying write lock.
    fn revoke_and_decide_until(&self, deadline: Deadline) -> Option<u64> {
        self.ensure_id();
        let s = self.state.load(Ordering::Relaxed);
        let table = table_of(s);
        if s & FAST == 0 {
            // Inhibited: no reader uses a slot. Keep the window and mode.
            return Some(s);
        }
        // A biased revocation is timed (its heavy fence, and the whole);
        // a symmetric one reads the clock once, at the end, for its stamp
        // and the mode race.
        let sym_tick = if s & SYM != 0 { table.sym_tick() } else { 0 };
        let now = if s & SYM == 0 { P::now_ns() } else { 0 };
        // The statistics clock (no read without statistics), from here:
        // a revocation's cost is its fence and its wait for the slots.
        let revoke_start = hook::clock_ns();
        // Only a holder of the underlying write lock changes the state once
        // the lock has an id (slow readers, which re-enable the bias, are
        // shut out), so `s` is still the state and a plain store clears
        // FAST: no read-modify-write, which on x86 would be a second full
        // fence next to the one below. Relaxed: ordered by that fence
        // (heavy, or full in the symmetric mode), which pairs with the
        // readers' fence.
        let old = s;
        self.state.store(s & !FAST, Ordering::Relaxed);
        // The heavy fence's own cost (the slot waits below are not a
        // fence's); 0 for the symmetric mode's full fence.
        let fence_ns = if old & SYM == 0 {
            // Pairs with fast readers' light fence: either they see FAST
            // clear or we see their slot.
            P::heavy_fence();
            P::now_ns().saturating_sub(now)
        } else {
            fence(Ordering::SeqCst);
            0
        };
        let id = old & ID_MASK;
        let mut drained = true;
        // The class's slot reads so far: the scanned slots' counts here,
        // from the line the wait just read, plus those of the threads that
        // exited (`ReaderTable::retired_fast_reads`) below, if no exit
        // moved counts meanwhile (`retire_seq`).
        let retire_seq = table.retire_seq();
        let mut fast_reads = 0u32;
        // Threads with reader slots: more than one, and reads on the
        // underlying lock would bounce its line (`read_saving_ns`).
        let mut slots = 0u32;
        P::reader_slots_in_use(|i| {
            slots = slots.saturating_add(1);
            if drained && let Some(slot) = table.slot(i) {
                drained = wait_slot::<P>(slot, id, deadline, self.events(Access::Write));
                fast_reads = fast_reads.wrapping_add(slot.fast_reads());
            }
        });
        if !drained {
            // Out of time with a fast reader inside: give the bias back. We
            // hold the underlying write lock, so no slow reader re-enabled
            // it meanwhile and nobody else changes FAST. Release: an RMW,
            // keeps the release sequence of the last FAST setter intact.
            self.state.fetch_or(FAST, Ordering::Release);
            return None;
        }
        self.count_revocation(old, revoke_start);
        let fast_reads = match table.retired_fast_reads(retire_seq) {
            Some(retired) => Some(fast_reads.wrapping_add(retired)),
            // An exit met the scan: sum again, without waiting.
            None => fast_reads_total::<P>(table),
        };
        let keep = old & !(FAST | SYM | STAMP_MASK);
        // What each slot read saved against the underlying lock.
        let saving = read_saving_ns(slots);
        if !table.inhibits() {
            // Xen: the bias comes back at unlock, in the mode the cost says.
            let sym = if old & SYM == 0 {
                table.dear_fences(fence_ns, TUNING.pc_sym_cost_ns, now) || table.forced_symmetric()
            } else {
                // The clock is read only on a probe's count.
                !(sym_tick.is_multiple_of(TUNING.pc_sym_probe) && table.probe_due(P::now_ns()))
            };
            return Some(keep | if sym { FAST | SYM } else { bias::<P>() });
        }
        if old & SYM == 0 {
            // Biased: we paid a heavy fence. If the bias was on long enough
            // to pay for its revocation, bring it back at unlock, however
            // dear the fence. If not: dear twice in a row (other CPUs run
            // our readers), go symmetric; else inhibit for m × cost, and
            // adapt m to how long the bias lasted since it came back.
            let end = P::now_ns();
            let cost = end.saturating_sub(now).max(1);
            let dear = table.dear_fences(fence_ns, TUNING.pc_sym_cost_ns, now);
            // The stamp of a biased state: when the bias came back (the
            // slow read that ended the window, or the unlock that brought
            // it back). Negative: more than half the stamp's range ago;
            // the stamp wraps every 4.2 ms, and one that says less than
            // the class's latest stamp (`stamped_at_least_ago`, exact; the
            // stamp's 64 ns rounding aside) wrapped.
            let on_for = match since_stamp(old, now) {
                since
                    if since >= 0
                        && table.stamped_at_least_ago(now) >= since as u64 + (1 << UNIT_SHIFT) =>
                {
                    -1
                }
                since => since,
            };
            // Every state left below is stamped at `end`: with the bias on,
            // or a window from then.
            table.stamped_at(end);
            if table.forced_symmetric() {
                return Some(keep | FAST | SYM | stamp_at(end));
            }
            let typical = table.revocation_floor(cost);
            // The slot reads per write: those since the class's last
            // revocation, or the class's average if more (one short
            // interval between random writes says little of the read
            // share, and would inhibit the bias for a whole window).
            let reads = match fast_reads {
                Some(total) => {
                    let since = table.fast_reads_since(total);
                    table.reads_per_write(since).max(u64::from(since))
                }
                // Exits kept moving counts: the class's average alone.
                None => table.reads_per_write_average(),
            };
            // Sparse writes: revoking at each costs at most 1/pc_keep_factor
            // of the time, less than readers lose on the underlying lock
            // during a window, or on a full fence per read in the symmetric
            // mode (a single reader thread whose heavy fence is dear only
            // because the machine is slow would otherwise pay that fence on
            // every read).
            let sparse =
                on_for < 0 || (on_for as u64) >= typical.saturating_mul(TUNING.pc_keep_factor);
            // The reads paid for this revocation against the underlying
            // lock: at the same rate of reads and writes, they pay for the
            // next one. Its heavy fence counts twice: the other CPUs that
            // run our threads each spent about as long in it (the
            // `membarrier` interrupts them), which the writer's clock
            // does not see.
            let paid = reads.saturating_mul(saving) >= cost + fence_ns;
            // ... and the bias beats the symmetric mode, which would have
            // cost those reads a full fence each (measured on this machine)
            // and this revocation its heavy fence (counted twice, as
            // above): bias when the reads' fences would cost more.
            let bias_beats_symmetric = !paid
                || reads.saturating_mul(fence_cost::full_fence_x16::<P>())
                    >= fence_ns.saturating_mul(2 * 16);
            if sparse || (paid && bias_beats_symmetric) {
                table.shrink_multiplier();
                return Some(keep | FAST | stamp_at(end));
            }
            // What a symmetric revocation would have cost: this one without
            // its heavy fence.
            let scan = cost.saturating_sub(fence_ns).max(1);
            if dear || paid || symmetric_pays(reads, scan, saving) {
                // Other CPUs run our readers (the fence was dear twice), or
                // the slot reads pay for revoking but their full fences
                // cost less than the heavy one, or the reads pay for
                // revoking at every write with a symmetric revocation (the
                // rule that keeps a symmetric lock symmetric): go symmetric.
                return Some(keep | FAST | SYM | stamp_at(end));
            }
            if (on_for as u64) < cost.saturating_mul(TUNING.pc_wasted_factor) {
                table.grow_multiplier();
            } else {
                table.shrink_multiplier();
            }
            let window = cost
                .saturating_mul(u64::from(table.multiplier()))
                .min((MAX_STAMP_UNITS - 1) << UNIT_SHIFT);
            // Rounded up, so that a real window never ends early.
            let until = end + window + (1 << UNIT_SHIFT);
            table.window_until(until);
            return Some(keep | stamp_at(until));
        }
        // Symmetric: decide by the time since the previous write, then by
        // the mode race. (The reads per write feed the class's average,
        // which the biased mode's rules weigh.)
        let end = P::now_ns();
        // The stamp of a symmetric state: the previous write, or the
        // bias's return; one that says less than the class's latest
        // stamp wrapped (see the biased case).
        let gap = match since_stamp(old, end) {
            since
                if since >= 0
                    && table.stamped_at_least_ago(end) >= since as u64 + (1 << UNIT_SHIFT) =>
            {
                -1
            }
            since => since,
        };
        // Every state left below is stamped at `end`.
        table.stamped_at(end);
        // The shorter of this gap and the class's previous one: one long
        // gap between random writes says little. Negative: too long for
        // the stamp to tell. Recorded before the counts are looked at: a
        // write that finds no total must still leave its gap for the
        // next (else the next long gap, its previous one missing, was
        // judged alone, and a burst of exits elsewhere made one long gap
        // bring the bias back).
        let gaps = table.gap_floor(if gap < 0 { u64::MAX } else { gap as u64 });
        // Exits kept moving counts (no total): stay symmetric; the next
        // write decides.
        let (Some(fast_reads), Some(slow)) = (fast_reads, slow_reads_total::<P>(table)) else {
            return Some(keep | FAST | SYM | stamp_at(end));
        };
        let reads = table.reads_per_write(table.fast_reads_since(fast_reads));
        // Rare: the heavy fence the biased mode would pay at the next
        // write (the cheaper of the last two: one may have been preempted)
        // is at most 1/pc_keep_factor of the gaps (the keep rule of a
        // biased revocation), or the gaps are `pc_rare_ns` anyway (also
        // when the fence's cost is unknown).
        let rare_ns = match table.fence_floor_ns() {
            0 => TUNING.pc_rare_ns,
            f => TUNING
                .pc_rare_ns
                .min(f.saturating_mul(TUNING.pc_keep_factor)),
        };
        let probe = sym_tick.is_multiple_of(TUNING.pc_sym_probe) && table.probe_due(end);
        if gaps >= rare_ns || probe {
            // Rare writes (two gaps in a row; a gap too long for the
            // stamp to tell counts as long), or time to measure the heavy
            // fence again (once in a while, and long enough after the last
            // for that fence to cost little): biased (the bias is on from
            // now).
            return Some(keep | bias::<P>() | stamp_at(end));
        }
        if reads < TUNING.pc_sym_min_reads {
            // A handful of reads per write never pays for revoking at each
            // (on any machine): inhibit without a race, and measure the
            // window for the next one.
            table.race().window(end, slow);
            table.window_until(end + TUNING.pc_dense_window_ns);
            return Some(keep | SYM | stamp_at(end + TUNING.pc_dense_window_ns));
        }
        if table.forced_symmetric() {
            return Some(keep | FAST | SYM | stamp_at(end));
        }
        // Symmetric or inhibited, whichever the class measured faster
        // (`mode_race.rs`). The gap is from the last write, or from the
        // bias's return after a window (too long ago for the stamp: 0,
        // which leaves a window unmeasured).
        let on_since = if gap < 0 { 0 } else { end - gap as u64 };
        match table.race().judge(end, on_since, fast_reads, slow) {
            Verdict::Symmetric => Some(keep | FAST | SYM | stamp_at(end)),
            // Readers go to the underlying lock for a window, and come
            // back symmetric.
            Verdict::Inhibit(window) => {
                table.window_until(end + window);
                Some(keep | SYM | stamp_at(end + window))
            }
        }
    }

    /// Sets the state a write leaves at unlock or downgrade (mode, stamp,
    /// `FAST`), keeping the id and table. Release pairs with fast readers'
    /// Acquire re-load of the state.
    #[inline]
    fn leave(&self, next: u64) {
        const KEEP: u64 = MARK | ID_MASK | TABLE_MASK;
        let s = self.state.load(Ordering::Relaxed);
        if s & !KEEP == next & !KEEP {
            // Nothing changes (an inhibited write): leave the line alone,
            // every reader reads it.
            return;
        }
        // A store: the writer is the state's only writer (see
        // `revoke_and_decide_until`). Release pairs with fast readers'
        // Acquire re-load of the state.
        self.state
            .store((s & KEEP) | (next & !KEEP), Ordering::Release);
    }

    /// Statistics: a revocation from state `old` (biased: it paid the heavy
    /// fence) that began at `start` on the statistics clock (0 and no
    /// record with statistics off).
    #[inline]
    fn count_revocation(&self, old: u64, start: u64) {
        // Begun with statistics off (no clock read): not timed, not counted
        // (`clock_ns() - 0` would be the whole statistics clock).
        if start == 0 {
            return;
        }
        let ns = hook::clock_ns().saturating_sub(start);
        if old & SYM == 0 {
            hook::heavy_revocation(self.class, LockKind::PerCpuRwLock, ns);
        } else {
            hook::revocation(self.class, LockKind::PerCpuRwLock, ns);
        }
    }

    /// One pass over the slots without waiting: true if no slot holds a
    /// fast read of this lock (`try_lock_exclusive`, `try_upgrade`,
    /// `is_locked`, which tests the underlying lock first).
    fn no_fast_readers(&self, state: u64) -> bool {
        let id = state & ID_MASK;
        let table = table_of(state);
        let mut none = true;
        P::reader_slots_in_use(|i| {
            // Acquire pairs with the readers' Release slot stores. A slow
            // read recorded in a slot (`UNDERLYING`) is the underlying
            // lock's business, as in `wait_slot`: a try-write holds that
            // lock exclusively (such a record is stale: its reader is
            // between the underlying unlock and the slot's clear), and an
            // upgrade waits for slow readers on it.
            if let Some(slot) = table.slot(i)
                && slot.word().load(Ordering::Acquire) & (ID_MASK | UNDERLYING) == id
            {
                none = false;
            }
        });
        none
    }

    /// Clears `FAST` and checks once for fast readers, without waiting;
    /// restores `FAST` and returns false if there are some.
    fn try_revoke(&self) -> bool {
        self.ensure_id();
        if self.state.load(Ordering::Relaxed) & FAST == 0 {
            return true;
        }
        // As in `revoke_and_decide`.
        let revoke_start = hook::clock_ns();
        let old = self.state.fetch_and(!FAST, Ordering::Relaxed);
        if old & SYM == 0 {
            P::heavy_fence();
        } else {
            fence(Ordering::SeqCst);
        }
        if self.no_fast_readers(old) {
            self.count_revocation(old, revoke_start);
            return true;
        }
        // A fast reader is inside: give the bias back. Release: an RMW,
        // keeps the release sequence of the last FAST setter intact.
        self.state.fetch_or(FAST, Ordering::Release);
        false
    }
}

/// What a slot read saves against a read on the underlying lock, ns, with
/// `slots` threads holding reader slots: `pc_read_saving_ns` for one
/// reading thread, `pc_read_saving_shared_ns` for more (the underlying
/// word would bounce between their CPUs).
#[inline]
fn read_saving_ns(slots: u32) -> u64 {
    if slots > 1 {
        TUNING.pc_read_saving_shared_ns
    } else {
        TUNING.pc_read_saving_ns
    }
}

/// Whether revoking symmetric reads at every write pays for itself:
/// `reads` slot reads per write at `saving_ns` each, against a symmetric
/// revocation's cost `cost_ns` (see `pc_sym_pay_factor`).
#[inline]
fn symmetric_pays(reads: u64, cost_ns: u64, saving_ns: u64) -> bool {
    reads >= TUNING.pc_sym_min_reads
        && reads.saturating_mul(saving_ns) >= cost_ns.saturating_mul(TUNING.pc_sym_pay_factor)
}

/// The bias a lock (re)gains: `FAST`, biased, where the platform's fences
/// are asymmetric; else `FAST | SYM`, symmetric. So a biased state exists
/// only once `P::asymmetric_fences()` said yes, for good (see "Fences").
#[inline]
fn bias<P: Platform>() -> u64 {
    if P::asymmetric_fences() {
        FAST
    } else {
        FAST | SYM
    }
}

#[inline]
fn table_of(state: u64) -> &'static ReaderTable {
    table_at(((state & TABLE_MASK) >> TABLE_SHIFT) as usize)
}

/// A fresh lock id: 39 bits, wrapping, never 0.
fn next_id() -> u64 {
    loop {
        // Relaxed: only uniqueness matters.
        let id = NEXT_ID.fetch_add(1, Ordering::Relaxed) & (ID_MASK >> ID_SHIFT);
        if id != 0 {
            return id;
        }
    }
}

/// Frees a slot that held a fast read and wakes a writer parked on it.
#[inline]
fn release_slot<P: Platform>(slot: &'static Slot, biased: bool) {
    // Release pairs with the writer's Acquire scan: our reads happen before
    // its writes.
    slot.word().store(0, Ordering::Release);
    // Pairs with the heavy fence a writer runs before parking on the slot:
    // unchecked if the read was biased (the fences are asymmetric then, for
    // good).
    if biased {
        P::light_fence_asymmetric();
    } else {
        P::light_fence();
    }
    if slot.waiters().load(Ordering::Relaxed) != 0 {
        wake_slot::<P>(slot);
    }
}

/// `release_slot` of a symmetric read, out of line: the read guard's
/// release then stays small enough for the compiler to inline it, with
/// the biased and the counted releases, into the reading code (inline,
/// its checked fence made the whole drop a call, and the caller kept the
/// read section's values in memory across it).
#[inline(never)]
fn release_slot_symmetric<P: Platform>(slot: &'static Slot) {
    release_slot::<P>(slot, false);
}

/// A slot read that found a writer revoking: clears its slot (and wakes
/// the writer if it sleeps on it).
#[cold]
#[inline(never)]
fn step_aside<P: Platform>(slot: &'static Slot, biased: bool) {
    release_slot::<P>(slot, biased);
}

#[cold]
#[inline(never)]
fn wake_slot<P: Platform>(slot: &'static Slot) {
    unpark_all::<P>(slot.park_addr());
}

/// The class's slow reads so far (wrapping; `ModeRace`): those of the
/// threads that exited plus the counts of the slots in use, whose lines
/// the revocation has just read; `None` if exits kept moving counts
/// (`ReaderTable::checked_total`).
fn slow_reads_total<P: Platform>(table: &ReaderTable) -> Option<u32> {
    class_total::<P>(table, ReaderTable::retired_slow_reads, Slot::slow_reads)
}

/// The class's slot reads so far (wrapping), as `slow_reads_total`: for a
/// revocation whose scan met an exit (its own sum, made while it waited
/// for the slots, is not used).
#[cold]
fn fast_reads_total<P: Platform>(table: &ReaderTable) -> Option<u32> {
    class_total::<P>(
        table,
        ReaderTable::retired_fast_reads_unchecked,
        Slot::fast_reads,
    )
}

/// One of the class's read totals (wrapping): the exited threads' count
/// (`retired`) plus `count` of each slot in use, taken while no exit
/// moved counts (`ReaderTable::checked_total`).
fn class_total<P: Platform>(
    table: &ReaderTable,
    retired: fn(&ReaderTable) -> u32,
    count: fn(&Slot) -> u32,
) -> Option<u32> {
    table.checked_total(|| {
        let mut total = retired(table);
        P::reader_slots_in_use(|i| {
            if let Some(slot) = table.slot(i) {
                total = total.wrapping_add(count(slot));
            }
        });
        total
    })
}

/// Waits while `slot` holds a fast read of the lock `id` (spin, then park on
/// the slot). A slow read recorded in a slot (`UNDERLYING`) is the
/// underlying lock's business: it is not waited for here, and its unlock
/// wakes nobody on the slot. False if the read is still there once
/// `deadline` passed. Parks and wakes count for `ev`.
fn wait_slot<P: Platform>(slot: &Slot, id: u64, deadline: Deadline, ev: Events) -> bool {
    let fast_read_of = |word: u64| word & (ID_MASK | UNDERLYING) == id;
    let mut backoff = Backoff::new();
    loop {
        // Acquire pairs with the reader's Release slot store.
        if !fast_read_of(slot.word().load(Ordering::Acquire)) {
            return true;
        }
        if deadline.passed::<P>() {
            return false;
        }
        if backoff.steps() < TUNING.pc_writer_steps {
            backoff.snooze::<P>();
            continue;
        }
        slot.waiters().fetch_add(1, Ordering::Relaxed);
        // Pairs with the light fence in `release_slot`: either the reader
        // sees our count and wakes us, or our re-check sees its store.
        P::heavy_fence();
        let ticket = park_prepare(slot.park_addr());
        // Acquire as above.
        if fast_read_of(slot.word().load(Ordering::Acquire)) {
            ev.park();
            park_for::<P>(ticket, deadline.remaining_ns::<P>());
            // Spurious: the read is still there (we wait again, or the
            // deadline passed).
            ev.wake(fast_read_of(slot.word().load(Ordering::Relaxed)));
        }
        slot.waiters().fetch_sub(1, Ordering::Relaxed);
    }
}

impl<P: Platform> Default for RawPerCpuRwLock<P> {
    fn default() -> Self {
        Self::new()
    }
}

impl<P: Platform> core::fmt::Debug for RawPerCpuRwLock<P> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        let s = self.state.load(Ordering::Relaxed);
        // A lock without an id yet (`NO_ID_YET`) shows the mode its first
        // use gives it.
        let mode = if s & ID_MASK == 0 { bias::<P>() } else { s };
        f.debug_struct("RawPerCpuRwLock")
            .field("id", &((s & ID_MASK) >> ID_SHIFT))
            .field("table", &((s & TABLE_MASK) >> TABLE_SHIFT))
            .field(
                "mode",
                &match (mode & FAST != 0, mode & SYM != 0) {
                    (true, false) => "biased",
                    (true, true) => "symmetric",
                    (false, _) => "inhibited",
                },
            )
            .field("inner", &self.inner)
            .finish()
    }
}

// SAFETY: readers and writers exclude each other by invariants 1-3 and the
// store-buffering argument of the module docs; acquisitions are Acquire and
// releases Release (orderings section). Read guard state names the slot it
// used and is `!Send`, so only the slot's owner writes it; forgetting it
// leaves the slot naming the lock (the lock stays read-locked, and the
// thread's index is retired at exit), which is safe. Slots name locks by a
// unique id, not an address, so moving or dropping a locked lock cannot make
// another lock wait for it; the guard's slot is `'static`, and the
// underlying lock tolerates moves and drops. Panics (depth overflow, table
// exhaustion or a table of another platform) happen before anything is
// acquired.
unsafe impl<P: Platform> RawRwLock for RawPerCpuRwLock<P> {
    #[allow(clippy::declare_interior_mutable_const)]
    #[cfg(not(loom))]
    const INIT: Self = Self::new();
    #[allow(clippy::declare_interior_mutable_const)]
    #[cfg(loom)]
    const INIT: Self = panic!("use RawPerCpuRwLock::new() under loom");

    type SharedGuard = PerCpuReadToken;
    type ExclusiveGuard = PerCpuWriteToken;

    #[inline(always)]
    fn lock_shared(&self) -> PerCpuReadToken {
        // One test of the state's mode picks the biased read: `FAST`
        // without `SYM`, tested as neither bit set once `FAST` is flipped.
        // With the hooks compiled in, their run-time switch is folded into
        // that test where it is patched into the code
        // (`hook::masked_or_maybe_active`: while the hooks may be on, the
        // state's `MARK` fails it), so that a switched-off biased read
        // costs no instruction more than without the features; elsewhere
        // the test is the mode's, then a Relaxed load of the switch.
        let s = self.state.load(Ordering::Relaxed);
        // (Where `usize` is narrower, the cast keeps the two low bits, all
        // the test without a patched site reads.)
        let biased = !hook::masked_or_maybe_active::<{ (FAST | SYM) as u8 }>((s ^ FAST) as usize);
        // Otherwise, with the hooks compiled in, one test of the switch
        // (a constant patched into the code, or a Relaxed load; see
        // `hook::any_active`); a read they follow takes the hooked path
        // behind it (a cold branch: the switched-off path stays the
        // straight line).
        let active = if biased { 0 } else { hook::active_bits() };
        if active != 0 {
            // Statistics alone, and the slot read gets the lock: counted
            // inline, with no call (the out-of-line hooked read cost this,
            // the cheapest read there is, more than twice its time); every
            // other hooked read goes out of line.
            if hook::stats_alone(active)
                && let Some(slot) = self.try_read_slot(s)
            {
                return PerCpuReadToken {
                    slot: Some(slot),
                    held: hook::per_cpu_read_counted(
                        self.class,
                        LockKind::PerCpuRwLock,
                        Access::ReentrantRead,
                        true,
                    ),
                    _not_send: PhantomData,
                };
            }
            return self.lock_shared_hooked(active);
        }
        // Unrecorded, so only the slot comes from the read paths (merging
        // whole tokens, hold state included, costs stack copies here).
        // The state loaded above picks the inline path: biased, symmetric
        // (or biased where the switch's sites say "may be on" and it is
        // off), or counted (inhibited); a slot read that steps aside finds
        // the state inhibited in `lock_shared_other`.
        let read = if biased {
            self.try_read_slot_as::<false>(s)
        } else {
            self.try_read_slot(s)
        };
        let slot = match read {
            Some(slot) => Some(slot),
            None => match self.try_read_counted(s) {
                Some(token) => token.slot,
                None => self.lock_shared_other().slot,
            },
        };
        PerCpuReadToken {
            slot,
            held: Held::NONE,
            _not_send: PhantomData,
        }
    }

    #[inline]
    fn try_lock_shared(&self) -> Option<PerCpuReadToken> {
        let mut token = self.try_lock_shared_untracked()?;
        if hook::any_active() {
            self.try_read_hooked(&mut token);
        }
        Some(token)
    }

    #[inline(always)]
    unsafe fn unlock_shared(&self, token: PerCpuReadToken) {
        // Taken before the release: the lock may be freed after it.
        let addr = self.addr();
        // SAFETY: the token came from a read of this lock (caller's
        // contract).
        unsafe { self.release_read(token.slot, false) };
        token.held.release(addr);
    }

    // Always: with the hooks compiled in, the compiler left it out of line
    // (its token returned through memory), a call on every write.
    #[inline(always)]
    fn lock_exclusive(&self) -> PerCpuWriteToken {
        // With the hooks switched off (or not compiled in), no hook state
        // at all (see `RawQRwLock::lock_shared`).
        let active = hook::active_bits();
        if active == 0 {
            self.inner.lock_exclusive_hooked(|| {}, Events::NONE);
            return PerCpuWriteToken {
                next: self.revoke_and_decide(),
                held: Held::NONE,
            };
        }
        // Statistics alone: a write that takes a free underlying lock is
        // counted once the readers are out (see `RawQSpinLock::lock`).
        if hook::stats_alone(active) && self.inner.try_lock_exclusive_fast().is_ok() {
            let next = self.revoke_and_decide();
            return PerCpuWriteToken {
                next,
                held: hook::counted_at_once(self.class, LockKind::PerCpuRwLock, Access::Write),
            };
        }
        self.lock_exclusive_recorded()
    }

    #[inline]
    fn try_lock_exclusive(&self) -> Option<PerCpuWriteToken> {
        let _ = self.inner.try_lock_exclusive()?;
        self.ensure_id();
        let before = self.state.load(Ordering::Relaxed);
        if self.try_revoke() {
            // `try_revoke` left FAST clear; unlock comes back to the mode
            // the lock was in (a try, which waited for no one, decides
            // nothing).
            return Some(PerCpuWriteToken {
                next: before,
                held: self.try_acquired(Access::Write),
            });
        }
        // SAFETY: we took the underlying write lock above.
        unsafe { self.inner.unlock_exclusive(GuardSend::new()) };
        None
    }

    #[inline]
    unsafe fn unlock_exclusive(&self, token: PerCpuWriteToken) {
        let addr = self.addr();
        self.leave(token.next);
        if token.next & FAST != 0
            && table_of(token.next).sparse_writes()
            && self.inner.queued_behind_waiter()
        {
            // The bias stays on, writes are sparse, and threads queue
            // behind a waiter: it gets the underlying lock next (see "Writes
            // end the underlying lock's batches").
            self.inner.unlock_exclusive_fair();
        } else {
            // SAFETY: the token stands for our underlying write lock, whose
            // guard state is `GuardSend`.
            unsafe { self.inner.unlock_exclusive(GuardSend::new()) };
        }
        token.held.release(addr);
    }

    /// Whether the lock is held in any mode: the underlying lock, then the
    /// slots of the lock's table (a scan). Exact for the calling thread's
    /// own holds, so `assert!(lock.is_locked())` inside a read section never
    /// fails; a snapshot for other threads' holds.
    fn is_locked(&self) -> bool {
        if self.inner.is_locked() {
            return true;
        }
        let s = self.state.load(Ordering::Relaxed);
        s & ID_MASK != 0 && !self.no_fast_readers(s)
    }

    /// Whether a writer holds the lock: the underlying write lock with the
    /// bias revoked. The underlying write lock alone is not a write: a
    /// writer (or an upgrade) takes it before it revokes the bias and
    /// waits for the fast readers inside, and a timed write that gives up
    /// puts `FAST` back before it releases it. Exact for the calling
    /// thread's own holds (a thread inside a fast read never sees the lock
    /// exclusively locked, even while a writer waits for it); a snapshot
    /// for other threads' holds (a writer that has cleared `FAST` and
    /// still waits for other threads' fast readers counts as holding it).
    #[inline]
    fn is_locked_exclusive(&self) -> bool {
        if !self.inner.is_locked_exclusive() {
            return false;
        }
        let s = self.state.load(Ordering::Relaxed);
        if s & FAST != 0 {
            return false;
        }
        // Our own fast read of the lock (only we write our slot).
        !self.my_slot().is_some_and(|slot| {
            let w = slot.word().load(Ordering::Relaxed);
            w & DEPTH_MASK != 0 && (w ^ s) & ID_MASK == 0
        })
    }
}

impl<P: Platform> RawPerCpuRwLock<P> {
    /// `try_lock_shared` without the hooks.
    #[inline]
    fn try_lock_shared_untracked(&self) -> Option<PerCpuReadToken> {
        if let Some(token) = self.try_lock_shared_fast() {
            return Some(token);
        }
        self.ensure_id();
        let s = self.state.load(Ordering::Relaxed);
        let mine = self.my_slot();
        if let Some(token) = self.recursive_read(s, mine) {
            return Some(token);
        }
        if let Some(token) = self.try_lock_shared_fast() {
            return Some(token);
        }
        let _ = self.inner.try_lock_shared()?;
        Some(self.enter_underlying(mine))
    }

    /// `unlock_shared` without the hooks: releases the read that `slot`
    /// (a read token's) stands for.
    ///
    /// # Safety
    /// The caller holds that read of this lock.
    #[inline(always)]
    unsafe fn release_read(&self, slot: Option<&'static Slot>, fair: bool) {
        // The biased and the counted reads' releases inline (the read
        // guard's drop then inlines into the caller); every other read's
        // one call away, the symmetric one's included: with its checked
        // fence inline too, the compiler left the whole drop out of line.
        match slot {
            Some(slot) => {
                let cur = slot.word().load(Ordering::Relaxed);
                // 0: the listed reads' marker (`release_other_read`).
                debug_assert!(
                    cur == 0 || (cur ^ self.state.load(Ordering::Relaxed)) & ID_MASK == 0,
                    "read token names another lock's slot"
                );
                // Biased first, the common read of a read-mostly lock.
                if cur & SLOT_LOW == ONE_DEPTH | BIASED {
                    release_slot::<P>(slot, true);
                    return;
                }
                if cur & (DEPTH_MASK | UNDERLYING) == ONE_DEPTH {
                    release_slot_symmetric::<P>(slot);
                    return;
                }
            }
            None if !fair => {
                // A counted read (the common inhibited read): as
                // `release_other_read` releases it.
                let _ = P::with_local(|l| l.counted_reads.leave());
                self.unlock_underlying(false);
                return;
            }
            None => {}
        }
        // SAFETY: the caller's contract.
        unsafe { self.release_other_read(slot, fair) };
    }

    /// `release_read` of any read but a biased one at depth 1.
    ///
    /// # Safety
    /// As `release_read`.
    #[inline(never)]
    unsafe fn release_other_read(&self, slot: Option<&'static Slot>, fair: bool) {
        let Some(slot) = slot else {
            // A counted read: the count, then the underlying read lock (the
            // count is this thread's alone; no order is needed, and this
            // one keeps its update off the path between the lock's two
            // RMWs of the next read).
            let _ = P::with_local(|l| l.counted_reads.leave());
            self.unlock_underlying(fair);
            return;
        };
        if core::ptr::eq(slot, listed_marker()) {
            // SAFETY: a listed read holds the underlying read lock, whose
            // guard state is the stateless `GuardSend`.
            unsafe { self.unlock_underlying_listed(fair) };
            return;
        }
        let cur = slot.word().load(Ordering::Relaxed);
        debug_assert_eq!(
            (cur ^ self.state.load(Ordering::Relaxed)) & ID_MASK,
            0,
            "read token names another lock's slot"
        );
        if cur & (DEPTH_MASK | UNDERLYING) == ONE_DEPTH {
            release_slot::<P>(slot, cur & BIASED != 0);
        } else {
            // SAFETY: `slot` is ours and records a read of this lock.
            unsafe { self.unlock_shared_recorded(slot, cur, fair) };
        }
    }

    /// Releases a recursive read, or a slow read recorded in our slot
    /// (fairly: see `RawRwLockFair`).
    ///
    /// # Safety
    /// `slot` is the caller's and records a read of this lock (`cur`).
    #[inline(never)]
    unsafe fn unlock_shared_recorded(&self, slot: &'static Slot, cur: u64, fair: bool) {
        if cur & DEPTH_MASK > 1 {
            // Relaxed: the outer reads still hold the lock.
            slot.word().store(cur - ONE_DEPTH, Ordering::Relaxed);
        } else {
            self.unlock_underlying(fair);
            slot.word().store(0, Ordering::Relaxed);
        }
    }

    /// Releases our underlying read lock.
    #[inline]
    fn unlock_underlying(&self, fair: bool) {
        if fair {
            self.inner.reader_leave_fair();
        } else {
            // SAFETY: the caller holds the underlying read lock (the
            // callers' contracts); its guard state is `GuardSend`.
            unsafe { self.inner.unlock_shared(GuardSend::new()) };
        }
    }

    /// Releases a slow read recorded in the thread-local list.
    ///
    /// # Safety
    /// The caller holds a read of this lock through the underlying lock.
    #[inline(never)]
    unsafe fn unlock_underlying_listed(&self, fair: bool) {
        held_list::pop::<P>(self.state.load(Ordering::Relaxed) & ID_MASK, self.my_slot());
        self.unlock_underlying(fair);
    }
}

// SAFETY: the writer downgrades the underlying lock in one step (no writer
// can slip in) and becomes a slow reader; the bias stays off (or is restored
// while we hold the lock, which invariant 3 allows).
unsafe impl<P: Platform> RawRwLockDowngrade for RawPerCpuRwLock<P> {
    unsafe fn downgrade(&self, token: PerCpuWriteToken) -> PerCpuReadToken {
        self.leave(token.next);
        let mine = self.my_slot();
        // SAFETY: the token stands for our underlying write lock.
        let _ = unsafe { self.inner.downgrade(GuardSend::new()) };
        // The id exists (the write assigned it), so this cannot panic.
        let read = self.enter_underlying(mine);
        // A panic out of the write hold's release (a long-hold hook's)
        // returns no read guard: nobody would release the read. Released
        // as it unwinds, as a plain unlock whose hook panics leaves nothing
        // held.
        struct UnlockOnUnwind<'a, P: Platform>(&'a RawPerCpuRwLock<P>, Option<PerCpuReadToken>);
        impl<P: Platform> Drop for UnlockOnUnwind<'_, P> {
            fn drop(&mut self) {
                if let Some(read) = self.1.take() {
                    // SAFETY: the read the downgrade took, not handed out.
                    unsafe { self.0.unlock_shared(read) };
                }
            }
        }
        let mut unwind = UnlockOnUnwind(self, Some(read));
        // We still read-hold the lock. A downgrade never waits: the read is
        // recorded as a try (no lockdep dependency into it).
        token.held.release(self.addr());
        let Some(mut read) = unwind.1.take() else {
            unreachable!("taken only here")
        };
        // Counted as the read it is, through the underlying lock (a
        // fallback read), as `try_lock_shared` counts its reads.
        if hook::any_active() {
            self.try_read_hooked(&mut read);
        }
        read
    }
}

// SAFETY: an upgradable read holds the underlying lock's upgradable read,
// which excludes writers and other upgradable readers; `upgrade` first
// upgrades the underlying lock (no slow reader is left, so nobody but us can
// set FAST) and then revokes the bias as a writer does, so it ends with
// everything a write lock holds. Forgetting the guard leaves the underlying upgradable read held.
unsafe impl<P: Platform> RawRwLockUpgrade for RawPerCpuRwLock<P> {
    /// What statistics and lockdep remember of the hold (an upgradable
    /// read counts as a write to statistics; zero-sized without the
    /// features).
    type UpgradableGuard = Held;

    fn lock_upgradable(&self) -> Held {
        self.ensure_id();
        let mut p = self.start(Access::Upgradable);
        let ev = p.events(self.events(Access::Write));
        if hook::COMPILED {
            self.inner.lock_upgradable_hooked(|| p.contended(), ev);
        } else {
            self.inner.lock_upgradable_hooked(|| {}, ev);
        }
        p.acquired()
    }

    fn try_lock_upgradable(&self) -> Option<Held> {
        self.ensure_id();
        self.inner
            .try_lock_upgradable()
            .map(|_| self.try_acquired(Access::Upgradable))
    }

    unsafe fn unlock_upgradable(&self, guard: Held) {
        let addr = self.addr();
        // SAFETY: the guard came from `lock_upgradable` (caller's contract).
        unsafe { self.inner.unlock_upgradable(PhantomData) };
        guard.release(addr);
    }

    unsafe fn upgrade(&self, guard: Self::UpgradableGuard) -> PerCpuWriteToken {
        // The underlying upgrade first: it waits out the slow readers and
        // keeps new ones out. Only then may we revoke. Revoking while slow
        // readers still run would let one of them re-enable the bias after
        // our scan (a slow reader may set FAST once the inhibition window
        // is over), and fast readers would then share our write.
        // (The core's `upgrade`, with our events.) Lockdep first: a read
        // of ours would keep the upgrade waiting for ever. A report that
        // panics gives the upgradable read back first.
        // SAFETY (the closure): called at most once, instead of the
        // upgrade, just before the panic unwinds out of it; we hold the
        // upgradable read (caller's contract) and lock_api's guard no
        // longer owns it.
        guard.upgrading(self.addr(), || unsafe {
            self.inner.unlock_upgradable(PhantomData)
        });
        // SAFETY: the guard came from `lock_upgradable` (caller's contract).
        let upgraded = unsafe {
            self.inner
                .upgrade_until(Deadline::NEVER, self.events(Access::Write))
        };
        debug_assert!(upgraded);
        PerCpuWriteToken {
            next: self.revoke_and_decide(),
            held: guard,
        }
    }

    unsafe fn try_upgrade(
        &self,
        guard: Self::UpgradableGuard,
    ) -> Result<PerCpuWriteToken, Self::UpgradableGuard> {
        // Unlike `upgrade`, the revocation first, while plain readers still
        // take the underlying read beside us, and the underlying lock made
        // exclusive only once no fast reader is left: a try that fails must
        // leave no reader waiting. (Exclusive first, a reader that stepped
        // aside during the heavy fence met `W_LOCKED`, queued on the queue
        // lock we hold, and stayed there after we stepped back, until our
        // upgradable read ended.) A slow reader inside meanwhile cannot
        // bring the bias back behind the revocation: the state carries a
        // window that ends in the future (`revoke_for_upgrade`).
        let Some(before) = self.revoke_for_upgrade() else {
            return Err(guard);
        };
        // The underlying lock exclusive once no slow reader is inside. With
        // `FAST` clear every reader is a slow one, in and out in its short
        // section: wait a little for a moment between them (as a writer
        // spins on a slot before it parks), without holding any of them up.
        let mut backoff = Backoff::new();
        let turn = loop {
            // SAFETY: the guard came from `lock_upgradable` (caller's
            // contract).
            if let Some(turn) = unsafe { self.inner.try_upgrade_keeping_queue() } {
                break turn;
            }
            if backoff.steps() >= TUNING.pc_writer_steps {
                // Slow readers are still inside: back to the state we found.
                self.undo_revoke_for_upgrade(before);
                return Err(guard);
            }
            backoff.snooze::<P>();
        };
        // No slow reader can enter now, nor bring the bias back; one that
        // did while the window ran out (we were preempted that long) made
        // `FAST` set again, and fast readers may be inside: step back and
        // fail. (Revoking again now, with the lock exclusive, a reader that
        // stepped aside during that fence met `W_LOCKED`, queued on the
        // queue lock we keep, and stayed there after a failed try until
        // our upgradable read ended: the wait this order avoids.)
        if self.state.load(Ordering::Relaxed) & FAST != 0 {
            // SAFETY: we took the write by `try_upgrade_keeping_queue` above,
            // which ended `turn`.
            unsafe { self.inner.undo_upgrade(turn) };
            return Err(guard);
        }
        // SAFETY: the guard is the upgradable read's, now a write.
        unsafe { self.inner.finish_upgrade(PhantomData) };
        guard.upgraded(self.addr());
        // A try leaves the mode as it found it.
        Ok(PerCpuWriteToken {
            next: before,
            held: guard,
        })
    }
}

impl<P: Platform> RawPerCpuRwLock<P> {
    /// `try_upgrade`'s revocation, holding the upgradable read (no writer
    /// changes the state; slow readers may, bringing the bias back at the
    /// end of a window): clears `FAST` and stamps the state with a window
    /// as long as a stamp can tell (about a millisecond), so that no slow
    /// reader brings the bias back meanwhile; biased or symmetric, fences
    /// (as `try_revoke`) and gives the fast readers inside a short spin to
    /// leave. The state found, or `None` (that state put back) if a fast
    /// reader is still inside.
    fn revoke_for_upgrade(&self) -> Option<u64> {
        self.ensure_id();
        let revoke_start = hook::clock_ns();
        let mut s = self.state.load(Ordering::Relaxed);
        let until_ns = P::now_ns() + ((MAX_STAMP_UNITS - 1) << UNIT_SHIFT);
        table_of(s).window_until(until_ns);
        let until = stamp_at(until_ns);
        // Relaxed: ordered by the fence below, as `revoke_and_decide`'s
        // store; a slow reader's re-enabling CAS may race (retry).
        while let Err(now) = self.state.compare_exchange(
            s,
            (s & !(FAST | STAMP_MASK)) | until,
            Ordering::Relaxed,
            Ordering::Relaxed,
        ) {
            s = now;
        }
        if s & FAST == 0 {
            // Inhibited: no reader uses a slot.
            return Some(s);
        }
        if s & SYM == 0 {
            // Pairs with fast readers' light fence, as in `try_revoke`.
            P::heavy_fence();
        } else {
            fence(Ordering::SeqCst);
        }
        // Readers see `FAST` clear from now on and take no slot: wait a
        // little for those inside to leave (as a writer spins on a slot
        // before it parks), not for a reader that holds its read long.
        let mut backoff = Backoff::new();
        while !self.no_fast_readers(s) {
            if backoff.steps() >= TUNING.pc_writer_steps {
                self.undo_revoke_for_upgrade(s);
                return None;
            }
            backoff.snooze::<P>();
        }
        self.count_revocation(s, revoke_start);
        Some(s)
    }

    /// Puts back state `before` after `revoke_for_upgrade` (its stamp, and
    /// `FAST` if it had it), unless a slow reader brought the bias back
    /// meanwhile (our window ran out): then it stays. Release: fast
    /// readers' Acquire re-load of the state pairs with it, as with any
    /// store that sets `FAST`.
    fn undo_revoke_for_upgrade(&self, before: u64) {
        let mut s = self.state.load(Ordering::Relaxed);
        while s & FAST == 0 {
            match self
                .state
                .compare_exchange(s, before, Ordering::Release, Ordering::Relaxed)
            {
                Ok(_) => return,
                Err(now) => s = now,
            }
        }
    }
}

mod fence_cost;
pub(crate) mod mode_race;
mod timed;

/// The thread-local list of locks a context read-holds through the
/// underlying lock without a slot to record them in (see "Recursive reads"
/// in the module docs). The context's slot in the lock's table, if any,
/// counts them (`Slot::listed`), so that the common paths, which look only
/// at the slot, know when to look at the list.
mod held_list {
    use crate::platform::Platform;
    use crate::reader_table::Slot;
    use crate::sync::atomic::Ordering;

    /// Records a first read of lock `id` through the underlying lock; false
    /// when the list is full (more than a handful of locks read-held at
    /// once that way) or the platform has no per-thread state: then the
    /// read is not recorded here (`enter_underlying` counts it instead).
    #[inline]
    pub(super) fn push<P: Platform>(id: u64, mine: Option<&'static Slot>) -> bool {
        let recorded = P::with_local(|l| l.held_reads.push(id, mine.is_some())).unwrap_or(false);
        if recorded && let Some(slot) = mine {
            // Relaxed: only this thread reads or writes its own count.
            let listed = slot.listed();
            listed.store(listed.load(Ordering::Relaxed) + 1, Ordering::Relaxed);
        }
        recorded
    }

    /// One more read of `id`, if the calling thread read-holds it through
    /// the underlying lock.
    #[inline]
    pub(super) fn deepen<P: Platform>(id: u64) -> bool {
        P::with_local(|l| l.held_reads.deepen(id)).unwrap_or(false)
    }

    /// One read of `id` fewer. The slot's count drops only for a read
    /// counted there at `push` (the thread may have got its slot since; and
    /// an exiting thread, which has lost it, leaves the slot retired with
    /// the count, as with any read still recorded).
    #[inline]
    pub(super) fn pop<P: Platform>(id: u64, mine: Option<&'static Slot>) {
        if P::with_local(|l| l.held_reads.pop(id))
            .flatten()
            .unwrap_or(false)
            && let Some(slot) = mine
        {
            // Relaxed: as in `push`.
            let listed = slot.listed();
            listed.store(listed.load(Ordering::Relaxed) - 1, Ordering::Relaxed);
        }
    }
}

#[cfg(all(test, loom))]
mod loom_models;
#[cfg(all(test, feature = "std", not(loom)))]
mod tests;
