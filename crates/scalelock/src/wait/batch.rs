//! Bounded batches: fair and fast.
//!
//! Handing a lock to the next waiter at every release (a ticket lock, a
//! fair mutex) costs a cache-line transfer per acquisition and, whenever the
//! next waiter is not running, the lock sits idle until it is scheduled:
//! such locks collapse once threads outnumber CPUs. Never handing over (a
//! test-and-set lock) starves. Both queued locks in this crate do the middle
//! thing: the thread that waits on the lock word (the *word waiter*, first
//! in line) lets the running threads keep re-acquiring for one *batch*, and
//! then the next release is reserved for it.
//!
//! The word waiter keeps the batch's clock ([`BatchClock`]) and sleeps
//! through it; at its end it claims the lock and the holder's next release
//! reserves it. Only a running waiter can take the lock anyway: a waiter
//! that is not scheduled when its batch ends ends it later, when it runs,
//! and the running threads use the lock meanwhile instead of leaving it
//! reserved for a thread that cannot take it.
//!
//! (Ending batches on the holder's side instead, by counting its releases
//! in thread-local storage and reading the clock every few of them, cost
//! the holder a third of its speed under contention, measured with
//! `cargo bench -p scalelock --bench qspinlock` at 2 and 16 threads.)
//!
//! # A holder long past the batch yields
//! A waiter woken on the CPU its holder runs on (by its predecessor, or
//! by its own timer at the end of the batch) often waits there until the
//! holder's time slice ends, milliseconds with a 250 Hz tick, while the
//! other CPU idles: Linux queues a wakee on its previous CPU when the
//! machine looks busy. Meanwhile the holder's batch goes on, and over a
//! short run the threads' shares drift apart (docs/measurements.md traces
//! it with `perf sched`). So qspinlock's unlock keeps a cheap watch
//! ([`HolderStretch`]): on releases that find a word waiter that has not
//! claimed the lock yet, it counts down in thread-local storage (two
//! instructions) and reads the clock about every `qs_overrun_check_ns`;
//! once the holder has re-taken the lock for `batch_ns +
//! qs_overrun_yield_ns`, it yields its CPU once after the release (a
//! waiter queued behind it runs and claims; with nobody queued there the
//! yield returns at once), and again every `qs_overrun_yield_ns` while
//! the batch goes on ([`holder_overran`]). A holder in a tight loop also
//! queues at its next `lock`, as after a hand-over ([`Overran`]). This is
//! not ending the batch on the holder's side: the holder reads the clock
//! tens of times per batch, not per few releases, and only moves its
//! CPU's attention to the waiter that ends it.
//!
//! The thread that handed the lock over is still running: its next `lock`
//! queues at once ([`handing_off`], [`just_handed_off`]) instead of
//! spinning, or it would take the lock back whenever it finds it free
//! between the new holder's acquisitions.
//!
//! # Batch debt: equal shares when wake-ups are late
//! A batch is timed by the word waiter, and a word waiter made head by a
//! hand-off is woken then: if the scheduler runs it late (a thread woken
//! from a busy CPU often waits for that CPU's next tick while the other CPU
//! goes idle), the holder's batch runs that much longer. With more threads
//! than CPUs that happens often enough that some threads hold the lock far
//! longer than others over a run (docs/measurements.md has the figures).
//! Every thread's queue node therefore keeps a [`BatchDebt`], after deficit
//! round robin: the waiter that ends a batch it was made head for adds the
//! time the batch ran beyond `batch_ns` to the holder's debt (or takes back
//! what it ran short), and a waiter grants a holder that owes a shorter
//! batch (down to `batch_min_ns`), until it is paid. The debt names the
//! lock it is owed on, so a debt on one lock does not shorten batches on
//! another.
//!
//! A qspinlock whose holders' turns have given it a *turn quota*
//! (`super::quota`) settles no debt: its holders hand the lock over once
//! they made the quota, so their shares are equal in acquisitions, and
//! the word waiter's clock only bounds a slow turn (`qs_turn_bound_ns`).
//!
//! A word waiter that is not running when the lock is reserved for it
//! delays nobody for long: a spinning contender takes a reserved lock after
//! `qs_steal_ns`, and its own release reserves it again.
//!
//! # Turns: who may go on after a claim
//! A reader-writer lock's claim need not stop the threads that are running
//! (readers share), so `qrwlock` numbers each claim's *turn* in its word
//! and the claimant keeps a [`ClaimedTurn`] record: while the turn lasts,
//! writers other than its holder queue ([`turn_of`] tells them apart), and
//! the holder gives the turn up after `qrw_turn_ns` if someone waits. See
//! "Turns" in `qrwlock`'s module docs.

