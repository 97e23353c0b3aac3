//! parking_lot's `ReentrantMutex` tests (the `#[cfg(test)]` module of
//! parking_lot 0.13's `src/remutex.rs`, the version our dev-dependency and
//! comparisons use), ported to scalelock's `ReentrantMutex`: a user who
//! switches should find that everything those tests rely on still holds.
//!
//! Each test is written once, generic over the raw mutex underneath, and
//! `remutex_suite!` instantiates the suite for `ReentrantMutex` (the queued
//! spinlock on the default platform) and for the same over `SpinPlatform`
//! (no queue nodes, no parking).
//!
//! Ported elsewhere: `test_serde` is in `features_serde.rs` (it needs the
//! `serde` feature; serde_json instead of postcard, which we do not
//! depend on).
#![cfg(not(any(loom, shuttle)))]

use std::cell::RefCell;
use std::sync::Arc;
use std::sync::mpsc::channel;
use std::thread;

use lock_api::RawMutexFair;
use scalelock::RawThreadId;

/// What a raw mutex of the suite must be.
trait Raw: RawMutexFair + Send + Sync + 'static {}
impl<R: RawMutexFair + Send + Sync + 'static> Raw for R {}

type ReentrantMutex<R, T> = lock_api::ReentrantMutex<R, RawThreadId, T>;
type ReentrantMutexGuard<'a, R, T> = lock_api::ReentrantMutexGuard<'a, R, RawThreadId, T>;

fn smoke<R: Raw>() {
    let m = ReentrantMutex::<R, _>::new(2);
    {
        let a = m.lock();
        {
            let b = m.lock();
            {
                let c = m.lock();
                assert_eq!(*c, 2);
            }
            assert_eq!(*b, 2);
        }
        assert_eq!(*a, 2);
    }
}

fn is_mutex<R: Raw>() {
    let m = Arc::new(ReentrantMutex::<R, _>::new(RefCell::new(0)));
    let m2 = m.clone();
    let lock = m.lock();
    let child = thread::spawn(move || {
        let lock = m2.lock();
        assert_eq!(*lock.borrow(), 4950);
    });
    for i in 0..100 {
        let lock = m.lock();
        *lock.borrow_mut() += i;
    }
    drop(lock);
    child.join().unwrap();
}

fn trylock_works<R: Raw>() {
    let m = Arc::new(ReentrantMutex::<R, _>::new(()));
    let m2 = m.clone();
    let _lock = m.try_lock().unwrap();
    let _lock2 = m.try_lock().unwrap();
    thread::spawn(move || {
        let lock = m2.try_lock();
        assert!(lock.is_none());
    })
    .join()
    .unwrap();
    let _lock3 = m.try_lock().unwrap();
}

fn test_reentrant_mutex_debug<R: Raw>() {
    let mutex = ReentrantMutex::<R, _>::new(vec![0u8, 10]);

    assert_eq!(format!("{:?}", mutex), "ReentrantMutex { data: [0, 10] }");
}

fn test_reentrant_mutex_bump<R: Raw>() {
    let mutex = Arc::new(ReentrantMutex::<R, _>::new(()));
    let mutex2 = mutex.clone();

    let mut guard = mutex.lock();

    let (tx, rx) = channel();

    thread::spawn(move || {
        let _guard = mutex2.lock();
        tx.send(()).unwrap();
    });

    // `bump()` repeatedly until the thread starts up and requests the lock
    while rx.try_recv().is_err() {
        ReentrantMutexGuard::bump(&mut guard);
    }
}

macro_rules! remutex_suite {
    ($module:ident, $raw:ty) => {
        mod $module {
            remutex_suite!(@tests $raw;
                smoke, is_mutex, trylock_works, test_reentrant_mutex_debug,
                test_reentrant_mutex_bump,
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

remutex_suite!(qspinlock, scalelock::RawQSpinLock);
remutex_suite!(
    qspinlock_spin_platform,
    scalelock::RawQSpinLock<scalelock::platform::SpinPlatform>
);

/// The alias is the type the suite ran as `qspinlock`.
#[test]
fn alias_is_the_tested_type() {
    let m: scalelock::ReentrantMutex<u8> = ReentrantMutex::<scalelock::RawQSpinLock, u8>::new(1);
    assert_eq!(*m.lock(), 1);
}
