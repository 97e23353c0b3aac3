//! What the torture checks, inside and beside every critical section.
//!
//! **Beside the lock** ([`Guarded`]), after locktorture's
//! `lock_is_write_held`/`lock_is_read_held`: counters of who is inside.
//! A writer that enters must find no writer and no reader inside; a reader
//! must find no writer (and, in a mutex, no other reader); an upgradable
//! reader also no other upgradable reader. They are atomics outside the protected data, so
//! they catch a lock that lets two holders overlap whatever the lock does
//! with the data (and they are how the `busted` lock fails at once).
//!
//! **In the protected data** ([`TortureData`]), checks that only a lock
//! that also orders memory passes:
//! - `owner`: 0, or the id of the writer inside. A writer finds it 0 on
//!   entry and its own id on exit; a reader always finds it 0.
//! - `a`, `b`, `counter`: a writer bumps `counter` and `a` on entry, may be
//!   delayed (a yield, a short or a long sleep), then bumps `b` on exit.
//!   Everyone who enters must see `a == b == counter`; a reader pauses
//!   between reading `a` and `b`, so a writer sneaking in is caught.
//! - At the end `counter` must equal the writes the threads completed on
//!   that lock: a lost update means two writers overlapped.
//!
//! The fields are read and written with volatile accesses so the compiler
//! keeps every intermediate state in memory, where a broken lock would let
//! another thread see it.

use std::ptr::{read_volatile, write_volatile};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

use crossbeam_utils::CachePadded;

use crate::busted::Racy;
use crate::lockable::{Kind, Lockable};

/// A check's verdict: `Err` names the first broken invariant.
pub type Check = Result<(), String>;

/// The data a torture lock protects; see the module docs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TortureData {
    owner: u64,
    a: u64,
    b: u64,
    counter: u64,
}

/// Field by field in atomics, for the `busted` lock.
impl Racy for TortureData {
    type Cell = [AtomicU64; 4];
    fn cell(v: Self) -> Self::Cell {
        [v.owner, v.a, v.b, v.counter].map(AtomicU64::new)
    }
    fn load(c: &Self::Cell) -> Self {
        // Relaxed: a lock that does not lock promises no ordering.
        let [owner, a, b, counter] = c.each_ref().map(|x| x.load(Ordering::Relaxed));
        TortureData {
            owner,
            a,
            b,
            counter,
        }
    }
    fn store(c: &Self::Cell, v: &Self) {
        for (cell, x) in c.iter().zip([v.owner, v.a, v.b, v.counter]) {
            cell.store(x, Ordering::Relaxed);
        }
    }
}

impl TortureData {
    /// A writer's entry: checks the state, claims it, bumps `counter` and
    /// `a`. Always makes its changes (so `counter` counts every write even
    /// after a failure); returns what was wrong, if anything.
    pub fn write_enter(&mut self, me: u64) -> Check {
        // SAFETY (all volatile accesses in this impl): the pointers come from
        // `&mut`/`&` fields, so they are valid and aligned. Volatile only
        // keeps each access in place; exclusivity is what the lock under
        // test must provide.
        unsafe {
            let owner = read_volatile(&self.owner);
            let (a, b, c) = (
                read_volatile(&self.a),
                read_volatile(&self.b),
                read_volatile(&self.counter),
            );
            write_volatile(&mut self.owner, me);
            write_volatile(&mut self.counter, c + 1);
            write_volatile(&mut self.a, a + 1);
            if owner != 0 {
                return Err(format!(
                    "writer {me} entered while writer {owner} was inside"
                ));
            }
            if a != b || a != c {
                return Err(format!(
                    "writer {me} entered to a half-done update: a={a} b={b} counter={c}"
                ));
            }
        }
        Ok(())
    }