use core::cell::Cell;

use super::{TUNING, quota};
use crate::platform::Platform;
use crate::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

/// A waiter's clock: when it started waiting, and polls (the bound on
/// platforms without a clock).
#[derive(Debug)]
pub(crate) struct BatchClock {
    start_ns: u64,
    polls: u32,
}

impl BatchClock {
    /// Starts timing now.
    #[inline]
    pub(crate) fn start<P: Platform>() -> Self {
        Self {
            start_ns: P::now_ns(),
            polls: 0,
        }
    }

    /// Timing since `start_ns` (a `now_ns` reading), not now.
    #[inline]
    pub(crate) fn since(start_ns: u64) -> Self {
        Self { start_ns, polls: 0 }
    }

    /// Counts one poll; `None` once `ns` passed (or `polls` polls were
    /// made), else about how long is left (all of `ns` without a clock).
    #[inline]
    pub(crate) fn remaining_ns<P: Platform>(&mut self, ns: u64, polls: u32) -> Option<u64> {
        self.polls = self.polls.saturating_add(1);
        let elapsed = P::now_ns().wrapping_sub(self.start_ns);
        (self.polls < polls && elapsed < ns).then(|| ns - elapsed)
    }

    /// Counts one poll; true once `ns` passed (or `polls` polls were made).
    #[inline]
    pub(crate) fn elapsed<P: Platform>(&mut self, ns: u64, polls: u32) -> bool {
        self.polls = self.polls.saturating_add(1);
        self.polls >= polls || P::now_ns().wrapping_sub(self.start_ns) >= ns
    }
}

/// A thread's record of the lock it just handed to the word waiter: its next
/// `lock` of it queues at once rather than spinning, because a thread still
/// running right after a hand-off would otherwise take the lock back
/// whenever it finds it free between the new holder's acquisitions. Also
/// the lock of this thread's last acquisition as word waiter, if that was
/// a hand-off ([`yields_to_successor`]), and of its last contended
/// acquisition if that was in the optimistic spin ([`took_in_spin`]).
/// Lives in `LocalState`; only its thread touches it.
#[derive(Debug, Default)]
pub(crate) struct HandedOff {
    lock: Cell<usize>,
    /// The lock (its address) of this thread's last acquisition as word
    /// waiter if that was a hand-off; 0 otherwise.
    took_handed: Cell<usize>,
    /// The lock of this thread's last contended acquisition if it took it
    /// in the optimistic spin, before queueing; 0 otherwise.
    took_spinning: Cell<usize>,
}

impl HandedOff {
    pub(crate) const fn new() -> Self {
        Self {
            lock: Cell::new(0),
            took_handed: Cell::new(0),
            took_spinning: Cell::new(0),
        }
    }
}

/// A thread's record of the turn it claimed on a lock (see "Turns" in the
/// module docs): which lock (its address; 0: none), which turn, since when,
/// how many writes it has made in it, and at which of them it reads the
/// clock next (see [`next_clock_read`]). Lives in `LocalState`; only its
/// thread touches it.
#[derive(Debug, Default)]
pub(crate) struct ClaimedTurn {
    lock: Cell<usize>,
    turn: Cell<u32>,
    since_ns: Cell<u64>,
    writes: Cell<u32>,
    check_at: Cell<u32>,
}

impl ClaimedTurn {
    pub(crate) const fn new() -> Self {
        Self {
            lock: Cell::new(0),
            turn: Cell::new(0),
            since_ns: Cell::new(0),
            writes: Cell::new(0),
            check_at: Cell::new(0),
        }
    }
}

/// The calling thread claimed turn `turn` of the lock at `lock`, now.
#[inline]
pub(crate) fn claim_turn<P: Platform>(lock: usize, turn: u32) {
    let now = P::now_ns();
    let _ = P::with_local(|l| {
        let t = &l.claimed_turn;
        t.lock.set(lock);
        t.turn.set(turn);
        t.since_ns.set(now);
        t.writes.set(0);
        t.check_at.set(TUNING.qrw_turn_clock_writes);
    });
}

