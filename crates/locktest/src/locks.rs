//! The lock registry: every lock locktest can measure or torture, by name.
//!
//! A lock takes part through [`Lockable`], a two-method view ("run this
//! closure under the write lock", "run this closure under the read lock")
//! that the bench and torture loops are generic over, so every lock's loop is
//! monomorphized: no dynamic dispatch on the measured path. Adding a lock is
//! one line in [`REGISTRY`] (plus a `Lockable` impl if its type is not a
//! `lock_api` lock).

use crate::bench::{self, BenchData};
use crate::torture::{self, TortureData};

/// Whether a lock only has exclusive access or also shared (read) access.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Kind {
    /// Exclusive only; `--read-pct` does not apply.
    Mutex,
    /// Shared readers and exclusive writers.
    RwLock,
}

impl Kind {
    /// The word used in `list`, JSON and the summary.
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Mutex => "mutex",
            Kind::RwLock => "rwlock",
        }
    }
}

/// A lock protecting a `T`, seen the way the bench and torture loops use it.
pub trait Lockable<T>: Send + Sync + Sized {
    /// Mutex or reader-writer lock.
    const KIND: Kind;
    /// A new unlocked lock holding `value`.
    fn new(value: T) -> Self;
    /// Runs `f` with exclusive access.
    fn with_write<R>(&self, f: impl FnOnce(&mut T) -> R) -> R;
    /// Runs `f` with shared access (exclusive for a mutex).
    fn with_read<R>(&self, f: impl FnOnce(&T) -> R) -> R;
}

/// Every `lock_api` mutex: scalelock's, parking_lot's.
impl<R: lock_api::RawMutex + Send + Sync, T: Send> Lockable<T> for lock_api::Mutex<R, T> {
    const KIND: Kind = Kind::Mutex;
    fn new(value: T) -> Self {
        lock_api::Mutex::new(value)
    }
    #[inline]
    fn with_write<U>(&self, f: impl FnOnce(&mut T) -> U) -> U {
        f(&mut self.lock())
    }
    #[inline]
    fn with_read<U>(&self, f: impl FnOnce(&T) -> U) -> U {
        f(&self.lock())
    }
}

/// Every `lock_api` reader-writer lock: scalelock's, parking_lot's.
impl<R: lock_api::RawRwLock + Send + Sync, T: Send + Sync> Lockable<T> for lock_api::RwLock<R, T> {
    const KIND: Kind = Kind::RwLock;
    fn new(value: T) -> Self {
        lock_api::RwLock::new(value)
    }
    #[inline]
    fn with_write<U>(&self, f: impl FnOnce(&mut T) -> U) -> U {
        f(&mut self.write())
    }
    #[inline]
    fn with_read<U>(&self, f: impl FnOnce(&T) -> U) -> U {
        f(&self.read())
    }
}

