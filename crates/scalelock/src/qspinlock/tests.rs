//! Unit tests of `RawQSpinLock` (small enough for Miri).

use std::boxed::Box;
use std::cell::{Cell, RefCell};
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use super::*;
use crate::qnode::{NODE_HEAD, QNode};
use crate::sync::atomic::AtomicU32;

/// The `Platform` methods the test platforms below share: a full fence as
/// the heavy one, no queue nodes (their threads never queue), one CPU.
macro_rules! single_cpu_without_nodes {
    () => {
        fn heavy_fence() {
            crate::sync::atomic::fence(Ordering::SeqCst)
        }
        fn queue_node() -> Option<NodeIndex> {
            None
        }
        fn node(_: NodeIndex) -> &'static QNode {
            unreachable!("no nodes are handed out")
        }
        fn cpu_id() -> usize {
            0
        }
        fn cpu_count() -> usize {
            1
        }
    };
}

#[test]
fn is_four_bytes() {
    assert_eq!(core::mem::size_of::<QSpinCore>(), 4);
    assert_eq!(core::mem::align_of::<QSpinCore>(), 4);
    if crate::hook::COMPILED {
        // The lock class follows the word.
        assert_eq!(core::mem::size_of::<RawQSpinLock>(), 24);
    } else {
        assert_eq!(core::mem::size_of::<RawQSpinLock>(), 4);
        assert_eq!(core::mem::align_of::<RawQSpinLock>(), 4);
    }
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
    assert!(lock.try_lock().is_some());
}

/// What a release stores, by the flags it finds: the lock is reserved only
/// for a word waiter that exists (PENDING) and claimed it (HANDOFF), or
/// that exists and a fair unlock hands to. No other state refuses
/// `try_lock` on a free lock.
#[test]
fn releases_reserve_only_for_a_word_waiter() {
    for (flags, fair, expect) in [
        (0, false, FREE),
        (0, true, FREE),
        (HEAD_PARKED, true, FREE),
        (PENDING, false, FREE),
        (PENDING, true, RESERVED),
        (PENDING | HANDOFF, false, RESERVED),
        (PENDING | HANDOFF, true, RESERVED),
    ] {
        // The lock word alone: the hooks have nothing to do with it, and a
        // try-lock left held here would stay on lockdep's held stack.
        let raw: QSpinCore = QSpinCore::new();
        raw.lock(crate::events::Events::NONE);
        raw.flags.store(flags, Ordering::Relaxed);
        raw.release(fair);
        assert_eq!(
            raw.locked.load(Ordering::Relaxed),
            expect,
            "flags {flags:#x} fair {fair}"
        );
        assert!(!raw.is_locked());
        assert_eq!(raw.try_lock_fast(), expect == FREE);
        if expect == RESERVED {
            // The word waiter can take it.
            assert!(raw.take(RESERVED));
        }
    }
}

/// "Lock; the next owner frees the lock": once `unlock` has made the lock
/// available it must not touch the lock's memory again. The test platform
/// stops the releasing thread in the fence that follows the release store
/// until the next owner has taken the lock and freed it; Miri reports any
/// later access to the lock as a use after free.
#[test]
fn release_touches_nothing_after_the_unlock() {
    static FREED: AtomicBool = AtomicBool::new(false);
    std::thread_local! {
        static PAUSE_IN_FENCE: Cell<bool> = const { Cell::new(false) };
    }

    #[derive(Debug)]
    struct Plat;
    type Std = crate::platform::StdPlatform;
    // SAFETY: the std platform's, except that `wait` returns at once (a
    // permitted spurious return; Miri has no futex) and `light_fence` may
    // first wait for another thread (that only delays the caller).
    unsafe impl Platform for Plat {
        fn relax() {
            Std::relax()
        }
        fn yield_now() {
            Std::yield_now()
        }
        fn now_ns() -> u64 {
            Std::now_ns()
        }
        fn wait(_: &AtomicU32, _: u32) {
            Std::yield_now()
        }
        fn wake_one(_: &AtomicU32) {}
        fn wake_all(_: &AtomicU32) {}
        fn light_fence() {
            if PAUSE_IN_FENCE.with(Cell::get) {
                while !FREED.load(Ordering::Acquire) {
                    std::thread::yield_now();
                }
            }
            crate::sync::atomic::fence(Ordering::SeqCst);
        }
        single_cpu_without_nodes!();
    }

    let lock: &'static RawQSpinLock<Plat> = Box::leak(Box::new(RawQSpinLock::new()));
    let addr = lock as *const RawQSpinLock<Plat> as usize;
    let g = lock.lock();
    let next_owner = std::thread::spawn(move || {
        // SAFETY: the lock lives until this thread frees it below.
        let lock = unsafe { &*(addr as *const RawQSpinLock<Plat>) };
        let g = lock.lock();
        // SAFETY: `g` came from `lock()` just above.
        unsafe { lock.unlock(g) };
        // SAFETY: the box was leaked above and is freed once, here, by the
        // last thread to own the lock.
        drop(unsafe { Box::from_raw(addr as *mut RawQSpinLock<Plat>) });
        FREED.store(true, Ordering::Release);
    });
    PAUSE_IN_FENCE.with(|p| p.set(true));
    // SAFETY: `g` came from `lock()` above.
    unsafe { lock.unlock(g) };
    PAUSE_IN_FENCE.with(|p| p.set(false));
    next_owner.join().unwrap();
}

#[test]
fn contended_counts_are_exact() {
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
    assert_eq!(raw.core.flags.load(Ordering::Relaxed), 0);
    assert_eq!(raw.core.tail.load(Ordering::Relaxed), 0);
    assert_eq!(raw.core.locked.load(Ordering::Relaxed), FREE);
}

/// A platform whose clock only moves when a thread yields, by `YIELD_NS`:
/// a yield that "runs another thread" (`YIELD_NS` at least `yield_ran_ns`)
/// or one that returns at once (0). Counts the calling thread's yields.
/// Its `relax` lets a running holder re-take the lock named by `RETAKEN`
/// (the holder runs a tight loop and is between two acquisitions when the
/// contender looks), and runs `busy_holder_and_kicker` (`BUSY`).
#[derive(Debug)]
struct YieldClock<const YIELD_NS: u64>;

std::thread_local! {
    /// A lock (0: none) with a holder in a tight loop, which for the given
    /// number of further relaxes re-takes it whenever it is free (so it is
    /// held at every look), then leaves it free; and a contender that kicks
    /// its word waiter at every relax and every timed sleep.
    static BUSY: Cell<(usize, u32)> = const { Cell::new((0, 0)) };
}

