//! Every waiting tunable of the crate, in one table.
//!
//! Native values were chosen by side-by-side measurement on a 2-vCPU VM
//! (`cargo bench -p scalelock --bench qspinlock`, `qrwlock`,
//! `percpu_rwlock`, `refresh`; 1 to 16 threads, with and without work
//! between critical sections); the benchmarks print what they give on your
//! machine. Relax counts assume `pause` takes tens of cycles (x86).
//!
//! Under loom every wait is a scheduling point and every bound multiplies
//! the state space, so the loom column keeps each budget at its smallest
//! value that still reaches every branch (the sleeping paths above all).

/// The waiting tunables; see [`TUNING`].
pub(crate) struct Tuning {
    // --- Backoff (all spinning waits) ---
    /// `Backoff` spins at most 2^this relaxes per step.
    pub backoff_spin_limit: u32,
    /// After this many steps and one more, each `Backoff` step also sleeps
    /// `backoff_sleep_ns` (the waited-for thread may need our CPU; a timed
    /// sleep, not a yield, which can hand the CPU to any task for a slice).
    pub backoff_sleep_after: u32,
    /// See `backoff_sleep_after`.
    pub backoff_sleep_ns: u64,
    /// A `yield_now` that took at least this long ran another thread
    /// (`SpinThenYield`); a bare `sched_yield` takes under a microsecond.
    pub yield_ran_ns: u64,

    // --- Bounded batches (qspinlock and qrwlock word waiters) ---
    /// How long the word waiter lets the running threads keep a queued
    /// lock before claiming it: long enough that a hand-off (a wake-up, a
    /// cache-line transfer, often a context switch) is amortised over many
    /// acquisitions when threads outnumber CPUs; short enough that a queue
    /// of 16 waiters is served within a few tens of milliseconds.
    pub batch_ns: u64,
    /// The same bound in polls, for platforms without a clock.
    pub batch_polls: u32,
    /// The shortest batch a qspinlock word waiter grants a holder that owes
    /// batch time (`wait::batch::BatchDebt`: its earlier batches ran long
    /// because their waiters woke late).
    pub batch_min_ns: u64,
    /// The most batch time a holder can owe: one long stall (a preempted
    /// waiter) is not repaid for ever.
    pub batch_debt_max_ns: u64,
    /// First quiet-poll interval of a word waiter, in relaxes; the interval
    /// doubles up to `quiet_max_relaxes`, after which each interval is a
    /// timed sleep of `quiet_sleep_ns`.
    pub quiet_min_relaxes: u32,
    /// Longest spun quiet-poll interval (each poll of the lock word costs
    /// the running holder a cache miss).
    pub quiet_max_relaxes: u32,
    /// First quiet-poll interval once spinning is done: a timed sleep (the
    /// lock's reserving release wakes the sleeper), so the CPU goes to
    /// threads with work to do; it doubles up to `quiet_max_sleep_ns`.
    pub quiet_sleep_ns: u64,
    /// Longest timed quiet-poll sleep.
    pub quiet_max_sleep_ns: u64,
    /// Relaxes between two polls of a word waiter that has claimed the lock
    /// (the holder's next release is its own).
    pub claimed_poll_relaxes: u32,
    /// A waiter takes a lock it sees free during a batch only if it is still
    /// free this many relaxes later: a running holder re-takes it sooner,
    /// and taking it then would end the batch early.
    pub settle_relaxes: u32,
    /// How long a word waiter that has claimed the lock keeps spinning while
    /// the holder does not release (the holder is preempted, or sleeps in
    /// its critical section) before it sleeps until a release and leaves the
    /// lock to running threads meanwhile (Linux pv's hybrid queued/unfair
    /// mode).
    pub park_ns: u64,
    /// The same bound in polls.
    pub park_polls: u32,

