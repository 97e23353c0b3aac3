//! `RefreshOnce<T>`: many threads want a fresh value; one recomputes it, the
//! others wait for that recomputation and share its result.
//!
//! This is the fix seed 003 (Xen's pmtimer) was after. 32 vCPUs serialised on
//! a spinlock just to recompute the same timer value. The first patch let
//! the losers of a `trylock` return the old value: *stale* (rejected). The
//! second made them spin on a counter bumped after each update: a loser
//! could end up waiting for the *next* holder's update, and again for the one
//! after (rejected). Keir's `spin_barrier` makes the losers wait for the
//! current holder only, but that holder may have started before they
//! arrived. And the value must be published atomically.
//!
//! # Promise
//! `refresh(f)` returns the value computed by an update (a call of some
//! caller's `f`) that **started after the caller arrived**, and the caller
//! waits for **at most one update beyond the one in progress at its
//! arrival**: a caller arriving while no update runs waits for one update
//! (often its own); a caller arriving mid-update waits for that update to
//! finish (its result was computed from a time before the caller came, so it
//! does not count) and then for the next one, and never for a third. All
//! callers that arrive during one update are served by the *same* next
//! update.
//!
//! **An update whose `f` panics** does not count: it completes nothing, and
//! its waiters wait for the update that replaces it. A caller that arrived
//! during the panicking update was waiting for the update after it; that
//! one now completes the generation the panicking one should have, so the
//! caller waits for one more: after a panic, a caller may wait for the
//! update in progress at its arrival (abandoned), the replacement, and the
//! one after; each further update that panics while it waits adds one.
//!
//! **Not supported**: calling `refresh` on the same `RefreshOnce` from
//! inside its own `f` (the update waits for itself: a deadlock, as with
//! re-locking a non-recursive mutex).
//!
//! # The words
//!
//! ```text
//! state:   bits 31..3    2             1      0
//!         +------------+-------------+------+------+
//!         | generation | NEXT_PARKED | NEXT | BUSY |
//!         +------------+-------------+------+------+
//! gate[0], gate[1]:  bits 31..1 event count | bit 0 GATE_PARKED
//! ```
//! - `generation` counts completed updates (wrapping; 2^29 values). Target
//!   generation `t` means "the update that completes generation `t`",
//!   `U(t)`.
//! - `BUSY`: an update runs, from the `cmpxchg` that starts it (the only way
//!   to start one: `BUSY` *is* the update lock) until the `cmpxchg` that
//!   completes it. Only its runner changes `generation` and clears `BUSY`.
//! - `NEXT`: a waiter (the *head*) has claimed the job of starting the update
//!   after the running one. Set by that waiter (while `BUSY`), kept by the
//!   completion, cleared by the next start (whoever starts it: a newcomer may
//!   beat the head, which then simply waits like everyone else).
//! - `NEXT_PARKED`: the head sleeps on `state`; set by the head (while
//!   `BUSY`), cleared by the completion, which then wakes it.
//! - `gate[t & 1]` (by the parity of the target generation): callers waiting
//!   for `U(t)` without being its head sleep here. The completion of `t`
//!   bumps the count of `gate[t & 1]` and wakes it if `GATE_PARKED`. So the
//!   callers waiting for `U(t + 1)` sleep through the completion of `t` on
//!   the other gate: every sleeper wakes once, when its value is ready.
//!
//! # Algorithm
//! 1. **Arrive**: load `state` (SeqCst). Generation `g`, not `BUSY`: the
//!    target is `g + 1` (the first update to start from now on). `BUSY`: the
//!    running update completes `g + 1` but started before us, so the target
//!    is `g + 2`.
//! 2. **Start**: whenever `state` is not `BUSY` and the target is not
//!    reached, `cmpxchg` it to `generation | BUSY` (SeqCst); the winner runs
//!    `f` on the current value, publishes the result in the [`SeqLock`]
//!    (atomic; readers never see a torn value), then completes: `cmpxchg` to
//!    `generation + 1`, keeping `NEXT`; bumps the target's gate; wakes the
//!    gate's sleepers and the head as their bits say. It returns its own
//!    result (its update started after it arrived, whatever the generation).
//! 3. **Wait** while `BUSY` and the target is not reached:
//!    - the target's update is the one after the running one (`BUSY` at
//!      `t - 2`) and nobody claimed it: claim `NEXT` and become its head. The
//!      head spins (it must start the update soon after the running one
//!      completes; see "Grace"), then sleeps on `state` with `NEXT_PARKED`.
//!    - otherwise (the target runs now, or a head will start it): spin
//!      briefly, then sleep on the target's gate.
//! 4. **Return** as soon as the generation reached the target: read the
//!    value (a `SeqLock` read).
//!
//! # Why the promise holds
//! - *Started after arrival*: an update starts with a SeqCst `cmpxchg` of
//!   `state` from a value without `BUSY`. If our arrival load saw `g` not
//!   busy, every later start follows it in `state`'s modification order
//!   (coherence), so the update completing `g + 1` started after us, as did
//!   all later ones. If it saw `BUSY` at `g`, the update completing `g + 2`
//!   started after the completion of `g + 1`, which follows our load. Both
//!   are SeqCst with the arrival load, so "after" also holds in the single
//!   total order that orders the clock reads `f` makes after its start.
//! - *At most one more, and shared*: generations grow by exactly one per
//!   update, and a caller returns as soon as it sees its target. Updates are
//!   serialized (`BUSY`), so between our arrival and our target there are at
//!   most the update in progress (completing `g + 1`) and the target itself.
//!   Every caller arriving during `U(g + 1)` has target `g + 2` and returns
//!   when `U(g + 2)` completes.
//! - *Progress*: the target is started by the head (which never sleeps
//!   through the completion before it: that completion clears
//!   `NEXT_PARKED` and wakes it), by a newcomer, or by a waiter that finds
//!   `state` idle; a non-head sleeps only while its target runs or a head
//!   exists for it.
//! - *Atomic publication*: the completion `cmpxchg` is Release after the
//!   value was published, so a caller that sees its target (Acquire) reads
//!   that value or a later one.
//!
//! # No lost wake-up
//! - Head: it sets `NEXT_PARKED` with a `cmpxchg` from the very `BUSY` value
//!   it judged and sleeps while `state` equals that value plus
//!   `NEXT_PARKED`. The completion is an RMW of `state` too: after the head's
//!   `cmpxchg` it sees `NEXT_PARKED` and wakes (`wake_all`: an abandoned
//!   update can leave a stale second head, see the abandon note); before it,
//!   the `cmpxchg` fails and the head re-checks.
//! - Gate sleeper: it reads the gate's count *before* checking `state`, sets
//!   `GATE_PARKED` with a `cmpxchg` from that count, and sleeps while the gate
//!   equals count plus `GATE_PARKED`. A completion changes `state` first and
//!   then bumps the gate (Release; the sleeper's load is Acquire): if the
//!   sleeper's count is from after the bump, its `state` check sees the
//!   completion; if from before, the bump makes the `cmpxchg` fail or sees
//!   `GATE_PARKED` and wakes.
//!
//! # Cache lines
//! `state`, the gates and the value live on three lines. Waiters poll only
//! `state`, so an update costs the updater two transfers of that line (its
//! start and its completion `cmpxchg`) however many wait; the value's line
//! (sequence, writer lock, cells) moves only when a caller reads the result,
//! once per call; the gates' line only when somebody sleeps. (With all three
//! on one line every poll made each of the updater's six writes a miss.)
//!
//! # Waiting (16 threads on 2 cores)
//! Updates are short (a clock read, ~100 ns) to moderate (µs). Waiters poll
//! `state` with loads, the first `rf_poll_relaxes` relaxes apart and then
//! doubling to 16x that: every poll of the line the updater is about to
//! write costs the updater a miss, so dense polling slowed a 100 ns update
//! loop down 2x. A non-head polls for `rf_spin_ns` (about the cost of sleeping
//! and being woken; never yielding) and then sleeps, so the updater and the
//! callers that can still join the next update get the CPUs; it wakes once.
//! The head polls longer (`rf_head_spin_ns`, yielding after `rf_spin_ns`) because
//! the next update waits for it or a newcomer, then sleeps until the
//! running update completes (all budgets are in `wait::tuning`). Without a clock (`now_ns() == 0`) the budgets
//! are poll counts.
//!
//! **Grace.** When the update before its target completes, the head does
//! not start its target at once if that update was long (it polled
//! `rf_grace_min_polls` or more): it polls `rf_head_grace_polls` more times, so
//! that the callers just served, back for their next value, start the target
//! themselves and share it with everyone waiting (otherwise each of them
//! arrives during the head's update and needs the one after). Non-heads that
//! see the state idle with a head leave the start to it while their spin
//! budget lasts (they never sleep on an idle state). A cheap update is
//! started at once: sharing it costs more line transfers than recomputing.
//!
//! If `f` panics, the update is abandoned: `BUSY` is cleared (same
//! generation, `NEXT` kept) and every sleeper is woken; one of them then
//! updates. A head claimed before the abandon may then coexist with a head
//! claimed after it; both act as heads, which is harmless (two spinners,
//! and `wake_all` on `state`).
//!
//! # Classes, statistics, lockdep
//! A `RefreshOnce` is in a [lock class](crate::LockClass)
//! ([`RefreshOnce::with_class`]). With the `stats` feature every `refresh`
//! call counts as a write acquisition; one that found an update running is
//! contended, with its wait; one served by another caller's update counts
//! as coalesced; the hold time is the update's (`f` and the publication).
//! Sleeps on `state` and on the gates count as parks and wakes (spurious
//! when the word had not changed). With `lockdep` a `refresh` is checked
//! like taking a mutex that is held while `f` runs: taking lock L inside `f`
//! while another thread calls `refresh` holding L can deadlock, and so does
//! calling `refresh` on the same `RefreshOnce` inside `f`.