/// One step of `BUSY`'s holder (`relax`: `hold`) and contender.
fn busy_holder_and_kicker<const YIELD_NS: u64>(hold: bool) {
    let (addr, left) = BUSY.with(Cell::get);
    if addr == 0 {
        return;
    }
    // SAFETY: `BUSY` names a lock that outlives the test's polls (it is
    // cleared before the lock goes).
    let lock = unsafe { &*(addr as *const QSpinCore<YieldClock<YIELD_NS>>) };
    if hold && left > 0 {
        BUSY.with(|b| b.set((addr, left - 1)));
        if left > 1 {
            let _ = lock.try_lock_fast();
        } else {
            // Release: the holder's unlock, as `unlock`'s (pairs with the
            // word waiter's Acquire take).
            lock.locked.store(FREE, Ordering::Release);
        }
    }
    lock.kick_word_waiter();
}

std::thread_local! {
    /// A lock (0: none) whose holder runs on another CPU with
    /// `(held_ns, free_ns)` inside and between its critical sections, and
    /// whether it holds the lock now. Each relax is `RELAX_NS` of the
    /// clock, and the holder takes or releases the lock as its schedule
    /// says (a take can fail: somebody else has the lock).
    static HOLDER: Cell<(usize, u64, u64, bool)> = const { Cell::new((0, 0, 0, false)) };
}

/// The clock time of one relax while `HOLDER` runs.
const RELAX_NS: u64 = 10;

/// One relax of `HOLDER`'s holder.
fn timed_holder<const YIELD_NS: u64>() {
    let (addr, held_ns, free_ns, holding) = HOLDER.with(Cell::get);
    if addr == 0 {
        return;
    }
    // SAFETY: `HOLDER` names a lock that outlives the test's polls (it is
    // cleared before the lock goes).
    let lock = unsafe { &*(addr as *const QSpinCore<YieldClock<YIELD_NS>>) };
    let now = YIELD_CLOCK.with(|c| {
        c.set(c.get() + RELAX_NS);
        c.get()
    });
    let inside = now % (held_ns + free_ns) < held_ns;
    let holding = match (inside, holding) {
        (true, false) => lock.try_lock_fast(),
        (false, true) => {
            // Release: the holder's unlock, as `unlock`'s (pairs with the
            // next acquirer's Acquire take).
            lock.locked.store(FREE, Ordering::Release);
            false
        }
        (_, holding) => holding,
    };
    HOLDER.with(|h| h.set((addr, held_ns, free_ns, holding)));
}

std::thread_local! {
    static YIELD_CLOCK: Cell<u64> = const { Cell::new(0) };
    static YIELDS: Cell<u32> = const { Cell::new(0) };
    static SLEEPS: Cell<u32> = const { Cell::new(0) };
}

// SAFETY: the std platform's, except for the clock (monotonic: it only
// grows), `yield_now`, which only moves that clock and counts, and
// `relax`, which only takes a lock the test owns. Nothing here waits or
// wakes: the tests poll, single-threaded.
unsafe impl<const YIELD_NS: u64> Platform for YieldClock<YIELD_NS> {
    fn relax() {
        busy_holder_and_kicker::<YIELD_NS>(true);
        timed_holder::<YIELD_NS>();
        let addr = RETAKEN.with(Cell::get);
        if addr != 0 {
            // SAFETY: `RETAKEN` names a lock that outlives the test's
            // polls (it is cleared before the lock goes).
            let lock = unsafe { &*(addr as *const QSpinCore<Self>) };
            let _ = lock.try_lock_fast();
        }
    }
    fn yield_now() {
        YIELDS.with(|y| y.set(y.get() + 1));
        YIELD_CLOCK.with(|c| c.set(c.get() + YIELD_NS));
    }
    fn now_ns() -> u64 {
        YIELD_CLOCK.with(Cell::get)
    }
    fn wait(_: &AtomicU32, _: u32) {}
    fn wait_timeout(_: &AtomicU32, _: u32, _: u64) {
        SLEEPS.with(|n| n.set(n.get() + 1));
        busy_holder_and_kicker::<YIELD_NS>(false);
    }
    fn wake_one(_: &AtomicU32) {}
    fn wake_all(_: &AtomicU32) {}
    fn light_fence() {
        crate::sync::atomic::fence(Ordering::SeqCst)
    }
    single_cpu_without_nodes!();
}

/// Yields from the calling thread's polls of a held lock, before queueing,
/// with a deadline `timeout_ns` from now (`None`: none).
fn yields_before_queueing<const YIELD_NS: u64>(timeout_ns: Option<u64>) -> u32 {
    yields_before_queueing_with::<YIELD_NS>(timeout_ns, 0, false)
}

/// `yields_before_queueing` with the lock's `flags`, for a thread whose
/// last contended take of the lock was in the spin (`after_spin`) or not.
fn yields_before_queueing_with<const YIELD_NS: u64>(
    timeout_ns: Option<u64>,
    flags: u8,
    after_spin: bool,
) -> u32 {
    let lock: QSpinCore<YieldClock<YIELD_NS>> = QSpinCore::new();
    assert!(lock.try_lock_fast());
    lock.flags.store(flags, Ordering::Relaxed);
    let deadline = timeout_ns.map_or(Deadline::NEVER, |t| {
        Deadline::at(YieldClock::<YIELD_NS>::now_ns() + t)
    });
    YIELDS.with(|y| y.set(0));
    assert!(!lock.spin_before_queueing(deadline, Events::NONE, after_spin));
    YIELDS.with(Cell::get)
}

/// Before it queues, a contender yields between its polls for as long as
/// yields run other threads (the holder may be preempted, on our CPU), and
/// spins again after a yield that returned at once (nobody else to run:
/// the holder runs elsewhere); never past its deadline.
#[test]
fn contenders_yield_while_yields_run_other_threads() {
    let polls = TUNING.qs_pre_queue_polls;
    let spins = TUNING.qs_pre_queue_spins;
    assert!(polls > spins + 1, "the tuning leaves room for yields");
    assert_eq!(yields_before_queueing::<1_000_000>(None), polls - spins);
    assert_eq!(yields_before_queueing::<0>(None), 1);
    // A yield can last a time slice: a timed acquisition stops yielding
    // once its deadline passed (here after the second 1 ms yield).
    assert_eq!(yields_before_queueing::<1_000_000>(Some(1_500_000)), 2);
}