/// The calling thread's write ended its turn on the lock at `lock` (it
/// cleared `TURN`: nobody waited): forgets the record, so that a later
/// claim whose number comes round to the same one is not taken for ours.
#[inline]
pub(crate) fn turn_ends<P: Platform>(lock: usize) {
    let _ = P::with_local(|l| {
        if l.claimed_turn.lock.get() == lock {
            l.claimed_turn.lock.set(0);
        }
    });
}

/// Whose turn `turn` of the lock at `lock` is, asked by a writer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Turn {
    /// Another thread's (or one we no longer hold).
    Theirs,
    /// Ours, and it lasts.
    Ours,
    /// Ours, but it has lasted `qrw_turn_ns`: we give it up (the record is
    /// gone).
    Over,
}

/// The common case of [`turn_of`], for a writer's inline path: true if
/// turn `turn` of the lock at `lock` is the calling thread's and this
/// write is not one that reads the clock (see [`next_clock_read`]),
/// counting the write; false otherwise, counting nothing (the caller's
/// slow path then asks `turn_of`).
#[inline]
pub(crate) fn count_write_in_turn<P: Platform>(lock: usize, turn: u32) -> bool {
    P::with_local(|l| {
        let t = &l.claimed_turn;
        let writes = t.writes.get().wrapping_add(1);
        if t.lock.get() != lock || t.turn.get() != turn || writes >= t.check_at.get() {
            return false;
        }
        t.writes.set(writes);
        true
    })
    .unwrap_or(false)
}

/// Whose turn `turn` of the lock at `lock` is (see [`Turn`]); counts one
/// write in it if it is ours.
#[inline]
pub(crate) fn turn_of<P: Platform>(lock: usize, turn: u32) -> Turn {
    let mut check = None;
    let mine = P::with_local(|l| {
        let t = &l.claimed_turn;
        if t.lock.get() != lock || t.turn.get() != turn {
            return false;
        }
        let writes = t.writes.get().wrapping_add(1);
        t.writes.set(writes);
        if writes >= t.check_at.get() {
            check = Some((t.since_ns.get(), writes));
        }
        true
    })
    .unwrap_or(false);
    if !mine {
        return Turn::Theirs;
    }
    let Some((since, writes)) = check else {
        return Turn::Ours;
    };
    let elapsed = P::now_ns().wrapping_sub(since);
    // (Where there is no clock, `elapsed` stays 0, the clock reads stay
    // `qrw_turn_clock_writes` apart, and `batch_polls` of them bound the
    // turn.)
    if writes / TUNING.qrw_turn_clock_writes >= TUNING.batch_polls || elapsed >= TUNING.qrw_turn_ns
    {
        let _ = P::with_local(|l| l.claimed_turn.lock.set(0));
        return Turn::Over;
    }
    let next = writes.saturating_add(next_clock_read(writes, elapsed));
    let _ = P::with_local(|l| l.claimed_turn.check_at.set(next));
    Turn::Ours
}

/// How many writes after this one a turn's holder reads the clock again,
/// having made `writes` writes in `elapsed_ns` of its turn: half the
/// writes it would make before the turn ends at the pace so far, between
/// `qrw_turn_clock_writes` and `qrw_turn_max_clock_writes`. A holder
/// writing in a tight loop (a few ns a write) then reads the clock (tens
/// of ns on a VM) a few dozen times a turn instead of once every
/// `qrw_turn_clock_writes` writes, which cost it 5-6% of its writes; one
/// whose writes slow down overruns its turn by at most
/// `qrw_turn_max_clock_writes` of them. (Halving the estimate each time is
/// the doubling-search bound on the number of reads.)
#[inline]
fn next_clock_read(writes: u32, elapsed_ns: u64) -> u32 {
    let min = TUNING.qrw_turn_clock_writes;
    if elapsed_ns == 0 {
        return min;
    }
    let left = TUNING.qrw_turn_ns.saturating_sub(elapsed_ns);
    // At most 2^32 writes times 2^64 / 2^32 ns: u128 keeps it exact.
    let expected = u128::from(writes) * u128::from(left) / u128::from(elapsed_ns);
    (expected / 2).clamp(
        u128::from(min),
        u128::from(TUNING.qrw_turn_max_clock_writes.max(min)),
    ) as u32
}

