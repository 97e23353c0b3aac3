//! `SeqLock<T>`: readers copy a value without writing anything shared;
//! writers serialise on a [`RawQSpinLock`] and bump a sequence number.
//!
//! # Protocol
//! `seq` is even while no write is in progress and odd during one.
//!
//! ```text
//! writer (holds `lock`)                 reader
//!   s = seq                               s1 = seq.load(Acquire)   (retry if odd)
//!   seq.store(s + 1, Relaxed)             copy data, Relaxed atomic loads
//!   fence(Release)                        fence(Acquire)
//!   store data, Relaxed atomic stores     s2 = seq.load(Relaxed)
//!   seq.store(s + 2, Release)             valid iff s1 == s2
//! ```
//!
//! # Why a validated read is never torn
//! Every data access is an atomic access, so there is no data race in the
//! Rust (C++20) memory model: a torn read is merely a *stale mixture* of
//! values, which we detect and discard. (This is the construction in Hans
//! Boehm's "Can seqlocks get along with programming language memory
//! models?", 2012.) Suppose the reader validated with `s1 == s2 == 2k`:
//! - Every write *before* the one that produced `2k`: the reader's Acquire
//!   load of `s1` read the Release store of `2k` (or a later value; but
//!   `s1 == s2` and `seq` only grows), so those writes' data stores happen
//!   before the reader's loads, which therefore see them or something newer.
//! - Any write *after* it: if the reader's copy saw even one of its data
//!   stores, then the writer's `fence(Release)` (after its odd `seq` store)
//!   synchronizes with the reader's `fence(Acquire)` (after that load), so
//!   the odd store happens before the reader's `s2` load, which then reads
//!   `>= 2k + 1`: contradiction. So the copy is exactly the data of write
//!   `2k`.
//!
//! No volatile reads and no `swap`: just the two fences. `seq` wraps after
//! `usize::MAX / 2` writes; a reader would have to sleep through exactly a
//! multiple of that many writes between its two loads to be fooled.
//!
//! # Storage and padding
//! `T` is stored in memory aligned for `usize` and copied in `usize`-sized
//! chunks (and single bytes for the tail) with Relaxed atomics; writer and
//! readers use the same chunks, so no two atomics of different sizes
//! overlap. Loading bytes that are uninitialised (padding in a `T: Copy`)
//! through an atomic integer is undefined behaviour, and Rust has no stable
//! atomic `MaybeUninit` copy, so `T` must implement [`NoUninit`]: an unsafe
//! marker for types without padding, implemented here for the primitive
//! scalars and arrays of them (implement it for your own `#[repr(C)]`
//! structs whose fields leave no gaps). A reader copies into a
//! `MaybeUninit<T>` and only calls `assume_init` after validating, so a
//! discarded torn copy is never treated as a `T` (that matters for `bool`
//! and `char`, whose invalid bit patterns a mixture could produce). Raw
//! pointers are not `NoUninit`: an integer copy would strip their
//! provenance.
//!
//! # Waiting
//! A reader that finds a write in progress backs off with [`Backoff`], which
//! yields the CPU once its budget is spent so a preempted writer can finish.
//! Writers queue and park on the `RawQSpinLock`.
//!
//! # Classes, statistics, lockdep
//! A seqlock is in a [lock class](crate::LockClass) ([`SeqLock::with_class`];
//! `new` puts it in the `SeqLock` type class). With the `stats` feature,
//! reads count as read acquisitions (a read that had to retry is a contended
//! one, its retries are counted, and its wait is the time spent retrying;
//! reads have no hold time), writer lock acquisitions as write acquisitions
//! with wait and hold times. A failed [`SeqLock::try_read`] is not counted.
//! With `lockdep` the writer lock is checked like a mutex; reads are not
//! checked, since they never wait for anything that can block (the
//! sequence is odd only while a writer stores the value, never while it
//! runs other code).
//!
//! Where the hooks' run-time switch is patched into the code (x86-64
//! Linux, see [`hook::switch_is_patched`]), `seq` starts with its top bit
//! set and keeps it (for 2^62 writes), and a read's test of the low bit is
//! also the switch's: one `test` against a mask that the switch patches
//! (bit 0 while the hooks are off; bits 0 and 31-63 otherwise, which the
//! top bit makes true). So a read with the hooks compiled in but switched
//! off runs the same instructions as without the features.
//! [`SeqLock::sequence`] leaves that bit out.

