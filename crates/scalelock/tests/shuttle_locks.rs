//! Randomized schedules of many threads over every lock: shuttle's PCT
//! (probabilistic concurrency testing: random priorities with a few
//! priority change points, which finds bugs of small depth with a known
//! probability) and uniformly random schedules. Loom explores every
//! interleaving of two or three threads; these runs reach what needs more:
//! a queue longer than the node table (threads past it wait without a
//! node), more readers than reader slots, batches ending while a queue
//! forms, many callers of one update.
//!
//! Under `cfg(shuttle)` the crate's atomics are shuttle's (every access is a
//! scheduling point, run as `SeqCst`) and `DefaultPlatform` is
//! `ShuttlePlatform`: `wait` blocks for real, so a lost wake-up is reported
//! as a deadlock; 7 queue nodes and 4 reader slots per execution; a clock
//! that moves by random steps. Each critical section yields in its middle,
//! so a second thread inside would be scheduled there and caught.
//!
//! A failure prints the schedule; replay it with `shuttle::replay(body,
//! "<schedule>")` around the failing test's body. `SCALELOCK_SHUTTLE_SCALE=N`
//! multiplies every iteration count (for a longer search than CI's).
//!
//! Run: `RUSTFLAGS="--cfg shuttle" CARGO_TARGET_DIR=target/shuttle cargo test
//! -p scalelock --release --test shuttle_locks`
#![cfg(shuttle)]

use std::sync::Arc;
use std::time::Duration;

use lock_api::{
    GuardSend, Mutex, MutexGuard, RawCondvar, RawMutex, RawMutexFair, RawRwLock,
    RawRwLockDowngrade, RawRwLockFair, RawRwLockUpgrade, RawRwLockUpgradeFair, RwLock,
    RwLockReadGuard, RwLockUpgradableReadGuard, RwLockWriteGuard,
};
use shuttle::scheduler::{PctScheduler, RandomScheduler};
use shuttle::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use shuttle::thread;
use shuttle::{Config, Runner};

use scalelock::reader_table::SLOTS;
use scalelock::{
    PerCpuRwLock, QRwLock, RawPerCpuRwLock, RawQCondvar, RawQRwLock, RawQSpinLock, RefreshOnce,
};

/// PCT's bug depth: the number of priority change points plus one.
const PCT_DEPTH: usize = 3;

/// Iterations scaled by `SCALELOCK_SHUTTLE_SCALE` (default 1).
fn scaled(iterations: usize) -> usize {
    let scale = std::env::var("SCALELOCK_SHUTTLE_SCALE")
        .ok()
        .and_then(|s| s.parse::<usize>().ok())
        .unwrap_or(1);
    iterations * scale.max(1)
}

fn config() -> Config {
    let mut config = Config::new();
    // Both warnings are known and intended here: shuttle runs all atomics
    // as SeqCst (loom covers the orderings), and drops lazy statics at the
    // end of each execution (the platform wants them fresh).
    config.silence_warnings = true;
    config
}

/// Runs `body` under PCT for `pct` iterations, then under the random
/// scheduler for `random` iterations.
fn explore(pct: usize, random: usize, body: fn()) {
    let (pct, random) = (scaled(pct), scaled(random));
    let ran = Runner::new(PctScheduler::new(PCT_DEPTH, pct), config()).run(body);
    assert_eq!(ran, pct);
    let ran = Runner::new(RandomScheduler::new(random), config()).run(body);
    assert_eq!(ran, random);
}

