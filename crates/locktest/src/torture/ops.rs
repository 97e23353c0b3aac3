//! The torture's operation mix: what a writer or reader thread does each
//! time round, chosen from what the lock can do ([`Caps`]), and the checks
//! each operation makes.
//!
//! Writers: lock, try-lock, fair unlock, timed try, write-bump-write,
//! write-then-downgrade, upgradable-read-then-upgrade,
//! upgradable-read-then-try-upgrade, upgradable-read-then-timed-upgrade;
//! readers: the read side of the first five, and a try and a timed try of
//! an upgradable read. A plain lock is four times as
//! likely as each other operation. The downgrade and the upgrades also
//! check their promise: no writer gets in between (the counter a writer
//! leaves is the one the downgraded reader sees; the one an upgradable
//! reader saw is the one it finds upgraded, or, when a try or timed
//! upgrade fails, the one it still sees).
//!
//! With `--nested N`, each operation is wrapped in a random subset of N
//! more locks of the same type, always taken in index order, each checked
//! like the main lock.

use std::cell::RefCell;
use std::time::Duration;

use serde::Serialize;

use super::checks::{Check, Guarded, TortureData};
use crate::lockable::{Caps, Lockable};
use crate::rng::Rng;

/// One operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Op {
    /// Write lock, write section, unlock.
    Write,
    /// Try the write lock once.
    TryWrite,
    /// Write lock, unlock fairly (to a waiter).
    WriteFair,
    /// Try the write lock for up to [`TIMEOUT`].
    TimedWrite,
    /// Write section, bump (a fair release and re-acquisition), write
    /// section.
    WriteBump,
    /// Write section, downgrade, read section.
    Downgrade,
    /// Upgradable read section, upgrade, write section.
    Upgrade,
    /// Upgradable read section, try once to upgrade, write section (or,
    /// failed, read section again).
    TryUpgrade,
    /// Upgradable read section, try to upgrade for up to [`TIMEOUT`],
    /// write section (or, timed out, read section again).
    TimedUpgrade,
    /// Read lock, read section, unlock.
    Read,
    /// Try the read lock once.
    TryRead,
    /// Read lock, unlock fairly.
    ReadFair,
    /// Try the read lock for up to [`TIMEOUT`].
    TimedRead,
    /// Read section, bump, read section.
    ReadBump,
    /// Try an upgradable read once, read section.
    TryUpgradable,
    /// Try an upgradable read for up to [`TIMEOUT`], read section.
    TimedUpgradable,
}

/// Every operation, in the order counts are kept.
pub const OPS: [Op; 16] = [
    Op::Write,
    Op::TryWrite,
    Op::WriteFair,
    Op::TimedWrite,
    Op::WriteBump,
    Op::Downgrade,
    Op::Upgrade,
    Op::TryUpgrade,
    Op::TimedUpgrade,
    Op::Read,
    Op::TryRead,
    Op::ReadFair,
    Op::TimedRead,
    Op::ReadBump,
    Op::TryUpgradable,
    Op::TimedUpgradable,
];

/// How long a timed try waits.
pub const TIMEOUT: Duration = Duration::from_millis(1);

impl Op {
    /// Position in [`OPS`].
    pub fn index(self) -> usize {
        OPS.iter().position(|&o| o == self).unwrap_or(0)
    }

    /// `write`, `try-write`...: the name in JSON and the start line.
    pub fn name(self) -> &'static str {
        match self {
            Op::Write => "write",
            Op::TryWrite => "try-write",
            Op::WriteFair => "write-fair",
            Op::TimedWrite => "timed-write",
            Op::WriteBump => "write-bump",
            Op::Downgrade => "downgrade",
            Op::Upgrade => "upgrade",
            Op::TryUpgrade => "try-upgrade",
            Op::TimedUpgrade => "timed-upgrade",
            Op::Read => "read",
            Op::TryRead => "try-read",
            Op::ReadFair => "read-fair",
            Op::TimedRead => "timed-read",
            Op::ReadBump => "read-bump",
            Op::TryUpgradable => "try-upgradable",
            Op::TimedUpgradable => "timed-upgradable",
        }
    }

    /// Whether it takes the lock exclusively (nested locks follow).
    pub fn writes(self) -> bool {
        matches!(
            self,
            Op::Write
                | Op::TryWrite
                | Op::WriteFair
                | Op::TimedWrite
                | Op::WriteBump
                | Op::Downgrade
                | Op::Upgrade
                | Op::TryUpgrade
                | Op::TimedUpgrade
        )
    }
}

