//! The symmetric mode against the inhibited one, decided by racing them.
//!
//! At a steady read share too high for the bias's heavy fence to pay and
//! too low for the writes to be rare, a lock runs either symmetric (reads
//! on their slots, a full fence each, every write revoking) or inhibited
//! (reads on the underlying lock, writes not revoking). Which of the two
//! runs faster depends on what moving the underlying lock's word between
//! CPUs costs (next to nothing between two hyperthreads of a core or two
//! vCPUs that share one, over 100 ns across sockets), on how much a full
//! fence costs with the read's own stores in flight, and on how the
//! revocation's cache misses spread over the readers after it: figures a
//! constant gets right on one machine and wrong on the next. So a
//! symmetric class measures both on the machine at hand, the way
//! `percpu_rwlock`'s proof bench does, by throughput: its reads per
//! millisecond in a symmetric phase and in an inhibited window. (This is
//! the explore-and-exploit idea of BRAVO's adaptive inhibition, Dice &
//! Kogan, ATC'19, applied to the choice of a reader's fence.)
//!
//! The race, judged at the class's symmetric revocations (each under its
//! lock's underlying write lock; `ModeRace::judge`):
//! - **symmetric phase**: starts at the first symmetric revocation (after
//!   a window, or the first ever). Once it lasted `SYM_PHASE_NS`, its read
//!   rate (slot reads plus slow reads) is compared, once, with the last
//!   window's. Faster or even: the lock stays symmetric for `EXPLORE_NS`,
//!   doubled for each race won in a row (up to 8x), and then a short
//!   window (`PROBE_WINDOW_NS`) measures the inhibited mode again (the
//!   read share, the threads or the machine's load may have changed).
//!   Slower: a short window and a new race (one lost race may be chance:
//!   a phase in which a preempted reader held up a revocation); slower
//!   twice in a row: windows of `pc_dense_window_ns`, 2, 4, ... 16 of them
//!   in a row before each next race while the symmetric mode keeps
//!   losing. No window measured yet: a short one after the first phase.
//! - **inhibited window**: when it is over, a slow reader brings the bias
//!   back, symmetric, and the next symmetric revocation takes the window's
//!   read rate: its slow reads over the time from the window's start to
//!   the bias's return. A symmetric revocation of another lock of the
//!   class while the window runs joins it (inhibits until its end) and
//!   leaves it to be measured. Slow reads are counted on the reader's own slot
//!   line: one by one on a slot-recorded slow read, and by
//!   `pc_clock_every` at once on the counted read that looks at the clock
//!   (one in `pc_clock_every` of a thread's), so the count costs the
//!   common inhibited read nothing.
//!
//! So where inhibiting wins, the lock spends one `SYM_PHASE_NS` in about
//! 16 `pc_dense_window_ns` symmetric; where the symmetric mode wins, one
//! `PROBE_WINDOW_NS` in 16-128 ms inhibited. Writes too few reads apart
//! for the symmetric mode to pay on any machine (`pc_sym_min_reads`)
//! inhibit without a race, and that window is measured too
//! (`ModeRace::window`). Spells of the biased mode (rare writes, and the
//! symmetric mode's periodic probe of it) count in the phase they fall
//! in. The rates are the class's: with several locks in a
//! class, their reads and writes mix (as the class's other figures in
//! [`ReaderTable`](crate::ReaderTable) do). All fields are hints, read and
//! written with relaxed plain loads and stores by the class's writers: a
//! lost update costs one measurement.

use core::sync::atomic::{AtomicU8, AtomicU32, AtomicU64, Ordering};

use crate::reader_table::count_since;
use crate::wait::TUNING;

/// No phase measured yet.
const IDLE: u8 = 0;
/// A symmetric phase is under way.
const SYMMETRIC: u8 = 1;
/// An inhibited window is under way (or over, not yet judged).
const WINDOW: u8 = 2;
/// A symmetric phase won its race: no more until `EXPLORE_NS`.
const SYMMETRIC_WON: u8 = 3;

