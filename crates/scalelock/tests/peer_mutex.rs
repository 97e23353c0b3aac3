//! The mutex test suites of our peers, ported to scalelock's mutexes: the
//! `#[cfg(test)]` tests of parking_lot's `src/mutex.rs` and std's mutex
//! tests (`library/std/tests/sync/mutex.rs`). A user who switches from
//! either should find that everything their tests rely on still holds.
//!
//! Each test is written once, generic over the raw mutex, and
//! `mutex_suite!` instantiates the suite for every mutex: `QSpinLock` on the
//! default platform, and on `SpinPlatform` (no queue nodes, no parking: the
//! unqueued paths).
//!
//! Not ported, and why:
//! - std's poisoning tests (`test_*_poison`, `test_mutex_arc_poison*`,
//!   `panic_while_mapping_unlocked_poison`'s poison checks): lock_api
//!   mutexes do not poison; the part that applies (a panic while mapping a
//!   guard releases the lock) is `panic_while_mapping_releases`.
//! - std's `get_cloned`, `set`, `replace`, `with_mut`: std-only API with no
//!   lock_api counterpart.
//! - std's `test_needs_drop`: it checks the test's own helper types.
//! - parking_lot's `test_serde`: lock_api's `serde` feature is off.
#![cfg(not(any(loom, shuttle)))]

use std::collections::HashMap;
use std::marker::PhantomData;
use std::ops::Deref;
use std::panic::{self, AssertUnwindSafe};
use std::ptr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::channel;
use std::thread;

use lock_api::{Condvar, MappedMutexGuard, Mutex, MutexGuard, RawCondvar, RawMutex};

/// What a mutex of the suite must be.
trait Raw: RawMutex + Send + Sync + 'static {}
impl<R: RawMutex + Send + Sync + 'static> Raw for R {}

#[derive(Eq, PartialEq, Debug)]
struct NonCopy(i32);

fn smoke<R: Raw>() {
    let m = Mutex::<R, ()>::new(());
    drop(m.lock());
    drop(m.lock());
}

fn lots_and_lots<R: Raw>() {
    const J: u32 = 1000;
    const K: u32 = 3;

    fn inc<R: Raw>(m: &Mutex<R, u32>) {
        for _ in 0..J {
            *m.lock() += 1;
        }
    }

    let m = Arc::new(Mutex::<R, u32>::new(0));
    let (tx, rx) = channel();
    for _ in 0..2 * K {
        let (tx, m) = (tx.clone(), m.clone());
        thread::spawn(move || {
            inc(&m);
            tx.send(()).unwrap();
        });
    }
    drop(tx);
    for _ in 0..2 * K {
        rx.recv().unwrap();
    }
    assert_eq!(*m.lock(), J * K * 2);
}

fn try_lock<R: Raw>() {
    let m = Mutex::<R, ()>::new(());
    let guard = m.try_lock().unwrap();
    assert!(m.try_lock().is_none());
    drop(guard);
    *m.try_lock().unwrap() = ();
}

fn test_into_inner<R: Raw>() {
    let m = Mutex::<R, _>::new(NonCopy(10));
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
    let m = Mutex::<R, _>::new(Foo(drops.clone()));
    assert_eq!(drops.load(Ordering::SeqCst), 0);
    {
        let _inner = m.into_inner();
        assert_eq!(drops.load(Ordering::SeqCst), 0);
    }
    assert_eq!(drops.load(Ordering::SeqCst), 1);
}

fn test_get_mut<R: Raw>() {
    let mut m = Mutex::<R, _>::new(NonCopy(10));
    *m.get_mut() = NonCopy(20);
    assert_eq!(m.into_inner(), NonCopy(20));
}

/// A condition variable for any raw mutex, enough for parking_lot's condvar
/// test (scalelock has none of its own): a waiter releases the mutex
/// through its guard state, polls a notification count, and re-locks.
struct PollCondvar<R> {
    notified: AtomicUsize,
    _mutex: PhantomData<fn() -> R>,
}

// SAFETY: `wait` releases the mutex with the caller's guard state only after
// reading the notification count (under the mutex, so a notification that
// follows a state change made under the mutex is never missed), and stores
// the state of a new acquisition before returning; neither step panics.
unsafe impl<R: RawMutex> RawCondvar for PollCondvar<R> {
    #[allow(clippy::declare_interior_mutable_const)]
    const INIT: Self = PollCondvar {
        notified: AtomicUsize::new(0),
        _mutex: PhantomData,
    };
    type RawMutex = R;

    unsafe fn wait(&self, mutex: &R, guard: &mut R::Guard) {
        let seen = self.notified.load(Ordering::SeqCst);
        // SAFETY: the caller holds `mutex` with state `guard`; we move the
        // state out to unlock, and write a fresh one back below.
        unsafe { mutex.unlock(ptr::read(guard)) };
        while self.notified.load(Ordering::SeqCst) == seen {
            thread::yield_now();
        }
        // SAFETY: `guard` holds no live state since the unlock above.
        unsafe { ptr::write(guard, mutex.lock()) };
    }