/// The operations a thread of a role picks from, with weights.
pub fn mix(caps: Caps, writer: bool) -> Vec<(Op, u32)> {
    let optional = if writer {
        [
            (Op::WriteFair, Caps::FAIR),
            (Op::TimedWrite, Caps::TIMED),
            (Op::WriteBump, Caps::FAIR),
            (Op::Downgrade, Caps::DOWNGRADE),
            (Op::Upgrade, Caps::UPGRADE),
            (Op::TryUpgrade, Caps::UPGRADE),
            (Op::TimedUpgrade, Caps::TIMED_UPGRADE),
        ]
        .as_slice()
    } else {
        [
            (Op::ReadFair, Caps::FAIR),
            (Op::TimedRead, Caps::TIMED),
            (Op::ReadBump, Caps::FAIR),
            (Op::TryUpgradable, Caps::UPGRADE),
            (Op::TimedUpgradable, Caps::TIMED_UPGRADE),
        ]
        .as_slice()
    };
    let (plain, attempt) = if writer {
        (Op::Write, Op::TryWrite)
    } else {
        (Op::Read, Op::TryRead)
    };
    let mut out = vec![(plain, 4), (attempt, 1)];
    out.extend(
        optional
            .iter()
            .filter(|(_, c)| caps.has(*c))
            .map(|(op, _)| (*op, 1)),
    );
    out
}

/// Picks one operation from a weighted mix.
pub fn pick(mix: &[(Op, u32)], rng: &mut Rng) -> Op {
    let total: u32 = mix.iter().map(|m| m.1).sum();
    let mut roll = rng.below(total);
    for &(op, w) in mix {
        if roll < w {
            return op;
        }
        roll -= w;
    }
    mix[0].0
}

/// How an operation went.
#[derive(Debug, PartialEq, Eq)]
pub enum Done {
    /// It ran and every check passed.
    Ok,
    /// A try did not get the lock (not a failure).
    Missed,
    /// A check failed.
    Failed(String),
}

impl From<Check> for Done {
    fn from(c: Check) -> Self {
        match c {
            Ok(()) => Done::Ok,
            Err(e) => Done::Failed(e),
        }
    }
}

/// What one thread carries from operation to operation.
pub struct Actor {
    /// Its id in the data (`owner`), from 1.
    pub me: u64,
    /// Its generator.
    pub rng: Rng,
    /// A section holds the lock for `long_hold` one time in this many
    /// (0: never).
    pub long_every: u64,
    /// How long a long hold sleeps.
    pub long_hold: Duration,
    /// Writes it made on each lock: `[0]` the main lock, then the nested ones.
    pub writes_on: Vec<u64>,
}

impl Actor {
    /// The delay inside a critical section: now and then a long hold
    /// (locktorture's long delay), otherwise a yield one time in 64 or a
    /// 10-80 µs sleep one time in 1024.
    fn delay(&mut self) {
        if self.long_every > 0 && self.rng.one_in(self.long_every) {
            std::thread::sleep(self.long_hold);
            return;
        }
        let r = self.rng.next();
        if r.is_multiple_of(1024) {
            std::thread::sleep(Duration::from_micros(10 + (r >> 32) % 70));
        } else if r % 64 == 1 {
            std::thread::yield_now();
        }
    }
}

/// The write section on lock `g` (`index` in `writes_on`).
fn write_body<L: Lockable<TortureData>>(
    g: &Guarded<L>,
    index: usize,
    d: &mut TortureData,
    a: &mut Actor,
) -> Check {
    let entered = g.writer_in(a.me).and(d.write_enter(a.me));
    a.writes_on[index] += 1;
    a.delay();
    let left = d.write_leave(a.me);
    g.writer_out();
    entered.and(left)
}

/// The read section on lock `g`; returns the counter it saw.
fn read_body<L: Lockable<TortureData>>(
    g: &Guarded<L>,
    d: &TortureData,
    a: &mut Actor,
) -> Result<u64, String> {
    let entered = g.reader_in(a.me);
    let seen = d.read_check(a.me, || a.delay());
    g.reader_out();
    entered.and(seen)
}

