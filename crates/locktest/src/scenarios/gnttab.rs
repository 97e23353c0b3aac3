//! `gnttab` (Xen's grant tables; "Implement per-cpu reader-writer locks",
//! Malcolm Crossley, xen-devel 2015, patch 2/3): a backend's I/O queues map,
//! unmap and copy grants of two guests, each grant operation under the
//! guest table's read lock plus the entry's own spinlock, while rare
//! writers grow a table or switch its version (the model and its checks:
//! [`grant_table`]).
//!
//! - before: the table lock is a plain rwlock (`--lock`; default `qrwlock`,
//!   a queued rwlock like Xen's, and `pl-rwlock`). Every read writes the
//!   lock's shared word, so the queues bounce its cache line.
//! - after: the table lock is a `PerCpuRwLock` on the grant tables' own
//!   `ReaderTable` (Xen's `DEFINE_PERCPU_RWLOCK_GLOBAL(grant_rwlock)`: one
//!   per-CPU slot array for the class of all grant-table locks). A read
//!   writes only the reading thread's slot; a writer revokes the reader bias.

use scalelock::{PerCpuRwLock, RawPerCpuRwLock, ReaderTable};

use super::grant_table::{self, Direct, GT_LOCK, Readers};
use super::{Outcome, RunFn, Scenario, Setup, before_fn};
use crate::lockable::Lockable;

/// The reader slots of the grant-table lock class.
pub static GRANT_RWLOCK: ReaderTable = ReaderTable::new();

pub const SCENARIO: Scenario = Scenario {
    name: "gnttab",
    about: "Xen grant tables: I/O queues map/unmap/copy grants under the table's read lock; \
            rwlock vs per-CPU rwlock",
    default_locks: &["qrwlock", "pl-rwlock"],
    before: before_for,
    after_name: "after-percpu-rwlock",
    after,
};

fn before_for(lock: &str) -> Option<RunFn> {
    before_fn!(lock, before, ())
}

fn before<L: Lockable<()>>(setup: &Setup) -> Result<Outcome, String> {
    let new = || L::with_role((), &GT_LOCK);
    grant_table::drive(setup, new, &Readers::new(setup.threads), &Direct)
}

fn after(setup: &Setup) -> Result<Outcome, String> {
    let new = || {
        let raw = RawPerCpuRwLock::with_table_and_class(&GRANT_RWLOCK, GT_LOCK.percpu_rwlock());
        PerCpuRwLock::from_raw(raw, ())
    };
    grant_table::drive(setup, new, &Readers::new(setup.threads), &Direct)
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
            what: "gnttab/test".into(),
        }
    }

    #[test]
    fn both_designs_keep_the_invariants() {
        let out = after(&setup(3)).unwrap();
        assert_eq!(out.violations, 0);
        assert!(out.stats.total > 0);
        assert_eq!(
            before::<scalelock::QRwLock<()>>(&setup(3))
                .unwrap()
                .violations,
            0
        );
    }

    #[test]
    #[cfg_attr(miri, ignore)]
    fn a_table_lock_that_does_not_lock_is_caught() {
        let caught = crate::scenarios::caught_within_30s(|| {
            before::<Busted<()>>(&setup(4)).unwrap().violations > 0
        });
        assert!(
            caught,
            "a grant-table lock that does not lock went unnoticed"
        );
    }
}
