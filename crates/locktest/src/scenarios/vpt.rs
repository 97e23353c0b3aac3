//! `vpt` (Xen's virtual platform timers after XSA-336; "Performance
//! regression due to XSA-336", xen-devel 2021): a domain of V vCPUs (one per thread), each with a list of timers under its own
//! lock (`tm_lock`). Almost every operation is a VM exit on a thread's own
//! vCPU that updates one of its timers (`pt_update_irq`); one in
//! [`MIGRATE_EVERY`] moves a random timer to the thread's vCPU
//! (`pt_adjust_vcpu`).
//!
//! - before (XSA-336): a per-domain rwlock (`pt_migrate`, `--lock`) keeps
//!   `timer.vcpu` stable. Every VM exit takes its read side before the vCPU
//!   lock, so all vCPUs write the rwlock's shared word; a migration holds
//!   the write side, which alone guards `timer.vcpu` (a plain field here,
//!   kept in a [`Busted`] cell: a lock that does not lock, since the
//!   domain lock does the excluding).
//! - after (the fix, Boris Ostrovsky and Stephen Brennan): each timer has a
//!   lock that owns `timer.vcpu` ([`QSpinLock<usize>`]: no way to read the
//!   owner without it). A VM exit takes only its vCPU lock. A migration
//!   locks the timer, locks its owner vCPU, unlinks it, unlocks, sets the
//!   new owner, locks the new vCPU, links it, unlocks both: the fix's
//!   group 3, 9 steps.
//!
//! Lock order: domain rwlock (before only), then timer, then vCPU. A thread
//! holds at most one timer lock and one vCPU lock, and takes nothing while
//! holding a vCPU lock, so a waiter for a timer lock holds no vCPU lock and
//! a vCPU holder waits for nothing: no cycle, no deadlock. The vCPU lists
//! are `QSpinLock`s in both designs.
//!
//! One operation in [`MIGRATE_EVERY`] is a timer firing (`pt_timer_fn`):
//! it finds the timer through `timer.vcpu` (`pt_lock(pt)`: under the
//! domain's read lock before, the timer's lock after), then its vCPU's
//! lock, and updates it. It is the reader the domain rwlock protects: a VM
//! exit never reads `timer.vcpu`.
//!
//! Checked: a migration and a timer firing find the timer in its owner's
//! list; at the end
//! every timer is in exactly one list, the one its owner names, and the
//! timers' update counts add up to the VM exits that updated one.

use crossbeam_utils::CachePadded;
use scalelock::{ClassRef, LockClass, QSpinLock, RawQSpinLock};

use super::{Outcome, RunFn, Scenario, Setup, before_fn};
use crate::busted::Busted;
use crate::harness::{self, Quiet};
use crate::lockable::{LockRole, Lockable};
use crate::rng::Rng;

/// Lock classes (`--stats`): the per-domain rwlock XSA-336 added
/// (`pl_time->pt_migrate`), each vCPU's timer-list lock (`tm_lock`), and the
/// per-timer lock that replaced the domain rwlock.
static PT_MIGRATE: LockRole = LockRole::new("vpt/pt_migrate");
static TM_LOCK: LockClass = LockClass::new("vpt/tm_lock");
static TIMER_LOCK: LockRole = LockRole::new("vpt/timer_lock");

/// Timers per vCPU at the start.
const TIMERS_PER_VCPU: usize = 4;
/// One operation in this many is a migration.
const MIGRATE_EVERY: u32 = 1000;

pub const SCENARIO: Scenario = Scenario {
    name: "vpt",
    about: "Xen vCPU timers (XSA-336): per-domain rwlock on every VM exit vs per-timer lock",
    default_locks: &["pl-rwlock", "qrwlock", "percpu-rwlock"],
    before: before_for,
    after_name: "after-per-timer-lock",
    after,
};

fn before_for(lock: &str) -> Option<RunFn> {
    before_fn!(lock, before, ())
}

/// A timer's fields that its vCPU's lock protects, on a cache line of their
/// own (Xen embeds each in a different device's state): vCPUs' timers
/// never share a line.
#[repr(align(64))]
struct Timer {
    id: usize,
    updates: u64,
}

/// What keeps `timer.vcpu` stable beyond the per-timer lock.
trait Outer: Sync {
    fn read<R>(&self, f: impl FnOnce() -> R) -> R;
    fn write<R>(&self, f: impl FnOnce() -> R) -> R;
}

/// Before: the per-domain rwlock.
struct DomainLock<L>(L);

impl<L: Lockable<()>> Outer for DomainLock<L> {
    fn read<R>(&self, f: impl FnOnce() -> R) -> R {
        self.0.with_read(|_| f())
    }
    fn write<R>(&self, f: impl FnOnce() -> R) -> R {
        self.0.with_write(|_| f())
    }
}

