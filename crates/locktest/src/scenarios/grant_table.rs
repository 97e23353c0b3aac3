//! A small model of Xen's grant tables (`xen/common/grant_table.c`), the
//! subject of the `gnttab` and `p2m` scenarios.
//!
//! A guest shares pages with a backend (netback, blkback in dom0) by
//! *granting* them: entries of its grant table name a page frame. Every
//! I/O request makes the backend look grants up in the guest's table:
//!
//! - **map** (`gnttab_map_grant_ref`): under the table's *read* lock, check
//!   the reference is in range, take the entry's own spinlock
//!   (`active_entry_acquire`), translate the granted frame (the p2m
//!   lookup, see [`Translate`]), pin the entry (`act->pin`), release both.
//!   The mapping outlives the locks; the backend records it (its maptrack).
//! - **unmap** (`gnttab_unmap_grant_ref`): read lock, entry lock, unpin.
//! - **copy** (`gnttab_copy`): acquire (read lock, entry lock, translate,
//!   pin), copy the data with no lock held, release (read lock, entry lock,
//!   unpin): two read-lock round trips per copy.
//!
//! Rare *writers* take the table's write lock: growing the table
//! (`gnttab_grow_table`) or switching its version (`gnttab_set_version`,
//! refused while any entry beyond the reserved ones is pinned).
//!
//! Each thread is one I/O queue of the backend; there are [`DOMAINS`]
//! guests (the two VMs of a VM-to-VM transfer) and the queues serve both.
//! The table lock is the thing under test: every grant operation takes its
//! read side, so with a plain rwlock every queue writes the lock's shared
//! word; Xen made it a per-CPU rwlock, whose reads write only a CPU-local
//! slot. Fields the table lock protects (size, version) and the entries'
//! pin counts are atomics accessed with plain loads and stores (the locks
//! do the excluding), so a lock that fails to exclude breaks invariants
//! without breaking memory safety.
//!
//! # Invariants, checked during the run and at the end
//! - No writer overlaps a reader: each thread marks, in a flag on its own
//!   cache line, the tables it is reading (set after the read lock, cleared
//!   before the unlock); a writer, holding the write lock, finds no mark on
//!   its table, and a reader finds no writer inside.
//! - Pin counts never go below zero, and a mapping ends under the table
//!   version it started under (a version switch sees every pin).
//! - At the end every pin count is back to zero (each queue unmaps what it
//!   still holds when it stops, so a pin left over was lost by an entry
//!   update that another overlapped).

use std::hint::black_box;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU32, AtomicUsize, Ordering};

use crossbeam_utils::CachePadded;
use scalelock::{ClassRef, LockClass, QSpinLock, RawQSpinLock};

use super::{Outcome, Setup};
use crate::harness::{self, Quiet};
use crate::lockable::{LockRole, Lockable};
use crate::rng::Rng;

/// Guests whose tables the backend's queues use.
pub const DOMAINS: usize = 2;
/// Entries per grant frame (Xen: 512 v1 entries per 4 KiB frame; fewer
/// here, so growth happens within a short run).
const ENTRIES_PER_FRAME: usize = 64;
/// Frames a table starts with.
const INITIAL_FRAMES: usize = 4;
/// Frames a table may grow to (`max_grant_frames`).
const MAX_FRAMES: usize = 32;
/// Entries reserved for the toolstack (`GNTTAB_NR_RESERVED_ENTRIES`); a
/// version switch ignores them, I/O never uses them.
const RESERVED: usize = 8;
/// Mappings one queue keeps at most (its requests in flight).
const MAX_MAPS: usize = 4;
/// One table write (grow or version switch) per this many grant operations.
const WRITE_EVERY: u64 = 10_000;
/// Bytes a grant copy moves with no lock held.
const COPY_BYTES: usize = 256;

