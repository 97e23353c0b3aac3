//! Reader slot tables for [`RawPerCpuRwLock`](crate::RawPerCpuRwLock).
//!
//! A [`ReaderTable`] is an array of [`SLOTS`] reader slots, one cache-line
//! pair each. A reader context (a thread, under the std platform) owns one
//! slot *index*, handed out by [`Platform::reader_slot`]; that index names
//! its slot in every table. A table serves a whole class of locks (Xen: one
//! per-CPU variable per lock type; folly: one global table): the slot records
//! which lock of the class the context currently read-holds on the fast
//! path, by the lock's unique id, never by its address.
//!
//! # Slot word
//! ```text
//!  63    62 ........ 24   23 .. 16    15        14          13 ........ 0
//! +----+------------------+----------+--------+------------+-----------------+
//! |mark| lock id (39 bits)| (unused) | BIASED | UNDERLYING | depth (14 bits) |
//! +----+------------------+----------+--------+------------+-----------------+
//! ```
//! `mark`: the lock state's always-set top bit, which a slot read copies
//! with the id (one mask) and everyone else ignores.
//! `BIASED`: the fast read was taken in the biased mode (its unlock may use
//! the unchecked light fence); `UNDERLYING`: the context holds the lock's
//! underlying read lock (a slow read, recorded). The flags and the depth
//! fill the low 16 bits, so the unlock of a biased read tells it by one
//! compare of them.
//! `0` means free. Only the owning context writes its slot (plain stores, no
//! read-modify-write); writers of the lock only read it.
//!
//! The inline read finds its slot with no bounds test: a context without
//! an index reads "slot `SLOTS`", which is the table's `busy` word, right
//! after the last slot and never 0, so the read's "is my slot free" test
//! also sends it to the path that hands out indices.
//!
//! # Size
//! `size_of::<ReaderTable>()` is `SLOTS * 128 + 128` bytes = 32,896 bytes
//! for 256 slots, whatever the CPU count: slots are per *thread* (see the
//! `percpu_rwlock` module docs for why), and at most 256 threads alive at
//! once get one; further threads take every read through the underlying
//! lock, which is correct, only slower. Indices are handed out lowest
//! first and given back at thread exit, and a writer scans only the slots
//! in use ([`Platform::reader_slots_in_use`]; the std platform keeps a
//! bitmap of them), not the whole table: a process with 16 reading
//! threads scans 16 slots, however many it had before. The table is a
//! `static` whose never-free `busy` word keeps it out of the zero-filled
//! section, so each table adds its size to the binary; the pages of slots
//! that no thread ever used are never touched.
//!
//! # Registry
//! The lock stores its table as a 6-bit index, not a pointer, to stay 16
//! bytes: index 0 is the process-wide default table, indices 1..=63 are
//! user tables, registered on first use by [`RawPerCpuRwLock::with_table`]
//! and never unregistered (tables are `'static`).
//!
//! # One platform per table
//! Slot indices come from the platform ([`Platform::reader_slot`]): two
//! platforms, each sound on its own, may hand the same index to two
//! different threads, and a writer scans only the indices its own platform
//! handed out. So a table serves the locks of one platform only: the first
//! lock that uses it binds it to its platform, and a lock of another
//! platform that tries to use it panics (before acquiring anything) instead
//! of letting a reader and a writer in together.
//!
//! # Class statistics
//! A table also keeps what its writers learn about the class (the cost of
//! the last revocations, the current inhibition multiplier, the average
//! slot reads per symmetric write, the slot reads seen at the last
//! revocation), from which each write chooses how readers read next (see
//! `percpu_rwlock`, "Modes"). Each slot counts its owner's slot reads
//! (biased and symmetric) on the owner's line (a plain load and store next
//! to the slot word the read writes anyway); a revoking writer, which reads
//! that line to wait for the slot, sums the counts. A thread that exits
//! adds its slot's counts to the table's *retired* counts and zeroes them
//! (the next owner of the index starts from 0), so the class's totals are
//! the retired counts plus the slots in use, and only grow. The hand-over
//! runs inside a sequence count (a seqlock's), which a writer reads before
//! and after summing: a sum that met a hand-over, and could hold that
//! thread's counts twice or not at all, is taken again or not used.
//!
//! [`Platform::reader_slot`]: crate::platform::Platform::reader_slot
//! [`Platform::reader_slot_bound`]: crate::platform::Platform::reader_slot_bound
//! [`Platform::reader_slots_in_use`]: crate::platform::Platform::reader_slots_in_use
//! [`RawPerCpuRwLock::with_table`]: crate::RawPerCpuRwLock::with_table

use core::ptr;

use crate::percpu_rwlock::mode_race::ModeRace;
use crate::platform::Platform;
use crate::sync::atomic::{AtomicPtr, AtomicU8, AtomicU16, AtomicU32, AtomicU64, Ordering};
use crate::wait::TUNING;

/// Reader slots per table: the most reader contexts that can use the fast
/// path at once. 256, so that a thread per hardware thread of a
/// two-socket, 128-core host still reads on its own slot (a writer scans
/// only the indices handed out, so a small process pays nothing for the
/// rest). (Four under loom and shuttle, to keep models small and let a
/// handful of model threads outnumber the slots.)
pub const SLOTS: usize = if cfg!(any(loom, shuttle)) { 4 } else { 256 };

/// Words of the std platform's bitmap of slot indices in use: one bit per
/// slot.
#[cfg(all(feature = "std", not(any(loom, shuttle))))]
pub(crate) const SLOT_WORDS: usize = SLOTS.div_ceil(64);

/// Registered tables: index 0 (the default table) plus 63 user tables.
pub(crate) const MAX_TABLES: usize = 64;

/// The value of a table's `busy` word: any nonzero value (a slot word of 0
/// is a free slot).
const BUSY: u64 = u64::MAX;

/// What a wrapping read total `now` counts since `then`: their difference
/// modulo 2^32, or 0 if `now` lies behind `then` (a "difference" over half
/// the range: no class makes 2^31 reads between two looks). Two writers
/// of a class's different locks may record totals out of order; a total
/// behind the last one taken for 2^32 reads would make one revocation
/// look paid for by billions. (An exiting thread's hand-over of its
/// counts does not move a total: see `ReaderTable::retire_seq`.)
#[inline]
pub(crate) fn count_since(now: u32, then: u32) -> u32 {
    let d = now.wrapping_sub(then);
    if d > u32::MAX / 2 { 0 } else { d }
}

/// The bias inhibition multiplier of [`ReaderTable::new`] (BRAVO's N):
/// after a revocation, readers stay on the underlying lock for 9 times as
/// long as the revocation took, so revocations cost at most ~10% of a
/// write-heavy phase. The multiplier adapts from there (see
/// `percpu_rwlock`, "Modes"): it doubles, up to `MAX_INHIBIT`, while
/// revocations keep following the bias's return before its reads paid for
/// them, and halves back when they did. A table for a lock class whose
/// writes are rare and whose threads do not overlap can opt out with
/// [`ReaderTable::with_inhibition`]`(0)` (Xen's policy: every write
/// revokes, and the bias comes back at its unlock).
pub const DEFAULT_INHIBIT: u8 = 9;

/// The initial adaptive multiplier for a configured one (0, Xen, keeps 1:
/// it is never used).
const fn clamp_multiplier(m: u8) -> u16 {
    if m == 0 { 1 } else { m as u16 }
}