use core::marker::PhantomData;
use core::mem::{MaybeUninit, size_of};

use crate::class::{Access, ClassRef, LockKind};
use crate::events::Events;
use crate::hook::{self, Held};
use crate::platform::{DefaultPlatform, Platform};
use crate::qspinlock::RawQSpinLock;
use crate::sync::atomic::{AtomicU8, AtomicUsize, Ordering, fence};
use crate::wait::Backoff;

/// Types that can be copied as plain bytes: every byte of every value is
/// initialised (no padding), and any value's bytes copied into another place
/// form the same value.
///
/// # Safety
/// Implement only for `Copy` types without padding bytes or other
/// uninitialised bytes, and without pointers or references (their
/// provenance would be lost in an integer copy). For a struct this means
/// `#[repr(C)]` (or `transparent`) with fields that are themselves
/// `NoUninit` and leave no gaps, including at the end.
pub unsafe trait NoUninit: Copy + 'static {}

macro_rules! no_uninit {
    ($($t:ty),*) => {
        $(
            // SAFETY: primitive scalars have no padding and no provenance.
            unsafe impl NoUninit for $t {}
        )*
    };
}
no_uninit!(
    (),
    u8,
    u16,
    u32,
    u64,
    u128,
    usize,
    i8,
    i16,
    i32,
    i64,
    i128,
    isize,
    f32,
    f64,
    bool,
    char
);
// SAFETY: an array has no padding between or after its elements.
unsafe impl<T: NoUninit, const N: usize> NoUninit for [T; N] {}

const WORD: usize = size_of::<usize>();

/// The value's storage: `WORDS` `usize` chunks, then `TAIL` bytes.
#[cfg(not(any(loom, shuttle)))]
#[repr(C)]
struct Cells<T> {
    _align: [usize; 0],
    value: core::cell::UnsafeCell<MaybeUninit<T>>,
}

/// Under loom and shuttle the chunks are the checker's atomics, so the model
/// sees every access (neither can view memory as an atomic in place).
#[cfg(any(loom, shuttle))]
struct Cells<T> {
    words: std::boxed::Box<[AtomicUsize]>,
    bytes: std::boxed::Box<[AtomicU8]>,
    _t: PhantomData<T>,
}

impl<T: NoUninit> Cells<T> {
    const WORDS: usize = size_of::<T>() / WORD;
    const TAIL: usize = size_of::<T>() % WORD;

    #[cfg(not(any(loom, shuttle)))]
    const fn new(value: T) -> Self {
        Self {
            _align: [],
            value: core::cell::UnsafeCell::new(MaybeUninit::new(value)),
        }
    }

    #[cfg(any(loom, shuttle))]
    fn new(value: T) -> Self {
        let cells = Self {
            words: (0..Self::WORDS).map(|_| AtomicUsize::new(0)).collect(),
            bytes: (0..Self::TAIL).map(|_| AtomicU8::new(0)).collect(),
            _t: PhantomData,
        };
        cells.store(&value);
        cells
    }

    #[cfg(not(any(loom, shuttle)))]
    #[inline]
    fn word(&self, i: usize) -> &AtomicUsize {
        debug_assert!(i < Self::WORDS);
        // SAFETY: chunk `i` lies inside the value (i < WORDS) and is aligned
        // for usize (`_align`, and i * WORD); it is only ever accessed
        // through this same-sized atomic while shared (see the module docs),
        // and lives as long as `self`.
        unsafe { AtomicUsize::from_ptr(self.value.get().cast::<usize>().add(i)) }
    }