/// Spawns `n` model threads running `f(i)` and joins them.
fn spawn_join(n: usize, f: impl Fn(usize) + Send + Sync + 'static) {
    let f = Arc::new(f);
    let threads: Vec<_> = (0..n)
        .map(|i| {
            let f = f.clone();
            thread::spawn(move || f(i))
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
}

/// Marks a critical section: asserts that nobody else is inside in a way
/// that excludes us, and yields in the middle so a violator would run.
struct Inside {
    writers: AtomicUsize,
    readers: AtomicUsize,
}

impl Inside {
    fn new() -> Self {
        Self {
            writers: AtomicUsize::new(0),
            readers: AtomicUsize::new(0),
        }
    }

    fn write(&self, body: impl FnOnce()) {
        assert_eq!(
            self.writers.fetch_add(1, Ordering::SeqCst),
            0,
            "two writers inside"
        );
        assert_eq!(
            self.readers.load(Ordering::SeqCst),
            0,
            "a reader inside with a writer"
        );
        thread::yield_now();
        body();
        assert_eq!(self.readers.load(Ordering::SeqCst), 0, "a reader came in");
        self.writers.fetch_sub(1, Ordering::SeqCst);
    }

    fn read(&self, body: impl FnOnce()) {
        self.readers.fetch_add(1, Ordering::SeqCst);
        assert_eq!(
            self.writers.load(Ordering::SeqCst),
            0,
            "a writer inside with a reader"
        );
        thread::yield_now();
        body();
        assert_eq!(self.writers.load(Ordering::SeqCst), 0, "a writer came in");
        self.readers.fetch_sub(1, Ordering::SeqCst);
    }
}

// ---------------------------------------------------------------- QSpinLock

/// Threads contending for one `QSpinLock`: more than the 7 queue nodes, so
/// some wait without a node.
const QS_THREADS: usize = 10;
/// Operations per thread.
const QS_OPS: usize = 3;

/// Mixed `lock`+`unlock`, `lock`+`unlock_fair` and `try_lock` by ten
/// threads; the counter is a plain `u64` read, yielded over and written
/// back, so a lost update or a second holder shows.
fn mutex_body<R: RawMutexFair + Send + Sync + 'static>() {
    let lock = Arc::new(Mutex::<R, u64>::new(0));
    let inside = Arc::new(Inside::new());
    let done = Arc::new(AtomicU64::new(0));
    {
        let (lock, inside, done) = (lock.clone(), inside.clone(), done.clone());
        spawn_join(QS_THREADS, move |i| {
            for op in 0..QS_OPS {
                let mut guard = match (i + op) % 3 {
                    0 | 1 => lock.lock(),
                    _ => match lock.try_lock() {
                        Some(g) => g,
                        None => continue,
                    },
                };
                inside.write(|| {
                    let v = *guard;
                    thread::yield_now();
                    *guard = v + 1;
                });
                done.fetch_add(1, Ordering::SeqCst);
                if (i + op) % 3 == 1 {
                    MutexGuard::unlock_fair(guard);
                } else {
                    drop(guard);
                }
            }
        });
    }
    let n = done.load(Ordering::SeqCst);
    assert!(n >= (QS_THREADS * QS_OPS * 2 / 3) as u64);
    assert_eq!(*lock.lock(), n, "lost update");
    assert!(!lock.is_locked());
    assert!(lock.try_lock().is_some(), "free lock refuses try_lock");
}

#[test]
fn qspinlock_ten_threads() {
    explore(10_000, 10_000, mutex_body::<RawQSpinLock>);
}

/// Twelve threads, all queueing (no `try_lock`), half releasing fairly and
/// a quarter bumping (yielding to a waiter, if any, and going on): hand-offs
/// down a queue longer than the node table.
fn mutex_fair_queue_body<R: RawMutexFair + Send + Sync + 'static>() {
    let lock = Arc::new(Mutex::<R, u64>::new(0));
    let inside = Arc::new(Inside::new());
    {
        let (lock, inside) = (lock.clone(), inside.clone());
        spawn_join(12, move |i| {
            for _ in 0..2 {
                let mut guard = lock.lock();
                inside.write(|| *guard += 1);
                if i % 4 == 1 {
                    MutexGuard::bump(&mut guard);
                    inside.write(|| *guard += 1);
                }
                if i % 2 == 0 {
                    MutexGuard::unlock_fair(guard);
                }
            }
        });
    }
    // 24 acquisitions, and 6 more increments after the bumps.
    assert_eq!(*lock.lock(), 30);
    assert!(lock.try_lock().is_some(), "free lock refuses try_lock");
}

#[test]
fn qspinlock_twelve_threads_fair() {
    explore(8_000, 8_000, mutex_fair_queue_body::<RawQSpinLock>);
}