/// An upgradable read section on lock `g`: a read section that also
/// finds no other upgradable reader inside.
fn upgradable_body<L: Lockable<TortureData>>(
    g: &Guarded<L>,
    d: &TortureData,
    a: &mut Actor,
) -> Result<u64, String> {
    let entered = g.upgradable_in(a.me);
    let seen = read_body(g, d, a);
    g.upgradable_out();
    entered.and(seen)
}

/// Runs `op` on `main`, inside a random subset of `nested` taken in order.
pub fn perform<L: Lockable<TortureData>>(
    main: &Guarded<L>,
    nested: &[Guarded<L>],
    op: Op,
    a: &mut Actor,
) -> Done {
    if nested.is_empty() {
        return on_main(main, op, a);
    }
    let mask = a.rng.below(1 << nested.len());
    around(nested, 1, mask, op.writes(), a, &mut |a| {
        on_main(main, op, a)
    })
}

/// Takes `locks[0]` if `mask` says so (checking it like the main lock),
/// then the rest, then runs `inner`.
fn around<L: Lockable<TortureData>>(
    locks: &[Guarded<L>],
    index: usize,
    mask: u32,
    write: bool,
    a: &mut Actor,
    inner: &mut dyn FnMut(&mut Actor) -> Done,
) -> Done {
    let Some((g, rest)) = locks.split_first() else {
        return inner(a);
    };
    if mask & 1 == 0 {
        return around(rest, index + 1, mask >> 1, write, a, inner);
    }
    let (mine, done) = if write {
        g.lock.with_write(|d| {
            let entered = g.writer_in(a.me).and(d.write_enter(a.me));
            a.writes_on[index] += 1;
            let done = around(rest, index + 1, mask >> 1, write, a, inner);
            let left = d.write_leave(a.me);
            g.writer_out();
            (entered.and(left), done)
        })
    } else {
        g.lock.with_read(|d| {
            let entered = g.reader_in(a.me).and(d.read_check(a.me, || ()).map(drop));
            let done = around(rest, index + 1, mask >> 1, write, a, inner);
            let again = d.read_check(a.me, || ()).map(drop);
            g.reader_out();
            (entered.and(again), done)
        })
    };
    match (mine, done) {
        (Err(e), _) => Done::Failed(e),
        (Ok(()), done) => done,
    }
}

