//! Lock classes; the user-facing overview is on [`LockClass`].

use core::panic::Location;

#[cfg(any(feature = "stats", feature = "lockdep"))]
pub(crate) mod registry;

/// Which kind of lock a class's locks are (the first kind seen for it).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "stats", derive(serde::Serialize, serde::Deserialize))]
#[non_exhaustive]
pub enum LockKind {
    /// [`QSpinLock`](crate::QSpinLock).
    QSpinLock,
    /// [`QRwLock`](crate::QRwLock).
    QRwLock,
    /// [`PerCpuRwLock`](crate::PerCpuRwLock).
    PerCpuRwLock,
    /// [`SeqLock`](crate::SeqLock).
    SeqLock,
    /// [`RefreshOnce`](crate::RefreshOnce).
    RefreshOnce,
    /// A lock outside this crate, instrumented through [`hook`](crate::hook).
    Other,
}

impl LockKind {
    /// The type's name, as shown in tables and reports.
    pub const fn name(self) -> &'static str {
        match self {
            LockKind::QSpinLock => "QSpinLock",
            LockKind::QRwLock => "QRwLock",
            LockKind::PerCpuRwLock => "PerCpuRwLock",
            LockKind::SeqLock => "SeqLock",
            LockKind::RefreshOnce => "RefreshOnce",
            LockKind::Other => "other",
        }
    }
}

impl core::fmt::Display for LockKind {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(self.name())
    }
}

/// How an acquisition takes a lock.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
#[cfg_attr(feature = "stats", derive(serde::Serialize, serde::Deserialize))]
pub enum Access {
    /// Exclusively: a mutex, an rwlock's write side.
    Write,
    /// Shared, and queued behind a waiting writer (fair rwlocks:
    /// [`QRwLock`](crate::QRwLock)): a second read by a thread that
    /// already reads can wait for a writer that waits for the first.
    Read,
    /// Shared, and never queued behind a waiting writer: only a writer that
    /// holds the lock blocks it (a reader-preferring rwlock).
    RecursiveRead,
    /// An upgradable read ([`QRwLock`](crate::QRwLock),
    /// [`PerCpuRwLock`](crate::PerCpuRwLock)): excludes writers and other
    /// upgradable reads, and may become a write. Statistics count it as a
    /// write. Lockdep lets its holder read the lock (its own reads never
    /// meet a writer), treats it as exclusive against other threads (a
    /// reader that queued behind a writer waits for it: it holds the
    /// queue, as these locks' upgradable readers do), and checks an
    /// upgrade as waiting for readers only.
    Upgradable,
    /// Shared; a read by a thread that already read-holds the lock never
    /// waits, but a first read queues behind a waiting writer
    /// ([`PerCpuRwLock`](crate::PerCpuRwLock)). Lockdep lets a thread read
    /// such a lock again, and checks it against other threads as a fair
    /// read.
    ReentrantRead,
}

impl Access {
    /// Whether this is a shared (read) acquisition (an upgradable read is
    /// not: it excludes the other upgradable reads and writers).
    #[inline]
    pub const fn is_read(self) -> bool {
        matches!(
            self,
            Access::Read | Access::RecursiveRead | Access::ReentrantRead
        )
    }

    /// A short word for tables and reports.
    pub const fn name(self) -> &'static str {
        match self {
            Access::Write => "write",
            Access::Read => "read",
            Access::RecursiveRead => "recursive read",
            Access::Upgradable => "upgradable read",
            Access::ReentrantRead => "reentrant read",
        }
    }
}

/// A lock class: the unit that lock statistics and lock-order checking
/// count and check. Declare named ones as `static`s.
///
/// As in Linux's lockdep and lock_stat, a *class* groups the locks that play
/// the same role: every grant-table lock of every domain is one class, every
/// p2m lock another. Statistics are summed per class, and lockdep records
/// the order in which *classes* are taken, so that an AB/BA inversion between
/// two domains' locks is found even if no two threads ever raced on the same
/// pair of instances.
///
/// A lock names its class with a [`ClassRef`]:
/// - [`ClassRef::of`] a `static` [`LockClass`]: the explicit form, for a
///   class spread over many construction sites;
/// - [`ClassRef::here`]: the construction site (file, line and column, taken
///   with `#[track_caller]`), the form Linux uses (one class per
///   `spin_lock_init` call site). A constructor of your own that is
///   `#[track_caller]` passes its caller's site on;
/// - [`ClassRef::TYPE`] (what `new()` and `INIT` use): the lock type's class,
///   shared by every lock of that type without a class of its own.
///
/// ```
/// use scalelock::{ClassRef, LockClass, SeqLock};
///
/// static GNTTAB: LockClass = LockClass::new("gnttab");
/// static ACTIVE_GRANTS: SeqLock<u64> = SeqLock::with_class(0, ClassRef::of(&GNTTAB));
///
/// fn maptrack() -> SeqLock<u32> {
///     // One class for every lock built on this line.
///     SeqLock::with_class(0, ClassRef::here())
/// }
/// # let _ = (ACTIVE_GRANTS.read(), maptrack());
/// ```
///
/// # Cost
/// Without the `stats` and `lockdep` features a [`ClassRef`] is a zero-sized
/// type: naming classes costs no byte and no instruction, and `LockClass` is
/// just a name. With either feature a `ClassRef` is 16 bytes (a tag and a
/// pointer: `core::panic::Location::caller` is `const`, so `here()` works
/// in `static` initialisers, but a `const fn` cannot tag a pointer's low
/// bits, so the two kinds of class need a separate tag), and a class gets a
/// numeric id the first time an instrumented path meets it.
///
/// Lockdep checks the order only of named classes (`of` and `here`): the
/// type classes merge unrelated locks, so a cycle through one would usually
/// be a false alarm. Their instances are still checked for recursion.
///
/// # A global allocator on a lock of this crate
/// With either feature, a class's first instrumented acquisition (the
/// first one with statistics or lockdep switched on) registers it under a
/// mutex, with the lock held; the registry allocates from
/// `std::alloc::System` only, so an allocator's lock may be registered
/// from inside the allocator (`tests/stats_allocator_enabled_late.rs`).
/// (The switch patched into the code, which also allocates
/// while it patches, does not wait for itself: `tests/allocator_on_a_lock.rs`.)
/// With lockdep, an allocator that takes one lock of this crate inside
/// another must have that order recorded before (a new dependency is
/// recorded with allocations through the global allocator): take them
/// once, in that order, with lockdep on, before routing allocations
/// through them. Statistics allocate from `std::alloc::System` only,
/// never through the global allocator.
pub struct LockClass {
    name: &'static str,
    /// Type classes (one per [`LockKind`]) merge unrelated locks: lockdep
    /// does not check their order.
    #[cfg(any(feature = "stats", feature = "lockdep"))]
    ordered: bool,
    /// The registry id, 0 until an instrumented path first meets the class.
    #[cfg(any(feature = "stats", feature = "lockdep"))]
    id: core::sync::atomic::AtomicU32,
}