/// A contender whose last contended take of the lock was in the spin polls
/// a held lock `qs_pre_queue_polls_after_spin` times while a word waiter
/// waits, and `qs_pre_queue_polls` times without one (a lone contender in
/// a tight loop would take the holder's line) or after a take through the
/// queue; a timed one still stops at its deadline.
#[test]
fn contenders_that_took_the_lock_spinning_poll_longer_behind_a_word_waiter() {
    let (polls, longer) = (
        TUNING.qs_pre_queue_polls,
        TUNING.qs_pre_queue_polls_after_spin,
    );
    let spins = TUNING.qs_pre_queue_spins;
    assert!(longer > polls, "the tuning polls longer after a spin take");
    let yields =
        |flags, after_spin| yields_before_queueing_with::<1_000_000>(None, flags, after_spin);
    assert_eq!(yields(PENDING, true), longer - spins);
    assert_eq!(yields(PENDING, false), polls - spins);
    assert_eq!(yields(0, true), polls - spins);
    assert_eq!(
        yields_before_queueing_with::<1_000_000>(Some(1_500_000), PENDING, true),
        2
    );
}

std::thread_local! {
    /// The lock a `YieldClock` thread's "holder" re-takes at every relax
    /// (0: none): a holder running a tight loop, on another CPU.
    static RETAKEN: Cell<usize> = const { Cell::new(0) };
}

/// Whether a contender's optimistic spin takes a free lock while a word
/// waiter sleeps (`PENDING`), with a holder that re-takes it (`retaking`)
/// or one that does other work.
fn barges_past_a_word_waiter(retaking: bool) -> bool {
    barge_past_a_word_waiter(retaking, PENDING).0
}

/// `barges_past_a_word_waiter` with the word waiter's `flags`; also
/// returns the flags after the contender's spin.
fn barge_past_a_word_waiter(retaking: bool, flags: u8) -> (bool, u8) {
    let lock: QSpinCore<YieldClock<0>> = QSpinCore::new();
    lock.flags.store(flags, Ordering::Relaxed);
    let addr = &lock as *const QSpinCore<YieldClock<0>> as usize;
    RETAKEN.with(|r| r.set(if retaking { addr } else { 0 }));
    let took = lock.spin_before_queueing(Deadline::NEVER, Events::NONE, false);
    RETAKEN.with(|r| r.set(0));
    (took, lock.flags.load(Ordering::Relaxed))
}

/// While a word waiter sleeps through its batch, a contender takes a free
/// lock that stays free (its holder works between critical sections: no
/// convoy forms behind the sleeper), but not one that a running holder
/// re-takes at once (the batch goes on).
#[test]
fn contenders_take_a_lock_that_stays_free_past_a_word_waiter() {
    const { assert!(TUNING.qs_barge_settle_relaxes > 0) };
    assert!(barges_past_a_word_waiter(false));
    assert!(!barges_past_a_word_waiter(true));
}

/// With nobody on the word, too, a contender takes a free lock that
/// stays free, but not one a running holder re-takes at once: it queues
/// (as the word waiter), and the holder's batch goes on, instead of the
/// two trading the lock at every release.
#[test]
fn contenders_take_a_lock_that_stays_free_with_nobody_on_the_word() {
    assert_eq!(barge_past_a_word_waiter(false, 0), (true, 0));
    assert_eq!(barge_past_a_word_waiter(true, 0), (false, 0));
}

/// A contender that takes a free lock that stayed free while the word
/// waiter sleeps through its batch kicks the word waiter (the lock has
/// room for more threads); not when a running holder re-takes the lock,
/// nor once the word waiter has claimed the lock (`HANDOFF`: the next
/// release is its own anyway).
#[test]
fn contenders_that_find_room_past_a_sleeping_word_waiter_kick_it() {
    assert_eq!(
        barge_past_a_word_waiter(false, PENDING),
        (true, PENDING | KICK)
    );
    assert_eq!(barge_past_a_word_waiter(true, PENDING), (false, PENDING));
    assert_eq!(
        barge_past_a_word_waiter(false, PENDING | HANDOFF),
        (true, PENDING | HANDOFF)
    );
}

/// A word waiter's wait on a free lock, with its `flags` (`PENDING` and
/// maybe `KICK`): whether it took the lock, its timed sleeps, and the
/// flags it left. (The clock never moves, so the batch ends by its poll
/// bound.)
fn word_waiter_on_a_free_lock(flags: u8) -> (bool, u32, u8) {
    let lock: QSpinCore<YieldClock<0>> = QSpinCore::new();
    lock.flags.store(flags, Ordering::Relaxed);
    SLEEPS.with(|n| n.set(0));
    let took = lock.wait_as_pending(None, None, Deadline::NEVER, Events::NONE)
        && lock.locked.load(Ordering::Relaxed) == LOCKED;
    (
        took,
        SLEEPS.with(Cell::get),
        lock.flags.load(Ordering::Relaxed),
    )
}

/// Kicked, the word waiter takes a lock that stays free at once, without
/// sleeping through the rest of the batch; not kicked, it leaves the lock
/// to the running threads (sleeping) until its batch ends, and only then
/// takes it. Either way it clears the flags it owned.
#[test]
fn a_kicked_word_waiter_takes_a_lock_that_stays_free_before_its_batch_ends() {
    assert_eq!(word_waiter_on_a_free_lock(PENDING | KICK), (true, 0, 0));
    let (took, sleeps, flags) = word_waiter_on_a_free_lock(PENDING);
    assert!(took);
    assert_eq!(flags, 0);
    assert!(
        sleeps >= TUNING.batch_polls / 2,
        "slept {sleeps} times in a batch of {} polls",
        TUNING.batch_polls
    );
}

/// A word waiter takes one kick up per batch: after a watch that found the
/// lock busy (a holder in a tight loop), the kicks that contenders keep
/// sending leave it asleep until its batch ends, although the lock has
/// room by then (taking each up, it would have taken the lock early).
#[test]
fn a_word_waiter_takes_one_kick_up_per_batch() {
    let lock: QSpinCore<YieldClock<0>> = QSpinCore::new();
    lock.flags.store(PENDING | KICK, Ordering::Relaxed);
    let addr = &lock as *const QSpinCore<YieldClock<0>> as usize;
    // Longer than one watch (`qs_kick_watch_polls` polls of
    // `claimed_poll_relaxes` relaxes), shorter than the batch's polls.
    let busy = 2 * TUNING.qs_kick_watch_polls * TUNING.claimed_poll_relaxes;
    BUSY.with(|b| b.set((addr, busy)));
    SLEEPS.with(|n| n.set(0));
    let took = lock.wait_as_pending(None, None, Deadline::NEVER, Events::NONE);
    BUSY.with(|b| b.set((0, 0)));
    assert!(took && lock.locked.load(Ordering::Relaxed) == LOCKED);
    assert_eq!(lock.flags.load(Ordering::Relaxed), 0);
    let sleeps = SLEEPS.with(Cell::get);
    assert!(
        sleeps >= TUNING.batch_polls / 2,
        "slept {sleeps} times in a batch of {} polls: woken by later kicks",
        TUNING.batch_polls
    );
}

