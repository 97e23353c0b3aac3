//! Unit tests of `RawPerCpuRwLock` (small enough for Miri, but for three
//! policy tests of thousands of reads, which Miri skips).

use std::boxed::Box;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering as O};
use std::thread;
use std::vec::Vec;

use lock_api::{RawRwLock, RawRwLockDowngrade};

use super::*;
use crate::reader_table::thread_slot;

const ITERS: usize = if cfg!(miri) { 30 } else { 5_000 };

/// The std platform, except that under Miri sleeping is a yield: Miri
/// rejects rustix's futex call (argument type of the variadic `syscall`),
/// and `wait` may return spuriously anyway. A heavy fence takes at least
/// `FENCE_NS` (0: as the std platform's), as a `membarrier` does on a
/// machine whose other CPUs are busy. With `STEP_NS` not 0 the clock is
/// not the real one: each reading moves it `STEP_NS` forward, so a test
/// of the mode rules sees the same times however its threads are
/// scheduled (Miri's scheduler, or a preempted CI runner, can put any gap
/// between two writes on the real clock). With `CLOCK` not 0 the clock is
/// the manual clock `MANUAL_CLOCKS[CLOCK - 1]`: it moves only when the test
/// moves it (`advance`) and when a heavy fence "takes" its `FENCE_NS`, so a
/// test that sleeps between writes on the real clock can instead say
/// exactly how long each gap and each revocation lasted.
#[derive(Debug, Clone, Copy, Default)]
struct TestPlatform<const FENCE_NS: u64 = 0, const STEP_NS: u64 = 0, const CLOCK: usize = 0>;

/// The manual clocks of `TestPlatform<_, _, CLOCK>`: one per test that
/// uses one (by its `CLOCK`), shared by that test's threads.
static MANUAL_CLOCKS: [AtomicU64; 14] = [const { AtomicU64::new(1 << 40) }; 14];

/// One write of `raw`: the state it leaves at unlock (`next`).
fn write_once<P: Platform>(raw: &RawPerCpuRwLock<P>) -> u64 {
    let w = raw.lock_exclusive();
    let next = w.next;
    // SAFETY: from `lock_exclusive` above.
    unsafe { raw.unlock_exclusive(w) };
    next
}

/// Enough reads of `raw` per write to keep the symmetric mode (not
/// inhibit).
fn reads_keeping_symmetric<P: Platform>(raw: &RawPerCpuRwLock<P>) {
    for _ in 0..2 * TUNING.pc_sym_min_reads {
        let t = raw.lock_shared();
        // SAFETY: from `lock_shared` above.
        unsafe { raw.unlock_shared(t) };
    }
}

/// Moves manual clock `clock` (a `CLOCK` parameter) forward by `ns`.
fn advance(clock: usize, ns: u64) {
    MANUAL_CLOCKS[clock - 1].fetch_add(ns, O::Relaxed);
}

std::thread_local! {
    /// The stepped clock of `TestPlatform<_, STEP_NS>`: one per thread, so
    /// that tests running at once do not move each other's (each test that
    /// uses it runs on one thread, with a table of its own).
    static STEPPED_CLOCK: core::cell::Cell<u64> = const { core::cell::Cell::new(1 << 40) };
}

type StdP = crate::platform::StdPlatform;

// SAFETY: everything is the std platform's, except `wait` (returns at once,
// a permitted spurious return) and `wake_*` (nothing sleeps) under Miri,
// and the stepped and manual clocks (monotonic, as the contract asks).
unsafe impl<const FENCE_NS: u64, const STEP_NS: u64, const CLOCK: usize> Platform
    for TestPlatform<FENCE_NS, STEP_NS, CLOCK>
{
    fn relax() {
        StdP::relax()
    }
    fn yield_now() {
        StdP::yield_now()
    }
    fn now_ns() -> u64 {
        if CLOCK != 0 {
            MANUAL_CLOCKS[CLOCK - 1].load(O::Relaxed)
        } else if STEP_NS == 0 {
            StdP::now_ns()
        } else {
            STEPPED_CLOCK.with(|c| {
                c.set(c.get() + STEP_NS);
                c.get()
            })
        }
    }
    fn wait(word: &crate::sync::atomic::AtomicU32, expected: u32) {
        if cfg!(miri) {
            StdP::yield_now()
        } else {
            StdP::wait(word, expected)
        }
    }
    fn wake_one(word: &crate::sync::atomic::AtomicU32) {
        if !cfg!(miri) {
            StdP::wake_one(word)
        }
    }
    fn wake_all(word: &crate::sync::atomic::AtomicU32) {
        if !cfg!(miri) {
            StdP::wake_all(word)
        }
    }
    fn light_fence() {
        StdP::light_fence()
    }
    fn heavy_fence() {
        if CLOCK != 0 {
            StdP::heavy_fence();
            advance(CLOCK, FENCE_NS);
            return;
        }
        let start = StdP::now_ns();
        StdP::heavy_fence();
        while StdP::now_ns().saturating_sub(start) < FENCE_NS {
            core::hint::spin_loop();
        }
    }
    fn queue_node() -> Option<crate::qnode::NodeIndex> {
        StdP::queue_node()
    }
    fn node(index: crate::qnode::NodeIndex) -> &'static crate::qnode::QNode {
        StdP::node(index)
    }
    fn cpu_id() -> usize {
        StdP::cpu_id()
    }
    fn cpu_count() -> usize {
        StdP::cpu_count()
    }
    fn reader_slot() -> Option<usize> {
        StdP::reader_slot()
    }
    fn reader_slot_assigned() -> Option<usize> {
        StdP::reader_slot_assigned()
    }
    fn with_local<R>(f: impl FnOnce(&crate::platform::LocalState) -> R) -> Option<R> {
        StdP::with_local(f)
    }
    fn sleep_ns(ns: u64) {
        StdP::sleep_ns(ns)
    }
    fn reader_slot_bound() -> usize {
        StdP::reader_slot_bound()
    }
    fn reader_slots_in_use(f: impl FnMut(usize)) {
        StdP::reader_slots_in_use(f)
    }
}

// Timeouts on the test platform's clock (stepped or manual where chosen).
impl<const FENCE_NS: u64, const STEP_NS: u64, const CLOCK: usize> crate::platform::TimedPlatform
    for TestPlatform<FENCE_NS, STEP_NS, CLOCK>
{
    type Instant = crate::platform::ClockInstant;
    fn deadline_ns(deadline: &Self::Instant) -> u64 {
        deadline.as_ns()
    }
    fn instant_after(timeout: core::time::Duration) -> Option<Self::Instant> {
        crate::platform::ClockInstant::now::<Self>().checked_add(timeout)
    }
}

type Raw = RawPerCpuRwLock<TestPlatform>;
/// On a clock that moves 1 us per reading.
type SteppedRaw = RawPerCpuRwLock<TestPlatform<0, 1_000>>;
type Lock<T> = lock_api::RwLock<Raw, T>;

static XEN: ReaderTable = ReaderTable::with_inhibition(0);
static OTHER: ReaderTable = ReaderTable::new();
static BRAVO: ReaderTable = ReaderTable::with_inhibition(9);

fn fast(token: &PerCpuReadToken) -> bool {
    RawPerCpuRwLock::<TestPlatform>::took_fast_path(token)
}

/// Whether a read is only counted (`CountedReads`): an inhibited read.
fn counted(token: &PerCpuReadToken) -> bool {
    token.slot.is_none()
}

/// Whether a read holds the underlying lock recorded in the thread-local
/// list (no slot of its own to record it in).
fn listed(token: &PerCpuReadToken) -> bool {
    token
        .slot
        .is_some_and(|s| core::ptr::eq(s, listed_marker()))
}

/// A lock on table `table`, left inhibited by two writes back to back (see
/// `default_table_inhibits_after_a_revocation`; on the real clock, so the
/// pair is repeated until no preemption came between them). The window
/// lasts at least a revocation's cost times the table's multiplier, and a
/// thread's first counted reads do not look at the clock, so the caller's
/// next few reads find it inhibited.
fn inhibited(table: &'static ReaderTable) -> Raw {
    let raw = Raw::with_table(table);
    for _ in 0..100 {
        for _ in 0..2 {
            let w = raw.lock_exclusive();
            // SAFETY: from `lock_exclusive` above.
            unsafe { raw.unlock_exclusive(w) };
        }
        // (`SYM` may stay set: dense symmetric writes inhibit too.)
        if raw.state.load(O::Relaxed) & FAST == 0 {
            return raw;
        }
    }
    panic!("two writes back to back never inhibited the bias");
}

#[test]
fn size() {
    if crate::hook::COMPILED {
        // The lock class follows the underlying lock and the state; tokens
        // carry the hooks' `Held`.
        assert_eq!(core::mem::size_of::<RawPerCpuRwLock>(), 32);
        assert!(core::mem::size_of::<PerCpuReadToken>() <= 24);
    } else {
        assert!(core::mem::size_of::<RawPerCpuRwLock>() <= 16);
        assert!(core::mem::size_of::<Raw>() <= 16);
        assert_eq!(core::mem::size_of::<PerCpuReadToken>(), 8);
        assert_eq!(core::mem::size_of::<PerCpuWriteToken>(), 8);
    }
    assert_eq!(
        core::mem::size_of::<ReaderTable>(),
        crate::reader_table::SLOTS * 128 + 128
    );
    #[cfg(not(any(loom, shuttle)))]
    assert_eq!(core::mem::size_of::<ReaderTable>(), 32_896, "as documented");
}

/// The inline read's slot lookup: "slot" `SLOTS` is the table's never-free
/// word, every other index names its slot's word, and a thread's inline
/// index is `SLOTS` until it gets a slot, then its slot. (Threads past the
/// slots read through the underlying lock: `tests/percpu_stress.rs`.)
#[test]
fn inline_slot_lookup() {
    let table = ReaderTable::new();
    for i in 0..crate::reader_table::SLOTS {
        // SAFETY: `i < SLOTS`.
        let w = unsafe { table.word_or_busy(i) };
        assert!(core::ptr::eq(w, table.slot(i).unwrap().word()));
        assert_eq!(w.load(O::Relaxed), 0);
    }
    // SAFETY: `SLOTS` is the bound.
    let busy = unsafe { table.word_or_busy(crate::reader_table::SLOTS) };
    assert_ne!(busy.load(O::Relaxed), 0, "no slot must read as busy");
    assert_eq!(
        crate::platform::LocalState::default().slot_inline.get(),
        crate::reader_table::SLOTS,
        "a fresh context owns no slot"
    );
    thread::spawn(|| {
        assert_eq!(StdP::reader_slot_inline(), crate::reader_table::SLOTS);
        assert_eq!(thread_slot::assigned(), None);
        let i = thread_slot::current().expect("a slot is free");
        assert_eq!(StdP::reader_slot_inline(), i);
    })
    .join()
    .unwrap();
}

#[test]
fn read_write_basics() {
    let lock = Lock::new(5u32);
    assert_eq!(*lock.read(), 5);
    *lock.write() += 1;
    assert_eq!(*lock.read(), 6);
    assert!(lock.try_write().is_some());
    let r = lock.read();
    assert!(lock.is_locked());
    assert!(!lock.is_locked_exclusive());
    drop(r);
    assert!(!lock.is_locked());
    let w = lock.write();
    assert!(lock.is_locked_exclusive());
    assert!(lock.try_read().is_none());
    drop(w);
    assert!(!lock.is_locked());
}

#[test]
fn first_read_is_fast_and_xen_mode_restores_bias() {
    let raw = Raw::with_table(&XEN);
    let t = raw.lock_shared();
    assert!(fast(&t));
    // SAFETY: `t` came from `lock_shared` on this thread.
    unsafe { raw.unlock_shared(t) };
    let w = raw.lock_exclusive();
    assert_ne!(w.next & FAST, 0, "Xen mode: the write restores the bias");
    // SAFETY: `w` came from `lock_exclusive`.
    unsafe { raw.unlock_exclusive(w) };
    // Xen mode: the bias is back right after the write.
    let t = raw.lock_shared();
    assert!(fast(&t));
    // SAFETY: as above.
    unsafe { raw.unlock_shared(t) };
}

/// A thread's recursive reads of one lock nest in its slot up to
/// `DEPTH_MASK` deep; one more panics before taking anything, and the lock
/// stays usable (the `# Panics` of `RawPerCpuRwLock`).
#[test]
#[cfg_attr(miri, ignore = "16,383 reads held at once: slow under Miri")]
fn recursive_slot_reads_are_bounded() {
    let lock: Lock<u32> = Lock::from_raw(Raw::with_table(&XEN), 0);
    let mut reads = Vec::new();
    let overflow = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        for _ in 0..=DEPTH_MASK {
            reads.push(lock.read());
        }
    }));
    assert!(overflow.is_err(), "a read past the slot's depth");
    assert_eq!(reads.len() as u64, DEPTH_MASK);
    drop(reads);
    *lock.write() += 1;
    assert_eq!(*lock.read(), 1);
}