use crate::class::{Access, ClassRef, LockKind};
use crate::hook::{self, Held, Pending};
use crate::platform::{DefaultPlatform, Platform};
use crate::seqlock::{NoUninit, SeqLock};
use crate::sync::atomic::{AtomicU32, Ordering};
use crate::wait::TUNING;

/// An update is running; the update lock.
const BUSY: u32 = 1 << 0;
/// A waiting caller (the head) will start the update after the running one.
const NEXT: u32 = 1 << 1;
/// The head sleeps on `state`.
const NEXT_PARKED: u32 = 1 << 2;
/// One completed update.
const ONE_GEN: u32 = 1 << 3;
/// The generation field.
const GEN_MASK: u32 = !(ONE_GEN - 1);

/// Somebody sleeps on this gate.
const GATE_PARKED: u32 = 1 << 0;
/// One completion of a generation of this gate's parity.
const GATE_ONE: u32 = 1 << 1;

/// A waiter's polling budget: time where the platform has a clock (read
/// every 4th poll: clock reads are not free, and on some VMs they serialise
/// across CPUs), a poll count in any case.
struct Spin {
    start_ns: u64,
    polls: u32,
    late: bool,
}

impl Spin {
    fn new<P: Platform>() -> Self {
        Self {
            start_ns: P::now_ns(),
            polls: 0,
            late: false,
        }
    }

