//! Where a lock core reports its slow-path events (lock statistics: pending
//! path, queue depth, batch ends, hand-offs, parks and wakes), per class
//! and per read/write.
//!
//! The cores (`QSpinCore`, `QRwCore`, a per-CPU rwlock's slot wait) know
//! nothing of classes: the public lock around them passes [`Events::of`]
//! its class, and the access of the acquisition that waits, into each slow
//! path, and a core used on its own (the cores' own `lock_api` impls,
//! `SeqLock::lock_quiet`) passes [`Events::NONE`], so nothing is counted
//! twice or under the wrong class. A nested core (a `QRwLock`'s queue lock,
//! a `SeqLock`'s writer lock) reports under the class and kind of the lock
//! it serves, and the access of the acquisition it serves (a `QRwLock`
//! reader waiting on the queue lock counts as a read).
//!
//! Zero-sized, and every method empty, without the `stats` feature: the
//! slow paths compile as before.

use crate::class::{Access, ClassRef, LockKind};
#[cfg(feature = "stats")]
use crate::hook;

/// The class (with its lock kind) and the access (read or write) a core's
/// slow-path events count for, or none.
#[derive(Clone, Copy)]
pub(crate) struct Events {
    #[cfg(feature = "stats")]
    to: Option<(ClassRef, LockKind, Access)>,
}

impl Events {
    /// Counts nothing: a core used without a public lock around it.
    pub(crate) const NONE: Events = Events {
        #[cfg(feature = "stats")]
        to: None,
    };

    /// Counts for `class`, as a lock of type `kind`, on the row of
    /// `access` (the acquisition that waits: an upgradable read counts as a
    /// write, as its acquisitions do).
    #[inline]
    pub(crate) const fn of(class: ClassRef, kind: LockKind, access: Access) -> Events {
        #[cfg(feature = "stats")]
        {
            Events {
                to: Some((class, kind, access)),
            }
        }
        #[cfg(not(feature = "stats"))]
        {
            let _ = (class, kind, access);
            Events {}
        }
    }

    /// Whether events are counted (a class was given and statistics are
    /// on; one Relaxed load): guards work done only to report an event (a
    /// queue depth).
    #[cfg(feature = "stats")]
    #[inline]
    pub(crate) fn counted(self) -> bool {
        self.to.is_some() && crate::stats::is_enabled()
    }

    /// A contender became the word waiter without queueing.
    #[inline]
    pub(crate) fn pending_path(self) {
        #[cfg(feature = "stats")]
        if let Some((class, kind, access)) = self.to {
            hook::pending_path(class, kind, access);
        }
    }

    /// A waiter found `depth` queued waiters (itself included).
    #[cfg(feature = "stats")]
    #[inline]
    pub(crate) fn queue_depth(self, depth: u32) {
        if let Some((class, kind, access)) = self.to {
            hook::queue_depth(class, kind, access, depth);
        }
    }

    /// A waiter ended the running holders' batch: it claims the lock next.
    #[inline]
    pub(crate) fn batch_end(self) {
        #[cfg(feature = "stats")]
        if let Some((class, kind, access)) = self.to {
            hook::batch_end(class, kind, access);
        }
    }

    /// A waiter got the lock handed to it: a release reserved it (or, for a
    /// `QRwLock`, a fair unlock ended the batch) for this waiter.
    #[inline]
    pub(crate) fn handoff(self) {
        #[cfg(feature = "stats")]
        if let Some((class, kind, access)) = self.to {
            hook::handoff(class, kind, access);
        }
    }

    /// A contender took the lock reserved for a waiter that did not come
    /// for it in time.
    #[inline]
    pub(crate) fn steal(self) {
        #[cfg(feature = "stats")]
        if let Some((class, kind, access)) = self.to {
            hook::steal(class, kind, access);
        }
    }

    /// A waiter goes to sleep until another thread wakes it.
    #[inline]
    pub(crate) fn park(self) {
        #[cfg(feature = "stats")]
        if let Some((class, kind, access)) = self.to {
            hook::park(class, kind, access);
        }
    }

    /// A parked waiter woke; `spurious` if what it waits for has not
    /// happened yet (it waits again).
    #[inline]
    pub(crate) fn wake(self, spurious: bool) {
        #[cfg(feature = "stats")]
        if let Some((class, kind, access)) = self.to {
            hook::wake(class, kind, access, spurious);
        }
        #[cfg(not(feature = "stats"))]
        let _ = spurious;
    }
}