/// The frame translation done while mapping or copying a grant: nothing
/// for `gnttab`, the p2m lookup under its own lock for `p2m`.
pub trait Translate: Sync {
    /// Translates `gfn` of domain `d` for thread `me`; `Err` names a broken
    /// invariant.
    fn translate(&self, d: usize, gfn: usize, me: usize) -> Result<u64, String>;
    /// Called once per operation: may make a write of its own (a p2m
    /// update); returns whether it did.
    fn maybe_write(&self, rng: &mut Rng, me: usize) -> Result<bool, String>;
    /// Its own metrics.
    fn metrics(&self) -> Vec<(&'static str, f64)>;
    /// Its locks' state, for a hang report.
    fn state(&self) -> String;
}

/// No translation: the `gnttab` scenario.
pub struct Direct;

impl Translate for Direct {
    fn translate(&self, _: usize, gfn: usize, _: usize) -> Result<u64, String> {
        Ok(gfn as u64)
    }
    fn maybe_write(&self, _: &mut Rng, _: usize) -> Result<bool, String> {
        Ok(false)
    }
    fn metrics(&self) -> Vec<(&'static str, f64)> {
        Vec::new()
    }
    fn state(&self) -> String {
        String::new()
    }
}

/// Per thread, a mark of the tables it is reading, on its own cache line:
/// bit `d` for domain `d`'s grant table (the p2m uses bits from 8).
pub struct Readers(Vec<CachePadded<AtomicU32>>);

// Relaxed, all marks: only the owning thread writes its mark, and only
// inside a read section; a writer reads the marks inside its write section.
// A correct lock orders the sections (unlock happens before the next lock),
// so a writer sees a reader's clear and never its later set; a lock that
// lets them overlap shows the mark.
impl Readers {
    /// Marks for `threads` threads.
    pub fn new(threads: usize) -> Self {
        Readers(
            (0..threads)
                .map(|_| CachePadded::new(AtomicU32::new(0)))
                .collect(),
        )
    }

    /// Thread `me` is now reading under `bit`.
    pub fn enter(&self, me: usize, bit: u32) {
        let m = &self.0[me];
        m.store(m.load(Ordering::Relaxed) | bit, Ordering::Relaxed);
    }

    /// Thread `me` is done reading under `bit`.
    pub fn leave(&self, me: usize, bit: u32) {
        let m = &self.0[me];
        m.store(m.load(Ordering::Relaxed) & !bit, Ordering::Relaxed);
    }

    /// How many threads read under `bit` now.
    pub fn inside(&self, bit: u32) -> usize {
        self.0
            .iter()
            .filter(|m| m.load(Ordering::Relaxed) & bit != 0)
            .count()
    }
}

/// The lock class of the grant-table lock (Xen's `gt->lock`), every
/// domain's (`--stats`).
pub static GT_LOCK: LockRole = LockRole::new("grant_table/gt_lock");
/// The lock class of the active grant entries' locks.
static ACTIVE_ENTRY: LockClass = LockClass::new("grant_table/active_entry");

/// An active grant entry (`struct active_grant_entry`): its spinlock and
/// its pin count, which only the entry lock's holder changes.
struct Entry {
    lock: QSpinLock<()>,
    pin: AtomicU32,
}

impl Default for Entry {
    fn default() -> Self {
        Entry {
            lock: QSpinLock::from_raw(RawQSpinLock::with_class(ClassRef::of(&ACTIVE_ENTRY)), ()),
            pin: AtomicU32::new(0),
        }
    }
}

impl Entry {
    /// Changes the pin count by `delta` under the entry lock; `Err` if it
    /// would go below zero.
    fn pin(&self, delta: i32) -> Result<(), String> {
        let _held = self.lock.lock();
        // Relaxed load and store, no RMW: the entry lock excludes.
        let pin = self.pin.load(Ordering::Relaxed);
        let Some(new) = pin.checked_add_signed(delta) else {
            return Err("unpin of an entry that is not pinned".into());
        };
        self.pin.store(new, Ordering::Relaxed);
        Ok(())
    }
}

/// One guest's grant table under its rwlock `L`.
struct Table<L> {
    lock: L,
    /// `nr_grant_frames`; only a write-lock holder changes it.
    frames: AtomicUsize,
    /// `gt_version`, 1 or 2; only a write-lock holder changes it.
    version: AtomicU8,
    /// A writer holds the lock (for readers' checks).
    writer: AtomicBool,
    /// Every entry the table can grow to.
    entries: Box<[Entry]>,
}

/// A mapping a queue holds: domain, reference, the table version it was
/// made under.
#[derive(Clone, Copy)]
struct Mapping {
    d: usize,
    gref: usize,
    version: u8,
}

/// What one thread counted.
#[derive(Default)]
struct Tally {
    maps: u64,
    copies: u64,
    grows: u64,
    switches: u64,
    busy: u64,
    own_writes: u64,
    bad: u64,
    first: Option<String>,
}

impl Tally {
    fn check(&mut self, r: Result<(), String>) {
        if let Err(e) = r {
            self.bad += 1;
            self.first.get_or_insert(e);
        }
    }
}

/// The backend and its guests. Each guest's table is on cache lines of its
/// own, as Xen's separately allocated `struct grant_table`s are: a plain
/// rwlock's word must not share a line with the other guest's table, or
/// every read of one guest's table would bounce the other's too.
struct Backend<'a, L, T> {
    tables: Vec<CachePadded<Table<L>>>,
    readers: &'a Readers,
    translate: &'a T,
}

