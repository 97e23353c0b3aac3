//! `RawPerCpuRwLock`: a reader-writer lock whose read fast path writes no
//! cache line that any other reader writes.
//!
//! After Xen's per-CPU rwlocks (seed 000) and BRAVO (Dice & Kogan, 2019).
//!
//! # The algorithm
//! Each lock is a [`RawQRwLock`] (the *underlying* lock: fair, queued) plus a
//! state word holding a unique lock id and a `FAST` bit (the reader bias;
//! Xen's barrier is `FAST` clear). Locks of one class share a
//! [`ReaderTable`]; every reader context (thread) owns one slot in it.
//!
//! - **Read, fast**: if `FAST` is set and the thread's slot is free, store
//!   the lock's id in the slot, fence (the *light* side of an asymmetric
//!   fence: a compiler fence when membarrier is available), and re-check
//!   `FAST`. Still set: the read lock is held. Cleared meanwhile: a writer
//!   is revoking; clear the slot and take the slow path. Unlock: store 0 to
//!   the slot, then wake a writer if one sleeps on that slot.
//! - **Read, slow** (bias off, the slot is busy with another lock, or the
//!   thread has no slot): take the underlying read lock and hold it for the
//!   read section. Readers that arrive during a write thus queue fairly
//!   behind it. If the slot is free the reader also records the lock in it
//!   (with the `UNDERLYING` bit), which makes recursive reads safe.
//! - **Write**: take the underlying write lock (excluding other writers and
//!   slow readers). If `FAST` is set, *revoke* it: clear `FAST`, run the
//!   *heavy* fence (membarrier), then for every slot index handed out so far
//!   wait while that slot names this lock (spin, then park on the slot).
//!   Unlock: release the underlying lock.
//! - **Re-enabling the bias** (BRAVO, the default): after a revocation the
//!   fast path stays off for `n` times the revocation's measured duration
//!   (`n` = [`DEFAULT_INHIBIT`], or `ReaderTable::with_inhibition(n)`), so
//!   revocations take at most about 1/(n+1) of a write-heavy phase, which
//!   otherwise runs at the underlying lock's speed. The window scales with
//!   the real cost: ~155 ns when no other thread of ours runs, ~16 µs when
//!   the membarrier must interrupt another busy CPU. A slow reader, holding
//!   the underlying read lock, sets `FAST` again once the window is over;
//!   it looks at the clock only on one slow read in `CLOCK_EVERY` (`pc_clock_every` in `wait::tuning`) of
//!   its thread (a counter on its own slot line), since a clock read costs
//!   twice the underlying read lock. `with_inhibition(0)` gives Xen's
//!   policy: the writer sets `FAST` again at unlock, so every write that
//!   follows reads pays a revocation.
//!
//! # Why per-thread slots, not per-CPU
//! In user space a thread can be preempted between "which CPU am I on" and
//! the slot store, and another thread then runs on that CPU: a per-CPU slot
//! must be claimed with a compare-and-swap (plus a `getcpu`), and the guard
//! must remember the slot because the reader may migrate before unlock. A
//! per-thread slot is written only by its thread, so the fast path is a
//! plain store, a compiler fence and two loads, and migration is harmless.
//! Measured on this machine (`cargo bench --bench percpu_rwlock`, section
//! "primitives", 1 thread): a whole per-thread read lock+unlock costs 2.7 ns;
//! `sched_getcpu` alone 2.9 ns and a `cmpxchg` claim + release store of a
//! CPU-local slot 6.5 ns, so a per-CPU read would cost at least 9.4 ns
//! against parking_lot's 17 ns — short of the 2x target the per-thread path
//! beats 6-fold; see the module `reader_table` for the memory cost. A kernel
//! platform whose read sections run with preemption off can return the CPU
//! id from [`Platform::reader_slot`]: the algorithm is the same.
//!
//! # Layout (16 bytes + the shared table)
//! ```text
//! inner: RawQRwLock<P>   8 bytes: count word + queue lock
//! state: AtomicU64       bit 63..16 id | 15..8 until | 7..1 table | 0 FAST
//! ```
//! - `id` (48 bits): unique per lock, assigned on first read (0 = none yet;
//!   `INIT` must be a constant). Slots name locks by id, never by address, so
//!   a lock dropped while a forgotten guard still names it in a slot cannot
//!   make a new lock at that address wait for the ghost. 2^48 ids do not wrap
//!   in practice.
//! - `until` (8 bits): end of the inhibition window, in units of 2^11 ns,
//!   compared with wrapping arithmetic (windows are capped at 205 µs; a
//!   lock idle for longer than 262 µs may see a stale deadline as future
//!   and stay inhibited for at most one more window).
//! - `table`: registry index of the lock's [`ReaderTable`] (0 = default).
//! - `FAST`: the reader bias. Set only by someone holding the underlying
//!   lock (a slow reader, or a writer at unlock in Xen mode); cleared only
//!   by a writer holding it exclusively.
//!
//! A slot word is `id | UNDERLYING | depth` (see `reader_table`).
//!
//! # Invariants
//! 1. A thread read-holds the lock iff its slot names the lock with depth
//!    ≥ 1 and it saw `FAST` set after storing it (fast), or it holds the
//!    underlying read lock (slow; `UNDERLYING` marks such a slot).
//! 2. Only a slot's owner thread writes it. Read guards are `!Send`, so the
//!    unlock happens on that thread; the thread keeps its index until it
//!    exits with its slot free in every table (else the index is retired).
//! 3. While a writer holds the lock, no slot names it with `UNDERLYING`
//!    clear, and `FAST` is clear or the writer is the one who will clear it
//!    before returning from `lock_exclusive`.
//!
//! # Why it is correct
//! A fast reader does `store slot; fence; load state`, a revoking writer
//! `RMW state (clear FAST); heavy fence; load slot` — the store-buffering
//! pattern: with the fences pairing as `fence(SeqCst)` would (membarrier's
//! contract, see `platform/std_fence.rs`), at least one sees the other. If
//! the reader sees `FAST` clear, it backs out. Otherwise the writer's scan,
//! which reads `Platform::reader_slot_bound` after its fence, sees the slot
//! (the reader raised the bound before its slot store) and waits for it.
//! A writer that finds `FAST` clear skips the scan: `FAST` was cleared by a
//! previous writer that waited out every fast reader, and since then only
//! holders of the underlying lock could have set it, which the writer's
//! Acquire of the underlying lock would have shown it.
//!
//! # Memory orderings
//! - Fast read: the slot store is Release (a plain `mov` on x86) so that a
//!   writer's Acquire load of any later value of the slot synchronizes with
//!   the end of the read section; the state re-load is Acquire and pairs with
//!   the Release RMW that last set `FAST` (every write of the state word is
//!   an RMW, so release sequences carry on): the reader happens after the
//!   last writer.
//! - Fast unlock: Release store of 0 (pairs with the writer's Acquire scan),
//!   light fence, Relaxed load of the slot's waiter count (pairs with the
//!   writer's heavy fence before it parks: either the reader sees the waiter
//!   and wakes it, or the writer's re-check sees 0).
//! - Slow paths and writers inherit Acquire/Release from the underlying lock.
//!
//! # Recursive reads
//! Supported on one thread in any nesting and unlock order while the
//! thread's slot is free or already names this lock: the slot counts the
//! depth. A thread that holds a read of *another* lock of the same table and
//! then reads this lock twice takes both through the underlying lock, which
//! deadlocks if a writer queues in between (as parking_lot's `read`); debug
//! builds with `std` detect that recursion and panic.
//!
//! # Writer cost
//! Without a revocation (the bias already off: inside an inhibition window,
//! or after a failed revocation): the underlying lock's, one CAS and one RMW
//! (~12 ns). A revoking write (the first after a window ends and reads
//! re-enabled the bias; every write that follows a read in Xen mode) adds a membarrier and one load per slot index ever
//! handed out (at most 64 per table; grows with the peak thread count, not
//! the CPU count). The membarrier interrupts every CPU currently running one
//! of our threads, so it grows with the number of CPUs busy in the process:
//! measured ~155 ns per write with no other thread running, ~16 us with one
//! busy thread on the other core of this VM (IPIs are dear under
//! virtualization). Where membarrier is unavailable both fence sides are
//! `fence(SeqCst)`: writes get cheap, reads pay an `mfence`.
//!

