//! The class order graph: which class was taken while which was held, in
//! which modes, and the search for a cycle that can deadlock.
//!
//! # Edge types (after Linux's lockdep since 5.10, with upgrades)
//! An edge `A -> B` means a thread took B while holding A. It records how:
//! A held Exclusively (a write, or an upgradable read) or Shared (a read),
//! and how B was acquired: Non-recursively (a write, an upgradable read,
//! or a fair read, which queues behind a waiting writer), as a Recursive
//! read (blocked only by a writer holding B), or as an uPgrade of an
//! upgradable read of B (it waits for B's readers only). Six types, one
//! bit each (`ty`); one edge may carry several.
//!
//! A cycle deadlocks only if each thread in it can really block the next:
//! a hold of B blocks another thread's acquisition of B as follows.
//!
//! | B held \ B acquired | N | R | P |
//! | --- | --- | --- | --- |
//! | E (write, upgradable read) | blocks | blocks | - |
//! | S (read) | blocks | - | blocks |
//!
//! A recursive reader is not blocked by another reader (Linux's rule); a
//! fair reader is, through a writer queued between them. An upgradable
//! read counts as exclusive here: it holds the lock's queue, and a reader
//! that queued there (it met a writer) waits for it. An upgrade waits for
//! the readers inside, and for nothing else (no other thread can hold
//! the lock exclusively meanwhile). So a cycle is reported iff it can be
//! walked choosing one type per edge such that the hold each edge leaves a
//! class with blocks the acquisition the previous edge entered it with
//! (the closing edge included). For example, with fair rwlocks, "T1 reads
//! A then writes B; T2 reads B then reads A" is reported: a third thread
//! queueing a write on A makes T2 wait behind it, and it waits for T1.
//! With recursive reads of A it is not.
//!
//! A thread's own holds follow other rules ([`blocks_itself`]): the holder
//! of an upgradable read may read the lock (its reads never meet a
//! writer: none can wait or enter while it holds the queue and its count).

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::Arc;
use std::vec::Vec;

use crate::class::Access;

/// Hold mode E: a write or an upgradable read.
const E: u8 = 0;
/// Hold mode S: a read.
const S: u8 = 1;
/// Acquisition mode N: a write, an upgradable read or a fair read.
const N: u8 = 0;
/// Acquisition mode R: a recursive read.
const R: u8 = 1;
/// Acquisition mode P: the upgrade of an upgradable read.
pub(crate) const UPGRADE: u8 = 2;

/// How the class an edge leaves is held.
const fn held_mode(a: Access) -> u8 {
    match a {
        Access::Write | Access::Upgradable => E,
        Access::Read | Access::RecursiveRead | Access::ReentrantRead => S,
    }
}

/// How an acquisition with `a` acquires (N or R; an upgrade is `UPGRADE`).
pub(crate) const fn acquire_mode(a: Access) -> u8 {
    match a {
        Access::RecursiveRead => R,
        Access::Write | Access::Upgradable | Access::Read | Access::ReentrantRead => N,
    }
}

/// Whether another thread's hold of a lock in `held` mode blocks an
/// acquisition of it in `acq` mode (the table in the module docs).
const fn blocks(held: u8, acq: u8) -> bool {
    matches!((held, acq), (_, N) | (E, R) | (S, UPGRADE))
}

/// Whether this thread's own hold of a lock with `held` blocks its own
/// acquisition of the same lock with `acquired` (lockdep's recursion
/// report). A write blocks everything; an upgradable read blocks writes
/// and upgradable reads, not the holder's reads; a read blocks writes,
/// upgradable reads and fair reads, not recursive or reentrant reads.
pub(crate) fn blocks_itself(held: Access, acquired: Access) -> bool {
    match held {
        Access::Write => true,
        Access::Upgradable => matches!(acquired, Access::Write | Access::Upgradable),
        Access::Read | Access::RecursiveRead | Access::ReentrantRead => {
            matches!(acquired, Access::Write | Access::Upgradable | Access::Read)
        }
    }
}

/// The type bit of the edge made by acquiring in mode `acq` (see
/// [`acquire_mode`]) while `held` is held.
pub(crate) fn edge_type(held: Access, acq: u8) -> u16 {
    ty(held_mode(held), acq)
}

const fn ty(held: u8, acq: u8) -> u16 {
    1 << (held * 3 + acq)
}

/// The held mode and acquisition mode of type bit `bit` (an index 0..6).
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
    /// Where each type bit was first recorded (a report names the
    /// dependency its deadlock path uses, not another type of the edge).
    origins: Vec<(u16, Origin)>,
}

impl Edge {
    /// Where type bit `t` of this edge was first recorded.
    pub(crate) fn origin(&self, t: u16) -> Option<&Origin> {
        self.origins.iter().find(|(b, _)| *b == t).map(|(_, o)| o)
    }
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

