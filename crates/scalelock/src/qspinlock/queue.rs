//! The MCS queue of `RawQSpinLock`, and how a waiter leaves it.
//!
//! A queued waiter spins, then sleeps, on its own node until its predecessor
//! signals it: `HEAD` (the predecessor acquired the lock, or gave up as the
//! word waiter, and handed it `PENDING`) or `FIRST` (it is first in the
//! queue and takes `PENDING` itself once the word waiter is done). The word
//! waiter keeps its node until it acquires: its successor is taken from the
//! node's `next` link then, with an RMW.
//!
//! # Giving up (timed acquisitions)
//! After Linux's `osq_lock` unqueue (`kernel/locking/osq_lock.c`), with our
//! own signals. A waiter X whose deadline passed, with predecessor P:
//! - **A, unlink**: `cmpxchg(P.next, X -> 0)`. From then on P will not take
//!   X as its successor: P, when it wants its successor, finds 0 and waits
//!   until X's step C gives it one, or until the tail names P again. The
//!   `cmpxchg` fails if P already took X (a swap of `P.next`): P is about to
//!   signal X (it acquired, or it gave up and hands X its place), so X waits
//!   for the signal and continues as head (then gives up as the word
//!   waiter) or as first. It also fails if P itself left meanwhile and
//!   rewrote `X.prev`: X retries with its new predecessor.
//! - **B, stabilise the successor**: either the tail still names X, and X
//!   gives it back to P (`cmpxchg(tail, X -> P)`, or `-> 0` without P), or
//!   X's successor S has linked itself (or is about to): X takes it with a
//!   swap of `X.next`. (A successor giving up at the same time cleared the
//!   link; X waits until S's own step C links S's successor to X.)
//! - **C, link around**: `S.prev = P` then `P.next = S`; without P, S is
//!   now first: `S.prev = 0`, signal `FIRST`.
//!
//! After step A nobody takes X from a link any more, and after step B X
//! names nobody and nobody names X (a successor that still reads
//! `X.prev`-era links fails its `cmpxchg`, whose comparand is its own
//! index), so X's node is free for its owner's next wait (invariant 4).
//! Every wait in B and C is for a thread inside these few steps (or
//! linking itself after its tail swap), so giving up is prompt unless one
//! of them is preempted.
//!
//! No hand-off is lost: P, the only thread that could signal X, either
//! signals it (A fails; X passes `PENDING` on as the word waiter) or takes
//! X's successor instead (C), and a first waiter that leaves makes its
//! successor first.

use crate::events::Events;
use crate::platform::Platform;
use crate::qnode::{NODE_FIRST, NODE_HEAD, NODE_PARKED, NODE_WAITING, NodeIndex};
use crate::sync::atomic::Ordering;
use crate::wait::{Backoff, Deadline, TUNING, parking};

use super::{HEAD_PARKED, MadeHead, PENDING, QSpinCore};

/// The node index a link or the tail holds (0: none).
#[inline]
fn index_of(raw: u32) -> Option<NodeIndex> {
    u16::try_from(raw).ok().and_then(NodeIndex::new)
}

/// In a node's `made_by`, above the predecessor's index: the predecessor
/// gave this node's owner its CPU (`yield_after`: the lock's holders run a
/// tight loop).
const MADE_BY_YIELDING: u32 = 1 << 16;

impl<P: Platform> QSpinCore<P> {
    /// MCS queueing with node `index`; true holding the lock, false once
    /// `deadline` passed (our node out of the queue, nothing of ours left).
    pub(super) fn lock_queued(&self, index: NodeIndex, deadline: Deadline, ev: Events) -> bool {
        let node = P::node(index);
        node.reset();
        // AcqRel: Release publishes the reset above to our successor, Acquire
        // makes the predecessor's node (named by the old tail) valid to us.
        let prev = self.tail.swap(index.get(), Ordering::AcqRel);
        #[cfg(feature = "stats")]
        if ev.counted() {
            // Our place in the order of arrival (see `report_queue_depth`).
            // Relaxed: a statistic; a predecessor that has not stored its
            // own yet (0) makes us 1, an undercount.
            let seq = NodeIndex::new(prev).map_or(1, |prev| {
                P::node(prev).seq.load(Ordering::Relaxed).wrapping_add(1)
            });
            node.seq.store(seq, Ordering::Relaxed);
        }
        let signal = match NodeIndex::new(prev) {
            Some(prev) => {
                // Before the link: once linked, a predecessor that gives up
                // may rewrite it. Relaxed: read only by us.
                node.prev.store(u32::from(prev.get()), Ordering::Relaxed);
                // Release pairs with the predecessor's Acquire take of the
                // link: our reset precedes its writes into our node.
                Self::link(prev, index);
                match self.wait_in_queue(index, deadline, ev) {
                    Some(signal) => signal,
                    None => return false,
                }
            }
            // No predecessor: the word waiter (if any) is not linked to us
            // (it never queued, or it left the queue behind it).
            None => NODE_FIRST,
        };
        self.lock_from_queue(index, signal, deadline, ev)
    }