use core::marker::PhantomData;

use lock_api::{GuardSend, RawRwLock, RawRwLockDowngrade};

use crate::platform::{DefaultPlatform, Platform};
use crate::qrwlock::RawQRwLock;
#[cfg(doc)]
use crate::reader_table::DEFAULT_INHIBIT;
use crate::reader_table::{ReaderTable, Slot, table_at};
use crate::sync::atomic::{AtomicU64, Ordering};
use crate::wait::parking::{park, prepare as park_prepare, unpark_all};
use crate::wait::{Backoff, TUNING};

/// The reader bias: readers may use their slots.
const FAST: u64 = 1;
/// Shift of the 7-bit table index in the state word.
const TABLE_SHIFT: u32 = 1;
/// The table index bits.
const TABLE_MASK: u64 = 0x7f << TABLE_SHIFT;
/// Shift of the 8-bit inhibition deadline in the state word.
const UNTIL_SHIFT: u32 = 8;
/// The inhibition deadline bits.
const UNTIL_MASK: u64 = 0xff << UNTIL_SHIFT;
/// Shift of the lock id, in both the state word and slot words.
const ID_SHIFT: u32 = 16;
/// The lock id bits.
const ID_MASK: u64 = !((1 << ID_SHIFT) - 1);
/// One more recursive read in a slot word.
const ONE_DEPTH: u64 = 1;
/// The read depth bits of a slot word.
const DEPTH_MASK: u64 = (1 << 15) - 1;
/// The slot's owner holds the underlying read lock (a slow read).
const UNDERLYING: u64 = 1 << 15;

