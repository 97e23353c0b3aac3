//! Instrumentation hooks: how a lock tells lock statistics (feature
//! `stats`) and lockdep (feature `lockdep`) what it does.
//!
//! Every lock in this crate calls these; a lock of your own (a kernel's, a
//! hypervisor's) can call them too and then shows up in
//! `stats::snapshot()` and lockdep reports like ours.
//!
//! # The sequence
//! ```text
//! if !hook::any_active() { lock(); return Held::NONE } // switched off: the plain path
//! let mut p = hook::start(class, kind, addr, access);   // lockdep checks here, before any waiting
//! if !fast_path() {
//!     p.contended();                                   // slow path entered: wait clock starts
//!     ...  hook::park(class, kind, access); hook::wake(class, kind, access, spurious); ...
//!     slow_path();
//! }
//! let held = p.acquired();                             // counted; hold time sampled 1 in N
//! ...
//! unlock(); held.release(addr);                        // hold time, long-hold hook, lockdep pop
//! ```
//! A successful try-lock calls [`try_acquired`] instead of `start` +
//! `acquired`. An operation that waits but holds nothing afterwards (a
//! caller served by another thread's update) ends with [`Pending::passed`].
//! A timed acquisition begins with [`start_timed`] (lockdep treats it as a
//! try-lock) and ends with `acquired`, or [`Pending::timed_out`].
//!
//! # Cost
//! Without both features every function here is an empty `#[inline]`
//! function and [`Pending`] and [`Held`] are zero-sized: no code, no bytes.
//! With a feature compiled in but switched off at run time
//! (`stats::disable()`, `lockdep::set_enabled(false)`),
//! [`start`] and [`try_acquired`] make one Relaxed load of a global flag
//! byte that is only written when switching, so its cache line stays
//! shared by all CPUs; the rest of the operation, slow path included, reuses
//! that snapshot and [`Held::release`] tests the token the guard carries.
//! The slow-path events ([`park`], [`queue_depth`], ...) make their own
//! Relaxed load. Counting every acquisition (which the read shares and
//! contention ratios need) is why `start` sits on the fast path at all.
//! The crate's locks go further: each fast path tests the switch first
//! ([`any_active`]) and, switched off, runs as without the features
//! (a `Pending` that lives through the fast path would be kept, and
//! re-tested, on it; where the slow path takes a callback that refers to
//! it, it is even stored to the stack before the lock's RMW, which then
//! waits for those stores). On x86-64 Linux the switch is patched into
//! the code (Linux's static keys; see [`switch_is_patched`]): switched off,
//! that test is a constant 0 in the instruction stream, with no load. So
//! a lock costs a register test and branch, the guard's empty `Held` and
//! its test at release: 3-9 instructions per lock and unlock, none of them
//! a memory access (`scripts/hooks_off_instructions.sh` counts them);
//! elsewhere one of them is the Relaxed load of the switch. A seqlock
//! read costs none: its test of the sequence's low bit is also the
//! switch's (`odd_or_maybe_active`). The lock methods that test the
//! switch are written to stay inlined into the caller as they are without
//! the features (a call on every acquisition or guard drop halved
//! contended throughput in `locktest`). Acquisitions begun switched off
//! count no slow-path events, with three exceptions, waits that switching
//! statistics on can find under way and count from then on: a PerCpuRwLock
//! read waiting on its underlying lock, a PerCpuRwLock writer waiting for
//! reader slots, and a RefreshOnce caller waiting for an update.
//!
//! Enabled, statistics go to per-thread counters (written only by their
//! thread, with plain loads and stores), so the profiler adds no contended
//! cache line; the clock is read on contended acquisitions and on 1 in N
//! acquisitions for hold times (`stats::set_hold_sample`). With statistics
//! on and lockdep off, an uncontended acquisition is counted inline: `start`
//! resolves the class (one load of the index cached in a `static` or type
//! class) and `acquired` bumps the thread's counter for it and steps the
//! sampling countdown, without a call. The crate's own locks load the
//! switch once (`active_bits`) and, with statistics alone on, try their
//! fast path before anything else and count a success after it
//! (`counted_at_once`): no `Pending` is built, and nothing about a wait
//! is tested. Lockdep, contended acquisitions and sampled holds take the
//! calls out of line.

#[cfg(any(feature = "stats", feature = "lockdep"))]
use crate::class::ClassId;
pub use crate::class::{Access, ClassRef, LockKind};

/// The run-time switch of both features: one byte on a cache line of its
/// own, read Relaxed by every hook (a switch published late only delays
/// when counting starts or stops).
#[cfg(any(feature = "stats", feature = "lockdep"))]
pub(crate) mod active {
    use core::sync::atomic::{AtomicU8, Ordering};