/// One 64-byte line.
#[repr(align(64))]
struct Line<T>(T);

/// The owner's line of a slot: the slot word and the owner's counts, and
/// the count of writers parked on the slot (written by writers only when
/// they park, which is rare). One line: a read touches as few distinct
/// lines as possible (each one more is one more chance of a cache or
/// way-predictor conflict with the lock itself, which shows up on AMD Zen
/// as a read costing twice as much at some lock addresses).
#[repr(C)]
struct OwnerLine {
    word: AtomicU64,
    slow_reads: AtomicU32,
    /// Biased reads of the owner (any lock of the table), wrapping: what
    /// the bias bought, for the writers' keep rule.
    fast_reads: AtomicU32,
    /// Reads of this table's locks the owner holds through the underlying
    /// lock recorded in its thread-local list (its slot was busy).
    listed: AtomicU32,
    /// Writers parked waiting for the slot to change.
    waiters: AtomicU32,
}

/// A reader slot: the owner's line, and an empty line after it. The pair is
/// 128-byte aligned (x86 prefetches lines in pairs), so no other context's
/// slot shares it.
#[repr(C, align(128))]
pub(crate) struct Slot {
    owner: Line<OwnerLine>,
    _pad: Line<()>,
}

impl Slot {
    #[cfg(not(loom))]
    const fn new() -> Self {
        Self {
            owner: Line(OwnerLine {
                word: AtomicU64::new(0),
                slow_reads: AtomicU32::new(0),
                fast_reads: AtomicU32::new(0),
                listed: AtomicU32::new(0),
                waiters: AtomicU32::new(0),
            }),
            _pad: Line(()),
        }
    }
    #[cfg(loom)]
    fn new() -> Self {
        Self {
            owner: Line(OwnerLine {
                word: AtomicU64::new(0),
                slow_reads: AtomicU32::new(0),
                fast_reads: AtomicU32::new(0),
                listed: AtomicU32::new(0),
                waiters: AtomicU32::new(0),
            }),
            _pad: Line(()),
        }
    }

    /// The slot word (layout in the module docs).
    #[inline]
    pub(crate) fn word(&self) -> &AtomicU64 {
        &self.owner.0.word
    }

    /// Counts one slow read of the owner (any lock of the table) and says
    /// whether it is the `every`-th: the caller then reads the clock. A
    /// plain load and store on the owner's own line (only the owner writes
    /// it), so no read-modify-write.
    #[inline]
    pub(crate) fn count_slow_read(&self, every: u32) -> bool {
        let c = &self.owner.0.slow_reads;
        // Relaxed: a private counter; only its owner thread touches it.
        let n = c.load(Ordering::Relaxed).wrapping_add(1);
        c.store(n, Ordering::Relaxed);
        n.is_multiple_of(every)
    }

    /// Counts one slot read (biased or symmetric) of the owner (any lock of
    /// the table): a plain load and store on the owner's own line, which the
    /// read writes anyway.
    #[inline(always)]
    pub(crate) fn count_fast_read(&self) {
        let c = &self.owner.0.fast_reads;
        // Relaxed: only the owner writes it; writers read it as a hint.
        c.store(c.load(Ordering::Relaxed).wrapping_add(1), Ordering::Relaxed);
    }

    /// Counts `n` slow reads of the owner at once (the thread-local count
    /// of its counted reads keeps the rest): a multiple of the `every` of
    /// `count_slow_read`, which keeps that one's period.
    #[inline]
    pub(crate) fn add_slow_reads(&self, n: u32) {
        let c = &self.owner.0.slow_reads;
        // Relaxed: only the owner writes it; writers read it as a hint.
        c.store(c.load(Ordering::Relaxed).wrapping_add(n), Ordering::Relaxed);
    }

    /// The owner's slow reads so far (wrapping; counted reads in steps of
    /// `pc_clock_every`). Relaxed: a hint.
    #[inline]
    pub(crate) fn slow_reads(&self) -> u32 {
        self.owner.0.slow_reads.load(Ordering::Relaxed)
    }

    /// The owner's slot reads so far (wrapping). Relaxed: a hint.
    #[inline]
    pub(crate) fn fast_reads(&self) -> u32 {
        self.owner.0.fast_reads.load(Ordering::Relaxed)
    }

    /// The owner, exiting, hands its read counts to the table
    /// (`ReaderTable::retire_counts`): zeroes them and returns them
    /// (slot reads, slow reads).
    #[cfg(all(feature = "std", not(any(loom, shuttle))))]
    fn take_counts(&self) -> (u32, u32) {
        // Relaxed: only the owner writes them; writers read them as hints.
        let fast = self.owner.0.fast_reads.swap(0, Ordering::Relaxed);
        let slow = self.owner.0.slow_reads.swap(0, Ordering::Relaxed);
        (fast, slow)
    }

    /// How many reads of this table's locks the owner holds recorded in its
    /// thread-local list (only the owner reads or writes it).
    #[inline]
    pub(crate) fn listed(&self) -> &AtomicU32 {
        &self.owner.0.listed
    }

    /// Writers parked on this slot's address.
    #[inline]
    pub(crate) fn waiters(&self) -> &AtomicU32 {
        &self.owner.0.waiters
    }

    /// The address writers park on.
    #[inline]
    pub(crate) fn park_addr(&self) -> usize {
        self as *const Self as usize
    }
}