/// `now_ns >> UNIT_SHIFT` is the clock of the inhibition window (2.05 µs).
const UNIT_SHIFT: u32 = 11;
/// Longest inhibition window, in units (205 µs; keeps the 8-bit wrapping
/// comparison exact).
const MAX_WINDOW_UNITS: u64 = 100;
#[cfg(not(loom))]
static NEXT_ID: AtomicU64 = AtomicU64::new(1);
#[cfg(loom)]
loom::lazy_static! {
    static ref NEXT_ID: AtomicU64 = AtomicU64::new(1);
}

/// Whether the inhibition deadline in `state` has passed at `now_ns`.
#[inline]
fn window_expired(state: u64, now_ns: u64) -> bool {
    let until = ((state & UNTIL_MASK) >> UNTIL_SHIFT) as u8;
    let now = (now_ns >> UNIT_SHIFT) as u8;
    now.wrapping_sub(until) as i8 >= 0
}

/// A reader-writer lock whose read fast path writes only the reading
/// thread's own slot; see the module documentation.
///
/// 16 bytes, plus a [`ReaderTable`] shared by many locks.
#[repr(C)]
pub struct RawPerCpuRwLock<P: Platform = DefaultPlatform> {
    /// Writers and slow readers.
    inner: RawQRwLock<P>,
    /// `id | until | table | FAST`; see the module documentation.
    state: AtomicU64,
    _platform: PhantomData<fn() -> P>,
}

/// A per-CPU reader-writer lock protecting a `T`, on the default
/// [`ReaderTable`]. Use [`PerCpuRwLockExt::with_table`] for another table.
pub type PerCpuRwLock<T> = lock_api::RwLock<RawPerCpuRwLock, T>;
/// A shared guard of a [`PerCpuRwLock`] (not `Send`: it names the reading
/// thread's slot).
pub type PerCpuRwLockReadGuard<'a, T> = lock_api::RwLockReadGuard<'a, RawPerCpuRwLock, T>;
/// The exclusive guard of a [`PerCpuRwLock`].
pub type PerCpuRwLockWriteGuard<'a, T> = lock_api::RwLockWriteGuard<'a, RawPerCpuRwLock, T>;