    /// A writer's exit: finishes the update and releases `owner`; returns
    /// what was wrong, if anything.
    pub fn write_leave(&mut self, me: u64) -> Check {
        // SAFETY: as in `write_enter`.
        unsafe {
            let (a, b) = (read_volatile(&self.a), read_volatile(&self.b));
            let owner = read_volatile(&self.owner);
            write_volatile(&mut self.b, a);
            write_volatile(&mut self.owner, 0);
            if b + 1 != a {
                return Err(format!(
                    "writer {me}: a and b moved under it (a={a}, b={b})"
                ));
            }
            if owner != me {
                return Err(format!(
                    "writer {me} found writer {owner} inside its critical section"
                ));
            }
        }
        Ok(())
    }

    /// A reader's check, with `pause` between reading `a` and `b`; returns
    /// the `counter` it saw.
    pub fn read_check(&self, me: u64, pause: impl FnOnce()) -> Result<u64, String> {
        // SAFETY: as in `write_enter`; nothing is written.
        unsafe {
            let owner = read_volatile(&self.owner);
            if owner != 0 {
                return Err(format!(
                    "reader {me} entered while writer {owner} was inside"
                ));
            }
            let a = read_volatile(&self.a);
            pause();
            let b = read_volatile(&self.b);
            let c = read_volatile(&self.counter);
            if a != b || a != c {
                return Err(format!(
                    "reader {me} saw a half-done update: a={a} b={b} counter={c}"
                ));
            }
            let owner = read_volatile(&self.owner);
            if owner != 0 {
                return Err(format!(
                    "writer {owner} entered while reader {me} was inside"
                ));
            }
            Ok(c)
        }
    }

    /// The counter, as a writer left it.
    pub fn counter(&self) -> u64 {
        // SAFETY: as in `write_enter`; nothing is written.
        unsafe { read_volatile(&self.counter) }
    }

    /// The final state: `Err` unless it is settled (`a == b == counter`,
    /// no owner) with `writes` writes.
    pub fn settled(&self, writes: u64) -> Check {
        let TortureData {
            owner,
            a,
            b,
            counter,
        } = *self;
        if counter != writes {
            Err(format!(
                "lost updates: counter = {counter} but threads completed {writes} writes"
            ))
        } else if a != counter || b != counter || owner != 0 {
            Err(format!(
                "final state broken: a={a} b={b} counter={counter} owner={owner}"
            ))
        } else {
            Ok(())
        }
    }
}

/// Who is inside a lock, counted beside it.
#[derive(Default)]
struct Occupancy {
    writers: AtomicU32,
    readers: AtomicU32,
    upgradable: AtomicU32,
}

/// A lock under torture and its occupancy counters.
pub struct Guarded<L> {
    /// The lock.
    pub lock: L,
    inside: CachePadded<Occupancy>,
}

// A correct lock orders the occupancy accesses (a holder's changes happen
// before its unlock, which happens before the next holder's lock), so each
// holder sees its predecessors' counts. Under a lock that fails to
// exclude, a writer (increment writers, load readers) and a reader
// (increment readers, load writers) entering together is store
// buffering: with Relaxed (or Acquire/Release) both loads may read 0 on a
// weakly ordered CPU, and the overlap goes unseen. SeqCst on the four
// accesses forbids that: one of the two loads sees the other's increment.
// (x86's RMWs are full barriers already; there SeqCst costs nothing more.)
impl<L: Lockable<TortureData>> Guarded<L> {
    /// A fresh lock.
    pub fn new() -> Self {
        Guarded {
            lock: L::new(TortureData::default()),
            inside: CachePadded::new(Occupancy::default()),
        }
    }

    /// A writer is in (call inside the write lock); pair with `writer_out`.
    pub fn writer_in(&self, me: u64) -> Check {
        let w = self.inside.writers.fetch_add(1, Ordering::SeqCst);
        let r = self.inside.readers.load(Ordering::SeqCst);
        match (w, r) {
            (0, 0) => Ok(()),
            (w, r) => Err(format!(
                "writer {me} got the lock while {w} writer(s) and {r} reader(s) held it"
            )),
        }
    }