/// After: nothing beyond the per-timer lock.
struct PerTimer;

impl Outer for PerTimer {
    fn read<R>(&self, f: impl FnOnce() -> R) -> R {
        f()
    }
    fn write<R>(&self, f: impl FnOnce() -> R) -> R {
        f()
    }
}

fn before<L: Lockable<()>>(setup: &Setup) -> Result<Outcome, String> {
    let outer = DomainLock(L::with_role((), &PT_MIGRATE));
    drive::<Busted<usize>>(setup, &outer, MIGRATE_EVERY, || outer.0.state())
}

fn after(setup: &Setup) -> Result<Outcome, String> {
    drive::<QSpinLock<usize>>(setup, &PerTimer, MIGRATE_EVERY, String::new)
}

/// The domain: vCPU timer lists and each timer's owner, under an `O`
/// (the per-timer lock after the fix; nothing of its own before it).
struct Domain<O> {
    vcpus: Vec<CachePadded<QSpinLock<Vec<Timer>>>>,
    owner: Vec<CachePadded<O>>,
}

impl<O: Lockable<usize>> Domain<O> {
    /// `v` vCPUs, each with its `TIMERS_PER_VCPU` timers.
    fn new(v: usize) -> Self {
        let vcpus = (0..v).map(|c| {
            let ids = c * TIMERS_PER_VCPU..(c + 1) * TIMERS_PER_VCPU;
            CachePadded::new(QSpinLock::from_raw(
                RawQSpinLock::with_class(ClassRef::of(&TM_LOCK)),
                ids.map(|id| Timer { id, updates: 0 }).collect(),
            ))
        });
        let owner = (0..v * TIMERS_PER_VCPU).map(|id| id / TIMERS_PER_VCPU);
        Domain {
            vcpus: vcpus.collect(),
            owner: owner
                .map(|c| CachePadded::new(O::with_role(c, &TIMER_LOCK)))
                .collect(),
        }
    }

    /// The VM exit on vCPU `v`: update its earliest (least updated) timer.
    fn vm_exit(&self, v: usize) -> bool {
        let mut list = self.vcpus[v].lock();
        let t = list.iter_mut().min_by_key(|t| t.updates);
        t.map(|t| t.updates += 1).is_some()
    }

    /// Moves timer `t` to vCPU `to`: whether it moved, or `None` if it was
    /// not where its owner said.
    fn migrate(&self, t: usize, to: usize) -> Option<bool> {
        self.owner[t].with_write(|owner| {
            if *owner == to {
                return Some(false);
            }
            let timer = {
                let mut list = self.vcpus[*owner].lock();
                let at = list.iter().position(|x| x.id == t)?;
                list.swap_remove(at)
            };
            *owner = to;
            self.vcpus[to].lock().push(timer);
            Some(true)
        })
    }

    /// Timer `t` fires (`pt_timer_fn`): find it through its owner
    /// (`pt_lock(pt)`: the owner read under the domain's read lock before,
    /// under the timer's lock after) and update it; `None` if it was not
    /// where its owner said (a migration half done).
    fn timer_fired(&self, t: usize) -> Option<()> {
        self.owner[t].with_read(|&owner| {
            let mut list = self.vcpus[owner].lock();
            let timer = list.iter_mut().find(|x| x.id == t)?;
            timer.updates += 1;
            Some(())
        })
    }

    /// Who owns timer `t`.
    fn owner_of(&self, t: usize) -> usize {
        self.owner[t].with_read(|o| *o)
    }
}