/// A Xen table (`with_inhibition(0)`) brings the bias back at every write,
/// but not always with the heavy fence: once the class's heavy fences were
/// dear twice in a row the lock runs symmetric, and its writes revoke
/// with a plain full fence (`ReaderTable::with_inhibition`).
#[test]
fn xen_mode_goes_symmetric_when_heavy_fences_are_dear() {
    static XEN_DEAR: ReaderTable = ReaderTable::with_inhibition(0);
    // Each heavy fence takes 60 µs: dear (`pc_sym_cost_ns`).
    let raw = RawPerCpuRwLock::<TestPlatform<60_000>>::with_table(&XEN_DEAR);
    const { assert!(TUNING.pc_sym_cost_ns <= 60_000) };
    let first = write_once(&raw);
    let second = write_once(&raw);
    assert_ne!(first & FAST, 0, "Xen mode: the write restores the bias");
    assert_eq!(
        second & (FAST | SYM),
        FAST | SYM,
        "two dear heavy fences in a row: symmetric, no heavy fence at the next write"
    );
    let t = raw.lock_shared();
    assert!(fast(&t), "still a slot read");
    // SAFETY: from `lock_shared` above.
    unsafe { raw.unlock_shared(t) };
}

#[test]
fn a_new_thread_s_first_read_gets_its_slot_and_is_fast() {
    // The inline read takes only an index the thread already has; the
    // first read of a thread hands one out on the slow path and still
    // reads through the slot, and the second finds it inline.
    let raw = Arc::new(Raw::with_table(&XEN));
    let r = Arc::clone(&raw);
    thread::spawn(move || {
        assert_eq!(thread_slot::assigned(), None, "a new thread has no index");
        for _ in 0..2 {
            let t = r.lock_shared();
            assert!(fast(&t));
            assert_eq!(
                t.slot.map(|s| s as *const Slot),
                r.my_slot().map(|s| s as *const Slot)
            );
            // SAFETY: `t` came from `lock_shared` on this thread.
            unsafe { r.unlock_shared(t) };
            assert!(thread_slot::assigned().is_some());
        }
    })
    .join()
    .unwrap();
}

#[test]
#[cfg_attr(
    miri,
    ignore = "a policy test of thousands of reads: minutes under Miri"
)]
fn bravo_inhibits_then_slow_reader_restores() {
    // On the stepped clock, as `default_table_inhibits_after_a_revocation`.
    let raw = SteppedRaw::with_table(&BRAVO);
    let t = raw.lock_shared();
    assert!(fast(&t));
    // SAFETY: from `lock_shared` above.
    unsafe { raw.unlock_shared(t) };
    // Two writes back to back: the second finds the bias either off (the
    // first inhibited it) or just back (the first kept it: a fresh lock's
    // bias may have been on for long), so it revokes soon after the bias's
    // return, which inhibits.
    for _ in 0..2 {
        let w = raw.lock_exclusive();
        // SAFETY: from `lock_exclusive` above.
        unsafe { raw.unlock_exclusive(w) };
    }
    let s = raw.state.load(O::Relaxed);
    assert_eq!(s & (FAST | SYM), 0, "after dense writes the bias is off");
    // Within a few windows a slow reader turns it back on (each slow read
    // in `pc_clock_every` reads the clock, which moves it one step: about
    // 2,400 reads here).
    let mut reenabled = false;
    for _ in 0..20_000 {
        let t = raw.lock_shared();
        // SAFETY: from `lock_shared` above.
        unsafe { raw.unlock_shared(t) };
        if raw.state.load(O::Relaxed) & FAST != 0 {
            reenabled = true;
            break;
        }
    }
    assert!(reenabled);
}

/// A timed write that finds the lock inhibited and free takes it at once
/// and reads no clock: its deadline is computed only where it would wait
/// (it was computed for the revocation step even with nothing to revoke).
#[test]
fn a_timed_write_taken_at_once_reads_no_clock() {
    use lock_api::RawRwLockTimed;
    static TABLE: ReaderTable = ReaderTable::with_inhibition(9);
    let raw = SteppedRaw::with_table(&TABLE);
    let t = raw.lock_shared();
    // SAFETY: from `lock_shared` above.
    unsafe { raw.unlock_shared(t) };
    // Writes back to back inhibit (as in `bravo_inhibits_then_slow_reader_restores`).
    for _ in 0..2 {
        let w = raw.lock_exclusive();
        // SAFETY: from `lock_exclusive` above.
        unsafe { raw.unlock_exclusive(w) };
    }
    assert_eq!(raw.state.load(O::Relaxed) & (FAST | SYM), 0, "inhibited");
    let before = STEPPED_CLOCK.with(core::cell::Cell::get);
    let w = raw
        .try_lock_exclusive_for(core::time::Duration::from_secs(1))
        .expect("a free lock");
    let after = STEPPED_CLOCK.with(core::cell::Cell::get);
    // SAFETY: from `try_lock_exclusive_for` above.
    unsafe { raw.unlock_exclusive(w) };
    assert_eq!(
        (after - before) / 1_000,
        0,
        "clock reads of the timed write"
    );
}

#[test]
fn default_table_inhibits_after_a_revocation() {
    // The default table is a BRAVO one, not Xen's...
    assert!(core::ptr::eq(Raw::new().table(), ReaderTable::global()));
    assert!(
        ReaderTable::global().inhibits(),
        "default table: BRAVO, not Xen"
    );
    // ... and a table like it inhibits after a revocation. A table of this
    // test's own: the keep rule weighs the class's last two revocation
    // costs, and the default table's last one may be another test's (under
    // Miri, a revocation of a test that ran at a very different speed).
    // On a clock that moves 1 us per reading: the real one may put more
    // than the keep rule's factor of revocations between the two writes
    // (Miri switching to another test's thread, a preempted runner).
    static LIKE_DEFAULT: ReaderTable = ReaderTable::new();
    let raw = SteppedRaw::with_table(&LIKE_DEFAULT);
    let t = raw.lock_shared();
    assert!(fast(&t));
    // SAFETY: from `lock_shared` above.
    unsafe { raw.unlock_shared(t) };
    // Writes back to back: the asymmetric (biased) mode inhibits the bias
    // after a revocation that follows its return closely (BRAVO, not
    // Xen)...
    for _ in 0..2 {
        let w = raw.lock_exclusive();
        // SAFETY: from `lock_exclusive` above.
        unsafe { raw.unlock_exclusive(w) };
    }
    // (A heavy fence of one step is not dear: not symmetric.)
    let s = raw.state.load(O::Relaxed);
    assert_eq!(s & (FAST | SYM), 0, "default table: BRAVO, not Xen");
    // ... and a second write finds the bias off: no revocation, same
    // window.
    let w = raw.lock_exclusive();
    assert_eq!(w.next & FAST, 0);
    // SAFETY: as above.
    unsafe { raw.unlock_exclusive(w) };
}

/// Reads until a slow reader has turned the bias of `raw` back on (each
/// slow read in `pc_clock_every` reads the stepped clock, which moves it).
fn until_biased(raw: &SteppedRaw) {
    for _ in 0..100_000 {
        if raw.state.load(O::Relaxed) & (FAST | SYM) == FAST {
            return;
        }
        let t = raw.lock_shared();
        // SAFETY: from `lock_shared` above.
        unsafe { raw.unlock_shared(t) };
    }
    panic!("the bias never came back");
}

/// Biased reads that pay for a revocation keep the bias, however soon the
/// write follows its return; a run of writes after too few of them each
/// inhibits (one alone does not: the class averages its reads per write). On
/// the stepped clock, where a biased read reads no clock: a write finds
/// the bias on for far less than `pc_keep_factor` revocations, so only the
/// count of biased reads can keep it.
#[test]
#[cfg_attr(
    miri,
    ignore = "a policy test of thousands of reads: minutes under Miri"
)]
fn biased_reads_that_pay_for_the_revocation_keep_the_bias() {
    static PAYING: ReaderTable = ReaderTable::new();
    let raw = SteppedRaw::with_table(&PAYING);
    let write = || write_once(&raw);
    // Writes back to back: inhibited (as in
    // `default_table_inhibits_after_a_revocation`).
    write();
    write();
    assert_eq!(raw.state.load(O::Relaxed) & FAST, 0);
    until_biased(&raw);
    // A revocation costs a few clock readings of 1 µs each: enough biased
    // reads at `pc_read_saving_ns` each pay for it, and their full fences
    // in the symmetric mode (as measured on this machine) would cost more
    // than twice a heavy fence of a few µs.
    let fence_x16 = super::fence_cost::full_fence_x16::<StdP>();
    let reads = (2 * 16 * 10_000 / fence_x16).clamp(1_000, 1_000_000);
    assert!(reads * TUNING.pc_read_saving_ns >= 10_000);
    for _ in 0..reads {
        let t = raw.lock_shared();
        assert!(fast(&t));
        // SAFETY: from `lock_shared` above.
        unsafe { raw.unlock_shared(t) };
    }
    assert_eq!(write() & (FAST | SYM), FAST, "paid for: the bias stays");
    assert_ne!(raw.state.load(O::Relaxed) & FAST, 0);
    // Right away again, with one read in between each time: one such
    // write does not end the bias (the class's reads per write average
    // them), a run of them does (inhibited).
    let t = raw.lock_shared();
    assert!(fast(&t));
    // SAFETY: from `lock_shared` above.
    unsafe { raw.unlock_shared(t) };
    assert_ne!(write() & FAST, 0, "one close write keeps the slot reads");
    let mut writes = 1;
    while raw.state.load(O::Relaxed) & FAST != 0 {
        assert!(writes < 200, "close writes never inhibited the bias");
        let t = raw.lock_shared();
        // SAFETY: from `lock_shared` above.
        unsafe { raw.unlock_shared(t) };
        write();
        writes += 1;
    }
}

/// Sparse writes keep the bias: a revocation after the bias was on for
/// many revocation costs brings it back at unlock, with no window; one
/// that follows the bias's return closely inhibits it. On a manual clock
/// (the real one may preempt a revocation for longer than the gap).
#[test]
fn sparse_writes_keep_the_bias() {
    const CLOCK: usize = 1;
    static TABLE: ReaderTable = ReaderTable::new();
    // Heavy fences of 1.5 µs: a revocation costs 1.5 µs (cheap: under
    // `pc_sym_cost_ns`, so none goes symmetric).
    let raw = RawPerCpuRwLock::<TestPlatform<1_500, 0, CLOCK>>::with_table(&TABLE);
    let write = || write_once(&raw);
    // Writes back to back first, so the stamp is known (a fresh lock's is
    // not): they leave the bias inhibited.
    write();
    assert_eq!(write() & FAST, 0, "back to back: inhibited");
    for round in 0..3 {
        // Until the bias is on (a slow reader re-enables it once the
        // window is over; each slow read in `pc_clock_every` reads the
        // clock), then a gap of 1 ms (over 600 revocations), inside the
        // stamp's exact range.
        let mut reads = 0;
        while raw.state.load(O::Relaxed) & FAST == 0 {
            let t = raw.lock_shared();
            // SAFETY: from `lock_shared` above.
            unsafe { raw.unlock_shared(t) };
            advance(CLOCK, 1_000);
            reads += 1;
            assert!(reads < 100_000, "the bias never came back");
        }
        advance(CLOCK, 1_000_000);
        assert_eq!(
            write() & (FAST | SYM),
            FAST,
            "round {round}: a write after a long biased spell keeps the bias"
        );
        assert_ne!(raw.state.load(O::Relaxed) & FAST, 0, "the bias is back");
        // 2 µs later (under `pc_keep_factor` revocations), with one read
        // in between (which does not pay for it): inhibited.
        let t = raw.lock_shared();
        // SAFETY: from `lock_shared` above.
        unsafe { raw.unlock_shared(t) };
        advance(CLOCK, 2_000);
        assert_eq!(write() & FAST, 0, "round {round}: a close write inhibits");
    }
}

/// The symmetric mode does not stick while writes keep coming: one
/// symmetric revocation in `pc_sym_probe` tries the biased mode again, but
/// only once the class's last heavy fence is `pc_probe_fences` times its
/// cost ago, so that the probes' fences cost a small share of the time
/// however dense the writes. On a manual clock, so that no gap is rare by
/// accident.
#[test]
#[cfg_attr(
    miri,
    ignore = "three probe periods of reads: over a minute under Miri"
)]
fn symmetric_mode_probes_the_bias_again() {
    const CLOCK: usize = 2;
    const FENCE_NS: u64 = 60_000;
    const GAP_NS: u64 = 20_000;
    static FORCED: ReaderTable = ReaderTable::new();
    FORCED.force_symmetric();
    // Heavy fences of 60 µs and writes 20 µs apart: no gap is
    // `pc_keep_factor` fences long, so only the probe brings the bias back.
    let raw = RawPerCpuRwLock::<TestPlatform<FENCE_NS, 0, CLOCK>>::with_table(&FORCED);
    // Writes between two probes: at least the wait after the probe's heavy
    // fence, at most that plus one probe count more (and the biased
    // write).
    let wait = (FENCE_NS * TUNING.pc_probe_fences).div_ceil(GAP_NS) as u32;
    let period = wait + TUNING.pc_sym_probe + 1;
    const { assert!(TUNING.pc_probe_fences > 1) };
    let rounds = 3 * period + 2;
    let mut probes = std::vec::Vec::new();
    let mut symmetric = 0;
    for round in 0..rounds {
        reads_keeping_symmetric(&raw);
        advance(CLOCK, GAP_NS);
        let w = raw.lock_exclusive();
        match w.next & (FAST | SYM) {
            FAST => probes.push(round),
            s if s == FAST | SYM => symmetric += 1,
            s => panic!("forced symmetric: neither biased nor symmetric ({s:#x})"),
        }
        // SAFETY: from `lock_exclusive` above.
        unsafe { raw.unlock_exclusive(w) };
    }
    assert_eq!(probes.len() + symmetric, rounds as usize);
    // The first probe comes within a probe count (the table's count starts
    // anywhere in its period, and no heavy fence was timed before the
    // forced switch's); each next one no sooner than the wait, and no
    // later than one probe count after it.
    assert!(
        probes.len() >= 3,
        "the symmetric mode tried the bias again: {probes:?}"
    );
    for pair in probes.windows(2) {
        let apart = pair[1] - pair[0];
        assert!(
            (wait..=period).contains(&apart),
            "probes {apart} writes apart, not {wait}-{period}: {probes:?}"
        );
    }
}