/// A table of reader slots shared by a class of [`PerCpuRwLock`]s.
///
/// Declare one per lock class whose reads nest inside reads of another class
/// (a context has one slot per table, so a read of a second lock of the same
/// table while the first is held goes through the underlying lock):
///
/// ```
/// use scalelock::{PerCpuRwLock, PerCpuRwLockExt, ReaderTable};
///
/// static DOMAIN_LOCKS: ReaderTable = ReaderTable::new();
///
/// let grants = PerCpuRwLock::with_table(&DOMAIN_LOCKS, vec![0u32; 16]);
/// assert_eq!(grants.read().len(), 16);
/// ```
///
/// The lock remembers its table, so a read or write can never be paired
/// with the wrong table. See the [module docs](self) for the size.
///
/// [`PerCpuRwLock`]: crate::PerCpuRwLock
#[repr(C)]
pub struct ReaderTable {
    slots: [Slot; SLOTS],
    /// Never 0, never written, and right after the last slot, where a slot
    /// `SLOTS` would start its word: a read whose context has no slot
    /// index ([`Platform::reader_slot_inline`] gives `SLOTS`) finds "slot
    /// `SLOTS`" busy, so the inline read needs no test of its own for that
    /// case ([`ReaderTable::word_or_busy`]).
    ///
    /// [`Platform::reader_slot_inline`]: crate::platform::Platform::reader_slot_inline
    busy: AtomicU64,
    /// Registry index; 0 = the default table, or a user table not yet
    /// registered.
    index: AtomicU8,
    /// BRAVO multiplier the table starts with: after a writer revoked the
    /// read fast path, readers stay on the underlying lock for this many
    /// times as long as the revocation took. 0: the writer re-enables the
    /// fast path at unlock (the Xen behaviour).
    inhibit: u8,
    /// The current (adaptive) multiplier, between the configured one and
    /// `MAX_INHIBIT`.
    multiplier: AtomicU16,
    /// The sum (wrapping) of the slots' read counts at the class's last
    /// revocation (`fast_reads_since`).
    fast_reads_seen: AtomicU32,
    /// Slot reads and slow reads (wrapping) of the threads that exited:
    /// each hands its slot's counts over as it gives its index back, so
    /// that the class's totals need only the slots in use
    /// (`retired_fast_reads`, `retired_slow_reads`).
    retired_fast: AtomicU32,
    /// See `retired_fast`.
    retired_slow: AtomicU32,
    /// A sequence count over the moves of exiting threads' counts into
    /// `retired_fast` and `retired_slow` (a seqlock's): odd while one is
    /// under way, and two more after each. A writer summing a class total
    /// reads it before and after (`retire_seq`, `unchanged_since`), so
    /// that an exit in between is not counted twice or not at all.
    retire_seq: AtomicU32,
    /// Cost of the heavy fence of the class's last asymmetric revocation,
    /// ns.
    fence_ns: AtomicU32,
    /// The cheaper of the last two of those (`fence_floor_ns`).
    fence_floor_ns: AtomicU32,
    /// When the class's last asymmetric revocation began, on the
    /// platform's clock, ns (`probe_due`).
    fence_at_ns: AtomicU64,
    /// The latest end of an inhibition window (or `try_upgrade` hold-off)
    /// set on any lock of the class, ns (only grows): a window whose
    /// 16-bit stamp cannot tell past from future is over once the clock
    /// passed this (`windows_over`).
    window_end_ns: AtomicU64,
    /// The latest stamp set on any lock of the class with the bias on
    /// (a write's, or the bias's return), ns (only grows): a lock's stamp
    /// is at most this, so its gap or time on is at least the time since
    /// (`stamped_at_least_ago`).
    stamped_ns: AtomicU64,
    /// Whole cost of the class's last asymmetric revocation, ns
    /// (`revocation_floor`).
    revocation_ns: AtomicU32,
    /// The gap before the class's last symmetric write, ns (`gap_floor`).
    gap_ns: AtomicU32,
    /// Symmetric revocations of the class's locks (wrapping): one in
    /// `pc_sym_probe` tries the biased mode again.
    sym_revocations: AtomicU32,
    /// Slot reads per revocation (biased or symmetric), averaged, in 1/16ths
    /// (`reads_per_write`; 0: none yet).
    reads_per_write_x16: AtomicU32,
    /// Key of the platform whose locks use this table (0: not bound yet).
    platform: AtomicU64,
    /// Tests: every asymmetric revocation switches to the symmetric mode
    /// (`force_symmetric`).
    force_symmetric: AtomicU8,
    /// The symmetric mode's race against the inhibited one
    /// (`ModeRace`).
    race: ModeRace,
}

// The layout `word_or_busy` relies on: slot `i`'s word at `i` slots from
// the table's start, and `busy` where slot `SLOTS`'s word would be.
const _: () = {
    use core::mem::offset_of;
    assert!(offset_of!(ReaderTable, slots) == 0);
    assert!(offset_of!(ReaderTable, busy) == SLOTS * size_of::<Slot>());
    assert!(offset_of!(Slot, owner) == 0);
    assert!(offset_of!(OwnerLine, word) == 0);
};

/// Stores cost `ns` (ns, saturated to `u32`) as the last one in `last`;
/// returns the previous cost (0: none) and the cheaper of the two (the new
/// one alone when there was none). Relaxed: the costs are hints.
#[inline]
fn record_cost(last: &AtomicU32, ns: u64) -> (u64, u64) {
    let ns32 = ns.min(u64::from(u32::MAX)) as u32;
    // A load and a store, not a swap: a hint needs no atomic
    // read-modify-write (racing writers of other locks of the class may
    // lose one record).
    let prev = last.load(Ordering::Relaxed);
    last.store(ns32, Ordering::Relaxed);
    let floor = if prev == 0 { ns32 } else { ns32.min(prev) };
    (u64::from(prev), u64::from(floor))
}

/// Largest adaptive inhibition multiplier. A window is also capped at the
/// lock's stamp range (about 1 ms), which a revocation of 250 ns reaches
/// at this multiplier: then revocations cost under 0.1% of a write-heavy
/// phase, and reads come back to the bias within a millisecond of it.
pub(crate) const MAX_INHIBIT: u16 = 4096;

/// A nonzero key for platform `P`, the same for every call (a hash of its
/// `TypeId`).
fn platform_key<P: Platform>() -> u64 {
    use core::hash::{Hash, Hasher};
    /// FNV-1a, enough to tell a handful of types apart.
    struct Fnv(u64);
    impl Hasher for Fnv {
        fn finish(&self) -> u64 {
            self.0
        }
        fn write(&mut self, bytes: &[u8]) {
            for b in bytes {
                self.0 = (self.0 ^ u64::from(*b)).wrapping_mul(0x100_0000_01b3);
            }
        }
    }
    let mut h = Fnv(0xcbf2_9ce4_8422_2325);
    core::any::TypeId::of::<P>().hash(&mut h);
    h.finish() | 1
}

/// Raises `at` to `v` if that is more: a load and a store (a hint that
/// may lose a race), not a read-modify-write.
#[inline]
fn raise_hint(at: &AtomicU64, v: u64) {
    if v > at.load(Ordering::Relaxed) {
        at.store(v, Ordering::Relaxed);
    }
}

impl ReaderTable {
    /// An empty table with the default bias inhibition
    /// ([`DEFAULT_INHIBIT`]).
    #[cfg(not(loom))]
    pub const fn new() -> Self {
        Self::with_inhibition(DEFAULT_INHIBIT)
    }

    /// An empty table whose writers, after revoking the read fast path, keep
    /// readers on the underlying lock for `multiplier` times the revocation's
    /// cost (BRAVO). `0` re-enables the fast path at every write unlock
    /// (Xen's policy), so every write pays a revocation: a slot scan after
    /// the heavy fence (a `membarrier` on std), or after a plain full fence
    /// where the lock runs symmetric (the class's heavy fences were dear
    /// twice in a row, or the platform has no asymmetric fences; its
    /// readers then pay a full fence each).
    #[cfg(not(loom))]
    pub const fn with_inhibition(multiplier: u8) -> Self {
        Self {
            slots: [const { Slot::new() }; SLOTS],
            busy: AtomicU64::new(BUSY),
            index: AtomicU8::new(0),
            inhibit: multiplier,
            multiplier: AtomicU16::new(clamp_multiplier(multiplier)),
            fast_reads_seen: AtomicU32::new(0),
            retired_fast: AtomicU32::new(0),
            retired_slow: AtomicU32::new(0),
            retire_seq: AtomicU32::new(0),
            fence_ns: AtomicU32::new(0),
            fence_floor_ns: AtomicU32::new(0),
            fence_at_ns: AtomicU64::new(0),
            window_end_ns: AtomicU64::new(0),
            stamped_ns: AtomicU64::new(0),
            revocation_ns: AtomicU32::new(0),
            gap_ns: AtomicU32::new(0),
            sym_revocations: AtomicU32::new(0),
            reads_per_write_x16: AtomicU32::new(0),
            platform: AtomicU64::new(0),
            force_symmetric: AtomicU8::new(0),
            race: ModeRace::new(),
        }
    }

    /// An empty table with the default bias inhibition.
    #[cfg(loom)]
    pub fn new() -> Self {
        Self::with_inhibition(DEFAULT_INHIBIT)
    }