    // --- qspinlock ---
    /// Polls of a contender's optimistic spin before it queues.
    pub qs_pre_queue_polls: u32,
    /// The same, while a word waiter waits, for a contender whose last
    /// contended take of the lock was in this spin (the lock's holders let
    /// it go soon and leave it free for a while). Its waits past
    /// `qs_pre_queue_polls` are yields while yields run other threads, or
    /// else `Backoff` steps, soon timed sleeps (`backoff_sleep_ns`): it
    /// waits out a held lock outside the queue, whose sleepers come back
    /// one wake-up at a time.
    pub qs_pre_queue_polls_after_spin: u32,
    /// Relaxes a contender waits before it takes a lock it found free: a
    /// holder running a tight loop re-takes the lock within tens of
    /// nanoseconds (then the contender queues, and the holder's batch goes
    /// on), one that does other work between critical sections leaves it
    /// free for longer.
    pub qs_barge_settle_relaxes: u32,
    /// Of the waits between those polls, the first this many spin; the
    /// others yield while yields run other threads (`SpinThenYield`).
    pub qs_pre_queue_spins: u32,
    /// A lock reserved for the word waiter that it does not take within
    /// this long (it is not running) may be taken by a spinning contender;
    /// the contender's release reserves it again.
    pub qs_steal_ns: u64,
    /// The same bound in polls.
    pub qs_steal_polls: u32,
    /// A holder that keeps re-taking the lock while the word waiter has
    /// not claimed it yet reads the clock at most once in this many
    /// releases, and at least once in 64 times this many
    /// (`wait::batch::HolderStretch`; 0: never).
    pub qs_overrun_check_releases: u32,
    /// About how long apart those clock reads are, at the holder's pace.
    pub qs_overrun_check_ns: u64,
    /// A holder whose releases come less than this far apart runs a tight
    /// loop: after its overrun yield it queues at once
    /// (`wait::batch::Overran`).
    pub qs_overrun_tight_ns: u64,
    /// How long past `batch_ns` such a holder goes on before it yields its
    /// CPU once after a release (and then again each time this long
    /// passes): the word waiter's wake-up is most likely queued behind it
    /// on its CPU (a timed sleep ends 50-200 µs late when the waiter's CPU
    /// is free).
    pub qs_overrun_yield_ns: u64,
    /// How long a word waiter lets a holder run once the lock has a turn
    /// quota (`wait::quota`): the holder hands the lock over when it made
    /// the quota, so this only bounds a slow turn, which gets this much
    /// time to make it (`batch_ns` while the lock has none).
    pub qs_turn_bound_ns: u64,
    /// A turn's pace moves the lock's quota by 2^-this of the difference.
    pub qs_quota_shift: u32,
    /// Polls (of `claimed_poll_relaxes` relaxes) a word waiter watches the
    /// lock after a kick (a contender took a free lock that stayed free
    /// while the word waiter slept through its batch), to take it early if
    /// it stays free for `qs_kick_free_ns`: threads that work between
    /// critical sections leave room for more of them, so the queue comes
    /// back faster than one thread per batch.
    pub qs_kick_watch_polls: u32,
    /// How long a lock must stay free for a kicked word waiter to take it
    /// before its batch ends: a holder in a tight loop re-takes it sooner.
    pub qs_kick_free_ns: u64,
    /// The same bound in polls (of `qs_barge_settle_relaxes` relaxes).
    pub qs_kick_free_polls: u32,
    /// Free gaps a word waiter measures before it decides whether to grab
    /// the lock when it is free (`GapWatch`); 0: it never does.
    pub qs_gap_count: u32,
    /// The shortest of those gaps must last this long: a holder in a tight
    /// loop re-takes the lock sooner (a cache-line transfer or two, even
    /// while the waiter's loads take its line).
    pub qs_gap_min_ns: u64,
    /// How long the waiter measures at most (a holder with long critical
    /// sections leaves few gaps; it sleeps then).
    pub qs_gap_observe_ns: u64,
    /// The same bound in polls (of one relax).
    pub qs_gap_observe_polls: u32,
    /// The waiter stops measuring (and sleeps through the batch) once the
    /// lock stays held this long at a stretch: several times the critical
    /// sections the watch is for.
    pub qs_gap_held_max_ns: u64,
    /// Relaxes between two polls of a waiter that grabs the lock when free.
    pub qs_gap_grab_relaxes: u32,
    /// Relaxes a queued waiter spins on its own node before sleeping on it.
    pub qs_node_spins: u32,
    /// `Backoff` steps a queue head without a predecessor polls for the word
    /// waiter to leave before sleeping until it does.
    pub qs_head_steps: u32,
    /// `Backoff` steps a waiter without a queue node polls before sleeping
    /// until a release.
    pub qs_unqueued_steps: u32,
    /// `Backoff` steps `wait_unlocked` watches the holder before it takes
    /// the lock itself (which bounds its wait under saturation).
    pub qs_barrier_steps: u32,