// std's locks poison when a holder panics. Neither loop panics while holding
// a lock, and if one ever did the run is already lost, so take the data back
// out of the poison error rather than adding a second panic.
fn unpoison<G>(result: std::sync::LockResult<G>) -> G {
    result.unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// `lockable!(path::To::Lock, Kind, [bounds on T], write, read, unwrap)`:
/// a `Lockable` impl for a lock outside `lock_api` whose guards come from
/// `write`/`read` methods, passed through `unwrap` (`identity` or
/// `unpoison`).
macro_rules! lockable {
    ($($ty:ident)::+, $kind:ident, [$($bound:tt)+], $write:ident, $read:ident, $unwrap:path) => {
        impl<T: $($bound)+> Lockable<T> for $($ty)::+<T> {
            const KIND: Kind = Kind::$kind;
            fn new(value: T) -> Self {
                $($ty)::+::new(value)
            }
            #[inline]
            fn with_write<U>(&self, f: impl FnOnce(&mut T) -> U) -> U {
                let mut guard = $unwrap(self.$write());
                f(&mut guard)
            }
            #[inline]
            fn with_read<U>(&self, f: impl FnOnce(&T) -> U) -> U {
                let guard = $unwrap(self.$read());
                f(&guard)
            }
        }
    };
}

lockable!(std::sync::Mutex, Mutex, [Send], lock, lock, unpoison);
lockable!(
    std::sync::RwLock,
    RwLock,
    [Send + Sync],
    write,
    read,
    unpoison
);
lockable!(
    crossbeam_utils::sync::ShardedLock,
    RwLock,
    [Send + Sync],
    write,
    read,
    unpoison
);
lockable!(
    spin::mutex::SpinMutex,
    Mutex,
    [Send],
    lock,
    lock,
    core::convert::identity
);
lockable!(
    spin::mutex::TicketMutex,
    Mutex,
    [Send],
    lock,
    lock,
    core::convert::identity
);
lockable!(
    spin::RwLock,
    RwLock,
    [Send + Sync],
    write,
    read,
    core::convert::identity
);

/// One registered lock: its name, what it is, and its monomorphized loops.
pub struct LockInfo {
    /// The name used by `--lock`, in output, JSON and plots.
    pub name: &'static str,
    /// Mutex or reader-writer lock.
    pub kind: Kind,
    /// One line for `locktest list`.
    pub about: &'static str,
    /// The bench loop for this lock.
    pub bench: fn(&bench::RunConfig) -> Result<bench::Sample, String>,
    /// The torture loop for this lock.
    pub torture: fn(&torture::TortureConfig) -> torture::Outcome,
}

/// `entry!("name", "about", path::To::Lock)`: the lock type is given without
/// its data parameter; the bench and torture data types are filled in here.
macro_rules! entry {
    ($name:literal, $about:literal, $($ty:ident)::+) => {
        LockInfo {
            name: $name,
            kind: <$($ty)::+<BenchData> as Lockable<BenchData>>::KIND,
            about: $about,
            bench: bench::run::<$($ty)::+<BenchData>>,
            torture: torture::run::<$($ty)::+<TortureData>>,
        }
    };
}

/// Every lock, scalelock's first, then the peers each is measured against.
pub static REGISTRY: &[LockInfo] = &[
    entry!(
        "qspinlock",
        "scalelock QSpinLock: 4-byte queued spinlock, parks when preempted",
        scalelock::QSpinLock
    ),
    entry!(
        "qrwlock",
        "scalelock QRwLock: 8-byte queued reader-writer lock, FIFO, writers never starve",
        scalelock::QRwLock
    ),
    entry!(
        "percpu-rwlock",
        "scalelock PerCpuRwLock: per-thread reader slots, reads write no shared line (BRAVO bias)",
        scalelock::PerCpuRwLock
    ),
    entry!("std-mutex", "std::sync::Mutex (futex)", std::sync::Mutex),
    entry!("std-rwlock", "std::sync::RwLock (futex)", std::sync::RwLock),
    entry!(
        "pl-mutex",
        "parking_lot 0.13 Mutex (eventually fair)",
        parking_lot::Mutex
    ),
    entry!(
        "pl-fairmutex",
        "parking_lot 0.13 FairMutex (always hands off)",
        parking_lot::FairMutex
    ),
    entry!(
        "pl-rwlock",
        "parking_lot 0.13 RwLock (task-fair)",
        parking_lot::RwLock
    ),
    entry!(
        "spin-mutex",
        "spin 0.12 SpinMutex (test-and-set)",
        spin::mutex::SpinMutex
    ),
    entry!(
        "spin-ticket",
        "spin 0.12 TicketMutex (FIFO ticket spinlock)",
        spin::mutex::TicketMutex
    ),
    entry!(
        "spin-rwlock",
        "spin 0.12 RwLock (reader-preferring spin)",
        spin::RwLock
    ),
    entry!(
        "sharded",
        "crossbeam-utils 0.8 ShardedLock (per-shard read locks)",
        crossbeam_utils::sync::ShardedLock
    ),
];

/// The throughput baseline a kind's summary ratios are taken against.
pub fn baseline(kind: Kind) -> &'static str {
    match kind {
        Kind::Mutex => "pl-mutex",
        Kind::RwLock => "pl-rwlock",
    }
}

/// Looks a lock up by its exact name.
pub fn find(name: &str) -> Option<&'static LockInfo> {
    REGISTRY.iter().find(|l| l.name == name)
}

/// Every registered name, comma separated, for error messages.
pub fn names() -> String {
    REGISTRY
        .iter()
        .map(|l| l.name)
        .collect::<Vec<_>>()
        .join(", ")
}
