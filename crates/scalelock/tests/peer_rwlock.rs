//! The reader-writer lock test suites of our peers, ported to scalelock's
//! rwlocks: the `#[cfg(test)]` tests of parking_lot's `src/rwlock.rs` and
//! std's rwlock tests (`library/std/tests/sync/rwlock.rs`), plus sharing a
//! read guard with scoped threads by reference, which both peers allow.
//!
//! Each test is written once, generic over the raw lock, and
//! `rwlock_suite!` instantiates the suite for `QRwLock` and `PerCpuRwLock`
//! (where the two differ on purpose, `Props` says how).
//!
//! Not ported, and why:
//! - parking_lot's `test_rwlock_recursive` and `test_clone` use
//!   `read_recursive`, which lock_api 0.5 no longer has (there is no
//!   `RawRwLockRecursive` to implement). `PerCpuRwLock`'s plain `read` is
//!   recursive (a read by a thread that holds one never waits), so its
//!   suite runs `test_rwlock_recursive` with `read`; `QRwLock`'s `read`
//!   queues behind a waiting writer like Linux's qrwlock in process
//!   context, so its suite checks that instead
//!   (`test_read_with_waiting_writer`).
//! - std's poisoning tests (`test_*_poison*`, `test_rw_arc_poison_*`):
//!   lock_api locks do not poison; the parts that apply are
//!   `test_rw_arc_no_poison_*` (parking_lot's) and
//!   `panic_while_mapping_releases` (a panic while mapping a guard releases
//!   the lock).
//! - std's `get_cloned`, `set`, `replace`, `with`, `with_mut`: std-only API.
//! - std's `test_read_guard_covariance` and
//!   `test_mapped_read_guard_covariance`: lock_api guards borrow the lock,
//!   whose `UnsafeCell<T>` makes them invariant in `T` (std's hold a raw
//!   pointer to the data and are covariant); not a property of our locks.
//! - std's `test_needs_drop` (checks the test's own types), parking_lot's
//!   `test_serde` and `test_issue_430` (lock_api features `serde` and
//!   `arc_lock` are off).
#![cfg(not(any(loom, shuttle)))]

use std::panic::{self, AssertUnwindSafe};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::channel;
use std::thread;
use std::time::{Duration, Instant};

use lock_api::{
    MappedRwLockReadGuard, MappedRwLockWriteGuard, RawRwLock, RawRwLockDowngrade, RawRwLockUpgrade,
    RwLock, RwLockReadGuard, RwLockUpgradableReadGuard, RwLockWriteGuard,
};
use scalelock::{RawPerCpuRwLock, RawQRwLock};

/// What a lock of the suite must be.
trait Raw: RawRwLock + RawRwLockUpgrade + RawRwLockDowngrade + Props + Send + Sync + 'static {}
impl<R: RawRwLock + RawRwLockUpgrade + RawRwLockDowngrade + Props + Send + Sync + 'static> Raw
    for R
{
}

/// Where the locks differ by design.
trait Props {
    /// Whether a read by a thread that already read-holds the lock passes a
    /// waiting writer.
    const NESTED_READ_PASSES_WRITER: bool;
}

impl Props for RawQRwLock {
    const NESTED_READ_PASSES_WRITER: bool = false;
}

impl Props for RawPerCpuRwLock {
    const NESTED_READ_PASSES_WRITER: bool = true;
}

#[derive(Eq, PartialEq, Debug)]
struct NonCopy(i32);

/// A small xorshift generator: `frob` needs random choices, not quality.
struct Rng(u64);

impl Rng {
    fn one_in(&mut self, n: u64) -> bool {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0.is_multiple_of(n)
    }
}