    // --- qrwlock ---
    /// `Backoff` steps the word waiter spins before sleeping on the count
    /// word (at most `backoff_sleep_after + 1`: it has a precise wake-up,
    /// so it never needs `Backoff`'s timed sleeps).
    pub qrw_spin_steps: u32,
    /// `Backoff` steps (never yielding) a contended acquirer spins on loads
    /// of the count word before queueing.
    pub qrw_optimistic_steps: u32,
    /// How long a turn lasts at most (`qrwlock`'s `TURN`): its holder
    /// leaves it to a waiting thread at its first write after this long,
    /// even if that waiter has not come to claim it (a waiter woken onto
    /// the holder's busy CPU can wait a scheduler tick).
    pub qrw_turn_ns: u64,
    /// A turn's holder reads the clock first at this write of its turn,
    /// and then at least this many writes apart (or, without a clock, this
    /// many apart, and leaves after `batch_polls` such reads); see
    /// `wait::batch::next_clock_read`.
    pub qrw_turn_clock_writes: u32,
    /// ... and at most this many writes apart, however fast its writes go.
    pub qrw_turn_max_clock_writes: u32,

    // --- percpu_rwlock ---
    /// `Backoff` steps a writer spins on a reader's slot before parking.
    pub pc_writer_steps: u32,
    /// A slow reader reads the clock (is the bias inhibition over?) on one
    /// slow read in this many of its thread.
    pub pc_clock_every: u32,
    /// Two asymmetric revocations in a row whose heavy fence took at least
    /// this long (the membarrier interrupted other CPUs running readers)
    /// switch the lock to the symmetric mode, unless the writes are sparse
    /// (`pc_keep_factor`): then the bias stays, however dear its fence.
    pub pc_sym_cost_ns: u64,
    /// One symmetric revocation in this many tries the biased mode again,
    /// to measure the heavy fence anew (so one dear spell does not make the
    /// symmetric mode stick while writes keep coming), once the class's
    /// last heavy fence began `pc_probe_fences` times its cost ago.
    pub pc_sym_probe: u32,
    /// The symmetric mode's probe (`pc_sym_probe`) waits until the class's
    /// last heavy fence began at least this many times its cost ago, so
    /// that the probes' `membarrier`s, each costing the writer and every
    /// CPU it interrupts about as long, take at most about 2/n of the
    /// time. By count alone, dense writes (one per few hundred ns at 95%
    /// reads) probed every few tens of microseconds, each probe a fence of
    /// several microseconds where other CPUs run the readers.
    pub pc_probe_fences: u64,
    /// The longest the probe (`pc_probe_fences`) waits after a heavy
    /// fence, however long that fence took: one fence stretched by a
    /// suspended VM or a stopped process (seconds) would otherwise hold off
    /// every probe for `pc_probe_fences` times as long (minutes), keeping
    /// the lock symmetric long after writes thinned out.
    pub pc_probe_wait_max_ns: u64,
    /// A revocation after the bias was on for at least this many
    /// revocation costs brings the bias back at unlock, with no inhibition
    /// window: revoking at writes this sparse costs at most this fraction
    /// (1/n) of the time, while a read on the underlying lock costs about
    /// twice a biased one even with no other reader (an RMW and its
    /// release against a store and a load). At 8, one thread writing every
    /// 1000th op lost the bias at each write, because the biased reads
    /// between two writes took a few microseconds, under 8 revocations.
    pub pc_keep_factor: u64,
    /// What one read on a slot (biased or symmetric) saves against a read
    /// on the underlying lock (two atomic read-modify-writes of a shared
    /// word against a store and two loads of the reader's own line), ns: a
    /// revocation that the slot reads since the class's last one paid for
    /// at this rate keeps the readers on their slots. Low for a fast CPU
    /// with no other reader, where the saving is least; with readers on
    /// other CPUs the underlying word bounces and a read there costs far
    /// more (`pc_read_saving_shared_ns`).
    pub pc_read_saving_ns: u64,
    /// `pc_read_saving_ns` once more than one thread has a reader slot
    /// (the writer's scan counts them): reads on the underlying lock then
    /// move its word's cache line between CPUs, where slot reads stay on
    /// their own lines.
    pub pc_read_saving_shared_ns: u64,
    /// A biased revocation goes symmetric (among other rules) when the
    /// slot reads per write (the class's average) number at least
    /// `pc_sym_min_reads` and, at `pc_read_saving_ns` each, save at least
    /// `pc_sym_pay_factor` times what the revocation cost without its
    /// heavy fence. Whether the lock then stays symmetric the mode race
    /// measures (`percpu_rwlock/mode_race.rs`).
    pub pc_sym_pay_factor: u64,
    /// Fewer slot reads per write than this (the class's average) never
    /// pay for revoking at each: a symmetric lock inhibits the bias for
    /// `pc_dense_window_ns` without racing the modes, and a biased one
    /// does not go symmetric by `pc_sym_pay_factor`. Writes at random
    /// times make the count of reads between two writes vary widely
    /// (geometrically), and the class's average with them: with a
    /// threshold near the mean, one
    /// dip below it in a few hundred revocations inhibited the bias for a
    /// whole `pc_dense_window_ns`. At 48, random writes at 99% reads kept
    /// the readers on the underlying lock well over half the time. On 2
    /// CPUs, 1-16 threads, 8 against 48 gained up to 1.9x at 97-99% reads
    /// and lost nothing measurable at 50-95% (docs/measurements.md has the
    /// figures).
    pub pc_sym_min_reads: u64,
    /// A revocation within this many revocation costs of the bias coming
    /// back doubles the class's inhibition multiplier.
    pub pc_wasted_factor: u64,
    /// How long symmetric writes with too few reads between them
    /// (`pc_sym_min_reads`), or a symmetric phase that lost the mode race
    /// twice in a row, inhibit the bias.
    pub pc_dense_window_ns: u64,
    /// Two symmetric writes in a row further apart than this (each from
    /// the write before it), or than `pc_keep_factor` times the class's
    /// heavy fence (the cheaper of its last two) if that is less, bring
    /// the biased mode back. Two, not one: writes at random times leave a
    /// gap of several times their mean gap every few dozen writes.
    pub pc_rare_ns: u64,
    /// A write that leaves the bias on (biased or symmetric) while the
    /// class averages at least this many slot reads per write, and while a
    /// thread queues behind the underlying lock's waiter, releases that
    /// lock fairly: the waiter gets it next (see `percpu_rwlock`, "Writes
    /// end the underlying lock's batches"). On 2 CPUs the hand-off gained
    /// 1.1-1.3x at 4-16 threads and 99.9% reads (about 1,000 reads per
    /// write). At every write that leaves the bias on it was even at 99%
    /// (100) and lost 3-6% at 50-95% reads; without the queue condition,
    /// about 10% at 2 threads and 99.9% (docs/measurements.md has the
    /// figures).
    pub pc_handoff_reads: u64,