impl LockClass {
    /// A class named `name` (names need not be unique; statistics keep
    /// classes with equal names apart).
    pub const fn new(name: &'static str) -> Self {
        Self {
            name,
            #[cfg(any(feature = "stats", feature = "lockdep"))]
            ordered: true,
            #[cfg(any(feature = "stats", feature = "lockdep"))]
            id: core::sync::atomic::AtomicU32::new(0),
        }
    }

    /// The class of a lock type's unnamed locks.
    #[cfg(any(feature = "stats", feature = "lockdep"))]
    pub(crate) const fn of_type(kind: LockKind) -> Self {
        Self {
            name: kind.name(),
            ordered: false,
            id: core::sync::atomic::AtomicU32::new(0),
        }
    }

    /// The class's name.
    pub const fn name(&self) -> &'static str {
        self.name
    }
}

impl core::fmt::Debug for LockClass {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_tuple("LockClass").field(&self.name).finish()
    }
}

/// Which class a lock belongs to; see [`LockClass`].
///
/// Zero-sized without the `stats` and `lockdep` features.
#[derive(Clone, Copy)]
pub struct ClassRef(Repr);

#[cfg(any(feature = "stats", feature = "lockdep"))]
#[derive(Clone, Copy)]
enum Repr {
    Type,
    Class(&'static LockClass),
    Site(&'static Location<'static>),
}

#[cfg(not(any(feature = "stats", feature = "lockdep")))]
#[derive(Clone, Copy)]
struct Repr;

impl ClassRef {
    /// The lock type's class, shared by all locks of the type that have no
    /// class of their own.
    #[cfg(any(feature = "stats", feature = "lockdep"))]
    pub const TYPE: ClassRef = ClassRef(Repr::Type);
    /// The lock type's class, shared by all locks of the type that have no
    /// class of their own.
    #[cfg(not(any(feature = "stats", feature = "lockdep")))]
    pub const TYPE: ClassRef = ClassRef(Repr);

    /// The class `class`.
    #[inline]
    pub const fn of(class: &'static LockClass) -> Self {
        #[cfg(any(feature = "stats", feature = "lockdep"))]
        {
            ClassRef(Repr::Class(class))
        }
        #[cfg(not(any(feature = "stats", feature = "lockdep")))]
        {
            let _ = class;
            ClassRef(Repr)
        }
    }

    /// The class of the caller's source location: every lock constructed
    /// at this file, line and column is one class, named after it.
    #[track_caller]
    #[inline]
    pub const fn here() -> Self {
        let site = Location::caller();
        #[cfg(any(feature = "stats", feature = "lockdep"))]
        {
            ClassRef(Repr::Site(site))
        }
        #[cfg(not(any(feature = "stats", feature = "lockdep")))]
        {
            let _ = site;
            ClassRef(Repr)
        }
    }

    /// The class's registry id, registering it on first use. Locks of
    /// the type class resolve to `kind`'s class. Inlined into every
    /// instrumented lock: a `static` or type class once registered is one
    /// load of the id cached in it; a site class probes the site table,
    /// one call away.
    #[cfg(any(feature = "stats", feature = "lockdep"))]
    #[inline(always)]
    pub(crate) fn resolve(self, kind: LockKind) -> ClassId {
        match self.0 {
            Repr::Type => registry::of_class(registry::type_class(kind), kind),
            Repr::Class(class) => registry::of_class(class, kind),
            Repr::Site(site) => registry::of_site(site, kind),
        }
    }
}

impl Default for ClassRef {
    fn default() -> Self {
        Self::TYPE
    }
}

impl From<&'static LockClass> for ClassRef {
    fn from(class: &'static LockClass) -> Self {
        Self::of(class)
    }
}

impl core::fmt::Debug for ClassRef {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        #[cfg(any(feature = "stats", feature = "lockdep"))]
        match self.0 {
            Repr::Type => f.write_str("ClassRef::TYPE"),
            Repr::Class(c) => write!(f, "ClassRef::of({:?})", c.name),
            Repr::Site(s) => write!(f, "ClassRef::here({s})"),
        }
        #[cfg(not(any(feature = "stats", feature = "lockdep")))]
        f.write_str("ClassRef")
    }
}

/// A registered class: its index in the registry, and whether lockdep
/// checks its order (named classes) or not (type classes).
#[cfg(any(feature = "stats", feature = "lockdep"))]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct ClassId {
    pub(crate) index: u32,
    pub(crate) ordered: bool,
}
