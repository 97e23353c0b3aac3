//! [`Lockable`]: every lock seen the way the bench, scenario and torture
//! loops use it, and what each lock can do beyond lock and unlock.
//!
//! The loops are generic over `Lockable`, so every lock's loop is
//! monomorphized: no dynamic dispatch on the measured path. Operations are
//! closures run under the lock ("run this under the write lock"), so a
//! caller can never forget an unlock.
//!
//! # Capabilities
//! Every lock can lock, try to lock, and unlock, shared or exclusive (a
//! mutex's shared access is exclusive). The rest is optional and declared
//! in [`Lockable::CAPS`]: fair unlock (hand the lock to a waiter,
//! `RawMutexFair`/`RawRwLockFair`), timed tries (`RawMutexTimed`/
//! `RawRwLockTimed`), atomic downgrade of a write lock to a read lock
//! (`RawRwLockDowngrade`), upgradable reads (`RawRwLockUpgrade`), and
//! timed upgrades (`RawRwLockUpgradeTimed`).
//! A lock without a capability still answers its method, with the nearest
//! plain operation (documented on each method), so callers that want the
//! real thing check `CAPS` first; the torture op mix does.
//!
//! The impls are one line per lock type: `lock_api_mutex!` and
//! `lock_api_rwlock!` for `lock_api` locks, with the capabilities in
//! brackets, and `peer!` for locks with their own API. When scalelock gains
//! a capability (say `RawMutexTimed` for `QSpinLock`), add its name to the
//! lock's bracket here and every loop picks it up.

use std::time::Duration;

use scalelock::{ClassRef, LockClass};

/// A lock's role in a benchmark or scenario (`bench/qspinlock`,
/// `grant_table/gt_lock`): its lock class, one per scalelock lock type.
///
/// A scalelock lock class belongs to one lock type (the first it meets), so
/// a role that `--lock` may fill with any lock has a class per type; all
/// carry the role's name, and the statistics table tells them apart by
/// their kind.
#[derive(Debug)]
pub struct LockRole {
    qspinlock: LockClass,
    qrwlock: LockClass,
    percpu_rwlock: LockClass,
}

impl LockRole {
    /// The role called `name`.
    pub const fn new(name: &'static str) -> Self {
        LockRole {
            qspinlock: LockClass::new(name),
            qrwlock: LockClass::new(name),
            percpu_rwlock: LockClass::new(name),
        }
    }

    /// Its class for a `QSpinLock`.
    pub fn qspinlock(&'static self) -> ClassRef {
        ClassRef::of(&self.qspinlock)
    }

    /// Its class for a `QRwLock`.
    pub fn qrwlock(&'static self) -> ClassRef {
        ClassRef::of(&self.qrwlock)
    }

    /// Its class for a `PerCpuRwLock`.
    pub fn percpu_rwlock(&'static self) -> ClassRef {
        ClassRef::of(&self.percpu_rwlock)
    }
}

/// Whether a lock only has exclusive access or also shared (read) access.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Kind {
    /// Exclusive only; read shares do not apply.
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

    /// The plural used in titles.
    pub fn plural(self) -> &'static str {
        match self {
            Kind::Mutex => "mutexes",
            Kind::RwLock => "rwlocks",
        }
    }
}

/// What a lock can do beyond lock, try-lock and unlock: a set of flags.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Caps(u8);

impl Caps {
    /// Nothing beyond lock, try and unlock.
    pub const NONE: Caps = Caps(0);
    /// Fair unlock: the lock goes to a waiter rather than back to the
    /// unlocking thread.
    pub const FAIR: Caps = Caps(1);
    /// Tries that wait up to a timeout.
    pub const TIMED: Caps = Caps(2);
    /// A write lock turns into a read lock with no writer slipping in.
    pub const DOWNGRADE: Caps = Caps(4);
    /// Upgradable reads: a read that excludes writers and other upgradable
    /// readers and can turn into a write lock with no writer slipping in.
    pub const UPGRADE: Caps = Caps(8);
    /// A timed upgrade: an upgradable read tries for up to a timeout to
    /// become a write lock, and is still an upgradable read if it did not.
    pub const TIMED_UPGRADE: Caps = Caps(16);