    /// An empty table with the given bias inhibition multiplier.
    #[cfg(loom)]
    pub fn with_inhibition(multiplier: u8) -> Self {
        Self {
            slots: core::array::from_fn(|_| Slot::new()),
            busy: AtomicU64::new(BUSY),
            index: AtomicU8::new(0),
            inhibit: multiplier,
            multiplier: AtomicU16::new(clamp_multiplier(multiplier)),
            fast_reads_seen: AtomicU32::new(0),
            retired_fast: AtomicU32::new(0),
            retired_slow: AtomicU32::new(0),
            retire_seq: AtomicU32::new(0),
            fence_ns: AtomicU32::new(0),
            fence_floor_ns: AtomicU32::new(0),
            fence_at_ns: AtomicU64::new(0),
            window_end_ns: AtomicU64::new(0),
            stamped_ns: AtomicU64::new(0),
            revocation_ns: AtomicU32::new(0),
            gap_ns: AtomicU32::new(0),
            sym_revocations: AtomicU32::new(0),
            reads_per_write_x16: AtomicU32::new(0),
            platform: AtomicU64::new(0),
            force_symmetric: AtomicU8::new(0),
            race: ModeRace::new(),
        }
    }

    /// The process-wide table used by [`PerCpuRwLock::new`](crate::PerCpuRwLock).
    pub fn global() -> &'static ReaderTable {
        default_table()
    }

    /// Whether writers inhibit the bias after revoking it (BRAVO); false for
    /// `with_inhibition(0)` (Xen: the bias comes back at every write unlock).
    #[inline]
    pub(crate) fn inhibits(&self) -> bool {
        self.inhibit != 0
    }

    /// The current inhibition multiplier (adaptive).
    #[inline]
    pub(crate) fn multiplier(&self) -> u16 {
        self.multiplier.load(Ordering::Relaxed)
    }

    /// A revocation followed soon after the bias came back (the inhibition
    /// was too short): double the multiplier. Relaxed: a hint.
    #[inline]
    pub(crate) fn grow_multiplier(&self) {
        let m = self.multiplier();
        self.multiplier
            .store(m.saturating_mul(2).min(MAX_INHIBIT), Ordering::Relaxed);
    }

    /// The bias paid for this revocation: halve the multiplier, down to
    /// the table's configured one. Relaxed: a hint.
    #[inline]
    pub(crate) fn shrink_multiplier(&self) {
        let m = self.multiplier();
        let floor = clamp_multiplier(self.inhibit);
        if m > floor {
            self.multiplier.store((m / 2).max(floor), Ordering::Relaxed);
        }
    }

    /// The slow reads (wrapping) of the threads that exited, which a
    /// class total adds to the counts of the slots in use (`ModeRace`;
    /// taken inside `checked_total`).
    #[inline]
    pub(crate) fn retired_slow_reads(&self) -> u32 {
        self.retired_slow.load(Ordering::Relaxed)
    }

    /// Records that a lock of the class is inhibited until `end_ns` (the
    /// platform's clock). Relaxed, a load and a store (no read-modify-write
    /// on a revocation's path): a hint; two writers racing may leave the
    /// smaller end, which only ends a window early (speed, not safety).
    #[inline]
    pub(crate) fn window_until(&self, end_ns: u64) {
        raise_hint(&self.window_end_ns, end_ns);
    }

    /// Whether every window the class's writers set has ended at `now_ns`.
    #[inline]
    pub(crate) fn windows_over(&self, now_ns: u64) -> bool {
        now_ns >= self.window_end_ns.load(Ordering::Relaxed)
    }

    /// Records that a lock of the class was stamped at `now_ns` (with the
    /// bias on, or a window from then). Relaxed, a load and a store: a
    /// hint; two writers racing may leave the earlier time, which can only
    /// make a gap that wrapped read as short, as without this record.
    #[inline]
    pub(crate) fn stamped_at(&self, now_ns: u64) {
        raise_hint(&self.stamped_ns, now_ns);
    }

    /// How long before `now_ns` the class's latest stamp was set, ns: the
    /// stamp of each of its locks is at least this old.
    #[inline]
    pub(crate) fn stamped_at_least_ago(&self, now_ns: u64) -> u64 {
        now_ns.saturating_sub(self.stamped_ns.load(Ordering::Relaxed))
    }

    /// The class's race of the symmetric mode against the inhibited one.
    #[inline]
    pub(crate) fn race(&self) -> &ModeRace {
        &self.race
    }

    /// The slot reads (wrapping) of the threads that exited. A revocation
    /// adds the counts of the slots in use (those it scanned) to this, so
    /// that its total only grows as threads come and go: a slot whose
    /// thread exited between two revocations neither takes its count out
    /// of the total (which wrapped to billions of reads, "they paid for the
    /// revocation") nor hides the reads it made before; and a revocation
    /// reads the lines of the slots in use only, however many threads held
    /// a slot before (every slot ever handed out, read at each revocation,
    /// made a symmetric write after a burst of short-lived threads cost
    /// many times its usual price: `docs/measurements.md`). `None` if an
    /// exit moved counts since `seq` (`retire_seq`, read before the slots'
    /// counts were): a total of the slots' counts and this would then hold
    /// that thread's counts twice or not at all.
    #[inline]
    pub(crate) fn retired_fast_reads(&self, seq: u32) -> Option<u32> {
        let n = self.retired_fast.load(Ordering::Relaxed);
        self.unchanged_since(seq).then_some(n)
    }

    /// The slot reads of the threads that exited, read inside
    /// `checked_total` (or in tests).
    #[inline]
    pub(crate) fn retired_fast_reads_unchecked(&self) -> u32 {
        self.retired_fast.load(Ordering::Relaxed)
    }

    /// The exits' sequence count, to read before summing a class total
    /// (the retired counts and the counts of the slots in use) and to pass
    /// to `retired_fast_reads` or `unchanged_since` after. Acquire pairs with `retire_counts`' closing Release store:
    /// the counts read after it include every move it counted.
    #[inline]
    pub(crate) fn retire_seq(&self) -> u32 {
        self.retire_seq.load(Ordering::Acquire)
    }

    /// Test support: an exit that moves counts starts (`true`, the
    /// sequence count odd: class totals are refused) or ends (`false`).
    #[cfg(test)]
    pub(crate) fn simulate_exit_moving_counts(&self, moving: bool) {
        let seq = self.retire_seq.load(Ordering::Relaxed);
        assert_eq!(seq & 1 == 1, !moving, "not in the other state");
        self.retire_seq
            .store(seq.wrapping_add(1), Ordering::Release);
    }

    /// Whether no exit moved counts since `seq` (`retire_seq`) nor was
    /// doing so then: every count read since is then from one consistent
    /// moment of the hand-overs (the seqlock reader's check).
    #[inline]
    pub(crate) fn unchanged_since(&self, seq: u32) -> bool {
        // Pairs with `retire_counts`' Release fence: if a count read above
        // was written by a move, the odd sequence it follows is seen here.
        crate::sync::atomic::fence(Ordering::Acquire);
        seq & 1 == 0 && self.retire_seq.load(Ordering::Relaxed) == seq
    }

    /// A class total that `sum` adds up (the retired counts plus the
    /// counts of the slots in use), taken while no exit moved counts:
    /// tried a few times, `None` if exits kept moving counts (the caller
    /// then decides without it).
    pub(crate) fn checked_total(&self, mut sum: impl FnMut() -> u32) -> Option<u32> {
        for _ in 0..4 {
            let seq = self.retire_seq();
            let total = sum();
            if self.unchanged_since(seq) {
                return Some(total);
            }
            core::hint::spin_loop();
        }
        None
    }

    /// Slot `i`'s owner is exiting (its index is going back): add its
    /// read counts to the retired ones and zero them, so that the next
    /// owner of the index starts from 0. Inside the `retire_seq` seqlock
    /// (exits may race each other: the odd count is taken by a CAS), so a
    /// writer whose sum of the counts met this move can tell and sum
    /// again.
    /// An owner that made no read of this table's locks has nothing to
    /// move, and leaves the sequence count alone: every exiting thread
    /// with a slot index retires in every registered table, and bumping
    /// the count of tables it never read made their writers' totals fail
    /// (`checked_total`) whenever threads came and went elsewhere in the
    /// process.
    #[cfg(all(feature = "std", not(any(loom, shuttle))))]
    pub(crate) fn retire_counts(&self, i: usize) {
        // Relaxed: the exiting owner's own counts (only it writes them).
        if self.slots[i].fast_reads() == 0 && self.slots[i].slow_reads() == 0 {
            return;
        }
        let mut seq = self.retire_seq.load(Ordering::Relaxed);
        loop {
            if seq & 1 == 0 {
                // Relaxed: the fence below orders the odd count before the
                // moves.
                match self.retire_seq.compare_exchange_weak(
                    seq,
                    seq.wrapping_add(1),
                    Ordering::Relaxed,
                    Ordering::Relaxed,
                ) {
                    Ok(_) => break,
                    Err(now) => seq = now,
                }
            } else {
                core::hint::spin_loop();
                seq = self.retire_seq.load(Ordering::Relaxed);
            }
        }
        // Pairs with `unchanged_since`'s Acquire fence: a writer that reads
        // a count moved below sees the odd sequence.
        crate::sync::atomic::fence(Ordering::Release);
        let (fast, slow) = self.slots[i].take_counts();
        // Relaxed: hints, as the slot counts are; ordered by the fence and
        // the store around them.
        self.retired_fast.fetch_add(fast, Ordering::Relaxed);
        self.retired_slow.fetch_add(slow, Ordering::Relaxed);
        // Release pairs with `retire_seq`'s Acquire load: a writer that
        // reads the even count sees the moves done.
        self.retire_seq
            .store(seq.wrapping_add(2), Ordering::Release);
    }

    /// Slot reads of the class since its last revocation, from `sum`, the
    /// retired reads plus the counts of the slots in use, taken with no
    /// exit in between (`retired_fast_reads`; the total then only grows,
    /// so the difference of the totals is the reads since, modulo 2^32,
    /// and one that went back, two writers of different locks recording
    /// out of order, counts as none: `count_since`); records `sum` for the
    /// next. (A revocation without such a sum records none, and the next
    /// one counts from the last recorded.)
    /// Class-wide, as the other figures here: reads of the class's other
    /// locks count too. Relaxed: a hint.
    #[inline]
    pub(crate) fn fast_reads_since(&self, sum: u32) -> u32 {
        count_since(sum, self.fast_reads_seen.swap(sum, Ordering::Relaxed))
    }

    /// The cheaper of the heavy fences of the class's last two asymmetric
    /// revocations (the only one after the first; 0 before it), ns: what a
    /// fence costs, without the outlier of one preempted `membarrier`.
    /// Relaxed: a hint.
    #[inline]
    pub(crate) fn fence_floor_ns(&self) -> u64 {
        u64::from(self.fence_floor_ns.load(Ordering::Relaxed))
    }

    /// Records the whole cost `ns` of an asymmetric revocation (fence and
    /// slot waits) and returns the cheaper of it and the previous one (it
    /// alone the first time): the cost the keep rule weighs, so that one
    /// revocation that waited for a preempted reader does not inhibit the
    /// bias. Relaxed: a hint.
    #[inline]
    pub(crate) fn revocation_floor(&self, ns: u64) -> u64 {
        record_cost(&self.revocation_ns, ns).1
    }

    /// Records the gap `ns` between a symmetric write and the previous
    /// write (or the bias's return) and returns the shorter of it and the
    /// previous such gap (it alone the first time): what the rule that
    /// brings the biased mode back weighs. Writes at random times leave
    /// gaps of geometric length, so one gap of several times the mean
    /// comes every few dozen writes (each a `membarrier` at the next write
    /// if it brought the bias back), two in a row far more rarely; writes
    /// that really became rare leave two long gaps at once. Relaxed: a
    /// hint.
    #[inline]
    pub(crate) fn gap_floor(&self, ns: u64) -> u64 {
        record_cost(&self.gap_ns, ns).1
    }

    /// Records the heavy fence's cost `ns` of an asymmetric revocation that
    /// began at `at_ns`, and says whether this one and the previous one
    /// were both at least `dear_ns`: one dear fence alone is more likely an
    /// interrupt or a preemption during the `membarrier` than other CPUs
    /// busy running our readers. Relaxed: a hint (racing writers of other
    /// locks of the class may lose one record).
    #[inline]
    pub(crate) fn dear_fences(&self, ns: u64, dear_ns: u64, at_ns: u64) -> bool {
        self.fence_at_ns.store(at_ns, Ordering::Relaxed);
        let (prev, floor) = record_cost(&self.fence_ns, ns);
        self.fence_floor_ns.store(floor as u32, Ordering::Relaxed);
        ns >= dear_ns && prev >= dear_ns
    }

    /// Folds the slot reads since the class's last revocation, `reads`,
    /// seen at a revocation, into the class's average (each new figure
    /// weighing 1/8) and returns the new average: with several writers, or
    /// writes at random times, two writes that meet by chance see few
    /// reads between them, which says nothing of the read share. Relaxed:
    /// a hint.
    #[inline]
    pub(crate) fn reads_per_write(&self, reads: u32) -> u64 {
        let new = u64::from(reads.min(1 << 27)) * 16;
        let old = u64::from(self.reads_per_write_x16.load(Ordering::Relaxed));
        let avg = if old == 0 {
            new
        } else {
            old - old / 8 + new / 8
        };
        self.reads_per_write_x16
            .store(avg.max(1) as u32, Ordering::Relaxed);
        avg / 16
    }

    /// The class's average slot reads per revocation (`reads_per_write`),
    /// without a new figure. Relaxed: a hint.
    #[inline]
    pub(crate) fn reads_per_write_average(&self) -> u64 {
        u64::from(self.reads_per_write_x16.load(Ordering::Relaxed)) / 16
    }

    /// The class's average slot reads per revocation, in 1/16ths (tests).
    #[cfg(test)]
    pub(crate) fn reads_per_write_x16(&self) -> u32 {
        self.reads_per_write_x16.load(Ordering::Relaxed)
    }

    /// Tests: sets the class's average slot reads per revocation, in
    /// 1/16ths.
    #[cfg(test)]
    pub(crate) fn set_reads_per_write_x16(&self, x16: u32) {
        self.reads_per_write_x16.store(x16, Ordering::Relaxed);
    }

    /// Whether the class's writes are sparse enough that a write leaving
    /// the bias on should hand the underlying lock to a waiter
    /// (`pc_handoff_reads` slot reads per write or more, on average; a
    /// class whose writes never weigh the reads, Xen's policy, never
    /// does). Relaxed: a hint.
    #[inline]
    pub(crate) fn sparse_writes(&self) -> bool {
        u64::from(self.reads_per_write_x16.load(Ordering::Relaxed))
            >= TUNING.pc_handoff_reads.saturating_mul(16)
    }

    /// Whether a symmetric revocation at `now_ns` may probe the biased mode
    /// (one in `pc_sym_probe` does): the class's last heavy fence began at
    /// least `pc_probe_fences` times its cost ago (at most
    /// `pc_probe_wait_max_ns` ago), or there was none yet.
    /// That fence's own cost, not the cheaper of the last two: where the
    /// fence is sometimes cheap (no other CPU runs our threads) and
    /// sometimes dear, a dear probe waits long before the next, where the
    /// cheaper one would space every probe by the cheap cost. Relaxed: a
    /// hint.
    #[inline]
    pub(crate) fn probe_due(&self, now_ns: u64) -> bool {
        let since = now_ns.saturating_sub(self.fence_at_ns.load(Ordering::Relaxed));
        let fence = u64::from(self.fence_ns.load(Ordering::Relaxed));
        since
            >= fence
                .saturating_mul(TUNING.pc_probe_fences)
                .min(TUNING.pc_probe_wait_max_ns)
    }

    /// Counts a symmetric revocation of the class's locks and returns the
    /// count (wrapping): one in `pc_sym_probe` tries the biased mode again
    /// (if `probe_due`). Relaxed load and store: a hint.
    #[inline]
    pub(crate) fn sym_tick(&self) -> u32 {
        let n = self.sym_revocations.load(Ordering::Relaxed).wrapping_add(1);
        self.sym_revocations.store(n, Ordering::Relaxed);
        n
    }

    /// Test support (model checks, which have no clock to measure a
    /// revocation's cost by): every asymmetric revocation of this table's
    /// locks switches them to the symmetric mode, and the symmetric mode
    /// runs no race against the inhibited one (it inhibits only for too
    /// few reads per write).
    #[doc(hidden)]
    pub fn force_symmetric(&self) {
        self.force_symmetric.store(1, Ordering::Relaxed);
    }

    /// Whether `force_symmetric` was called.
    #[inline]
    pub(crate) fn forced_symmetric(&self) -> bool {
        self.force_symmetric.load(Ordering::Relaxed) != 0
    }

    /// Tests: undoes `force_symmetric` (the modes' rules, the mode race
    /// among them, apply again).
    #[cfg(test)]
    pub(crate) fn unforce_symmetric(&self) {
        self.force_symmetric.store(0, Ordering::Relaxed);
    }

    /// Binds the table to platform `P` on first use.
    ///
    /// # Panics
    /// If a lock of another platform used the table first.
    #[inline]
    pub(crate) fn bind<P: Platform>(&self) {
        let key = platform_key::<P>();
        // Relaxed: only the key's value matters; nothing is published.
        let bound = self.platform.load(Ordering::Relaxed);
        if bound != key {
            self.bind_slow(key, bound);
        }
    }

    #[cold]
    fn bind_slow(&self, key: u64, bound: u64) {
        let bound = if bound == 0 {
            match self
                .platform
                .compare_exchange(0, key, Ordering::Relaxed, Ordering::Relaxed)
            {
                Ok(_) => return,
                Err(now) => now,
            }
        } else {
            bound
        };
        assert_eq!(
            bound, key,
            "scalelock: this ReaderTable serves locks of another Platform; reader slot \
             indices of two platforms can collide, so give each platform's locks their own \
             ReaderTable"
        );
    }

    /// Slot `i`, if the table has one.
    #[inline]
    pub(crate) fn slot(&self, i: usize) -> Option<&Slot> {
        self.slots.get(i)
    }

    /// The word of slot `i`, or for `i == SLOTS` the `busy` word (never 0):
    /// the inline read's one test for "the slot is free" also says "the
    /// context has a slot".
    ///
    /// # Safety
    /// `i <= SLOTS`.
    #[inline(always)]
    pub(crate) unsafe fn word_or_busy(&self, i: usize) -> &AtomicU64 {
        debug_assert!(i <= SLOTS);
        // SAFETY: the pointer comes from `self`, so it may reach any byte of
        // the table. `#[repr(C)]` puts `slots` at offset 0 and `busy` right
        // after it, and a slot starts with its word (asserted after the
        // struct):
        // for `i < SLOTS` the address is slot `i`'s word, for `i == SLOTS`
        // (the caller's bound) it is `busy`; an `AtomicU64` either way,
        // inside the table, which lives as long as `&self`.
        unsafe {
            &*(self as *const Self)
                .cast::<u8>()
                .add(i * size_of::<Slot>())
                .cast::<AtomicU64>()
        }
    }

    /// Slot `i`, unchecked.
    ///
    /// # Safety
    /// `i < SLOTS`.
    #[inline(always)]
    pub(crate) unsafe fn slot_unchecked(&self, i: usize) -> &Slot {
        debug_assert!(i < SLOTS);
        // SAFETY: in bounds (the caller's contract).
        unsafe { self.slots.get_unchecked(i) }
    }

    /// This table's registry index, registering it on first use.
    ///
    /// # Panics
    /// If 63 user tables are already registered.
    pub(crate) fn register(&'static self) -> u8 {
        if ptr::eq(self, default_table()) {
            return 0;
        }
        let index = self.index.load(Ordering::Acquire);
        if index != 0 {
            return index;
        }
        register_slow(self)
    }
}