/// Eight threads, half of them timed (timeouts of zero to a few model
/// clock steps, so they give up at random points: spinning, queued, as the
/// word waiter), half releasing fairly: the counter counts exactly the
/// acquisitions, and the lock ends free with nobody left in its word or
/// queue.
fn mutex_timed_body() {
    let lock = Arc::new(Mutex::<RawQSpinLock, u64>::new(0));
    let inside = Arc::new(Inside::new());
    let done = Arc::new(AtomicU64::new(0));
    {
        let (lock, inside, done) = (lock.clone(), inside.clone(), done.clone());
        spawn_join(8, move |i| {
            for op in 0..3 {
                let guard = if i % 2 == 0 {
                    let timeout = std::time::Duration::from_nanos(((i + op) % 4) as u64 * 3_000);
                    match lock.try_lock_for(timeout) {
                        Some(g) => g,
                        None => continue,
                    }
                } else {
                    lock.lock()
                };
                let mut guard = guard;
                inside.write(|| {
                    let v = *guard;
                    thread::yield_now();
                    *guard = v + 1;
                });
                done.fetch_add(1, Ordering::SeqCst);
                if i % 4 == 1 {
                    MutexGuard::unlock_fair(guard);
                }
            }
        });
    }
    let n = done.load(Ordering::SeqCst);
    assert!(n >= 12, "the untimed threads always get the lock");
    assert_eq!(*lock.lock(), n, "lost update");
    // SAFETY: only reads the state word.
    let state = unsafe { lock.raw() }.state();
    assert_eq!(state, (0, 0, 0), "left dirty (locked, flags, tail)");
    assert!(lock.try_lock().is_some(), "free lock refuses try_lock");
}

#[test]
fn qspinlock_timed_waiters_give_up() {
    explore(2_000, 2_000, mutex_timed_body);
}

// ------------------------------------------------------------------ Condvar

/// Three producers and three consumers of two items each through a
/// `RawQCondvar`: one producer's notifies are `notify_all` (wake chains),
/// one consumer's waits are timed (the clock moves by random steps, so
/// they time out at random points). Every item is consumed, every waiter a
/// notify reports matches exactly one wait that reports a notification,
/// nobody is left waiting, and a lost notify is a deadlock.
fn condvar_body() {
    struct S {
        lock: RawQSpinLock,
        cv: RawQCondvar,
        /// Items produced and not yet consumed; changed under `lock`.
        items: AtomicU64,
        /// Waiters the notifies reported.
        notified: AtomicUsize,
        /// Waits that reported a notification.
        woken: AtomicUsize,
    }
    let s = Arc::new(S {
        lock: RawQSpinLock::new(),
        cv: RawQCondvar::new(),
        items: AtomicU64::new(0),
        notified: AtomicUsize::new(0),
        woken: AtomicUsize::new(0),
    });
    {
        let s = s.clone();
        spawn_join(6, move |i| {
            for _ in 0..2 {
                if i < 3 {
                    let g = s.lock.lock();
                    s.items.fetch_add(1, Ordering::SeqCst);
                    // SAFETY: `g` came from `lock()` above.
                    unsafe { s.lock.unlock(g) };
                    let n = if i == 0 {
                        s.cv.notify_all()
                    } else {
                        usize::from(s.cv.notify_one())
                    };
                    s.notified.fetch_add(n, Ordering::SeqCst);
                } else {
                    let mut g = s.lock.lock();
                    while s.items.load(Ordering::SeqCst) == 0 {
                        // SAFETY: `g` is the state of our hold of `lock`.
                        let timed_out = unsafe {
                            if i == 3 {
                                s.cv.wait_timeout(&s.lock, &mut g, Duration::from_micros(5))
                            } else {
                                s.cv.wait(&s.lock, &mut g);
                                false
                            }
                        };
                        if !timed_out {
                            s.woken.fetch_add(1, Ordering::SeqCst);
                        }
                    }
                    s.items.fetch_sub(1, Ordering::SeqCst);
                    // SAFETY: as above.
                    unsafe { s.lock.unlock(g) };
                }
            }
        });
    }
    assert_eq!(s.items.load(Ordering::SeqCst), 0);
    assert_eq!(
        s.notified.load(Ordering::SeqCst),
        s.woken.load(Ordering::SeqCst)
    );
    assert_eq!(s.cv.waiters(), 0);
    assert!(!s.lock.is_locked());
}

#[test]
fn condvar_producers_consumers() {
    explore(10_000, 10_000, condvar_body);
}

// ------------------------------------------------------ QRwLock, PerCpuRwLock

/// Two fields every writer bumps one after the other (yielding between);
/// a reader seeing them differ saw a write in progress.
#[derive(Default)]
struct Pair {
    a: u64,
    b: u64,
}

/// The rwlocks under test: both `lock_api` `RwLock`s with upgrade and
/// downgrade.
trait RawRw: RawRwLockUpgrade + RawRwLockDowngrade + Send + Sync + 'static {}
impl<R: RawRwLockUpgrade + RawRwLockDowngrade + Send + Sync + 'static> RawRw for R {}

