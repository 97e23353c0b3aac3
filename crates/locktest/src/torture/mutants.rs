//! Mutation tests: a correct rwlock broken in one way at a time; a
//! torture run of each must end in FAILURE. (Not among them: a fair unlock
//! that hands nothing off. Nothing in the torture can tell it from bad
//! luck, and a queued lock's fair unlock may let a try take the lock.)
//!
//! `Mutant<T, M>` is a `parking_lot::RwLock<()>` whose data lives in
//! atomics ([`Racy`], as `busted`'s), so that a broken lock is no data
//! race; `M` picks the one thing it gets wrong.

use std::time::Duration;

use parking_lot::{RwLock, RwLockUpgradableReadGuard as Up};

use super::checks::TortureData;
use super::output::Params;
use super::run;
use crate::busted::Racy;
use crate::lockable::{Caps, Kind, Lockable};

/// Correct: the control, must pass.
const OK: u8 = 0;
/// Read sections take no lock.
const READ_UNLOCKED: u8 = 1;
/// Upgradable reads (the readers' try/timed ones) are plain shared reads:
/// two upgradable readers may be inside together.
const UPGRADABLE_SHARED: u8 = 2;
/// Downgrade = unlock, then read lock: a writer can slip in.
const DOWNGRADE_RACY: u8 = 3;
/// Upgrade = drop the upgradable read, then write lock.
const UPGRADE_RACY: u8 = 4;
/// Timed tries ignore the timeout and block until they get the lock
/// (a timed try that returns too late).
const TIMED_BLOCKS: u8 = 5;
/// Timed tries do not wait at all: a plain try (return too early).
const TIMED_NO_WAIT: u8 = 6;
/// Bump releases the lock and runs the second section unlocked.
const BUMP_NO_REACQUIRE: u8 = 7;
/// Try-locks never succeed.
const TRY_NEVER: u8 = 9;
/// A timed upgrade that times out drops the upgradable read before `r`.
const TIMED_UPGRADE_DROPS: u8 = 10;
/// A try upgrade never upgrades (even when it could).
const TRY_UPGRADE_NEVER: u8 = 11;
/// Timed tries always time out (after waiting the full timeout).
const TIMED_NEVER: u8 = 12;

struct Mutant<T: Racy, const M: u8>(RwLock<()>, T::Cell);

impl<T: Racy, const M: u8> Mutant<T, M> {
    fn w<R>(&self, f: impl FnOnce(&mut T) -> R) -> R {
        let mut v = T::load(&self.1);
        let out = f(&mut v);
        T::store(&self.1, &v);
        out
    }
    fn r<R>(&self, f: impl FnOnce(&T) -> R) -> R {
        f(&T::load(&self.1))
    }
}