#[cfg(not(loom))]
impl Default for ReaderTable {
    fn default() -> Self {
        Self::new()
    }
}

impl core::fmt::Debug for ReaderTable {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("ReaderTable")
            .field("index", &self.index.load(Ordering::Relaxed))
            .field("inhibit", &self.inhibit)
            .finish_non_exhaustive()
    }
}

#[cfg(not(any(loom, shuttle)))]
static DEFAULT: ReaderTable = ReaderTable::new();
#[cfg(not(any(loom, shuttle)))]
static REGISTRY: [AtomicPtr<ReaderTable>; MAX_TABLES] =
    [const { AtomicPtr::new(ptr::null_mut()) }; MAX_TABLES];

// Model checkers: fresh for every model execution (see `sync`).
#[cfg(any(loom, shuttle))]
crate::sync::model_lazy_static! {
    static ref DEFAULT: ReaderTable = ReaderTable::new();
    static ref REGISTRY: [AtomicPtr<ReaderTable>; MAX_TABLES] =
        core::array::from_fn(|_| AtomicPtr::new(ptr::null_mut()));
}

#[inline]
fn default_table() -> &'static ReaderTable {
    &DEFAULT
}

#[cold]
fn register_slow(table: &'static ReaderTable) -> u8 {
    let me = table as *const ReaderTable as *mut ReaderTable;
    for (i, entry) in REGISTRY.iter().enumerate().skip(1) {
        // Release pairs with the Acquire in `table_at`: whoever finds the
        // pointer sees the table's (const-initialised) contents.
        if entry
            .compare_exchange(ptr::null_mut(), me, Ordering::Release, Ordering::Relaxed)
            .is_err()
        {
            continue;
        }
        // Acquire/Release pair with `register`'s Acquire load and a racing
        // registration of the same table.
        return match table
            .index
            .compare_exchange(0, i as u8, Ordering::AcqRel, Ordering::Acquire)
        {
            Ok(_) => i as u8,
            Err(theirs) => {
                // Another thread registered this table first: free our entry.
                entry.store(ptr::null_mut(), Ordering::Relaxed);
                theirs
            }
        };
    }
    panic!(
        "scalelock: more than {} ReaderTables registered",
        MAX_TABLES - 1
    );
}