/// Constructs a [`PerCpuRwLock`] bound to a user-declared [`ReaderTable`].
pub trait PerCpuRwLockExt<T> {
    /// A lock holding `value` whose readers use slots of `table`.
    fn with_table(table: &'static ReaderTable, value: T) -> Self;
}

impl<T, P: Platform> PerCpuRwLockExt<T> for lock_api::RwLock<RawPerCpuRwLock<P>, T> {
    fn with_table(table: &'static ReaderTable, value: T) -> Self {
        lock_api::RwLock::from_raw(RawPerCpuRwLock::with_table(table), value)
    }
}

/// Guard state of a shared acquisition: the slot the read used, or none
/// (it holds the underlying read lock). Not `Send`: unlocking writes the slot,
/// which only its owner thread may do.
pub struct PerCpuReadToken {
    slot: Option<&'static Slot>,
    _not_send: PhantomData<*const ()>,
}

impl PerCpuReadToken {
    #[inline]
    fn slot(slot: &'static Slot) -> Self {
        Self {
            slot: Some(slot),
            _not_send: PhantomData,
        }
    }
    #[inline]
    fn underlying() -> Self {
        Self {
            slot: None,
            _not_send: PhantomData,
        }
    }
}

/// Guard state of an exclusive acquisition: whether unlock re-enables the
/// reader bias (tables without inhibition).
pub struct PerCpuWriteToken {
    restore_fast: bool,
}

impl<P: Platform> RawPerCpuRwLock<P> {
    /// An unlocked lock on the default [`ReaderTable`].
    #[cfg(not(loom))]
    pub const fn new() -> Self {
        Self {
            inner: RawQRwLock::new(),
            state: AtomicU64::new(FAST),
            _platform: PhantomData,
        }
    }

    /// An unlocked lock on the default [`ReaderTable`].
    #[cfg(loom)]
    pub fn new() -> Self {
        Self {
            inner: RawQRwLock::new(),
            state: AtomicU64::new(FAST),
            _platform: PhantomData,
        }
    }

    /// An unlocked lock whose readers use slots of `table`. The lock keeps
    /// the table for life.
    ///
    /// # Panics
    /// If more than 127 distinct user tables are used in the process.
    pub fn with_table(table: &'static ReaderTable) -> Self {
        let index = u64::from(table.register());
        let id = next_id();
        Self {
            inner: RawQRwLock::new(),
            state: AtomicU64::new(id << ID_SHIFT | index << TABLE_SHIFT | FAST),
            _platform: PhantomData,
        }
    }

    /// The table this lock's readers use.
    pub fn table(&self) -> &'static ReaderTable {
        table_of(self.state.load(Ordering::Relaxed))
    }

    /// Fast path of a read; `None` means take the slow path.
    #[inline]
    fn try_lock_shared_fast(&self) -> Option<PerCpuReadToken> {
        let s = self.state.load(Ordering::Relaxed);
        if s & ID_MASK == 0 {
            return None;
        }
        let slot = table_of(s).slot(P::reader_slot()?)?;
        let cur = slot.word().load(Ordering::Relaxed);
        if cur == 0 {
            if s & FAST == 0 {
                return None;
            }
            // Release: a writer's Acquire load of any later slot value
            // synchronizes with our section's end (module docs, orderings).
            slot.word()
                .store((s & ID_MASK) | ONE_DEPTH, Ordering::Release);
            // Pairs with the heavy fence of a revoking writer.
            P::light_fence();
            // Acquire pairs with the Release RMW that last set FAST.
            if self.state.load(Ordering::Acquire) & FAST != 0 {
                return Some(PerCpuReadToken::slot(slot));
            }
            // A writer is revoking: step aside and queue on the inner lock.
            release_slot::<P>(slot);
            return None;
        }
        if (cur ^ s) & ID_MASK == 0 {
            // Recursive read: we already hold this lock, so no writer can get
            // in until the depth drops to 0; whether FAST is set does not
            // matter (a revoking writer may be waiting for this very slot).
            assert!(
                cur & DEPTH_MASK != DEPTH_MASK,
                "PerCpuRwLock: read depth overflow"
            );
            slot.word().store(cur + ONE_DEPTH, Ordering::Relaxed);
            return Some(PerCpuReadToken::slot(slot));
        }
        None
    }

    #[cold]
    fn lock_shared_slow(&self) -> PerCpuReadToken {
        let s = self.state.load(Ordering::Relaxed);
        if s & ID_MASK == 0 {
            self.assign_id();
            if let Some(token) = self.try_lock_shared_fast() {
                return token;
            }
        }
        debug_recursion::check(self.state.load(Ordering::Relaxed) & ID_MASK);
        let mine = self.my_slot();
        let _ = self.inner.lock_shared();
        self.enter_underlying(mine)
    }