/// A holder's watch on its own stretch of re-taking a lock while the
/// word waiter sleeps through its batch (see [`holder_overran`]): which
/// lock (its address; 0: none), when the stretch started, when the clock
/// was last read, and the releases left until the next read. Lives in
/// `LocalState`; only its thread touches it.
#[derive(Debug, Default)]
pub(crate) struct HolderStretch {
    lock: Cell<usize>,
    since_ns: Cell<u64>,
    last_ns: Cell<u64>,
    countdown: Cell<u32>,
    /// The releases between the last two clock reads.
    checked: Cell<u32>,
    /// Whether they came less than `qs_overrun_tight_ns` apart.
    tight: Cell<bool>,
    /// The releases of this stretch up to the last clock read (the turn
    /// quota's count, `wait::quota`).
    releases: Cell<u64>,
    /// When this stretch started (`since_ns` moves on with each yield).
    start_ns: Cell<u64>,
}

impl HolderStretch {
    pub(crate) const fn new() -> Self {
        Self {
            lock: Cell::new(0),
            since_ns: Cell::new(0),
            last_ns: Cell::new(0),
            countdown: Cell::new(0),
            checked: Cell::new(0),
            tight: Cell::new(false),
            releases: Cell::new(0),
            start_ns: Cell::new(0),
        }
    }
}

/// Called by a release of `lock` that finds a word waiter that has not
/// claimed the lock yet, when [`overrun_check_due`] says so: reads the
/// clock, and says whether the calling thread has been re-taking the lock
/// for longer than the batch plus `qs_overrun_yield_ns` and should yield
/// its CPU once after this release ([`Overran`]).
///
/// Why: the word waiter ends the batch when it runs, and a waiter woken
/// (by its predecessor, or by its own timer at the end of the batch) on
/// the CPU the holder runs on is often queued behind the holder until its
/// time slice ends, milliseconds, while the other CPU idles; the batch
/// runs that much longer and shares drift apart (docs/measurements.md
/// traces it with `perf sched`). A holder cannot tell where the waiter
/// is, but it can tell that the batch is long over: then a yield runs the
/// waiter if it waits on this CPU, and returns at once if not. The batch
/// it compares with is the full `batch_ns` (a holder that owes batch time
/// is granted less, and its overrun is settled in its debt as before), or
/// `qs_turn_bound_ns` once the lock has a turn quota ([`turn_bound`]).
/// The same clock read also ends the turn of a holder that made the lock's
/// quota ([`Overran::HandOver`]). A stretch starts at the first clock read,
/// and a new one when the previous read was more than a batch ago (the
/// thread waited in between), after a hand-over ([`turn_ended`]) or after
/// a contended acquisition ([`stretch_restarts`]).
#[cold]
pub(crate) fn holder_overran<P: Platform>(lock: usize) -> Overran {
    P::with_local(|l| stretch_over::<P>(&l.holder_stretch, lock)).unwrap_or(Overran::No)
}

/// Counts one release of a lock whose word waiter sleeps through its
/// batch; true when [`holder_overran`] should read the clock. Inline and
/// small: two instructions on a thread-local line.
#[inline(always)]
pub(crate) fn overrun_check_due<P: Platform>() -> bool {
    if TUNING.qs_overrun_check_releases == 0 {
        return false;
    }
    P::with_local(|l| {
        let c = &l.holder_stretch.countdown;
        let left = c.get();
        c.set(left.wrapping_sub(1));
        left <= 1
    })
    .unwrap_or(false)
}