    /// Goes on from a queue signal: `NODE_HEAD` (the predecessor made us
    /// head and word waiter, with `PENDING`) or `NODE_FIRST` (first in the
    /// queue: take `PENDING` when the word waiter is done). Then waits as
    /// the word waiter.
    fn lock_from_queue(
        &self,
        index: NodeIndex,
        signal: u32,
        deadline: Deadline,
        ev: Events,
    ) -> bool {
        let head = if signal == NODE_HEAD {
            // Written before the predecessor's Release signal, which our
            // Acquire load of the state saw.
            let node = P::node(index);
            let made_by = node.made_by.load(Ordering::Relaxed);
            Some(MadeHead {
                since: node.since.load(Ordering::Relaxed),
                by: index_of(made_by & !MADE_BY_YIELDING),
                tight_loop: made_by & MADE_BY_YIELDING != 0,
            })
        } else {
            if !self.become_pending_as_head(deadline, ev) {
                // Nobody signals a first waiter: leave from here.
                self.leave_queue(index, None);
                return false;
            }
            None
        };
        #[cfg(feature = "stats")]
        self.report_queue_depth(index, ev);
        let queue = self.settle_successor(index).then_some(index);
        self.wait_as_pending(queue, head, deadline, ev)
    }

    /// Statistics: a new queue head (we, `index`, own `PENDING`) reports
    /// the queue's depth, itself included: the tail's place in the order of
    /// arrival minus ours, plus one. Every head reports once, so the
    /// class's maximum is the deepest queue a head saw. Approximate: a
    /// waiter that gave up (a timed one) still counts until the queue
    /// empties, and one that has not stored its place yet is missed.
    #[cfg(feature = "stats")]
    #[cold]
    fn report_queue_depth(&self, index: NodeIndex, ev: Events) {
        if !ev.counted() {
            return;
        }
        let mine = P::node(index).seq.load(Ordering::Relaxed);
        // Acquire pairs with the AcqRel tail swap of the node it names (or
        // the tail RMWs after it): that node's reset (`seq` 0) precedes
        // our load of its `seq`, so we read 0 or its place in this queue,
        // never one from an earlier wait.
        let depth = match NodeIndex::new(self.tail.load(Ordering::Acquire)) {
            Some(tail) if tail != index => {
                let last = P::node(tail).seq.load(Ordering::Relaxed);
                if mine == 0 || last == 0 {
                    return;
                }
                last.wrapping_sub(mine).wrapping_add(1)
            }
            _ => 1,
        };
        // A queue holds at most one node per index.
        if depth <= u32::from(u16::MAX) {
            ev.queue_depth(depth);
        }
    }

    /// Spins on our own node until the predecessor signals us (`NODE_HEAD`
    /// or `NODE_FIRST`, returned); sleeps on it after `qs_node_spins`. Once
    /// `deadline` has passed, gives up: `None`, out of the queue (unless
    /// the signal comes first).
    fn wait_in_queue(&self, index: NodeIndex, deadline: Deadline, ev: Events) -> Option<u32> {
        let node = P::node(index);
        let mut spins = 0;
        loop {
            // Acquire pairs with the predecessor's Release signal.
            let state = node.state.load(Ordering::Acquire);
            if state == NODE_HEAD || state == NODE_FIRST {
                return Some(state);
            }
            if deadline.passed::<P>() {
                return self.give_up_queued(index);
            }
            if state == NODE_PARKED {
                ev.park();
                deadline.wait::<P>(&node.state, NODE_PARKED);
                // Spurious: not signalled yet (or the deadline passed).
                ev.wake(node.state.load(Ordering::Relaxed) == NODE_PARKED);
            } else if spins < TUNING.qs_node_spins {
                spins += 1;
                P::relax();
            } else {
                // WAITING -> PARKED; fails only if we were just signalled.
                // The predecessor's swap returns PARKED and wakes us.
                let _ = node.state.compare_exchange(
                    NODE_WAITING,
                    NODE_PARKED,
                    Ordering::Relaxed,
                    Ordering::Relaxed,
                );
            }
        }
    }