    /// Within budget (`ns` and `polls`): waits one poll interval (yields
    /// instead, past `rf_spin_ns`, if `yield_late`) and returns true. Past
    /// it, returns false.
    fn poll<P: Platform>(&mut self, ns: u64, polls: u32, yield_late: bool) -> bool {
        if self.polls >= polls {
            return false;
        }
        self.polls += 1;
        if self.start_ns != 0 && self.polls.is_multiple_of(4) {
            let elapsed = P::now_ns().wrapping_sub(self.start_ns);
            if elapsed >= ns {
                return false;
            }
            self.late = elapsed >= TUNING.rf_spin_ns;
        }
        if yield_late && self.late {
            P::yield_now();
        } else {
            for _ in 0..TUNING.rf_poll_relaxes << (self.polls / 8).min(4) {
                P::relax();
            }
        }
        true
    }
}

/// Has the generation in `state` reached `target` (wrapping)?
#[inline]
const fn reached(state: u32, target: u32) -> bool {
    ((state & GEN_MASK).wrapping_sub(target) as i32) >= 0
}

/// The gate of callers waiting for the update that completes `target`.
#[inline]
const fn gate_index(target: u32) -> usize {
    ((target / ONE_GEN) & 1) as usize
}

/// A value that many threads refresh, one at a time, sharing each
/// refresh; see the module documentation.
///
/// Name the type where one is made (`let r: RefreshOnce<u64> =
/// RefreshOnce::new(0);`): as for [`SeqLock`], the platform parameter's
/// default is not inferred.
///
/// ```
/// use scalelock::RefreshOnce;
///
/// let clock: RefreshOnce<u64> = RefreshOnce::new(0);
/// assert_eq!(clock.refresh(|t| t + 1), 1);
/// assert_eq!((clock.get(), clock.generation()), (1, 1));
/// ```
///
/// Each of its three parts has a cache line of its own (see "Cache lines"
/// in the module docs): the state, the gates, and the value with its
/// sequence and writer lock (a [`SeqLock`]), each padded to 128 bytes. So
/// with a value of up to 112 bytes (96 with the `stats` or `lockdep`
/// feature, whose lock class adds 16 bytes to the `SeqLock`) it takes 384
/// bytes in all; with a larger one, 256 bytes plus the
/// `SeqLock` rounded up to a multiple of 128.
pub struct RefreshOnce<T: NoUninit, P: Platform = DefaultPlatform> {
    /// Generation, `BUSY`, `NEXT`, `NEXT_PARKED`; see the module docs.
    state: Line<AtomicU32>,
    /// Sleepers by the parity of their target generation.
    gates: Line<[AtomicU32; 2]>,
    /// The value. Its writer lock is only ever taken by the `BUSY` owner, so
    /// it is never contended. Its class field is this lock's class (its own
    /// reads and writes are not instrumented).
    value: Line<SeqLock<T, P>>,
}