    fn notify_one(&self) -> bool {
        self.notified.fetch_add(1, Ordering::SeqCst);
        false
    }

    fn notify_all(&self) -> usize {
        self.notified.fetch_add(1, Ordering::SeqCst);
        0
    }
}

fn test_mutex_arc_condvar<R: Raw>() {
    let pair = Arc::new((
        Mutex::<R, bool>::new(false),
        Condvar::<PollCondvar<R>>::new(),
    ));
    let pair2 = pair.clone();
    let (tx, rx) = channel();
    let t = thread::spawn(move || {
        // Wait until the parent holds the lock.
        rx.recv().unwrap();
        let (lock, cvar) = &*pair2;
        *lock.lock() = true;
        cvar.notify_one();
    });
    let (lock, cvar) = &*pair;
    let mut guard = lock.lock();
    tx.send(()).unwrap();
    assert!(!*guard);
    while !*guard {
        cvar.wait(&mut guard);
    }
    drop(guard);
    t.join().unwrap();
}

fn test_mutex_arc_nested<R: Raw>() {
    let arc = Arc::new(Mutex::<R, i32>::new(1));
    let arc2 = Arc::new(Mutex::<R, _>::new(arc));
    let (tx, rx) = channel();
    let _t = thread::spawn(move || {
        let lock = arc2.lock();
        let lock2 = lock.lock();
        assert_eq!(*lock2, 1);
        tx.send(()).unwrap();
    });
    rx.recv().unwrap();
}

fn test_mutex_arc_access_in_unwind<R: Raw>() {
    let arc = Arc::new(Mutex::<R, i32>::new(1));
    let arc2 = arc.clone();
    let _ = thread::spawn(move || {
        struct Unwinder<R: Raw> {
            i: Arc<Mutex<R, i32>>,
        }
        impl<R: Raw> Drop for Unwinder<R> {
            fn drop(&mut self) {
                *self.i.lock() += 1;
            }
        }
        let _u = Unwinder { i: arc2 };
        panic!();
    })
    .join();
    assert_eq!(*arc.lock(), 2);
}

fn test_mutex_unsized<R: Raw>() {
    let mutex: &Mutex<R, [i32]> = &Mutex::new([1, 2, 3]);
    {
        let b = &mut *mutex.lock();
        b[0] = 4;
        b[2] = 5;
    }
    let comp: &[i32] = &[4, 2, 5];
    assert_eq!(&*mutex.lock(), comp);
}

fn test_mutexguard_sync<R: Raw>()
where
    R::Guard: Sync,
{
    fn sync<T: Sync>(_: T) {}
    let mutex = Mutex::<R, ()>::new(());
    sync(mutex.lock());
}

fn test_mutex_debug<R: Raw>() {
    let mutex = Mutex::<R, _>::new(vec![0u8, 10]);
    assert_eq!(format!("{mutex:?}"), "Mutex { data: [0, 10] }");
    let _lock = mutex.lock();
    assert_eq!(format!("{mutex:?}"), "Mutex { data: <locked> }");
}

fn test_map_or_err_not_mapped<R: Raw>() {
    let mut map = HashMap::new();
    map.insert("hello".to_string(), "world".to_string());
    let mutex = Mutex::<R, _>::new(map);

    let guard = match MutexGuard::try_map_or_err(mutex.lock(), |m| m.get_mut("hello2").ok_or(1)) {
        Ok(_) => unreachable!(),
        Err((guard, err)) => {
            assert_eq!(err, 1);
            assert_eq!(guard.get("hello"), Some(&"world".to_string()));
            guard
        }
    };
    let mapped = match MutexGuard::try_map_or_err(guard, |m| m.get_mut("hello").ok_or(2)) {
        Ok(mapped) => mapped,
        Err(_) => unreachable!(),
    };
    assert_eq!(mapped.as_str(), "world");
    match MappedMutexGuard::try_map_or_err(mapped, |s| {
        if s != "world" {
            Ok(s.as_mut_str())
        } else {
            Err(3)
        }
    }) {
        Ok(_) => unreachable!(),
        Err((guard, err)) => {
            assert_eq!(guard.as_str(), "world");
            assert_eq!(err, 3);
        }
    }
    assert!(!mutex.is_locked());
}

fn test_map_or_err_mapped<R: Raw>() {
    let mut map = HashMap::new();
    map.insert("hello".to_string(), "world".to_string());
    let mutex = Mutex::<R, _>::new(map);

    let mapped = match MutexGuard::try_map_or_err(mutex.lock(), |m| m.get_mut("hello").ok_or(1)) {
        Ok(mapped) => mapped,
        Err(_) => unreachable!(),
    };
    assert_eq!(mapped.as_str(), "world");
    match MappedMutexGuard::try_map_or_err(mapped, |s| {
        if s == "world" {
            Ok(s.as_mut_str())
        } else {
            Err(2)
        }
    }) {
        Ok(mapped) => assert_eq!(mapped.deref(), "world"),
        Err(_) => unreachable!(),
    }
    assert!(!mutex.is_locked());
}