    /// Every flag, with its name, in the order `list` shows them.
    pub const NAMED: [(Caps, &'static str); 5] = [
        (Caps::FAIR, "fair"),
        (Caps::TIMED, "timed"),
        (Caps::DOWNGRADE, "downgrade"),
        (Caps::UPGRADE, "upgrade"),
        (Caps::TIMED_UPGRADE, "timed-upgrade"),
    ];

    /// Both sets of flags.
    pub const fn with(self, other: Caps) -> Caps {
        Caps(self.0 | other.0)
    }

    /// Whether every flag of `other` is set.
    pub const fn has(self, other: Caps) -> bool {
        self.0 & other.0 == other.0
    }

    /// `try,fair,timed`: the operations beyond lock and unlock, for `list`.
    pub fn names(self) -> String {
        let mut out = vec!["try"];
        out.extend(Self::NAMED.iter().filter(|c| self.has(c.0)).map(|c| c.1));
        out.join(",")
    }
}

/// A lock protecting a `T`, seen the way the loops use it.
pub trait Lockable<T>: Send + Sync + Sized {
    /// Mutex or reader-writer lock.
    const KIND: Kind;
    /// What the lock can do beyond lock, try and unlock.
    const CAPS: Caps;
    /// A new unlocked lock holding `value`.
    fn new(value: T) -> Self;
    /// A new unlocked lock holding `value`, playing `role` (its lock class
    /// in scalelock's statistics and lockdep); locks without classes (the
    /// peers) ignore it.
    fn with_role(value: T, role: &'static LockRole) -> Self {
        let _ = role;
        Self::new(value)
    }
    /// Runs `f` with exclusive access.
    fn with_write<R>(&self, f: impl FnOnce(&mut T) -> R) -> R;
    /// Runs `f` with shared access (exclusive for a mutex).
    fn with_read<R>(&self, f: impl FnOnce(&T) -> R) -> R;
    /// Runs `f` with exclusive access if the lock is free now.
    fn try_with_write<R>(&self, f: impl FnOnce(&mut T) -> R) -> Option<R>;
    /// Runs `f` with shared access if it is available now.
    fn try_with_read<R>(&self, f: impl FnOnce(&T) -> R) -> Option<R>;
    /// The lock's state, for a stall report: the raw lock's `Debug` where
    /// it has one, else what the lock says about itself.
    fn state(&self) -> String;