    /// Statistics are being collected.
    #[cfg_attr(not(feature = "stats"), allow(dead_code))]
    pub(crate) const STATS: u8 = 1 << 0;
    /// Lockdep checks and records acquisitions.
    pub(crate) const LOCKDEP: u8 = 1 << 1;
    /// In a [`Pending`](super::Pending) only, never in the switch: the
    /// acquisition is timed ([`start_timed`](super::start_timed)).
    #[cfg_attr(not(feature = "lockdep"), allow(dead_code))]
    pub(crate) const TIMED: u8 = 1 << 7;

    #[repr(align(128))]
    pub(crate) struct Flags(AtomicU8);

    /// Lockdep is on from the start when compiled in (as Linux's
    /// CONFIG_PROVE_LOCKING); statistics start when asked to.
    pub(crate) static ACTIVE: Flags = Flags(AtomicU8::new(if cfg!(feature = "lockdep") {
        LOCKDEP
    } else {
        0
    }));

    #[inline]
    pub(crate) fn load() -> u8 {
        ACTIVE.0.load(Ordering::Relaxed)
    }

    #[allow(dead_code)] // each feature switches its own bit
    pub(crate) fn set(bit: u8, on: bool) {
        if on {
            ACTIVE.0.fetch_or(bit, Ordering::Relaxed);
        } else {
            ACTIVE.0.fetch_and(!bit, Ordering::Relaxed);
        }
        #[cfg(patched_switch)]
        super::patched_switch::follow_switch();
    }
}

/// The switch's test patched into the code (x86-64 Linux).
#[cfg(patched_switch)]
pub(crate) mod patched_switch;

/// Whether the hooks are compiled in at all (either feature): locks use it
/// to keep their code unchanged when they are not.
pub(crate) const COMPILED: bool = cfg!(any(feature = "stats", feature = "lockdep"));

/// Whether statistics or lockdep are switched on (`false` without the
/// features, with no code). A lock tests it first and, when it is clear,
/// takes its plain path with no hook calls and [`Held::NONE`] as its guard
/// state; when set, the sequence above. On x86-64 Linux each inlined call
/// first tests a constant patched into its own code: 0 while the hooks
/// are off (once patched, see [`switch_is_patched`]), else 1, and then one
/// Relaxed load of the switch decides; elsewhere that load alone. The first
/// call that finds the hooks off patches the constants (a few `mprotect`
/// calls, once per process).
#[inline(always)]
pub fn any_active() -> bool {
    active_bits() != 0
}

/// The switch's bits, 0 while both features are off (always 0 without
/// them): [`any_active`] for a lock that goes on to look at which feature
/// is on ([`stats_alone`]), with the one load of the switch.
#[inline(always)]
pub(crate) fn active_bits() -> u8 {
    #[cfg(patched_switch)]
    {
        // Patched for "off", a constant 0; else the load. The patched-off
        // path is laid out as the straight line (no taken branch added to
        // the lock's fast path): the load is needed only while the hooks
        // are on, before the first patch, or where patching was refused.
        if !patched_switch::may_be_on() {
            return 0;
        }
        core::hint::cold_path();
        let on = active::load();
        if on == 0 {
            patched_switch::settle();
        }
        on
    }
    #[cfg(all(any(feature = "stats", feature = "lockdep"), not(patched_switch)))]
    {
        let on = active::load();
        if on != 0 {
            core::hint::cold_path();
        }
        on
    }
    #[cfg(not(any(feature = "stats", feature = "lockdep")))]
    {
        0
    }
}

/// Whether the switch's bits `active` ([`active_bits`]) say statistics
/// alone (lockdep off): an acquisition that gets its lock without waiting
/// then needs nothing before it and is counted after it
/// ([`counted_at_once`]).
#[inline(always)]
pub(crate) fn stats_alone(active: u8) -> bool {
    #[cfg(feature = "stats")]
    {
        active == active::STATS
    }
    #[cfg(not(feature = "stats"))]
    {
        let _ = active;
        false
    }
}

/// An acquisition that got its lock without waiting while statistics
/// alone are on ([`stats_alone`]): counted as [`start`] and
/// [`Pending::acquired`] count it, inline, with no `Pending` built
/// before it (nothing before the lock is taken, no wait to test after).
#[inline(always)]
pub(crate) fn counted_at_once(class: ClassRef, kind: LockKind, access: Access) -> Held {
    #[cfg(feature = "stats")]
    {
        Held::counted(class.resolve(kind).index, access)
    }
    #[cfg(not(feature = "stats"))]
    {
        let _ = (class, kind, access);
        Held::NONE
    }
}