fn bump(p: &mut Pair) {
    p.a += 1;
    thread::yield_now();
    p.b += 1;
}

fn check(p: &Pair) {
    let a = p.a;
    thread::yield_now();
    assert_eq!(a, p.b, "read a half-done write");
}

/// The threads and operations of [`rw_mixed`].
#[derive(Clone, Copy)]
struct Mix {
    readers: usize,
    writers: usize,
    /// Whether `read()` may nest while writers queue (PerCpuRwLock's
    /// recursive reads); otherwise the nested read is a `try_read`.
    nests: bool,
    /// Whether writers upgrade their upgradable reads (else they drop them
    /// and `write`).
    upgrades: bool,
}

/// `readers` reader threads and `writers` writer threads, two operations
/// each, through every acquisition kind: `read`, `try_read`, a nested
/// `read`; `write`, `try_write`, upgradable read then `upgrade`, `write`
/// then `downgrade`. Final counts are exact.
fn rw_mixed<R: RawRw>(make: fn(Pair) -> RwLock<R, Pair>, mix: Mix) {
    let Mix {
        readers,
        writers,
        nests,
        upgrades,
    } = mix;
    let lock = Arc::new(make(Pair::default()));
    let inside = Arc::new(Inside::new());
    let writes = Arc::new(AtomicU64::new(0));
    {
        let (lock, inside, writes) = (lock.clone(), inside.clone(), writes.clone());
        spawn_join(readers + writers, move |i| {
            let l = &*lock;
            for op in 0..2 {
                let kind = i + op;
                if i < readers {
                    match kind % 3 {
                        0 => {
                            let g = l.read();
                            inside.read(|| check(&g));
                        }
                        1 => {
                            if let Some(g) = l.try_read() {
                                inside.read(|| check(&g));
                            }
                        }
                        _ => {
                            // Not `read_recursive` (neither lock offers
                            // it): a nested read of a lock this thread
                            // holds, which PerCpuRwLock supports; QRwLock
                            // only while no writer queues, so it nests
                            // `try_read` instead.
                            let g = l.read();
                            inside.read(|| {
                                check(&g);
                                if nests {
                                    let h = l.read();
                                    check(&h);
                                } else if let Some(h) = l.try_read() {
                                    check(&h);
                                }
                            });
                        }
                    }
                } else {
                    let counted = match kind % 4 {
                        0 => {
                            let mut g = l.write();
                            inside.write(|| bump(&mut g));
                            true
                        }
                        1 => match l.try_write() {
                            Some(mut g) => {
                                inside.write(|| bump(&mut g));
                                true
                            }
                            None => false,
                        },
                        2 => {
                            let u = l.upgradable_read();
                            // An upgradable read shares with readers.
                            inside.read(|| check(&u));
                            let mut g = if upgrades {
                                RwLockUpgradableReadGuard::upgrade(u)
                            } else {
                                drop(u);
                                l.write()
                            };
                            inside.write(|| bump(&mut g));
                            true
                        }
                        _ => {
                            let mut g = l.write();
                            inside.write(|| bump(&mut g));
                            let r = RwLockWriteGuard::downgrade(g);
                            inside.read(|| check(&r));
                            true
                        }
                    };
                    if counted {
                        writes.fetch_add(1, Ordering::SeqCst);
                    }
                }
            }
        });
    }
    let n = writes.load(Ordering::SeqCst);
    let l = &*lock;
    let g = l.read();
    assert_eq!((g.a, g.b), (n, n), "lost write");
    drop(g);
    assert!(!l.is_locked());
    assert!(l.try_write().is_some(), "free lock refuses try_write");
}

#[test]
fn qrwlock_readers_writers() {
    explore(20_000, 20_000, || {
        let mix = Mix {
            readers: 5,
            writers: 3,
            nests: false,
            upgrades: true,
        };
        rw_mixed(QRwLock::new, mix)
    });
}