/// `op` on the main lock.
fn on_main<L: Lockable<TortureData>>(g: &Guarded<L>, op: Op, a: &mut Actor) -> Done {
    let l = &g.lock;
    match op {
        Op::Write => l.with_write(|d| write_body(g, 0, d, a)).into(),
        Op::WriteFair => l.with_write_fair(|d| write_body(g, 0, d, a)).into(),
        Op::TryWrite => l
            .try_with_write(|d| write_body(g, 0, d, a))
            .map_or(Done::Missed, Done::from),
        Op::TimedWrite => l
            .try_with_write_for(TIMEOUT, |d| write_body(g, 0, d, a))
            .map_or(Done::Missed, Done::from),
        Op::WriteBump => {
            // Each section checks itself: a waiter may go in between.
            let a = RefCell::new(a);
            let mut first = Ok(());
            let second = l.with_write_bump(
                |d| first = write_body(g, 0, d, &mut a.borrow_mut()),
                |d| write_body(g, 0, d, &mut a.borrow_mut()),
            );
            first.and(second).into()
        }
        Op::ReadBump => {
            let a = RefCell::new(a);
            let mut first = Ok(0);
            let second = l.with_read_bump(
                |d| first = read_body(g, d, &mut a.borrow_mut()),
                |d| read_body(g, d, &mut a.borrow_mut()),
            );
            first.and(second).map(drop).into()
        }
        Op::TryUpgradable => l
            .try_with_upgradable(|d| upgradable_body(g, d, a).map(drop))
            .map_or(Done::Missed, Done::from),
        Op::TimedUpgradable => l
            .try_with_upgradable_for(TIMEOUT, |d| upgradable_body(g, d, a).map(drop))
            .map_or(Done::Missed, Done::from),
        Op::Read => l.with_read(|d| read_body(g, d, a)).map(drop).into(),
        Op::ReadFair => l.with_read_fair(|d| read_body(g, d, a)).map(drop).into(),
        Op::TryRead => l
            .try_with_read(|d| read_body(g, d, a).map(drop))
            .map_or(Done::Missed, Done::from),
        Op::TimedRead => l
            .try_with_read_for(TIMEOUT, |d| read_body(g, d, a).map(drop))
            .map_or(Done::Missed, Done::from),
        Op::Downgrade => {
            // Both closures need the actor, one after the other.
            let a = RefCell::new(a);
            let mut wrote = (Ok(()), 0);
            let read = l.with_write_then_read(
                |d| wrote = (write_body(g, 0, d, &mut a.borrow_mut()), d.counter()),
                |d| read_body(g, d, &mut a.borrow_mut()),
            );
            let (check, left) = wrote;
            check
                .and(read)
                .and_then(|seen| match seen == left {
                    true => Ok(()),
                    false => Err(format!(
                        "downgrade: a writer got in between (counter {left} left, {seen} seen)"
                    )),
                })
                .into()
        }
        Op::Upgrade => {
            let a = RefCell::new(a);
            l.with_upgradable_then_write(
                |d| upgradable_body(g, d, &mut a.borrow_mut()),
                |seen, d| {
                    let now = d.counter();
                    let wrote = write_body(g, 0, d, &mut a.borrow_mut());
                    seen.and_then(|seen| match seen == now {
                        true => Ok(()),
                        false => Err(format!(
                            "upgrade: a writer got in between (counter {seen} seen, {now} found)"
                        )),
                    })
                    .and(wrote)
                },
            )
            .into()
        }
        Op::TryUpgrade => {
            let a = RefCell::new(a);
            l.with_upgradable_then_try_write(
                |d| upgradable_body(g, d, &mut a.borrow_mut()),
                |seen, d| upgraded(g, "try upgrade", seen, d, &mut a.borrow_mut()),
                |seen, d| not_upgraded(g, "try upgrade failed", seen, d, &mut a.borrow_mut()),
            )
        }
        Op::TimedUpgrade => {
            let a = RefCell::new(a);
            l.with_upgradable_then_write_for(
                TIMEOUT,
                |d| upgradable_body(g, d, &mut a.borrow_mut()),
                |seen, d| upgraded(g, "timed upgrade", seen, d, &mut a.borrow_mut()),
                |seen, d| not_upgraded(g, "timed upgrade timed out", seen, d, &mut a.borrow_mut()),
            )
        }
    }
}

/// After a try or timed upgrade succeeded: the write section, and no
/// writer got in since the upgradable read saw `seen`.
fn upgraded<L: Lockable<TortureData>>(
    g: &Guarded<L>,
    what: &str,
    seen: Result<u64, String>,
    d: &mut TortureData,
    a: &mut Actor,
) -> Done {
    let now = d.counter();
    let wrote = write_body(g, 0, d, a);
    seen.and_then(|seen| match seen == now {
        true => Ok(()),
        false => Err(format!(
            "{what}: a writer got in between (counter {seen} seen, {now} found)"
        )),
    })
    .and(wrote)
    .into()
}

