//! `memtype` (Linux's x86 PAT `memtype_lock`; "memtype_lock contention",
//! 2010): each page's memory type is two bits of its flag word, next to
//! bits that other code sets without any lock (dirty, referenced...).
//!
//! - before: one global lock around every lookup (`lookup_memtype`) and
//!   every type change (`set_page_memtype`: clear-bit and set-bit atomics,
//!   which need the lock to change both bits as one). Lookups take the read
//!   side, so `--lock pl-rwlock` is the thread's patch 2/2 (spinlock to
//!   rwlock, rejected for want of a measured win).
//! - after: no lock. A type change is a cmpxchg loop on the page's flags
//!   that replaces the two type bits and keeps every other bit; a lookup is
//!   one load.
//!
//! Checked: the patch's first cut got its masks wrong and lost unrelated
//! bits. Every thread sets its own unrelated bit on random pages (lock-free,
//! as `SetPageDirty` is) and remembers where; at the end each of those bits
//! must still be set (`lost-bits`). Types are only ever set to one of three
//! non-default values, so a lookup that sees the default on a page its
//! thread typed saw a half-done change (`torn-reads`). Both are violations.

use std::sync::atomic::{AtomicU64, Ordering};

use super::{Outcome, RunFn, Scenario, Setup, before_fn};
use crate::harness::{self, Quiet};
use crate::lockable::{LockRole, Lockable};
use crate::rng::Rng;

/// The lock class of the global memtype lock (`--stats`).
static MEMTYPE_LOCK: LockRole = LockRole::new("memtype/memtype_lock");

/// Pages tracked; their flag words live on separate cache lines, as in
/// `struct page`.
const PAGES: usize = 4096;
/// The type bits (`_PGMT_*` in the patch): default 0, WC, UC-, WB.
const PGMT_WC: u64 = 1 << 0;
const PGMT_UC_MINUS: u64 = 1 << 1;
const PGMT_MASK: u64 = PGMT_WC | PGMT_UC_MINUS;
const TYPES: [u64; 3] = [PGMT_WC, PGMT_UC_MINUS, PGMT_MASK];
/// Thread `i` owns unrelated bit `OTHER + i % 62`.
const OTHER: usize = 2;

pub const SCENARIO: Scenario = Scenario {
    name: "memtype",
    about: "Linux x86 PAT page memory types: global memtype_lock vs cmpxchg on the flag word",
    default_locks: &["qspinlock", "pl-mutex"],
    before: before_for,
    after_name: "after-cmpxchg",
    after,
};

fn before_for(lock: &str) -> Option<RunFn> {
    before_fn!(lock, before, ())
}

/// One page's flag word, alone on its cache line.
#[repr(align(64))]
struct Page(AtomicU64);

/// How a design reads and changes a page's type.
trait Design: Sync {
    fn get(&self, page: &AtomicU64) -> u64;
    /// Sets the type; returns the cmpxchg retries it needed.
    fn set(&self, page: &AtomicU64, ty: u64) -> u64;
}

/// Before: the global lock around both.
struct Locked<L>(L);

impl<L: Lockable<()>> Design for Locked<L> {
    fn get(&self, page: &AtomicU64) -> u64 {
        self.0
            .with_read(|_| page.load(Ordering::Relaxed) & PGMT_MASK)
    }
    fn set(&self, page: &AtomicU64, ty: u64) -> u64 {
        // Relaxed: the lock orders type changes; other bits only need the
        // atomicity of each RMW.
        self.0.with_write(|_| {
            page.fetch_and(!(PGMT_MASK & !ty), Ordering::Relaxed);
            page.fetch_or(ty, Ordering::Relaxed);
        });
        0
    }
}

/// After: a cmpxchg loop that keeps every bit outside the mask.
struct Cmpxchg;

impl Design for Cmpxchg {
    fn get(&self, page: &AtomicU64) -> u64 {
        page.load(Ordering::Acquire) & PGMT_MASK
    }
    fn set(&self, page: &AtomicU64, ty: u64) -> u64 {
        let (mut old, mut retries) = (page.load(Ordering::Relaxed), 0);
        // AcqRel: a type change is published whole with the word it replaces.
        while let Err(now) = page.compare_exchange_weak(
            old,
            (old & !PGMT_MASK) | ty,
            Ordering::AcqRel,
            Ordering::Relaxed,
        ) {
            (old, retries) = (now, retries + 1);
        }
        retries
    }
}