/// A kicked word waiter does not take a lock that a running holder keeps
/// re-taking: it must stay free for a while.
#[test]
fn a_kicked_word_waiter_leaves_a_lock_a_running_holder_retakes() {
    let lock: QSpinCore<YieldClock<0>> = QSpinCore::new();
    assert!(lock.stays_free());
    let addr = &lock as *const QSpinCore<YieldClock<0>> as usize;
    RETAKEN.with(|r| r.set(addr));
    let stays = lock.stays_free();
    RETAKEN.with(|r| r.set(0));
    assert!(!stays);
}

/// `shortest_free_gap` on a lock whose holder is inside its critical
/// sections for `held_ns` and outside for `free_ns`.
fn shortest_gap_beside(held_ns: u64, free_ns: u64) -> Option<u64> {
    let lock: QSpinCore<YieldClock<0>> = QSpinCore::new();
    let addr = &lock as *const QSpinCore<YieldClock<0>> as usize;
    HOLDER.with(|h| h.set((addr, held_ns, free_ns, false)));
    let gap = shortest_free_gap::<YieldClock<0>>(|| lock.locked.load(Ordering::Relaxed) == FREE);
    HOLDER.with(|h| h.set((0, 0, 0, false)));
    gap
}

/// A word waiter's measure of the holder: the shortest whole gap in
/// which the lock was free, to within a poll; none for a lock never free
/// or never held while it looked, or held longer than
/// `qs_gap_held_max_ns` at a stretch.
#[test]
fn the_gap_measure_sees_how_long_a_holder_leaves_the_lock_free() {
    let near = |gap: Option<u64>, ns: u64| {
        let g = gap.expect("gaps seen");
        assert!(g.abs_diff(ns) <= 2 * RELAX_NS, "measured {g} ns for {ns}");
    };
    near(shortest_gap_beside(1_000, 500), 500);
    near(shortest_gap_beside(60, 40), 40);
    const { assert!(TUNING.qs_gap_min_ns > 40 && TUNING.qs_gap_min_ns < 500) };
    assert_eq!(shortest_gap_beside(1, 0), None);
    assert_eq!(shortest_gap_beside(0, 1), None);
    const { assert!(TUNING.qs_gap_held_max_ns > 1_000 && TUNING.qs_gap_held_max_ns < 5_000) };
    assert_eq!(shortest_gap_beside(5_000, 500), None);
}

/// A word waiter beside `HOLDER`'s holder (`held_ns` inside, `free_ns`
/// outside), with `tail` in the lock word, made head by a predecessor
/// that found a tight loop if `tight_loop`: whether it took the lock (and
/// the holder does not hold it), and its timed sleeps.
fn word_waiter_beside(held_ns: u64, free_ns: u64, tail: u16, tight_loop: bool) -> (bool, u32) {
    let lock: QSpinCore<YieldClock<0>> = QSpinCore::new();
    lock.flags.store(PENDING, Ordering::Relaxed);
    lock.tail.store(tail, Ordering::Relaxed);
    let addr = &lock as *const QSpinCore<YieldClock<0>> as usize;
    HOLDER.with(|h| h.set((addr, held_ns, free_ns, false)));
    SLEEPS.with(|n| n.set(0));
    let head = tight_loop.then(|| MadeHead {
        since: YieldClock::<0>::now_ns(),
        by: None,
        tight_loop,
    });
    let took = lock.wait_as_pending(None, head, Deadline::NEVER, Events::NONE);
    let holder_holds = HOLDER.with(|h| h.get().3);
    HOLDER.with(|h| h.set((0, 0, 0, false)));
    assert_eq!(lock.flags.load(Ordering::Relaxed), 0);
    (
        took && !holder_holds && lock.locked.load(Ordering::Relaxed) == LOCKED,
        SLEEPS.with(Cell::get),
    )
}

/// A word waiter watches the holder before it sleeps through the batch:
/// one that leaves the lock free for a while between critical sections
/// (500 ns), it takes the lock as soon as it is free, without sleeping,
/// whether or not threads queue behind it; one in a tight loop (40 ns), it
/// leaves alone and sleeps through the batch. A waiter whose predecessor
/// found a tight loop (and gave it its CPU) does not watch at all.
#[test]
fn a_word_waiter_takes_the_lock_between_a_holders_critical_sections() {
    const { assert!(TUNING.qs_gap_count > 0) };
    let slept_through_the_batch =
        |(took, sleeps): (bool, u32)| took && sleeps >= TUNING.batch_polls / 2;
    assert_eq!(word_waiter_beside(1_000, 500, 0, false), (true, 0));
    assert_eq!(word_waiter_beside(1_000, 500, 3, false), (true, 0));
    assert!(slept_through_the_batch(word_waiter_beside(
        60, 40, 0, false
    )));
    assert!(slept_through_the_batch(word_waiter_beside(
        60, 40, 3, false
    )));
    assert!(slept_through_the_batch(word_waiter_beside(
        1_000, 500, 3, true
    )));
}

std::thread_local! {
    static STRETCH_CLOCK: Cell<u64> = const { Cell::new(0) };
    static STRETCH_YIELDS: Cell<u32> = const { Cell::new(0) };
}

/// The std platform's thread-local state, with a clock the test moves and
/// a `yield_now` that only counts.
#[derive(Debug)]
struct StretchClock;