/// [`holder_overran`]'s clock read. The next one comes after as many
/// releases as the thread made in about `qs_overrun_check_ns` at its pace
/// since this read's predecessor, at least `qs_overrun_check_releases`
/// and at most 64 times that: a clock read costs tens of nanoseconds on a
/// VM, as much as several releases in a tight loop.
fn stretch_over<P: Platform>(s: &HolderStretch, lock: usize) -> Overran {
    let now = P::now_ns();
    let min = TUNING.qs_overrun_check_releases;
    let since_last = now.wrapping_sub(s.last_ns.get());
    let mut next = min;
    if s.lock.get() != lock || since_last > TUNING.batch_ns {
        s.lock.set(lock);
        s.since_ns.set(now);
        s.start_ns.set(now);
        s.releases.set(0);
        s.tight.set(false);
    } else {
        // (Without a clock `since_last` stays 0: the reads stay `min`
        // apart and the stretch never grows long.)
        let made = u64::from(s.checked.get());
        s.releases.set(s.releases.get() + made);
        if let Some(at_pace) = (made * TUNING.qs_overrun_check_ns).checked_div(since_last) {
            next = at_pace.clamp(u64::from(min), u64::from(min) * 64) as u32;
        }
        s.tight.set(since_last < made * TUNING.qs_overrun_tight_ns);
    }
    s.checked.set(next);
    s.countdown.set(next);
    s.last_ns.set(now);
    // The turn quota: made, and the holder hands the lock over.
    let quota = quota::of(lock);
    if quota != 0 && s.releases.get() >= quota {
        return Overran::HandOver;
    }
    let bound = turn_bound(quota);
    if now.wrapping_sub(s.since_ns.get()) < bound + TUNING.qs_overrun_yield_ns {
        return Overran::No;
    }
    // Yield again only after another `qs_overrun_yield_ns`.
    s.since_ns.set(now.wrapping_sub(bound));
    if s.tight.get() {
        Overran::YieldAndQueue
    } else {
        Overran::Yield
    }
}

/// What [`holder_overran`] tells a releasing holder to do.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Overran {
    /// Nothing: the batch is not long over (or this is no clock read).
    No,
    /// Yield once after the release.
    Yield,
    /// Yield once after the release, and queue at the next `lock` as after
    /// a hand-over ([`handing_off`]): the holder runs a tight loop (its
    /// releases less than `qs_overrun_tight_ns` apart), so the waiter we
    /// yield to takes the lock, and spinning for it would only take it
    /// back between the waiter's acquisitions. Threads that work between
    /// their critical sections keep their spin (queueing them cost those
    /// loops up to 16%; docs/measurements.md has the figures).
    YieldAndQueue,
    /// The holder made the lock's turn quota (`wait::quota`): it hands
    /// the lock over to the word waiter, as a fair unlock does, and its
    /// next `lock` queues.
    HandOver,
}

/// How long a word waiter lets a holder run: `batch_ns`, or once the lock
/// has a turn quota (`quota` not 0), the longer `qs_turn_bound_ns`, within
/// which the holder hands the lock over when it made the quota.
#[inline]
pub(crate) fn turn_bound(quota: u64) -> u64 {
    if quota == 0 {
        TUNING.batch_ns
    } else {
        TUNING.qs_turn_bound_ns
    }
}

/// The calling thread's turn on `lock` ended with a hand-over to the word
/// waiter (it claimed the lock, or the holder made the quota): folds the
/// turn's pace into the lock's quota and ends the stretch. The releases
/// since the last clock read are the ones counted down since it.
pub(crate) fn turn_ended<P: Platform>(lock: usize) {
    let _ = P::with_local(|l| {
        let s = &l.holder_stretch;
        if s.lock.get() != lock {
            return;
        }
        let since_read = s.checked.get().saturating_sub(s.countdown.get());
        let releases = s.releases.get() + u64::from(since_read);
        s.lock.set(0);
        // The next stretch starts at the next release that finds a word
        // waiter asleep, counted from there.
        s.countdown.set(0);
        let now = P::now_ns();
        // A stretch whose last clock read is more than a batch old is over
        // (as `stretch_over` would find): the thread waited or worked
        // elsewhere since, and its count over that time is no turn's pace.
        if now.wrapping_sub(s.last_ns.get()) > TUNING.batch_ns {
            return;
        }
        quota::fold(lock, releases, now.wrapping_sub(s.start_ns.get()));
    });
}