/// How long a symmetric phase runs before its rate is compared, once a
/// window's is known. Short against the window, so that where inhibiting
/// wins the lock spends little time symmetric.
const SYM_PHASE_NS: u64 = 300_000;
/// At most 2^this windows between two symmetric phases.
const MAX_BACKOFF: u8 = 4;
/// How long the symmetric mode stays once it won, before a window measures
/// the inhibited rate again.
const EXPLORE_NS: u64 = 16_000_000;
/// The window that measures the inhibited mode where the symmetric one
/// won the last race (or none was run yet): short, as it is likely lost.
const PROBE_WINDOW_NS: u64 = 300_000;
/// A window judged over by a lock whose bias came back (or whose last
/// write was) sooner than this after its start (another lock of the class,
/// judged once the window ran out) says nothing.
const MIN_WINDOW_NS: u64 = 100_000;

/// What the next write unlock leaves, by the race.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// Keep the readers on their slots.
    Symmetric,
    /// Send the readers to the underlying lock for a window this long, ns.
    Inhibit(u64),
}

/// The race's state, one per reader table (see the module docs).
#[derive(Debug)]
pub(crate) struct ModeRace {
    phase: AtomicU8,
    /// When the current phase began, ns (the platform's clock).
    start_ns: AtomicU64,
    /// When the current window ends, ns (a window only): until then a
    /// symmetric revocation of another lock of the class joins it.
    end_ns: AtomicU64,
    /// The read count the current phase began at (slot plus slow reads in
    /// a symmetric phase, slow reads in a window; wrapping).
    start_reads: AtomicU32,
    /// The last window's reads per millisecond (0: none measured).
    inhibited_per_ms: AtomicU32,
    /// Windows still to run before the next symmetric phase.
    skip: AtomicU8,
    /// log2 of the windows between symmetric phases: grows while the
    /// inhibited mode keeps winning, back to 0 when it loses.
    backoff: AtomicU8,
    /// log2 of `EXPLORE_NS`s between windows: grows while the symmetric
    /// mode keeps winning, back to 0 when it loses.
    streak: AtomicU8,
    /// Races the symmetric mode lost in a row (saturating).
    losses: AtomicU8,
}

impl ModeRace {
    pub(crate) const fn new() -> Self {
        Self {
            phase: AtomicU8::new(IDLE),
            start_ns: AtomicU64::new(0),
            end_ns: AtomicU64::new(0),
            start_reads: AtomicU32::new(0),
            inhibited_per_ms: AtomicU32::new(0),
            skip: AtomicU8::new(0),
            backoff: AtomicU8::new(0),
            streak: AtomicU8::new(0),
            losses: AtomicU8::new(0),
        }
    }