    /// Step A (module docs): unlinks our node from its predecessor, then
    /// leaves (B, C) and returns `None`; or returns the signal that our
    /// predecessor, having already taken us, sends instead.
    #[cold]
    fn give_up_queued(&self, index: NodeIndex) -> Option<u32> {
        let node = P::node(index);
        let me = u32::from(index.get());
        let mut backoff = Backoff::new();
        loop {
            // (First: a predecessor in the middle of taking us finishes. It
            // can be preempted there, maybe on our CPU: back off to
            // sleeping so that it gets to run.)
            backoff.snooze::<P>();
            // Relaxed: a predecessor that leaves rewrites it before it
            // links us to its own predecessor; a stale value only fails
            // the cmpxchg below.
            if let Some(prev) = index_of(node.prev.load(Ordering::Relaxed))
                && P::node(prev)
                    .next
                    // Relaxed: it only decides, in the link's modification
                    // order, against the predecessor's taking swap.
                    .compare_exchange(me, 0, Ordering::Relaxed, Ordering::Relaxed)
                    .is_ok()
            {
                self.leave_queue(index, Some(prev));
                return None;
            }
            // Taken by our predecessor, who signals us next; or it left and
            // gives us a new predecessor (or makes us first).
            // Acquire pairs with the Release signal.
            let state = node.state.load(Ordering::Acquire);
            if state == NODE_HEAD || state == NODE_FIRST {
                return Some(state);
            }
        }
    }

    /// Steps B and C (module docs): nobody will signal us any more; hands
    /// our successor to `prev` (or makes it first), or gives the tail back
    /// to `prev` (0 without one).
    pub(super) fn leave_queue(&self, index: NodeIndex, prev: Option<NodeIndex>) {
        let node = P::node(index);
        let back = prev.map_or(0, NodeIndex::get);
        let mut backoff = Backoff::new();
        let next = loop {
            // AcqRel, as a newcomer's swap: a newcomer that reads `back`
            // from the tail links itself into that node, and the Release
            // orders our step A (the cmpxchg of `back.next`, which read a
            // link written after the node's reset) before that link. When
            // a leaving neighbour made `back` our predecessor (step C), we
            // learned it by Relaxed accesses, so its reset need not happen
            // before this cmpxchg: that order on `back.next` (coherence),
            // the only field the newcomer writes there, is what keeps its
            // link from being overwritten by the reset.
            if self.tail.load(Ordering::Relaxed) == index.get()
                && self
                    .tail
                    .compare_exchange(index.get(), back, Ordering::AcqRel, Ordering::Relaxed)
                    .is_ok()
            {
                return;
            }
            if node.next.load(Ordering::Relaxed) != 0 {
                // Acquire pairs with the successor's Release link.
                if let Some(next) = index_of(node.next.swap(0, Ordering::Acquire)) {
                    break next;
                }
            }
            // The successor swapped the tail but has not linked itself yet
            // (it may be preempted there), or it gives up too and links its
            // own successor to us in its step C.
            backoff.snooze::<P>();
        };
        let succ = P::node(next);
        match prev {
            Some(prev) => {
                // Its predecessor first, then the link (osq's order): if the
                // successor gives up, it finds the link it must clear.
                succ.prev.store(u32::from(prev.get()), Ordering::Relaxed);
                // Release pairs with the Acquire take of the link by `prev`:
                // the successor's reset (which we acquired) precedes its
                // writes into the successor's node.
                Self::link(prev, next);
            }
            None => {
                succ.prev.store(0, Ordering::Relaxed);
                // Release pairs with the successor's Acquire state load.
                if succ.state.swap(NODE_FIRST, Ordering::Release) == NODE_PARKED {
                    P::wake_one(&succ.state);
                }
            }
        }
    }

    /// Links `next` behind `prev` (Release; see the callers). A swap, not a
    /// store: the link is taken and cleared by RMWs of other threads, and
    /// loom 0.7 may order a plain store between the read and the write of
    /// a concurrent RMW (tokio-rs/loom#389), which real hardware never
    /// does; the swap costs one queueing waiter a locked instruction. The
    /// link is empty: only the node that swapped the tail to `prev` links
    /// there, or the successor that cleared it (step C).
    #[inline]
    fn link(prev: NodeIndex, next: NodeIndex) {
        let old = P::node(prev)
            .next
            .swap(u32::from(next.get()), Ordering::Release);
        debug_assert_eq!(old, 0, "queue link already taken");
    }

    /// As the word waiter we no longer need our place in the queue: give the
    /// tail back if nobody queued behind us (false); else wait until our
    /// successor has linked itself (true: we take it from our node when we
    /// acquire, `take_successor`).
    pub(super) fn settle_successor(&self, index: NodeIndex) -> bool {
        let node = P::node(index);
        let mut backoff = Backoff::new();
        loop {
            // Relaxed: clearing the tail publishes nothing.
            if self.tail.load(Ordering::Relaxed) == index.get()
                && self
                    .tail
                    .compare_exchange(index.get(), 0, Ordering::Relaxed, Ordering::Relaxed)
                    .is_ok()
            {
                return false;
            }
            if node.next.load(Ordering::Relaxed) != 0 {
                return true;
            }
            // The successor can be preempted between its swap and its link
            // (or gives up, and gives the tail back to us): back off to
            // sleeping so it gets to run.
            backoff.snooze::<P>();
        }
    }