/// The calling thread took `lock` on its contended path (it found the
/// lock held: it spun, queued or waited as the word waiter): a new turn,
/// so a stretch of re-takes it had on `lock` is over, as after its own
/// hand-over ([`turn_ended`], without a pace to fold: that turn ended
/// without us, its length unknown). A stretch counts the releases and
/// time of one turn of uncontended re-takes; without this, a turn that
/// ended by someone else's doing (the word waiter took the lock free after
/// its claim, a steal, another holder's hand-over) left its count and
/// clock to the thread's next turn if that began within `batch_ns` of the
/// last clock read, which then handed over or yielded after a fraction of
/// its share. Only a contended take can tell: a thread whose next turn
/// begins with a free lock on the fast path, within `batch_ns` of its last
/// clock read, still carries its count into it (it cannot see that
/// others' turns came between without more shared state).
#[inline]
pub(crate) fn stretch_restarts<P: Platform>(lock: usize) {
    let _ = P::with_local(|l| {
        let s = &l.holder_stretch;
        if s.lock.get() == lock {
            s.lock.set(0);
            // The next release that finds a word waiter asleep reads the
            // clock and starts the stretch.
            s.countdown.set(0);
        }
    });
}

/// The calling thread reserves the lock at `lock` for its word waiter.
#[inline]
pub(crate) fn handing_off<P: Platform>(lock: usize) {
    let _ = P::with_local(|l| l.handed_off.lock.set(lock));
}

/// Whether the calling thread's last release of `lock` handed it over
/// (consumes the record if it names `lock`; a hand-over of another lock
/// stays noted for that lock's next contended take).
#[inline]
pub(crate) fn just_handed_off<P: Platform>(lock: usize) -> bool {
    P::with_local(|l| {
        // Only `lock`'s own note: a contended take of another lock in
        // between must not consume it.
        let note = &l.handed_off.lock;
        let mine = note.get() == lock;
        if mine {
            note.set(0);
        }
        mine
    })
    .unwrap_or(false)
}

/// Records how the calling thread's contended acquisition of `lock` went:
/// `spun`, taken in the optimistic spin; otherwise it queued (or gave up).
#[inline]
pub(crate) fn record_contended_take<P: Platform>(lock: usize, spun: bool) {
    let _ = P::with_local(|l| l.handed_off.took_spinning.set(if spun { lock } else { 0 }));
}

/// Whether the calling thread's last contended acquisition of `lock` was
/// taken in the optimistic spin: then spinning pays on this lock (its
/// holders let it go soon and leave it free for a while), and the next
/// spin may poll for longer before it queues (`qs_pre_queue_polls_after_spin`).
#[inline]
pub(crate) fn took_in_spin<P: Platform>(lock: usize) -> bool {
    P::with_local(|l| l.handed_off.took_spinning.get() == lock).unwrap_or(false)
}

/// How a word waiter acquired the lock it waited for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum WaiterTake {
    /// Reserved for it by a release (`RESERVED`): the holder was running.
    HandedOff,
    /// Free when it looked after claiming the lock: the holder had let it
    /// go before the claim.
    FreeAfterClaim,
    /// Free before its claim (the lock stayed free after a kick).
    Early,
}

/// Whether a word waiter that took `lock` as `take` gives its CPU once to
/// the successor it has just woken (see "Preemption" in `qspinlock`'s
/// module docs), and records the take for the next decision.
///
/// A hand-off yields: the old holder was running a tight loop, so the
/// CPUs are busy and a woken successor would wait for a tick. A lock found
/// free after the claim means either that the old holder was preempted
/// between two critical sections (in a tight loop: the same busy CPUs) or
/// that the threads work between their critical sections, where the yield
/// only ends batches early (the holder's batch runs on while the successor
/// wakes, which is what keeps such a lock busy). The thread's previous take
/// of the same lock tells the two apart: in a tight loop it was most
/// likely a hand-off. Yielding at every free take instead evened the shares
/// of 16 threads on 2 CPUs out further but cost 15-25% with 1 µs inside and
/// 2 µs outside the critical sections (docs/measurements.md has the
/// figures).
#[inline]
pub(crate) fn yields_to_successor<P: Platform>(lock: usize, take: WaiterTake) -> bool {
    let handed = take == WaiterTake::HandedOff;
    let last_handed = P::with_local(|l| {
        l.handed_off
            .took_handed
            .replace(if handed { lock } else { 0 })
            == lock
    })
    .unwrap_or(false);
    handed || (take == WaiterTake::FreeAfterClaim && last_handed)
}

