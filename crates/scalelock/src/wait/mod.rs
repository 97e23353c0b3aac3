//! How a waiter waits: the one layer every lock in the crate waits through.
//!
//! A lock file keeps only its protocol (its bits, its fence pairings, what
//! it re-checks before sleeping); *how long* to spin, when to yield, when to
//! sleep, and how long a batch lasts live here:
//! - [`tuning`]: every tunable, in one table, next to its loom value.
//! - [`backoff`]: spinning on loads with exponential backoff, then brief
//!   sleeps (so a preempted holder can run); a contender's spin-then-yield
//!   before it queues; the quiet poll of a waiter that waits out a
//!   holder's batch.
//! - [`parking`]: sleeping on an address (a small parking lot of futex
//!   words, chosen by the lock's address) and the two sleep protocols the
//!   locks use: "until a release" (a light/heavy fence pair, so releases
//!   stay plain stores) and "until an RMW of the lock word says so".
//! - [`batch`]: bounded batches, shared by both queued locks: the one thread
//!   waiting on the lock word (the *word waiter*) lets the running threads
//!   keep the lock for a batch and then claims it; its clock, and when it
//!   gives up waiting awake.
//! - [`quota`]: turn quotas, so that qspinlock's holders take equal
//!   numbers of acquisitions per turn, not only equal time.
//! - [`deadline`]: timeouts of the timed acquisitions, on the platform's
//!   clock.
//!
//! The platform ([`crate::platform::Platform`]) provides only mechanisms:
//! relax, yield, a clock, wait/wake on a word, fences, queue nodes, reader
//! slots. No policy lives there.

pub(crate) mod backoff;
pub(crate) mod batch;
pub(crate) mod deadline;
pub(crate) mod parking;
pub(crate) mod quota;
pub(crate) mod tuning;

pub(crate) use self::backoff::{Backoff, GapWatch, QuietPoll, SpinThenYield, shortest_free_gap};
pub(crate) use self::batch::{BatchClock, BatchDebt, WaiterTake};
pub(crate) use self::deadline::Deadline;
pub(crate) use self::tuning::TUNING;
