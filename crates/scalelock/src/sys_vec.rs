//! A growable array of `Copy` values in memory from [`std::alloc::System`],
//! never from the global allocator: the statistics' own storage, and the
//! class registry's.
//!
//! Statistics allocate on lock paths (a thread's first event of a class,
//! its first counted acquisition, its exit), some of them with the lock
//! held. A global allocator built on a lock of this crate would then come
//! back to that lock, held by its own thread, and wait for itself; so
//! nothing here goes through the global allocator (`Vec<T, System>` needs
//! the unstable allocator API, hence this small type).

#![cfg_attr(not(feature = "stats"), allow(dead_code))]

use core::alloc::Layout;
use core::ops::{Deref, DerefMut};
use core::ptr::NonNull;
use std::alloc::{GlobalAlloc, System, handle_alloc_error};

pub(crate) struct SysVec<T: Copy> {
    ptr: NonNull<T>,
    len: usize,
    cap: usize,
}

// SAFETY: owns its `T`s, as a `Vec<T>` does.
unsafe impl<T: Copy + Send> Send for SysVec<T> {}
// SAFETY: shared access only reads the `T`s, as a `Vec<T>`'s does.
unsafe impl<T: Copy + Sync> Sync for SysVec<T> {}

impl<T: Copy> SysVec<T> {
    pub(crate) const fn new() -> Self {
        const { assert!(core::mem::size_of::<T>() != 0) };
        Self {
            ptr: NonNull::dangling(),
            len: 0,
            cap: 0,
        }
    }

    /// Room for at least `min` elements.
    fn reserve_total(&mut self, min: usize) {
        if min <= self.cap {
            return;
        }
        let cap = min.max(self.cap.saturating_mul(2)).max(4);
        let layout = Layout::array::<T>(cap).expect("statistics: capacity overflow");
        // SAFETY: `layout` is not zero-sized (`T` is not, `cap` > 0); the
        // old block, if any, came from `System` with the old capacity's
        // layout (same alignment).
        let p = unsafe {
            if self.cap == 0 {
                System.alloc(layout)
            } else {
                System.realloc(
                    self.ptr.as_ptr().cast(),
                    Layout::array::<T>(self.cap).expect("allocated before"),
                    layout.size(),
                )
            }
        };
        match NonNull::new(p.cast::<T>()) {
            Some(p) => self.ptr = p,
            None => handle_alloc_error(layout),
        }
        self.cap = cap;
    }

    pub(crate) fn push(&mut self, value: T) {
        self.reserve_total(self.len + 1);
        // SAFETY: in capacity.
        unsafe { self.ptr.as_ptr().add(self.len).write(value) };
        self.len += 1;
    }

    /// Grows to `len` elements, the new ones `value` (never shrinks).
    pub(crate) fn grow_to(&mut self, len: usize, value: T) {
        self.reserve_total(len);
        while self.len < len {
            // SAFETY: in capacity.
            unsafe { self.ptr.as_ptr().add(self.len).write(value) };
            self.len += 1;
        }
    }

    pub(crate) fn swap_remove(&mut self, i: usize) -> T {
        assert!(i < self.len, "index out of bounds");
        let v = self[i];
        let last = self[self.len - 1];
        self[i] = last;
        self.len -= 1;
        v
    }

    /// A copy, also in `System` memory.
    pub(crate) fn copied(&self) -> Self {
        let mut c = Self::new();
        c.reserve_total(self.len);
        // SAFETY: `c` has room for `len` elements; distinct blocks.
        unsafe { core::ptr::copy_nonoverlapping(self.ptr.as_ptr(), c.ptr.as_ptr(), self.len) };
        c.len = self.len;
        c
    }
}

impl<T: Copy> Deref for SysVec<T> {
    type Target = [T];
    fn deref(&self) -> &[T] {
        // SAFETY: `len` initialised elements (or a dangling, aligned
        // pointer and 0).
        unsafe { core::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }
}

impl<T: Copy> DerefMut for SysVec<T> {
    fn deref_mut(&mut self) -> &mut [T] {
        // SAFETY: as in `deref`, and we are the only owner.
        unsafe { core::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }
}

impl<T: Copy> Drop for SysVec<T> {
    fn drop(&mut self) {
        if self.cap != 0 {
            // SAFETY: allocated from `System` with this layout.
            unsafe {
                System.dealloc(
                    self.ptr.as_ptr().cast(),
                    Layout::array::<T>(self.cap).expect("allocated before"),
                )
            };
        }
    }
}

/// `value` moved into `System` memory, never freed.
pub(crate) fn leak<T>(value: T) -> &'static T {
    let layout = Layout::new::<T>();
    assert!(layout.size() != 0);
    // SAFETY: not zero-sized.
    let p = unsafe { System.alloc(layout) }.cast::<T>();
    let Some(p) = NonNull::new(p) else {
        handle_alloc_error(layout)
    };
    // SAFETY: fresh, aligned memory for one `T`, never freed, so the
    // reference is good for 'static.
    unsafe {
        p.as_ptr().write(value);
        &*p.as_ptr()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pushes_grows_removes_and_copies() {
        let mut v = SysVec::<u32>::new();
        for i in 0..100 {
            v.push(i);
        }
        assert_eq!(v.len(), 100);
        assert_eq!(v.swap_remove(3), 3);
        assert_eq!(v[3], 99);
        v.grow_to(120, 7);
        assert_eq!(v.len(), 120);
        assert_eq!(v[119], 7);
        let c = v.copied();
        assert_eq!(&c[..], &v[..]);
        assert_eq!(*leak(5u64), 5);
    }
}