// SAFETY: the std platform's, except for the clock (monotonic: the test
// only moves it forward) and `yield_now`, which only counts. Nothing here
// waits or wakes: the tests release a lock nobody else uses.
unsafe impl Platform for StretchClock {
    fn relax() {}
    fn yield_now() {
        STRETCH_YIELDS.with(|y| y.set(y.get() + 1));
    }
    fn now_ns() -> u64 {
        STRETCH_CLOCK.with(Cell::get)
    }
    fn wait(_: &AtomicU32, _: u32) {}
    fn wake_one(_: &AtomicU32) {}
    fn wake_all(_: &AtomicU32) {}
    fn light_fence() {
        crate::sync::atomic::fence(Ordering::SeqCst)
    }
    fn with_local<R>(f: impl FnOnce(&crate::platform::LocalState) -> R) -> Option<R> {
        crate::platform::StdPlatform::with_local(f)
    }
    single_cpu_without_nodes!();
}

/// A holder re-takes `lock` `releases` times, `pace_ns` apart on the
/// clock, while its `flags` stay `flags`; returns the clock at each
/// release after which it yielded, and whether its next `lock` would queue
/// at once (the hand-over note) after the last of them.
fn holder_stretch(flags: u8, pace_ns: u64, releases: u32) -> (Vec<u64>, bool) {
    let lock: QSpinCore<StretchClock> = QSpinCore::new();
    // Timed turns: no quota an earlier lock at this address left.
    quota::set_for_test(lock.addr(), 0);
    lock.flags.store(flags, Ordering::Relaxed);
    let mut yields = Vec::new();
    let mut noted = false;
    for _ in 0..releases {
        assert!(lock.try_lock_fast());
        STRETCH_CLOCK.with(|c| c.set(c.get() + pace_ns));
        let before = STRETCH_YIELDS.with(Cell::get);
        lock.release_watching();
        assert_eq!(lock.locked.load(Ordering::Relaxed), FREE);
        if STRETCH_YIELDS.with(Cell::get) != before {
            yields.push(STRETCH_CLOCK.with(Cell::get));
            noted = batch::just_handed_off::<StretchClock>(lock.addr());
        }
    }
    (yields, noted)
}

/// A holder that keeps re-taking the lock long past the batch while the
/// word waiter has not claimed it (its wake-up waits behind the holder on
/// its CPU) yields once after a release, then once per
/// `qs_overrun_yield_ns` while the batch goes on; in a tight loop it also
/// notes the hand-over, so its next `lock` queues behind the waiter.
#[test]
#[cfg_attr(miri, ignore = "400,000 releases")]
fn a_holder_long_past_the_batch_yields_to_the_word_waiter() {
    std::thread::spawn(|| {
        let pace = 10;
        let over = TUNING.batch_ns + TUNING.qs_overrun_yield_ns;
        let (yields, noted) = holder_stretch(PENDING, pace, (4 * TUNING.batch_ns / pace) as u32);
        let first = *yields.first().expect("the holder yields");
        // The stretch starts at the first release; the clock is read at
        // least every `qs_overrun_check_releases * 64` releases.
        let granule = u64::from(TUNING.qs_overrun_check_releases) * 64 * pace;
        assert!(
            first >= over && first <= over + granule + pace,
            "first yield at {first} ns"
        );
        for w in yields.windows(2) {
            let gap = w[1] - w[0];
            assert!(
                gap >= TUNING.qs_overrun_yield_ns && gap <= TUNING.qs_overrun_yield_ns + granule,
                "yields {gap} ns apart"
            );
        }
        assert!(yields.len() >= 2, "{yields:?}");
        assert!(noted, "a tight loop queues after its yield");
    })
    .join()
    .unwrap();
}

/// The same stretch with a microsecond between releases (work between the
/// critical sections): it yields, but keeps its spin at the next `lock`.
#[test]
fn a_holder_that_works_between_critical_sections_yields_without_queueing() {
    std::thread::spawn(|| {
        let pace = 1_000;
        let (yields, noted) = holder_stretch(PENDING, pace, (3 * TUNING.batch_ns / pace) as u32);
        assert!(!yields.is_empty());
        assert!(!noted);
    })
    .join()
    .unwrap();
}

/// No yield without a word waiter, nor within the batch, nor once the
/// word waiter has claimed the lock (then each release reserves it).
#[test]
fn a_holder_does_not_yield_within_the_batch_or_without_a_sleeping_word_waiter() {
    std::thread::spawn(|| {
        let pace = 1_000;
        let long = (3 * TUNING.batch_ns / pace) as u32;
        assert_eq!(holder_stretch(0, pace, long).0, []);
        let within = ((TUNING.batch_ns + TUNING.qs_overrun_yield_ns) / pace - 1) as u32;
        assert_eq!(holder_stretch(PENDING, pace, within).0, []);
        let lock: QSpinCore<StretchClock> = QSpinCore::new();
        quota::set_for_test(lock.addr(), 0);
        for _ in 0..long {
            release_to_claiming_waiter(&lock, pace);
        }
        assert_eq!(STRETCH_YIELDS.with(Cell::get), 0);
    })
    .join()
    .unwrap();
}

/// A holder re-takes `lock` `pace_ns` after its last release while the
/// word waiter has claimed it (`HANDOFF`): the release reserves the lock
/// for the word waiter (which the test then frees again).
fn release_to_claiming_waiter(lock: &QSpinCore<StretchClock>, pace_ns: u64) {
    lock.flags.store(PENDING | HANDOFF, Ordering::Relaxed);
    assert!(lock.try_lock_fast());
    STRETCH_CLOCK.with(|c| c.set(c.get() + pace_ns));
    lock.release_watching();
    assert_eq!(lock.locked.load(Ordering::Relaxed), RESERVED);
    lock.locked.store(FREE, Ordering::Relaxed);
}

/// A holder re-takes `lock` `pace_ns` apart while the word waiter sleeps
/// (`PENDING`), at most `releases` times, until a release reserves the
/// lock for the word waiter; returns the releases made by then (`None`:
/// none did), and whether the holder's next `lock` would queue at once.
fn releases_until_handed_over(
    lock: &QSpinCore<StretchClock>,
    pace_ns: u64,
    releases: u64,
) -> (Option<u64>, bool) {
    lock.flags.store(PENDING, Ordering::Relaxed);
    for i in 1..=releases {
        assert!(lock.try_lock_fast());
        STRETCH_CLOCK.with(|c| c.set(c.get() + pace_ns));
        lock.release_watching();
        if lock.locked.load(Ordering::Relaxed) == RESERVED {
            assert_ne!(lock.flags.load(Ordering::Relaxed) & GRANTED, 0);
            lock.locked.store(FREE, Ordering::Relaxed);
            return (Some(i), batch::just_handed_off::<StretchClock>(lock.addr()));
        }
    }
    (None, false)
}