/// Whether `word & LOW` is not 0 or the hooks may be on, for a fast path
/// that tests those bits anyway (a seqlock's odd sequence, a
/// PerCpuRwLock's mode): with the switch patched into the code, both in
/// one `test` instruction, the one the path had without the hooks, so
/// that a switched-off acquisition costs nothing more
/// ([`patched_switch::masked_or_may_be_on`]; `word` must have
/// [`SEQ_BASE`]'s bit set whenever the caller's path must not run with
/// the hooks on). Elsewhere the low bits, then [`any_active`]. `true`
/// sends the caller to a second look: [`any_active`], then the bits.
#[inline(always)]
pub(crate) fn masked_or_maybe_active<const LOW: u8>(word: usize) -> bool {
    #[cfg(patched_switch)]
    {
        patched_switch::masked_or_may_be_on::<LOW>(word)
    }
    #[cfg(not(patched_switch))]
    {
        word & LOW as usize != 0 || any_active()
    }
}

/// [`masked_or_maybe_active`] of the low bit: a seqlock's odd sequence.
#[inline(always)]
pub(crate) fn odd_or_maybe_active(word: usize) -> bool {
    masked_or_maybe_active::<1>(word)
}

/// The bit a word tested by [`masked_or_maybe_active`] keeps set (0 where
/// the switch is not patched into the code).
#[cfg(patched_switch)]
pub(crate) const SEQ_BASE: usize = patched_switch::MASK_SITE_BIT;
/// The bit a word tested by [`masked_or_maybe_active`] keeps set (0 where
/// the switch is not patched into the code).
#[cfg(not(patched_switch))]
pub(crate) const SEQ_BASE: usize = 0;

/// Whether the switch is patched into the code: on x86-64 Linux, once
/// the first hooked acquisition found the hooks switched off, each lock's
/// fast path tests a constant in its own instructions instead of loading
/// the switch, and switching rewrites those constants (Linux's static
/// keys, done in user space). `false` on other targets, before that first
/// acquisition, where the system refused to make code writable, or when
/// the environment variable `SCALELOCK_NO_CODE_PATCHING` is set (to
/// anything but empty or `0`) at that first acquisition: the hooks then
/// load the switch, which is correct and a little dearer.
pub fn switch_is_patched() -> bool {
    #[cfg(patched_switch)]
    {
        patched_switch::patched()
    }
    #[cfg(not(patched_switch))]
    {
        false
    }
}

/// A per-CPU read that got the lock without waiting, while [`stats_alone`]:
/// counted as [`start`] and [`Pending::acquired_per_cpu_read`] count it
/// (`fast`: it took its slot's fast path), inline, with no `Pending`
/// carried across the read.
#[inline(always)]
pub(crate) fn per_cpu_read_counted(
    class: ClassRef,
    kind: LockKind,
    access: Access,
    fast: bool,
) -> Held {
    #[cfg(feature = "stats")]
    {
        let class = class.resolve(kind).index;
        match crate::stats::counters::per_cpu_read_acquired(class, fast) {
            0 => Held::NONE,
            start => Held {
                start,
                ..Held::unsampled(class, HELD_STATS, access)
            },
        }
    }
    #[cfg(not(feature = "stats"))]
    {
        let _ = (class, kind, access, fast);
        Held::NONE
    }
}

/// An acquisition in progress, from [`start`] to [`Pending::acquired`] (or
/// [`Pending::passed`]). Zero-sized without the features.
#[must_use = "end an acquisition with `acquired` or `passed`"]
pub struct Pending {
    #[cfg(any(feature = "stats", feature = "lockdep"))]
    active: u8,
    #[cfg(any(feature = "stats", feature = "lockdep"))]
    class: ClassId,
    #[cfg(any(feature = "stats", feature = "lockdep"))]
    access: Access,
    #[cfg(any(feature = "stats", feature = "lockdep"))]
    #[cfg_attr(not(feature = "lockdep"), allow(dead_code))]
    instance: usize,
    /// Clock at `contended`, 0 if not measured.
    #[cfg(any(feature = "stats", feature = "lockdep"))]
    #[cfg_attr(not(feature = "stats"), allow(dead_code))]
    wait_start: u64,
}

/// What a held lock must remember for its release: carry it in the guard
/// (lock_api 0.5 guard state). Zero-sized without the features.
///
/// Two whole words (one with lockdep alone): guards and tokens carrying it
/// are copied word by word, with no narrow fields whose piecewise copies a
/// wide reload could not forward from the store buffer. A hold with nothing
/// to record at its release (not sampled, not on lockdep's stack) is
/// [`Held::NONE`], all zeroes: building it costs no work, and the release
/// tests one word.
#[must_use = "pass it to `release` when unlocking"]
pub struct Held {
    /// Clock at acquisition if this hold is sampled, else 0.
    #[cfg(feature = "stats")]
    start: u64,
    /// The class index (bits 0..32), the `HELD_*` flags (bits 32..40) and
    /// the access (bits 40..48, `access_bits`); 0 if the release has
    /// nothing to do (no flag is set), else never 0.
    #[cfg(any(feature = "stats", feature = "lockdep"))]
    meta: u64,
}

