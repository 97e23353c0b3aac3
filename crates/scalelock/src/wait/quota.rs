//! Turn quotas: equal shares in acquisitions, not only in time.
//!
//! A batch timed by the word waiter ([`super::batch`]) gives the threads in
//! the queue equal *time* with the lock, one turn each in FIFO order. With
//! more threads than CPUs that is not equal *acquisitions*: a holder's pace
//! within its turn varies from turn to turn (a woken thread shares its CPU
//! for a while, it is preempted for part of the turn, the host runs
//! something on the sibling hardware thread), and a turn runs long when the
//! word waiter's wake-up is late. Traced per thread on 16 threads in a
//! tight loop on 2 CPUs, every thread had about the same number of turns,
//! but their summed turn time differed by up to 1.9x and their pace by up
//! to 1.7x, so
//! over a 0.3 s run the slowest thread made 0.6-0.8 of the fastest one's
//! acquisitions (docs/measurements.md has the figures).
//!
//! So a qspinlock holder that re-takes the lock while a word waiter sleeps
//! through its batch counts its releases (it already counts them down
//! between clock reads, `batch::HolderStretch`), and once it has made the
//! lock's *quota* it hands the lock over itself, as a fair unlock would
//! (`batch::Overran::HandOver`). The quota is the number of releases the
//! lock's holders make in `batch_ns`, averaged over their turns (an
//! exponential average, weight 2^-`qs_quota_shift`), so a fast turn ends
//! early and a slow one runs on: the word waiter, once the lock has a
//! quota, waits up to `qs_turn_bound_ns` (longer than `batch_ns`) before it
//! claims the lock, and no batch debt is settled (the quota is the debt's
//! job, done in acquisitions). This is deficit round robin counted in
//! acquisitions, the unit Linux's qspinlock (strict FIFO) is fair in.
//! A lock whose holders make fewer than `8 * qs_overrun_check_releases`
//! acquisitions per `batch_ns` (long critical sections, or work between
//! them) keeps timed turns and the debt: the holder's count is only seen
//! at its clock reads, at least that many releases apart.
//!
//! The quota is a hint kept outside the 4-byte lock, in a small table
//! hashed by the lock's address with a tag of other address bits: a lock
//! whose slot holds another lock's quota reads none (its turns are timed as
//! before), and two locks that share a slot only take turns at resetting
//! it. A lock that is dropped leaves its quota to the next lock at its
//! address, which corrects it within a few turns (also one far too small:
//! a turn that made it early still tells the pace, see [`fold`]). (Only
//! qspinlock's holders fold and use quotas; a qrwlock's queue lock never
//! makes one, and reads one only where a qspinlock at the same address
//! left it: its word waiter then waits the longer bound.) The slot is
//! written once per turn (about a millisecond), so it adds no contended
//! line.
//!
//! The table uses `core`'s atomics, not the models': under loom and
//! shuttle the holder never reads its clock (`qs_overrun_check_releases` is
//! 0 there), so nothing writes it, and the word waiter's read finds no
//! quota.

use core::sync::atomic::{AtomicU64, Ordering};

use super::TUNING;

/// Slots in the table (a power of two: the hash's top bits pick one).
const SLOTS: usize = 256;
/// The quota's bits in a slot; the tag sits above them.
const QUOTA_BITS: u32 = 40;
const QUOTA_MASK: u64 = (1 << QUOTA_BITS) - 1;
/// The tag's bits (taken from the hash below the slot index's).
const TAG_MASK: u64 = (1 << 24) - 1;

/// The table: per slot, tag << `QUOTA_BITS` | quota (0: none).
pub(crate) struct Quotas([AtomicU64; SLOTS]);

/// Every lock's quota.
static QUOTAS: Quotas = Quotas::new();