/// One vCPU per thread; one operation in `migrate_every` migrates, one
/// in `migrate_every` is a timer firing (`migrate_every` at least 3).
fn drive<O: Lockable<usize>>(
    setup: &Setup,
    outer: &impl Outer,
    migrate_every: u32,
    state: impl FnMut() -> String,
) -> Result<Outcome, String> {
    let (v, n) = (setup.threads, setup.threads * TIMERS_PER_VCPU);
    let dom: Domain<O> = Domain::new(v);
    let run = harness::run(&setup.spec(), &mut Quiet(state), |w| {
        let i = w.index;
        let mut rng = Rng::new(i as u64);
        let (mut ops, mut updates, mut moves, mut lost) = (0u64, 0u64, 0u64, 0u64);
        while !w.stopped() {
            let roll = rng.below(migrate_every);
            if roll == 0 {
                let t = rng.index(n);
                match outer.write(|| dom.migrate(t, i)) {
                    Some(moved) => moves += u64::from(moved),
                    None => lost += 1,
                }
            } else if roll == 1 {
                let t = rng.index(n);
                match outer.read(|| dom.timer_fired(t)) {
                    Some(()) => updates += 1,
                    None => lost += 1,
                }
            } else {
                updates += u64::from(outer.read(|| dom.vm_exit(i)));
            }
            ops += 1;
        }
        // The loop ends at the first check after the stop, so its last
        // operation ended after the stop: only those before it count (as in
        // `bench`).
        (ops.saturating_sub(1), (updates, moves, lost))
    })?;
    // Every timer in exactly one list, the one its owner names.
    let mut seen = vec![0u32; n];
    let mut bad = run.found.iter().map(|f| f.2).sum::<u64>();
    let mut counted = 0;
    for (c, list) in dom.vcpus.iter().enumerate() {
        // Owners are read after the list lock is dropped: migrations take
        // the timer's lock and then the lists', and this check keeps that
        // order too (lockdep would report the inversion).
        let timers: Vec<(usize, u64)> = list.lock().iter().map(|t| (t.id, t.updates)).collect();
        for (id, t_updates) in timers {
            seen[id] += 1;
            bad += u64::from(dom.owner_of(id) != c);
            counted += t_updates;
        }
    }
    bad += seen.iter().filter(|&&s| s != 1).count() as u64;
    bad += counted.abs_diff(run.found.iter().map(|f| f.0).sum());
    Ok(Outcome {
        metrics: vec![
            (
                "migrations",
                run.found.iter().map(|f| f.1).sum::<u64>() as f64,
            ),
            ("timers", n as f64),
        ],
        violations: bad,
        stats: run.stats(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn migration_moves_and_checks_the_owner() {
        let dom: Domain<QSpinLock<usize>> = Domain::new(2);
        assert_eq!(dom.migrate(0, 0), Some(false));
        assert_eq!(dom.migrate(0, 1), Some(true));
        assert_eq!(dom.owner_of(0), 1);
        assert_eq!(dom.vcpus[1].lock().len(), TIMERS_PER_VCPU + 1);
        // An owner that names the wrong vCPU is caught, not followed.
        *dom.owner[1].lock() = 1;
        assert_eq!(dom.migrate(1, 0), None);
    }

    fn setup() -> Setup {
        Setup {
            threads: 4,
            runtime: std::time::Duration::from_millis(100),
            what: "vpt/test".into(),
        }
    }

    #[test]
    fn both_designs_keep_every_timer_in_place() {
        let before = DomainLock(parking_lot::RwLock::new(()));
        let out = drive::<Busted<usize>>(&setup(), &before, 3, String::new).unwrap();
        assert_eq!(out.violations, 0);
        let out = drive::<QSpinLock<usize>>(&setup(), &PerTimer, 3, String::new).unwrap();
        assert_eq!(out.violations, 0);
        assert!(out.metrics[0].1 > 0.0, "no migration ran");
    }

    /// A domain lock whose write side excludes (migrations never overlap)
    /// but whose read side takes nothing: what XSA-336's rwlock is for is
    /// that readers of `timer.vcpu` never see a migration half done.
    struct WritersOnly(parking_lot::Mutex<()>);

    impl Outer for WritersOnly {
        fn read<R>(&self, f: impl FnOnce() -> R) -> R {
            f()
        }
        fn write<R>(&self, f: impl FnOnce() -> R) -> R {
            let _held = self.0.lock();
            f()
        }
    }

    #[test]
    #[cfg_attr(miri, ignore)]
    fn a_domain_lock_whose_reads_do_not_exclude_migrations_is_caught() {
        let outer = WritersOnly(parking_lot::Mutex::new(()));
        let caught = crate::scenarios::caught_within_30s(|| {
            drive::<Busted<usize>>(&setup(), &outer, 3, String::new)
                .unwrap()
                .violations
                > 0
        });
        assert!(
            caught,
            "a domain lock whose read side does not exclude its writers went unnoticed"
        );
    }

    #[test]
    #[cfg_attr(miri, ignore)]
    fn each_design_fails_without_its_lock() {
        // Before without its domain lock, after without its per-timer
        // lock: two migrations of one timer race (migrations every third
        // operation make that quick).
        let none = DomainLock(Busted::<()>::new(()));
        let caught = crate::scenarios::caught_within_30s(|| {
            drive::<Busted<usize>>(&setup(), &none, 3, String::new)
                .unwrap()
                .violations
                > 0
        });
        assert!(caught, "before without its domain lock went unnoticed");
        let caught = crate::scenarios::caught_within_30s(|| {
            drive::<Busted<usize>>(&setup(), &PerTimer, 3, String::new)
                .unwrap()
                .violations
                > 0
        });
        assert!(caught, "after without its per-timer lock went unnoticed");
    }
}