/// Once the lock has a turn quota, a holder that made it hands the lock
/// over to the sleeping word waiter itself (as a fair unlock does), at the
/// first clock read after its quota-th release, and its next `lock`
/// queues; without a quota it does not (the word waiter ends the batch).
#[test]
fn a_holder_that_made_the_turn_quota_hands_the_lock_over() {
    std::thread::spawn(|| {
        let lock: QSpinCore<StretchClock> = QSpinCore::new();
        let pace = 100;
        // Within the time bound: no overrun yield can come first.
        let q = TUNING.batch_ns / 2 / pace;
        // The clock is read about every `qs_overrun_check_ns` at the
        // holder's pace, and at least every `qs_overrun_check_releases`.
        let granule =
            TUNING.qs_overrun_check_ns / pace + u64::from(TUNING.qs_overrun_check_releases);
        quota::set_for_test(lock.addr(), 0);
        let (none, _) = releases_until_handed_over(&lock, pace, q + granule);
        assert_eq!(none, None, "no quota, no hand-over");
        // (A parallel test's lock may take the slot of ours for a moment:
        // then we read no quota, and try again.)
        for _ in 0..3 {
            // A pause of two batches: a new stretch (turn) starts.
            STRETCH_CLOCK.with(|c| c.set(c.get() + 2 * TUNING.batch_ns));
            quota::set_for_test(lock.addr(), q);
            let (made, queues) = releases_until_handed_over(&lock, pace, q + granule + 1);
            if let Some(n) = made {
                assert!(
                    n >= q && n <= q + granule + 1,
                    "handed over after {n} releases (quota {q})"
                );
                assert!(queues, "the next lock queues after the hand-over");
                assert_eq!(STRETCH_YIELDS.with(Cell::get), 0);
                quota::set_for_test(lock.addr(), 0);
                return;
            }
            assert_ne!(quota::of(lock.addr()), q, "the quota was there");
        }
        panic!("no hand-over in three tries");
    })
    .join()
    .unwrap();
}

/// A turn that ends with a hand-over to the word waiter (its claim here)
/// gives the lock a quota: the releases the holder made per `batch_ns` at
/// its pace.
#[test]
fn a_turn_handed_over_gives_the_lock_its_quota() {
    std::thread::spawn(|| {
        let lock: QSpinCore<StretchClock> = QSpinCore::new();
        let pace = 200;
        for _ in 0..3 {
            quota::set_for_test(lock.addr(), 0);
            STRETCH_CLOCK.with(|c| c.set(c.get() + 2 * TUNING.batch_ns));
            // Half a batch of releases while the word waiter sleeps...
            let (none, _) = releases_until_handed_over(&lock, pace, TUNING.batch_ns / 2 / pace);
            assert_eq!(none, None);
            // ... then it claims, and the next release hands over.
            release_to_claiming_waiter(&lock, pace);
            let got = quota::of(lock.addr());
            // (0: a parallel test's lock took the slot meanwhile; again.)
            if got != 0 {
                let want = TUNING.batch_ns / pace;
                assert!(
                    got.abs_diff(want) * 50 <= want,
                    "quota {got}, the pace says {want}"
                );
                quota::set_for_test(lock.addr(), 0);
                return;
            }
        }
        panic!("no quota in three tries");
    })
    .join()
    .unwrap();
}

/// A stretch ends when the holder stops re-taking the lock for longer than
/// a batch (it waited in between): the next one is timed from its start.
#[test]
fn a_holder_stretch_restarts_after_a_pause() {
    std::thread::spawn(|| {
        let lock: QSpinCore<StretchClock> = QSpinCore::new();
        quota::set_for_test(lock.addr(), 0);
        lock.flags.store(PENDING, Ordering::Relaxed);
        let pace = 1_000;
        let run = |releases: u64| {
            for _ in 0..releases {
                assert!(lock.try_lock_fast());
                STRETCH_CLOCK.with(|c| c.set(c.get() + pace));
                lock.release_watching();
            }
        };
        // Most of a batch, a pause of two batches, most of a batch again:
        // neither stretch is long enough to yield.
        let most = (TUNING.batch_ns - 10_000) / pace;
        run(most);
        STRETCH_CLOCK.with(|c| c.set(c.get() + 2 * TUNING.batch_ns));
        run(most);
        assert_eq!(STRETCH_YIELDS.with(Cell::get), 0);
    })
    .join()
    .unwrap();
}

/// Releases `lock` up to `n` times, `pace_ns` apart on the clock, while a
/// word waiter sleeps (`PENDING`): the release after which the holder
/// handed the lock over (`RESERVED`, cleared here), or `None`; and the
/// yields it made.
fn releases_with_sleeping_waiter(
    lock: &QSpinCore<StretchClock>,
    pace_ns: u64,
    n: u64,
) -> (Option<u64>, u32) {
    lock.flags.store(PENDING, Ordering::Relaxed);
    let yields = STRETCH_YIELDS.with(Cell::get);
    for i in 1..=n {
        assert!(lock.try_lock_fast());
        STRETCH_CLOCK.with(|c| c.set(c.get() + pace_ns));
        lock.release_watching();
        if lock.locked.load(Ordering::Relaxed) == RESERVED {
            lock.locked.store(FREE, Ordering::Relaxed);
            let _ = batch::just_handed_off::<StretchClock>(lock.addr());
            return (Some(i), STRETCH_YIELDS.with(Cell::get) - yields);
        }
    }
    (None, STRETCH_YIELDS.with(Cell::get) - yields)
}

