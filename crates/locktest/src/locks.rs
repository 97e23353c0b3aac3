//! The lock registry: every lock locktest can measure or torture, by name,
//! written once.
//!
//! Each entry is a name, a line for `locktest list`, and a lock *family*: a
//! type constructor ([`Family::Of<T>`] is the lock protecting a `T`). A
//! loop that wants to run "the lock called `name`" hands a [`Visit`] to
//! [`visit`]; the registry calls it back with the family's type, so the
//! bench, the scenarios and the torture get one monomorphized loop per lock
//! without the registry knowing any of them.
//!
//! Adding a lock: one line in `registry!` below, and a `Lockable` line in
//! `lockable.rs` if its type is new.

use crate::lockable::{Caps, Kind, LockRole, Lockable};

/// A lock type constructor: `Of<T>` is the lock protecting a `T`.
pub trait Family: 'static {
    /// The lock protecting a `T`.
    type Of<T: Send + Sync + 'static>: Lockable<T>;
}

/// A loop to run with one registered lock family.
pub trait Visit {
    /// What the loop returns.
    type Out;
    /// Runs the loop with lock family `F`.
    fn visit<F: Family>(self) -> Self::Out;
}

/// One registered lock.
#[derive(Debug)]
pub struct LockInfo {
    /// The name used by `--lock`, in output, JSON and plots.
    pub name: &'static str,
    /// Mutex or reader-writer lock.
    pub kind: Kind,
    /// What it can do beyond lock, try and unlock.
    pub caps: Caps,
    /// One line for `locktest list`.
    pub about: &'static str,
    /// One of scalelock's own locks (drawn bold in charts).
    pub ours: bool,
    /// The bench lock's role, `bench/NAME`: its lock class (only
    /// scalelock's locks report statistics under it).
    pub role: &'static LockRole,
}

/// `registry! { "name" => Family(path::To::Lock), ours, "about"; ... }`:
/// defines each family type, [`REGISTRY`] and [`visit`].
macro_rules! registry {
    ($($name:literal => $fam:ident($($ty:ident)::+), $ours:literal, $about:literal;)*) => {
        $(
            #[doc = concat!("The `", $name, "` family.")]
            pub struct $fam;
            impl Family for $fam {
                type Of<T: Send + Sync + 'static> = $($ty)::+<T>;
            }
        )*

        /// Every lock, scalelock's first, then the peers each is measured
        /// against.
        pub static REGISTRY: &[LockInfo] = &[$(
            LockInfo {
                name: $name,
                kind: <<$fam as Family>::Of<()> as Lockable<()>>::KIND,
                caps: <<$fam as Family>::Of<()> as Lockable<()>>::CAPS,
                about: $about,
                ours: $ours,
                role: {
                    static ROLE: LockRole = LockRole::new(concat!("bench/", $name));
                    &ROLE
                },
            },
        )*];

        /// Runs `v` with the lock family called `name`; `None` if there is
        /// no such lock.
        pub fn visit<V: Visit>(name: &str, v: V) -> Option<V::Out> {
            match name {
                $($name => Some(v.visit::<$fam>()),)*
                _ => None,
            }
        }
    };
}

registry! {
    "qspinlock" => QSpinLockFamily(scalelock::QSpinLock), true,
        "scalelock QSpinLock: 4-byte queued spinlock, parks when preempted";
    "qrwlock" => QRwLockFamily(scalelock::QRwLock), true,
        "scalelock QRwLock: 8-byte queued reader-writer lock, FIFO, writers never starve";
    "percpu-rwlock" => PerCpuRwLockFamily(scalelock::PerCpuRwLock), true,
        "scalelock PerCpuRwLock: per-thread reader slots, reads write no shared line (BRAVO bias)";
    "std-mutex" => StdMutexFamily(std::sync::Mutex), false, "std::sync::Mutex (futex)";
    "std-rwlock" => StdRwLockFamily(std::sync::RwLock), false, "std::sync::RwLock (futex)";
    "pl-mutex" => PlMutexFamily(parking_lot::Mutex), false,
        "parking_lot 0.13 Mutex (eventually fair)";
    "pl-fairmutex" => PlFairMutexFamily(parking_lot::FairMutex), false,
        "parking_lot 0.13 FairMutex (always hands off)";
    "pl-rwlock" => PlRwLockFamily(parking_lot::RwLock), false,
        "parking_lot 0.13 RwLock (task-fair)";
    "spin-mutex" => SpinMutexFamily(spin::mutex::SpinMutex), false,
        "spin 0.12 SpinMutex (test-and-set)";
    "spin-ticket" => SpinTicketFamily(spin::mutex::TicketMutex), false,
        "spin 0.12 TicketMutex (FIFO ticket spinlock)";
    "spin-rwlock" => SpinRwLockFamily(spin::RwLock), false,
        "spin 0.12 RwLock (reader-preferring spin)";
    "sharded" => ShardedFamily(crossbeam_utils::sync::ShardedLock), false,
        "crossbeam-utils 0.8 ShardedLock (per-shard read locks)";
}

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

/// Position in the registry (unknown names last), for sorting.
pub fn position(name: &str) -> usize {
    REGISTRY
        .iter()
        .position(|l| l.name == name)
        .unwrap_or(usize::MAX)
}

/// `locktest list`: name, kind, operations, what it is.
pub fn listing() -> String {
    let width = REGISTRY.iter().map(|l| l.name.len()).max().unwrap_or(0);
    let ops = REGISTRY
        .iter()
        .map(|l| l.caps.names().len())
        .max()
        .unwrap_or(0);
    REGISTRY
        .iter()
        .map(|l| {
            format!(
                "{:<width$}  {:<6}  {:<ops$}  {}\n",
                l.name,
                l.kind.as_str(),
                l.caps.names(),
                l.about
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Names every family's lock type, to check the visit reaches the right one.
    struct TypeName;

    impl Visit for TypeName {
        type Out = &'static str;
        fn visit<F: Family>(self) -> &'static str {
            std::any::type_name::<F::Of<u8>>()
        }
    }

    #[test]
    fn every_name_visits_its_own_type() {
        let mut seen = Vec::new();
        for l in REGISTRY {
            let ty = visit(l.name, TypeName).unwrap();
            assert!(!seen.contains(&ty), "{} shares {ty}", l.name);
            seen.push(ty);
        }
        assert!(
            visit("qspinlock", TypeName)
                .unwrap()
                .contains("RawQSpinLock")
        );
        assert!(visit("nope", TypeName).is_none());
        assert_eq!(position("qspinlock"), 0);
    }
}
