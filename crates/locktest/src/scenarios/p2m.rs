//! `p2m` (Xen's physical-to-machine table; "Implement per-cpu reader-writer
//! locks", patch 3/3): the `gnttab` backend, where mapping or copying a
//! grant also translates the granted frame through the guest's p2m under
//! the p2m's read lock, *nested* inside the grant table's read lock (Xen's
//! `__get_paged_frame` under the grant and entry locks), while rare p2m
//! writers remap a range of guest frames (ballooning, paging, log-dirty).
//!
//! - before: both the grant-table lock and the p2m lock are the `--lock`
//!   rwlock (default `qrwlock`, `pl-rwlock`, and `percpu-rwlock`: per-CPU
//!   locks, but all on one `ReaderTable`, so a thread reading a grant
//!   table finds its slot busy when it reads the p2m and falls back to the
//!   underlying rwlock, which is the cost the Xen series warned of for
//!   altp2m users holding two p2m read locks at once).
//! - after: two lock classes, as Xen declared them: grant-table locks on
//!   the grant `ReaderTable`, p2m locks on their own, so both nested reads
//!   take the fast path (Xen measured 48 Gbit/s with per-CPU grant-table
//!   locks alone and 64 with the p2m lock converted too).
//!
//! Checked, besides the grant-table invariants: no p2m writer overlaps a
//! p2m reader (the same marks, bits from 8), and every translation read is
//! whole (a p2m entry is a frame and a seal over it, stored one after the
//! other by a writer; a reader never sees a frame with another's seal).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use crossbeam_utils::CachePadded;
use scalelock::{PerCpuRwLock, RawPerCpuRwLock, ReaderTable};

use super::gnttab::GRANT_RWLOCK;
use super::grant_table::{self, DOMAINS, GT_LOCK, Readers, Translate};
use super::{Outcome, RunFn, Scenario, Setup, before_fn};
use crate::lockable::{LockRole, Lockable};
use crate::rng::Rng;

/// The reader slots of the p2m lock class.
pub static P2M_RWLOCK: ReaderTable = ReaderTable::new();

/// The lock class of every guest's p2m lock (`--stats`).
static P2M_LOCK: LockRole = LockRole::new("p2m/p2m_lock");

/// Guest frames per p2m.
const GFNS: usize = 1024;
/// Guest frames one p2m write remaps.
const REMAP: usize = 64;
/// One p2m write per this many backend operations.
const WRITE_EVERY: u64 = 20_000;
/// The readers' mark of domain `d`'s p2m is bit `P2M_BIT + d`.
const P2M_BIT: u32 = 8;

pub const SCENARIO: Scenario = Scenario {
    name: "p2m",
    about: "Xen p2m: translations read nested in the grant table's read lock; \
            one lock class vs two per-CPU classes",
    default_locks: &["qrwlock", "pl-rwlock", "percpu-rwlock"],
    before: before_for,
    after_name: "after-percpu-classes",
    after,
};

fn before_for(lock: &str) -> Option<RunFn> {
    before_fn!(lock, before, ())
}

fn before<L: Lockable<()>>(setup: &Setup) -> Result<Outcome, String> {
    let readers = Readers::new(setup.threads);
    let p2m = P2m::new(|| L::with_role((), &P2M_LOCK), &readers, WRITE_EVERY);
    grant_table::drive(setup, || L::with_role((), &GT_LOCK), &readers, &p2m)
}

fn after(setup: &Setup) -> Result<Outcome, String> {
    let readers = Readers::new(setup.threads);
    let in_class = |table, role: &'static LockRole| {
        let raw = RawPerCpuRwLock::with_table_and_class(table, role.percpu_rwlock());
        PerCpuRwLock::from_raw(raw, ())
    };
    let p2m = P2m::new(|| in_class(&P2M_RWLOCK, &P2M_LOCK), &readers, WRITE_EVERY);
    let grant = || in_class(&GRANT_RWLOCK, &GT_LOCK);
    grant_table::drive(setup, grant, &readers, &p2m)
}

/// A p2m entry: the machine frame and a seal over (guest frame, machine
/// frame), both changed only under the p2m write lock.
struct Entry {
    mfn: AtomicU64,
    seal: AtomicU64,
}

/// The seal of `gfn` mapped to `mfn` (splitmix64's finalizer).
fn seal(gfn: usize, mfn: u64) -> u64 {
    let mut z = mfn ^ ((gfn as u64) << 40) ^ 0x9E37_79B9_7F4A_7C15;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// One guest's p2m under its rwlock.
struct Table<L> {
    lock: L,
    /// A writer holds the lock (for readers' checks).
    writer: AtomicBool,
    entries: Box<[Entry]>,
}

/// Every guest's p2m, each on cache lines of its own (Xen's `struct
/// p2m_domain`s are allocated apart): a plain rwlock's word must not share
/// a line with the other guest's p2m.
struct P2m<'a, L> {
    tables: Vec<CachePadded<Table<L>>>,
    readers: &'a Readers,
    /// One p2m write per this many backend operations.
    write_every: u64,
}