/// The holder's turn ends without its own hand-over (the word waiter took
/// the lock after a plain release), and its next turn begins, on the
/// contended path, within `batch_ns` of its last clock read: that turn is
/// counted from its own start, with the quota's releases (and, for a
/// lock without a quota, the batch's time) before it hands over or
/// yields.
#[test]
#[cfg_attr(miri, ignore = "30,000 releases")]
fn a_turn_taken_on_the_contended_path_starts_its_own_count() {
    std::thread::spawn(|| {
        let lock: QSpinCore<StretchClock> = QSpinCore::new();
        let pace = 100;
        let q = TUNING.batch_ns / pace;
        // A turn of 90% of the quota, ended by the others, then 0.8 ms
        // later a turn taken on the contended path.
        let next_turn = |quota: u64, releases: u64| {
            quota::set_for_test(lock.addr(), quota);
            STRETCH_CLOCK.with(|c| c.set(c.get() + 4 * TUNING.batch_ns));
            let (handed, yields) = releases_with_sleeping_waiter(&lock, pace, releases);
            assert_eq!((handed, yields), (None, 0), "within the first turn");
            STRETCH_CLOCK.with(|c| c.set(c.get() + 800_000));
            lock.flags.store(0, Ordering::Relaxed);
            lock.lock_slow(Events::NONE);
            lock.release_watching();
        };
        next_turn(q, q * 9 / 10);
        let (handed, _) = releases_with_sleeping_waiter(&lock, pace, 3 * q);
        let handed = handed.expect("the quota hands over");
        // (A parallel test's lock may take the quota's slot: then no
        // quota, timed turns, no hand-over within 3 q; not seen here.)
        assert!(
            handed + 1 >= q && handed <= q + 64 * 64,
            "handed over after {handed} releases of the new turn (quota {q})"
        );
        // Timed turns (no quota): the new turn does not yield within its
        // first 10 us.
        next_turn(0, TUNING.batch_ns * 95 / 100 / pace);
        let (handed, yields) = releases_with_sleeping_waiter(&lock, pace, 100);
        assert_eq!((handed, yields), (None, 0), "a 10 us turn yielded");
        quota::set_for_test(lock.addr(), 0);
    })
    .join()
    .unwrap();
}

/// A stretch whose last clock read is more than a
/// batch old is over (`stretch_over` would start a new one at its next
/// read). A hand-over that ends it (`turn_ended`: the thread came back
/// after a long pause, re-took the lock on the fast path, and its release
/// found a word waiter that claimed) must not fold it into the quota: its
/// releases over a time that spans the pause are not a turn's pace.
#[test]
fn a_stale_stretch_folds_nothing_into_the_quota() {
    std::thread::spawn(|| {
        let lock: QSpinCore<StretchClock> = QSpinCore::new();
        let pace = 100;
        let q = TUNING.batch_ns / pace;
        for _ in 0..3 {
            quota::set_for_test(lock.addr(), q);
            STRETCH_CLOCK.with(|c| c.set(c.get() + 4 * TUNING.batch_ns));
            // Half a turn while the word waiter sleeps; the turn then ends
            // by others' doing (the waiter takes the lock after a plain
            // release), and this thread works elsewhere for 50 batches.
            let (handed, _) = releases_with_sleeping_waiter(&lock, pace, q / 2);
            assert_eq!(handed, None);
            STRETCH_CLOCK.with(|c| c.set(c.get() + 50 * TUNING.batch_ns));
            // It comes back, takes the free lock on the fast path, and its
            // release hands over to a word waiter that has claimed it.
            release_to_claiming_waiter(&lock, pace);
            let got = quota::of(lock.addr());
            // (0: a parallel test's lock took the slot meanwhile; again.)
            if got != 0 {
                quota::set_for_test(lock.addr(), 0);
                assert_eq!(got, q, "a stale stretch was folded into the quota");
                return;
            }
        }
        panic!("no quota in three tries");
    })
    .join()
    .unwrap();
}

/// A release whose clock read says "yield" (the stretch is past
/// the batch) but whose `release` finds that the word waiter claimed the
/// lock meanwhile reserves it for the waiter: a hand-over like the one of
/// a release that saw the claim, which ends the turn (`turn_ended`) and
/// folds its pace into the quota (it folded nothing).
#[test]
fn a_hand_over_by_an_overrun_release_folds_the_turn() {
    std::thread::spawn(|| {
        let lock: QSpinCore<StretchClock> = QSpinCore::new();
        let pace = 1_000;
        for _ in 0..3 {
            quota::set_for_test(lock.addr(), 0);
            STRETCH_CLOCK.with(|c| c.set(c.get() + 4 * TUNING.batch_ns));
            // A stretch up to just short of the overrun yield.
            let n = (TUNING.batch_ns + TUNING.qs_overrun_yield_ns) / pace - 1;
            let (handed, yields) = releases_with_sleeping_waiter(&lock, pace, n);
            assert_eq!((handed, yields), (None, 0));
            // The next release reads the clock (due, with the flags it
            // loaded: a sleeping waiter), which says yield; the waiter
            // claims before the release's RMW.
            assert!(lock.try_lock_fast());
            STRETCH_CLOCK.with(|c| c.set(c.get() + 100_000));
            lock.flags.store(PENDING | HANDOFF, Ordering::Relaxed);
            assert!(lock.release_with_waiter(PENDING));
            assert_eq!(lock.locked.load(Ordering::Relaxed), RESERVED);
            lock.locked.store(FREE, Ordering::Relaxed);
            lock.flags.store(0, Ordering::Relaxed);
            let _ = batch::just_handed_off::<StretchClock>(lock.addr());
            let got = quota::of(lock.addr());
            quota::set_for_test(lock.addr(), 0);
            if got != 0 {
                return;
            }
        }
        panic!("the turn handed over was not folded (three tries)");
    })
    .join()
    .unwrap();
}

std::thread_local! {
    /// A step of a thread running on another CPU, which it takes at this
    /// thread's next relax (it is in the middle of the lock's protocol).
    static AT_NEXT_RELAX: RefCell<Option<Box<dyn FnOnce()>>> = const { RefCell::new(None) };
    /// The next step of a thread preempted on this thread's CPU in the
    /// middle of the lock's protocol: it runs once this thread gives the
    /// CPU up (a sleep, a yield or a wait), or at the end of this thread's
    /// time slice (`SLICE_RELAXES` relaxes).
    static PREEMPTED: RefCell<Option<Box<dyn FnOnce()>>> = const { RefCell::new(None) };
    static ONE_CPU_RELAXES: Cell<u64> = const { Cell::new(0) };
}

/// A time slice, in relaxes of `OneCpu`.
const SLICE_RELAXES: u64 = 1 << 20;

/// Nodes 1 and 2 of `OneCpu`.
static ONE_CPU_NODES: [QNode; 2] = [const { QNode::new() }; 2];

/// Runs `PREEMPTED`'s step, if any: the preempted thread got the CPU.
fn run_preempted() {
    if let Some(step) = PREEMPTED.with(|p| p.borrow_mut().take()) {
        step();
    }
}

/// A platform with one CPU that this thread shares with a thread preempted
/// in the middle of the lock's protocol (`PREEMPTED`): that thread runs
/// only when this one gives the CPU up, or when its time slice ends.
#[derive(Debug)]
struct OneCpu;

