//! The class order graph: which class was taken while which was held, in
//! which modes, and the search for a cycle that can deadlock.
//!
//! # Edge types (after Linux's lockdep since 5.10)
//! An edge `A -> B` means a thread took B while holding A. It records how:
//! A held Exclusively (write) or Shared (read), and B acquired
//! Non-recursively (write, or a fair read that queues behind a waiting
//! writer) or as a Recursive read (blocked only by a writer holding B).
//! Four types: `EN`, `ER`, `SN`, `SR`; one edge may carry several.
//!
//! A cycle deadlocks only if each thread in it can really block the next:
//! a recursive reader of B (`*R` into B) is not blocked by another thread
//! that merely reads B (`S*` out of B). So a cycle is reported iff it can
//! be walked choosing one type per edge with no `*R` edge followed by an
//! `S*` edge (the closing edge included). For example, with fair rwlocks
//! (non-recursive reads), "T1 reads A then writes B; T2 reads B then reads
//! A" is reported: a third thread queueing a write on A makes T2 wait
//! behind it, and it waits for T1. With recursive reads of A it is not.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::Arc;
use std::vec::Vec;

use crate::class::Access;

/// A held Exclusively, B acquired Non-recursively.
pub(crate) const EN: u8 = 1 << 0;
/// A held Exclusively, B acquired as a Recursive read.
pub(crate) const ER: u8 = 1 << 1;
/// A held Shared, B acquired Non-recursively.
pub(crate) const SN: u8 = 1 << 2;
/// A held Shared, B acquired as a Recursive read.
pub(crate) const SR: u8 = 1 << 3;
const INTO_RECURSIVE: u8 = ER | SR;
const OUT_OF_SHARED: u8 = SN | SR;

/// The type of the edge made by taking `acquired` while `held` is held.
pub(crate) fn edge_type(held: Access, acquired: Access) -> u8 {
    match (held.is_read(), acquired == Access::RecursiveRead) {
        (false, false) => EN,
        (false, true) => ER,
        (true, false) => SN,
        (true, true) => SR,
    }
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
    pub(crate) types: u8,
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
    pub(crate) fn has(&self, from: u32, to: u32, t: u8) -> bool {
        self.edges
            .get(&from)
            .and_then(|m| m.get(&to))
            .is_some_and(|e| e.types & t != 0)
    }

    /// Records `from -> to` of type `t` (keeping the first origin).
    pub(crate) fn add(&mut self, from: u32, to: u32, t: u8, origin: impl FnOnce() -> Origin) {
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
    /// `target -> start` of type `closing`, makes a cycle that can deadlock
    /// (see the module docs); as the list of (from, to) pairs.
    pub(crate) fn deadlock_path(
        &self,
        start: u32,
        target: u32,
        closing: u8,
    ) -> Option<Vec<(u32, u32)>> {
        // State: (class, whether the edge that entered it was *R).
        let mut parent: HashMap<(u32, bool), (u32, bool)> = HashMap::new();
        let mut queue = VecDeque::new();
        let first = (
            start,
            closing & INTO_RECURSIVE != 0 && closing & !INTO_RECURSIVE == 0,
        );
        parent.insert(first, first);
        queue.push_back(first);
        while let Some((node, entered_r)) = queue.pop_front() {
            if node == target && !(entered_r && closing & !OUT_OF_SHARED == 0) {
                // The closing edge leaves `target`: it must not be S* after
                // a *R edge, unless it also has an E* type.
                let mut path = Vec::new();
                let mut cur = (node, entered_r);
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
                let allowed = if entered_r {
                    e.types & !OUT_OF_SHARED
                } else {
                    e.types
                };
                if allowed == 0 {
                    continue;
                }
                // Entering by a non-recursive type constrains the next edge
                // least; take the recursive state only if that is all.
                let state = (next, allowed & !INTO_RECURSIVE == 0);
                if parent.contains_key(&(next, false)) || parent.contains_key(&state) {
                    continue;
                }
                parent.insert(state, (node, entered_r));
                queue.push_back(state);
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
}