/// A cache line of its own (128 bytes: x86 prefetches lines in pairs).
#[repr(align(128))]
struct Line<T>(T);

impl<T> core::ops::Deref for Line<T> {
    type Target = T;
    #[inline]
    fn deref(&self) -> &T {
        &self.0
    }
}

impl<T: NoUninit, P: Platform> RefreshOnce<T, P> {
    /// Holds `value`, generation 0, in the `RefreshOnce` type class.
    #[cfg(not(any(loom, shuttle)))]
    pub const fn new(value: T) -> Self {
        Self::with_class(value, ClassRef::TYPE)
    }

    /// Holds `value`, generation 0, in the `RefreshOnce` type class.
    #[cfg(any(loom, shuttle))]
    pub fn new(value: T) -> Self {
        Self::with_class(value, ClassRef::TYPE)
    }

    /// Holds `value`, generation 0, in lock class `class`.
    #[cfg(not(any(loom, shuttle)))]
    pub const fn with_class(value: T, class: ClassRef) -> Self {
        Self {
            state: Line(AtomicU32::new(0)),
            gates: Line([AtomicU32::new(0), AtomicU32::new(0)]),
            value: Line(SeqLock::with_class(value, class)),
        }
    }

    /// Holds `value`, generation 0, in lock class `class`.
    #[cfg(any(loom, shuttle))]
    pub fn with_class(value: T, class: ClassRef) -> Self {
        Self {
            state: Line(AtomicU32::new(0)),
            gates: Line([AtomicU32::new(0), AtomicU32::new(0)]),
            value: Line(SeqLock::with_class(value, class)),
        }
    }

    #[inline]
    fn class(&self) -> ClassRef {
        self.value.class()
    }

    /// The lock's address, which names it to lockdep.
    #[inline]
    fn addr(&self) -> usize {
        self as *const Self as usize
    }

    /// Sleeps in `P::wait(word, expected)`, telling statistics (as a
    /// write, as `refresh` is counted).
    #[inline]
    fn wait(&self, word: &AtomicU32, expected: u32) {
        hook::park(self.class(), LockKind::RefreshOnce, Access::Write);
        P::wait(word, expected);
        if hook::COMPILED {
            // Relaxed: a statistic; a wake-up that left the word unchanged
            // was spurious (or raced with a change and its undo).
            let spurious = word.load(Ordering::Relaxed) == expected;
            hook::wake(self.class(), LockKind::RefreshOnce, Access::Write, spurious);
        }
    }