    /// [`with_write`](Self::with_write), unlocking fairly ([`Caps::FAIR`];
    /// without it: a plain unlock).
    fn with_write_fair<R>(&self, f: impl FnOnce(&mut T) -> R) -> R {
        self.with_write(f)
    }
    /// [`with_read`](Self::with_read), unlocking fairly ([`Caps::FAIR`];
    /// without it: a plain unlock).
    fn with_read_fair<R>(&self, f: impl FnOnce(&T) -> R) -> R {
        self.with_read(f)
    }
    /// Runs `a` with exclusive access, bumps the lock (a fair release and
    /// a re-acquisition: a waiter may go in between) and runs `b` with
    /// exclusive access again ([`Caps::FAIR`]; without it: two plain write
    /// sections).
    fn with_write_bump<R>(&self, a: impl FnOnce(&mut T), b: impl FnOnce(&mut T) -> R) -> R {
        self.with_write(a);
        self.with_write(b)
    }
    /// [`with_write_bump`](Self::with_write_bump) with shared access (a
    /// mutex's is exclusive).
    fn with_read_bump<R>(&self, a: impl FnOnce(&T), b: impl FnOnce(&T) -> R) -> R {
        self.with_read(a);
        self.with_read(b)
    }
    /// Runs `f` with upgradable access if that is available now
    /// ([`Caps::UPGRADE`]; without it: a try of shared access).
    fn try_with_upgradable<R>(&self, f: impl FnOnce(&T) -> R) -> Option<R> {
        self.try_with_read(f)
    }
    /// Runs `f` with upgradable access if that comes within `timeout`
    /// ([`Caps::TIMED_UPGRADE`]; without it:
    /// [`try_with_upgradable`](Self::try_with_upgradable)).
    fn try_with_upgradable_for<R>(&self, timeout: Duration, f: impl FnOnce(&T) -> R) -> Option<R> {
        let _ = timeout;
        self.try_with_upgradable(f)
    }
    /// Runs `f` with exclusive access if that comes within `timeout`
    /// ([`Caps::TIMED`]; without it: a plain try).
    fn try_with_write_for<R>(&self, timeout: Duration, f: impl FnOnce(&mut T) -> R) -> Option<R> {
        let _ = timeout;
        self.try_with_write(f)
    }
    /// Runs `f` with shared access if that comes within `timeout`
    /// ([`Caps::TIMED`]; without it: a plain try).
    fn try_with_read_for<R>(&self, timeout: Duration, f: impl FnOnce(&T) -> R) -> Option<R> {
        let _ = timeout;
        self.try_with_read(f)
    }
    /// Runs `w` with exclusive access, downgrades to shared access and runs
    /// `r` ([`Caps::DOWNGRADE`]: no writer can get in between; without it:
    /// unlock, then lock shared, so one can).
    fn with_write_then_read<R>(&self, w: impl FnOnce(&mut T), r: impl FnOnce(&T) -> R) -> R {
        self.with_write(w);
        self.with_read(r)
    }
    /// Runs `u` with upgradable access (shared, but excluding writers and
    /// other upgradable readers), upgrades to exclusive access and runs `w`
    /// ([`Caps::UPGRADE`]: no writer can get in between; without it:
    /// `u` under a read lock, unlock, then `w` under a write lock).
    fn with_upgradable_then_write<U, R>(
        &self,
        u: impl FnOnce(&T) -> U,
        w: impl FnOnce(U, &mut T) -> R,
    ) -> R {
        let seen = self.with_read(u);
        self.with_write(|d| w(seen, d))
    }
    /// Runs `u` with upgradable access, then tries once to upgrade: runs
    /// `w` with exclusive access if it did, else `r` with the upgradable
    /// access still held ([`Caps::UPGRADE`]: no writer can get in between
    /// either way; without it: as
    /// [`with_upgradable_then_write`](Self::with_upgradable_then_write),
    /// never failing).
    fn with_upgradable_then_try_write<U, R>(
        &self,
        u: impl FnOnce(&T) -> U,
        w: impl FnOnce(U, &mut T) -> R,
        r: impl FnOnce(U, &T) -> R,
    ) -> R {
        let _ = r;
        self.with_upgradable_then_write(u, w)
    }
    /// Runs `u` with upgradable access, then tries for up to `timeout` to
    /// upgrade: runs `w` with exclusive access if it did, else `r` with the
    /// upgradable access still held ([`Caps::TIMED_UPGRADE`]: no writer
    /// can get in between either way; without it: as
    /// [`with_upgradable_then_write`](Self::with_upgradable_then_write),
    /// never timing out).
    fn with_upgradable_then_write_for<U, R>(
        &self,
        timeout: Duration,
        u: impl FnOnce(&T) -> U,
        w: impl FnOnce(U, &mut T) -> R,
        r: impl FnOnce(U, &T) -> R,
    ) -> R {
        let _ = (timeout, r);
        self.with_upgradable_then_write(u, w)
    }
}

/// The state of a `lock_api` lock whose raw lock has a `Debug` impl
/// (scalelock's): its words and queues.
macro_rules! raw_state {
    (debug, $self:ident) => {
        // SAFETY: `raw` is unsafe because the raw lock could be unlocked
        // through it; we only format it.
        format!("{:?}", unsafe { $self.raw() })
    };
    (plain, $self:ident) => {
        format!("is_locked = {}", $self.is_locked())
    };
}

/// The optional operations of a `lock_api` mutex, one arm per capability.
macro_rules! mutex_cap {
    (FAIR) => {
        fn with_write_fair<U>(&self, f: impl FnOnce(&mut T) -> U) -> U {
            let mut g = self.lock();
            let out = f(&mut g);
            lock_api::MutexGuard::unlock_fair(g);
            out
        }
        fn with_read_fair<U>(&self, f: impl FnOnce(&T) -> U) -> U {
            self.with_write_fair(|d| f(d))
        }
        fn with_write_bump<U>(&self, a: impl FnOnce(&mut T), b: impl FnOnce(&mut T) -> U) -> U {
            let mut g = self.lock();
            a(&mut g);
            lock_api::MutexGuard::bump(&mut g);
            b(&mut g)
        }
        fn with_read_bump<U>(&self, a: impl FnOnce(&T), b: impl FnOnce(&T) -> U) -> U {
            self.with_write_bump(|d| a(d), |d| b(d))
        }
    };
    (TIMED) => {
        fn try_with_write_for<U>(&self, t: Duration, f: impl FnOnce(&mut T) -> U) -> Option<U> {
            self.try_lock_for(t).map(|mut g| f(&mut g))
        }
        fn try_with_read_for<U>(&self, t: Duration, f: impl FnOnce(&T) -> U) -> Option<U> {
            self.try_lock_for(t).map(|g| f(&g))
        }
    };
}

/// The optional operations of a `lock_api` rwlock, one arm per capability.
macro_rules! rwlock_cap {
    (FAIR) => {
        fn with_write_fair<U>(&self, f: impl FnOnce(&mut T) -> U) -> U {
            let mut g = self.write();
            let out = f(&mut g);
            lock_api::RwLockWriteGuard::unlock_fair(g);
            out
        }
        fn with_read_fair<U>(&self, f: impl FnOnce(&T) -> U) -> U {
            let g = self.read();
            let out = f(&g);
            lock_api::RwLockReadGuard::unlock_fair(g);
            out
        }
        fn with_write_bump<U>(&self, a: impl FnOnce(&mut T), b: impl FnOnce(&mut T) -> U) -> U {
            let mut g = self.write();
            a(&mut g);
            lock_api::RwLockWriteGuard::bump(&mut g);
            b(&mut g)
        }
        fn with_read_bump<U>(&self, a: impl FnOnce(&T), b: impl FnOnce(&T) -> U) -> U {
            let mut g = self.read();
            a(&g);
            lock_api::RwLockReadGuard::bump(&mut g);
            b(&g)
        }
    };
    (TIMED) => {
        fn try_with_write_for<U>(&self, t: Duration, f: impl FnOnce(&mut T) -> U) -> Option<U> {
            self.try_write_for(t).map(|mut g| f(&mut g))
        }
        fn try_with_read_for<U>(&self, t: Duration, f: impl FnOnce(&T) -> U) -> Option<U> {
            self.try_read_for(t).map(|g| f(&g))
        }
    };
    (DOWNGRADE) => {
        fn with_write_then_read<U>(&self, w: impl FnOnce(&mut T), r: impl FnOnce(&T) -> U) -> U {
            let mut g = self.write();
            w(&mut g);
            let g = lock_api::RwLockWriteGuard::downgrade(g);
            r(&g)
        }
    };
    (UPGRADE) => {
        fn try_with_upgradable<U>(&self, f: impl FnOnce(&T) -> U) -> Option<U> {
            self.try_upgradable_read().map(|g| f(&g))
        }
        fn with_upgradable_then_write<S, U>(
            &self,
            u: impl FnOnce(&T) -> S,
            w: impl FnOnce(S, &mut T) -> U,
        ) -> U {
            let g = self.upgradable_read();
            let seen = u(&g);
            let mut g = lock_api::RwLockUpgradableReadGuard::upgrade(g);
            w(seen, &mut g)
        }
        fn with_upgradable_then_try_write<S, U>(
            &self,
            u: impl FnOnce(&T) -> S,
            w: impl FnOnce(S, &mut T) -> U,
            r: impl FnOnce(S, &T) -> U,
        ) -> U {
            let g = self.upgradable_read();
            let seen = u(&g);
            match lock_api::RwLockUpgradableReadGuard::try_upgrade(g) {
                Ok(mut g) => w(seen, &mut g),
                Err(g) => r(seen, &g),
            }
        }
    };
    (TIMED_UPGRADE) => {
        fn try_with_upgradable_for<U>(&self, t: Duration, f: impl FnOnce(&T) -> U) -> Option<U> {
            self.try_upgradable_read_for(t).map(|g| f(&g))
        }
        fn with_upgradable_then_write_for<S, U>(
            &self,
            t: Duration,
            u: impl FnOnce(&T) -> S,
            w: impl FnOnce(S, &mut T) -> U,
            r: impl FnOnce(S, &T) -> U,
        ) -> U {
            let g = self.upgradable_read();
            let seen = u(&g);
            match lock_api::RwLockUpgradableReadGuard::try_upgrade_for(g, t) {
                Ok(mut g) => w(seen, &mut g),
                Err(g) => r(seen, &g),
            }
        }
    };
}

/// `with_role` of a `lock_api` lock: the [`LockRole`] method naming the
/// class for a raw lock with a `with_class(ClassRef)` constructor
/// (scalelock's), `unclassed` for one without (the trait's default: the
/// role is ignored).
macro_rules! class_ctor {
    (unclassed, $raw:ty, $wrap:ident) => {};
    ($class:ident, $raw:ty, $wrap:ident) => {
        fn with_role(value: T, role: &'static LockRole) -> Self {
            lock_api::$wrap::from_raw(<$raw>::with_class(role.$class()), value)
        }
    };
}

/// `lock_api_mutex!(path::RawLock, [CAPS], debug|plain, classed|unclassed)`:
/// `Lockable` for `lock_api::Mutex<RawLock, T>`.
macro_rules! lock_api_mutex {
    ($raw:ty, [$($cap:ident),*], $state:ident, $class:ident) => {
        impl<T: Send> Lockable<T> for lock_api::Mutex<$raw, T> {
            const KIND: Kind = Kind::Mutex;
            const CAPS: Caps = Caps::NONE $(.with(Caps::$cap))*;
            fn new(value: T) -> Self {
                lock_api::Mutex::new(value)
            }
            class_ctor!($class, $raw, Mutex);
            #[inline]
            fn with_write<U>(&self, f: impl FnOnce(&mut T) -> U) -> U {
                f(&mut self.lock())
            }
            #[inline]
            fn with_read<U>(&self, f: impl FnOnce(&T) -> U) -> U {
                f(&self.lock())
            }
            fn try_with_write<U>(&self, f: impl FnOnce(&mut T) -> U) -> Option<U> {
                self.try_lock().map(|mut g| f(&mut g))
            }
            fn try_with_read<U>(&self, f: impl FnOnce(&T) -> U) -> Option<U> {
                self.try_lock().map(|g| f(&g))
            }
            fn state(&self) -> String {
                raw_state!($state, self)
            }
            $(mutex_cap!($cap);)*
        }
    };
}

/// `lock_api_rwlock!(path::RawLock, [CAPS], debug|plain, classed|unclassed)`:
/// `Lockable` for `lock_api::RwLock<RawLock, T>`.
macro_rules! lock_api_rwlock {
    ($raw:ty, [$($cap:ident),*], $state:ident, $class:ident) => {
        impl<T: Send + Sync> Lockable<T> for lock_api::RwLock<$raw, T> {
            const KIND: Kind = Kind::RwLock;
            const CAPS: Caps = Caps::NONE $(.with(Caps::$cap))*;
            fn new(value: T) -> Self {
                lock_api::RwLock::new(value)
            }
            class_ctor!($class, $raw, RwLock);
            #[inline]
            fn with_write<U>(&self, f: impl FnOnce(&mut T) -> U) -> U {
                f(&mut self.write())
            }
            #[inline]
            fn with_read<U>(&self, f: impl FnOnce(&T) -> U) -> U {
                f(&self.read())
            }
            fn try_with_write<U>(&self, f: impl FnOnce(&mut T) -> U) -> Option<U> {
                self.try_write().map(|mut g| f(&mut g))
            }
            fn try_with_read<U>(&self, f: impl FnOnce(&T) -> U) -> Option<U> {
                self.try_read().map(|g| f(&g))
            }
            fn state(&self) -> String {
                raw_state!($state, self)
            }
            $(rwlock_cap!($cap);)*
        }
    };
}

lock_api_mutex!(scalelock::RawQSpinLock, [FAIR, TIMED], debug, qspinlock);
lock_api_rwlock!(
    scalelock::RawQRwLock,
    [FAIR, TIMED, UPGRADE, DOWNGRADE, TIMED_UPGRADE],
    debug,
    qrwlock
);
lock_api_rwlock!(
    scalelock::RawPerCpuRwLock,
    [FAIR, TIMED, UPGRADE, DOWNGRADE, TIMED_UPGRADE],
    debug,
    percpu_rwlock
);
lock_api_mutex!(parking_lot::RawMutex, [FAIR, TIMED], plain, unclassed);
lock_api_mutex!(parking_lot::RawFairMutex, [FAIR, TIMED], plain, unclassed);
lock_api_rwlock!(
    parking_lot::RawRwLock,
    [FAIR, TIMED, DOWNGRADE, UPGRADE, TIMED_UPGRADE],
    plain,
    unclassed
);

// std's locks poison when a holder panics. No loop panics while holding a
// lock, and if one ever did the run is already lost, so take the data back
// out of the poison error rather than adding a second panic.
fn unpoison<G>(result: std::sync::LockResult<G>) -> G {
    result.unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// std's `try_*` result as an option (a poisoned lock is still acquired).
fn try_unpoison<G>(result: std::sync::TryLockResult<G>) -> Option<G> {
    match result {
        Ok(g) => Some(g),
        Err(std::sync::TryLockError::Poisoned(p)) => Some(p.into_inner()),
        Err(std::sync::TryLockError::WouldBlock) => None,
    }
}

/// `peer!(path::To::Lock, Kind, [bounds on T], write, read, try_write,
/// try_read, unwrap, try_unwrap, [CAPS] { capability methods })`: a
/// `Lockable` impl for a lock outside `lock_api` whose guards come from the
/// named methods, passed through `unwrap` (`identity` or `unpoison`).
macro_rules! peer {
    ($($ty:ident)::+, $kind:ident, [$($bound:tt)+], $write:ident, $read:ident,
     $try_write:ident, $try_read:ident, $unwrap:path, $try_unwrap:path,
     [$($cap:ident),*] { $($extra:item)* }) => {
        impl<T: $($bound)+> Lockable<T> for $($ty)::+<T> {
            const KIND: Kind = Kind::$kind;
            const CAPS: Caps = Caps::NONE $(.with(Caps::$cap))*;
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
            fn try_with_write<U>(&self, f: impl FnOnce(&mut T) -> U) -> Option<U> {
                $try_unwrap(self.$try_write()).map(|mut g| f(&mut g))
            }
            fn try_with_read<U>(&self, f: impl FnOnce(&T) -> U) -> Option<U> {
                $try_unwrap(self.$try_read()).map(|g| f(&g))
            }
            fn state(&self) -> String {
                // Only whether a try succeeds: these locks show no more.
                let free = $try_unwrap(self.$try_write()).is_some();
                format!("{}", if free { "unlocked" } else { "locked" })
            }
            $($extra)*
        }
    };
}

peer!(std::sync::Mutex, Mutex, [Send], lock, lock, try_lock, try_lock,
      unpoison, try_unpoison, [] {});
peer!(std::sync::RwLock, RwLock, [Send + Sync], write, read, try_write, try_read,
      unpoison, try_unpoison, [DOWNGRADE] {
    fn with_write_then_read<U>(&self, w: impl FnOnce(&mut T), r: impl FnOnce(&T) -> U) -> U {
        let mut g = unpoison(self.write());
        w(&mut g);
        r(&std::sync::RwLockWriteGuard::downgrade(g))
    }
});
peer!(crossbeam_utils::sync::ShardedLock, RwLock, [Send + Sync], write, read, try_write,
      try_read, unpoison, try_unpoison, [] {});
peer!(spin::mutex::SpinMutex, Mutex, [Send], lock, lock, try_lock, try_lock,
      core::convert::identity, core::convert::identity, [] {});
peer!(spin::mutex::TicketMutex, Mutex, [Send], lock, lock, try_lock, try_lock,
      core::convert::identity, core::convert::identity, [] {});
peer!(spin::RwLock, RwLock, [Send + Sync], write, read, try_write, try_read,
      core::convert::identity, core::convert::identity, [DOWNGRADE, UPGRADE] {
    fn with_write_then_read<U>(&self, w: impl FnOnce(&mut T), r: impl FnOnce(&T) -> U) -> U {
        let mut g = self.write();
        w(&mut g);
        r(&spin::rwlock::RwLockWriteGuard::downgrade(g))
    }
    fn with_upgradable_then_write<S, U>(
        &self,
        u: impl FnOnce(&T) -> S,
        w: impl FnOnce(S, &mut T) -> U,
    ) -> U {
        let g = self.upgradeable_read();
        let seen = u(&g);
        let mut g = g.upgrade();
        w(seen, &mut g)
    }
    // Without these two the defaults ran: a plain try-read for a
    // "try-upgradable" and a blocking upgrade for a "try-upgrade".
    fn try_with_upgradable<U>(&self, f: impl FnOnce(&T) -> U) -> Option<U> {
        self.try_upgradeable_read().map(|g| f(&g))
    }
    fn with_upgradable_then_try_write<S, U>(
        &self,
        u: impl FnOnce(&T) -> S,
        w: impl FnOnce(S, &mut T) -> U,
        r: impl FnOnce(S, &T) -> U,
    ) -> U {
        let g = self.upgradeable_read();
        let seen = u(&g);
        match g.try_upgrade() {
            Ok(mut g) => w(seen, &mut g),
            Err(g) => r(seen, &g),
        }
    }
});

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn caps_compose_and_name_themselves() {
        let c = Caps::FAIR.with(Caps::UPGRADE);
        assert!(c.has(Caps::FAIR) && c.has(Caps::UPGRADE) && !c.has(Caps::TIMED));
        assert_eq!(c.names(), "try,fair,upgrade");
        assert_eq!(Caps::NONE.names(), "try");
        assert_eq!(
            <parking_lot::RwLock<()> as Lockable<()>>::CAPS.names(),
            "try,fair,timed,downgrade,upgrade,timed-upgrade"
        );
        // Ours have every operation lock_api gives their kind.
        assert_eq!(
            <scalelock::QSpinLock<()> as Lockable<()>>::CAPS.names(),
            "try,fair,timed"
        );
        assert_eq!(
            <scalelock::QRwLock<()> as Lockable<()>>::CAPS.names(),
            "try,fair,timed,downgrade,upgrade,timed-upgrade"
        );
        assert_eq!(
            <scalelock::PerCpuRwLock<()> as Lockable<()>>::CAPS.names(),
            "try,fair,timed,downgrade,upgrade,timed-upgrade"
        );
    }

    /// Every optional operation really runs its closures, once each.
    fn exercise<L: Lockable<u64>>() {
        let l = L::new(0);
        l.with_write(|d| *d += 1);
        assert_eq!(l.with_read(|d| *d), 1);
        assert_eq!(l.try_with_write(|d| *d += 1), Some(()));
        assert_eq!(l.try_with_read(|d| *d), Some(2));
        l.with_write_fair(|d| *d += 1);
        assert_eq!(l.with_read_fair(|d| *d), 3);
        let t = Duration::from_millis(1);
        assert_eq!(l.try_with_write_for(t, |d| *d += 1), Some(()));
        assert_eq!(l.try_with_read_for(t, |d| *d), Some(4));
        assert_eq!(l.with_write_then_read(|d| *d += 1, |d| *d), 5);
        assert_eq!(
            l.with_upgradable_then_write(
                |d| *d,
                |seen, d| {
                    *d = seen + 1;
                    *d
                }
            ),
            6
        );
        assert_eq!(
            l.with_upgradable_then_write_for(
                t,
                |d| *d,
                |seen, d| {
                    *d = seen + 1;
                    *d
                },
                |_, _| unreachable!("nobody else holds it")
            ),
            7
        );
        // Held exclusively, a try fails.
        l.with_write(|_| assert_eq!(l.try_with_read(|_| ()), None));
        assert!(!l.state().is_empty());
    }

    #[test]
    fn every_lock_type_answers_every_operation() {
        exercise::<scalelock::QSpinLock<u64>>();
        exercise::<scalelock::QRwLock<u64>>();
        exercise::<scalelock::PerCpuRwLock<u64>>();
        exercise::<parking_lot::Mutex<u64>>();
        exercise::<parking_lot::FairMutex<u64>>();
        exercise::<parking_lot::RwLock<u64>>();
        exercise::<std::sync::Mutex<u64>>();
        exercise::<std::sync::RwLock<u64>>();
        exercise::<crossbeam_utils::sync::ShardedLock<u64>>();
        exercise::<spin::mutex::SpinMutex<u64>>();
        exercise::<spin::mutex::TicketMutex<u64>>();
        exercise::<spin::RwLock<u64>>();
    }
}