/// The table registered as `index` (0: the default table).
#[inline]
pub(crate) fn table_at(index: usize) -> &'static ReaderTable {
    if index == 0 {
        return default_table();
    }
    // Acquire pairs with the Release in `register_slow`.
    let p = REGISTRY[index].load(Ordering::Acquire);
    debug_assert!(!p.is_null(), "lock names an unregistered table");
    // SAFETY: a lock only stores an index returned by `register`, which
    // returns after the registry entry holds a pointer to a `'static` table;
    // entries of registered tables are never cleared (only the loser of a
    // registration race clears its own entry, whose index no lock received).
    // The lock reached this thread through some synchronisation that carried
    // that store with it.
    unsafe { &*p }
}

/// The default table and every registered user table. All of them, not
/// only those bound to the std platform: a platform of the user's may
/// hand out the std platform's thread indices (by calling its
/// `reader_slot`), and an index whose slot some table still holds must not
/// go back (`all_free`). (In a table of a platform with its own indices,
/// the exit of the thread with std index `i` may count context `i`'s
/// reads twice: hints only.)
#[cfg(all(feature = "std", not(any(loom, shuttle))))]
fn registered_tables() -> impl Iterator<Item = &'static ReaderTable> {
    core::iter::once(default_table()).chain(REGISTRY[1..].iter().filter_map(|entry| {
        let p = entry.load(Ordering::Acquire);
        // SAFETY: non-null registry entries point to `'static` tables.
        (!p.is_null()).then(|| unsafe { &*p })
    }))
}