    /// Judges a symmetric revocation at `now_ns` of a lock whose bias was
    /// on since `on_since_ns` (the window's end, after a window), with the
    /// class's slot reads `fast` and slow reads `slow` so far (wrapping
    /// totals: the slots in use plus the exited threads' counts, see
    /// `ReaderTable::retired_fast_reads`; a total that dipped counts as no
    /// reads, `count_since`).
    pub(crate) fn judge(&self, now_ns: u64, on_since_ns: u64, fast: u32, slow: u32) -> Verdict {
        let start = self.start_ns.load(Ordering::Relaxed);
        let since = self.start_reads.load(Ordering::Relaxed);
        let all = fast.wrapping_add(slow);
        match self.phase.load(Ordering::Relaxed) {
            WINDOW => {
                let end = self.end_ns.load(Ordering::Relaxed);
                // (Without a clock, `now_ns` 0, windows end by a count of
                // reads, not here.)
                if now_ns != 0 && now_ns < end {
                    // The window is still running: this is another lock of
                    // the class (the window's own lock is inhibited until
                    // its end). Join it, and leave it to be measured once
                    // it is over (ended here, by a lock whose bias never
                    // went, it was measured by no one).
                    return Verdict::Inhibit(end - now_ns);
                }
                let ns = on_since_ns.saturating_sub(start);
                if ns >= MIN_WINDOW_NS {
                    let rate = per_ms(count_since(slow, since), ns);
                    self.inhibited_per_ms.store(rate.max(1), Ordering::Relaxed);
                }
                let skip = self.skip.load(Ordering::Relaxed);
                if skip > 0 {
                    // The inhibited mode won the last races: another
                    // window before the next symmetric phase.
                    self.skip.store(skip - 1, Ordering::Relaxed);
                    return self.begin_window(now_ns, slow, TUNING.pc_dense_window_ns);
                }
                self.begin(SYMMETRIC, now_ns, all);
                Verdict::Symmetric
            }
            SYMMETRIC => {
                let ns = now_ns.saturating_sub(start);
                let inhibited = self.inhibited_per_ms.load(Ordering::Relaxed);
                if inhibited == 0 {
                    // Nothing to race yet: measure a (short) window.
                    if ns < SYM_PHASE_NS {
                        return Verdict::Symmetric;
                    }
                    return self.begin_window(now_ns, slow, PROBE_WINDOW_NS);
                } else if ns < SYM_PHASE_NS {
                    return Verdict::Symmetric;
                } else if per_ms(count_since(all, since), ns) >= inhibited {
                    // Symmetric won: no more races until a window measures
                    // the inhibited rate again. (One comparison per phase:
                    // a running average compared at every write would
                    // sooner or later dip below, by chance alone.)
                    self.backoff.store(0, Ordering::Relaxed);
                    self.losses.store(0, Ordering::Relaxed);
                    let won = self.streak.load(Ordering::Relaxed);
                    self.streak
                        .store((won + 1).min(MAX_BACKOFF), Ordering::Relaxed);
                    self.phase.store(SYMMETRIC_WON, Ordering::Relaxed);
                    return Verdict::Symmetric;
                } else {
                    // Inhibited won. The first loss after a win may be
                    // chance (a phase in which a preempted reader held up
                    // a revocation): race again after a short window.
                    // Lost twice in a row: more windows before each next
                    // race.
                    self.streak.store(0, Ordering::Relaxed);
                    let lost = self.losses.load(Ordering::Relaxed);
                    self.losses.store(lost.saturating_add(1), Ordering::Relaxed);
                    if lost == 0 {
                        return self.begin_window(now_ns, slow, PROBE_WINDOW_NS);
                    }
                    let b = (self.backoff.load(Ordering::Relaxed) + 1).min(MAX_BACKOFF);
                    self.backoff.store(b, Ordering::Relaxed);
                    self.skip.store((1 << b) - 1, Ordering::Relaxed);
                }
                self.begin_window(now_ns, slow, TUNING.pc_dense_window_ns)
            }
            SYMMETRIC_WON => {
                let won = self.streak.load(Ordering::Relaxed);
                if now_ns.saturating_sub(start) < EXPLORE_NS << won.saturating_sub(1) {
                    return Verdict::Symmetric;
                }
                // Time to measure the inhibited mode again: a short window
                // (the symmetric mode won the last race).
                self.begin_window(now_ns, slow, PROBE_WINDOW_NS)
            }
            _ => {
                self.begin(SYMMETRIC, now_ns, all);
                Verdict::Symmetric
            }
        }
    }

    /// Starts an inhibited window at `now_ns` that the race did not decide
    /// (too few reads per write for the symmetric mode to pay on any
    /// machine), with the class's slow reads `slow` so far: the next
    /// symmetric revocation measures it.
    pub(crate) fn window(&self, now_ns: u64, slow: u32) {
        let _ = self.begin_window(now_ns, slow, TUNING.pc_dense_window_ns);
    }

    /// Starts a window of `ns` at `now_ns` with the class's slow reads
    /// `slow` so far: the verdict that sends the readers there.
    fn begin_window(&self, now_ns: u64, slow: u32, ns: u64) -> Verdict {
        self.end_ns
            .store(now_ns.saturating_add(ns), Ordering::Relaxed);
        self.begin(WINDOW, now_ns, slow);
        Verdict::Inhibit(ns)
    }

    /// The last window's reads per millisecond (0: none measured; tests).
    #[cfg(test)]
    pub(crate) fn inhibited_per_ms(&self) -> u32 {
        self.inhibited_per_ms.load(Ordering::Relaxed)
    }

    fn begin(&self, phase: u8, now_ns: u64, reads: u32) {
        self.phase.store(phase, Ordering::Relaxed);
        self.start_ns.store(now_ns, Ordering::Relaxed);
        self.start_reads.store(reads, Ordering::Relaxed);
    }
}

