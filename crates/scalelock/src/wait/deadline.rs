//! Timeouts: when a timed wait gives up.
//!
//! A [`Deadline`] is a reading of [`Platform::now_ns`] (or never). Every wait
//! of a timed acquisition bounds its sleeps by the time left, and gives up
//! only once `now_ns` has reached the deadline, never before (lock_api's
//! contract: a failed timed attempt may return late, not early). The untimed
//! paths pass [`Deadline::NEVER`], which never reads the clock.
//!
//! Where `now_ns` is a constant 0 (a platform without a clock), only a
//! deadline of 0 has passed: a zero timeout is a single attempt, any other
//! never expires (see [`crate::platform::TimedPlatform`]).

use core::time::Duration;

use crate::platform::Platform;
use crate::sync::atomic::AtomicU32;

/// When a timed wait gives up: a `now_ns` reading, or never.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Deadline {
    /// `u64::MAX`: never (585 years of nanoseconds: never reached).
    ns: u64,
}

impl Deadline {
    /// No deadline: the untimed paths.
    pub(crate) const NEVER: Self = Self { ns: u64::MAX };

    /// The deadline at `now_ns` reading `ns`.
    #[inline]
    pub(crate) const fn at(ns: u64) -> Self {
        Self { ns }
    }

    /// The deadline `timeout` from now.
    #[inline]
    pub(crate) fn after<P: Platform>(timeout: Duration) -> Self {
        let ns = u64::try_from(timeout.as_nanos()).unwrap_or(u64::MAX);
        Self {
            ns: P::now_ns().saturating_add(ns),
        }
    }

    /// Whether this is [`NEVER`](Self::NEVER).
    #[inline]
    pub(crate) fn is_never(self) -> bool {
        self.ns == u64::MAX
    }

    /// Whether the deadline has passed (reads the clock unless never).
    #[inline]
    pub(crate) fn passed<P: Platform>(self) -> bool {
        !self.is_never() && P::now_ns() >= self.ns
    }

    /// Nanoseconds left (0 once passed, `u64::MAX` for never): the bound of
    /// a timed sleep.
    #[inline]
    pub(crate) fn remaining_ns<P: Platform>(self) -> u64 {
        if self.is_never() {
            u64::MAX
        } else {
            self.ns.saturating_sub(P::now_ns())
        }
    }

    /// [`Platform::wait`], returning once the deadline passed at the latest.
    #[inline]
    pub(crate) fn wait<P: Platform>(self, word: &AtomicU32, expected: u32) {
        if self.is_never() {
            P::wait(word, expected);
        } else {
            P::wait_timeout(word, expected, self.remaining_ns::<P>());
        }
    }
}