    #[cfg(not(any(loom, shuttle)))]
    #[inline]
    fn byte(&self, j: usize) -> &AtomicU8 {
        debug_assert!(j < Self::TAIL);
        // SAFETY: byte `WORDS * WORD + j` lies inside the value (j < TAIL);
        // it is only ever accessed through this atomic while shared.
        unsafe { AtomicU8::from_ptr(self.value.get().cast::<u8>().add(Self::WORDS * WORD + j)) }
    }

    #[cfg(any(loom, shuttle))]
    fn word(&self, i: usize) -> &AtomicUsize {
        &self.words[i]
    }

    #[cfg(any(loom, shuttle))]
    fn byte(&self, j: usize) -> &AtomicU8 {
        &self.bytes[j]
    }

    /// Copies the cells out with Relaxed loads. The result may be a mixture
    /// of several writes: validate before `assume_init`.
    #[inline]
    fn load(&self) -> MaybeUninit<T> {
        let mut out = MaybeUninit::<T>::uninit();
        let dst = out.as_mut_ptr().cast::<u8>();
        for i in 0..Self::WORDS {
            let w = self.word(i).load(Ordering::Relaxed);
            // SAFETY: `i * WORD + WORD <= size_of::<T>()`, inside `out`.
            unsafe { dst.add(i * WORD).cast::<usize>().write_unaligned(w) };
        }
        for j in 0..Self::TAIL {
            let b = self.byte(j).load(Ordering::Relaxed);
            // SAFETY: `WORDS * WORD + j < size_of::<T>()`, inside `out`.
            unsafe { dst.add(Self::WORDS * WORD + j).write(b) };
        }
        out
    }

    /// Stores `value` into the cells with Relaxed stores.
    #[inline]
    fn store(&self, value: &T) {
        let src = (value as *const T).cast::<u8>();
        for i in 0..Self::WORDS {
            // SAFETY: inside `*value`; `T: NoUninit`, so all of its bytes are
            // initialised and may be read as an integer.
            let w = unsafe { src.add(i * WORD).cast::<usize>().read_unaligned() };
            self.word(i).store(w, Ordering::Relaxed);
        }
        for j in 0..Self::TAIL {
            // SAFETY: as above, for the tail bytes.
            let b = unsafe { src.add(Self::WORDS * WORD + j).read() };
            self.byte(j).store(b, Ordering::Relaxed);
        }
    }
}

/// A sequence lock holding a `T`; see the module documentation.
///
/// Name the type where a lock is made: the platform `P` has a default
/// ([`DefaultPlatform`]), but Rust does not infer a type parameter from
/// its default, so `let s = SeqLock::new(0u64);` alone does not compile
/// (E0283, "type annotations needed").
///
/// ```
/// use scalelock::SeqLock;
///
/// let s: SeqLock<u64> = SeqLock::new(0);
/// s.write(1);
/// assert_eq!(s.read(), 1);
/// ```
/// ```compile_fail,E0283
/// let s = scalelock::SeqLock::new(0u64);
/// s.write(1);
/// ```
pub struct SeqLock<T: NoUninit, P: Platform = DefaultPlatform> {
    /// Even: no write in progress. Odd: a writer is storing.
    seq: AtomicUsize,
    /// Serialises writers; also holds the seqlock's class (zero-sized
    /// without the `stats` and `lockdep` features). Taken through its
    /// uninstrumented core: the seqlock's hooks count the acquisition once,
    /// under `LockKind::SeqLock`.
    lock: RawQSpinLock<P>,
    cells: Cells<T>,
    _platform: PhantomData<fn() -> P>,
}