impl<'a, L: Lockable<()>, T: Translate> Backend<'a, L, T> {
    /// [`DOMAINS`] guests' tables with locks from `new_lock`.
    fn new(new_lock: impl Fn() -> L, readers: &'a Readers, translate: &'a T) -> Self {
        Backend {
            tables: (0..DOMAINS)
                .map(|_| {
                    CachePadded::new(Table {
                        lock: new_lock(),
                        frames: AtomicUsize::new(INITIAL_FRAMES),
                        version: AtomicU8::new(1),
                        writer: AtomicBool::new(false),
                        entries: (0..MAX_FRAMES * ENTRIES_PER_FRAME)
                            .map(|_| Entry::default())
                            .collect(),
                    })
                })
                .collect(),
            readers,
            translate,
        }
    }

    /// A read section on domain `d`'s table: marks it, checks no writer is
    /// inside, runs `f` with the number of usable entries.
    fn read<R>(
        &self,
        d: usize,
        me: usize,
        f: impl FnOnce(&Table<L>, usize) -> R,
    ) -> (R, Result<(), String>) {
        let t = &self.tables[d];
        t.lock.with_read(|_| {
            self.readers.enter(me, 1 << d);
            // Relaxed: see `Readers`.
            let mut writer = t.writer.load(Ordering::Relaxed);
            let n = t.frames.load(Ordering::Relaxed) * ENTRIES_PER_FRAME;
            let out = f(t, n);
            writer |= t.writer.load(Ordering::Relaxed);
            self.readers.leave(me, 1 << d);
            let ok = match writer {
                false => Ok(()),
                true => Err(format!(
                    "a reader got domain {d}'s table while a writer held it"
                )),
            };
            (out, ok)
        })
    }

    /// A write section on domain `d`'s table: checks no reader is inside.
    fn write<R>(&self, d: usize, f: impl FnOnce(&Table<L>) -> R) -> (R, Result<(), String>) {
        let t = &self.tables[d];
        t.lock.with_write(|_| {
            // Relaxed: see `Readers`.
            t.writer.store(true, Ordering::Relaxed);
            let before = self.readers.inside(1 << d);
            let out = f(t);
            let inside = before.max(self.readers.inside(1 << d));
            t.writer.store(false, Ordering::Relaxed);
            let ok = match inside {
                0 => Ok(()),
                n => Err(format!(
                    "a writer got domain {d}'s table while {n} reader(s) held it"
                )),
            };
            (out, ok)
        })
    }

    /// Pins a random usable entry of `d` and translates its frame (map and
    /// copy's first half); returns the mapping.
    fn acquire(&self, d: usize, me: usize, rng: &mut Rng, tally: &mut Tally) -> Mapping {
        let (r, ok) = self.read(d, me, |t, n| {
            let gref = RESERVED + rng.index(n - RESERVED);
            let e = &t.entries[gref];
            let _held = e.lock.lock();
            let frame = self.translate.translate(d, gref, me);
            // Relaxed load and store: the entry lock excludes.
            let pin = e.pin.load(Ordering::Relaxed);
            e.pin.store(pin + 1, Ordering::Relaxed);
            let version = t.version.load(Ordering::Relaxed);
            (Mapping { d, gref, version }, frame.map(drop))
        });
        tally.check(ok.and(r.1));
        r.0
    }