/// Six threads on one `QRwLock`, most of their acquisitions timed
/// (timeouts of zero to a few model clock steps, so they give up at random
/// points: queued on `wait_lock`, waiting out a batch, draining readers,
/// waiting for a writer, upgrading), some releases fair: exclusion holds,
/// every write counted lands, and the lock ends idle with nothing left in
/// its word or its queue (a turn number may stay).
fn qrwlock_timed_body() {
    let lock = Arc::new(QRwLock::new(Pair::default()));
    let inside = Arc::new(Inside::new());
    let writes = Arc::new(AtomicU64::new(0));
    {
        let (lock, inside, writes) = (lock.clone(), inside.clone(), writes.clone());
        spawn_join(6, move |i| {
            let l = &*lock;
            for op in 0..3 {
                let timeout = Duration::from_nanos(((i + op) % 4) as u64 * 3_000);
                match (i + op) % 5 {
                    0 => {
                        if let Some(g) = l.try_read_for(timeout) {
                            inside.read(|| check(&g));
                            if i % 2 == 0 {
                                RwLockReadGuard::unlock_fair(g);
                            }
                        }
                    }
                    1 => {
                        if let Some(mut g) = l.try_write_for(timeout) {
                            inside.write(|| bump(&mut g));
                            writes.fetch_add(1, Ordering::SeqCst);
                            if i % 2 == 1 {
                                RwLockWriteGuard::unlock_fair(g);
                            }
                        }
                    }
                    2 => {
                        if let Some(u) = l.try_upgradable_read_for(timeout) {
                            inside.read(|| check(&u));
                            if let Ok(mut g) =
                                RwLockUpgradableReadGuard::try_upgrade_for(u, timeout)
                            {
                                inside.write(|| bump(&mut g));
                                writes.fetch_add(1, Ordering::SeqCst);
                            }
                        }
                    }
                    3 => {
                        let mut g = l.write();
                        inside.write(|| bump(&mut g));
                        writes.fetch_add(1, Ordering::SeqCst);
                        if i % 2 == 0 {
                            RwLockWriteGuard::unlock_fair(g);
                        }
                    }
                    _ => {
                        let g = l.read();
                        inside.read(|| check(&g));
                    }
                }
            }
        });
    }
    let n = writes.load(Ordering::SeqCst);
    let l = &*lock;
    let g = l.read();
    assert_eq!((g.a, g.b), (n, n), "lost write");
    drop(g);
    // SAFETY: only reads the state for its Debug output.
    let state = format!("{:?}", unsafe { l.raw() });
    let idle = (0..4).any(|turn| {
        state
            == format!(
                "RawQRwLock {{ readers: 0, write_locked: false, write_waiting: false, \
                 parked: false, quiet: false, handoff: false, turn: {turn}, wait_lock: \
                 RawQSpinLock {{ locked: \"free\", pending: false, handoff: false, \
                 granted: false, head_parked: false, tail: 0 }} }}"
            )
    });
    assert!(idle, "left dirty: {state}");
    assert!(l.try_write().is_some(), "free lock refuses try_write");
}

#[test]
fn qrwlock_timed_waiters_give_up() {
    explore(4_000, 4_000, qrwlock_timed_body);
}

#[test]
fn percpu_rwlock_readers_writers() {
    explore(15_000, 15_000, || {
        let mix = Mix {
            readers: 6,
            writers: 3,
            nests: true,
            upgrades: true,
        };
        rw_mixed(PerCpuRwLock::new, mix)
    });
}

/// Nested reads by threads without a reader slot while a writer queues
/// between the outer and the inner read: `SLOTS + 3` readers of lock `a`,
/// so at least three have no slot; half of them first read lock `b` of the
/// same table, so even those with a slot find it busy and read `a` through
/// the underlying lock (recorded in the thread-local list). Every reader
/// holds its outer read before the writer starts; the inner read must not
/// wait behind the writer (which waits for the outer read): a wait would be
/// a shuttle deadlock.
fn percpu_recursive_slotless_body() {
    let a = Arc::new(PerCpuRwLock::new(Pair::default()));
    let b = Arc::new(PerCpuRwLock::new(()));
    let holding = Arc::new(AtomicUsize::new(0));
    let writer_started = Arc::new(AtomicUsize::new(0));
    let readers = SLOTS + 3;
    let threads: Vec<_> = (0..readers)
        .map(|i| {
            let (a, b) = (a.clone(), b.clone());
            let (holding, writer_started) = (holding.clone(), writer_started.clone());
            thread::spawn(move || {
                let other = (i % 2 == 0).then(|| b.read());
                let outer = a.read();
                check(&outer);
                holding.fetch_add(1, Ordering::SeqCst);
                while writer_started.load(Ordering::SeqCst) == 0 {
                    thread::yield_now();
                }
                // Let the writer queue.
                for _ in 0..3 {
                    thread::yield_now();
                }
                let inner = a.read();
                check(&inner);
                if i % 3 == 0 {
                    drop(outer);
                    drop(inner);
                } else {
                    drop(inner);
                    drop(outer);
                }
                drop(other);
                // And a read after the writer, through whatever path.
                let g = a.read();
                check(&g);
            })
        })
        .collect();
    while holding.load(Ordering::SeqCst) < readers {
        thread::yield_now();
    }
    writer_started.store(1, Ordering::SeqCst);
    bump(&mut a.write());
    for t in threads {
        t.join().unwrap();
    }
    assert_eq!((a.read().a, a.read().b), (1, 1));
    assert!(!a.is_locked() && !b.is_locked());
}