/// `Held` flags: statistics counted the acquisition.
#[cfg(feature = "stats")]
const HELD_STATS: u8 = 1 << 0;
/// `Held` flags: lockdep pushed the lock on the thread's held stack.
#[cfg(feature = "lockdep")]
const HELD_LOCKDEP: u8 = 1 << 1;

/// `Access` as the bits of `Held::meta`.
#[cfg(any(feature = "stats", feature = "lockdep"))]
#[inline(always)]
const fn access_bits(access: Access) -> u64 {
    match access {
        Access::Write => 0,
        Access::Read => 1,
        Access::RecursiveRead => 2,
        Access::Upgradable => 3,
        Access::ReentrantRead => 4,
    }
}

#[cfg(any(feature = "stats", feature = "lockdep"))]
impl Held {
    /// A hold of class index `class` with `flags`, not sampled.
    #[inline(always)]
    const fn unsampled(class: u32, flags: u8, access: Access) -> Held {
        Held {
            #[cfg(feature = "stats")]
            start: 0,
            meta: class as u64 | (flags as u64) << 32 | access_bits(access) << 40,
        }
    }

    #[inline(always)]
    fn class(&self) -> u32 {
        self.meta as u32
    }

    #[inline(always)]
    fn flags(&self) -> u8 {
        (self.meta >> 32) as u8
    }

    #[inline(always)]
    fn add_flags(&mut self, flags: u8) {
        self.meta |= u64::from(flags) << 32;
    }

    /// This hold if its release has work (a flag is set), else
    /// [`Held::NONE`].
    #[inline(always)]
    fn or_none(self) -> Held {
        if self.flags() != 0 { self } else { Held::NONE }
    }

    #[inline(always)]
    fn access(&self) -> Access {
        match (self.meta >> 40) as u8 {
            0 => Access::Write,
            1 => Access::Read,
            2 => Access::RecursiveRead,
            3 => Access::Upgradable,
            _ => Access::ReentrantRead,
        }
    }
}

impl Held {
    /// A hold nobody recorded (the features are off, or were when it began).
    pub const NONE: Held = Held {
        #[cfg(feature = "stats")]
        start: 0,
        #[cfg(any(feature = "stats", feature = "lockdep"))]
        meta: 0,
    };

    /// An uncontended acquisition that only statistics follow: counted
    /// (inline, see the counters' "uncontended path"), its hold sampled
    /// (else [`Held::NONE`]: nothing to record at the release).
    #[cfg(feature = "stats")]
    #[inline(always)]
    fn counted(class: u32, access: Access) -> Held {
        match crate::stats::counters::acquired_uncontended(class, access) {
            0 => Held::NONE,
            start => Held {
                start,
                ..Held::unsampled(class, HELD_STATS, access)
            },
        }
    }