    /// Unpins a mapping (unmap and copy's second half).
    fn release(&self, m: Mapping, me: usize, tally: &mut Tally) {
        let (r, ok) = self.read(m.d, me, |t, _| {
            let version = t.version.load(Ordering::Relaxed);
            let changed = match version == m.version {
                true => Ok(()),
                false => Err(format!(
                    "domain {}: version switched from {} to {version} while ref {} was pinned",
                    m.d, m.version, m.gref
                )),
            };
            t.entries[m.gref].pin(-1).and(changed)
        });
        tally.check(ok.and(r));
    }

    /// `gnttab_grow_table`: one more frame, if below the maximum. The new
    /// entries must not be pinned (nobody could have reached them).
    fn grow(&self, d: usize, tally: &mut Tally) {
        let (r, ok) = self.write(d, |t| {
            let frames = t.frames.load(Ordering::Relaxed);
            if frames == MAX_FRAMES {
                return Ok(());
            }
            let new = &t.entries[frames * ENTRIES_PER_FRAME..(frames + 1) * ENTRIES_PER_FRAME];
            if new.iter().any(|e| e.pin.load(Ordering::Relaxed) != 0) {
                return Err(format!(
                    "domain {d}: an entry beyond the table's end was pinned"
                ));
            }
            t.frames.store(frames + 1, Ordering::Relaxed);
            tally.grows += 1;
            Ok(())
        });
        tally.check(ok.and(r));
    }

    /// `gnttab_set_version`: switch between v1 and v2 unless an entry
    /// beyond the reserved ones is pinned (then -EBUSY, as Xen).
    fn set_version(&self, d: usize, tally: &mut Tally) {
        let ((), ok) = self.write(d, |t| {
            let n = t.frames.load(Ordering::Relaxed) * ENTRIES_PER_FRAME;
            if t.entries[RESERVED..n]
                .iter()
                .any(|e| e.pin.load(Ordering::Relaxed) != 0)
            {
                tally.busy += 1;
                return;
            }
            let v = t.version.load(Ordering::Relaxed);
            t.version.store(3 - v, Ordering::Relaxed);
            tally.switches += 1;
        });
        tally.check(ok);
    }
}