fn before<L: Lockable<()>>(setup: &Setup) -> Result<Outcome, String> {
    let lock = Locked(L::with_role((), &MEMTYPE_LOCK));
    drive(setup, &lock, || lock.0.state())
}

fn after(setup: &Setup) -> Result<Outcome, String> {
    drive(setup, &Cmpxchg, String::new)
}

fn drive(
    setup: &Setup,
    design: &impl Design,
    state: impl FnMut() -> String,
) -> Result<Outcome, String> {
    let pages: Vec<Page> = (0..PAGES).map(|_| Page(AtomicU64::new(0))).collect();
    let run = harness::run(&setup.spec(), &mut Quiet(state), |w| {
        let i = w.index;
        let mut rng = Rng::new(i as u64);
        let bit = 1u64 << (OTHER + i % 62);
        let (mut dirtied, mut typed) = (vec![0u64; PAGES / 64], vec![0u64; PAGES / 64]);
        let (mut ops, mut torn, mut retries) = (0u64, 0u64, 0u64);
        while !w.stopped() {
            let p = rng.index(PAGES);
            let (word, mask, roll) = (p / 64, 1u64 << (p % 64), rng.next());
            let flags = &pages[p].0;
            if roll.is_multiple_of(16) {
                flags.fetch_or(bit, Ordering::Relaxed);
                dirtied[word] |= mask;
            }
            if (roll >> 8).is_multiple_of(4) {
                retries += design.set(flags, TYPES[(roll >> 16) as usize % 3]);
                typed[word] |= mask;
            } else if design.get(flags) == 0 && typed[word] & mask != 0 {
                torn += 1;
            }
            ops += 1;
        }
        // The loop ends at the first check after the stop, so its last
        // operation ended after the stop: only those before it count (as in
        // `bench`).
        (ops.saturating_sub(1), (dirtied, torn, retries))
    })?;
    let mut lost = 0u64;
    for (i, (dirtied, _, _)) in run.found.iter().enumerate() {
        let bit = 1u64 << (OTHER + i % 62);
        for (p, page) in pages.iter().enumerate() {
            let mine = dirtied[p / 64] & (1 << (p % 64)) != 0;
            lost += u64::from(mine && page.0.load(Ordering::Relaxed) & bit == 0);
        }
    }
    let torn: u64 = run.found.iter().map(|f| f.1).sum();
    Ok(Outcome {
        metrics: vec![
            ("lost-bits", lost as f64),
            ("torn-reads", torn as f64),
            (
                "cas-retries",
                run.found.iter().map(|f| f.2).sum::<u64>() as f64,
            ),
        ],
        violations: lost + torn,
        stats: run.stats(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The patch's first cut: a type change that does not keep the other
    /// bits. The check must catch it, even on one thread.
    struct Clobber;

    impl Design for Clobber {
        fn get(&self, page: &AtomicU64) -> u64 {
            page.load(Ordering::Relaxed) & PGMT_MASK
        }
        fn set(&self, page: &AtomicU64, ty: u64) -> u64 {
            page.store(ty, Ordering::Relaxed);
            0
        }
    }

    fn setup(threads: usize) -> Setup {
        Setup {
            threads,
            runtime: std::time::Duration::from_millis(30),
            what: "memtype/test".into(),
        }
    }

    #[test]
    fn lost_bits_are_caught() {
        let out = drive(&setup(1), &Clobber, String::new).unwrap();
        assert!(out.violations > 0);
    }

    #[test]
    fn both_designs_keep_every_bit() {
        assert_eq!(after(&setup(2)).unwrap().violations, 0);
        assert_eq!(
            before::<parking_lot::Mutex<()>>(&setup(2))
                .unwrap()
                .violations,
            0
        );
    }

    #[test]
    #[cfg_attr(miri, ignore)]
    fn a_lock_that_does_not_lock_lets_lookups_see_half_changes() {
        // Without the lock a lookup can fall between the clear and the set
        // of a type change; a window of nanoseconds, so give it a few runs.
        let caught = crate::scenarios::caught_within_30s(|| {
            let s = Setup {
                runtime: std::time::Duration::from_millis(100),
                ..setup(4)
            };
            before::<crate::busted::Busted<()>>(&s).unwrap().violations > 0
        });
        assert!(caught, "a lock that does not lock went unnoticed");
    }
}