    /// Returns a value computed by `f(&current)` in an update that started
    /// after this call began, waiting for at most one update beyond any
    /// already in progress. `f` runs at most once, and only if no other
    /// caller's update can serve this call.
    #[inline]
    pub fn refresh(&self, f: impl FnOnce(&T) -> T) -> T {
        let p = hook::start(
            self.class(),
            LockKind::RefreshOnce,
            self.addr(),
            Access::Write,
        );
        // Arrival. SeqCst: ordered against every start's SeqCst cmpxchg.
        let s = self.state.load(Ordering::SeqCst);
        let target = (s & GEN_MASK)
            .wrapping_add(ONE_GEN)
            .wrapping_add(if s & BUSY != 0 { ONE_GEN } else { 0 });
        if s & BUSY == 0 && self.try_start(s) {
            return self.run_update(p, s & GEN_MASK, f);
        }
        self.refresh_slow(p, target, f)
    }

    /// The latest published value, without refreshing (it may be stale).
    #[inline]
    pub fn get(&self) -> T {
        self.value.read_quiet()
    }

    /// The number of completed updates (wrapping at 2^29).
    #[inline]
    pub fn generation(&self) -> u32 {
        self.state.load(Ordering::Acquire) / ONE_GEN
    }

    /// Whether an update is running right now (a momentary snapshot).
    #[inline]
    pub fn is_refreshing(&self) -> bool {
        self.state.load(Ordering::Relaxed) & BUSY != 0
    }

    /// Who sleeps right now (a momentary snapshot, for tests and
    /// diagnostics): (the head on `state`, somebody on a gate).
    #[doc(hidden)]
    pub fn sleepers(&self) -> (bool, bool) {
        (
            self.state.load(Ordering::Relaxed) & NEXT_PARKED != 0,
            self.gates
                .iter()
                .any(|g| g.load(Ordering::Relaxed) & GATE_PARKED != 0),
        )
    }

    /// Starts an update from the idle `state` value `s`: the update lock.
    #[inline]
    fn try_start(&self, s: u32) -> bool {
        debug_assert_eq!(s & BUSY, 0);
        // SeqCst: the start follows every arrival that saw `s` (or earlier)
        // in the total order; Acquire also pairs with the last completion's
        // Release (we read the value it published).
        self.state
            .compare_exchange(
                s,
                (s & GEN_MASK) | BUSY,
                Ordering::SeqCst,
                Ordering::Relaxed,
            )
            .is_ok()
    }

    #[cold]
    fn refresh_slow(&self, mut p: Pending, target: u32, f: impl FnOnce(&T) -> T) -> T {
        p.contended();
        let gate = &self.gates[gate_index(target)];
        let mut spin = Spin::new::<P>();
        let mut head = false;
        let mut grace = 0;
        loop {
            // Read before the state check (see "No lost wake-up"). Acquire
            // pairs with the Release bump that follows a completion.
            let g = gate.load(Ordering::Acquire);
            // Acquire pairs with the Release completion of the generation we
            // see, and so with its value's publication.
            let s = self.state.load(Ordering::Acquire);
            if reached(s, target) {
                hook::refresh_coalesced(self.class(), LockKind::RefreshOnce);
                p.passed();
                return self.value.read_quiet();
            }
            let next = (s & GEN_MASK).wrapping_add(ONE_GEN);
            if s & BUSY == 0 {
                // Idle. If a head waits to start our target, it gives the
                // callers just served a moment to come back and start it
                // themselves (then they share it with us).
                let headed = s & NEXT != 0 && next == target;
                if headed
                    && head
                    && grace < TUNING.rf_head_grace_polls
                    && spin.polls >= TUNING.rf_grace_min_polls
                {
                    grace += 1;
                    for _ in 0..TUNING.rf_poll_relaxes {
                        P::relax();
                    }
                    continue;
                }
                // Headed and not the head: leave the start to the head while
                // we may spin (never sleep on an idle state: the head may be
                // preempted), then start it ourselves.
                if headed && !head && spin.poll::<P>(TUNING.rf_spin_ns, TUNING.rf_spin_polls, false)
                {
                    continue;
                }
                if self.try_start(s) {
                    // Started after our arrival: ours serves us even if an
                    // abandoned update left the generation below target.
                    return self.run_update(p, s & GEN_MASK, f);
                }
                P::relax();
                continue;
            } else if next != target && s & NEXT == 0 {
                // Our target is the update after the running one, and
                // nobody has claimed it: claim it. Relaxed: publishes
                // nothing; the start is ordered by its own cmpxchg.
                if self
                    .state
                    .compare_exchange_weak(s, s | NEXT, Ordering::Relaxed, Ordering::Relaxed)
                    .is_ok()
                {
                    head = true;
                    spin = Spin::new::<P>();
                }
                continue;
            } else if next != target && head {
                // Head, while the update before ours runs: be ready to
                // start ours the moment it completes.
                if spin.poll::<P>(TUNING.rf_head_spin_ns, TUNING.rf_head_spin_polls, true) {
                    continue;
                }
                if s & NEXT_PARKED == 0
                    && self
                        .state
                        .compare_exchange_weak(
                            s,
                            s | NEXT_PARKED,
                            Ordering::Relaxed,
                            Ordering::Relaxed,
                        )
                        .is_err()
                {
                    continue;
                }
                self.wait(&self.state, s | NEXT_PARKED);
                continue;
            } else if next == target {
                // Our target runs (a newcomer may have beaten our head).
                head = false;
            }
            // Our target runs now, or its head will start it: wait for its
            // completion on our gate.
            if spin.poll::<P>(TUNING.rf_spin_ns, TUNING.rf_spin_polls, false) {
                continue;
            }
            if g & GATE_PARKED == 0
                && gate
                    .compare_exchange_weak(g, g | GATE_PARKED, Ordering::Relaxed, Ordering::Relaxed)
                    .is_err()
            {
                continue;
            }
            self.wait(gate, g | GATE_PARKED);
        }
    }