/// Whether slot `index` is free in every registered table (thread exit):
/// its word names no read, and its count of reads recorded in the
/// thread's list is 0 (a read still recorded there, forgotten or released
/// by a later thread-local destructor, which no longer finds the slot,
/// would leave the next owner a count it never made: the slow paths would
/// look at its list for ever).
#[cfg(all(feature = "std", not(any(loom, shuttle))))]
fn all_free(index: usize) -> bool {
    registered_tables().all(|table| {
        let slot = &table.slots[index];
        // Relaxed: the exiting owner's own fields.
        slot.word().load(Ordering::Relaxed) == 0 && slot.listed().load(Ordering::Relaxed) == 0
    })
}

/// The exiting owner of slot index `index` hands its read counts in every
/// registered table to that table (`ReaderTable::retire_counts`).
#[cfg(all(feature = "std", not(any(loom, shuttle))))]
fn retire_counts(index: usize) {
    registered_tables().for_each(|table| table.retire_counts(index));
}

/// The reads a context holds through the underlying lock of a per-CPU
/// rwlock without a slot to record them in (it has none, or its slot is busy
/// with another lock): lock id and depth, a handful of entries. Lives in
/// `LocalState`; only its context touches it.
///
/// Each entry also says whether its first read was counted in the context's
/// slot (`Slot::listed`): a thread without a slot may get one later (when
/// another thread exits), and only the reads counted there may be
/// subtracted there.
#[derive(Debug, Default)]
pub(crate) struct HeldReads {
    /// (lock id, depth, counted in the slot); depth 0: a free entry.
    entries: [core::cell::Cell<(u64, u32, bool)>; HELD],
}

/// Locks a context can read-hold at once through the underlying lock without
/// a slot and still read recursively without waiting.
const HELD: usize = 8;

impl HeldReads {
    pub(crate) const fn new() -> Self {
        Self {
            entries: [const { core::cell::Cell::new((0, 0, false)) }; HELD],
        }
    }

    /// Records a first read of `id`, `counted` in the context's slot or
    /// not; false if the list is full (dropped).
    pub(crate) fn push(&self, id: u64, counted: bool) -> bool {
        match self.entries.iter().find(|e| e.get().1 == 0) {
            Some(e) => {
                e.set((id, 1, counted));
                true
            }
            None => false,
        }
    }

    /// One more read of `id`, if it is recorded.
    pub(crate) fn deepen(&self, id: u64) -> bool {
        match self
            .entries
            .iter()
            .find(|e| e.get().0 == id && e.get().1 != 0)
        {
            Some(e) => {
                let (id, depth, counted) = e.get();
                e.set((id, depth + 1, counted));
                true
            }
            None => false,
        }
    }

    /// One read of `id` fewer; if that was its last recorded read, whether
    /// its first read was counted in the slot (`None`: reads remain, or the
    /// read was not recorded).
    pub(crate) fn pop(&self, id: u64) -> Option<bool> {
        let e = self
            .entries
            .iter()
            .find(|e| e.get().0 == id && e.get().1 != 0)?;
        let (id, depth, counted) = e.get();
        e.set((id, depth - 1, counted));
        (depth == 1).then_some(counted)
    }
}

/// The reads a context holds through the underlying lock of any per-CPU
/// rwlock without a record naming the lock: the common inhibited read
/// (`read_inhibited`), which then costs the underlying read lock and a
/// thread-local add, with no store to the slot between the lock's two
/// atomics. Only a count, so a recursive read that finds a writer waiting
/// cannot tell whether this context holds *that* lock: while the count is
/// not 0 it joins the readers past waiting writers (only a writer inside
/// makes it wait; see `percpu_rwlock`, "Recursive reads"). Lives in
/// `LocalState`; only its context touches it.
///
/// One word: the reads held (bits 0..32) and a running count of the
/// context's counted reads (bits 32..64), whose every `pc_clock_every`-th
/// looks at the clock to end the inhibition window.
#[derive(Debug, Default)]
pub(crate) struct CountedReads(core::cell::Cell<u64>);

impl CountedReads {
    pub(crate) const fn new() -> Self {
        Self(core::cell::Cell::new(0))
    }

    /// One more read held; true on one in `every`, when the caller should
    /// look at the clock. (The held count cannot reach 2^32 and carry into
    /// the running count: the underlying lock refuses readers at 2^24.)
    #[inline(always)]
    pub(crate) fn enter(&self, every: u32) -> bool {
        let n = self.0.get().wrapping_add(1 << 32 | 1);
        self.0.set(n);
        ((n >> 32) as u32).is_multiple_of(every)
    }

    /// One read held fewer.
    #[inline(always)]
    pub(crate) fn leave(&self) {
        let n = self.0.get();
        debug_assert_ne!(n as u32, 0, "a counted read released twice");
        self.0.set(n.wrapping_sub(1));
    }

    /// Whether the context holds any counted read.
    #[inline]
    pub(crate) fn any(&self) -> bool {
        self.0.get() as u32 != 0
    }
}

/// The slot a read token names when its read holds the underlying read
/// lock and is recorded in the thread-local list (no slot of its own): in
/// no table, never written (its word stays 0). A counted read's token
/// names no slot, so that its release, the common inhibited one, needs a
/// single test.
#[cfg(not(any(loom, shuttle)))]
static LISTED: Slot = Slot::new();
#[cfg(any(loom, shuttle))]
crate::sync::model_lazy_static! {
    static ref LISTED: Slot = Slot::new();
}

/// The marker slot of listed reads (see [`LISTED`]).
#[inline(always)]
pub(crate) fn listed_marker() -> &'static Slot {
    &LISTED
}