    /// Records `from -> to` of type `t` (one bit; keeping the first
    /// origin of each type).
    pub(crate) fn add(&mut self, from: u32, to: u32, t: u16, origin: impl FnOnce() -> Origin) {
        let m = self.edges.entry(from).or_default();
        match m.get_mut(&to) {
            Some(e) if e.types & t != 0 => {}
            Some(e) => {
                e.types |= t;
                e.origins.push((t, origin()));
            }
            None => {
                m.insert(
                    to,
                    Edge {
                        types: t,
                        origins: std::vec![(t, origin())],
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
    #[cfg(test)]
    pub(crate) fn deadlock_path(
        &self,
        start: u32,
        target: u32,
        closing: u16,
    ) -> Option<Vec<(u32, u32)>> {
        let path = self.deadlock_path_typed(start, target, closing)?;
        Some(path.into_iter().map(|(a, b, _)| (a, b)).collect())
    }

    /// As `deadlock_path`, each step with the type bit of its edge that
    /// the path uses.
    pub(crate) fn deadlock_path_typed(
        &self,
        start: u32,
        target: u32,
        closing: u16,
    ) -> Option<Vec<(u32, u32, u16)>> {
        let (closing_held, closing_acq) = modes(closing.trailing_zeros());
        // State: (class, how the edge that entered it acquired it). N is
        // blocked by every hold, so a class entered by N is not visited
        // again; R and P are blocked by different holds, so a class may be
        // visited once by each.
        let mut parent: HashMap<(u32, u8), ((u32, u8), u16)> = HashMap::new();
        let mut queue = VecDeque::new();
        let first = (start, closing_acq);
        parent.insert(first, (first, 0));
        queue.push_back(first);
        while let Some((node, entered)) = queue.pop_front() {
            if node == target && blocks(closing_held, entered) {
                // The closing edge leaves `target` with a hold that blocks
                // how the path entered it.
                let mut path = Vec::new();
                let mut cur = (node, entered);
                while cur != first {
                    let (prev, bit) = parent[&cur];
                    path.push((prev.0, cur.0, bit));
                    cur = prev;
                }
                path.reverse();
                return Some(path);
            }
            let Some(out) = self.edges.get(&node) else {
                continue;
            };
            for (&next, e) in out {
                // The modes `next` can be entered by, over the types whose
                // hold of `node` blocks how we entered it.
                let mut entries = 0u8;
                // The type bit that enters `next` in each mode.
                let mut by = [0u16; 3];
                for b in 0..6 {
                    let (h, a) = modes(b);
                    if e.types & (1 << b) != 0 && blocks(h, entered) {
                        entries |= 1 << a;
                        if by[a as usize] == 0 {
                            by[a as usize] = 1 << b;
                        }
                    }
                }
                let wanted = if entries & (1 << N) != 0 {
                    entries & (1 << N)
                } else {
                    entries
                };
                for a in [N, R, UPGRADE] {
                    if wanted & (1 << a) == 0
                        || parent.contains_key(&(next, N))
                        || parent.contains_key(&(next, a))
                    {
                        continue;
                    }
                    parent.insert((next, a), ((node, entered), by[a as usize]));
                    queue.push_back((next, a));
                }
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

    const EN: u16 = ty(E, N);
    const ER: u16 = ty(E, R);
    const EP: u16 = ty(E, UPGRADE);
    const SN: u16 = ty(S, N);
    const SR: u16 = ty(S, R);
    const SP: u16 = ty(S, UPGRADE);

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
        // Fair reads (SN instead of SR) deadlock through a queued writer.
        g.add(2, 1, SN, origin);
        assert!(g.deadlock_path(2, 1, SN).is_some());
    }

    #[test]
    fn upgrades_wait_for_readers_only() {
        // T2 holds B and upgrades A: B -(EP)-> A. T1 holds A exclusively
        // (a write, or the upgradable read being upgraded) and takes B:
        // A -(EN)-> B. No other thread holds A exclusively while T2
        // upgrades it: no deadlock.
        let mut g = Graph::default();
        g.add(2, 1, EP, origin);
        assert_eq!(g.deadlock_path(2, 1, EN), None);
        // T1 reading A instead (SN): T2's upgrade waits for T1's read.
        assert!(g.deadlock_path(2, 1, SN).is_some());
        // An upgrade in the middle of a chain: C -(SP)-> A only continues
        // out of A by a shared hold.
        let mut h = Graph::default();
        h.add(3, 1, SP, origin);
        h.add(1, 2, EN, origin);
        assert_eq!(h.deadlock_path(3, 2, EN), None);
        h.add(1, 2, SN, origin);
        assert_eq!(h.deadlock_path(3, 2, EN), Some(std::vec![(3, 1), (1, 2)]));
    }

    #[test]
    fn recursive_and_upgrade_entries_are_both_explored() {
        // 1 -> 2 as a recursive read and as an upgrade (two threads);
        // 2 -> 3 only out of a shared hold of 2, which blocks the upgrade,
        // not the recursive read. Closing 3 -> 1 exclusively.
        let mut g = Graph::default();
        g.add(1, 2, ER | EP, origin);
        g.add(2, 3, SN, origin);
        assert_eq!(g.deadlock_path(1, 3, EN), Some(std::vec![(1, 2), (2, 3)]));
        // Entering 2 only by the recursive read: no cycle.
        let mut h = Graph::default();
        h.add(1, 2, ER, origin);
        h.add(2, 3, SN, origin);
        assert_eq!(h.deadlock_path(1, 3, EN), None);
        // Entering 2 by a plain acquisition (N) as well: found.
        h.add(1, 2, EN, origin);
        assert!(h.deadlock_path(1, 3, EN).is_some());
    }

    #[test]
    fn own_holds() {
        use Access::*;
        assert!(blocks_itself(Write, RecursiveRead));
        assert!(!blocks_itself(Upgradable, Read));
        assert!(!blocks_itself(Upgradable, RecursiveRead));
        assert!(blocks_itself(Upgradable, Upgradable));
        assert!(blocks_itself(Upgradable, Write));
        assert!(blocks_itself(Read, Read));
        assert!(blocks_itself(Read, Upgradable));
        assert!(!blocks_itself(RecursiveRead, RecursiveRead));
        assert!(!blocks_itself(ReentrantRead, ReentrantRead));
        assert!(blocks_itself(ReentrantRead, Upgradable));
        assert_eq!(acquire_mode(ReentrantRead), N, "checked as fair");
    }
}