    /// The word waiter takes its successor from its node (at acquisition,
    /// or when it gives up): an Acquire swap, which a successor that gives
    /// up races with its `cmpxchg` (step A); a successor leaving meanwhile
    /// links its own successor to us or gives the tail back to us. `None`
    /// once the queue behind us is empty (we clear the tail).
    pub(super) fn take_successor(&self, index: NodeIndex) -> Option<NodeIndex> {
        let node = P::node(index);
        let mut backoff = Backoff::new();
        loop {
            if node.next.load(Ordering::Relaxed) != 0 {
                // Acquire pairs with the successor's Release link: its reset
                // precedes our writes into its node.
                if let Some(next) = index_of(node.next.swap(0, Ordering::Acquire)) {
                    return Some(next);
                }
            }
            if self.tail.load(Ordering::Relaxed) == index.get()
                && self
                    .tail
                    .compare_exchange(index.get(), 0, Ordering::Relaxed, Ordering::Relaxed)
                    .is_ok()
            {
                return None;
            }
            backoff.snooze::<P>();
        }
    }

    /// Makes `next` (taken with `take_successor`) head and word waiter: it
    /// owns `PENDING` from here, and its batch is timed from now. `by` is
    /// our node if we acquired the lock (the batch that starts now is ours,
    /// and `next` settles it in our debt), `None` if we gave up. With
    /// `yield_after` (we took the lock by a hand-off, or free after our
    /// claim following a hand-off: `batch::yields_to_successor`), a sleeping
    /// `next` is woken and then given our CPU once (see "Preemption" in the
    /// module docs of `qspinlock`).
    pub(super) fn make_head(next: NodeIndex, by: Option<NodeIndex>, yield_after: bool) {
        let node = P::node(next);
        node.since.store(P::now_ns(), Ordering::Relaxed);
        let yielding = if yield_after { MADE_BY_YIELDING } else { 0 };
        node.made_by.store(
            by.map_or(0, |b| u32::from(b.get())) | yielding,
            Ordering::Relaxed,
        );
        // Release pairs with its Acquire state load (`since` above is seen).
        if node.state.swap(NODE_HEAD, Ordering::Release) == NODE_PARKED {
            P::wake_one(&node.state);
            if yield_after {
                // A woken thread is often queued on the waker's CPU, and
                // would wait there for a tick while our batch runs on.
                // (Where it found an idle CPU, this returns at once.)
                P::yield_now();
            }
        }
    }

    /// The first queued waiter takes `PENDING` once the current word waiter
    /// is done: polls, then sleeps until the word waiter's acquiring (or
    /// giving-up) RMW wakes it. False once `deadline` passed, without
    /// `PENDING`.
    pub(super) fn become_pending_as_head(&self, deadline: Deadline, ev: Events) -> bool {
        let mut backoff = Backoff::new();
        loop {
            let flags = self.flags.load(Ordering::Relaxed);
            if flags & PENDING == 0 {
                // Relaxed: see `try_become_pending`.
                if self
                    .flags
                    .compare_exchange_weak(
                        flags,
                        flags | PENDING,
                        Ordering::Relaxed,
                        Ordering::Relaxed,
                    )
                    .is_ok()
                {
                    return true;
                }
                continue;
            }
            if deadline.passed::<P>() {
                // A HEAD_PARKED we set stays: the next clearing RMW wakes
                // the bucket for nobody, a spurious wake-up at most.
                return false;
            }
            if backoff.steps() < TUNING.qs_head_steps {
                backoff.snooze::<P>();
                continue;
            }
            let ticket = parking::prepare(self.addr());
            // RMWs on `flags` are totally ordered: either the word waiter's
            // clearing RMW sees HEAD_PARKED and wakes the bucket, or we see
            // PENDING already clear and do not sleep. Release pairs with its
            // Acquire: our ticket precedes its wake.
            let old = self.flags.fetch_or(HEAD_PARKED, Ordering::Release);
            if old & PENDING != 0 {
                ev.park();
                parking::park_for::<P>(ticket, deadline.remaining_ns::<P>());
                // Spurious: the word waiter is still there.
                ev.wake(self.flags.load(Ordering::Relaxed) & PENDING != 0);
            }
            backoff = Backoff::new();
        }
    }
}