    /// An upgradable read ([`Access::Upgradable`]) of the lock at address
    /// `instance` is about to wait to become a write (an untimed upgrade;
    /// call it before waiting): lockdep checks the upgrade as an
    /// acquisition taken now that waits for the lock's readers (a read of
    /// that lock this thread holds would never let it through) and counts
    /// the hold as a write from then on. A report
    /// that panics (no report handler) calls `give_up` first, which must
    /// release the upgradable read: the panic unwinds out of the upgrade,
    /// and nobody else would.
    #[inline]
    pub fn upgrading(&self, instance: usize, give_up: impl FnOnce()) {
        #[cfg(feature = "lockdep")]
        if self.flags() & HELD_LOCKDEP != 0 {
            if crate::lockdep::is_enabled() {
                // A report that panics gives the upgradable read back: its
                // hold ends there, and its statistics with it (as a release
                // whose hook panics ends them), recorded as the panic
                // unwinds (after lockdep removed the entry; a long-hold
                // hook's panic is then caught, see `report_long_hold`).
                #[cfg(feature = "stats")]
                struct EndStatsOnUnwind<'a>(&'a Held);
                #[cfg(feature = "stats")]
                impl Drop for EndStatsOnUnwind<'_> {
                    fn drop(&mut self) {
                        let h = self.0;
                        if h.flags() & HELD_STATS != 0 {
                            crate::stats::counters::released(h.class(), h.access(), h.start);
                        }
                    }
                }
                #[cfg(feature = "stats")]
                let end_stats = EndStatsOnUnwind(self);
                crate::lockdep::upgrading(self.class(), instance, give_up);
                #[cfg(feature = "stats")]
                core::mem::forget(end_stats);
            } else {
                crate::lockdep::upgraded(self.class(), instance);
            }
        }
        #[cfg(not(feature = "lockdep"))]
        let _ = (instance, give_up);
    }

    /// An upgradable read of the lock at address `instance` became a write
    /// without waiting (a try or timed upgrade that succeeded): lockdep
    /// counts the hold as a write from now on.
    #[inline]
    pub fn upgraded(&self, instance: usize) {
        #[cfg(feature = "lockdep")]
        if self.flags() & HELD_LOCKDEP != 0 {
            crate::lockdep::upgraded(self.class(), instance);
        }
        #[cfg(not(feature = "lockdep"))]
        let _ = instance;
    }

    /// A `bump` of the lock at address `instance` is about to yield it if
    /// somebody waits: lockdep checks the re-acquisition now, holding the
    /// lock (see `lockdep::check_bump`), whether or not a thread waits and
    /// the bump is made. (Checked only at the re-acquisition, an order
    /// that deadlocks was reported only when a thread happened to wait, and
    /// then with the lock released, where the report's panic aborts.)
    #[inline]
    pub(crate) fn check_bump(&self, instance: usize) {
        #[cfg(feature = "lockdep")]
        if self.flags() & HELD_LOCKDEP != 0 && crate::lockdep::is_enabled() {
            crate::lockdep::check_bump(self.class(), instance, self.access());
        }
        #[cfg(not(feature = "lockdep"))]
        let _ = instance;
    }

    /// The lock at address `instance` was released (call it right after
    /// the unlock): records the hold time if sampled, runs the long-hold
    /// hook, and pops the lock off lockdep's held stack.
    ///
    /// Call it on the thread that took the lock: lockdep's held stacks are
    /// per thread. Released on another thread (a guard that is `Send`), the
    /// hold stays on the taker's stack (its next acquisition of the lock is
    /// then reported as recursive, and what it takes later is recorded as
    /// taken under the lock), and what is popped is the releasing thread's
    /// own hold of that lock in the same mode, if it has one.
    #[inline]
    pub fn release(self, instance: usize) {
        // Only a sampled hold or a lockdep entry has anything to record:
        // an unsampled statistics hold ends here, without a call.
        #[cfg(any(feature = "stats", feature = "lockdep"))]
        if self.needs_release() {
            self.release_recorded(instance);
        }
        #[cfg(not(any(feature = "stats", feature = "lockdep")))]
        let _ = instance;
    }

    /// A sampled hold or a lockdep entry: `meta` is 0 for anything else
    /// (see the field), so one test of one word.
    #[cfg(any(feature = "stats", feature = "lockdep"))]
    #[inline(always)]
    fn needs_release(&self) -> bool {
        self.meta != 0
    }

    #[cfg(any(feature = "stats", feature = "lockdep"))]
    #[inline(never)]
    fn release_recorded(self, instance: usize) {
        #[cfg(feature = "lockdep")]
        if self.flags() & HELD_LOCKDEP != 0 {
            crate::lockdep::release(self.class(), instance, self.access());
        }
        #[cfg(feature = "stats")]
        if self.flags() & HELD_STATS != 0 {
            crate::stats::counters::released(self.class(), self.access(), self.start);
        }
        let _ = instance;
    }
}

impl core::fmt::Debug for Held {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Held").finish_non_exhaustive()
    }
}

impl core::fmt::Debug for Pending {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Pending").finish_non_exhaustive()
    }
}

/// Begins an acquisition of the lock at address `instance`, in `class`, of
/// lock type `kind`: lockdep checks it here, before the caller can block
/// (a possible deadlock is reported instead of happening).
#[inline]
pub fn start(class: ClassRef, kind: LockKind, instance: usize, access: Access) -> Pending {
    #[cfg(any(feature = "stats", feature = "lockdep"))]
    {
        let active = active::load();
        if active == 0 {
            return Pending::off(access, instance);
        }
        // Built here, in registers (one load for a registered `static` or
        // type class); only lockdep's check is a call.
        let class = class.resolve(kind);
        #[cfg(feature = "lockdep")]
        if active & active::LOCKDEP != 0 {
            lockdep_check(class, instance, access);
        }
        Pending {
            active,
            class,
            access,
            instance,
            wait_start: 0,
        }
    }
    #[cfg(not(any(feature = "stats", feature = "lockdep")))]
    {
        let _ = (class, kind, instance, access);
        Pending {}
    }
}

/// Begins an operation that statistics count but lockdep does not check:
/// an optimistic read (a seqlock's) that never waits for anything that can
/// block. End it with [`Pending::passed`].
#[inline]
pub fn start_optimistic(class: ClassRef, kind: LockKind, access: Access) -> Pending {
    #[cfg(feature = "stats")]
    {
        let active = active::load() & active::STATS;
        Pending {
            active,
            class: if active != 0 {
                class.resolve(kind)
            } else {
                ClassId {
                    index: 0,
                    ordered: false,
                }
            },
            access,
            instance: 0,
            wait_start: 0,
        }
    }
    #[cfg(all(feature = "lockdep", not(feature = "stats")))]
    {
        let _ = (class, kind);
        Pending::off(access, 0)
    }
    #[cfg(not(any(feature = "stats", feature = "lockdep")))]
    {
        let _ = (class, kind, access);
        Pending {}
    }
}

