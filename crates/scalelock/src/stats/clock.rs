//! The statistics clock: monotonic nanoseconds since the first reading,
//! plus one, so that 0 can mean "not measured".

use std::sync::OnceLock;
use std::time::Instant;

static BASE: OnceLock<Instant> = OnceLock::new();

/// Nanoseconds since the first call, plus one (never 0).
#[inline]
pub(crate) fn now_ns() -> u64 {
    let base = *BASE.get_or_init(Instant::now);
    u64::try_from(base.elapsed().as_nanos())
        .unwrap_or(u64::MAX - 1)
        .saturating_add(1)
}