    /// Holding `BUSY` at generation `generation`: run `f`, publish, complete.
    fn run_update(&self, p: Pending, generation: u32, f: impl FnOnce(&T) -> T) -> T {
        // Dropped last, also when `f` unwinds: the hold ends after the
        // update is completed or abandoned.
        let _held = ReleaseOnDrop {
            held: p.acquired(),
            instance: self.addr(),
        };
        let abandon = Abandon { owner: self };
        // Never contended: only the BUSY owner takes the writer lock.
        let guard = self.value.lock_quiet();
        let new = f(&guard.get());
        guard.publish(new);
        core::mem::forget(abandon);
        self.complete(generation.wrapping_add(ONE_GEN));
        new
    }

    /// Ends the running update: `state` becomes generation `generation`, not BUSY,
    /// with `NEXT` kept; wakes the head if it sleeps.
    #[inline]
    fn set_idle(&self, generation: u32) {
        let mut old = self.state.load(Ordering::Relaxed);
        loop {
            debug_assert_ne!(old & BUSY, 0);
            // Release pairs with waiters' Acquire state loads (and the next
            // starter's cmpxchg): the value is published before they see the
            // new generation. SeqCst: ordered with arrivals (see "Why").
            match self.state.compare_exchange_weak(
                old,
                generation | (old & NEXT),
                Ordering::SeqCst,
                Ordering::Relaxed,
            ) {
                Ok(_) => break,
                // Only NEXT / NEXT_PARKED change under us (the head).
                Err(now) => old = now,
            }
        }
        if old & NEXT_PARKED != 0 {
            P::wake_all(&self.state);
        }
    }

    /// Bumps `gate` after a state change its sleepers wait for; wakes them.
    ///
    /// One read-modify-write: two bumps of one gate can overlap (a
    /// completion's thread may be preempted before its bump while the
    /// completions two and four generations on, or an abandon, bump the same
    /// gate), and a bump computed from a stale load would roll the count
    /// back to a value a sleeper already read, so that its `GATE_PARKED`
    /// `cmpxchg` succeeds by ABA after its wake-up was due.
    #[inline]
    fn open_gate(&self, gate: &AtomicU32) {
        // Release pairs with the sleepers' Acquire gate load that precedes
        // their state check.
        let old = gate
            .fetch_update(Ordering::Release, Ordering::Relaxed, |g| {
                Some((g & !GATE_PARKED).wrapping_add(GATE_ONE))
            })
            .unwrap_or_else(|g| g);
        if old & GATE_PARKED != 0 {
            P::wake_all(gate);
        }
    }