/// An optimistic read that succeeded at its first attempt: counted as
/// [`start_optimistic`] and [`Pending::passed`] count it, without a
/// `Pending` (for reads so short that carrying one costs more than the
/// counting).
#[inline(always)]
pub(crate) fn optimistic_passed(class: ClassRef, kind: LockKind, access: Access) {
    #[cfg(feature = "stats")]
    if active::load() & active::STATS != 0 {
        crate::stats::counters::passed_uncontended(class.resolve(kind).index, access);
    }
    #[cfg(not(feature = "stats"))]
    let _ = (class, kind, access);
}

/// Begins a timed acquisition (`try_lock_for`, `try_write_until`, ...) of
/// the lock at `instance`. Statistics count it as [`start`]'s: contended if
/// it waits, an acquisition with its wait if it gets the lock; one that
/// gives up ([`Pending::timed_out`]) is neither an acquisition nor a
/// contended one: if it waited it is counted in the access's `timeouts`
/// (so `contended` never exceeds `acquisitions`), and its wait is not
/// recorded. Lockdep treats it as a
/// try-lock: a timed wait ends, so it cannot deadlock, and no dependency is
/// recorded into it (nor a recursion reported); once acquired it is on the
/// held stack like any lock, and what is taken under it depends on it.
#[inline]
pub fn start_timed(class: ClassRef, kind: LockKind, instance: usize, access: Access) -> Pending {
    #[cfg(any(feature = "stats", feature = "lockdep"))]
    {
        let active = active::load();
        if active == 0 {
            return Pending::off(access, instance);
        }
        start_timed_active(active, class, kind, instance, access)
    }
    #[cfg(not(any(feature = "stats", feature = "lockdep")))]
    {
        let _ = (class, kind, instance, access);
        Pending {}
    }
}

#[cfg(any(feature = "stats", feature = "lockdep"))]
#[inline(never)]
fn start_timed_active(
    active: u8,
    class: ClassRef,
    kind: LockKind,
    instance: usize,
    access: Access,
) -> Pending {
    Pending {
        active: active | active::TIMED,
        class: class.resolve(kind),
        access,
        instance,
        wait_start: 0,
    }
}

#[cfg(feature = "lockdep")]
#[inline(never)]
fn lockdep_check(class: ClassId, instance: usize, access: Access) {
    crate::lockdep::check(class, instance, access);
}

#[cfg(any(feature = "stats", feature = "lockdep"))]
impl Pending {
    /// An operation that neither statistics nor lockdep follow (both
    /// switched off at run time): its hooks do nothing.
    #[inline]
    const fn off(access: Access, instance: usize) -> Self {
        Pending {
            active: 0,
            class: ClassId {
                index: 0,
                ordered: false,
            },
            access,
            instance,
            wait_start: 0,
        }
    }
}

impl Pending {
    /// `ev` if statistics follow this acquisition, else `Events::NONE`:
    /// an acquisition begun switched off counts no slow-path events.
    #[inline]
    pub(crate) fn events(&self, ev: crate::events::Events) -> crate::events::Events {
        #[cfg(feature = "stats")]
        if self.active & active::STATS != 0 {
            return ev;
        }
        let _ = ev;
        crate::events::Events::NONE
    }

    /// The fast path failed: the acquisition is contended. Starts the wait
    /// clock. Call it at most once.
    #[inline]
    pub fn contended(&mut self) {
        #[cfg(feature = "stats")]
        if self.active & active::STATS != 0 {
            self.wait_start = crate::stats::counters::contended(self.class.index, self.access);
        }
    }

    /// The lock is held: counts the acquisition, records the wait, samples
    /// the hold time, pushes the lock on lockdep's held stack.
    #[inline]
    pub fn acquired(self) -> Held {
        // Statistics without lockdep, uncontended: counted inline.
        #[cfg(feature = "stats")]
        if self.active == active::STATS && self.wait_start == 0 {
            return Held::counted(self.class.index, self.access);
        }
        // The fields one by one, so that `self` can stay in registers.
        #[cfg(any(feature = "stats", feature = "lockdep"))]
        if self.active != 0 {
            return acquired_active(
                self.active,
                self.class,
                self.access,
                self.instance,
                self.wait_start,
            );
        }
        Held::NONE
    }

    /// A timed acquisition ([`start_timed`]) gave up: nothing is held. If
    /// it waited ([`contended`](Self::contended)), it counts as a timeout
    /// of its access, not as a contended acquisition.
    #[inline]
    pub fn timed_out(self) {
        #[cfg(feature = "stats")]
        if self.active & active::STATS != 0 && self.wait_start != 0 {
            crate::stats::counters::wait_event(
                self.class.index,
                self.access,
                crate::stats::counters::WaitEvent::TimedOut,
            );
        }
        #[cfg(not(feature = "stats"))]
        let _ = self;
    }