// SAFETY: all shared access to the value goes through atomics (module docs);
// readers receive copies, so `T: Send` suffices for sharing.
unsafe impl<T: NoUninit + Send, P: Platform> Sync for SeqLock<T, P> {}
// SAFETY: the lock owns a `T`; moving it moves the `T`.
unsafe impl<T: NoUninit + Send, P: Platform> Send for SeqLock<T, P> {}

impl<T: NoUninit, P: Platform> SeqLock<T, P> {
    /// A seqlock holding `value`, in the `SeqLock` type class.
    #[cfg(not(any(loom, shuttle)))]
    pub const fn new(value: T) -> Self {
        Self::with_class(value, ClassRef::TYPE)
    }

    /// A seqlock holding `value`, in the `SeqLock` type class.
    #[cfg(any(loom, shuttle))]
    pub fn new(value: T) -> Self {
        Self::with_class(value, ClassRef::TYPE)
    }

    /// A seqlock holding `value`, in lock class `class`.
    #[cfg(not(any(loom, shuttle)))]
    pub const fn with_class(value: T, class: ClassRef) -> Self {
        Self {
            seq: AtomicUsize::new(hook::SEQ_BASE),
            lock: RawQSpinLock::with_class(class),
            cells: Cells::new(value),
            _platform: PhantomData,
        }
    }

    /// A seqlock holding `value`, in lock class `class`.
    #[cfg(any(loom, shuttle))]
    pub fn with_class(value: T, class: ClassRef) -> Self {
        Self {
            seq: AtomicUsize::new(hook::SEQ_BASE),
            lock: RawQSpinLock::with_class(class),
            cells: Cells::new(value),
            _platform: PhantomData,
        }
    }

    /// The lock class.
    #[inline]
    pub(crate) fn class(&self) -> ClassRef {
        self.lock.class
    }

    /// The writer lock's address, which names the seqlock to lockdep: the
    /// same instance as an acquisition of `raw_lock()` (the seqlock's own
    /// address differs from it wherever the layout does not put `lock`
    /// first, and lockdep then missed a thread taking `raw_lock()` under
    /// its own write guard).
    #[inline]
    fn addr(&self) -> usize {
        &self.lock as *const RawQSpinLock<P> as usize
    }

    /// One read attempt: the value, unless a write overlapped.
    #[inline]
    pub fn try_read(&self) -> Option<T> {
        let v = self.try_read_quiet();
        if v.is_some() {
            hook::optimistic_passed(self.class(), LockKind::SeqLock, Access::Read);
        }
        v
    }

    /// `try_read` without statistics.
    #[inline]
    fn try_read_quiet(&self) -> Option<T> {
        self.try_read_unless(|s1| s1 & 1 != 0)
    }

    /// One read attempt that gives up (`None`) if `odd` says so of the
    /// sequence it starts from, or if a write overlapped its copy. `odd`
    /// is the low bit's test, or (`read`) that test with the hooks' switch
    /// folded in.
    #[inline(always)]
    fn try_read_unless(&self, odd: impl FnOnce(usize) -> bool) -> Option<T> {
        // Acquire pairs with the Release store that ended the last write: its
        // data (and all earlier) happens before our copy.
        let s1 = self.seq.load(Ordering::Acquire);
        if odd(s1) {
            return None;
        }
        let copy = self.cells.load();
        // Pairs with the writer's fence(Release) after its odd store: if the
        // copy saw any store of a later write, `s2` sees its odd `seq`.
        fence(Ordering::Acquire);
        let s2 = self.seq.load(Ordering::Relaxed);
        // SAFETY: validated: `copy` is exactly the value of write `s1` (see
        // the module docs), a valid `T`.
        (s1 == s2).then(|| unsafe { copy.assume_init() })
    }