/// One revocation that waits for a long read (as for a reader preempted
/// inside its read section) does not inhibit the bias when writes are
/// sparse: the keep rule weighs the cheaper of the last two revocations.
/// On a manual clock: the reader moves it 300 µs while the writer waits.
#[test]
fn one_slow_revocation_keeps_the_bias() {
    const CLOCK: usize = 3;
    static TABLE: ReaderTable = ReaderTable::new();
    // Heavy fences of 1 µs: cheap (under `pc_sym_cost_ns`, so no
    // revocation here goes symmetric).
    type Slow = RawPerCpuRwLock<TestPlatform<1_000, 0, CLOCK>>;
    // In a static (not leaked): Miri reports leaked memory that no
    // static reaches.
    static RAW: std::sync::OnceLock<Slow> = std::sync::OnceLock::new();
    let raw: &'static Slow = RAW.get_or_init(|| Slow::with_table(&TABLE));
    let write = || write_once(raw);
    let biased = |s: u64| s & (FAST | SYM) == FAST;
    // Back to back (inhibited), then slow reads until the bias is back.
    write();
    write();
    while !biased(raw.state.load(O::Relaxed)) {
        let t = raw.lock_shared();
        // SAFETY: from `lock_shared` above.
        unsafe { raw.unlock_shared(t) };
        advance(CLOCK, 1_000);
    }
    // 1 ms later, a cheap revocation (its heavy fence, 1 µs): kept.
    advance(CLOCK, 1_000_000);
    assert!(biased(write()), "a sparse cheap write keeps the bias");
    // 1 ms later, a write that waits for a fast read held for 300 µs: over
    // 1/`pc_keep_factor` of the gap, but the previous revocation was cheap.
    advance(CLOCK, 1_000_000);
    let slow_write = |hold: u64| {
        let (held_tx, held_rx) = std::sync::mpsc::channel();
        let reader = thread::spawn(move || {
            let t = raw.lock_shared();
            assert!(fast(&t), "the bias was on");
            held_tx.send(()).unwrap();
            // Until the writer waits for our slot asleep: past its heavy
            // fence and the clock reading that times the fence (moving the
            // clock before that would make the fence look dear).
            let slot = t.slot.expect("a fast read holds a slot");
            while slot.waiters().load(O::Relaxed) == 0 {
                std::hint::spin_loop();
            }
            advance(CLOCK, hold);
            // SAFETY: from `lock_shared` above.
            unsafe { raw.unlock_shared(t) };
        });
        // Once the reader holds its slot.
        held_rx.recv().unwrap();
        let next = write();
        reader.join().unwrap();
        next
    };
    assert!(
        biased(slow_write(300_000)),
        "a write that waited for a long read kept the bias"
    );
    // A second slow one 1 ms later: the cheaper of the last two is now
    // 301 µs, over 1/`pc_keep_factor` of the gap: inhibited.
    advance(CLOCK, 1_000_000);
    assert_eq!(
        slow_write(300_000) & FAST,
        0,
        "two slow revocations in a row: the bias does not stay"
    );
}

/// A reading thread that exits takes no reads back: the reads a
/// revocation counts (for the keep rule) are those of the slots in use
/// plus the ones exited threads handed to the table, so a slot whose
/// thread exited between two revocations neither wraps the count (a huge
/// "the reads paid for it") nor hides the reads it made before. On a
/// manual clock.
#[test]
fn an_exited_reader_leaves_the_read_count_alone() {
    const CLOCK: usize = 7;
    static TABLE: ReaderTable = ReaderTable::new();
    // Heavy fences of 1 µs: cheap, so no revocation goes symmetric.
    type Churn = RawPerCpuRwLock<TestPlatform<1_000, 0, CLOCK>>;
    // In a static (not leaked): Miri reports leaked memory that no
    // static reaches.
    static RAW: std::sync::OnceLock<Churn> = std::sync::OnceLock::new();
    let raw: &'static Churn = RAW.get_or_init(|| Churn::with_table(&TABLE));
    let write = || write_once(raw);
    let read = || {
        let t = raw.lock_shared();
        // SAFETY: from `lock_shared` above.
        unsafe { raw.unlock_shared(t) };
    };
    // Back to back (inhibited), then slow reads until the bias is back.
    write();
    write();
    while raw.state.load(O::Relaxed) & FAST == 0 {
        read();
        advance(CLOCK, 1_000);
    }
    // This thread takes a slot (a fast read); another thread reads fast
    // (in a slot of its own), stays alive through a sparse write (kept),
    // then exits and gives its slot index back.
    let t = raw.lock_shared();
    assert!(fast(&t), "the bias is on");
    // SAFETY: from `lock_shared` above.
    unsafe { raw.unlock_shared(t) };
    let (done_tx, done_rx) = std::sync::mpsc::channel();
    let (go_tx, go_rx) = std::sync::mpsc::channel::<()>();
    let reader = thread::spawn(move || {
        for _ in 0..if cfg!(miri) { 200 } else { 5_000 } {
            let t = raw.lock_shared();
            assert!(fast(&t), "the bias is on");
            // SAFETY: from `lock_shared` above.
            unsafe { raw.unlock_shared(t) };
        }
        done_tx.send(()).unwrap();
        go_rx.recv().unwrap();
    });
    done_rx.recv().unwrap();
    advance(CLOCK, 1_000_000);
    assert_eq!(
        write() & (FAST | SYM),
        FAST,
        "a sparse write keeps the bias"
    );
    go_tx.send(()).unwrap();
    reader.join().unwrap();
    // A write 2 µs after the last (under `pc_keep_factor` revocations of
    // 1 µs), with one read in between: the class's reads per write fall
    // (counted again, the exited reader's 5,000 would raise them).
    let before = TABLE.reads_per_write_x16();
    read();
    advance(CLOCK, 2_000);
    write();
    let after = TABLE.reads_per_write_x16();
    assert!(
        after < before,
        "a close write after a reader exited: the exited reader's reads do not count again \
         ({before}/16 -> {after}/16 reads per write)"
    );
}

/// Writes that come 1 ms apart keep the bias even when every revocation's
/// heavy fence is dear: revoking then costs well under 1/`pc_keep_factor`
/// of the time, and the symmetric mode would make every read pay a full
/// fence instead. On a manual clock, with heavy fences of 5 µs (dear: at
/// least `pc_sym_cost_ns`).
#[test]
#[cfg_attr(
    miri,
    ignore = "a policy test of thousands of reads: minutes under Miri"
)]
fn dear_fences_keep_the_bias_for_sparse_writes() {
    const CLOCK: usize = 4;
    static TABLE: ReaderTable = ReaderTable::new();
    let raw = RawPerCpuRwLock::<TestPlatform<5_000, 0, CLOCK>>::with_table(&TABLE);
    let mut biased = 0;
    for round in 0..10 {
        // Enough slow reads to look at the clock (an inhibition window
        // over brings the bias back), then a gap of 1 ms, inside the
        // stamp's exact range.
        for _ in 0..2 * TUNING.pc_clock_every {
            let t = raw.lock_shared();
            // SAFETY: from `lock_shared` above.
            unsafe { raw.unlock_shared(t) };
        }
        advance(CLOCK, 1_000_000);
        let was_biased = raw.state.load(O::Relaxed) & (FAST | SYM) == FAST;
        let w = raw.lock_exclusive();
        let next = w.next;
        // SAFETY: from `lock_exclusive` above.
        unsafe { raw.unlock_exclusive(w) };
        if was_biased {
            biased += 1;
            assert_eq!(
                next & (FAST | SYM),
                FAST,
                "round {round}: a sparse write kept the bias, its fence dear or not"
            );
        }
    }
    assert!(TABLE.fence_floor_ns() >= 5_000, "the fences were dear");
    // All but the first (a fresh lock's stamp is unknown).
    assert!(
        biased >= 9,
        "the lock was biased before the writes ({biased})"
    );
}

/// The symmetric mode brings the bias back once writes are further apart
/// than `pc_keep_factor` heavy fences, not only past `pc_rare_ns`, twice in
/// a row: one long gap among short ones is chance. On a manual clock, with
/// heavy fences of 5 µs.
#[test]
fn symmetric_mode_returns_to_the_bias_when_writes_thin_out() {
    const CLOCK: usize = 5;
    static FORCED: ReaderTable = ReaderTable::new();
    FORCED.force_symmetric();
    let raw = RawPerCpuRwLock::<TestPlatform<5_000, 0, CLOCK>>::with_table(&FORCED);
    let write = || write_once(&raw);
    let mode = |s: u64| s & (FAST | SYM);
    let read = || reads_keeping_symmetric(&raw);
    // A biased revocation goes symmetric (forced).
    read();
    write();
    read();
    advance(CLOCK, 10_000);
    for round in 0..if cfg!(miri) { 2 } else { 10 } {
        // Symmetric now: writes 10 µs apart (2 fences) keep it so...
        let mut symmetric = 0;
        while mode(raw.state.load(O::Relaxed)) == FAST | SYM && symmetric < 3 {
            read();
            advance(CLOCK, 10_000);
            let next = write();
            if mode(next) == FAST {
                // (the probe: one in `pc_sym_probe` revocations, once
                // `pc_probe_fences` fences passed)
                break;
            }
            assert_eq!(mode(next), FAST | SYM, "round {round}: dense writes");
            symmetric += 1;
        }
        if mode(raw.state.load(O::Relaxed)) != FAST | SYM {
            // The probe brought the bias back: the next biased
            // revocation makes it symmetric again (forced).
            read();
            advance(CLOCK, 10_000);
            assert_eq!(mode(write()), FAST | SYM, "forced symmetric");
            continue;
        }
        // ... and so does one 200 µs after the last (40 fences, under
        // `pc_rare_ns`) between short gaps: writes at random times leave
        // such a gap now and then...
        read();
        advance(CLOCK, 200_000);
        const { assert!(200_000 < TUNING.pc_rare_ns) };
        assert_eq!(mode(write()), FAST | SYM, "round {round}: one long gap");
        read();
        advance(CLOCK, 10_000);
        assert_eq!(
            mode(write()),
            FAST | SYM,
            "round {round}: dense writes again"
        );
        // ... but two such gaps in a row (writes thinned out) bring the
        // bias back.
        for second in [false, true] {
            read();
            advance(CLOCK, 200_000);
            let want = if second { FAST } else { FAST | SYM };
            assert_eq!(
                mode(write()),
                want,
                "round {round}: writes thinned out ({second})"
            );
        }
        // Biased again; its next revocation goes symmetric (forced).
        read();
        advance(CLOCK, 10_000);
        assert_eq!(mode(write()), FAST | SYM, "forced symmetric");
    }
}

/// The symmetric mode stays while the reads per write pay for revoking at
/// every write: a count (`pc_sym_min_reads`) and, where a revocation is
/// dear (many slots to scan), its cost; below either, writes inhibit the
/// bias.
#[test]
fn symmetric_mode_stays_while_reads_per_write_pay() {
    let min = TUNING.pc_sym_min_reads;
    let alone = read_saving_ns(1);
    // Cheap revocations: the count decides.
    assert!(symmetric_pays(min, 1, alone));
    assert!(symmetric_pays(10 * min, 1, alone));
    assert!(!symmetric_pays(min - 1, 1, alone));
    assert!(!symmetric_pays(0, 1, alone));
    // A dear revocation needs the reads to save `pc_sym_pay_factor` times
    // its cost.
    let reads = 4 * min;
    let dear = reads * alone / TUNING.pc_sym_pay_factor;
    assert!(symmetric_pays(reads, dear, alone));
    assert!(!symmetric_pays(reads, dear + 1, alone));
    // With several reading threads a slot read saves more (the underlying
    // word would bounce): the same reads pay for a dearer revocation.
    assert!(symmetric_pays(reads, dear + 1, read_saving_ns(2)));
}

/// A slot read saves `pc_read_saving_ns` while one thread has a reader
/// slot, and more once several do.
#[test]
fn slot_reads_save_more_with_several_reading_threads() {
    assert_eq!(read_saving_ns(0), TUNING.pc_read_saving_ns);
    assert_eq!(read_saving_ns(1), TUNING.pc_read_saving_ns);
    assert_eq!(read_saving_ns(2), TUNING.pc_read_saving_shared_ns);
    assert_eq!(read_saving_ns(64), TUNING.pc_read_saving_shared_ns);
}