fn smoke<R: Raw>() {
    let l = RwLock::<R, ()>::new(());
    drop(l.read());
    drop(l.write());
    drop(l.upgradable_read());
    // A recursive read, and an upgradable read taken while reading, can
    // deadlock against a writer that queues in between (QRwLock is fair;
    // PerCpuRwLock's upgradable read queues on its underlying lock), so
    // lockdep reports them, rightly (tests/lockdep_*.rs check that): they
    // run here only without it.
    if !cfg!(feature = "lockdep") {
        drop((l.read(), l.read()));
        drop((l.read(), l.upgradable_read()));
    }
    drop(l.write());
}

fn frob<R: Raw>() {
    const N: u64 = 10;
    const M: u32 = 1000;
    let r = Arc::new(RwLock::<R, ()>::new(()));
    let threads: Vec<_> = (0..N)
        .map(|i| {
            let r = r.clone();
            thread::spawn(move || {
                let mut rng = Rng(0x9E37_79B9_7F4A_7C15 ^ (i + 1));
                for _ in 0..M {
                    if rng.one_in(N) {
                        drop(r.write());
                    } else {
                        drop(r.read());
                    }
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
}

/// A thread panics holding a guard (`hold`); the lock is then free for
/// `then` (lock_api locks do not poison).
fn panic_holding<R: Raw>(hold: fn(&RwLock<R, i32>), then: fn(&RwLock<R, i32>) -> i32) {
    let arc = Arc::new(RwLock::<R, i32>::new(1));
    let arc2 = arc.clone();
    let joined = thread::spawn(move || {
        hold(&arc2);
    })
    .join();
    assert!(joined.is_err());
    assert_eq!(then(&arc), 1);
}

fn test_rw_arc_no_poison_wr<R: Raw>() {
    panic_holding::<R>(
        |l| {
            let _lock = l.write();
            panic!();
        },
        |l| *l.read(),
    );
}

fn test_rw_arc_no_poison_ww<R: Raw>() {
    panic_holding::<R>(
        |l| {
            let _lock = l.write();
            panic!();
        },
        |l| *l.write(),
    );
}

fn test_rw_arc_no_poison_rr<R: Raw>() {
    panic_holding::<R>(
        |l| {
            let _lock = l.read();
            panic!();
        },
        |l| *l.read(),
    );
}

fn test_rw_arc_no_poison_rw<R: Raw>() {
    panic_holding::<R>(
        |l| {
            let _lock = l.read();
            panic!();
        },
        |l| *l.write(),
    );
}

fn test_ruw_arc<R: Raw>() {
    let arc = Arc::new(RwLock::<R, i32>::new(0));
    let arc2 = arc.clone();
    let writer = thread::spawn(move || {
        for _ in 0..10 {
            let mut lock = arc2.write();
            let tmp = *lock;
            *lock = -1;
            thread::yield_now();
            *lock = tmp + 1;
        }
    });
    let mut children = Vec::new();
    // Upgradable readers try to catch the writer in the act and also
    // try to touch the value.
    for _ in 0..5 {
        let arc3 = arc.clone();
        children.push(thread::spawn(move || {
            let lock = arc3.upgradable_read();
            let tmp = *lock;
            assert!(tmp >= 0);
            thread::yield_now();
            let mut lock = RwLockUpgradableReadGuard::upgrade(lock);
            assert_eq!(tmp, *lock);
            *lock = -1;
            thread::yield_now();
            *lock = tmp + 1;
        }));
    }
    // Readers try to catch the writers in the act.
    for _ in 0..5 {
        let arc4 = arc.clone();
        children.push(thread::spawn(move || {
            let lock = arc4.read();
            assert!(*lock >= 0);
        }));
    }
    for c in children {
        assert!(c.join().is_ok());
    }
    writer.join().unwrap();
    assert_eq!(*arc.read(), 15);
}

fn test_rw_arc<R: Raw>() {
    let arc = Arc::new(RwLock::<R, i32>::new(0));
    let arc2 = arc.clone();
    let (tx, rx) = channel();
    thread::spawn(move || {
        let mut lock = arc2.write();
        for _ in 0..10 {
            let tmp = *lock;
            *lock = -1;
            thread::yield_now();
            *lock = tmp + 1;
        }
        tx.send(()).unwrap();
    });
    // Readers try to catch the writer in the act.
    let children: Vec<_> = (0..5)
        .map(|_| {
            let arc3 = arc.clone();
            thread::spawn(move || {
                let lock = arc3.read();
                assert!(*lock >= 0);
            })
        })
        .collect();
    for c in children {
        assert!(c.join().is_ok());
    }
    rx.recv().unwrap();
    assert_eq!(*arc.read(), 10);
}

fn test_rw_arc_access_in_unwind<R: Raw>() {
    let arc = Arc::new(RwLock::<R, isize>::new(1));
    let arc2 = arc.clone();
    let _ = thread::spawn(move || {
        struct Unwinder<R: Raw> {
            i: Arc<RwLock<R, isize>>,
        }
        impl<R: Raw> Drop for Unwinder<R> {
            fn drop(&mut self) {
                *self.i.write() += 1;
            }
        }
        let _u = Unwinder { i: arc2 };
        panic!();
    })
    .join();
    assert_eq!(*arc.read(), 2);
}

fn test_rwlock_unsized<R: Raw>() {
    let rw: &RwLock<R, [i32]> = &RwLock::new([1, 2, 3]);
    {
        let b = &mut *rw.write();
        b[0] = 4;
        b[2] = 5;
    }
    let comp: &[i32] = &[4, 2, 5];
    assert_eq!(&*rw.read(), comp);
}

/// parking_lot's `test_read_with_waiting_writer`: a waiting writer keeps new
/// readers out although no writer holds the lock (waited for by polling
/// `try_read` from other threads, since our locks have no
/// `has_parked_threads`). The holder's own nested read passes the writer
/// where `Props` says so, and fails like everyone's otherwise.
fn test_read_with_waiting_writer<R: Raw>() {
    let lock = Arc::new(RwLock::<R, ()>::new(()));
    let reader = lock.read();
    let lock2 = lock.clone();
    let writer = thread::spawn(move || drop(lock2.write()));
    let deadline = Instant::now() + Duration::from_secs(10);
    while thread::scope(|s| s.spawn(|| lock.try_read().is_some()).join().unwrap()) {
        assert!(
            Instant::now() < deadline,
            "a waiting writer never kept new readers out"
        );
        thread::sleep(Duration::from_millis(1));
    }
    if R::NESTED_READ_PASSES_WRITER {
        assert!(lock.try_read().is_some());
        drop(lock.read());
    } else {
        assert!(lock.try_read().is_none());
    }
    drop(reader);
    writer.join().unwrap();
}

/// parking_lot's `test_rwlock_recursive`, with `read` for `read_recursive`
/// (for locks whose `read` is recursive): a nested read while a writer
/// waits for the outer one.
fn test_rwlock_recursive<R: Raw>() {
    assert!(R::NESTED_READ_PASSES_WRITER);
    let arc = Arc::new(RwLock::<R, i32>::new(1));
    let arc2 = arc.clone();
    let lock1 = arc.read();
    let t = thread::spawn(move || {
        let _lock = arc2.write();
    });
    thread::sleep(Duration::from_millis(100));
    // A read that queued behind the writer would deadlock here.
    let lock2 = arc.read();
    assert_eq!(*lock2, 1);
    drop(lock1);
    drop(lock2);
    t.join().unwrap();
}

fn test_rwlock_try_read<R: Raw>() {
    let lock = RwLock::<R, isize>::new(0);
    {
        let read_guard = lock.read();
        assert!(
            lock.try_read().is_some(),
            "try_read should succeed while read_guard is in scope"
        );
        drop(read_guard);
    }
    {
        let upgrade_guard = lock.upgradable_read();
        assert!(
            lock.try_read().is_some(),
            "try_read should succeed while upgrade_guard is in scope"
        );
        drop(upgrade_guard);
    }
    {
        let write_guard = lock.write();
        assert!(
            lock.try_read().is_none(),
            "try_read should fail while write_guard is in scope"
        );
        drop(write_guard);
    }
}

/// parking_lot's `test_rwlock_try_write`, with std's check through a mapped
/// read guard.
fn test_rwlock_try_write<R: Raw>() {
    let lock = RwLock::<R, isize>::new(0);
    {
        let read_guard = lock.read();
        assert!(
            lock.try_write().is_none(),
            "try_write should fail while read_guard is in scope"
        );
        assert!(lock.is_locked());
        assert!(!lock.is_locked_exclusive());
        drop(read_guard);
    }
    {
        let mapped = RwLockReadGuard::map(lock.read(), |_| &());
        assert!(
            lock.try_write().is_none(),
            "try_write should fail while a mapped read guard is in scope"
        );
        drop(mapped);
    }
    {
        let upgrade_guard = lock.upgradable_read();
        assert!(
            lock.try_write().is_none(),
            "try_write should fail while upgrade_guard is in scope"
        );
        assert!(lock.is_locked());
        assert!(!lock.is_locked_exclusive());
        drop(upgrade_guard);
    }
    {
        let write_guard = lock.write();
        assert!(
            lock.try_write().is_none(),
            "try_write should fail while write_guard is in scope"
        );
        assert!(lock.is_locked());
        assert!(lock.is_locked_exclusive());
        drop(write_guard);
    }
    assert!(lock.try_write().is_some());
}

fn test_rwlock_try_upgrade<R: Raw>() {
    let lock = RwLock::<R, isize>::new(0);
    {
        let read_guard = lock.read();
        assert!(
            lock.try_upgradable_read().is_some(),
            "try_upgradable_read should succeed while read_guard is in scope"
        );
        drop(read_guard);
    }
    {
        let upgrade_guard = lock.upgradable_read();
        assert!(
            lock.try_upgradable_read().is_none(),
            "try_upgradable_read should fail while upgrade_guard is in scope"
        );
        drop(upgrade_guard);
    }
    {
        let write_guard = lock.write();
        assert!(
            lock.try_upgradable_read().is_none(),
            "try_upgradable_read should fail while write_guard is in scope"
        );
        drop(write_guard);
    }
}

fn test_into_inner<R: Raw>() {
    let m = RwLock::<R, _>::new(NonCopy(10));
    assert_eq!(m.into_inner(), NonCopy(10));
}

fn test_into_inner_drop<R: Raw>() {
    struct Foo(Arc<AtomicUsize>);
    impl Drop for Foo {
        fn drop(&mut self) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }
    let drops = Arc::new(AtomicUsize::new(0));
    let m = RwLock::<R, _>::new(Foo(drops.clone()));
    assert_eq!(drops.load(Ordering::SeqCst), 0);
    {
        let _inner = m.into_inner();
        assert_eq!(drops.load(Ordering::SeqCst), 0);
    }
    assert_eq!(drops.load(Ordering::SeqCst), 1);
}

fn test_get_mut<R: Raw>() {
    let mut m = RwLock::<R, _>::new(NonCopy(10));
    *m.get_mut() = NonCopy(20);
    assert_eq!(m.into_inner(), NonCopy(20));
}

fn test_rwlockguard_sync<R: Raw>()
where
    R::SharedGuard: Sync,
    R::ExclusiveGuard: Sync,
{
    fn sync<T: Sync>(_: T) {}
    let rwlock = RwLock::<R, ()>::new(());
    sync(rwlock.read());
    sync(rwlock.write());
}

/// A read guard shared by reference with scoped threads (both peers' read
/// guards are `Sync`): they read through it while the owner holds it, and
/// a writer among them cannot get in.
fn test_read_guard_shared_with_scoped_threads<R: Raw>()
where
    R::SharedGuard: Sync,
{
    let lock = RwLock::<R, Vec<u32>>::new(vec![1, 2, 3]);
    let guard = lock.read();
    let shared = &guard;
    let sums: Vec<u32> = thread::scope(|s| {
        let readers: Vec<_> = (0..3)
            .map(|_| s.spawn(move || shared.iter().sum::<u32>()))
            .collect();
        let writer = s.spawn(|| lock.try_write().is_none());
        assert!(
            writer.join().unwrap(),
            "a writer got in past a shared read guard"
        );
        readers.into_iter().map(|r| r.join().unwrap()).collect()
    });
    assert_eq!(sums, [6, 6, 6]);
    // The owner still holds its read.
    assert_eq!(guard.len(), 3);
    assert!(lock.try_write().is_none());
    drop(guard);
    lock.write().push(4);
    assert_eq!(lock.read().len(), 4);
}

fn test_downgrade_basic<R: Raw>() {
    let r = RwLock::<R, ()>::new(());
    let write_guard = r.write();
    let _read_guard = RwLockWriteGuard::downgrade(write_guard);
    assert!(r.try_write().is_none());
}

/// parking_lot's `test_rwlock_downgrade`, with std's `test_downgrade_observe`
/// sizes: writers increment, downgrade, and see their own value.
fn test_rwlock_downgrade<R: Raw>() {
    const W: usize = 20;
    const N: usize = 100;
    let rw = Arc::new(RwLock::<R, usize>::new(0));
    let handles: Vec<_> = (0..W)
        .map(|_| {
            let rw = rw.clone();
            thread::spawn(move || {
                for _ in 0..N {
                    let mut writer = rw.write();
                    *writer += 1;
                    let cur = *writer;
                    let reader = RwLockWriteGuard::downgrade(writer);
                    assert_eq!(cur, *reader);
                }
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    assert_eq!(*rw.read(), W * N);
}

/// std's `test_downgrade_atomic`: writers queued behind a write lock cannot
/// slip in between the downgrade and the downgraded read.
fn test_downgrade_atomic<R: Raw>() {
    const NEW_VALUE: i32 = -1;
    const W: usize = 20;
    let rwlock = Arc::new(RwLock::<R, i32>::new(0));
    let mut main_write_guard = rwlock.write();
    let handles: Vec<_> = (0..W)
        .map(|_| {
            let rwlock = rwlock.clone();
            thread::spawn(move || {
                *rwlock.write() += 1;
            })
        })
        .collect();
    // Let the writers queue (not strictly necessary).
    thread::sleep(Duration::from_millis(42));
    *main_write_guard = NEW_VALUE;
    let main_read_guard = RwLockWriteGuard::downgrade(main_write_guard);
    assert_eq!(*main_read_guard, NEW_VALUE, "`downgrade` was not atomic");
    drop(main_read_guard);
    for h in handles {
        h.join().unwrap();
    }
    assert_eq!(*rwlock.read(), W as i32 + NEW_VALUE);
}

fn test_rwlock_debug<R: Raw>() {
    let x = RwLock::<R, _>::new(vec![0u8, 10]);
    assert_eq!(format!("{x:?}"), "RwLock { data: [0, 10] }");
    let _lock = x.write();
    assert_eq!(format!("{x:?}"), "RwLock { data: <locked> }");
}

fn test_clone_through_guard<R: Raw>() {
    let rwlock = RwLock::<R, _>::new(Arc::new(1));
    let a = rwlock.read();
    // This must clone the protected Arc, not the read guard.
    let b = a.clone();
    assert_eq!(Arc::strong_count(&b), 2);
}

fn test_rw_write_is_locked<R: Raw>() {
    let lock = RwLock::<R, isize>::new(0);
    {
        let _read_guard = lock.read();
        assert!(lock.is_locked());
        assert!(!lock.is_locked_exclusive());
    }
    {
        let _write_guard = lock.write();
        assert!(lock.is_locked());
        assert!(lock.is_locked_exclusive());
    }
    assert!(!lock.is_locked());
}

fn test_mapping_mapped_guard<R: Raw>() {
    let mut lock = RwLock::<R, _>::new([0; 4]);
    let guard = RwLockWriteGuard::map(lock.write(), |arr| &mut arr[..2]);
    let mut guard = MappedRwLockWriteGuard::map(guard, |slice| &mut slice[1..]);
    assert_eq!(guard.len(), 1);
    guard[0] = 42;
    drop(guard);
    assert_eq!(*lock.get_mut(), [0, 42, 0, 0]);

    let guard = RwLockReadGuard::map(lock.read(), |arr| &arr[..2]);
    let guard = MappedRwLockReadGuard::map(guard, |slice| &slice[1..]);
    assert_eq!(*guard, [42]);
    drop(guard);
    assert_eq!(*lock.get_mut(), [0, 42, 0, 0]);
}

/// std's `panic_while_mapping_read_unlocked_no_poison` and
/// `panic_while_mapping_write_unlocked_poison`, less the poisoning: a panic
/// in a mapping closure releases the lock.
fn panic_while_mapping_releases<R: Raw>() {
    let lock = RwLock::<R, ()>::new(());
    let released = |what: &str| assert!(lock.try_write().is_some(), "{what}");
    let _ = panic::catch_unwind(AssertUnwindSafe(|| {
        let _g = RwLockReadGuard::map::<(), _>(lock.read(), |_| panic!());
    }));
    released("RwLockReadGuard::map");
    let _ = panic::catch_unwind(AssertUnwindSafe(|| {
        let _g = RwLockReadGuard::try_map::<(), _>(lock.read(), |_| panic!());
    }));
    released("RwLockReadGuard::try_map");
    let _ = panic::catch_unwind(AssertUnwindSafe(|| {
        let g = RwLockReadGuard::map::<(), _>(lock.read(), |v| v);
        let _g = MappedRwLockReadGuard::map::<(), _>(g, |_| panic!());
    }));
    released("MappedRwLockReadGuard::map");
    let _ = panic::catch_unwind(AssertUnwindSafe(|| {
        let _g = RwLockWriteGuard::map::<(), _>(lock.write(), |_| panic!());
    }));
    released("RwLockWriteGuard::map");
    let _ = panic::catch_unwind(AssertUnwindSafe(|| {
        let _g = RwLockWriteGuard::try_map::<(), _>(lock.write(), |_| panic!());
    }));
    released("RwLockWriteGuard::try_map");
    let _ = panic::catch_unwind(AssertUnwindSafe(|| {
        let g = RwLockWriteGuard::map::<(), _>(lock.write(), |v| v);
        let _g = MappedRwLockWriteGuard::map::<(), _>(g, |_| panic!());
    }));
    released("MappedRwLockWriteGuard::map");
}

fn test_read_guard_unlocked<R: Raw>() {
    let lock = RwLock::<R, usize>::new(1);
    let mut read_guard = lock.read();
    assert!(lock.try_write().is_none());
    RwLockReadGuard::unlocked(&mut read_guard, || {
        assert!(lock.try_write().is_some());
    });
    assert!(lock.try_write().is_none());
    assert_eq!(*read_guard, 1);
}

fn test_write_guard_unlocked<R: Raw>() {
    let lock = RwLock::<R, usize>::new(1);
    let mut write_guard = lock.write();
    assert!(lock.try_write().is_none());
    RwLockWriteGuard::unlocked(&mut write_guard, || {
        assert!(lock.try_write().is_some());
    });
    assert!(lock.try_write().is_none());
    *write_guard += 1;
    drop(write_guard);
    assert_eq!(*lock.read(), 2);
}

/// A thread inside its read section never sees the lock exclusively
/// locked (`is_locked_exclusive`), not even while a writer (or an
/// upgrader) waits for that read to end: no write can be held then.
/// (`PerCpuRwLock` said yes once the writer had the underlying write lock
/// and was revoking the bias, waiting for this very read.)
fn test_read_section_never_sees_exclusive<R: Raw>() {
    for upgrade in [false, true] {
        let lock = Arc::new(RwLock::<R, u32>::new(0));
        let read = lock.read();
        let writer = {
            let lock = lock.clone();
            thread::spawn(move || {
                if upgrade {
                    *RwLockUpgradableReadGuard::upgrade(lock.upgradable_read()) += 1;
                } else {
                    *lock.write() += 1;
                }
            })
        };
        let start = Instant::now();
        let mut seen = false;
        while start.elapsed() < Duration::from_millis(200) {
            if lock.is_locked_exclusive() {
                seen = true;
                break;
            }
            thread::yield_now();
        }
        assert!(lock.is_locked());
        drop(read);
        writer.join().unwrap();
        assert!(
            !seen,
            "a read section saw the lock exclusively locked (upgrade: {upgrade})"
        );
        assert_eq!(*lock.read(), 1);
    }
}

/// Instantiates the suite for one raw lock: `[...]` lists the tests that
/// suite runs beyond the common ones, each with optional attributes.
macro_rules! rwlock_suite {
    ($module:ident, $raw:ty, [$($(#[$attr:meta])* $extra:ident),* $(,)?]) => {
        mod $module {
            use std::thread;

            rwlock_suite!(@tests $raw;
                smoke, frob, test_rw_arc_no_poison_wr, test_rw_arc_no_poison_ww,
                test_rw_arc_no_poison_rr, test_rw_arc_no_poison_rw, test_rw_arc,
                test_rw_arc_access_in_unwind, test_rwlock_unsized, test_read_with_waiting_writer,
                test_rwlock_try_read, test_rwlock_try_write, test_rwlock_try_upgrade,
                test_into_inner, test_into_inner_drop, test_get_mut, test_rwlockguard_sync,
                test_read_guard_shared_with_scoped_threads, test_downgrade_basic,
                test_rwlock_downgrade, test_downgrade_atomic, test_rwlock_debug,
                test_clone_through_guard, test_rw_write_is_locked, test_mapping_mapped_guard,
                panic_while_mapping_releases, test_read_guard_unlocked,
                test_write_guard_unlocked, test_read_section_never_sees_exclusive,
            );
            $(
                #[test]
                $(#[$attr])*
                fn $extra() {
                    super::$extra::<$raw>();
                }
            )*

            /// parking_lot's `test_issue_203`: a lock in a thread-local
            /// whose destructor write-locks it, in a thread that also read
            /// another lock (the platform's per-thread state is torn down
            /// around it).
            #[test]
            fn test_issue_203() {
                struct Bar(lock_api::RwLock<$raw, ()>);
                impl Drop for Bar {
                    fn drop(&mut self) {
                        let _n = self.0.write();
                    }
                }
                thread_local! {
                    static B: Bar = const { Bar(lock_api::RwLock::new(())) };
                }
                thread::spawn(|| {
                    B.with(|_| ());
                    let a = lock_api::RwLock::<$raw, ()>::new(());
                    let _a = a.read();
                })
                .join()
                .unwrap();
            }
        }
    };
    (@tests $raw:ty; $($test:ident),* $(,)?) => {
        $(
            #[test]
            fn $test() {
                super::$test::<$raw>();
            }
        )*
    };
}

rwlock_suite!(qrwlock, scalelock::RawQRwLock, [test_ruw_arc]);
// `test_ruw_arc` on PerCpuRwLock too: its readers each read once, at the
// start, and rarely meet an upgrade's revocation; `upgrade` against readers
// that keep reading is `tests/percpu_upgrade_race.rs`.
rwlock_suite!(
    percpu_rwlock,
    scalelock::RawPerCpuRwLock,
    [test_ruw_arc, test_rwlock_recursive]
);