    /// The operation is over without holding anything (it waited for, and
    /// was served by, another thread's work): counted as an acquisition
    /// with its wait, no hold.
    #[inline]
    pub fn passed(self) {
        #[cfg(feature = "stats")]
        if self.active & active::STATS != 0 {
            if self.wait_start == 0 {
                crate::stats::counters::passed_uncontended(self.class.index, self.access);
            } else {
                crate::stats::counters::passed(self.class.index, self.access, self.wait_start);
            }
        }
    }

    /// A per-CPU read took the fast path (the reader's own slot).
    #[inline]
    pub fn fast_read(&self) {
        #[cfg(feature = "stats")]
        if self.active & active::STATS != 0 {
            crate::stats::counters::per_cpu_read(self.class.index, true);
        }
    }

    /// A per-CPU read is held: [`fast_read`](Self::fast_read) if `fast`
    /// (it took its slot's fast path), else
    /// [`fallback_read`](Self::fallback_read), then
    /// [`acquired`](Self::acquired). With statistics alone on, an
    /// uncontended read, fast or fallback, is counted in one go.
    #[inline]
    pub(crate) fn acquired_per_cpu_read(self, fast: bool) -> Held {
        #[cfg(feature = "stats")]
        if self.active == active::STATS && self.wait_start == 0 {
            return match crate::stats::counters::per_cpu_read_acquired(self.class.index, fast) {
                0 => Held::NONE,
                start => Held {
                    start,
                    ..Held::unsampled(self.class.index, HELD_STATS, self.access)
                },
            };
        }
        if fast {
            self.fast_read();
        } else {
            self.fallback_read();
        }
        self.acquired()
    }

    /// A per-CPU read fell back to the underlying lock.
    #[inline]
    pub fn fallback_read(&self) {
        #[cfg(feature = "stats")]
        if self.active & active::STATS != 0 {
            crate::stats::counters::per_cpu_read(self.class.index, false);
        }
    }
}

/// `Pending::acquired` with lockdep on, or a contended acquisition.
#[cfg(any(feature = "stats", feature = "lockdep"))]
#[inline(never)]
fn acquired_active(
    active: u8,
    class: ClassId,
    access: Access,
    instance: usize,
    wait_start: u64,
) -> Held {
    let mut held = Held::unsampled(class.index, 0, access);
    #[cfg(feature = "lockdep")]
    if active & active::LOCKDEP != 0
        && crate::lockdep::push(class, instance, access, active & active::TIMED != 0)
    {
        held.add_flags(HELD_LOCKDEP);
    }
    #[cfg(feature = "stats")]
    if active & active::STATS != 0 {
        held.start = crate::stats::counters::acquired(class.index, access, wait_start);
        if held.start != 0 {
            held.add_flags(HELD_STATS);
        }
    }
    let _ = (instance, wait_start);
    held.or_none()
}

/// A try-lock of the lock at `instance` succeeded. Try-locks never wait, so
/// lockdep records no dependency *into* them (as Linux's lockdep), only
/// from them to what is taken while they are held.
#[inline]
pub fn try_acquired(class: ClassRef, kind: LockKind, instance: usize, access: Access) -> Held {
    #[cfg(any(feature = "stats", feature = "lockdep"))]
    {
        let active = active::load();
        // Statistics without lockdep: counted inline.
        #[cfg(feature = "stats")]
        if active == active::STATS {
            return Held::counted(class.resolve(kind).index, access);
        }
        if active != 0 {
            return try_acquired_active(active, class, kind, instance, access);
        }
        Held::NONE
    }
    #[cfg(not(any(feature = "stats", feature = "lockdep")))]
    {
        let _ = (class, kind, instance, access);
        Held::NONE
    }
}

#[cfg(any(feature = "stats", feature = "lockdep"))]
#[inline(never)]
fn try_acquired_active(
    active: u8,
    class: ClassRef,
    kind: LockKind,
    instance: usize,
    access: Access,
) -> Held {
    let class = class.resolve(kind);
    let mut held = Held::unsampled(class.index, 0, access);
    #[cfg(feature = "lockdep")]
    if active & active::LOCKDEP != 0 && crate::lockdep::push(class, instance, access, true) {
        held.add_flags(HELD_LOCKDEP);
    }
    #[cfg(feature = "stats")]
    if active & active::STATS != 0 {
        held.start = crate::stats::counters::acquired(class.index, access, 0);
        if held.start != 0 {
            held.add_flags(HELD_STATS);
        }
    }
    let _ = (active, instance);
    held.or_none()
}