/// `reads` in `ns` as reads per millisecond, saturated to `u32`.
fn per_ms(reads: u32, ns: u64) -> u32 {
    (u64::from(reads) * 1_000_000 / ns.max(1)).min(u64::from(u32::MAX)) as u32
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A class on a manual clock: its read counts, and what the race said.
    struct Class {
        race: ModeRace,
        now: u64,
        fast: u32,
        slow: u32,
    }

    impl Class {
        fn new() -> Self {
            Self {
                race: ModeRace::new(),
                now: 1_000_000,
                fast: 0,
                slow: 0,
            }
        }

        /// `ns` pass with `per_ms` slot reads (symmetric) or slow reads
        /// (inhibited) per millisecond.
        fn run(&mut self, ns: u64, per_ms: u64, slot_reads: bool) {
            let reads = (per_ms * ns / 1_000_000) as u32;
            if slot_reads {
                self.fast = self.fast.wrapping_add(reads);
            } else {
                self.slow = self.slow.wrapping_add(reads);
            }
            self.now += ns;
        }

        fn judge(&self, on_since: u64) -> Verdict {
            self.race.judge(self.now, on_since, self.fast, self.slow)
        }

        /// A symmetric stretch of `ns` at `per_ms`, judged at its end.
        fn symmetric(&mut self, ns: u64, per_ms: u64) -> Verdict {
            self.run(ns, per_ms, true);
            self.judge(self.now)
        }

        /// A window of `ns` at `per_ms`, then the first symmetric
        /// revocation right after the bias came back.
        fn window(&mut self, ns: u64, per_ms: u64) -> Verdict {
            self.run(ns, per_ms, false);
            let back = self.now;
            self.run(1_000, per_ms, true);
            self.judge(back)
        }
    }

    const DENSE: Verdict = Verdict::Inhibit(TUNING.pc_dense_window_ns);
    const PROBE: Verdict = Verdict::Inhibit(PROBE_WINDOW_NS);

    /// The first symmetric phase runs `SYM_PHASE_NS`, then a short window
    /// measures the inhibited mode.
    #[test]
    fn first_race_starts_with_a_short_window() {
        let mut c = Class::new();
        assert_eq!(c.symmetric(0, 0), Verdict::Symmetric, "the first phase");
        assert_eq!(c.symmetric(SYM_PHASE_NS / 2, 100_000), Verdict::Symmetric);
        assert_eq!(c.symmetric(SYM_PHASE_NS / 2, 100_000), PROBE);
        assert_eq!(c.race.inhibited_per_ms.load(Ordering::Relaxed), 0);
        assert_eq!(c.window(PROBE_WINDOW_NS, 80_000), Verdict::Symmetric);
        let measured = c.race.inhibited_per_ms.load(Ordering::Relaxed);
        assert!((79_000..=80_000).contains(&measured), "{measured}");
    }

    /// Where the symmetric mode reads faster, it stays until `EXPLORE_NS`,
    /// then a short window measures the inhibited mode again; each win in
    /// a row doubles the time to the next window.
    #[test]
    fn a_faster_symmetric_mode_stays_and_explores_less_and_less() {
        let mut c = Class::new();
        c.symmetric(0, 0);
        assert_eq!(c.symmetric(SYM_PHASE_NS, 200_000), PROBE);
        for won in 0..MAX_BACKOFF + 2 {
            assert_eq!(c.window(PROBE_WINDOW_NS, 100_000), Verdict::Symmetric);
            assert_eq!(
                c.symmetric(SYM_PHASE_NS, 200_000),
                Verdict::Symmetric,
                "won"
            );
            let stay = EXPLORE_NS << won.min(MAX_BACKOFF - 1);
            let step = stay / 8;
            let mut stayed = SYM_PHASE_NS;
            while stayed + step < stay {
                assert_eq!(c.symmetric(step, 200_000), Verdict::Symmetric);
                stayed += step;
            }
            assert_eq!(c.symmetric(stay - stayed, 200_000), PROBE, "win {won}");
        }
    }

    /// Where the inhibited mode reads faster: one lost race is raced again
    /// after a short window; from the second loss in a row, windows of
    /// `pc_dense_window_ns`, twice as many before each next race, up to
    /// 2^MAX_BACKOFF. A win ends the backoff.
    #[test]
    fn a_slower_symmetric_mode_races_less_and_less() {
        let mut c = Class::new();
        c.symmetric(0, 0);
        assert_eq!(c.symmetric(SYM_PHASE_NS, 100_000), PROBE);
        assert_eq!(c.window(PROBE_WINDOW_NS, 150_000), Verdict::Symmetric);
        assert_eq!(c.symmetric(SYM_PHASE_NS, 100_000), PROBE, "first loss");
        assert_eq!(c.window(PROBE_WINDOW_NS, 150_000), Verdict::Symmetric);
        for lost in 1..=MAX_BACKOFF + 1 {
            assert_eq!(c.symmetric(SYM_PHASE_NS, 100_000), DENSE, "loss {lost}");
            let windows = 1u32 << lost.min(MAX_BACKOFF);
            for _ in 1..windows {
                assert_eq!(c.window(TUNING.pc_dense_window_ns, 150_000), DENSE);
            }
            assert_eq!(
                c.window(TUNING.pc_dense_window_ns, 150_000),
                Verdict::Symmetric
            );
        }
        // A win: the next loss races again after one short window.
        assert_eq!(c.symmetric(SYM_PHASE_NS, 200_000), Verdict::Symmetric);
        assert_eq!(c.symmetric(EXPLORE_NS, 200_000), PROBE);
        assert_eq!(c.window(PROBE_WINDOW_NS, 150_000), Verdict::Symmetric);
        assert_eq!(c.symmetric(SYM_PHASE_NS, 100_000), PROBE);
    }

    /// A window judged over by a lock whose bias came back (or whose last
    /// write was) within `MIN_WINDOW_NS` of the window's start (another
    /// lock of the class) measures nothing; one started outside the race
    /// (`window`) is measured.
    #[test]
    fn short_windows_are_not_measured_and_undecided_ones_are() {
        let mut c = Class::new();
        c.symmetric(0, 0);
        assert_eq!(c.symmetric(SYM_PHASE_NS, 100_000), PROBE);
        let start = c.now;
        c.run(PROBE_WINDOW_NS, 150_000, false);
        assert_eq!(c.judge(start + MIN_WINDOW_NS / 2), Verdict::Symmetric);
        assert_eq!(c.race.inhibited_per_ms.load(Ordering::Relaxed), 0);
        c.race.window(c.now, c.slow);
        assert_eq!(
            c.window(TUNING.pc_dense_window_ns, 150_000),
            Verdict::Symmetric
        );
        let measured = c.race.inhibited_per_ms.load(Ordering::Relaxed);
        assert!((149_000..=150_000).contains(&measured), "{measured}");
    }

    /// Read counts wrap.
    #[test]
    fn counts_wrap() {
        let mut c = Class::new();
        c.fast = u32::MAX - 10;
        c.slow = u32::MAX - 10;
        c.symmetric(0, 0);
        assert_eq!(c.symmetric(SYM_PHASE_NS, 100_000), PROBE);
        assert_eq!(c.window(PROBE_WINDOW_NS, 150_000), Verdict::Symmetric);
        let measured = c.race.inhibited_per_ms.load(Ordering::Relaxed);
        assert!((149_000..=150_000).contains(&measured), "{measured}");
    }

    /// Two locks of one class, both symmetric and writing: a window the
    /// race gives one of them is measured once that lock's bias is back,
    /// though the other lock's symmetric writes met it meanwhile (they join
    /// it). Before, the other lock's first write in the window ended it
    /// unmeasured (and began a symmetric phase), so while another lock
    /// wrote in each window the race had no window's rate and ran one
    /// short window per phase.
    #[test]
    fn another_lock_s_write_does_not_end_a_window_unmeasured() {
        let mut c = Class::new();
        c.symmetric(0, 0);
        // Lock A's write ends the first phase: a short window for A.
        assert_eq!(c.symmetric(SYM_PHASE_NS, 100_000), PROBE);
        let window_start = c.now;
        // Lock B, whose last write was 10 µs before, writes 10 µs in.
        c.run(10_000, 100_000, false);
        let b_last = window_start - 10_000;
        let b = c.judge(b_last);
        // A's window runs out; its bias comes back; A's next write.
        assert_eq!(
            c.window(PROBE_WINDOW_NS - 10_000, 150_000),
            Verdict::Symmetric
        );
        let measured = c.race.inhibited_per_ms.load(Ordering::Relaxed);
        assert!((140_000..=150_000).contains(&measured), "{measured}");
        assert_eq!(b, Verdict::Inhibit(PROBE_WINDOW_NS - 10_000), "B joins");
    }
}