/// After a try or timed upgrade failed: still an upgradable read, which no
/// writer may get past; held a while, so one that can has the time to.
fn not_upgraded<L: Lockable<TortureData>>(
    g: &Guarded<L>,
    what: &str,
    seen: Result<u64, String>,
    d: &TortureData,
    a: &mut Actor,
) -> Done {
    std::thread::sleep(TIMEOUT);
    match (seen, upgradable_body(g, d, a)) {
        (Ok(seen), Ok(now)) if seen == now => Done::Missed,
        (Ok(seen), Ok(now)) => Done::Failed(format!(
            "{what}, and a writer got in under the upgradable read (counter {seen} seen, \
             {now} found)"
        )),
        (Err(e), _) | (_, Err(e)) => Done::Failed(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::busted::{Busted, Racy};
    use crate::lockable::Kind;

    fn actor(locks: usize) -> Actor {
        Actor {
            me: 1,
            rng: Rng::new(1),
            long_every: 0,
            long_hold: Duration::ZERO,
            writes_on: vec![0; locks],
        }
    }

    #[test]
    fn the_mix_follows_the_capabilities() {
        let names = |m: Vec<(Op, u32)>| m.iter().map(|o| o.0.name()).collect::<Vec<_>>();
        assert_eq!(names(mix(Caps::NONE, true)), ["write", "try-write"]);
        assert_eq!(
            names(mix(<parking_lot::RwLock<()> as Lockable<()>>::CAPS, true)),
            [
                "write",
                "try-write",
                "write-fair",
                "timed-write",
                "write-bump",
                "downgrade",
                "upgrade",
                "try-upgrade",
                "timed-upgrade"
            ]
        );
        assert_eq!(
            names(mix(Caps::FAIR.with(Caps::TIMED), false)),
            ["read", "try-read", "read-fair", "timed-read", "read-bump"]
        );
        let mut rng = Rng::new(3);
        let m = mix(Caps::FAIR, true);
        let writes = (0..6000)
            .filter(|_| pick(&m, &mut rng) == Op::Write)
            .count();
        // Write, try-write, write-fair, write-bump at 4:1:1:1.
        assert!((3100..3750).contains(&writes), "{writes}");
    }

    #[test]
    fn every_op_passes_on_a_real_lock_and_counts_its_writes() {
        let main: Guarded<parking_lot::RwLock<TortureData>> = Guarded::new();
        let nested = [Guarded::new(), Guarded::new()];
        let mut a = actor(3);
        for op in OPS {
            for _ in 0..20 {
                assert_eq!(perform(&main, &nested, op, &mut a), Done::Ok, "{op:?}");
            }
        }
        // A write-bump writes twice.
        let per_op = |o: &Op| match o {
            Op::WriteBump => 2,
            o => u64::from(o.writes()),
        };
        let writes = OPS.iter().map(per_op).sum::<u64>() * 20;
        assert_eq!(a.writes_on[0], writes);
        assert_eq!(main.lock.with_read(|d| d.settled(writes)), Ok(()));
        for (i, g) in nested.iter().enumerate() {
            assert_eq!(g.lock.with_read(|d| d.settled(a.writes_on[i + 1])), Ok(()));
        }
    }

    #[test]
    fn a_try_on_a_held_lock_misses() {
        let main: Guarded<parking_lot::RwLock<TortureData>> = Guarded::new();
        let mut a = actor(1);
        main.lock.with_write(|_| {
            assert_eq!(perform(&main, &[], Op::TryRead, &mut a), Done::Missed);
            assert_eq!(perform(&main, &[], Op::TimedWrite, &mut a), Done::Missed);
            assert_eq!(
                perform(&main, &[], Op::TimedUpgradable, &mut a),
                Done::Missed
            );
        });
        // Free, the timed upgradable read gets in.
        assert_eq!(perform(&main, &[], Op::TimedUpgradable, &mut a), Done::Ok);
    }

    /// The writers run every upgrade the lock has: scalelock's rwlocks and
    /// parking_lot's also time theirs out (`try_upgrade_for`), a path of
    /// its own (a timed-out upgrade must still be an upgradable read).
    #[test]
    fn timed_upgrades_are_in_the_mix() {
        for caps in [
            <scalelock::QRwLock<()> as Lockable<()>>::CAPS,
            <scalelock::PerCpuRwLock<()> as Lockable<()>>::CAPS,
            <parking_lot::RwLock<()> as Lockable<()>>::CAPS,
        ] {
            let m = mix(caps, true);
            assert!(m.iter().any(|o| o.0.name() == "timed-upgrade"), "{m:?}");
            // And the readers take timed upgradable reads.
            let m = mix(caps, false);
            assert!(m.iter().any(|o| o.0 == Op::TimedUpgradable), "{m:?}");
        }
    }

    /// An rwlock whose timed upgrade, when it times out, says it upgraded
    /// (its data in atomics, as `busted`'s, so the lie is no data race).
    struct LyingUpgrade<T: Racy>(parking_lot::RwLock<()>, T::Cell);

    impl<T: Racy> LyingUpgrade<T> {
        fn write<R>(&self, f: impl FnOnce(&mut T) -> R) -> R {
            let mut v = T::load(&self.1);
            let out = f(&mut v);
            T::store(&self.1, &v);
            out
        }
    }

    impl<T: Racy> Lockable<T> for LyingUpgrade<T> {
        const KIND: Kind = Kind::RwLock;
        const CAPS: Caps = Caps::UPGRADE.with(Caps::TIMED_UPGRADE);
        fn new(v: T) -> Self {
            LyingUpgrade(parking_lot::RwLock::new(()), T::cell(v))
        }
        fn with_write<R>(&self, f: impl FnOnce(&mut T) -> R) -> R {
            let _g = self.0.write();
            self.write(f)
        }
        fn with_read<R>(&self, f: impl FnOnce(&T) -> R) -> R {
            let _g = self.0.read();
            f(&T::load(&self.1))
        }
        fn try_with_write<R>(&self, f: impl FnOnce(&mut T) -> R) -> Option<R> {
            self.0.try_write().map(|_g| self.write(f))
        }
        fn try_with_read<R>(&self, f: impl FnOnce(&T) -> R) -> Option<R> {
            self.0.try_read().map(|_g| f(&T::load(&self.1)))
        }
        fn state(&self) -> String {
            "lying upgrade".into()
        }
        fn with_upgradable_then_write_for<U, R>(
            &self,
            t: Duration,
            u: impl FnOnce(&T) -> U,
            w: impl FnOnce(U, &mut T) -> R,
            _: impl FnOnce(U, &T) -> R,
        ) -> R {
            let g = self.0.upgradable_read();
            let seen = u(&T::load(&self.1));
            // Upgraded or not, it goes on as if it had.
            let _g = parking_lot::RwLockUpgradableReadGuard::try_upgrade_for(g, t);
            self.write(|d| w(seen, d))
        }
        fn with_upgradable_then_try_write<U, R>(
            &self,
            u: impl FnOnce(&T) -> U,
            w: impl FnOnce(U, &mut T) -> R,
            _: impl FnOnce(U, &T) -> R,
        ) -> R {
            let g = self.0.upgradable_read();
            let seen = u(&T::load(&self.1));
            let _g = parking_lot::RwLockUpgradableReadGuard::try_upgrade(g);
            self.write(|d| w(seen, d))
        }
    }

    /// `op`, a try or timed upgrade, on a real rwlock (`L`) while a reader
    /// holds it: a miss, still an upgradable read; alone: done. On
    /// `LyingUpgrade`, under a reader: a failure, the lie caught.
    fn a_failed_upgrade_is_a_miss_and_a_lying_one_a_failure<L: Lockable<TortureData>>(op: Op) {
        let mut a = actor(1);
        let real: Guarded<L> = Guarded::new();
        real.lock.with_read(|_| {
            assert_eq!(real.reader_in(9), Ok(()));
            assert_eq!(perform(&real, &[], op, &mut a), Done::Missed);
            real.reader_out();
        });
        assert_eq!(perform(&real, &[], op, &mut a), Done::Ok);
        let liar: Guarded<LyingUpgrade<TortureData>> = Guarded::new();
        let _reading = liar.lock.0.read();
        assert_eq!(liar.reader_in(9), Ok(()));
        let Done::Failed(e) = perform(&liar, &[], op, &mut a) else {
            panic!("{op:?}: the lie went unnoticed");
        };
        assert!(e.contains("while 0 writer(s) and 1 reader(s)"), "{e}");
    }

    #[test]
    fn a_try_upgrade_that_fails_is_a_miss_and_one_that_lies_a_failure() {
        a_failed_upgrade_is_a_miss_and_a_lying_one_a_failure::<scalelock::QRwLock<TortureData>>(
            Op::TryUpgrade,
        );
    }

    #[test]
    fn a_timed_upgrade_that_times_out_is_a_miss_and_one_that_lies_a_failure() {
        a_failed_upgrade_is_a_miss_and_a_lying_one_a_failure::<parking_lot::RwLock<TortureData>>(
            Op::TimedUpgrade,
        );
    }

    #[test]
    fn overlap_under_the_busted_lock_is_a_failure() {
        let main: Guarded<Busted<TortureData>> = Guarded::new();
        let mut a = actor(1);
        // A reader inside (as far as the occupancy knows) while a writer enters.
        assert_eq!(main.reader_in(9), Ok(()));
        assert!(matches!(
            perform(&main, &[], Op::Write, &mut a),
            Done::Failed(_)
        ));
        main.reader_out();
        assert_eq!(perform(&main, &[], Op::Write, &mut a), Done::Ok);
    }
}