    /// Completes generation `generation` and wakes the callers waiting for it.
    #[inline]
    fn complete(&self, generation: u32) {
        self.set_idle(generation);
        self.open_gate(&self.gates[gate_index(generation)]);
    }
}

/// Ends the statistics and lockdep hold of an update.
struct ReleaseOnDrop {
    held: Held,
    instance: usize,
}

impl Drop for ReleaseOnDrop {
    #[inline]
    fn drop(&mut self) {
        core::mem::replace(&mut self.held, Held::NONE).release(self.instance);
    }
}

/// Abandons the update (clears `BUSY`, same generation) if `f` unwinds.
struct Abandon<'a, T: NoUninit, P: Platform> {
    owner: &'a RefreshOnce<T, P>,
}

impl<T: NoUninit, P: Platform> Drop for Abandon<'_, T, P> {
    fn drop(&mut self) {
        let o = self.owner;
        o.set_idle(o.state.load(Ordering::Relaxed) & GEN_MASK);
        // Waiters for the abandoned update must retry: wake both gates.
        o.open_gate(&o.gates[0]);
        o.open_gate(&o.gates[1]);
    }
}

impl<T: NoUninit + Default, P: Platform> Default for RefreshOnce<T, P> {
    fn default() -> Self {
        Self::new(T::default())
    }
}

impl<T: NoUninit + core::fmt::Debug, P: Platform> core::fmt::Debug for RefreshOnce<T, P> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("RefreshOnce")
            .field("generation", &self.generation())
            .field("refreshing", &self.is_refreshing())
            .field("value", &self.get())
            .finish()
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::sync::atomic::AtomicBool;
    use std::sync::Arc;
    use std::thread;

    fn wait_until(cond: impl Fn() -> bool) {
        while !cond() {
            thread::yield_now();
        }
    }

    #[test]
    fn refresh_runs_f_and_counts() {
        let r: RefreshOnce<u64> = RefreshOnce::new(1);
        assert_eq!(r.refresh(|v| v + 1), 2);
        assert_eq!(r.refresh(|v| v * 10), 20);
        assert_eq!(r.get(), 20);
        assert_eq!(r.generation(), 2);
        assert!(!r.is_refreshing());
    }

    #[test]
    fn panicking_update_is_abandoned() {
        let r: RefreshOnce<u64> = RefreshOnce::new(1);
        let p = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            r.refresh(|_| panic!("boom"))
        }));
        assert!(p.is_err());
        assert!(!r.is_refreshing());
        assert_eq!(r.generation(), 0);
        assert_eq!(r.refresh(|v| v + 1), 2);
    }

    /// A caller arriving mid-update does not take that update's result: it
    /// waits for the next update (here, its own).
    #[test]
    fn mid_update_arrival_waits_for_the_next_update() {
        let r: Arc<RefreshOnce<u64>> = Arc::new(RefreshOnce::new(0));
        let gate = Arc::new(AtomicBool::new(false));
        let a = {
            let (r, gate) = (r.clone(), gate.clone());
            thread::spawn(move || {
                r.refresh(|_| {
                    wait_until(|| gate.load(Ordering::Acquire));
                    100
                })
            })
        };
        wait_until(|| r.is_refreshing());
        let b = {
            let r = r.clone();
            thread::spawn(move || r.refresh(|old| old + 1))
        };
        if !cfg!(miri) {
            thread::sleep(std::time::Duration::from_millis(2));
        }
        assert!(!b.is_finished(), "B returned during A's update");
        gate.store(true, Ordering::Release);
        assert_eq!(a.join().unwrap(), 100);
        assert_eq!(b.join().unwrap(), 101, "B must get an update after A's");
        assert_eq!(r.generation(), 2);
    }

    /// Two callers arriving mid-update share the single next update: neither
    /// waits for a third, and `f` runs twice in all.
    #[test]
    fn at_most_one_further_update() {
        let r: Arc<RefreshOnce<u64>> = Arc::new(RefreshOnce::new(0));
        let gate1 = Arc::new(AtomicBool::new(false));
        let gate2 = Arc::new(AtomicBool::new(false));
        let calls = Arc::new(crate::sync::atomic::AtomicU32::new(0));
        let a = {
            let (r, g, c) = (r.clone(), gate1.clone(), calls.clone());
            thread::spawn(move || {
                r.refresh(|_| {
                    c.fetch_add(1, Ordering::Relaxed);
                    wait_until(|| g.load(Ordering::Acquire));
                    1
                })
            })
        };
        wait_until(|| r.is_refreshing());
        let arrived = Arc::new(crate::sync::atomic::AtomicU32::new(0));
        let waiters: Vec<_> = (0..2)
            .map(|_| {
                let (r, g, c) = (r.clone(), gate2.clone(), calls.clone());
                let arrived = arrived.clone();
                thread::spawn(move || {
                    arrived.fetch_add(1, Ordering::Relaxed);
                    r.refresh(|old| {
                        c.fetch_add(1, Ordering::Relaxed);
                        wait_until(|| g.load(Ordering::Acquire));
                        old + 10
                    })
                })
            })
            .collect();
        // Both waiters must arrive during A's update (a waiter arriving during
        // the second update would rightly wait for a third).
        wait_until(|| arrived.load(Ordering::Relaxed) == 2);
        wait_until(|| r.sleepers() == (true, true));
        if !cfg!(miri) {
            thread::sleep(std::time::Duration::from_millis(20));
        }
        gate1.store(true, Ordering::Release);
        assert_eq!(a.join().unwrap(), 1);
        // One waiter now runs the second update (blocked on gate2).
        wait_until(|| r.generation() == 1 && r.is_refreshing());
        gate2.store(true, Ordering::Release);
        for w in waiters {
            assert_eq!(w.join().unwrap(), 11);
        }
        assert_eq!(calls.load(Ordering::Relaxed), 2);
        assert_eq!(r.generation(), 2);
    }
}