#[test]
fn percpu_rwlock_recursive_reads_without_slots() {
    const { assert!(SLOTS < 8, "the model platform has few slots") };
    explore(20_000, 20_000, percpu_recursive_slotless_body);
}

// -------------------------------------------------------------- RefreshOnce

/// `[started, finished]`: the value the `n`-th update to start returns is
/// `[n, n]`.
type Val = [u64; 2];

/// Callers of one `RefreshOnce`, two calls each. Every value returned comes
/// from an update that started after the call (more updates had started
/// than before the call), updates never overlap (each sees the previous
/// one's finished value), and the generation counts every update.
fn refresh_body() {
    const CALLERS: usize = 8;
    let r: Arc<RefreshOnce<Val>> = Arc::new(RefreshOnce::new([0, 0]));
    let started = Arc::new(AtomicU64::new(0));
    {
        let (r, started) = (r.clone(), started.clone());
        spawn_join(CALLERS, move |_| {
            for _ in 0..2 {
                let before = started.load(Ordering::SeqCst);
                let v: Val = r.refresh(|old| {
                    assert_eq!(old[0], old[1], "updates overlap");
                    let n = started.fetch_add(1, Ordering::SeqCst) + 1;
                    assert_eq!(old[1] + 1, n, "an update saw a stale value");
                    thread::yield_now();
                    [n, n]
                });
                assert_eq!(v[0], v[1], "torn value");
                assert!(
                    v[0] > before,
                    "stale: {v:?}, {before} updates had started before the call"
                );
            }
        });
    }
    let n = started.load(Ordering::SeqCst);
    assert!((1..=2 * CALLERS as u64).contains(&n));
    assert_eq!(u64::from(r.generation()), n);
    assert_eq!(r.get(), [n, n]);
    assert!(!r.is_refreshing());
}

#[test]
fn refresh_once_many_callers() {
    explore(20_000, 20_000, refresh_body);
}

/// Two model threads that each read `lock` three times, checking the
/// pair inside (the readers of the upgrade models).
fn spawn_percpu_readers(
    lock: &Arc<PerCpuRwLock<Pair>>,
    inside: &Arc<Inside>,
) -> Vec<thread::JoinHandle<()>> {
    (0..2)
        .map(|_| {
            let (lock, inside) = (lock.clone(), inside.clone());
            thread::spawn(move || {
                for _ in 0..3 {
                    let g = lock.read();
                    inside.read(|| check(&g));
                }
            })
        })
        .collect()
}

/// An upgrader against readers: after `upgrade`, no reader may be inside.
///
/// Fails on today's code, in two ways. `upgrade` revokes the bias (clears
/// `FAST`, waits for the slots naming the lock) while it holds only the
/// underlying lock's upgradable read, so readers that arrive meanwhile
/// still get the underlying *read* lock (the slow path) and record it in
/// their slot (`UNDERLYING`):
/// 1. such a slow reader's `maybe_reenable` sets `FAST` again (it assumes
///    that holding the underlying read lock keeps every writer out), fast
///    readers then enter through their slots, and the underlying upgrade,
///    which waits only for underlying readers, returns with them inside
///    ("a reader inside with a writer");
/// 2. the revocation's scan also waits for `UNDERLYING` slots and parks on
///    them, but a slow read's unlock (`unlock_shared_recorded`) clears its
///    slot without waking the slot's waiters: the upgrader sleeps for good,
///    and every writer queues behind the queue lock its upgradable read
///    holds (a shuttle deadlock).
///
/// `tests/percpu_upgrade_race.rs` shows 1 on real threads.
fn percpu_upgrade_vs_slow_readers_body() {
    let lock = Arc::new(PerCpuRwLock::new(Pair::default()));
    let inside = Arc::new(Inside::new());
    let readers = spawn_percpu_readers(&lock, &inside);
    let u = lock.upgradable_read();
    inside.read(|| check(&u));
    let mut g = RwLockUpgradableReadGuard::upgrade(u);
    inside.write(|| bump(&mut g));
    drop(g);
    for r in readers {
        r.join().unwrap();
    }
    assert_eq!(lock.read().a, 1);
}

