//! The class order graph: which class was taken while which was held, in
//! which modes, and the search for a cycle that can deadlock.
//!
//! # Edge types (after Linux's lockdep since 5.10, with upgradable reads)
//! An edge `A -> B` means a thread took B while holding A. It records how:
//! A held Exclusively (write), Upgradably (an upgradable read) or Shared
//! (a read), and B acquired eXclusively (a write or an upgradable read),
//! as a Fair read (queued behind a waiting writer) or as a Recursive read
//! (blocked only by a writer holding B). Nine types, one bit each (`ty`);
//! one edge may carry several.
//!
//! A cycle deadlocks only if each thread in it can really block the next:
//! a hold of B blocks another thread's acquisition of B as follows.
//!
//! | B held \ B acquired | X | F | R |
//! | --- | --- | --- | --- |
//! | E (write) | blocks | blocks | blocks |
//! | U (upgradable read) | blocks | - | - |
//! | S (read) | blocks | blocks | - |
//!
//! A recursive reader is not blocked by another reader (Linux's rule); a
//! fair reader is, through a writer queued between them; an upgradable
//! reader holds the queue, so no writer can queue ahead of a reader and
//! only writers and upgradable readers wait for it. So a cycle is reported
//! iff it can be walked choosing one type per edge such that the hold each
//! edge leaves a class with blocks the acquisition the previous edge
//! entered it with (the closing edge included). For example, with fair
//! rwlocks, "T1 reads A then writes B; T2 reads B then reads A" is
//! reported: a third thread queueing a write on A makes T2 wait behind it,
//! and it waits for T1. With recursive reads of A, or T1 holding an
//! upgradable read of A instead of a read, it is not.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::Arc;
use std::vec::Vec;

use crate::class::Access;

/// How the class an edge leaves was held: 0 E, 1 U, 2 S.
const fn held_mode(a: Access) -> u8 {
    match a {
        Access::Write => 0,
        Access::Upgradable => 1,
        Access::Read | Access::RecursiveRead => 2,
    }
}

/// How the class an edge enters was acquired: 0 X, 1 F, 2 R (each mode
/// is blocked by a subset of the holds that block the one before).
const fn acq_mode(a: Access) -> u8 {
    match a {
        Access::Write | Access::Upgradable => 0,
        Access::Read => 1,
        Access::RecursiveRead => 2,
    }
}

/// Whether a hold of a lock in `held` mode blocks another thread's
/// acquisition of it in `acq` mode (the table in the module docs).
const fn blocks(held: u8, acq: u8) -> bool {
    match held {
        0 => true,
        1 => acq == 0,
        _ => acq <= 1,
    }
}

/// Whether this thread's own hold of a lock with `held` blocks its own
/// acquisition of the same lock with `acquired` (lockdep's recursion
/// report): the same rule as between threads.
pub(crate) fn blocks_itself(held: Access, acquired: Access) -> bool {
    blocks(held_mode(held), acq_mode(acquired))
}

/// The type bit of the edge made by taking `acquired` while `held` is held.
pub(crate) fn edge_type(held: Access, acquired: Access) -> u16 {
    ty(held_mode(held), acq_mode(acquired))
}

const fn ty(held: u8, acq: u8) -> u16 {
    1 << (held * 3 + acq)
}

/// The held mode and acquisition mode of type bit `bit` (an index 0..9).
const fn modes(bit: u32) -> (u8, u8) {
    ((bit / 3) as u8, (bit % 3) as u8)
}

/// Where and how an edge was first recorded.
pub(crate) struct Origin {
    pub(crate) from_access: Access,
    pub(crate) to_access: Access,
    pub(crate) thread: std::string::String,
    /// Classes the thread held then, outermost first.
    pub(crate) held: Vec<u32>,
    pub(crate) backtrace: Option<Arc<std::backtrace::Backtrace>>,
}

pub(crate) struct Edge {
    pub(crate) types: u16,
    pub(crate) origin: Origin,
}

#[derive(Default)]
pub(crate) struct Graph {
    /// from -> to -> edge.
    edges: HashMap<u32, HashMap<u32, Edge>>,
    /// Pairs (from, to) whose closing of a cycle was reported.
    reported: HashSet<(u32, u32)>,
}

impl Graph {
    /// Whether `from -> to` is recorded with type `t`.
    pub(crate) fn has(&self, from: u32, to: u32, t: u16) -> bool {
        self.edges
            .get(&from)
            .and_then(|m| m.get(&to))
            .is_some_and(|e| e.types & t != 0)
    }

    /// Records `from -> to` of type `t` (keeping the first origin).
    pub(crate) fn add(&mut self, from: u32, to: u32, t: u16, origin: impl FnOnce() -> Origin) {
        let m = self.edges.entry(from).or_default();
        match m.get_mut(&to) {
            Some(e) => e.types |= t,
            None => {
                m.insert(
                    to,
                    Edge {
                        types: t,
                        origin: origin(),
                    },
                );
            }
        }
    }

    pub(crate) fn edge(&self, from: u32, to: u32) -> Option<&Edge> {
        self.edges.get(&from)?.get(&to)
    }

    /// Marks the closing pair reported; false if it already was.
    pub(crate) fn first_report(&mut self, from: u32, to: u32) -> bool {
        self.reported.insert((from, to))
    }