    /// Reads the value, retrying while writes overlap.
    #[inline]
    pub fn read(&self) -> T {
        // Where the hooks' switch is patched into the code, the sequence's
        // odd test doubles as the switch's (`hook::odd_or_maybe_active`):
        // a switched-off read runs the instructions it has without the
        // hooks, and any other goes to `read_other`.
        if hook::SEQ_BASE != 0 {
            return match self.try_read_unless(hook::odd_or_maybe_active) {
                Some(v) => v,
                None => self.read_other(),
            };
        }
        // Elsewhere, with the hooks compiled in, one test of their
        // run-time switch (a Relaxed load; see `hook::any_active`) decides
        // between the counted read and the plain one, so a switched-off
        // read is the plain one behind a branch.
        if hook::any_active() {
            return self.read_hooked();
        }
        self.read_quiet()
    }

    /// `read` once its first look found the sequence odd, the hooks maybe
    /// on, or a write overlapping its copy: the counted read if the hooks
    /// are on, else the plain one (which tries again at once: the write
    /// seen may be over). Inline, behind `read`'s branches: with
    /// statistics on every read comes here (out of line, a switched-on
    /// read took 1.13x the time).
    #[inline(always)]
    fn read_other(&self) -> T {
        if hook::any_active() {
            return self.read_hooked();
        }
        self.read_quiet()
    }

    /// `read`, counted by the hooks (inlined too: with statistics on, every
    /// read comes here, and a call costs the read more than the counting).
    /// A read that succeeds at once is counted after it, with no `Pending`
    /// carried across it (one the retry path might take would live on the
    /// stack, built and stored on every read).
    #[inline(always)]
    fn read_hooked(&self) -> T {
        match self.try_read_quiet() {
            Some(v) => {
                hook::optimistic_passed(self.class(), LockKind::SeqLock, Access::Read);
                v
            }
            None => self.read_slow(),
        }
    }

    /// `read_hooked` after a first attempt overlapped a write.
    #[cold]
    fn read_slow(&self) -> T {
        let mut p = hook::start_optimistic(self.class(), LockKind::SeqLock, Access::Read);
        p.contended();
        let mut backoff = Backoff::new();
        loop {
            hook::seqlock_retry(self.class(), LockKind::SeqLock);
            backoff.snooze::<P>();
            if let Some(v) = self.try_read_quiet() {
                p.passed();
                return v;
            }
        }
    }

    /// `read` without statistics (for locks built on this one).
    #[inline]
    pub(crate) fn read_quiet(&self) -> T {
        match self.try_read_quiet() {
            Some(v) => v,
            None => self.read_slow_quiet(),
        }
    }

    #[cold]
    fn read_slow_quiet(&self) -> T {
        let mut backoff = Backoff::new();
        loop {
            backoff.snooze::<P>();
            if let Some(v) = self.try_read_quiet() {
                return v;
            }
        }
    }

    /// The current sequence number: even when no write is in progress; it
    /// grows by 2 per write.
    #[inline]
    pub fn sequence(&self) -> usize {
        self.seq.load(Ordering::Relaxed) & !hook::SEQ_BASE
    }