/// Failed within a few hundred schedules before `upgrade` upgraded the
/// underlying lock before revoking (a slow reader re-enabled the bias
/// behind the revocation, or the upgrade slept on a slow reader's slot).
#[test]
fn percpu_upgrade_vs_slow_readers() {
    explore(500, 500, percpu_upgrade_vs_slow_readers_body);
}

/// A `try_upgrade` against readers: if it succeeds, no reader may be inside
/// its write; if it fails, readers must still get in beside the upgradable
/// read (here the upgrader waits for them while it holds it). Deadlocked
/// before `try_upgrade` revoked the bias first: exclusive first, a reader
/// that stepped aside during the revocation met `W_LOCKED` and queued on
/// the underlying queue lock, which the failed try kept with the
/// upgradable read.
fn percpu_try_upgrade_vs_readers_body() {
    let lock = Arc::new(PerCpuRwLock::new(Pair::default()));
    let inside = Arc::new(Inside::new());
    let readers = spawn_percpu_readers(&lock, &inside);
    let u = lock.upgradable_read();
    inside.read(|| check(&u));
    let wrote = match RwLockUpgradableReadGuard::try_upgrade(u) {
        Ok(mut g) => {
            inside.write(|| bump(&mut g));
            drop(g);
            for r in readers {
                r.join().unwrap();
            }
            1
        }
        Err(u) => {
            for r in readers {
                r.join().unwrap();
            }
            drop(u);
            0
        }
    };
    assert_eq!(lock.read().a, wrote);
}

#[test]
fn percpu_try_upgrade_vs_readers() {
    explore(500, 500, percpu_try_upgrade_vs_readers_body);
}

// -------------------------------------------------------- negative controls

/// A mutex that does not lock.
struct BustedMutex;

// SAFETY: none; it exists to show that the checks above catch a lock that
// does not exclude (only ever used inside a shuttle model).
unsafe impl RawMutex for BustedMutex {
    const INIT: Self = BustedMutex;
    type Guard = GuardSend;
    fn lock(&self) -> GuardSend {
        GuardSend::new()
    }
    fn try_lock(&self) -> Option<GuardSend> {
        Some(GuardSend::new())
    }
    unsafe fn unlock(&self, _: GuardSend) {}
    fn is_locked(&self) -> bool {
        false
    }
}

// SAFETY: as above.
unsafe impl RawMutexFair for BustedMutex {
    unsafe fn unlock_fair(&self, _: GuardSend) {}
}

/// A reader-writer lock that does not lock.
struct BustedRwLock;

// SAFETY: as for `BustedMutex`.
unsafe impl RawRwLock for BustedRwLock {
    const INIT: Self = BustedRwLock;
    type SharedGuard = GuardSend;
    type ExclusiveGuard = GuardSend;
    fn lock_shared(&self) -> GuardSend {
        GuardSend::new()
    }
    fn try_lock_shared(&self) -> Option<GuardSend> {
        Some(GuardSend::new())
    }
    unsafe fn unlock_shared(&self, _: GuardSend) {}
    fn lock_exclusive(&self) -> GuardSend {
        GuardSend::new()
    }
    fn try_lock_exclusive(&self) -> Option<GuardSend> {
        Some(GuardSend::new())
    }
    unsafe fn unlock_exclusive(&self, _: GuardSend) {}
    fn is_locked(&self) -> bool {
        false
    }
    fn is_locked_exclusive(&self) -> bool {
        false
    }
}

// SAFETY: as for `BustedMutex`.
unsafe impl RawRwLockUpgrade for BustedRwLock {
    type UpgradableGuard = GuardSend;
    fn lock_upgradable(&self) -> GuardSend {
        GuardSend::new()
    }
    fn try_lock_upgradable(&self) -> Option<GuardSend> {
        Some(GuardSend::new())
    }
    unsafe fn unlock_upgradable(&self, _: GuardSend) {}
    unsafe fn upgrade(&self, _: GuardSend) -> GuardSend {
        GuardSend::new()
    }
    unsafe fn try_upgrade(&self, _: GuardSend) -> Result<GuardSend, GuardSend> {
        Ok(GuardSend::new())
    }
}

// SAFETY: as for `BustedMutex`.
unsafe impl RawRwLockDowngrade for BustedRwLock {
    unsafe fn downgrade(&self, _: GuardSend) -> GuardSend {
        GuardSend::new()
    }
}