    /// The writer is leaving (call before the write unlock).
    pub fn writer_out(&self) {
        self.inside.writers.fetch_sub(1, Ordering::Relaxed);
    }

    /// A reader is in (call inside the read lock); pair with `reader_out`.
    /// A mutex's readers are exclusive: one must also find no other reader.
    pub fn reader_in(&self, me: u64) -> Check {
        let r = self.inside.readers.fetch_add(1, Ordering::SeqCst);
        match self.inside.writers.load(Ordering::SeqCst) {
            0 if r == 0 || L::KIND == Kind::RwLock => Ok(()),
            0 => Err(format!(
                "reader {me} got the mutex while {r} reader(s) held it"
            )),
            w => Err(format!(
                "reader {me} got the lock while {w} writer(s) held it"
            )),
        }
    }

    /// The reader is leaving (call before the read unlock).
    pub fn reader_out(&self) {
        self.inside.readers.fetch_sub(1, Ordering::Relaxed);
    }

    /// An upgradable reader is in (call inside the upgradable read, around
    /// its read section); pair with `upgradable_out`. Upgradable readers
    /// exclude each other.
    pub fn upgradable_in(&self, me: u64) -> Check {
        match self.inside.upgradable.fetch_add(1, Ordering::SeqCst) {
            0 => Ok(()),
            u => Err(format!(
                "upgradable reader {me} got the lock while {u} upgradable reader(s) held it"
            )),
        }
    }

    /// The upgradable reader is leaving (or upgrading).
    pub fn upgradable_out(&self) {
        self.inside.upgradable.fetch_sub(1, Ordering::Relaxed);
    }

    /// The lock's state and the occupancy counters, for a stall report.
    pub fn describe(&self) -> String {
        format!(
            "{} (inside: {} writer(s), {} reader(s))",
            self.lock.state(),
            self.inside.writers.load(Ordering::Relaxed),
            self.inside.readers.load(Ordering::Relaxed)
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overlapping_writers_and_readers_are_caught() {
        let mut d = TortureData::default();
        assert_eq!(d.write_enter(1), Ok(()));
        // A second writer inside the first's critical section.
        let mut twin = d;
        assert!(
            twin.write_enter(2)
                .unwrap_err()
                .contains("writer 1 was inside")
        );
        // A reader inside it, in place.
        assert!(d.read_check(3, || ()).unwrap_err().contains("writer 1"));
        assert_eq!(d.write_leave(1), Ok(()));
        assert_eq!(d.read_check(3, || ()), Ok(1));
        // A writer who leaves with the update half done.
        let mut half = d;
        half.write_enter(2).unwrap();
        half.owner = 0;
        assert!(half.read_check(3, || ()).unwrap_err().contains("half-done"));
        assert_eq!(d.settled(1), Ok(()));
        assert!(d.settled(2).unwrap_err().contains("lost updates"));
    }

    #[test]
    fn the_occupancy_counters_catch_overlap() {
        let g: Guarded<parking_lot::RwLock<TortureData>> = Guarded::new();
        assert_eq!(g.reader_in(1), Ok(()));
        assert_eq!(g.reader_in(2), Ok(()));
        assert!(g.writer_in(3).is_err());
        g.writer_out();
        g.reader_out();
        g.reader_out();
        assert_eq!(g.writer_in(3), Ok(()));
        assert!(g.reader_in(1).is_err());
        assert!(g.describe().contains("1 writer(s)"));
    }

    /// A mutex's read sections are exclusive like its write sections: two
    /// readers inside one at once are an overlap.
    #[test]
    fn readers_overlapping_in_a_mutex_are_caught() {
        let g: Guarded<parking_lot::Mutex<TortureData>> = Guarded::new();
        assert_eq!(g.reader_in(1), Ok(()));
        assert!(
            g.reader_in(2)
                .unwrap_err()
                .contains("reader 2 got the mutex while 1 reader(s) held it")
        );
        g.reader_out();
        g.reader_out();
        assert_eq!(g.reader_in(1), Ok(()));
    }
}