/// `lock`'s slot index and tag (Fibonacci hashing of the address: the top
/// 8 bits pick the slot, the next 24 are the tag).
#[inline]
fn slot_and_tag(lock: usize) -> (usize, u64) {
    let h = (lock as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    ((h >> 56) as usize, (h >> 32) & TAG_MASK)
}

impl Quotas {
    /// No quotas.
    pub(crate) const fn new() -> Self {
        Self([const { AtomicU64::new(0) }; SLOTS])
    }

    /// See [`of`].
    #[inline]
    fn of(&self, lock: usize) -> u64 {
        let q = self.stored(lock);
        if q >= min_quota() { q } else { 0 }
    }

    /// `lock`'s average, however small (0: none).
    #[inline]
    fn stored(&self, lock: usize) -> u64 {
        let (slot, tag) = slot_and_tag(lock);
        let v = self.0[slot].load(Ordering::Relaxed);
        if v >> QUOTA_BITS == tag {
            v & QUOTA_MASK
        } else {
            0
        }
    }

    /// See [`fold`].
    fn fold(&self, lock: usize, releases: u64, elapsed_ns: u64) {
        if elapsed_ns == 0 || (elapsed_ns < TUNING.batch_ns / 4 && releases < min_quota()) {
            return;
        }
        let sample = (u128::from(releases) * u128::from(TUNING.batch_ns) / u128::from(elapsed_ns))
            .min(u128::from(QUOTA_MASK)) as u64;
        let old = self.stored(lock);
        let shift = TUNING.qs_quota_shift;
        let new = if old == 0 {
            sample
        } else {
            old - (old >> shift) + (sample >> shift)
        };
        let (slot, tag) = slot_and_tag(lock);
        // Relaxed: see `of`. A lost update between two holders of locks
        // that share the slot costs one sample.
        self.0[slot].store(
            tag << QUOTA_BITS | new.clamp(1, QUOTA_MASK),
            Ordering::Relaxed,
        );
    }

    /// Sets `lock`'s quota (0: none).
    #[cfg(all(test, not(loom)))]
    fn set(&self, lock: usize, quota: u64) {
        let (slot, tag) = slot_and_tag(lock);
        let v = if quota == 0 {
            0
        } else {
            tag << QUOTA_BITS | quota
        };
        self.0[slot].store(v, Ordering::Relaxed);
    }
}

/// The smallest quota a lock uses: the holder reads its clock (and so
/// sees its count) at most every `qs_overrun_check_releases` releases, so
/// a smaller quota would be overrun by a large share of itself. Locks
/// whose holders make fewer acquisitions per `batch_ns` (long critical
/// sections, or work between them) keep timed turns and the batch debt.
#[inline]
fn min_quota() -> u64 {
    8 * u64::from(TUNING.qs_overrun_check_releases).max(1)
}

/// The releases a holder of `lock` makes in its turn before it hands the
/// lock over; 0 while the lock has no quota (its turns are timed), or one
/// below [`min_quota`].
/// Relaxed: a hint, read on a release's clock check and by a word waiter
/// at the start of its wait.
#[inline]
pub(crate) fn of(lock: usize) -> u64 {
    QUOTAS.of(lock)
}

/// Folds one turn's pace into `lock`'s quota: `releases` made in
/// `elapsed_ns`. A turn shorter than a quarter of `batch_ns` with fewer
/// than [`min_quota`] releases says little about the pace (a hand-over
/// right after the first clock read) and is left out. A short turn with
/// more releases counts: one that ended because its holder made the quota
/// is short exactly when the quota is far below the holders' pace (a
/// slower lock left it at the same address, one slow turn set it, the
/// work got faster), and leaving such turns out kept that quota for
/// good, every turn handed over after a fraction of its time.
pub(crate) fn fold(lock: usize, releases: u64, elapsed_ns: u64) {
    QUOTAS.fold(lock, releases, elapsed_ns);
}

/// Tests: sets `lock`'s quota, or forgets it (0; a test's lock may sit
/// where an earlier test's lock left one).
#[cfg(all(test, not(loom)))]
pub(crate) fn set_for_test(lock: usize, quota: u64) {
    QUOTAS.set(lock, quota);
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    /// A quota is kept per lock: folded from turns' paces into an
    /// exponential average, read back only by the lock it was folded for.
    #[test]
    fn a_quota_averages_the_turns_of_its_lock_alone() {
        let q = Quotas::new();
        let a = 0x7fff_0000_1000;
        assert_eq!(q.of(a), 0);
        // A turn too short, with too few releases, to tell the pace:
        // nothing.
        q.fold(a, min_quota() - 1, TUNING.batch_ns / 8);
        assert_eq!(q.of(a), 0);
        // 4,000 releases in half a batch: 8,000 per batch.
        q.fold(a, 4_000, TUNING.batch_ns / 2);
        assert_eq!(q.of(a), 8_000);
        // A slower turn moves the average by 2^-shift of the difference.
        q.fold(a, 4_000, TUNING.batch_ns);
        let w = 1 << TUNING.qs_quota_shift;
        assert_eq!(q.of(a), 8_000 - 8_000 / w + 4_000 / w);
        // Another lock in the same slot reads no quota and, once it folds
        // its own, the first lock reads none.
        let (slot, tag) = slot_and_tag(a);
        let b = (1..1 << 20)
            .map(|i| a + 64 * i)
            .find(|&b| slot_and_tag(b).0 == slot && slot_and_tag(b).1 != tag)
            .expect("a lock sharing the slot");
        assert_eq!(q.of(b), 0);
        q.fold(b, 10_000, TUNING.batch_ns);
        assert_eq!(q.of(b), 10_000);
        assert_eq!(q.of(a), 0);
        q.set(b, 0);
        assert_eq!(q.of(b), 0);
    }

    /// A quota far below the holders' pace (left by a slower lock at the
    /// same address, or set by one slow turn) ends every turn long before
    /// a quarter of `batch_ns`; those turns still tell the pace, and the
    /// quota climbs to it.
    #[test]
    fn a_quota_far_below_the_pace_climbs_to_it() {
        let q = Quotas::new();
        let a = 0x7fff_0000_3000;
        let pace_per_batch = 20_000;
        q.fold(a, 1_000, TUNING.batch_ns);
        assert_eq!(q.of(a), 1_000);
        for _ in 0..40 {
            // The holder makes the quota and hands over: a turn of
            // `quota` releases at the holders' pace.
            let quota = q.of(a);
            let turn_ns = TUNING.batch_ns * quota / pace_per_batch;
            assert!(turn_ns < TUNING.batch_ns / 4 || quota > pace_per_batch / 4);
            q.fold(a, quota, turn_ns);
        }
        let got = q.of(a);
        assert!(
            got.abs_diff(pace_per_batch) * 20 <= pace_per_batch,
            "quota {got}, the pace says {pace_per_batch}"
        );
        // No clock (the elapsed time 0): nothing.
        q.fold(a, 100_000, 0);
        assert_eq!(q.of(a), got);
    }

    /// A lock whose turns make fewer releases than the holder's clock
    /// reads can count precisely keeps timed turns; its average is kept,
    /// and it gets a quota once its pace rises.
    #[test]
    fn a_slow_lock_keeps_timed_turns() {
        let q = Quotas::new();
        let a = 0x7fff_0000_2000;
        let low = min_quota() / 2;
        q.fold(a, low, TUNING.batch_ns);
        assert_eq!(q.stored(a), low);
        assert_eq!(q.of(a), 0);
        for _ in 0..16 {
            q.fold(a, 4 * min_quota(), TUNING.batch_ns);
        }
        assert!(q.of(a) >= min_quota(), "{}", q.of(a));
    }
}