/// Per-thread slot indices for the std platform.
///
/// A thread takes the lowest free index on its first read and gives it back
/// when it exits, but only if its slot is free in every table: a guard that
/// is dropped by a later thread-local destructor, or was forgotten, keeps
/// writing (or naming a lock in) that slot, so the index is then retired for
/// good (a forgotten guard holds its lock forever anyway). `bound` is the
/// high-water mark of indices ever handed out: writers scan `0..bound`.
#[cfg(all(feature = "std", not(any(loom, shuttle))))]
pub(crate) mod thread_slot {
    use core::cell::Cell;

    use super::{SLOT_WORDS, SLOTS};
    use crate::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

    /// `INDEX` value before the thread asked for a slot.
    const UNSET: u32 = 0;
    /// `INDEX` value once the thread gave its slot back (it is exiting).
    const DEAD: u32 = u32::MAX;

    /// Bit `i % 64` of word `i / 64`: index `i` is owned by a live thread
    /// (or retired).
    static USED: [AtomicU64; SLOT_WORDS] = [const { AtomicU64::new(0) }; SLOT_WORDS];
    /// One past the highest index ever handed out.
    static BOUND: AtomicUsize = AtomicUsize::new(0);

    std::thread_local! {
        /// `UNSET`, `DEAD`, or the thread's index + 1.
        static INDEX: Cell<u32> = const { Cell::new(UNSET) };
        /// Gives the index back when the thread exits.
        static OWNER: Owner = const { Owner };
    }

    struct Owner;

    impl Drop for Owner {
        fn drop(&mut self) {
            let v = INDEX.with(|c| c.replace(DEAD));
            // No slot for the inline read from here on (later
            // thread-local destructors may still read).
            set_inline(SLOTS);
            if v == UNSET || v == DEAD {
                return;
            }
            let i = (v - 1) as usize;
            if super::all_free(i) {
                // Our read counts go to each table's retired ones: the next
                // owner of the index starts from 0.
                super::retire_counts(i);
                // Release pairs with the next owner's Acquire in `register`:
                // our last slot stores happen before its first.
                USED[i / 64].fetch_and(!(1u64 << (i % 64)), Ordering::Release);
            }
        }
    }

    /// The calling thread's slot index, if it has (or can get) one.
    #[inline]
    pub(crate) fn current() -> Option<usize> {
        let v = INDEX.with(Cell::get);
        index_in(v).or_else(|| if v == UNSET { register() } else { None })
    }

    /// The calling thread's slot index if it already has one (`current`
    /// without handing one out).
    #[inline]
    pub(crate) fn assigned() -> Option<usize> {
        index_in(INDEX.with(Cell::get))
    }

    /// Sets what the std platform's `reader_slot_inline` returns: the
    /// thread's index, or `SLOTS` for none. It lives in the platform's
    /// thread-local `LocalState`, next to the inhibited read's count: the
    /// read's loop then reaches both from one thread-local base (a
    /// thread-local of its own here cost a 2-thread, 50%-reads loop 0.83x
    /// of its throughput, the compiler having run out of registers for
    /// the second base).
    fn set_inline(i: usize) {
        let _ = <crate::platform::StdPlatform as crate::platform::Platform>::with_local(|l| {
            l.slot_inline.set(i)
        });
    }

    /// The slot index an `INDEX` value holds (`None` for `UNSET`, `DEAD`).
    #[inline]
    fn index_in(v: u32) -> Option<usize> {
        (v.wrapping_sub(1) < SLOTS as u32).then(|| (v - 1) as usize)
    }

    /// One past the highest index handed out so far.
    #[inline]
    pub(crate) fn bound() -> usize {
        BOUND.load(Ordering::Relaxed)
    }

    /// Calls `f` for each index owned by a live thread (or retired with a
    /// read still recorded). A thread sets its bit before its first slot
    /// store, which precedes the reader's fence; a writer reads the bitmap
    /// after its fence (as with `BOUND`), so it sees every bit that matters.
    #[inline]
    pub(crate) fn in_use(mut f: impl FnMut(usize)) {
        // Only the words up to the highest index handed out (`BOUND` is
        // read after the writer's fence, as the bits are).
        for (w, word) in USED.iter().enumerate().take(bound().div_ceil(64)) {
            // Acquire pairs with the Release in `Owner::drop`: a slot
            // skipped because its thread exited was freed after that
            // thread's last read, so the read happens before the writer's
            // section.
            let mut used = word.load(Ordering::Acquire);
            while used != 0 {
                f(w * 64 + used.trailing_zeros() as usize);
                used &= used - 1;
            }
        }
    }

    /// Hands out the lowest free index (the writers' scans stay as short
    /// as the number of threads that read at once), or `None` if all
    /// `SLOTS` are taken: the thread then reads through the underlying
    /// lock, and asks again at its next slow read (a thread may have
    /// exited).
    #[cold]
    fn register() -> Option<usize> {
        for (w, word) in USED.iter().enumerate() {
            let mut used = word.load(Ordering::Relaxed);
            loop {
                let free = !used & low_bits(SLOTS - w * 64);
                if free == 0 {
                    break;
                }
                let bit = free.trailing_zeros() as usize;
                // Acquire pairs with the Release in `Owner::drop`.
                match word.compare_exchange_weak(
                    used,
                    used | (1 << bit),
                    Ordering::Acquire,
                    Ordering::Relaxed,
                ) {
                    Ok(_) => return claimed(w * 64 + bit),
                    Err(now) => used = now,
                }
            }
        }
        None
    }

    /// `register` set the bit of index `i`: arrange to give it back at
    /// thread exit, and record it.
    fn claimed(i: usize) -> Option<usize> {
        // Fails if the thread is already tearing down its thread-locals.
        if OWNER.try_with(|_| ()).is_err() {
            USED[i / 64].fetch_and(!(1u64 << (i % 64)), Ordering::Relaxed);
            INDEX.with(|c| c.set(DEAD));
            return None;
        }
        // Ordered before our first slot store, which precedes the reader's
        // fence; a writer reads `BOUND` after its fence.
        BOUND.fetch_max(i + 1, Ordering::Relaxed);
        INDEX.with(|c| c.set(i as u32 + 1));
        set_inline(i);
        Some(i)
    }

    /// The low `n` bits (all 64 for `n >= 64`).
    const fn low_bits(n: usize) -> u64 {
        if n >= 64 { !0 } else { (1u64 << n) - 1 }
    }
}

/// Per-model-thread slot indices under loom and shuttle: handed out in
/// order, never reused (models have a handful of threads; model threads
/// past `SLOTS` read through the underlying lock).
#[cfg(any(loom, shuttle))]
pub(crate) mod thread_slot {
    use core::cell::Cell;

    use super::SLOTS;
    use crate::sync::atomic::{AtomicUsize, Ordering};

    crate::sync::model_lazy_static! {
        static ref NEXT: AtomicUsize = AtomicUsize::new(0);
    }
    crate::sync::model_thread_local! {
        static INDEX: Cell<usize> = Cell::new(usize::MAX);
    }

    pub(crate) fn current() -> Option<usize> {
        INDEX.with(|c| {
            if c.get() == usize::MAX {
                c.set(NEXT.fetch_add(1, Ordering::Relaxed));
            }
            (c.get() < SLOTS).then_some(c.get())
        })
    }

    pub(crate) fn bound() -> usize {
        NEXT.load(Ordering::Relaxed).min(SLOTS)
    }
}