/// Defines slow-path event hooks, counted per class and per read/write
/// (`access`: that of the acquisition that waits; an upgradable read counts
/// as a write, as its acquisition does): one Relaxed load when statistics
/// are off.
macro_rules! wait_event_hooks {
    ($($(#[$doc:meta])* $name:ident => $event:ident;)*) => {
        $(
            $(#[$doc])*
            #[inline]
            pub fn $name(class: ClassRef, kind: LockKind, access: Access) {
                #[cfg(feature = "stats")]
                if active::load() & active::STATS != 0 {
                    crate::stats::counters::wait_event(
                        class.resolve(kind).index,
                        access,
                        crate::stats::counters::WaitEvent::$event,
                    );
                }
                #[cfg(not(feature = "stats"))]
                let _ = (class, kind, access);
            }
        )*
    };
}

wait_event_hooks! {
    /// The second contender waited on the lock word without queueing
    /// (qspinlock's pending bit).
    pending_path => PendingPath;
    /// A holder's batch ended (it raised the hand-off flag after its bounded
    /// run of re-acquisitions).
    batch_end => BatchEnd;
    /// The lock was handed to a waiter that had claimed it (no newcomer
    /// could take it first).
    handoff => Handoff;
    /// A waiter went to sleep (futex wait, or the platform's `wait`).
    park => Park;
    /// A spinning contender took a lock reserved for a waiter that did not
    /// come for it in time (it could not run: threads outnumber CPUs, or
    /// it was preempted).
    steal => Steal;
}

/// Defines per-class event hooks (events of one access mode by nature):
/// one Relaxed load when statistics are off.
macro_rules! event_hooks {
    ($($(#[$doc:meta])* $name:ident => $event:ident;)*) => {
        $(
            $(#[$doc])*
            #[inline]
            pub fn $name(class: ClassRef, kind: LockKind) {
                #[cfg(feature = "stats")]
                if active::load() & active::STATS != 0 {
                    crate::stats::counters::event(
                        class.resolve(kind).index,
                        crate::stats::counters::Event::$event,
                    );
                }
                #[cfg(not(feature = "stats"))]
                let _ = (class, kind);
            }
        )*
    };
}

event_hooks! {
    /// A RefreshOnce caller was served by another caller's update.
    refresh_coalesced => RefreshCoalesced;
    /// A SeqLock read overlapped a write and retried.
    seqlock_retry => SeqlockRetry;
}

/// A sleeping waiter woke up; `spurious` if what it waited for had not
/// happened (it goes back to waiting). Counted for `access`, as [`park`].
#[inline]
pub fn wake(class: ClassRef, kind: LockKind, access: Access, spurious: bool) {
    #[cfg(feature = "stats")]
    if active::load() & active::STATS != 0 {
        use crate::stats::counters::WaitEvent;
        crate::stats::counters::wait_event(
            class.resolve(kind).index,
            access,
            if spurious {
                WaitEvent::SpuriousWake
            } else {
                WaitEvent::Wake
            },
        );
    }
    #[cfg(not(feature = "stats"))]
    let _ = (class, kind, access, spurious);
}

/// A waiter joined a queue `depth` long (itself included); the class keeps
/// the maximum per access (`access`: the waiter's, as for [`park`]).
#[inline]
pub fn queue_depth(class: ClassRef, kind: LockKind, access: Access, depth: u32) {
    #[cfg(feature = "stats")]
    if active::load() & active::STATS != 0 {
        crate::stats::counters::queue_depth(class.resolve(kind).index, access, u64::from(depth));
    }
    #[cfg(not(feature = "stats"))]
    let _ = (class, kind, access, depth);
}

/// A per-CPU rwlock writer revoked the reader bias with a plain full
/// fence (a symmetric revocation), which took `cost_ns` (fence and slot
/// scan).
#[inline]
pub fn revocation(class: ClassRef, kind: LockKind, cost_ns: u64) {
    record_revocation(class, kind, cost_ns, false);
}

/// A per-CPU rwlock writer revoked the reader bias with the heavy fence
/// (`membarrier`: a biased revocation), which took `cost_ns` (fence and
/// slot scan).
#[inline]
pub fn heavy_revocation(class: ClassRef, kind: LockKind, cost_ns: u64) {
    record_revocation(class, kind, cost_ns, true);
}

/// [`revocation`] and [`heavy_revocation`]: `heavy` says which fence.
#[inline]
fn record_revocation(class: ClassRef, kind: LockKind, cost_ns: u64, heavy: bool) {
    #[cfg(feature = "stats")]
    if active::load() & active::STATS != 0 {
        crate::stats::counters::revocation(class.resolve(kind).index, cost_ns, heavy);
    }
    #[cfg(not(feature = "stats"))]
    let _ = (class, kind, cost_ns, heavy);
}

/// A clock for hooks that time something themselves (a revocation): the
/// statistics clock in nanoseconds when statistics are on, else 0 (and no
/// clock read). A start of 0 means "not timed": statistics may have been
/// switched on since, and `clock_ns() - 0` is the clock's whole age, not a
/// cost; report nothing for it.
#[inline]
pub fn clock_ns() -> u64 {
    #[cfg(feature = "stats")]
    if active::load() & active::STATS != 0 {
        return crate::stats::clock::now_ns();
    }
    0
}