/// The reads per revocation are averaged: with several writers,
/// two writes that meet by chance see few reads between them, and one such
/// pair among many reads does not inhibit the bias; a run of them does.
#[test]
fn one_close_pair_of_symmetric_writes_is_not_a_dense_phase() {
    let table = ReaderTable::new();
    let many = (4 * TUNING.pc_sym_min_reads) as u32;
    for _ in 0..16 {
        assert_eq!(table.reads_per_write(many), u64::from(many));
    }
    let avg = table.reads_per_write(1);
    let alone = read_saving_ns(1);
    assert!(symmetric_pays(avg, 1, alone), "one close pair: {avg} reads");
    let mut average = u64::MAX;
    for _ in 0..32 {
        average = table.reads_per_write(2);
    }
    assert!(
        !symmetric_pays(average, 1, alone),
        "close writes in a row: {average}"
    );
    // The first figure a table sees is its average.
    let fresh = ReaderTable::new();
    assert_eq!(fresh.reads_per_write(7), 7);
}

/// The class counts its symmetric revocations (one in `pc_sym_probe` tries
/// the biased mode again).
#[test]
fn symmetric_revocations_are_counted() {
    let table = ReaderTable::new();
    let ticks: std::vec::Vec<u32> = (0..3).map(|_| table.sym_tick()).collect();
    assert_eq!(ticks, [1, 2, 3]);
}

#[test]
fn recursive_reads_any_order() {
    let raw = Raw::new();
    let a = raw.lock_shared();
    let b = raw.lock_shared();
    let c = raw.try_lock_shared().unwrap();
    assert!(raw.try_lock_exclusive().is_none());
    // SAFETY: all three tokens came from this lock on this thread.
    unsafe {
        raw.unlock_shared(a);
        assert!(raw.is_locked());
        raw.unlock_shared(c);
        raw.unlock_shared(b);
    }
    assert!(!raw.is_locked());
    let w = raw.try_lock_exclusive().unwrap();
    // SAFETY: from `try_lock_exclusive` above.
    unsafe { raw.unlock_exclusive(w) };
}

#[test]
fn recursive_read_during_revocation_does_not_deadlock() {
    // Reader holds a fast read; a writer revokes and waits for our slot; our
    // second read must not queue behind it.
    let lock = Arc::new(Raw::with_table(&XEN));
    let outer = lock.lock_shared();
    assert!(fast(&outer));
    let writer_in = Arc::new(AtomicBool::new(false));
    let w = {
        let (lock, writer_in) = (lock.clone(), writer_in.clone());
        thread::spawn(move || {
            let t = lock.lock_exclusive();
            writer_in.store(true, O::SeqCst);
            // SAFETY: from `lock_exclusive` above.
            unsafe { lock.unlock_exclusive(t) };
        })
    };
    // Wait until the writer has cleared FAST (it then waits on our slot).
    while lock.state.load(O::SeqCst) & FAST != 0 {
        thread::yield_now();
    }
    let inner = lock.lock_shared();
    assert!(!writer_in.load(O::SeqCst));
    // SAFETY: both tokens came from this lock on this thread.
    unsafe {
        lock.unlock_shared(inner);
        lock.unlock_shared(outer);
    }
    w.join().unwrap();
    assert!(writer_in.load(O::SeqCst));
}

#[test]
fn nested_locks_of_one_table_fall_back() {
    let a = Raw::new();
    let b = Raw::new();
    let c = Raw::with_table(&OTHER);
    let ta = a.lock_shared();
    let tb = b.lock_shared();
    let tc = c.lock_shared();
    assert!(fast(&ta));
    assert!(listed(&tb), "the slot is busy with `a`: underlying lock");
    assert!(fast(&tc), "another table has its own slot");
    assert!(b.is_locked() && a.is_locked() && c.is_locked());
    assert!(b.try_lock_exclusive().is_none());
    // SAFETY: each token came from its lock on this thread.
    unsafe {
        a.unlock_shared(ta);
        b.unlock_shared(tb);
        c.unlock_shared(tc);
    }
    assert!(!a.is_locked() && !b.is_locked() && !c.is_locked());
}

/// A thread that read-holds lock `b` through the underlying lock (its slot
/// is busy with `a`) reads `b` again while a writer queues on `b`: the
/// second read must not wait behind the writer (which waits for the first).
#[test]
fn recursion_through_underlying_lock_passes_a_queued_writer() {
    if cfg!(miri) {
        return;
    }
    let a = Arc::new(Raw::new());
    let b = Arc::new(Raw::new());
    let ta = a.lock_shared();
    let tb1 = b.lock_shared();
    assert!(listed(&tb1), "the slot is busy with `a`");
    let writer = {
        let b = b.clone();
        thread::spawn(move || {
            let w = b.lock_exclusive();
            // SAFETY: from `lock_exclusive` above.
            unsafe { b.unlock_exclusive(w) };
        })
    };
    // Wait until the writer is queued (it waits for our first read).
    while !b.inner.is_locked_exclusive()
        && !format!("{:?}", b.inner).contains("write_waiting: true")
    {
        thread::yield_now();
    }
    let tb2 = b.lock_shared();
    // SAFETY: tokens from these locks on this thread.
    unsafe {
        b.unlock_shared(tb2);
        b.unlock_shared(tb1);
        a.unlock_shared(ta);
    }
    writer.join().unwrap();
    assert!(!b.is_locked());
}

/// An inhibited read is only counted, in the thread's `CountedReads`: its
/// slot stays free (a nested biased read of another lock can use it), and a
/// read of it again while a writer waits for the first one joins past that
/// writer; but a counted read of one lock does not let the thread join
/// another lock while a writer is inside it.
#[test]
fn counted_reads_pass_a_waiting_writer_but_not_one_inside() {
    if cfg!(miri) {
        return;
    }
    static COUNTED_B: ReaderTable = ReaderTable::new();
    static COUNTED_C: ReaderTable = ReaderTable::new();
    let b = Arc::new(inhibited(&COUNTED_B));
    let c = Arc::new(inhibited(&COUNTED_C));
    let tb1 = b.lock_shared();
    assert!(counted(&tb1) && !fast(&tb1), "an inhibited read is counted");
    assert!(b.is_locked() && b.try_lock_exclusive().is_none());
    // A writer queues on `b` (it waits for our first read)...
    let writer = {
        let b = b.clone();
        thread::spawn(move || {
            let w = b.lock_exclusive();
            // SAFETY: from `lock_exclusive` above.
            unsafe { b.unlock_exclusive(w) };
        })
    };
    while !format!("{:?}", b.inner).contains("write_waiting: true") {
        thread::yield_now();
    }
    // ... and our second read passes it instead of waiting for it.
    let tb2 = b.lock_shared();
    assert!(counted(&tb2));
    // A writer inside `c`: our read of `c` waits for it to leave, although
    // the thread holds counted reads.
    let phase = Arc::new(AtomicUsize::new(0));
    let inside = {
        let (c, phase) = (c.clone(), phase.clone());
        thread::spawn(move || {
            let w = c.lock_exclusive();
            phase.store(1, O::SeqCst);
            thread::sleep(std::time::Duration::from_millis(30));
            phase.store(2, O::SeqCst);
            // SAFETY: from `lock_exclusive` above.
            unsafe { c.unlock_exclusive(w) };
        })
    };
    while phase.load(O::SeqCst) == 0 {
        thread::yield_now();
    }
    let tc = c.lock_shared();
    assert_eq!(phase.load(O::SeqCst), 2, "read while a writer was inside");
    // SAFETY: tokens from these locks on this thread, in any order.
    unsafe {
        b.unlock_shared(tb1);
        c.unlock_shared(tc);
        b.unlock_shared(tb2);
    }
    writer.join().unwrap();
    inside.join().unwrap();
    assert!(!b.is_locked() && !c.is_locked());
    assert!(!crate::platform::StdPlatform::with_local(|l| l.counted_reads.any()).unwrap());
}

/// A lock may not use a table that serves locks of another platform: slot
/// indices of two platforms can collide (two threads on one slot).
#[test]
#[should_panic(expected = "another Platform")]
fn a_table_serves_one_platform() {
    static SHARED: ReaderTable = ReaderTable::new();
    let _ours = Raw::with_table(&SHARED);
    let _theirs = RawPerCpuRwLock::<crate::platform::StdPlatform>::with_table(&SHARED);
}

/// Read guards are `Sync` (shareable by reference with other threads, as
/// std's and parking_lot's) but not `Send`.
#[test]
fn read_guards_are_sync() {
    fn sync<T: Sync>(_: &T) {}
    let lock = Lock::new(7u32);
    let g = lock.read();
    sync(&g);
    thread::scope(|s| {
        s.spawn(|| assert_eq!(*g, 7));
    });
    drop(g);
}

/// A lock built without an id (`new`, `INIT`) is symmetric until its
/// first use gives it the id and its mode at once (invariant 5), so no
/// biased read ever runs on it without an id; its state's top bit
/// (`MARK`) stays set throughout, and a fast read's slot word carries the
/// id (and the mark, which id comparisons ignore).
#[test]
fn a_lock_without_an_id_is_symmetric_until_its_first_read() {
    let raw = Raw::new();
    assert_eq!(raw.state.load(O::Relaxed), NO_ID_YET);
    // Shown with the mode its first use will give it.
    assert!(format!("{raw:?}").contains("biased"), "{raw:?}");
    let t = raw.lock_shared();
    let s = raw.state.load(O::Relaxed);
    assert_ne!(s & ID_MASK, 0, "the first read gives the lock its id");
    assert_eq!(s & (FAST | SYM), bias::<TestPlatform>(), "{s:#x}");
    assert_ne!(s & MARK, 0);
    // SAFETY: from `lock_shared` above.
    unsafe { raw.unlock_shared(t) };
    let t = raw.lock_shared();
    assert!(fast(&t));
    let word = t.slot.unwrap().word().load(O::Relaxed);
    assert_eq!(word & ID_MASK, s & ID_MASK);
    assert_eq!(word & !(SLOT_ID | SLOT_LOW), 0, "{word:#x}");
    // SAFETY: as above.
    unsafe { raw.unlock_shared(t) };
    // A write keeps the mark and the id.
    let w = raw.lock_exclusive();
    // SAFETY: from `lock_exclusive` above.
    unsafe { raw.unlock_exclusive(w) };
    let after = raw.state.load(O::Relaxed);
    assert_eq!(after & (MARK | ID_MASK), s & (MARK | ID_MASK));
    // Ids: 39 bits, never 0, below the mark.
    let ids: Vec<u64> = (0..3).map(|_| next_id()).collect();
    assert!(
        ids.iter()
            .all(|&id| id != 0 && id << ID_SHIFT & !ID_MASK == 0)
    );
}

/// Downgrading the first write of a lock that was never read (its id is
/// assigned by the write, before anything is acquired).
#[test]
fn downgrade_of_a_never_read_lock() {
    let raw = Raw::new();
    let w = raw.lock_exclusive();
    assert_ne!(raw.state.load(O::Relaxed) & ID_MASK, 0);
    // SAFETY: from `lock_exclusive` above.
    let r = unsafe { raw.downgrade(w) };
    // SAFETY: from `downgrade` above.
    unsafe { raw.unlock_shared(r) };
    assert!(!raw.is_locked());
}

/// Upgradable reads: exclude each other and writers, let readers (fast and
/// slow) in, upgrade after the fast readers leave.
#[test]
fn upgradable_reads() {
    let lock: lock_api::RwLock<Raw, u32> = lock_api::RwLock::new(1);
    let u = lock.upgradable_read();
    assert!(lock.try_upgradable_read().is_none());
    assert!(lock.try_write().is_none());
    // Reads while this thread holds the upgradable read (lockdep lets the
    // holder read, too).
    let r = lock.read();
    assert_eq!(*r, 1);
    assert_eq!(*u, 1);
    // A try-upgrade fails while a reader is in (it waits for no one, so
    // lockdep does not report it either).
    let u = lock_api::RwLockUpgradableReadGuard::try_upgrade(u).unwrap_err();
    drop(r);
    let mut w = lock_api::RwLockUpgradableReadGuard::upgrade(u);
    *w = 5;
    drop(w);
    assert_eq!(*lock.read(), 5);
    assert!(!lock.is_locked());
}

/// The symmetric mode: reads use the slot with a full fence; a write
/// revokes with a plain fence and brings the bias back (writes not dense).
#[test]
fn symmetric_mode_reads_fast_and_writes_exclude() {
    let raw = Raw::with_table(&OTHER);
    let t = raw.lock_shared(); // assigns the id
    // SAFETY: from `lock_shared` above.
    unsafe { raw.unlock_shared(t) };
    raw.state.fetch_or(FAST | SYM, O::Relaxed);
    let t = raw.lock_shared();
    assert!(fast(&t));
    assert!(
        raw.try_lock_exclusive().is_none(),
        "a fast reader is inside"
    );
    assert_ne!(
        raw.state.load(O::Relaxed) & FAST,
        0,
        "the failed try gives the bias back"
    );
    // SAFETY: from `lock_shared` above.
    unsafe { raw.unlock_shared(t) };
    let w = raw.lock_exclusive();
    assert_eq!(raw.state.load(O::Relaxed) & FAST, 0);
    // SAFETY: from `lock_exclusive` above.
    unsafe { raw.unlock_exclusive(w) };
}