    // --- refresh ---
    /// Relaxes between two polls of a `RefreshOnce` state (doubling up to
    /// 16x).
    pub rf_poll_relaxes: u32,
    /// How long a non-head polls before sleeping on its gate.
    pub rf_spin_ns: u64,
    /// How long the head polls before sleeping on the state.
    pub rf_head_spin_ns: u64,
    /// Poll budget of a non-head.
    pub rf_spin_polls: u32,
    /// Polls the head grants the callers just served to start its target.
    pub rf_head_grace_polls: u32,
    /// The head grants that grace only after polling this long.
    pub rf_grace_min_polls: u32,
    /// Poll budget of the head.
    pub rf_head_spin_polls: u32,
}

/// Native values.
const NATIVE: Tuning = Tuning {
    backoff_spin_limit: 6,
    backoff_sleep_after: 10,
    backoff_sleep_ns: 20_000,
    yield_ran_ns: 5_000,

    batch_ns: 1_000_000,
    batch_polls: 1 << 12,
    batch_min_ns: 250_000,
    batch_debt_max_ns: 4_000_000,
    quiet_min_relaxes: 64,
    quiet_max_relaxes: 128,
    quiet_sleep_ns: 1_000_000,
    quiet_max_sleep_ns: 4_000_000,
    claimed_poll_relaxes: 64,
    settle_relaxes: 64,
    park_ns: 5_000,
    park_polls: 1 << 12,

    qs_pre_queue_polls: 10,
    qs_pre_queue_polls_after_spin: 20,
    qs_barge_settle_relaxes: 8,
    qs_pre_queue_spins: 3,
    qs_steal_ns: 20_000,
    qs_steal_polls: 1 << 10,
    qs_overrun_check_releases: 64,
    qs_overrun_check_ns: 50_000,
    qs_overrun_tight_ns: 100,
    qs_overrun_yield_ns: 150_000,
    qs_turn_bound_ns: 1_500_000,
    qs_quota_shift: 2,
    qs_kick_watch_polls: 32,
    qs_kick_free_ns: 1_000,
    qs_kick_free_polls: 64,
    qs_gap_count: 3,
    qs_gap_min_ns: 300,
    qs_gap_observe_ns: 20_000,
    qs_gap_observe_polls: 1 << 12,
    qs_gap_held_max_ns: 4_000,
    qs_gap_grab_relaxes: 8,
    qs_node_spins: 256,
    qs_head_steps: 11,
    qs_unqueued_steps: 11,
    qs_barrier_steps: 11,

    qrw_spin_steps: 11,
    qrw_optimistic_steps: 4,
    qrw_turn_ns: 1_000_000,
    qrw_turn_clock_writes: 64,
    qrw_turn_max_clock_writes: 1024,

    pc_writer_steps: 11,
    pc_clock_every: 256,
    pc_sym_cost_ns: 2_000,
    pc_sym_probe: 64,
    pc_probe_fences: 256,
    pc_probe_wait_max_ns: 1_000_000_000,
    pc_keep_factor: 4,
    pc_read_saving_ns: 10,
    pc_read_saving_shared_ns: 30,
    pc_sym_pay_factor: 2,
    pc_sym_min_reads: 8,
    pc_wasted_factor: 4,
    pc_dense_window_ns: 1_000_000,
    pc_rare_ns: 500_000,
    pc_handoff_reads: 256,

    rf_poll_relaxes: 4,
    rf_spin_ns: 1_500,
    rf_head_spin_ns: 4_000,
    rf_spin_polls: 32,
    rf_head_grace_polls: 32,
    rf_grace_min_polls: 16,
    rf_head_spin_polls: 64,
};