    /// This thread's slot in the lock's table (free or not), if it has one.
    #[inline]
    fn my_slot(&self) -> Option<&'static Slot> {
        let s = self.state.load(Ordering::Relaxed);
        table_of(s).slot(P::reader_slot()?)
    }

    /// Finishes a slow read, with the underlying read lock held: re-enables
    /// the bias once the inhibition window passed (looking at the clock on
    /// one slow read in `CLOCK_EVERY` of this thread), records the read in
    /// the thread's slot `mine` if that is free.
    fn enter_underlying(&self, mine: Option<&'static Slot>) -> PerCpuReadToken {
        if self.state.load(Ordering::Relaxed) & ID_MASK == 0 {
            // A downgraded write of a never-read lock: the slot needs an id.
            self.assign_id();
        }
        let s = self.state.load(Ordering::Relaxed);
        if s & FAST == 0
            && mine.is_none_or(|m| m.count_slow_read(TUNING.pc_clock_every))
            && window_expired(s, P::now_ns())
        {
            // We hold the underlying read lock, so no writer is inside.
            // Release pairs with fast readers' Acquire re-load of the state:
            // they happen after our acquisition, hence after the last writer.
            self.state.fetch_or(FAST, Ordering::Release);
        }
        // Only this thread writes its slot, so the slot is still as free as
        // it was before we queued on the underlying lock.
        match mine.filter(|m| m.word().load(Ordering::Relaxed) == 0) {
            Some(slot) => {
                // Relaxed: while we hold the underlying read lock no writer
                // scans; the clear before our unlock is ordered by it.
                slot.word()
                    .store((s & ID_MASK) | UNDERLYING | ONE_DEPTH, Ordering::Relaxed);
                PerCpuReadToken::slot(slot)
            }
            None => {
                debug_recursion::push(s & ID_MASK);
                PerCpuReadToken::underlying()
            }
        }
    }

    /// Gives the lock a unique id (first read of an `INIT` lock).
    #[cold]
    fn assign_id(&self) {
        let mut s = self.state.load(Ordering::Relaxed);
        let id = next_id();
        while s & ID_MASK == 0 {
            // Relaxed: the id publishes nothing; racing assigners agree on
            // the first one in the word's modification order.
            match self.state.compare_exchange_weak(
                s,
                s | id << ID_SHIFT,
                Ordering::Relaxed,
                Ordering::Relaxed,
            ) {
                Ok(_) => return,
                Err(now) => s = now,
            }
        }
    }

    /// Clears `FAST` and waits until no slot names this lock. Called with the
    /// underlying write lock held and `FAST` set. Returns the state before.
    #[cold]
    fn revoke(&self) -> u64 {
        let start = P::now_ns();
        // Relaxed: the heavy fence below orders it before our scan.
        let old = self.state.fetch_and(!FAST, Ordering::Relaxed);
        // Pairs with fast readers' light fence (store slot; fence; load
        // state): either they see FAST clear or we see their slot.
        P::heavy_fence();
        let id = old & ID_MASK;
        if id != 0 {
            let table = table_of(old);
            for i in 0..P::reader_slot_bound() {
                let Some(slot) = table.slot(i) else { break };
                wait_slot::<P>(slot, id);
            }
        }
        let mult = table_of(old).inhibit();
        if mult != 0 {
            let now = P::now_ns();
            let window = now.saturating_sub(start).saturating_mul(u64::from(mult));
            let window = window.min(MAX_WINDOW_UNITS << UNIT_SHIFT);
            // Rounded up, so that a real window never ends early.
            let until = ((now + window).div_ceil(1 << UNIT_SHIFT)) as u8;
            // Relaxed: a performance hint; we hold the lock exclusively, only
            // the id assignment could race (it cannot: the id is set).
            let _ = self
                .state
                .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |s| {
                    Some((s & !UNTIL_MASK) | u64::from(until) << UNTIL_SHIFT)
                });
        }
        old
    }

    /// One pass over the slots without waiting: true if no slot names this
    /// lock (`try_lock_exclusive`).
    fn no_fast_readers(&self, state: u64) -> bool {
        let id = state & ID_MASK;
        let table = table_of(state);
        (0..P::reader_slot_bound().min(crate::reader_table::SLOTS)).all(|i| {
            // Acquire pairs with the readers' Release slot stores.
            table
                .slot(i)
                .is_none_or(|slot| slot.word().load(Ordering::Acquire) & ID_MASK != id)
        })
    }
}

#[inline]
fn table_of(state: u64) -> &'static ReaderTable {
    table_at(((state & TABLE_MASK) >> TABLE_SHIFT) as usize)
}