impl<'a, L: Lockable<()>> P2m<'a, L> {
    fn new(new_lock: impl Fn() -> L, readers: &'a Readers, write_every: u64) -> Self {
        let table = |_| {
            CachePadded::new(Table {
                lock: new_lock(),
                writer: AtomicBool::new(false),
                entries: (0..GFNS)
                    .map(|g| Entry {
                        mfn: AtomicU64::new(g as u64),
                        seal: AtomicU64::new(seal(g, g as u64)),
                    })
                    .collect(),
            })
        };
        P2m {
            tables: (0..DOMAINS).map(table).collect(),
            readers,
            write_every,
        }
    }
}

// Relaxed, all entry and flag accesses: the p2m lock orders them (see
// `Readers` for the marks); a lock that fails to exclude shows as torn
// entries and marks seen.
impl<L: Lockable<()>> Translate for P2m<'_, L> {
    fn translate(&self, d: usize, gfn: usize, me: usize) -> Result<u64, String> {
        let t = &self.tables[d];
        let bit = 1 << (P2M_BIT + d as u32);
        let gfn = gfn % GFNS;
        t.lock.with_read(|_| {
            self.readers.enter(me, bit);
            let mut writer = t.writer.load(Ordering::Relaxed);
            let e = &t.entries[gfn];
            let mfn = e.mfn.load(Ordering::Relaxed);
            let sealed = e.seal.load(Ordering::Relaxed);
            writer |= t.writer.load(Ordering::Relaxed);
            self.readers.leave(me, bit);
            if writer {
                Err(format!(
                    "a reader got domain {d}'s p2m while a writer held it"
                ))
            } else if sealed != seal(gfn, mfn) {
                Err(format!("domain {d}: p2m entry {gfn} read half-written"))
            } else {
                Ok(mfn)
            }
        })
    }

    fn maybe_write(&self, rng: &mut Rng, _me: usize) -> Result<bool, String> {
        if !rng.one_in(self.write_every) {
            return Ok(false);
        }
        let d = rng.index(DOMAINS);
        let start = rng.index(GFNS - REMAP);
        let t = &self.tables[d];
        let bit = 1 << (P2M_BIT + d as u32);
        t.lock.with_write(|_| {
            t.writer.store(true, Ordering::Relaxed);
            let mut inside = self.readers.inside(bit);
            // Remap: every frame of the range moves to a fresh machine frame.
            for (g, e) in t.entries.iter().enumerate().skip(start).take(REMAP) {
                let mfn = e.mfn.load(Ordering::Relaxed) + GFNS as u64;
                e.mfn.store(mfn, Ordering::Relaxed);
                e.seal.store(seal(g, mfn), Ordering::Relaxed);
            }
            inside = inside.max(self.readers.inside(bit));
            t.writer.store(false, Ordering::Relaxed);
            match inside {
                0 => Ok(true),
                n => Err(format!(
                    "a p2m writer got domain {d}'s p2m while {n} reader(s) held it"
                )),
            }
        })
    }

    fn metrics(&self) -> Vec<(&'static str, f64)> {
        Vec::new()
    }

    fn state(&self) -> String {
        let s: Vec<String> = self.tables.iter().map(|t| t.lock.state()).collect();
        format!("p2m: {}", s.join("; "))
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::busted::Busted;

    fn setup(threads: usize) -> Setup {
        Setup {
            threads,
            runtime: Duration::from_millis(100),
            what: "p2m/test".into(),
        }
    }

    #[test]
    fn every_design_keeps_the_invariants() {
        assert_eq!(after(&setup(3)).unwrap().violations, 0);
        assert_eq!(
            before::<scalelock::PerCpuRwLock<()>>(&setup(3))
                .unwrap()
                .violations,
            0
        );
    }

    /// As for the grant tables: one guest's p2m lock word must not share a
    /// cache line with the other guest's p2m.
    #[test]
    fn each_guests_p2m_lock_has_its_own_cache_line() {
        let readers = Readers::new(1);
        let p2m = P2m::new(|| scalelock::QRwLock::new(()), &readers, WRITE_EVERY);
        let lines = |at: usize, size: usize| at / 64..(at + size).div_ceil(64);
        for (d, t) in p2m.tables.iter().enumerate() {
            let lock = lines(std::ptr::from_ref(&t.lock) as usize, size_of_val(&t.lock));
            for (e, other) in p2m.tables.iter().enumerate().filter(|(e, _)| *e != d) {
                let theirs = lines(std::ptr::from_ref(other) as usize, size_of_val(other));
                assert!(
                    lock.end <= theirs.start || theirs.end <= lock.start,
                    "domain {d}'s p2m lock (lines {lock:?}) shares a line with \
                     domain {e}'s p2m (lines {theirs:?})"
                );
            }
        }
    }

    #[test]
    #[cfg_attr(miri, ignore)]
    fn a_p2m_lock_that_does_not_lock_is_caught() {
        // A real grant-table lock, a p2m lock that does not lock, and p2m
        // writes 100 times as often as in the scenario, to show it quickly.
        let caught = crate::scenarios::caught_within_30s(|| {
            let s = setup(4);
            let readers = Readers::new(s.threads);
            let p2m = P2m::new(|| Busted::<()>::new(()), &readers, WRITE_EVERY / 100);
            let new = || scalelock::QRwLock::new(());
            grant_table::drive(&s, new, &readers, &p2m)
                .unwrap()
                .violations
                > 0
        });
        assert!(caught, "a p2m lock that does not lock went unnoticed");
    }
}