/// Loom values: the smallest budgets that still reach every branch.
const LOOM: Tuning = Tuning {
    backoff_spin_limit: 0,
    backoff_sleep_after: 1,
    backoff_sleep_ns: 0,
    yield_ran_ns: 5_000,

    batch_ns: 1_000_000,
    batch_polls: 3,
    batch_min_ns: 250_000,
    batch_debt_max_ns: 4_000_000,
    quiet_min_relaxes: 1,
    quiet_max_relaxes: 1,
    quiet_sleep_ns: 0,
    quiet_max_sleep_ns: 0,
    claimed_poll_relaxes: 1,
    settle_relaxes: 1,
    park_ns: 100_000,
    park_polls: 2,

    qs_pre_queue_polls: 1,
    qs_pre_queue_polls_after_spin: 2,
    qs_barge_settle_relaxes: 1,
    qs_pre_queue_spins: 1,
    qs_steal_ns: 20_000,
    qs_steal_polls: 2,
    // Off: the yield after a release is a plain release to the models.
    qs_overrun_check_releases: 0,
    qs_overrun_check_ns: 50_000,
    qs_overrun_tight_ns: 100,
    qs_overrun_yield_ns: 150_000,
    qs_turn_bound_ns: 1_500_000,
    qs_quota_shift: 2,
    qs_kick_watch_polls: 1,
    qs_kick_free_ns: 1_000,
    qs_kick_free_polls: 1,
    // Off: the grab is the kicked watch's take (`try_lock_fast` by the
    // word waiter during its batch), which the models reach.
    qs_gap_count: 0,
    qs_gap_min_ns: 300,
    qs_gap_observe_ns: 20_000,
    qs_gap_observe_polls: 1,
    qs_gap_held_max_ns: 4_000,
    qs_gap_grab_relaxes: 1,
    qs_node_spins: 1,
    qs_head_steps: 2,
    qs_unqueued_steps: 2,
    qs_barrier_steps: 1,

    qrw_spin_steps: 2,
    qrw_optimistic_steps: 1,
    qrw_turn_ns: 1_000_000,
    // Every other write reads the stepped clock; the others take the turn
    // holder's inline path (`try_lock_in_turn`), which the models reach.
    qrw_turn_clock_writes: 2,
    qrw_turn_max_clock_writes: 2,

    // No spinning: the models reach the parking path.
    pc_writer_steps: 0,
    pc_clock_every: 1,
    pc_sym_cost_ns: 2_000,
    // Every symmetric revocation is timed (models have no real clock).
    // Every other symmetric revocation probes: models reach the switch.
    pc_sym_probe: 2,
    // No wait: models have no real fence cost.
    pc_probe_fences: 0,
    pc_probe_wait_max_ns: 0,
    pc_keep_factor: 8,
    // Off: the models decide by the stepped times alone.
    pc_read_saving_ns: 0,
    pc_read_saving_shared_ns: 0,
    pc_sym_pay_factor: 2,
    pc_sym_min_reads: 48,
    pc_wasted_factor: 4,
    pc_dense_window_ns: 1_000_000,
    pc_rare_ns: 500_000,
    // Any read: in the models a write after one read may hand off.
    pc_handoff_reads: 1,

    rf_poll_relaxes: 4,
    rf_spin_ns: 1_500,
    rf_head_spin_ns: 4_000,
    // Zero: the models sleep.
    rf_spin_polls: 0,
    rf_head_grace_polls: 1,
    rf_grace_min_polls: 0,
    rf_head_spin_polls: 0,
};

/// The table in force: [`NATIVE`] normally, [`LOOM`] under `cfg(loom)` and
/// `cfg(shuttle)` (model checkers: short budgets, so that schedules reach
/// the sleeping paths).
pub(crate) const TUNING: Tuning = if cfg!(any(loom, shuttle)) {
    LOOM
} else {
    NATIVE
};