// SAFETY: `wait` and `wait_timeout` return at once (spurious returns, which
// the contract allows); the nodes are two static nodes that only the test
// using them hands out; the rest is the std platform's or does nothing.
unsafe impl Platform for OneCpu {
    fn relax() {
        if let Some(step) = AT_NEXT_RELAX.with(|s| s.borrow_mut().take()) {
            step();
        }
        let n = ONE_CPU_RELAXES.with(|r| {
            r.set(r.get() + 1);
            r.get()
        });
        if n.is_multiple_of(SLICE_RELAXES) {
            run_preempted();
        }
    }
    fn yield_now() {
        run_preempted();
    }
    fn sleep_ns(_: u64) {
        run_preempted();
    }
    fn now_ns() -> u64 {
        0
    }
    fn wait(_: &AtomicU32, _: u32) {
        run_preempted();
    }
    fn wait_timeout(_: &AtomicU32, _: u32, _: u64) {
        run_preempted();
    }
    fn wake_one(_: &AtomicU32) {}
    fn wake_all(_: &AtomicU32) {}
    fn light_fence() {
        crate::sync::atomic::fence(Ordering::SeqCst)
    }
    fn heavy_fence() {
        crate::sync::atomic::fence(Ordering::SeqCst)
    }
    fn queue_node() -> Option<NodeIndex> {
        None
    }
    fn node(index: NodeIndex) -> &'static QNode {
        &ONE_CPU_NODES[usize::from(index.get()) - 1]
    }
    fn cpu_id() -> usize {
        0
    }
    fn cpu_count() -> usize {
        1
    }
}

/// A timed word waiter whose deadline passed while a release had already
/// committed to reserve the lock for it (`GRANTED`) waits for that
/// release's store; if the releaser was preempted on the waiter's CPU
/// between the two, the waiter must give the CPU up (`Backoff`'s sleeps),
/// not spin for its whole time slice.
#[test]
#[cfg_attr(miri, ignore = "a time slice of relaxes")]
fn a_timed_word_waiter_lets_a_preempted_releaser_reserve_the_lock() {
    std::thread::spawn(|| {
        let lock: &'static QSpinCore<OneCpu> = Box::leak(Box::new(QSpinCore::new()));
        assert!(lock.try_lock_fast());
        // The holder's release committed (GRANTED) and was preempted before
        // it stored RESERVED.
        lock.flags
            .store(PENDING | HANDOFF | GRANTED, Ordering::Relaxed);
        PREEMPTED.with(|p| {
            *p.borrow_mut() = Some(Box::new(move || {
                lock.locked.store(RESERVED, Ordering::Release);
            }));
        });
        ONE_CPU_RELAXES.with(|r| r.set(0));
        let took = lock.wait_as_pending(None, None, Deadline::at(0), Events::NONE);
        let relaxes = ONE_CPU_RELAXES.with(Cell::get);
        assert!(took, "the reserved lock is the waiter's");
        assert_eq!(lock.locked.load(Ordering::Relaxed), LOCKED);
        assert_eq!(lock.flags.load(Ordering::Relaxed), 0);
        assert!(
            relaxes < SLICE_RELAXES,
            "spun {relaxes} relaxes before the preempted releaser ran"
        );
    })
    .join()
    .unwrap();
}

/// A timed queued waiter whose deadline passed just as its predecessor
/// took it from its link waits for the predecessor's signal; if the
/// predecessor was preempted on the waiter's CPU between the two, the
/// waiter must give the CPU up, not spin for its whole time slice.
#[test]
#[cfg_attr(miri, ignore = "a time slice of relaxes")]
fn a_timed_queued_waiter_lets_a_preempted_predecessor_signal_it() {
    std::thread::spawn(|| {
        let lock: &'static QSpinCore<OneCpu> = Box::leak(Box::new(QSpinCore::new()));
        let (pred, me) = (NodeIndex::new(1).unwrap(), NodeIndex::new(2).unwrap());
        // A holder, and the predecessor queued (as the tail) and the word
        // waiter.
        assert!(lock.try_lock_fast());
        lock.flags.store(PENDING, Ordering::Relaxed);
        OneCpu::node(pred).reset();
        lock.tail.store(pred.get(), Ordering::Relaxed);
        // The predecessor acquires (on the other CPU) and takes us from its
        // link at our first relax, then is preempted on our CPU before it
        // makes us head.
        AT_NEXT_RELAX.with(|s| {
            *s.borrow_mut() = Some(Box::new(move || {
                assert_eq!(OneCpu::node(pred).next.swap(0, Ordering::Acquire), 2);
            }));
        });
        PREEMPTED.with(|p| {
            *p.borrow_mut() = Some(Box::new(move || {
                OneCpu::node(me).state.store(NODE_HEAD, Ordering::Release);
            }));
        });
        ONE_CPU_RELAXES.with(|r| r.set(0));
        // Made head past our deadline, we give up as the word waiter.
        assert!(!lock.lock_queued(me, Deadline::at(0), Events::NONE));
        let relaxes = ONE_CPU_RELAXES.with(Cell::get);
        assert_eq!(lock.flags.load(Ordering::Relaxed), 0);
        assert_eq!(lock.tail.load(Ordering::Relaxed), 0);
        assert!(
            relaxes < SLICE_RELAXES,
            "spun {relaxes} relaxes before the preempted predecessor ran"
        );
    })
    .join()
    .unwrap();
}

/// A queued wait gives its node back: the thread's next queue wait gets
/// it again (a node kept "in use" would send every later wait of the
/// thread unqueued).
#[test]
#[cfg_attr(miri, ignore = "real threads sleeping on a held lock")]
fn a_queued_wait_returns_its_node() {
    use crate::platform::StdPlatform;
    static LOCK: QSpinLock<()> = QSpinLock::new(());
    std::thread::spawn(|| {
        // A holder keeps the lock and a second thread waits on the word:
        // this thread queues.
        let (held_tx, held_rx) = std::sync::mpsc::channel();
        let holder = std::thread::spawn(move || {
            let guard = LOCK.lock();
            held_tx.send(()).unwrap();
            std::thread::sleep(std::time::Duration::from_millis(100));
            drop(guard);
        });
        held_rx.recv().unwrap();
        let word_waiter = std::thread::spawn(|| drop(LOCK.lock()));
        std::thread::sleep(std::time::Duration::from_millis(30));
        drop(LOCK.lock());
        holder.join().unwrap();
        word_waiter.join().unwrap();
        let node = StdPlatform::queue_node().expect("the node was not returned");
        StdPlatform::queue_node_returned(node);
    })
    .join()
    .unwrap();
}