#[test]
fn downgrade() {
    let raw = Raw::new();
    let w = raw.lock_exclusive();
    // SAFETY: from `lock_exclusive` above.
    let r = unsafe { raw.downgrade(w) };
    assert!(raw.is_locked() && !raw.is_locked_exclusive());
    assert!(raw.try_lock_exclusive().is_none());
    let r2 = raw.lock_shared();
    // SAFETY: tokens from this lock on this thread.
    unsafe {
        raw.unlock_shared(r);
        raw.unlock_shared(r2);
    }
    assert!(!raw.is_locked());
}

#[test]
fn forgotten_guard_does_not_haunt_a_new_lock_at_the_same_address() {
    thread::spawn(|| {
        static GHOSTS: ReaderTable = ReaderTable::new();
        let mut lock = Box::new(Raw::with_table(&GHOSTS));
        let addr = &*lock as *const _ as usize;
        // A token never unlocked (taken without the hooks: lockdep would
        // rightly see the new lock below as the same, still read-held).
        let _forgotten = lock.try_lock_shared_untracked().unwrap();
        // A new lock in the same memory (the old one is dropped in place).
        *lock = RawPerCpuRwLock::with_table(&GHOSTS);
        assert_eq!(&*lock as *const _ as usize, addr);
        let w = lock.lock_exclusive();
        // SAFETY: from `lock_exclusive` above.
        unsafe { lock.unlock_exclusive(w) };
        // Same for a lock built by `INIT` (its id is assigned lazily).
        *lock = Raw::new();
        let w = lock.lock_exclusive();
        // SAFETY: as above.
        unsafe { lock.unlock_exclusive(w) };
    })
    .join()
    .unwrap();
}

#[test]
fn exited_threads_give_their_slot_back() {
    let lock = Arc::new(Raw::new());
    for _ in 0..if cfg!(miri) { 4 } else { 100 } {
        let lock = lock.clone();
        thread::spawn(move || {
            let t = lock.lock_shared();
            assert!(!listed(&t), "indices are recycled at thread exit");
            // SAFETY: from `lock_shared` above.
            unsafe { lock.unlock_shared(t) };
        })
        .join()
        .unwrap();
    }
    assert!(thread_slot::bound() <= crate::reader_table::SLOTS);
}

/// Slot indices past the first 64 (one word of the bitmaps) are handed
/// out and scanned: 100 threads hold a read at once, each on its own slot,
/// and a read on an index past 63, alone, keeps a writer out (one look,
/// `try_lock_exclusive`, and a wait, `lock_exclusive`).
#[test]
fn more_than_64_threads_read_on_their_own_slots() {
    if cfg!(miri) {
        return;
    }
    const N: usize = 100;
    let raw = Arc::new(Raw::with_table(&XEN));
    let (tell, told) = std::sync::mpsc::channel();
    let readers: Vec<_> = (0..N)
        .map(|_| {
            let (r, tell) = (Arc::clone(&raw), tell.clone());
            let (go, wait) = std::sync::mpsc::channel::<()>();
            let h = thread::spawn(move || {
                let t = r.lock_shared();
                let fast_read = fast(&t);
                tell.send((thread_slot::assigned(), fast_read)).unwrap();
                wait.recv().unwrap();
                // SAFETY: `t` came from `lock_shared` on this thread.
                unsafe { r.unlock_shared(t) };
            });
            (h, go)
        })
        .collect();
    let mut slots: Vec<usize> = (0..N)
        .map(|_| {
            let (slot, fast_read) = told.recv().unwrap();
            assert!(fast_read, "every reader reads on its slot");
            slot.expect("every reader has a slot")
        })
        .collect();
    slots.sort_unstable();
    slots.dedup();
    assert_eq!(slots.len(), N, "one slot per reader");
    // Let all go but the reader on the highest index (past 63: 100
    // distinct indices).
    let mut readers = readers;
    let last = readers.pop().unwrap();
    for (h, go) in readers {
        go.send(()).unwrap();
        h.join().unwrap();
    }
    assert!(
        raw.try_lock_exclusive().is_none(),
        "a reader on slot {} keeps a writer out",
        slots[N - 1]
    );
    let done = Arc::new(AtomicBool::new(false));
    let writer = {
        let (r, done) = (Arc::clone(&raw), Arc::clone(&done));
        thread::spawn(move || {
            let w = r.lock_exclusive();
            done.store(true, O::Relaxed);
            // SAFETY: `w` came from `lock_exclusive` on this thread.
            unsafe { r.unlock_exclusive(w) };
        })
    };
    thread::sleep(core::time::Duration::from_millis(50));
    assert!(
        !done.load(O::Relaxed),
        "the writer waits for the last reader"
    );
    last.1.send(()).unwrap();
    last.0.join().unwrap();
    writer.join().unwrap();
    assert!(done.load(O::Relaxed));
}

/// A thread that exits hands its slot's read counts to the table: the
/// table's retired counts take them, the slot starts from 0 for its next
/// owner, and the class's total (retired plus the slots in use) does not
/// fall, so a revocation needs only the slots in use.
#[test]
fn an_exiting_thread_hands_its_read_counts_to_the_table() {
    static TABLE: ReaderTable = ReaderTable::with_inhibition(0);
    // In a static (not leaked): Miri reports leaked memory that no
    // static reaches.
    static RAW: std::sync::OnceLock<Raw> = std::sync::OnceLock::new();
    let raw: &'static Raw = RAW.get_or_init(|| Raw::with_table(&TABLE));
    let reads = if cfg!(miri) { 20 } else { 1_000 };
    let fast_before = TABLE.retired_fast_reads_unchecked();
    let index = thread::spawn(move || {
        for _ in 0..reads {
            let t = raw.lock_shared();
            assert!(fast(&t), "Xen's policy: the bias is on");
            // SAFETY: from `lock_shared` above.
            unsafe { raw.unlock_shared(t) };
        }
        let i = thread_slot::assigned().expect("a slot");
        assert!(TABLE.slot(i).unwrap().fast_reads() >= reads);
        i
    })
    .join()
    .unwrap();
    // Other tests' threads use other tables; this table's only reader
    // was that thread (its first read may have been a slow one).
    assert!(
        TABLE
            .retired_fast_reads_unchecked()
            .wrapping_sub(fast_before)
            >= reads - 1,
        "the exited thread's slot reads are the table's now"
    );
    if let Some(slot) = TABLE.slot(index)
        && thread_slot::assigned() != Some(index)
    {
        assert_eq!(slot.fast_reads(), 0, "the slot starts from 0 again");
        assert_eq!(slot.slow_reads(), 0, "the slot starts from 0 again");
    }
}

/// A class total summed while an exiting thread hands its counts over
/// (between a writer's look at the slot and its look at the retired
/// count) would hold that thread's reads twice, or not at all: the
/// exits' sequence count refuses it, and a sum taken again after the
/// hand-over holds them once.
#[test]
fn a_total_that_meets_an_exit_is_refused_and_summed_again() {
    static TABLE: ReaderTable = ReaderTable::new();
    // An index whose slot in this table no thread uses: only this test
    // reads or writes `TABLE`.
    let i = crate::reader_table::SLOTS - 1;
    let slot = TABLE.slot(i).unwrap();
    let reads = 1_000u32;
    for _ in 0..reads {
        slot.count_fast_read();
    }
    let total = || {
        TABLE.checked_total(|| {
            TABLE
                .retired_fast_reads_unchecked()
                .wrapping_add(slot.fast_reads())
        })
    };
    assert_eq!(total(), Some(reads), "no exit: the sum stands");
    // A writer's scan reads the slot, then the owner exits.
    let seq = TABLE.retire_seq();
    let scanned = slot.fast_reads();
    TABLE.retire_counts(i);
    assert_eq!(slot.fast_reads(), 0, "the slot starts from 0 again");
    assert_eq!(
        TABLE
            .retired_fast_reads(seq)
            .map(|r| r.wrapping_add(scanned)),
        None,
        "the scanned count plus the retired one would count the reads twice"
    );
    // The other order: the slot read after the hand-over, the retired
    // count before it (a dip), refused as well.
    let seq = TABLE.retire_seq();
    let retired = TABLE.retired_fast_reads_unchecked();
    slot.count_fast_read();
    TABLE.retire_counts(i);
    assert!(!TABLE.unchanged_since(seq), "a hand-over since the look");
    assert!(!TABLE.unchanged_since(seq | 1), "a hand-over under way");
    assert_eq!(retired, reads, "the first hand-over, counted");
    assert_eq!(total(), Some(reads + 1), "summed again: each read once");
}

/// An exit whose owner made no read of a table's locks moves nothing
/// there and leaves its sequence count alone: otherwise every thread
/// that exits anywhere in the process (each retires in every registered
/// table) made the class totals of tables it never read fail, and their
/// symmetric writes stay symmetric ("exits kept moving counts").
#[test]
fn an_exit_without_reads_of_a_table_leaves_its_totals_alone() {
    static TABLE: ReaderTable = ReaderTable::new();
    let i = crate::reader_table::SLOTS - 2;
    let seq = TABLE.retire_seq();
    TABLE.retire_counts(i);
    assert!(TABLE.unchanged_since(seq), "nothing moved, nothing refused");
    // With a read to move, the exit is seen.
    TABLE.slot(i).unwrap().count_fast_read();
    TABLE.retire_counts(i);
    assert!(!TABLE.unchanged_since(seq));
    assert_eq!(TABLE.retired_fast_reads_unchecked(), 1);
}

/// The same through a real revocation: a thread exits while a writer,
/// having read that thread's slot count, waits for a later slot's reader.
/// The revocation's figure of slot reads since the last one (which feeds
/// the class's reads-per-write average) counts the reads made since, not
/// the exited thread's whole count again.
#[test]
#[cfg_attr(miri, ignore = "100,000 reads")]
fn an_exit_during_a_revocation_is_not_counted_twice() {
    use std::sync::mpsc::channel;
    static TABLE: ReaderTable = ReaderTable::new();
    static RAW: std::sync::OnceLock<Raw> = std::sync::OnceLock::new();
    let raw: &'static Raw = RAW.get_or_init(|| Raw::with_table(&TABLE));
    // A: many slot reads, then waits to exit.
    let (a_ready, a_is_ready) = channel();
    let (a_exit, a_may_exit) = channel::<()>();
    let a = thread::spawn(move || {
        for _ in 0..100_000 {
            let t = raw.lock_shared();
            // SAFETY: from `lock_shared` above.
            unsafe { raw.unlock_shared(t) };
        }
        a_ready.send(thread_slot::assigned()).unwrap();
        a_may_exit.recv().unwrap();
    });
    let a_slot = a_is_ready.recv().unwrap();
    // The class's total so far, recorded by a revocation.
    let w = raw.lock_exclusive();
    // SAFETY: from `lock_exclusive` above.
    unsafe { raw.unlock_exclusive(w) };
    // B: holds a slot read (after the window the write opened, if any).
    let (b_ready, b_is_ready) = channel();
    let (b_release, b_may_release) = channel::<()>();
    let b = thread::spawn(move || {
        let mut reads = 0u32;
        let t = loop {
            let t = raw.lock_shared();
            reads += 1;
            if fast(&t) {
                break t;
            }
            // SAFETY: from `lock_shared` above.
            unsafe { raw.unlock_shared(t) };
        };
        b_ready.send((thread_slot::assigned(), reads)).unwrap();
        b_may_release.recv().unwrap();
        // SAFETY: from `lock_shared` above.
        unsafe { raw.unlock_shared(t) };
    });
    let (b_slot, b_reads) = b_is_ready.recv().unwrap();
    // An average of one read per write: the revocation's figure moves
    // it to 14/16 + 2 × the figure (in 1/16ths).
    TABLE.set_reads_per_write_x16(16);
    let writer = thread::spawn(move || {
        let w = raw.lock_exclusive();
        // SAFETY: from `lock_exclusive` above.
        unsafe { raw.unlock_exclusive(w) };
    });
    // The writer scans A's slot (a lower index, usually) and waits on
    // B's; A exits meanwhile, handing its count to the table.
    thread::sleep(core::time::Duration::from_millis(100));
    a_exit.send(()).unwrap();
    a.join().unwrap();
    b_release.send(()).unwrap();
    b.join().unwrap();
    writer.join().unwrap();
    let since = TABLE.reads_per_write_x16().saturating_sub(14) / 2;
    assert!(
        since <= b_reads + 2,
        "the revocation saw {since} slot reads since the last one; B made {b_reads} \
         (A's slot {a_slot:?}, B's {b_slot:?})"
    );
}

/// A wrapping read total: the count since an earlier look, across the
/// wrap, and none for a total that went back (two writers recording out
/// of order).
#[test]
fn count_since_wraps_and_ignores_a_dip() {
    use crate::reader_table::count_since;
    assert_eq!(count_since(10, 3), 7);
    assert_eq!(count_since(5, u32::MAX - 4), 10, "across the wrap");
    assert_eq!(count_since(3, 10), 0, "a dip counts as no reads");
    assert_eq!(count_since(0, 5_000), 0);
    assert_eq!(count_since(7, 7), 0);
}