impl<T: Racy, const M: u8> Lockable<T> for Mutant<T, M> {
    const KIND: Kind = Kind::RwLock;
    const CAPS: Caps = Caps::FAIR
        .with(Caps::TIMED)
        .with(Caps::DOWNGRADE)
        .with(Caps::UPGRADE)
        .with(Caps::TIMED_UPGRADE);
    fn new(v: T) -> Self {
        Mutant(RwLock::new(()), T::cell(v))
    }
    fn with_write<R>(&self, f: impl FnOnce(&mut T) -> R) -> R {
        let _g = self.0.write();
        self.w(f)
    }
    fn with_read<R>(&self, f: impl FnOnce(&T) -> R) -> R {
        if M == READ_UNLOCKED {
            return self.r(f);
        }
        let _g = self.0.read();
        self.r(f)
    }
    fn try_with_write<R>(&self, f: impl FnOnce(&mut T) -> R) -> Option<R> {
        if M == TRY_NEVER {
            return None;
        }
        self.0.try_write().map(|_g| self.w(f))
    }
    fn try_with_read<R>(&self, f: impl FnOnce(&T) -> R) -> Option<R> {
        if M == TRY_NEVER {
            return None;
        }
        if M == READ_UNLOCKED {
            return Some(self.r(f));
        }
        self.0.try_read().map(|_g| self.r(f))
    }
    fn state(&self) -> String {
        format!("mutant {M}")
    }
    fn with_write_fair<R>(&self, f: impl FnOnce(&mut T) -> R) -> R {
        let g = self.0.write();
        let out = self.w(f);
        parking_lot::RwLockWriteGuard::unlock_fair(g);
        out
    }
    fn with_read_fair<R>(&self, f: impl FnOnce(&T) -> R) -> R {
        let g = self.0.read();
        let out = self.r(f);
        parking_lot::RwLockReadGuard::unlock_fair(g);
        out
    }
    fn with_write_bump<R>(&self, a: impl FnOnce(&mut T), b: impl FnOnce(&mut T) -> R) -> R {
        let mut g = self.0.write();
        self.w(a);
        if M == BUMP_NO_REACQUIRE {
            drop(g);
            return self.w(b);
        }
        parking_lot::RwLockWriteGuard::bump(&mut g);
        self.w(b)
    }
    fn with_read_bump<R>(&self, a: impl FnOnce(&T), b: impl FnOnce(&T) -> R) -> R {
        let mut g = self.0.read();
        self.r(a);
        if M == BUMP_NO_REACQUIRE {
            drop(g);
            return self.r(b);
        }
        parking_lot::RwLockReadGuard::bump(&mut g);
        self.r(b)
    }
    fn try_with_write_for<R>(&self, t: Duration, f: impl FnOnce(&mut T) -> R) -> Option<R> {
        match M {
            TIMED_BLOCKS => Some(self.with_write(f)),
            TIMED_NO_WAIT => self.0.try_write().map(|_g| self.w(f)),
            TIMED_NEVER => {
                std::thread::sleep(t);
                None
            }
            _ => self.0.try_write_for(t).map(|_g| self.w(f)),
        }
    }
    fn try_with_read_for<R>(&self, t: Duration, f: impl FnOnce(&T) -> R) -> Option<R> {
        match M {
            TIMED_BLOCKS => Some(self.with_read(f)),
            TIMED_NO_WAIT => self.0.try_read().map(|_g| self.r(f)),
            TIMED_NEVER => {
                std::thread::sleep(t);
                None
            }
            _ => self.0.try_read_for(t).map(|_g| self.r(f)),
        }
    }
    fn try_with_upgradable<R>(&self, f: impl FnOnce(&T) -> R) -> Option<R> {
        if M == UPGRADABLE_SHARED {
            return self.0.try_read().map(|_g| self.r(f));
        }
        self.0.try_upgradable_read().map(|_g| self.r(f))
    }
    fn try_with_upgradable_for<R>(&self, t: Duration, f: impl FnOnce(&T) -> R) -> Option<R> {
        match M {
            UPGRADABLE_SHARED => self.0.try_read_for(t).map(|_g| self.r(f)),
            TIMED_BLOCKS => {
                let _g = self.0.upgradable_read();
                Some(self.r(f))
            }
            TIMED_NO_WAIT => self.0.try_upgradable_read().map(|_g| self.r(f)),
            TIMED_NEVER => {
                std::thread::sleep(t);
                None
            }
            _ => self.0.try_upgradable_read_for(t).map(|_g| self.r(f)),
        }
    }
    fn with_write_then_read<R>(&self, w: impl FnOnce(&mut T), r: impl FnOnce(&T) -> R) -> R {
        let g = self.0.write();
        self.w(w);
        if M == DOWNGRADE_RACY {
            drop(g);
            let _g = self.0.read();
            return self.r(r);
        }
        let _g = parking_lot::RwLockWriteGuard::downgrade(g);
        self.r(r)
    }
    fn with_upgradable_then_write<U, R>(
        &self,
        u: impl FnOnce(&T) -> U,
        w: impl FnOnce(U, &mut T) -> R,
    ) -> R {
        let g = self.0.upgradable_read();
        let seen = self.r(u);
        if M == UPGRADE_RACY {
            drop(g);
            let _g = self.0.write();
            return self.w(|d| w(seen, d));
        }
        let _g = Up::upgrade(g);
        self.w(|d| w(seen, d))
    }
    fn with_upgradable_then_try_write<U, R>(
        &self,
        u: impl FnOnce(&T) -> U,
        w: impl FnOnce(U, &mut T) -> R,
        r: impl FnOnce(U, &T) -> R,
    ) -> R {
        let g = self.0.upgradable_read();
        let seen = self.r(u);
        if M == TRY_UPGRADE_NEVER {
            return self.r(|d| r(seen, d));
        }
        match Up::try_upgrade(g) {
            Ok(_g) => self.w(|d| w(seen, d)),
            Err(_g) => self.r(|d| r(seen, d)),
        }
    }
    fn with_upgradable_then_write_for<U, R>(
        &self,
        t: Duration,
        u: impl FnOnce(&T) -> U,
        w: impl FnOnce(U, &mut T) -> R,
        r: impl FnOnce(U, &T) -> R,
    ) -> R {
        let g = self.0.upgradable_read();
        let seen = self.r(u);
        match M {
            TIMED_BLOCKS => {
                let _g = Up::upgrade(g);
                return self.w(|d| w(seen, d));
            }
            TIMED_NO_WAIT => {
                return match Up::try_upgrade(g) {
                    Ok(_g) => self.w(|d| w(seen, d)),
                    Err(_g) => self.r(|d| r(seen, d)),
                };
            }
            TIMED_NEVER => {
                std::thread::sleep(t);
                return self.r(|d| r(seen, d));
            }
            _ => {}
        }
        match Up::try_upgrade_for(g, t) {
            Ok(_g) => self.w(|d| w(seen, d)),
            Err(g) => {
                if M == TIMED_UPGRADE_DROPS {
                    drop(g);
                }
                self.r(|d| r(seen, d))
            }
        }
    }
}