/// Runs the backend's queues on `setup.threads` threads with table locks
/// from `new_lock` and translation `translate`.
pub fn drive<L: Lockable<()>, T: Translate>(
    setup: &Setup,
    new_lock: impl Fn() -> L,
    readers: &Readers,
    translate: &T,
) -> Result<Outcome, String> {
    let backend = Backend::new(new_lock, readers, translate);
    let page = [0x5au8; COPY_BYTES];
    let state = || {
        let mut s: Vec<String> = backend.tables.iter().map(|t| t.lock.state()).collect();
        s.push(translate.state());
        s.join("; ")
    };
    let run = harness::run(&setup.spec(), &mut Quiet(state), |w| {
        let me = w.index;
        let mut rng = Rng::new(me as u64);
        let mut tally = Tally::default();
        let mut maps: Vec<Mapping> = Vec::with_capacity(MAX_MAPS);
        let mut ops = 0u64;
        let mut buf = [0u8; COPY_BYTES];
        while !w.stopped() {
            ops += 1;
            match translate.maybe_write(&mut rng, me) {
                Ok(true) => {
                    tally.own_writes += 1;
                    continue;
                }
                Ok(false) => {}
                Err(e) => tally.check(Err(e)),
            }
            let d = rng.index(DOMAINS);
            if rng.one_in(WRITE_EVERY) {
                if rng.one_in(2) {
                    backend.grow(d, &mut tally);
                } else {
                    backend.set_version(d, &mut tally);
                }
                continue;
            }
            let roll = rng.below(10);
            if roll < 4 {
                // Copy: pin, move the data with no lock held, unpin.
                let m = backend.acquire(d, me, &mut rng, &mut tally);
                buf.copy_from_slice(black_box(&page));
                black_box(&mut buf);
                backend.release(m, me, &mut tally);
                tally.copies += 1;
            } else if (roll < 7 && maps.len() < MAX_MAPS) || maps.is_empty() {
                maps.push(backend.acquire(d, me, &mut rng, &mut tally));
                tally.maps += 1;
            } else {
                let m = maps.swap_remove(rng.index(maps.len()));
                backend.release(m, me, &mut tally);
            }
        }
        // The queue shuts down: every mapping it holds is unmapped.
        for m in maps.drain(..) {
            backend.release(m, me, &mut tally);
        }
        // The loop ends at the first check after the stop, so its last
        // operation ended after the stop: only those before it count (as in
        // `bench`).
        (ops.saturating_sub(1), tally)
    })?;
    let sum = |f: fn(&Tally) -> u64| run.found.iter().map(f).sum::<u64>();
    let mut violations = sum(|t| t.bad);
    // Every pin back to zero. (Maps and unmaps are counted by the thread
    // that pushes and pops its own list, and it empties the list at the
    // stop: their totals are equal by construction and check nothing.)
    for t in &backend.tables {
        violations += t
            .entries
            .iter()
            .filter(|e| e.pin.load(Ordering::Relaxed) != 0)
            .count() as u64;
    }
    if let Some(first) = run.found.iter().find_map(|t| t.first.as_ref()) {
        eprintln!("locktest: {}: first violation: {first}", setup.what);
    }
    let frames: usize = backend
        .tables
        .iter()
        .map(|t| t.frames.load(Ordering::Relaxed))
        .sum();
    let mut metrics = vec![
        ("maps", sum(|t| t.maps) as f64),
        ("copies", sum(|t| t.copies) as f64),
        ("grows", sum(|t| t.grows) as f64),
        ("version-switches", sum(|t| t.switches) as f64),
        ("version-busy", sum(|t| t.busy) as f64),
        ("frames", frames as f64),
    ];
    metrics.extend(translate.metrics());
    if sum(|t| t.own_writes) > 0 {
        metrics.push(("p2m-writes", sum(|t| t.own_writes) as f64));
    }
    Ok(Outcome {
        stats: run.stats(),
        metrics,
        violations,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_refuse_to_unpin_below_zero() {
        let e = Entry::default();
        assert_eq!(e.pin(1), Ok(()));
        assert_eq!(e.pin(-1), Ok(()));
        assert!(e.pin(-1).is_err());
    }

    /// A plain rwlock's word is written by every read: the other guest's
    /// table must not share its cache line (Xen allocates each domain's
    /// `struct grant_table` apart), or the before design pays for both
    /// guests' readers on every read and the ratio flatters the after one.
    #[test]
    fn each_guests_table_lock_has_its_own_cache_line() {
        let readers = Readers::new(1);
        let b = Backend::new(|| scalelock::QRwLock::new(()), &readers, &Direct);
        let lines = |at: usize, size: usize| at / 64..(at + size).div_ceil(64);
        for (d, t) in b.tables.iter().enumerate() {
            let lock = lines(std::ptr::from_ref(&t.lock) as usize, size_of_val(&t.lock));
            for (e, other) in b.tables.iter().enumerate().filter(|(e, _)| *e != d) {
                let theirs = lines(std::ptr::from_ref(other) as usize, size_of_val(other));
                assert!(
                    lock.end <= theirs.start || theirs.end <= lock.start,
                    "domain {d}'s table lock (lines {lock:?}) shares a line with \
                     domain {e}'s table (lines {theirs:?})"
                );
            }
        }
    }

    #[test]
    fn readers_marks() {
        let r = Readers::new(3);
        r.enter(0, 1);
        r.enter(2, 1);
        r.enter(2, 2);
        assert_eq!((r.inside(1), r.inside(2)), (2, 1));
        r.leave(2, 1);
        assert_eq!((r.inside(1), r.inside(2)), (1, 1));
    }
}
