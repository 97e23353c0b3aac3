//! A thread's held-lock stack, of fixed capacity inside the thread's
//! lockdep state: recording an acquisition allocates nothing. (A growing
//! `Vec` allocated right after the lock was taken: a global allocator
//! built on a lock of this crate then came back to that lock, held by its
//! own thread, and waited for itself.)
//!
//! Like Linux's `MAX_LOCK_DEPTH` (48), the capacity bounds how many locks
//! one thread holds as lockdep sees them; an acquisition past it is still
//! checked against the recorded ones, but not recorded itself (and its
//! release not looked for), so nothing later is checked against it.

use core::ops::{Deref, DerefMut};

use crate::class::{Access, ClassId};

/// How many locks one thread's held stack records at once; lockdep
/// checks an acquisition past it against the recorded locks but does not
/// record it, so later acquisitions are not checked against it.
pub const MAX_HELD: usize = 64;

/// A lock on a thread's held stack.
#[derive(Clone, Copy)]
pub(super) struct HeldLock {
    pub(super) class: ClassId,
    pub(super) instance: usize,
    pub(super) access: Access,
    pub(super) try_lock: bool,
    /// Its acquisition recorded the dependencies of the locks below it
    /// into it, as one that can block: it was not a try-lock, not a
    /// recursive read (a read hold does not block a recursive read, so no
    /// deadlock path goes on through it), and not of a lock the thread
    /// already held (that adds no dependency). Only then do the locks
    /// below reach a lock taken later through this one.
    pub(super) linked: bool,
}

impl HeldLock {
    /// An unused entry.
    const NONE: Self = Self {
        class: ClassId {
            index: 0,
            ordered: false,
        },
        instance: 0,
        access: Access::Write,
        try_lock: false,
        linked: false,
    };

    /// Whether this entry is the lock at `instance` of class index `class`.
    pub(super) fn is(&self, class: u32, instance: usize) -> bool {
        self.instance == instance && self.class.index == class
    }
}

/// The stack: `entries[..len]`, oldest first.
pub(super) struct HeldStack {
    len: usize,
    entries: [HeldLock; MAX_HELD],
}

impl HeldStack {
    pub(super) const fn new() -> Self {
        Self {
            len: 0,
            entries: [HeldLock::NONE; MAX_HELD],
        }
    }

    /// Records `h` on top; false (nothing recorded) if the stack is full.
    pub(super) fn push(&mut self, h: HeldLock) -> bool {
        let Some(slot) = self.entries.get_mut(self.len) else {
            return false;
        };
        *slot = h;
        self.len += 1;
        true
    }

    /// Removes entry `i`, moving the ones above it down.
    pub(super) fn remove(&mut self, i: usize) {
        assert!(i < self.len, "no held entry {i}");
        self.entries.copy_within(i + 1..self.len, i);
        self.len -= 1;
    }
}

impl Deref for HeldStack {
    type Target = [HeldLock];
    fn deref(&self) -> &[HeldLock] {
        &self.entries[..self.len]
    }
}

impl DerefMut for HeldStack {
    fn deref_mut(&mut self) -> &mut [HeldLock] {
        &mut self.entries[..self.len]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(instance: usize) -> HeldLock {
        HeldLock {
            instance,
            ..HeldLock::NONE
        }
    }

    #[test]
    fn pushes_up_to_the_capacity_and_removes_from_anywhere() {
        let mut s = HeldStack::new();
        for i in 0..MAX_HELD {
            assert!(s.push(entry(i)));
        }
        assert!(!s.push(entry(MAX_HELD)), "recorded past the capacity");
        assert_eq!(s.len(), MAX_HELD);
        s.remove(1);
        s.remove(0);
        assert_eq!(s.len(), MAX_HELD - 2);
        let left: Vec<usize> = s.iter().map(|h| h.instance).collect();
        assert_eq!(left, (2..MAX_HELD).collect::<Vec<_>>());
        assert!(s.push(entry(7)));
        assert_eq!(s.last().map(|h| h.instance), Some(7));
    }
}