fn params() -> Params {
    Params {
        writers: 3,
        readers: 3,
        duration: 1.0,
        long_hold_ms: 5,
        stutter_ms: None,
        shuffle_ms: None,
        nested: 0,
        stat_interval: 10.0,
        stall_s: 10.0,
    }
}

fn torture<const M: u8>() -> super::output::Record {
    run::run::<Mutant<TortureData, M>>(&format!("mutant-{M}"), &params()).unwrap()
}

#[track_caller]
fn caught<const M: u8>() {
    let r = torture::<M>();
    assert!(
        !r.passed(),
        "mutant {M} passed: ops={:?} try_misses={} failures={:?}",
        r.ops,
        r.try_misses,
        r.failures
    );
    eprintln!("mutant {M} caught: {:?}", r.failures.first());
}

#[test]
fn m00_the_control_passes() {
    let r = torture::<OK>();
    assert!(r.passed(), "{:?}", r.failures);
}
#[test]
fn m01_read_unlocked() {
    caught::<READ_UNLOCKED>();
}
#[test]
fn m02_upgradable_shared() {
    caught::<UPGRADABLE_SHARED>();
}
#[test]
fn m03_downgrade_racy() {
    caught::<DOWNGRADE_RACY>();
}
#[test]
fn m04_upgrade_racy() {
    caught::<UPGRADE_RACY>();
}
#[test]
fn m05_timed_blocks() {
    caught::<TIMED_BLOCKS>();
}
#[test]
fn m06_timed_no_wait() {
    caught::<TIMED_NO_WAIT>();
}
#[test]
fn m07_bump_no_reacquire() {
    caught::<BUMP_NO_REACQUIRE>();
}
#[test]
fn m09_try_never() {
    caught::<TRY_NEVER>();
}
#[test]
fn m10_timed_upgrade_drops() {
    caught::<TIMED_UPGRADE_DROPS>();
}
#[test]
fn m11_try_upgrade_never() {
    caught::<TRY_UPGRADE_NEVER>();
}
#[test]
fn m12_timed_never() {
    caught::<TIMED_NEVER>();
}

/// spin's RwLock says it has upgradable reads, but its adapter left
/// `try_with_upgradable` and `with_upgradable_then_try_write` to the
/// defaults: a plain try-read and a blocking upgrade.
#[test]
fn spin_rwlock_tries_are_upgradable_ones() {
    let l: spin::RwLock<TortureData> = Lockable::new(TortureData::default());
    let g = l.upgradeable_read();
    assert!(
        Lockable::try_with_upgradable(&l, |_| ()).is_none(),
        "a second upgradable read got in"
    );
    drop(g);
    // A reader inside for 300 ms (so that a blocking upgrade, the bug,
    // ends instead of hanging the test).
    let gate = std::sync::Barrier::new(2);
    let upgraded = std::thread::scope(|s| {
        s.spawn(|| {
            let _r = l.read();
            gate.wait();
            std::thread::sleep(Duration::from_millis(300));
        });
        gate.wait();
        Lockable::with_upgradable_then_try_write(&l, |_| (), |_, _| true, |_, _| false)
    });
    assert!(!upgraded, "a try upgrade under a reader upgraded");
}