fn test_panics<R: Raw>() {
    let mutex = Mutex::<R, i32>::new(42);
    for _ in 0..3 {
        let caught = panic::catch_unwind(AssertUnwindSafe(|| {
            let _guard = mutex.lock();
            panic!("test panic with the mutex held");
        }));
        assert!(caught.is_err());
    }
    assert_eq!(
        *mutex.try_lock().expect("a panic left the mutex locked"),
        42
    );
}

fn test_mapping_mapped_guard<R: Raw>() {
    let lock = Mutex::<R, _>::new([0; 4]);
    let guard = MutexGuard::map(lock.lock(), |arr| &mut arr[..2]);
    let mut guard = MappedMutexGuard::map(guard, |slice| &mut slice[1..]);
    assert_eq!(guard.len(), 1);
    guard[0] = 42;
    drop(guard);
    assert_eq!(*lock.lock(), [0, 42, 0, 0]);
}

/// std's `panic_while_mapping_unlocked_poison`, less the poisoning: a
/// panic in a `map` or `try_map` closure releases the lock.
fn panic_while_mapping_releases<R: Raw>() {
    let lock = Mutex::<R, ()>::new(());
    let _ = panic::catch_unwind(AssertUnwindSafe(|| {
        let _guard = MutexGuard::map::<(), _>(lock.lock(), |_| panic!());
    }));
    assert!(lock.try_lock().is_some(), "MutexGuard::map");
    let _ = panic::catch_unwind(AssertUnwindSafe(|| {
        let _guard = MutexGuard::try_map::<(), _>(lock.lock(), |_| panic!());
    }));
    assert!(lock.try_lock().is_some(), "MutexGuard::try_map");
    let _ = panic::catch_unwind(AssertUnwindSafe(|| {
        let guard = MutexGuard::map::<(), _>(lock.lock(), |v| v);
        let _guard = MappedMutexGuard::map::<(), _>(guard, |_| panic!());
    }));
    assert!(lock.try_lock().is_some(), "MappedMutexGuard::map");
    let _ = panic::catch_unwind(AssertUnwindSafe(|| {
        let guard = MutexGuard::map::<(), _>(lock.lock(), |v| v);
        let _guard = MappedMutexGuard::try_map::<(), _>(guard, |_| panic!());
    }));
    assert!(lock.try_lock().is_some(), "MappedMutexGuard::try_map");
}

fn test_mutex_guard_unlocked<R: Raw>() {
    let mutex = Mutex::<R, usize>::new(1);
    let mut guard = mutex.lock();
    assert!(mutex.try_lock().is_none());
    MutexGuard::unlocked(&mut guard, || {
        assert!(mutex.try_lock().is_some());
    });
    assert!(mutex.try_lock().is_none());
    assert_eq!(*guard, 1);
}

/// Instantiates every test above for one raw mutex type.
macro_rules! mutex_suite {
    ($module:ident, $raw:ty) => {
        mod $module {
            mutex_suite!(@tests $raw;
                smoke, lots_and_lots, try_lock, test_into_inner, test_into_inner_drop,
                test_get_mut, test_mutex_arc_condvar, test_mutex_arc_nested,
                test_mutex_arc_access_in_unwind, test_mutex_unsized, test_mutexguard_sync,
                test_mutex_debug, test_map_or_err_not_mapped, test_map_or_err_mapped,
                test_panics, test_mapping_mapped_guard, panic_while_mapping_releases,
                test_mutex_guard_unlocked,
            );
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

mutex_suite!(qspinlock, scalelock::RawQSpinLock);
mutex_suite!(
    qspinlock_spin_platform,
    scalelock::RawQSpinLock<scalelock::platform::SpinPlatform>
);

/// After a fair unlock to a waiting thread the mutex is that thread's:
/// `try_lock` fails, and `is_locked` says so (`QSpinLock` reserves it for
/// its word waiter, which then takes it; `is_locked` said "free" while no
/// `try_lock` could take it).
#[test]
fn fair_unlock_to_a_waiter_leaves_the_mutex_locked() {
    use std::time::{Duration, Instant};
    let m = Arc::new(Mutex::<scalelock::RawQSpinLock, u32>::new(0));
    let mut reserved = 0;
    for _ in 0..20 {
        let g = m.lock();
        let waiter = {
            let m = m.clone();
            thread::spawn(move || *m.lock() += 1)
        };
        // The waiter is the word waiter (the pending bit) ...
        let start = Instant::now();
        // SAFETY: only the diagnostic state is read.
        while unsafe { m.raw() }.state().1 & 1 == 0 {
            assert!(start.elapsed() < Duration::from_secs(5), "no waiter");
            thread::yield_now();
        }
        // ... and asleep through its batch.
        thread::sleep(Duration::from_millis(2));
        MutexGuard::unlock_fair(g);
        let taken = m.try_lock().is_some();
        let locked = m.is_locked();
        // SAFETY: as above.
        if unsafe { m.raw() }.state().0 == 2 {
            reserved += 1;
        }
        assert!(
            taken || locked,
            "after unlock_fair to a waiter: try_lock failed and is_locked() is false"
        );
        waiter.join().unwrap();
    }
    assert!(
        reserved > 0,
        "never saw the lock reserved: the test tests nothing"
    );
}
