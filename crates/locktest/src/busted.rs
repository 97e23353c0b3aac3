//! `busted`: a lock that does not lock, the negative control that shows
//! the torture's checks (and each scenario's invariant check) catch a lock
//! that fails to exclude. Linux's locktorture has the same (`lock_busted`).
//!
//! Every caller runs at once. A lock that does not lock over ordinary data
//! would be a data race, which is undefined behaviour in Rust, so `Busted`
//! keeps its value in atomics instead ([`Racy`]): each critical section
//! works on a snapshot loaded field by field and stores its result back
//! field by field. Concurrent sections then lose each other's updates and
//! see each other's half-stored results, as with a real broken lock, and
//! nothing is undefined. It never enters the registry: `torture --lock
//! busted` and the tests name it explicitly.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use crate::lockable::{Caps, Kind, Lockable};

/// A value that can be kept in atomics and copied in and out of them, one
/// field at a time (no atomicity across fields: that is the point).
pub trait Racy: Sized {
    /// The atomic form.
    type Cell: Send + Sync;
    /// The atomic form of `v`.
    fn cell(v: Self) -> Self::Cell;
    /// A snapshot, field by field.
    fn load(c: &Self::Cell) -> Self;
    /// Stores every field of `v`, one by one.
    fn store(c: &Self::Cell, v: &Self);
}

impl Racy for () {
    type Cell = ();
    fn cell(_: ()) {}
    fn load(_: &()) {}
    fn store(_: &(), _: &()) {}
}

impl Racy for usize {
    type Cell = AtomicUsize;
    fn cell(v: usize) -> AtomicUsize {
        AtomicUsize::new(v)
    }
    fn load(c: &AtomicUsize) -> usize {
        // Relaxed: a lock that does not lock promises no ordering.
        c.load(Ordering::Relaxed)
    }
    fn store(c: &AtomicUsize, v: &usize) {
        c.store(*v, Ordering::Relaxed);
    }
}

impl<const N: usize> Racy for [u64; N] {
    type Cell = [AtomicU64; N];
    fn cell(v: Self) -> Self::Cell {
        v.map(AtomicU64::new)
    }
    fn load(c: &Self::Cell) -> Self {
        // Relaxed: as above.
        c.each_ref().map(|x| x.load(Ordering::Relaxed))
    }
    fn store(c: &Self::Cell, v: &Self) {
        for (cell, x) in c.iter().zip(v) {
            cell.store(*x, Ordering::Relaxed);
        }
    }
}

/// The lock that does not lock.
pub struct Busted<T: Racy>(T::Cell);

impl<T: Racy> Lockable<T> for Busted<T> {
    const KIND: Kind = Kind::RwLock;
    const CAPS: Caps = Caps::NONE;

    fn new(value: T) -> Self {
        Busted(T::cell(value))
    }
    fn with_write<R>(&self, f: impl FnOnce(&mut T) -> R) -> R {
        let mut v = T::load(&self.0);
        let out = f(&mut v);
        T::store(&self.0, &v);
        out
    }
    fn with_read<R>(&self, f: impl FnOnce(&T) -> R) -> R {
        f(&T::load(&self.0))
    }
    fn try_with_write<R>(&self, f: impl FnOnce(&mut T) -> R) -> Option<R> {
        Some(self.with_write(f))
    }
    fn try_with_read<R>(&self, f: impl FnOnce(&T) -> R) -> Option<R> {
        Some(self.with_read(f))
    }
    fn try_with_write_for<R>(&self, _: Duration, f: impl FnOnce(&mut T) -> R) -> Option<R> {
        Some(self.with_write(f))
    }
    fn try_with_read_for<R>(&self, _: Duration, f: impl FnOnce(&T) -> R) -> Option<R> {
        Some(self.with_read(f))
    }
    fn state(&self) -> String {
        "busted: never locked".to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn it_loses_updates() {
        let lock = Busted::new([0u64]);
        std::thread::scope(|s| {
            for _ in 0..4 {
                s.spawn(|| {
                    for _ in 0..100_000 {
                        lock.with_write(|c| {
                            c[0] += 1;
                            if c[0] % 64 == 0 {
                                std::thread::yield_now();
                            }
                        });
                    }
                });
            }
        });
        assert!(lock.with_read(|c| c[0]) < 400_000);
    }
}