/// A thread's batch debt (see the module docs), kept in its queue node.
///
/// Relaxed throughout: a scheduling hint, not a protocol. A holder's debt on
/// a lock is settled by the waiter that ends its batch, one after another
/// through the lock's hand-offs; a thread that holds two locks at once and
/// is handed off from both at the same moment may lose one settlement,
/// which costs one batch its length, nothing else.
#[derive(Debug)]
pub(crate) struct BatchDebt {
    /// The lock the debt is owed on (its address; 0: none).
    lock: AtomicUsize,
    /// Nanoseconds owed, at most `batch_debt_max_ns`.
    ns: AtomicU64,
}

impl BatchDebt {
    /// No debt.
    #[cfg(not(loom))]
    pub(crate) const fn new() -> Self {
        Self {
            lock: AtomicUsize::new(0),
            ns: AtomicU64::new(0),
        }
    }

    /// No debt.
    #[cfg(loom)]
    pub(crate) fn new() -> Self {
        Self {
            lock: AtomicUsize::new(0),
            ns: AtomicU64::new(0),
        }
    }

    /// What the holder owes on `lock`.
    #[inline]
    fn owed(&self, lock: usize) -> u64 {
        if self.lock.load(Ordering::Relaxed) == lock {
            self.ns.load(Ordering::Relaxed)
        } else {
            0
        }
    }

    /// The batch a word waiter grants a holder that owes this debt on
    /// `lock`: `batch_ns` less the debt, at least `batch_min_ns`.
    #[inline]
    pub(crate) fn batch_ns(&self, lock: usize) -> u64 {
        let floor = TUNING.batch_min_ns.min(TUNING.batch_ns);
        TUNING.batch_ns - self.owed(lock).min(TUNING.batch_ns - floor)
    }

    /// Forgets the debt: the node goes to a new owner (a thread's node
    /// index is reused after it exits), which owes nothing. (Only the std
    /// platform's node table reuses nodes.)
    #[inline]
    #[cfg_attr(not(feature = "std"), allow(dead_code))]
    pub(crate) fn clear(&self) {
        self.lock.store(0, Ordering::Relaxed);
        self.ns.store(0, Ordering::Relaxed);
    }

    /// Settles one batch on `lock` that ran `ran_ns`, from the holder's
    /// acquisition to its hand-off: the debt grows by what it ran beyond
    /// `batch_ns` and shrinks by what it ran short.
    #[inline]
    pub(crate) fn settle(&self, lock: usize, ran_ns: u64) {
        let owed = self.owed(lock);
        let next = owed
            .saturating_add(ran_ns)
            .saturating_sub(TUNING.batch_ns)
            .min(TUNING.batch_debt_max_ns);
        if next != owed || self.lock.load(Ordering::Relaxed) != lock {
            self.lock.store(lock, Ordering::Relaxed);
            self.ns.store(next, Ordering::Relaxed);
        }
    }
}

#[cfg(all(test, not(loom), not(shuttle)))]
mod tests {
    use super::*;

    const A: usize = 0x1000;
    const B: usize = 0x2000;

    /// A word waiter yields to its successor after a hand-off, and after a
    /// free take only if its previous take of that lock was a hand-off;
    /// never after an early take. The thread's record names one lock: a
    /// take of another lock replaces it.
    #[cfg(feature = "std")]
    #[test]
    fn yields_after_a_hand_off_and_a_free_take_that_follows_one() {
        use crate::platform::StdPlatform as P;
        use WaiterTake::{Early, FreeAfterClaim, HandedOff};
        std::thread::spawn(|| {
            // No take before: a free take does not yield.
            assert!(!yields_to_successor::<P>(A, FreeAfterClaim));
            assert!(yields_to_successor::<P>(A, HandedOff));
            // The hand-off before it was of A: a free take of A yields.
            assert!(yields_to_successor::<P>(A, FreeAfterClaim));
            // ... and the one after that does not (its previous was free).
            assert!(!yields_to_successor::<P>(A, FreeAfterClaim));
            assert!(yields_to_successor::<P>(A, HandedOff));
            // An early take never yields, and clears the record.
            assert!(!yields_to_successor::<P>(A, Early));
            assert!(!yields_to_successor::<P>(A, FreeAfterClaim));
            // A hand-off of B replaces the record of A's.
            assert!(yields_to_successor::<P>(B, HandedOff));
            assert!(!yields_to_successor::<P>(A, FreeAfterClaim));
        })
        .join()
        .unwrap();
    }