/// Loom model of the gate protocol with overlapping bumps: a completion's
/// gate bump can be delayed (its thread preempted) past two later bumps of
/// the same gate (the completions two and four generations on, or an
/// abandon). The sleeper takes one pass of `refresh_slow`'s gate protocol
/// (read the gate, check the condition, set `GATE_PARKED` from the value
/// read); once every bump is done, the value it would sleep on must be gone
/// from the gate, or its futex wait would never return (a lost wake-up).
/// Checking that instead of really sleeping keeps the model to seconds.
/// Run: `RUSTFLAGS="--cfg loom" cargo test -p scalelock --lib --release
/// refresh::loom_models`
#[cfg(all(test, loom))]
mod loom_models {
    use super::*;
    use crate::platform::LoomPlatform;
    use loom::sync::Arc;
    use loom::sync::atomic::AtomicBool;
    use loom::thread;

    #[test]
    fn overlapping_gate_bumps_never_lose_a_sleeper() {
        let mut builder = loom::model::Builder::new();
        builder.preemption_bound = Some(3);
        builder.check(|| {
            let r = Arc::new(RefreshOnce::<u64, LoomPlatform>::new(0));
            let done = Arc::new(AtomicBool::new(false));
            // The sleeper: one pass; returns the gate value it would sleep on.
            let sleeper = {
                let (r, done) = (r.clone(), done.clone());
                thread::spawn(move || {
                    let gate = &r.gates[0];
                    let g = gate.load(Ordering::Acquire);
                    if done.load(Ordering::Acquire) {
                        None
                    } else if g & GATE_PARKED != 0 {
                        Some(g)
                    } else {
                        gate.compare_exchange(
                            g,
                            g | GATE_PARKED,
                            Ordering::Relaxed,
                            Ordering::Relaxed,
                        )
                        .ok()
                        .map(|_| g | GATE_PARKED)
                    }
                })
            };
            // A bump before the sleeper's condition holds, then the one the
            // sleeper waits for.
            let bumps = {
                let (r, done) = (r.clone(), done.clone());
                thread::spawn(move || {
                    r.open_gate(&r.gates[0]);
                    done.store(true, Ordering::Release);
                    r.open_gate(&r.gates[0]);
                })
            };
            // A bump that may be delayed past the other two.
            r.open_gate(&r.gates[0]);
            bumps.join().unwrap();
            if let Some(v) = sleeper.join().unwrap() {
                assert_ne!(
                    r.gates[0].load(Ordering::Relaxed),
                    v,
                    "the sleeper's gate value survived every bump: lost wake-up"
                );
            }
        });
    }
}