    /// Takes the writer lock. Readers keep reading the old value until the
    /// guard publishes a new one.
    #[inline]
    pub fn lock(&self) -> SeqLockWriteGuard<'_, T, P> {
        // Switched off (or not compiled in): the plain path, apart from the
        // recorded one (see `RawQSpinLock::lock`).
        let active = hook::active_bits();
        if active == 0 {
            return self.lock_quiet();
        }
        // Statistics alone: a lock that does not wait is counted after it
        // (see `RawQSpinLock::lock`).
        if hook::stats_alone(active) && self.lock.core.try_lock_fast() {
            return SeqLockWriteGuard {
                lock: self,
                held: hook::counted_at_once(self.class(), LockKind::SeqLock, Access::Write),
            };
        }
        let mut p = hook::start(self.class(), LockKind::SeqLock, self.addr(), Access::Write);
        if !self.lock.core.try_lock_fast() {
            p.contended();
            // The writer lock's events count for this SeqLock's class.
            self.lock
                .core
                .lock_slow(Events::of(self.class(), LockKind::SeqLock, Access::Write));
        }
        SeqLockWriteGuard {
            lock: self,
            held: p.acquired(),
        }
    }

    /// Takes the writer lock if it is free.
    #[inline]
    pub fn try_lock(&self) -> Option<SeqLockWriteGuard<'_, T, P>> {
        if !self.lock.core.try_lock_fast() {
            return None;
        }
        Some(SeqLockWriteGuard {
            lock: self,
            held: hook::try_acquired(self.class(), LockKind::SeqLock, self.addr(), Access::Write),
        })
    }

    /// `lock` without statistics or lockdep (for locks built on this one).
    #[inline]
    pub(crate) fn lock_quiet(&self) -> SeqLockWriteGuard<'_, T, P> {
        self.lock.core.lock(Events::NONE);
        SeqLockWriteGuard {
            lock: self,
            held: Held::NONE,
        }
    }

    /// Replaces the value.
    #[inline]
    pub fn write(&self, value: T) {
        self.lock().publish(value);
    }

    /// Replaces the value by `f(old)` and returns what `f` returned.
    /// If `f` panics, the value is unchanged.
    #[inline]
    pub fn update<R>(&self, f: impl FnOnce(&mut T) -> R) -> R {
        let guard = self.lock();
        let mut v = guard.get();
        let r = f(&mut v);
        guard.publish(v);
        r
    }

    /// Consumes the lock, returning the value.
    pub fn into_inner(self) -> T {
        // SAFETY: no other access exists (we own `self`), and the last write
        // (or `new`) stored a complete `T`.
        unsafe { self.cells.load().assume_init() }
    }

    /// The writer lock (for [`RawQSpinLock::wait_unlocked`] and the like).
    #[inline]
    pub fn raw_lock(&self) -> &RawQSpinLock<P> {
        &self.lock
    }
}

impl<T: NoUninit + Default, P: Platform> Default for SeqLock<T, P> {
    fn default() -> Self {
        Self::new(T::default())
    }
}

impl<T: NoUninit + core::fmt::Debug, P: Platform> core::fmt::Debug for SeqLock<T, P> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("SeqLock")
            .field("seq", &self.sequence())
            .field("value", &self.read_quiet())
            .finish()
    }
}

/// The writer lock of a [`SeqLock`]: `get` the current value, `publish` a
/// new one. Dropping it without publishing leaves the value unchanged.
pub struct SeqLockWriteGuard<'a, T: NoUninit, P: Platform = DefaultPlatform> {
    /// The seqlock, whose writer lock this guard holds.
    lock: &'a SeqLock<T, P>,
    /// Statistics and lockdep state of the hold (zero-sized without them).
    held: Held,
}

impl<T: NoUninit, P: Platform> SeqLockWriteGuard<'_, T, P> {
    /// The current value (no retry needed: only the lock holder writes).
    #[inline]
    pub fn get(&self) -> T {
        // SAFETY: we hold the writer lock, so no store overlaps this copy,
        // and the last writer's stores happen before it (the lock's
        // Acquire/Release): the copy is a complete `T`.
        unsafe { self.lock.cells.load().assume_init() }
    }

    /// Publishes `value` and releases the writer lock.
    #[inline]
    pub fn publish(mut self, value: T) {
        self.set(value);
    }

    /// Publishes `value` and keeps the writer lock.
    #[inline]
    pub fn set(&mut self, value: T) {
        let l = self.lock;
        // Only the lock holder writes `seq`; the lock orders us after the
        // previous writer.
        let s = l.seq.load(Ordering::Relaxed);
        l.seq.store(s.wrapping_add(1), Ordering::Relaxed);
        // Pairs with the readers' fence(Acquire): a reader that sees any of
        // the stores below sees the odd `seq` above in its check.
        fence(Ordering::Release);
        l.cells.store(&value);
        // Release pairs with the readers' Acquire load of `seq`.
        l.seq.store(s.wrapping_add(2), Ordering::Release);
    }
}