/// Whether `body` fails within `iterations` random schedules.
fn fails(iterations: usize, body: fn()) -> bool {
    let mut config = config();
    // The expected failure's schedule is noise here.
    config.failure_persistence = shuttle::FailurePersistence::None;
    std::panic::catch_unwind(|| Runner::new(RandomScheduler::new(iterations), config).run(body))
        .is_err()
}

/// The checks have teeth: the same bodies fail on locks that do not lock.
#[test]
fn checks_catch_locks_that_do_not_lock() {
    assert!(fails(100, mutex_body::<BustedMutex>), "mutex checks");
    assert!(
        fails(100, mutex_fair_queue_body::<BustedMutex>),
        "fair queue checks"
    );
    assert!(
        fails(100, || {
            let mix = Mix {
                readers: 5,
                writers: 3,
                nests: false,
                upgrades: true,
            };
            rw_mixed(RwLock::<BustedRwLock, Pair>::new, mix)
        }),
        "rwlock checks"
    );
}

/// Six threads on one `QRwLock` or `PerCpuRwLock` through the untimed
/// upgradable and fair paths: `bump` of reads, writes and upgradable reads,
/// fair unlocks of upgradable reads, `try_upgrade`, `upgrade` then
/// `downgrade`, beside plain reads and writes. Exclusion holds, every write
/// lands, and the lock ends idle (nobody left waiting for a wake-up).
fn upgrade_fair_bump_body<R: RawRw + RawRwLockFair + RawRwLockUpgradeFair>() {
    let lock = Arc::new(RwLock::<R, Pair>::new(Pair::default()));
    let inside = Arc::new(Inside::new());
    let writes = Arc::new(AtomicU64::new(0));
    {
        let (lock, inside, writes) = (lock.clone(), inside.clone(), writes.clone());
        spawn_join(6, move |i| {
            let l = &*lock;
            for op in 0..3 {
                match (i + op) % 6 {
                    0 => {
                        let mut g = l.read();
                        inside.read(|| check(&g));
                        RwLockReadGuard::bump(&mut g);
                        inside.read(|| check(&g));
                    }
                    1 => {
                        let mut g = l.write();
                        inside.write(|| bump(&mut g));
                        RwLockWriteGuard::bump(&mut g);
                        inside.write(|| bump(&mut g));
                        writes.fetch_add(2, Ordering::SeqCst);
                        RwLockWriteGuard::unlock_fair(g);
                    }
                    2 => {
                        let mut u = l.upgradable_read();
                        inside.read(|| check(&u));
                        RwLockUpgradableReadGuard::bump(&mut u);
                        inside.read(|| check(&u));
                        if i % 2 == 0 {
                            RwLockUpgradableReadGuard::unlock_fair(u);
                        }
                    }
                    3 => {
                        let u = l.upgradable_read();
                        match RwLockUpgradableReadGuard::try_upgrade(u) {
                            Ok(mut g) => {
                                inside.write(|| bump(&mut g));
                                writes.fetch_add(1, Ordering::SeqCst);
                            }
                            Err(u) => {
                                inside.read(|| check(&u));
                                RwLockUpgradableReadGuard::unlock_fair(u);
                            }
                        }
                    }
                    4 => {
                        let u = l.upgradable_read();
                        let mut g = RwLockUpgradableReadGuard::upgrade(u);
                        inside.write(|| bump(&mut g));
                        writes.fetch_add(1, Ordering::SeqCst);
                        let r = RwLockWriteGuard::downgrade(g);
                        inside.read(|| check(&r));
                        RwLockReadGuard::unlock_fair(r);
                    }
                    _ => {
                        let g = l.read();
                        inside.read(|| check(&g));
                        RwLockReadGuard::unlock_fair(g);
                    }
                }
            }
        });
    }
    let n = writes.load(Ordering::SeqCst);
    let l = &*lock;
    let g = l.read();
    assert_eq!((g.a, g.b), (n, n), "lost write");
    drop(g);
    assert!(!l.is_locked());
    assert!(l.try_write().is_some(), "free lock refuses try_write");
}

#[test]
fn qrwlock_upgrade_fair_bump() {
    explore(4_000, 4_000, upgrade_fair_bump_body::<RawQRwLock>);
}

#[test]
fn percpu_upgrade_fair_bump() {
    explore(4_000, 4_000, upgrade_fair_bump_body::<RawPerCpuRwLock>);
}