    /// A path `start -> ... -> target` that, closed by the new edge
    /// `target -> start` of type `closing` (one bit), makes a cycle that
    /// can deadlock (see the module docs); as the list of (from, to) pairs.
    pub(crate) fn deadlock_path(
        &self,
        start: u32,
        target: u32,
        closing: u16,
    ) -> Option<Vec<(u32, u32)>> {
        let (closing_held, closing_acq) = modes(closing.trailing_zeros());
        // State: (class, how the edge that entered it acquired it). A
        // lower mode is blocked by more holds, so it constrains the next
        // edge less: a state is not visited again with a higher mode.
        let mut parent: HashMap<(u32, u8), (u32, u8)> = HashMap::new();
        let mut best: HashMap<u32, u8> = HashMap::new();
        let mut queue = VecDeque::new();
        let first = (start, closing_acq);
        parent.insert(first, first);
        best.insert(start, closing_acq);
        queue.push_back(first);
        while let Some((node, entered)) = queue.pop_front() {
            if node == target && blocks(closing_held, entered) {
                // The closing edge leaves `target` with a hold that blocks
                // how the path entered it.
                let mut path = Vec::new();
                let mut cur = (node, entered);
                while cur != first {
                    let prev = parent[&cur];
                    path.push((prev.0, cur.0));
                    cur = prev;
                }
                path.reverse();
                return Some(path);
            }
            let Some(out) = self.edges.get(&node) else {
                continue;
            };
            for (&next, e) in out {
                // The types whose hold of `node` blocks how we entered it;
                // of those, the one entering `next` with the lowest mode.
                let Some(mode) = (0..9)
                    .filter(|&b| e.types & (1 << b) != 0)
                    .map(modes)
                    .filter(|&(h, _)| blocks(h, entered))
                    .map(|(_, a)| a)
                    .min()
                else {
                    continue;
                };
                if best.get(&next).is_some_and(|&m| m <= mode) {
                    continue;
                }
                best.insert(next, mode);
                parent.insert((next, mode), (node, entered));
                queue.push_back((next, mode));
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn origin() -> Origin {
        Origin {
            from_access: Access::Write,
            to_access: Access::Write,
            thread: "t".into(),
            held: Vec::new(),
            backtrace: None,
        }
    }

    const EN: u16 = ty(0, 0);
    const SN: u16 = ty(2, 0);
    const SF: u16 = ty(2, 1);
    const SR: u16 = ty(2, 2);
    const UX: u16 = ty(1, 0);
    const EF: u16 = ty(0, 1);

    #[test]
    fn exclusive_cycle_is_found() {
        let mut g = Graph::default();
        g.add(2, 3, EN, origin);
        g.add(3, 1, EN, origin);
        // Closing 1 -> 2 exclusively: 2 -> 3 -> 1 is the existing chain.
        assert_eq!(g.deadlock_path(2, 1, EN), Some(std::vec![(2, 3), (3, 1)]));
        assert_eq!(g.deadlock_path(2, 4, EN), None);
    }

    #[test]
    fn recursive_reads_of_shared_holders_do_not_deadlock() {
        let mut g = Graph::default();
        // T2 holds B shared and takes A as a recursive read: B -(SR)-> A.
        g.add(2, 1, SR, origin);
        // T1 holds A shared, takes B for write: A -(SN)-> B closes
        // B -(SR)-> A -(SN)-> B: *R then S*: no deadlock.
        assert_eq!(g.deadlock_path(2, 1, SN), None);
        // But if T1 held A exclusively (EN), T2's recursive read waits.
        assert!(g.deadlock_path(2, 1, EN).is_some());
        // Fair reads (SF instead of SR) deadlock through a queued writer.
        g.add(2, 1, SF, origin);
        assert!(g.deadlock_path(2, 1, SN).is_some());
    }

    #[test]
    fn fair_reads_of_upgradable_holders_do_not_deadlock() {
        let mut g = Graph::default();
        // T2 holds B and takes A as a fair read: B -(EF)-> A.
        g.add(2, 1, EF, origin);
        // T1 holds an upgradable read of A and takes B: A -(UX)-> B closes
        // B -(EF)-> A -(UX)-> B: a fair read of A is not blocked by an
        // upgradable holder (no writer can queue ahead of it).
        assert_eq!(g.deadlock_path(2, 1, UX), None);
        // Held as a read (S), A blocks the fair read through a queued
        // writer; held for write, directly.
        assert!(g.deadlock_path(2, 1, SN).is_some());
        assert!(g.deadlock_path(2, 1, EN).is_some());
        // T2 taking A as an upgradable read or a write instead: blocked by
        // T1's upgradable read.
        g.add(2, 1, EN, origin);
        assert!(g.deadlock_path(2, 1, UX).is_some());
    }

    #[test]
    fn the_least_constraining_entry_wins() {
        let mut g = Graph::default();
        // 1 -> 2 both as a recursive read and as a write (two threads);
        // 2 -> 3 only out of a shared hold of 2.
        g.add(1, 2, SR | SN, origin);
        g.add(2, 3, SN, origin);
        // Closing 3 -> 1 from a shared hold of 3, into 1 exclusively: the
        // path must enter 2 by the write (SN), not the recursive read.
        assert_eq!(g.deadlock_path(1, 3, SN), Some(std::vec![(1, 2), (2, 3)]));
        // Entering only by the recursive read, the shared hold of 2 does
        // not block it: no cycle.
        let mut h = Graph::default();
        h.add(1, 2, SR, origin);
        h.add(2, 3, SN, origin);
        assert_eq!(h.deadlock_path(1, 3, SN), None);
    }
}