impl<T: NoUninit, P: Platform> Drop for SeqLockWriteGuard<'_, T, P> {
    #[inline]
    fn drop(&mut self) {
        let addr = self.lock.addr();
        // The guard holds the writer lock (taken by `lock`, `try_lock` or
        // `lock_quiet`) and releases it exactly once, here.
        self.lock.lock.core.release(false);
        core::mem::replace(&mut self.held, Held::NONE).release(addr);
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::thread;

    #[test]
    fn read_write_update() {
        let s: SeqLock<[u32; 3]> = SeqLock::new([1, 2, 3]);
        assert_eq!(s.read(), [1, 2, 3]);
        assert_eq!(s.sequence(), 0);
        s.write([4, 5, 6]);
        assert_eq!(s.read(), [4, 5, 6]);
        assert_eq!(s.sequence(), 2);
        let r = s.update(|v| {
            v[0] += 10;
            7
        });
        assert_eq!(r, 7);
        assert_eq!(s.read(), [14, 5, 6]);
        let g = s.lock();
        assert_eq!(g.get(), [14, 5, 6]);
        assert!(s.try_lock().is_none());
        assert_eq!(s.read(), [14, 5, 6], "readers still read under the lock");
        drop(g);
        assert!(s.try_lock().is_some());
        assert_eq!(s.into_inner(), [14, 5, 6]);
    }

    #[test]
    fn odd_sizes_and_types() {
        let a: SeqLock<[u8; 13]> = SeqLock::new([7; 13]);
        a.write([9; 13]);
        assert_eq!(a.read(), [9; 13]);
        let b: SeqLock<u128> = SeqLock::new(u128::MAX - 5);
        b.write(3);
        assert_eq!(b.read(), 3);
        let c: SeqLock<(), _> = SeqLock::<(), DefaultPlatform>::new(());
        c.write(());
        assert_eq!(c.sequence(), 2);
        let d: SeqLock<[bool; 3]> = SeqLock::new([true, false, true]);
        assert_eq!(d.read(), [true, false, true]);
        let e: SeqLock<char> = SeqLock::new('x');
        e.write('é');
        assert_eq!(e.read(), 'é');
    }

    #[test]
    fn panicking_update_leaves_value() {
        let s: SeqLock<u64> = SeqLock::new(5);
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            s.update(|v| {
                *v = 6;
                panic!("boom")
            })
        }));
        assert!(r.is_err());
        assert_eq!(s.read(), 5);
        assert_eq!(s.sequence(), 0);
        assert!(s.try_lock().is_some());
    }

    /// Writers keep every word equal; readers must never see them differ.
    #[test]
    fn no_torn_reads() {
        let iters = if cfg!(miri) { 50 } else { 10_000 };
        let s: Arc<SeqLock<[u64; 5]>> = Arc::new(SeqLock::new([0; 5]));
        let writers: Vec<_> = (0..2)
            .map(|_| {
                let s = s.clone();
                thread::spawn(move || {
                    for _ in 0..iters {
                        s.update(|v| *v = [v[0] + 1; 5]);
                    }
                })
            })
            .collect();
        let readers: Vec<_> = (0..2)
            .map(|_| {
                let s = s.clone();
                thread::spawn(move || {
                    let mut last = 0;
                    for _ in 0..iters {
                        let v = s.read();
                        assert!(v.iter().all(|&x| x == v[0]), "torn: {v:?}");
                        assert!(v[0] >= last, "went backwards");
                        last = v[0];
                    }
                })
            })
            .collect();
        for h in writers.into_iter().chain(readers) {
            h.join().unwrap();
        }
        assert_eq!(s.read(), [2 * iters as u64; 5]);
    }
}