fn next_id() -> u64 {
    // Relaxed: only uniqueness matters.
    let id = NEXT_ID.fetch_add(1, Ordering::Relaxed);
    assert!(id < 1 << (64 - ID_SHIFT), "PerCpuRwLock ids exhausted");
    id
}

/// Frees a slot that held a fast read and wakes a writer parked on it.
#[inline]
fn release_slot<P: Platform>(slot: &'static Slot) {
    // Release pairs with the writer's Acquire scan: our reads happen before
    // its writes.
    slot.word().store(0, Ordering::Release);
    // Pairs with the heavy fence a writer runs before parking on the slot.
    P::light_fence();
    if slot.waiters().load(Ordering::Relaxed) != 0 {
        wake_slot::<P>(slot);
    }
}

#[cold]
fn wake_slot<P: Platform>(slot: &'static Slot) {
    unpark_all::<P>(slot.park_addr());
}

/// Waits while `slot` names the lock `id` (spin, then park on the slot).
fn wait_slot<P: Platform>(slot: &Slot, id: u64) {
    let mut backoff = Backoff::new();
    loop {
        // Acquire pairs with the reader's Release slot store.
        if slot.word().load(Ordering::Acquire) & ID_MASK != id {
            return;
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
        if slot.word().load(Ordering::Acquire) & ID_MASK == id {
            park::<P>(ticket);
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
        f.debug_struct("RawPerCpuRwLock")
            .field("id", &(s >> ID_SHIFT))
            .field("table", &((s & TABLE_MASK) >> TABLE_SHIFT))
            .field("fast", &(s & FAST != 0))
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
// underlying lock tolerates moves and drops. Panics (depth overflow, id or
// table exhaustion) happen before anything is acquired.
unsafe impl<P: Platform> RawRwLock for RawPerCpuRwLock<P> {
    #[allow(clippy::declare_interior_mutable_const)]
    #[cfg(not(loom))]
    const INIT: Self = Self::new();
    #[allow(clippy::declare_interior_mutable_const)]
    #[cfg(loom)]
    const INIT: Self = panic!("use RawPerCpuRwLock::new() under loom");

    type SharedGuard = PerCpuReadToken;
    type ExclusiveGuard = PerCpuWriteToken;

    #[inline]
    fn lock_shared(&self) -> PerCpuReadToken {
        match self.try_lock_shared_fast() {
            Some(token) => token,
            None => self.lock_shared_slow(),
        }
    }

    #[inline]
    fn try_lock_shared(&self) -> Option<PerCpuReadToken> {
        if let Some(token) = self.try_lock_shared_fast() {
            return Some(token);
        }
        if self.state.load(Ordering::Relaxed) & ID_MASK == 0 {
            self.assign_id();
            if let Some(token) = self.try_lock_shared_fast() {
                return Some(token);
            }
        }
        let mine = self.my_slot();
        let _ = self.inner.try_lock_shared()?;
        Some(self.enter_underlying(mine))
    }

    #[inline]
    unsafe fn unlock_shared(&self, token: PerCpuReadToken) {
        let Some(slot) = token.slot else {
            debug_recursion::pop(self.state.load(Ordering::Relaxed) & ID_MASK);
            // SAFETY: a token without a slot holds the underlying read lock,
            // whose guard state is the stateless `GuardSend`.
            unsafe { self.inner.unlock_shared(GuardSend::new()) };
            return;
        };
        let cur = slot.word().load(Ordering::Relaxed);
        debug_assert_eq!(
            (cur ^ self.state.load(Ordering::Relaxed)) & ID_MASK,
            0,
            "read token names another lock's slot"
        );
        if cur & DEPTH_MASK > 1 {
            // Relaxed: the outer reads still hold the lock.
            slot.word().store(cur - ONE_DEPTH, Ordering::Relaxed);
        } else if cur & UNDERLYING != 0 {
            // Relaxed: the underlying unlock below is the Release.
            slot.word().store(0, Ordering::Relaxed);
            // SAFETY: `UNDERLYING` marks a slot whose owner (us) holds the
            // underlying read lock; its guard state is `GuardSend`.
            unsafe { self.inner.unlock_shared(GuardSend::new()) };
        } else {
            release_slot::<P>(slot);
        }
    }

    #[inline]
    fn lock_exclusive(&self) -> PerCpuWriteToken {
        let _ = self.inner.lock_exclusive();
        let s = self.state.load(Ordering::Relaxed);
        let mut restore_fast = false;
        if s & FAST != 0 {
            let old = self.revoke();
            restore_fast = table_of(old).inhibit() == 0;
        }
        PerCpuWriteToken { restore_fast }
    }

    #[inline]
    fn try_lock_exclusive(&self) -> Option<PerCpuWriteToken> {
        let _ = self.inner.try_lock_exclusive()?;
        let s = self.state.load(Ordering::Relaxed);
        if s & FAST == 0 {
            return Some(PerCpuWriteToken {
                restore_fast: false,
            });
        }
        // Relaxed: ordered by the heavy fence, as in `revoke`.
        let old = self.state.fetch_and(!FAST, Ordering::Relaxed);
        P::heavy_fence();
        if self.no_fast_readers(old) {
            return Some(PerCpuWriteToken {
                restore_fast: table_of(old).inhibit() == 0,
            });
        }
        // A fast reader is inside: give the bias back and fail. Release: an
        // RMW, keeps the release sequence of the last FAST setter intact.
        self.state.fetch_or(FAST, Ordering::Release);
        // SAFETY: we took the underlying write lock above.
        unsafe { self.inner.unlock_exclusive(GuardSend::new()) };
        None
    }

    #[inline]
    unsafe fn unlock_exclusive(&self, token: PerCpuWriteToken) {
        if token.restore_fast {
            // Release pairs with fast readers' Acquire re-load of the state.
            self.state.fetch_or(FAST, Ordering::Release);
        }
        // SAFETY: the token stands for our underlying write lock, whose guard
        // state is `GuardSend`.
        unsafe { self.inner.unlock_exclusive(GuardSend::new()) };
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

    #[inline]
    fn is_locked_exclusive(&self) -> bool {
        self.inner.is_locked_exclusive()
    }
}

// SAFETY: the writer downgrades the underlying lock in one step (no writer
// can slip in) and becomes a slow reader; the bias stays off (or is restored
// while we hold the lock, which invariant 3 allows).
unsafe impl<P: Platform> RawRwLockDowngrade for RawPerCpuRwLock<P> {
    unsafe fn downgrade(&self, token: PerCpuWriteToken) -> PerCpuReadToken {
        if token.restore_fast {
            // Release pairs with fast readers' Acquire re-load of the state.
            self.state.fetch_or(FAST, Ordering::Release);
        }
        let mine = self.my_slot();
        // SAFETY: the token stands for our underlying write lock.
        let _ = unsafe { self.inner.downgrade(GuardSend::new()) };
        self.enter_underlying(mine)
    }
}

/// Debug-build detection of recursive reads that go through the underlying
/// lock without a slot (see "Recursive reads" in the module docs).
#[cfg(all(debug_assertions, feature = "std", not(loom)))]
mod debug_recursion {
    use std::cell::RefCell;
    use std::vec::Vec;

    std::thread_local! {
        /// Ids of the locks this thread read-holds through the underlying
        /// lock without a slot.
        static HELD: RefCell<Vec<u64>> = const { RefCell::new(Vec::new()) };
    }

    pub(super) fn check(id: u64) {
        let held = HELD.try_with(|h| h.borrow().contains(&id)).unwrap_or(false);
        assert!(
            !held,
            "PerCpuRwLock: recursive read of a lock this thread already read-holds through \
             the underlying lock (its reader slot is busy with another lock of the same \
             ReaderTable); this deadlocks if a writer queues in between. Give the outer \
             lock its own ReaderTable or avoid the recursion."
        );
    }

    pub(super) fn push(id: u64) {
        let _ = HELD.try_with(|h| h.borrow_mut().push(id));
    }

    pub(super) fn pop(id: u64) {
        let _ = HELD.try_with(|h| {
            let mut h = h.borrow_mut();
            if let Some(i) = h.iter().rposition(|&x| x == id) {
                h.swap_remove(i);
            }
        });
    }
}

#[cfg(not(all(debug_assertions, feature = "std", not(loom))))]
mod debug_recursion {
    #[inline]
    pub(super) fn check(_: u64) {}
    #[inline]
    pub(super) fn push(_: u64) {}
    #[inline]
    pub(super) fn pop(_: u64) {}
}

#[cfg(all(test, feature = "std", not(loom)))]
mod tests;