    /// The record of a contended take names one lock, and says whether the
    /// last contended take of it was in the spin.
    #[cfg(feature = "std")]
    #[test]
    fn the_spin_take_record_names_the_last_contended_take() {
        use crate::platform::StdPlatform as P;
        std::thread::spawn(|| {
            assert!(!took_in_spin::<P>(A));
            record_contended_take::<P>(A, true);
            assert!(took_in_spin::<P>(A));
            assert!(!took_in_spin::<P>(B));
            record_contended_take::<P>(A, false);
            assert!(!took_in_spin::<P>(A));
            record_contended_take::<P>(A, true);
            record_contended_take::<P>(B, true);
            assert!(!took_in_spin::<P>(A));
            assert!(took_in_spin::<P>(B));
        })
        .join()
        .unwrap();
    }

    /// The note of a hand-over of A is for A's next `lock`; a
    /// contended `lock` of another lock in between does not take it.
    #[cfg(feature = "std")]
    #[test]
    fn a_hand_over_note_survives_a_contended_take_of_another_lock() {
        use crate::platform::StdPlatform as P;
        std::thread::spawn(|| {
            handing_off::<P>(A);
            assert!(!just_handed_off::<P>(B));
            assert!(just_handed_off::<P>(A), "A's note went with B's lock");
            assert!(!just_handed_off::<P>(A), "consumed");
        })
        .join()
        .unwrap();
    }

    /// A holder whose batch ran long gets shorter ones (never under
    /// `batch_min_ns`) until the excess is paid back; the debt is owed on
    /// one lock only, and it is capped.
    #[test]
    fn batch_debt_shortens_batches_until_paid() {
        let (full, min) = (TUNING.batch_ns, TUNING.batch_min_ns);
        assert!(min < full / 2, "the tuning leaves room to pay back");
        let debt = BatchDebt::new();
        assert_eq!(debt.batch_ns(A), full);
        // A batch that ran on time, or short, owes nothing.
        debt.settle(A, full);
        assert_eq!(debt.batch_ns(A), full);
        debt.settle(A, min);
        assert_eq!(debt.batch_ns(A), full);
        // A head woken late: the batch ran `full + late`.
        let late = full / 2;
        debt.settle(A, full + late);
        assert_eq!(debt.batch_ns(A), full - late);
        // Not on another lock.
        assert_eq!(debt.batch_ns(B), full);
        // The shorter batch, run on time, pays it back.
        debt.settle(A, full - late);
        assert_eq!(debt.batch_ns(A), full);
        // A long stall is owed up to the cap, and the floor holds.
        debt.settle(A, full + 100 * full);
        assert_eq!(debt.batch_ns(A), min);
        debt.settle(A, min);
        let owed = TUNING.batch_debt_max_ns - (full - min);
        assert_eq!(debt.batch_ns(A), full - owed.min(full - min));
        // A batch settled on another lock starts that lock's debt afresh.
        debt.settle(B, full + late);
        assert_eq!(debt.batch_ns(A), full);
        assert_eq!(debt.batch_ns(B), full - late);
    }

    /// A turn's holder spaces its clock reads by its pace: writes far
    /// faster than the turn read it `qrw_turn_max_clock_writes` apart, slow
    /// ones `qrw_turn_clock_writes` apart, and the spacing shrinks as the
    /// turn's end nears; without a clock it stays the shortest.
    #[test]
    fn a_turn_holder_reads_the_clock_by_its_pace() {
        let (min, max) = (
            TUNING.qrw_turn_clock_writes,
            TUNING.qrw_turn_max_clock_writes,
        );
        let turn = TUNING.qrw_turn_ns;
        assert!(
            min < 555 && 555 < max,
            "the cases below fall between the bounds"
        );
        assert_eq!(next_clock_read(min, 0), min, "no clock");
        // `min` writes in a thousandth of the turn: ~1000 x as many to go.
        assert_eq!(next_clock_read(min, turn / 1000), max);
        // 100 writes in half the turn: 100 to go, read again after `min`.
        assert_eq!(next_clock_read(100, turn / 2), min);
        // 10 000 writes in 90% of it: 1 111 to go, half of them.
        assert_eq!(next_clock_read(10_000, turn / 10 * 9), 555);
        assert_eq!(next_clock_read(10_000, turn), min, "the turn is over");
    }
}