#[test]
fn readers_and_writers_exclude() {
    struct Shared {
        lock: Lock<[usize; 2]>,
        writes: AtomicUsize,
    }
    let s = Arc::new(Shared {
        lock: Lock::new([0, 0]),
        writes: AtomicUsize::new(0),
    });
    let handles: Vec<_> = (0..4)
        .map(|t| {
            let s = s.clone();
            thread::spawn(move || {
                for i in 0..ITERS {
                    if (i + t) % 10 == 0 {
                        let mut g = s.lock.write();
                        g[0] += 1;
                        g[1] += 1;
                        s.writes.fetch_add(1, O::Relaxed);
                    } else {
                        let g = s.lock.read();
                        assert_eq!(g[0], g[1]);
                    }
                }
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    let g = s.lock.read();
    assert_eq!(g[0], s.writes.load(O::Relaxed));
}

/// A lock on table `table` and manual clock `CLOCK` in the symmetric mode,
/// with the mode race on: forced symmetric for its first write, then not.
fn raced<const CLOCK: usize>(
    table: &'static ReaderTable,
) -> RawPerCpuRwLock<TestPlatform<60_000, 0, CLOCK>> {
    table.force_symmetric();
    let raw = RawPerCpuRwLock::<TestPlatform<60_000, 0, CLOCK>>::with_table(table);
    race_reads(&raw, 16);
    let w = raw.lock_exclusive();
    // SAFETY: from `lock_exclusive` above.
    unsafe { raw.unlock_exclusive(w) };
    assert_eq!(raw.state.load(O::Relaxed) & (FAST | SYM), FAST | SYM);
    table.unforce_symmetric();
    raw
}

/// `n` reads of `raw`.
fn race_reads<P: Platform>(raw: &RawPerCpuRwLock<P>, n: usize) {
    for _ in 0..n {
        let t = raw.lock_shared();
        // SAFETY: from `lock_shared` above.
        unsafe { raw.unlock_shared(t) };
    }
}

/// Writes of `raw`, each after `reads` reads and 10 µs on clock `CLOCK`,
/// until one leaves the bias off (`None` after `max` writes): the state
/// that write leaves, and how far ahead its window ends, ns.
fn race_until_inhibited<const CLOCK: usize>(
    raw: &RawPerCpuRwLock<TestPlatform<60_000, 0, CLOCK>>,
    reads: usize,
    max: usize,
) -> Option<(u64, i64)> {
    for _ in 0..max {
        race_reads(raw, reads);
        advance(CLOCK, 10_000);
        let w = raw.lock_exclusive();
        let next = w.next;
        // SAFETY: from `lock_exclusive` above.
        unsafe { raw.unlock_exclusive(w) };
        if next & FAST == 0 {
            let now = MANUAL_CLOCKS[CLOCK - 1].load(O::Relaxed);
            return Some((next, -since_stamp(next, now)));
        }
    }
    None
}

/// Inhibited reads of `raw`, `reads` per 10 µs on clock `CLOCK`, until a
/// slow read brings the bias back after the window.
fn race_window<const CLOCK: usize>(
    raw: &RawPerCpuRwLock<TestPlatform<60_000, 0, CLOCK>>,
    reads: usize,
) {
    for _ in 0..1_000 {
        race_reads(raw, reads);
        advance(CLOCK, 10_000);
        if raw.state.load(O::Relaxed) & FAST != 0 {
            return;
        }
    }
    panic!("the window never ended");
}

/// The mode race through a lock, on a manual clock: symmetric reads at
/// 1600 per ms against inhibited ones at 6400 per ms. The first symmetric
/// phase (`SYM_PHASE_NS`, 300 µs) ends in a short window (no inhibited
/// rate known yet); the next phase loses its race and ends in a short
/// window again (one loss may be chance); the one after that loses again
/// and ends in a window of `pc_dense_window_ns`.
#[test]
#[cfg_attr(miri, ignore = "thousands of reads on a manual clock")]
fn slower_symmetric_reads_lose_the_mode_race() {
    const CLOCK: usize = 6;
    static TABLE: ReaderTable = ReaderTable::new();
    let raw = raced::<CLOCK>(&TABLE);
    for (phase, window) in [300_000, 300_000, TUNING.pc_dense_window_ns]
        .into_iter()
        .enumerate()
    {
        let (next, ahead) = race_until_inhibited(&raw, 16, 100)
            .unwrap_or_else(|| panic!("phase {phase}: stayed symmetric"));
        assert_ne!(
            next & SYM,
            0,
            "phase {phase}: the bias comes back symmetric"
        );
        assert!(
            ahead > window as i64 - 1_000 && ahead <= window as i64 + 1_000,
            "phase {phase}: a window of {ahead} ns, not {window}"
        );
        race_window(&raw, 64);
    }
}

/// The same with inhibited reads at 800 per ms: after the first short
/// window the symmetric mode wins its race and stays for `EXPLORE_NS`
/// (16 ms): no write in the next 10 ms inhibits the bias.
#[test]
#[cfg_attr(miri, ignore = "thousands of reads on a manual clock")]
fn faster_symmetric_reads_win_the_mode_race() {
    const CLOCK: usize = 8;
    static TABLE: ReaderTable = ReaderTable::new();
    let raw = raced::<CLOCK>(&TABLE);
    race_until_inhibited(&raw, 16, 100).expect("a window after the first phase");
    race_window(&raw, 8);
    assert_eq!(
        race_until_inhibited(&raw, 16, 1_000),
        None,
        "the symmetric mode won and stays"
    );
}

/// A write that leaves the bias on, in a class whose writes are sparse,
/// while a thread queues behind the underlying lock's waiter, hands that
/// lock to the waiter (`HANDOFF` next to its `QUIET`); with denser writes
/// (still enough reads per write for the symmetric mode), or with nobody
/// queued behind the waiter, the release is the plain one ("Writes end the
/// underlying lock's batches").
#[test]
fn a_sparse_write_that_leaves_the_bias_on_hands_off() {
    static TABLE: ReaderTable = ReaderTable::new();
    TABLE.force_symmetric();
    let raw = RawPerCpuRwLock::<StdP>::with_table(&TABLE);
    let sparse = 4 * TUNING.pc_handoff_reads;
    let denser = TUNING.pc_handoff_reads / 4;
    for (reads_per_write, queued, handoff) in [
        (sparse, true, true),
        (denser, true, false),
        (sparse, false, false),
    ] {
        // A write without reads folds 0 into the average: 7/8 of it stays.
        TABLE.set_reads_per_write_x16((reads_per_write * 16) as u32);
        let w = raw.lock_exclusive();
        assert_ne!(w.next & FAST, 0, "a symmetric write leaves the bias on");
        raw.inner.mark_quiet_for_test();
        raw.inner.mark_queued_for_test(queued);
        // SAFETY: `w` came from `lock_exclusive` above.
        unsafe { raw.unlock_exclusive(w) };
        assert_eq!(
            raw.inner.batch_bits_for_test(),
            (true, handoff, false),
            "{reads_per_write} reads per write, queued {queued}: (QUIET, HANDOFF, W_LOCKED)"
        );
        // The stand-in waiters leave.
        raw.inner.mark_queued_for_test(false);
        raw.inner.clear_quiet_for_test();
    }
}

/// A `try_upgrade` that fails (a fast reader is inside) leaves no plain
/// reader waiting: readers go on beside the upgradable read before, during
/// and after the try (it revokes before the underlying lock is exclusive:
/// a reader that stepped aside during the revocation takes the underlying
/// read beside us instead of queueing on the queue lock we hold).
#[test]
#[cfg_attr(miri, ignore = "thousands of heavy fences, timed waits")]
fn a_failed_try_upgrade_leaves_no_reader_waiting() {
    use lock_api::RawRwLockUpgrade;
    use std::sync::mpsc::channel;
    use std::time::{Duration, Instant};
    // Xen's policy: the bias is back at every write unlock, and a fast read
    // stays on its slot.
    static TABLE: ReaderTable = ReaderTable::with_inhibition(0);
    let raw = Arc::new(RawPerCpuRwLock::<StdP>::with_table(&TABLE));
    // A fast reader inside for the whole test: every try fails.
    let (release, may_release) = channel::<()>();
    let (inside, is_inside) = channel::<bool>();
    let holder = {
        let raw = raw.clone();
        thread::spawn(move || {
            let t = raw.lock_shared();
            inside
                .send(RawPerCpuRwLock::<StdP>::took_fast_path(&t))
                .unwrap();
            may_release.recv().unwrap();
            // SAFETY: from `lock_shared` above.
            unsafe { raw.unlock_shared(t) };
        })
    };
    assert!(is_inside.recv().unwrap(), "a fast read");
    let stop = Arc::new(AtomicBool::new(false));
    let reads = Arc::new(AtomicUsize::new(0));
    let reader = {
        let (raw, stop, reads) = (raw.clone(), stop.clone(), reads.clone());
        thread::spawn(move || {
            while !stop.load(O::Relaxed) {
                let t = raw.lock_shared();
                // SAFETY: from `lock_shared` above.
                unsafe { raw.unlock_shared(t) };
                reads.fetch_add(1, O::Relaxed);
            }
        })
    };
    let mut stuck = None;
    for round in 0..20 {
        let mut u = raw.lock_upgradable();
        for _ in 0..500 {
            // SAFETY: `u` is our upgradable read.
            u = match unsafe { raw.try_upgrade(u) } {
                Ok(_) => panic!("a fast reader is inside: the try must fail"),
                Err(u) => u,
            };
        }
        // Still holding the upgradable read: the reader goes on.
        let before = reads.load(O::Relaxed);
        let start = Instant::now();
        while reads.load(O::Relaxed) == before && start.elapsed() < Duration::from_millis(500) {
            thread::sleep(Duration::from_millis(1));
        }
        let waited = reads.load(O::Relaxed) == before;
        // SAFETY: `u` is our upgradable read.
        unsafe { raw.unlock_upgradable(u) };
        if waited {
            stuck = Some(round);
            break;
        }
    }
    stop.store(true, O::Relaxed);
    release.send(()).unwrap();
    holder.join().unwrap();
    reader.join().unwrap();
    assert_eq!(
        stuck, None,
        "a plain reader waited 500 ms beside the upgradable read after failed tries"
    );
    // And with no fast reader inside, the try succeeds.
    let u = raw.lock_upgradable();
    // SAFETY: `u` is our upgradable read.
    let w = unsafe { raw.try_upgrade(u) }.expect("no reader: the try succeeds");
    // SAFETY: the write we just took.
    unsafe { raw.unlock_exclusive(w) };
}

/// A thread that exits with a read still recorded in its thread-local
/// list (here forgotten) keeps its slot index retired, as with a slot word
/// that still names a read: the next owner of the index would otherwise
/// start with a count of listed reads it never made, and its slow paths
/// would look at its list for ever.
#[test]
fn an_exit_with_a_listed_read_keeps_its_index_retired() {
    static TABLE: ReaderTable = ReaderTable::with_inhibition(0);
    static LOCKS: std::sync::OnceLock<(Raw, Raw)> = std::sync::OnceLock::new();
    let (a, b) = LOCKS.get_or_init(|| (Raw::with_table(&TABLE), Raw::with_table(&TABLE)));
    let index = thread::spawn(move || {
        // A fast read of `a` takes the slot; `b`, of the same table, goes
        // through its underlying lock and into the list.
        let ta = a.lock_shared();
        assert!(fast(&ta), "Xen's policy: the bias is on");
        let i = thread_slot::assigned().expect("a slot");
        let tb = b.lock_shared();
        assert!(!fast(&tb));
        assert_eq!(TABLE.slot(i).unwrap().listed().load(O::Relaxed), 1);
        // Forgotten (never released): `b` stays read-locked, and only
        // this test uses it.
        let _ = tb;
        // SAFETY: from `lock_shared` above.
        unsafe { a.unlock_shared(ta) };
        i
    })
    .join()
    .unwrap();
    let mut retired = false;
    thread_slot::in_use(|i| retired |= i == index);
    assert!(
        retired,
        "index {index} went back with a listed read in its slot"
    );
}

/// A read that loaded the state while the lock was biased, and so
/// chose the light fence, must not get in once a write switched the lock
/// to the symmetric mode meanwhile. Its light fence pairs only with a
/// heavy one, and the next (symmetric) revocation issues a plain full
/// fence: `store slot; compiler fence; load state` against `store state;
/// fence(SeqCst); load slot` is store buffering with one fence, where both
/// loads may read the old values (the writer finds the slot free, the
/// reader `FAST` set), and a write then runs beside the read. Here the
/// reader's steps are driven by hand: the state it loaded, then a whole
/// write that switches the lock symmetric (forced), then the rest of its
/// biased read, which finds `FAST | SYM` and must step aside.
#[test]
fn a_read_that_chose_the_light_fence_steps_aside_from_a_symmetric_lock() {
    static SWITCHING: ReaderTable = ReaderTable::new();
    SWITCHING.force_symmetric();
    let raw = Raw::with_table(&SWITCHING);
    // The thread's slot, and the lock's id.
    let t = raw.lock_shared();
    assert!(fast(&t));
    // SAFETY: from `lock_shared` above.
    unsafe { raw.unlock_shared(t) };
    let stale = raw.state.load(O::Relaxed);
    assert_eq!(stale & (FAST | SYM), FAST, "biased");
    // The write (it saw no slot: the reader has not stored to it yet)
    // revokes with the heavy fence and leaves the lock symmetric.
    let w = raw.lock_exclusive();
    assert_eq!(w.next & (FAST | SYM), FAST | SYM, "forced symmetric");
    // SAFETY: from `lock_exclusive` above.
    unsafe { raw.unlock_exclusive(w) };
    // The reader resumes its biased read from the state it loaded.
    let got = raw.try_read_slot_as::<false>(stale);
    let entered = got.is_some();
    if let Some(slot) = got {
        let word = slot.word().load(O::Relaxed);
        // SAFETY: the read above got the lock on this thread's slot.
        unsafe { raw.unlock_shared(PerCpuReadToken::slot(slot)) };
        assert!(
            !entered,
            "a biased read (slot word {word:#x}: light fence) holds a lock \
             that is now symmetric ({:#x}), whose next revocation issues no \
             heavy fence",
            raw.state.load(O::Relaxed)
        );
    }
}

/// A counted read of a lock whose bias is on (the thread's slot is busy
/// with a fast read of another lock of the table, and the thread holds a
/// counted read, so the read joins the underlying readers in
/// `recursive_read`) must not restamp the state when it samples the clock:
/// a biased state's stamp is when the bias came back (the keep rule's
/// `on_for`), a symmetric one's the last write (the gap rule), and
/// `reenable_if_due` is for inhibited states.
#[test]
fn a_counted_read_of_a_biased_lock_leaves_its_stamp() {
    if cfg!(miri) {
        return;
    }
    static STAMPED_A: ReaderTable = ReaderTable::new();
    static STAMPED_BC: ReaderTable = ReaderTable::new();
    let a = inhibited(&STAMPED_A);
    let b = SteppedRaw::with_table(&STAMPED_BC);
    let c = SteppedRaw::with_table(&STAMPED_BC);
    // b's first (a thread's first read gets its slot on the slow path,
    // which would join the underlying readers if it held counted reads).
    let tb = b.lock_shared();
    assert!(SteppedRaw::took_fast_path(&tb), "b's read holds the slot");
    let ta = a.lock_shared();
    assert!(counted(&ta), "an inhibited read is counted");
    let before = c.state.load(O::Relaxed);
    assert_eq!(before & (FAST | SYM), FAST, "biased");
    // More than `pc_clock_every` reads: one of them samples the clock.
    for _ in 0..2 * TUNING.pc_clock_every {
        let t = c.lock_shared();
        assert!(counted(&t), "c's read joins the underlying readers");
        // SAFETY: from `lock_shared` above.
        unsafe { c.unlock_shared(t) };
    }
    let after = c.state.load(O::Relaxed);
    // SAFETY: tokens from these locks on this thread.
    unsafe {
        b.unlock_shared(tb);
        a.unlock_shared(ta);
    }
    assert_eq!(
        after, before,
        "a counted read restamped a biased state ({before:#x} -> {after:#x})"
    );
}

/// A slow read recorded in the slot (`UNDERLYING`) is the underlying
/// lock's business (`wait_slot` ignores it), also for the one-pass scan of
/// `try_lock_exclusive`: between `unlock_shared_recorded`'s release of the
/// underlying read and its clear of the slot (emulated here: the reader
/// preempted there) a try-write must not fail (after a heavy fence) on the
/// stale record.
#[test]
fn a_try_write_ignores_a_released_slow_read_record() {
    let raw = Raw::with_table(&XEN);
    let w = raw.lock_exclusive();
    // SAFETY: from `lock_exclusive` above.
    let r = unsafe { raw.downgrade(w) };
    let slot = r.slot.expect("recorded in the thread's free slot");
    assert!(!core::ptr::eq(slot, listed_marker()));
    let word = slot.word().load(O::Relaxed);
    assert_ne!(word & UNDERLYING, 0, "a slow read recorded in the slot");
    assert_ne!(
        raw.state.load(O::Relaxed) & FAST,
        0,
        "Xen: the bias is back"
    );
    // `unlock_shared_recorded`'s first half: the underlying read goes...
    raw.unlock_underlying(false);
    // ... and a try-write comes before the slot's clear.
    let got = raw.try_lock_exclusive();
    let ok = got.is_some();
    if let Some(w) = got {
        // SAFETY: from `try_lock_exclusive` above.
        unsafe { raw.unlock_exclusive(w) };
    }
    // The second half, and the hold's record.
    slot.word().store(0, O::Relaxed);
    r.held.release(raw.addr());
    assert!(ok, "try_lock_exclusive failed on a stale UNDERLYING record");
    assert!(raw.try_lock_exclusive().is_some_and(|w| {
        // SAFETY: from `try_lock_exclusive`.
        unsafe { raw.unlock_exclusive(w) };
        true
    }));
}

/// A symmetric write that finds no class total (exits elsewhere kept
/// moving counts) still records its gap since the previous write: the next
/// write's single long gap is weighed against it, as the rare-writes rule
/// wants (two long gaps in a row), not judged alone. (It was judged alone,
/// and one long gap brought the bias back: a test of the rule failed once
/// in CI while another test's 100 threads exited.)
#[test]
#[cfg_attr(miri, ignore = "a policy test on a manual clock")]
fn a_write_without_a_class_total_still_records_its_gap() {
    const CLOCK: usize = 9;
    static FORCED: ReaderTable = ReaderTable::new();
    FORCED.force_symmetric();
    let raw = RawPerCpuRwLock::<TestPlatform<5_000, 0, CLOCK>>::with_table(&FORCED);
    let write = || write_once(&raw) & (FAST | SYM);
    let read = || reads_keeping_symmetric(&raw);
    // A biased revocation goes symmetric (forced).
    read();
    write();
    read();
    advance(CLOCK, 10_000);
    assert_eq!(raw.state.load(O::Relaxed) & (FAST | SYM), FAST | SYM);
    // Dense writes while an exit keeps moving counts: no class total.
    FORCED.simulate_exit_moving_counts(true);
    for _ in 0..3 {
        read();
        advance(CLOCK, 10_000);
        assert_eq!(write(), FAST | SYM, "dense writes without a total");
    }
    FORCED.simulate_exit_moving_counts(false);
    // One long gap (under `pc_rare_ns`) after them: still symmetric.
    read();
    advance(CLOCK, 200_000);
    const { assert!(200_000 < TUNING.pc_rare_ns) };
    assert_eq!(write(), FAST | SYM, "one long gap judged alone");
}

/// The symmetric mode probes the biased one `pc_probe_fences` fence costs
/// after the last heavy fence, but never waits past `pc_probe_wait_max_ns`:
/// a fence stretched to seconds (a suspended VM, a stopped process) would
/// otherwise hold the probes off for minutes.
#[test]
fn a_stretched_heavy_fence_holds_the_probe_off_for_a_bounded_time() {
    let table = ReaderTable::new();
    let at = 1_000;
    // A 10 us fence: the probe waits 256 x 10 us.
    table.dear_fences(10_000, u64::MAX, at);
    let wait = 10_000 * TUNING.pc_probe_fences;
    assert!(wait < TUNING.pc_probe_wait_max_ns);
    assert!(!table.probe_due(at + wait - 1));
    assert!(table.probe_due(at + wait));
    // A 3 s fence: 256 x 3 s would be 13 minutes; the probe comes after
    // pc_probe_wait_max_ns.
    table.dear_fences(3_000_000_000, u64::MAX, at);
    assert!(!table.probe_due(at + TUNING.pc_probe_wait_max_ns - 1));
    assert!(table.probe_due(at + TUNING.pc_probe_wait_max_ns));
}

/// A timed upgrade that gives up at the revocation (a fast reader stays
/// inside) leaves the underlying lock as it found it, the last claim's
/// turn included, as the underlying lock's own timed upgrade does when it
/// gives up while draining (`qrwlock`, "Timed acquisitions"): still the
/// upgradable read, nothing else.
#[test]
#[cfg_attr(miri, ignore = "a timed wait for a reader")]
fn a_timed_upgrade_that_gives_up_at_the_revocation_leaves_the_turn() {
    use lock_api::{RawRwLockUpgrade, RawRwLockUpgradeTimed};
    use std::sync::mpsc::channel;
    use std::time::Duration;
    // Xen's policy: a fast read stays on its slot.
    static TABLE: ReaderTable = ReaderTable::with_inhibition(0);
    let raw = Arc::new(RawPerCpuRwLock::<StdP>::with_table(&TABLE));
    let (release, may_release) = channel::<()>();
    let (inside, is_inside) = channel::<bool>();
    let holder = {
        let raw = raw.clone();
        thread::spawn(move || {
            let t = raw.lock_shared();
            inside
                .send(RawPerCpuRwLock::<StdP>::took_fast_path(&t))
                .unwrap();
            may_release.recv().unwrap();
            // SAFETY: from `lock_shared` above.
            unsafe { raw.unlock_shared(t) };
        })
    };
    assert!(is_inside.recv().unwrap(), "a fast read");
    // The turn the last claim of the underlying lock left.
    raw.inner.set_turn_for_test(2);
    let u = raw.lock_upgradable();
    // SAFETY: `u` is our upgradable read.
    let u = match unsafe { raw.try_upgrade_for(u, Duration::from_millis(5)) } {
        Ok(_) => panic!("a fast reader is inside: the timed upgrade must give up"),
        Err(u) => u,
    };
    assert_eq!(
        raw.inner.turn_for_test(),
        2,
        "the upgrade that gave up changed the turn: {:?}",
        raw.inner
    );
    // SAFETY: `u` is still our upgradable read.
    unsafe { raw.unlock_upgradable(u) };
    assert_eq!(raw.inner.turn_for_test(), 2);
    release.send(()).unwrap();
    holder.join().unwrap();
    assert!(!raw.is_locked());
}

std::thread_local! {
    /// `HookPlatform`: run once at the calling thread's next `relax`.
    static AT_RELAX: core::cell::RefCell<Option<Box<dyn FnOnce()>>> =
        const { core::cell::RefCell::new(None) };
    /// `HookPlatform`: run once at the calling thread's next heavy fence.
    static AT_HEAVY_FENCE: core::cell::RefCell<Option<Box<dyn FnOnce()>>> =
        const { core::cell::RefCell::new(None) };
}

/// The std platform (as `TestPlatform`), except that a test can run code
/// on a thread at its next `relax` or heavy fence (`AT_RELAX`,
/// `AT_HEAVY_FENCE`): other threads then act at that exact point of the
/// thread's lock operation.
#[derive(Debug, Clone, Copy, Default)]
struct HookPlatform;

// SAFETY: the std platform's (through `TestPlatform`); the hooks only run
// code before a relax or a heavy fence, which adds delay.
unsafe impl Platform for HookPlatform {
    fn relax() {
        if let Some(f) = AT_RELAX.with(|h| h.borrow_mut().take()) {
            f();
        }
        TestPlatform::<0>::relax()
    }
    fn yield_now() {
        TestPlatform::<0>::yield_now()
    }
    fn now_ns() -> u64 {
        TestPlatform::<0>::now_ns()
    }
    fn wait(word: &crate::sync::atomic::AtomicU32, expected: u32) {
        TestPlatform::<0>::wait(word, expected)
    }
    fn wake_one(word: &crate::sync::atomic::AtomicU32) {
        TestPlatform::<0>::wake_one(word)
    }
    fn wake_all(word: &crate::sync::atomic::AtomicU32) {
        TestPlatform::<0>::wake_all(word)
    }
    fn light_fence() {
        TestPlatform::<0>::light_fence()
    }
    fn heavy_fence() {
        if let Some(f) = AT_HEAVY_FENCE.with(|h| h.borrow_mut().take()) {
            f();
        }
        TestPlatform::<0>::heavy_fence()
    }
    fn queue_node() -> Option<crate::qnode::NodeIndex> {
        TestPlatform::<0>::queue_node()
    }
    fn node(index: crate::qnode::NodeIndex) -> &'static crate::qnode::QNode {
        TestPlatform::<0>::node(index)
    }
    fn cpu_id() -> usize {
        TestPlatform::<0>::cpu_id()
    }
    fn cpu_count() -> usize {
        TestPlatform::<0>::cpu_count()
    }
    fn reader_slot() -> Option<usize> {
        TestPlatform::<0>::reader_slot()
    }
    fn reader_slot_assigned() -> Option<usize> {
        TestPlatform::<0>::reader_slot_assigned()
    }
    fn with_local<R>(f: impl FnOnce(&crate::platform::LocalState) -> R) -> Option<R> {
        TestPlatform::<0>::with_local(f)
    }
    fn sleep_ns(ns: u64) {
        TestPlatform::<0>::sleep_ns(ns)
    }
    fn reader_slot_bound() -> usize {
        TestPlatform::<0>::reader_slot_bound()
    }
    fn reader_slots_in_use(f: impl FnMut(usize)) {
        TestPlatform::<0>::reader_slots_in_use(f)
    }
}

/// A `try_upgrade` that makes the underlying lock exclusive only to find
/// the bias back (a slow reader re-enabled it once the try's window ran
/// out, the try preempted that long, and a fast reader came in) fails
/// leaving no plain reader waiting, as every failed try does: a reader
/// that steps aside meanwhile must not end up queued on the queue lock
/// the upgradable read keeps. (A second revocation with the lock
/// exclusive, as there was, sent such a reader to that queue, where it
/// stayed until the upgradable read ended.) `HookPlatform` stops the try
/// at its first spin for the slow readers and at a heavy fence after it.
#[test]
#[cfg_attr(miri, ignore = "threads that wait for each other, timed waits")]
fn a_try_upgrade_that_finds_the_bias_back_leaves_no_reader_waiting() {
    use lock_api::RawRwLockUpgrade;
    use std::sync::Mutex;
    use std::sync::mpsc::{Receiver, Sender, channel};
    use std::time::{Duration, Instant};
    type HookRaw = RawPerCpuRwLock<HookPlatform>;
    /// A thread that takes a read of a lock when told (`go`), says whether
    /// it is a fast one (`inside`), and releases it when told again (then
    /// says `false`).
    struct Reader {
        go: Mutex<Sender<()>>,
        inside: Mutex<Receiver<bool>>,
    }
    impl Reader {
        /// `busy_slot`: a lock of the same table read first, so that the
        /// thread's slot is busy and its read of `lock` a slow one.
        fn spawn(
            lock: &Arc<HookRaw>,
            busy_slot: Option<&Arc<HookRaw>>,
        ) -> (Arc<Self>, thread::JoinHandle<()>) {
            let (go, went) = channel::<()>();
            let (inside, is_inside) = channel::<bool>();
            let (lock, busy_slot) = (lock.clone(), busy_slot.cloned());
            let t = thread::spawn(move || {
                went.recv().unwrap();
                let outer = busy_slot.as_ref().map(|o| o.lock_shared());
                let t = lock.lock_shared();
                inside.send(HookRaw::took_fast_path(&t)).unwrap();
                went.recv().unwrap();
                // SAFETY: from `lock_shared` above, on this thread.
                unsafe { lock.unlock_shared(t) };
                if let (Some(o), Some(t)) = (busy_slot, outer) {
                    // SAFETY: as above.
                    unsafe { o.unlock_shared(t) };
                }
                inside.send(false).unwrap();
            });
            let r = Self {
                go: Mutex::new(go),
                inside: Mutex::new(is_inside),
            };
            (Arc::new(r), t)
        }
        fn go(&self) {
            self.go.lock().unwrap().send(()).unwrap();
        }
        fn inside(&self) -> bool {
            self.inside.lock().unwrap().recv().unwrap()
        }
    }
    static TABLE: ReaderTable = ReaderTable::with_inhibition(0);
    let raw = Arc::new(HookRaw::with_table(&TABLE));
    let other = Arc::new(HookRaw::with_table(&TABLE));
    assert_eq!(raw.state.load(O::Relaxed) & (FAST | SYM), FAST, "biased");
    // A slow reader inside: the try's underlying upgrade waits for it.
    let (slow, slow_t) = Reader::spawn(&raw, Some(&other));
    slow.go();
    assert!(!slow.inside(), "a slow read");
    let (fast, fast_t) = Reader::spawn(&raw, None);
    let (late, late_t) = Reader::spawn(&raw, None);
    let late_called = Arc::new(AtomicBool::new(false));
    let u = raw.lock_upgradable();
    {
        let (raw, slow, fast) = (raw.clone(), slow.clone(), fast.clone());
        let (late, late_called) = (late.clone(), late_called.clone());
        AT_RELAX.with(|h| {
            *h.borrow_mut() = Some(Box::new(move || {
                // The try spins for the slow reader. Its window ran out
                // meanwhile (preempted): a slow read brings the bias back,
                // as `reenable` does (we hold the underlying read too),
                // and a fast reader comes in; then the slow reader leaves.
                let s = raw.state.load(O::Relaxed);
                assert_eq!(s & FAST, 0, "the try revoked first");
                raw.reenable(s, HookPlatform::now_ns());
                assert_ne!(raw.state.load(O::Relaxed) & FAST, 0);
                fast.go();
                assert!(fast.inside(), "a fast read");
                slow.go();
                assert!(!slow.inside());
                // A reader that comes during a heavy fence of the try from
                // here on (it finds the bias off) is queued, or in, before
                // the fence ends.
                AT_HEAVY_FENCE.with(|h| {
                    *h.borrow_mut() = Some(Box::new(move || {
                        late_called.store(true, O::SeqCst);
                        late.go();
                        let start = Instant::now();
                        while !raw.inner.queued_behind_waiter()
                            && start.elapsed() < Duration::from_millis(200)
                        {
                            thread::yield_now();
                        }
                    }));
                });
            }));
        });
    }
    // SAFETY: `u` is our upgradable read.
    let u = match unsafe { raw.try_upgrade(u) } {
        Ok(_) => panic!("a fast reader is inside: the try must fail"),
        Err(u) => u,
    };
    AT_RELAX.with(|h| h.borrow_mut().take());
    AT_HEAVY_FENCE.with(|h| h.borrow_mut().take());
    // The late reader comes now if no fence of the try called it.
    if !late_called.load(O::SeqCst) {
        late.go();
    }
    // Still holding the upgradable read: the late reader gets in.
    let got_in = late
        .inside
        .lock()
        .unwrap()
        .recv_timeout(Duration::from_millis(500))
        .is_ok();
    // SAFETY: `u` is our upgradable read.
    unsafe { raw.unlock_upgradable(u) };
    if !got_in {
        let _ = late.inside();
    }
    late.go();
    assert!(!late.inside());
    fast.go();
    assert!(!fast.inside());
    for t in [slow_t, fast_t, late_t] {
        t.join().unwrap();
    }
    assert!(
        got_in,
        "a plain reader waited behind the upgradable read after a failed try \
         (it came during a fence of the try: {})",
        late_called.load(O::SeqCst)
    );
    assert!(!raw.is_locked());
}

/// A platform without a clock (`now_ns` a constant 0, as the `Platform`
/// docs allow: "a TSC read, or 0 if there is no clock"): a BRAVO window
/// cannot end by time, so it must end by a count of slow reads, else the
/// lock stays inhibited for good after two writes with no read between.
#[test]
fn a_window_ends_without_a_clock() {
    const CLOCK: usize = 10;
    static TABLE: ReaderTable = ReaderTable::new();
    MANUAL_CLOCKS[CLOCK - 1].store(0, O::Relaxed);
    let raw = RawPerCpuRwLock::<TestPlatform<0, 0, CLOCK>>::with_table(&TABLE);
    race_reads(&raw, 1);
    write_once(&raw);
    write_once(&raw);
    assert_eq!(
        raw.state.load(O::Relaxed) & FAST,
        0,
        "two writes back to back inhibit"
    );
    race_reads(&raw, 4 * TUNING.pc_clock_every as usize);
    assert_ne!(
        raw.state.load(O::Relaxed) & FAST,
        0,
        "the bias never came back without a clock"
    );
}

/// Two locks of one class, both symmetric, writing in turn every 10 µs,
/// whose reads go slower inhibited: the race measures the first window
/// (the other lock's write 10 µs into it joins it), the symmetric mode
/// wins, and the locks stay symmetric for `EXPLORE_NS` (16 ms). Before,
/// the other lock's write ended the window unmeasured (the race went on
/// with no window's rate, and another probe window followed a phase
/// later).
#[test]
#[cfg_attr(miri, ignore = "thousands of reads on a manual clock")]
fn two_locks_of_a_class_measure_their_windows() {
    const CLOCK: usize = 11;
    static TABLE: ReaderTable = ReaderTable::new();
    let a = raced::<CLOCK>(&TABLE);
    TABLE.force_symmetric();
    let b = RawPerCpuRwLock::<TestPlatform<60_000, 0, CLOCK>>::with_table(&TABLE);
    race_reads(&b, 16);
    write_once(&b);
    TABLE.unforce_symmetric();
    let mut windows = Vec::new();
    for round in 0..600 {
        for raw in [&a, &b] {
            let inhibited = raw.state.load(O::Relaxed) & FAST == 0;
            race_reads(raw, if inhibited { 4 } else { 16 });
            advance(CLOCK, 10_000);
            let was_on = raw.state.load(O::Relaxed) & FAST != 0;
            if write_once(raw) & FAST == 0 && was_on {
                windows.push(round);
            }
        }
    }
    assert_ne!(TABLE.race().inhibited_per_ms(), 0, "no window measured");
    assert!(
        windows.iter().all(|&r| r == windows[0]),
        "one window (both locks in it), then the symmetric mode won: {windows:?}"
    );
}

/// The stamp is 16 bits of 64 ns (one period: 2^22 ns, 4.19 ms) and
/// `since_stamp` is exact only within half a period. A biased lock whose
/// bias has been on for a whole period and a little (a sparse write, 4.2
/// ms after the bias came back) reads `on_for` as a few hundred ns: the
/// keep rule, which keeps the bias after a 1 ms or a 3 ms gap, inhibits it
/// after a 4.2 ms one; the class's latest stamp, exact, tells the gap
/// wrapped.
#[test]
fn a_sparse_write_one_stamp_period_after_the_bias_keeps_it() {
    const CLOCK: usize = 12;
    const PERIOD_NS: u64 = 1 << (16 + UNIT_SHIFT);
    static TABLE: ReaderTable = ReaderTable::new();
    // Heavy fences of 1.5 µs, as in `sparse_writes_keep_the_bias`.
    let raw = RawPerCpuRwLock::<TestPlatform<1_500, 0, CLOCK>>::with_table(&TABLE);
    let write = || write_once(&raw);
    write();
    assert_eq!(write() & FAST, 0, "back to back: inhibited");
    let mut kept = std::vec::Vec::new();
    for gap in [1_000_000, 3_000_000, PERIOD_NS + 1_000] {
        let mut reads = 0;
        while raw.state.load(O::Relaxed) & FAST == 0 {
            let t = raw.lock_shared();
            // SAFETY: from `lock_shared` above.
            unsafe { raw.unlock_shared(t) };
            advance(CLOCK, 1_000);
            reads += 1;
            assert!(reads < 100_000, "the bias never came back");
        }
        advance(CLOCK, gap);
        let next = write();
        kept.push((gap, next & (FAST | SYM) == FAST));
        if next & FAST != 0 {
            // Inhibit again (back to back), so the next round starts from
            // a bias that comes back at a known time.
            write();
        }
    }
    assert!(
        kept.iter().all(|&(_, k)| k),
        "sparse writes (gap ns, bias kept): {kept:?}"
    );
}

/// An inhibition window ends at the first slow read that looks at
/// the clock within half a stamp period (2.1 ms) after its end; a look in
/// the other half finds the window's end "in the future" again. A reader
/// whose looks at the clock come one stamp period (4.19 ms) apart and
/// first fall in that half keeps the lock inhibited for as long as it
/// reads so.
#[test]
fn a_window_ends_whenever_the_clock_is_read_after_it() {
    const CLOCK: usize = 13;
    const PERIOD_NS: u64 = 1 << (16 + UNIT_SHIFT);
    // A table each (the class's figures would carry over).
    static TABLES: [ReaderTable; 2] = [ReaderTable::new(), ReaderTable::new()];
    // Looks at the clock 3 ms and 3.7 ms after the window's end (modulo a
    // period): the end looks 1.2 ms and 0.5 ms ahead.
    for (after, table) in [3_000_000, 3_700_000].into_iter().zip(&TABLES) {
        let raw = RawPerCpuRwLock::<TestPlatform<1_500, 0, CLOCK>>::with_table(table);
        write_once(&raw);
        assert_eq!(write_once(&raw) & FAST, 0, "back to back: inhibited");
        // The window (a few µs) is long over then. A fresh thread, so
        // that its count of counted reads starts at 0: its reads number
        // `pc_clock_every`, `2 * pc_clock_every`, ... read the clock, the
        // first `after` the window's end (modulo a period), each next one
        // a period after the one before.
        advance(CLOCK, after);
        let every = u64::from(TUNING.pc_clock_every);
        thread::scope(|s| {
            s.spawn(|| {
                for _ in 0..4 * every {
                    let t = raw.lock_shared();
                    // SAFETY: from `lock_shared` above.
                    unsafe { raw.unlock_shared(t) };
                    advance(CLOCK, PERIOD_NS / every);
                }
            });
        });
        assert_ne!(
            raw.state.load(O::Relaxed) & FAST,
            0,
            "{after} ns after the window's end, and four slow reads looked at the clock since"
        );
    }
}

/// The symmetric mode's gap since the previous write
/// has the same stamp aliasing. Two symmetric writes 200 µs apart in a row
/// bring the bias back (`symmetric_mode_returns_to_the_bias_when_writes_thin_out`);
/// two 4.2 ms apart (a stamp period and 10 µs) read as 10 µs gaps and keep
/// the lock symmetric: every read pays a full fence for writes this rare.
#[test]
fn two_symmetric_writes_a_stamp_period_apart_bring_the_bias_back() {
    const CLOCK: usize = 14;
    const PERIOD_NS: u64 = 1 << (16 + UNIT_SHIFT);
    static FORCED: ReaderTable = ReaderTable::new();
    FORCED.force_symmetric();
    let raw = RawPerCpuRwLock::<TestPlatform<5_000, 0, CLOCK>>::with_table(&FORCED);
    let write = || write_once(&raw);
    let mode = |s: u64| s & (FAST | SYM);
    let read = || reads_keeping_symmetric(&raw);
    // A biased revocation goes symmetric (forced), then dense writes.
    read();
    write();
    for _ in 0..3 {
        read();
        advance(CLOCK, 10_000);
        write();
    }
    let mut modes = std::vec::Vec::new();
    for _ in 0..2 {
        read();
        advance(CLOCK, PERIOD_NS + 10_000);
        modes.push(mode(write()));
    }
    assert_eq!(
        modes.last(),
        Some(&FAST),
        "two 4.2 ms gaps in a row: biased (modes {modes:x?})"
    );
}
