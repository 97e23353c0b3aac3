//! `ReentrantMutex`: recursion, exclusion across threads, what another
//! thread sees while the owner holds one or more levels, release order of
//! the guards, unwinding, and the thread identity it relies on.
#![cfg(not(any(loom, shuttle)))]

use std::cell::{Cell, RefCell};
use std::collections::HashSet;
use std::panic::{self, AssertUnwindSafe};
use std::sync::mpsc::channel;
use std::sync::{Arc, Barrier};
use std::thread;

use lock_api::GetThreadId;
use scalelock::{
    ClassRef, LockClass, MappedReentrantMutexGuard, RawQSpinLock, RawThreadId, ReentrantMutex,
    ReentrantMutexGuard,
};

/// Whether a thread other than the caller can take `m` right now.
fn free_for_others<T: Send>(m: &ReentrantMutex<T>) -> bool {
    thread::scope(|s| s.spawn(|| m.try_lock().is_some()).join().unwrap())
}

#[test]
fn recursion_counts_levels() {
    let m = ReentrantMutex::new(RefCell::new(0u32));
    assert!(!m.is_locked());
    assert!(!m.is_owned_by_current_thread());
    {
        let a = m.lock();
        let b = m.lock();
        let c = m.try_lock().expect("the owner's try_lock is a nested lock");
        *a.borrow_mut() += 1;
        *b.borrow_mut() += 10;
        *c.borrow_mut() += 100;
        assert!(m.is_locked());
        assert!(m.is_owned_by_current_thread());
        drop(c);
        drop(b);
        assert!(m.is_owned_by_current_thread(), "one level left");
        assert!(!free_for_others(&m));
        assert_eq!(*a.borrow(), 111);
    }
    assert!(!m.is_locked());
    assert!(!m.is_owned_by_current_thread());
    assert!(free_for_others(&m));
}

#[test]
fn deep_recursion() {
    fn descend(m: &ReentrantMutex<Cell<u32>>, depth: u32) {
        let g = m.lock();
        g.set(g.get() + 1);
        if depth > 0 {
            descend(m, depth - 1);
        }
    }
    let m = ReentrantMutex::new(Cell::new(0));
    descend(&m, 999);
    assert_eq!(m.lock().get(), 1000);
    assert!(!m.is_locked());
}

#[test]
fn exclusion_across_threads_counter_exact() {
    const THREADS: usize = 4;
    const ROUNDS: u64 = 5_000;
    // A non-atomic read-modify-write under two levels of the lock: a lost
    // update means two threads were inside at once.
    let m = Arc::new(ReentrantMutex::new(Cell::new(0u64)));
    let handles: Vec<_> = (0..THREADS)
        .map(|_| {
            let m = m.clone();
            thread::spawn(move || {
                for i in 0..ROUNDS {
                    let outer = m.lock();
                    let v = outer.get();
                    if i % 64 == 0 {
                        thread::yield_now();
                    }
                    let inner = m.lock();
                    inner.set(v + 1);
                }
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    assert_eq!(m.lock().get(), THREADS as u64 * ROUNDS);
}

#[test]
fn try_lock_from_another_thread_fails_while_held() {
    let m = Arc::new(ReentrantMutex::new(()));
    let a = m.lock();
    assert!(!free_for_others(&m));
    let b = m.lock();
    assert!(!free_for_others(&m));
    drop(b);
    assert!(!free_for_others(&m), "one level still held");
    drop(a);
    assert!(free_for_others(&m));
    // And the other way round: held by another thread, our try_lock fails
    // and our lock waits for the release.
    let (held_tx, held_rx) = channel();
    let (go_tx, go_rx) = channel::<()>();
    let m2 = m.clone();
    let holder = thread::spawn(move || {
        let _g = m2.lock();
        let _g2 = m2.lock();
        held_tx.send(()).unwrap();
        go_rx.recv().unwrap();
    });
    held_rx.recv().unwrap();
    assert!(m.try_lock().is_none());
    assert!(m.is_locked());
    assert!(!m.is_owned_by_current_thread());
    go_tx.send(()).unwrap();
    let g = m.lock();
    assert!(m.is_owned_by_current_thread());
    drop(g);
    holder.join().unwrap();
}

#[test]
fn guards_dropped_in_any_order() {
    let m = ReentrantMutex::new(Cell::new(0));
    let a = m.lock();
    let b = m.lock();
    let c = m.lock();
    // Outer first: the inner guards keep the lock and still read the data.
    drop(a);
    assert!(!free_for_others(&m));
    b.set(1);
    drop(c);
    assert!(!free_for_others(&m));
    assert_eq!(b.get(), 1);
    drop(b);
    assert!(free_for_others(&m));
    // Guards moved into a collection and dropped from its end first.
    let mut guards: Vec<ReentrantMutexGuard<'_, Cell<i32>>> = (0..5).map(|_| m.lock()).collect();
    while let Some(g) = guards.pop() {
        assert!(!free_for_others(&m));
        drop(g);
    }
    assert!(free_for_others(&m));
}

#[test]
fn unwinding_releases_every_level() {
    let m = Arc::new(ReentrantMutex::new(Cell::new(0)));
    let r = panic::catch_unwind(AssertUnwindSafe(|| {
        let _a = m.lock();
        let _b = m.lock();
        let _c = m.lock();
        panic!("inside three levels");
    }));
    assert!(r.is_err());
    assert!(!m.is_locked());
    assert!(free_for_others(&m));
}

#[test]
fn unlock_fair_unlocked_and_bump() {
    let m = Arc::new(ReentrantMutex::new(Cell::new(0)));
    let outer = m.lock();
    let inner = m.lock();
    // A fair unlock of an inner level keeps the lock.
    ReentrantMutexGuard::unlock_fair(inner);
    assert!(!free_for_others(&m));
    // `unlocked` at the last level lets another thread in meanwhile.
    let mut outer = outer;
    let other = ReentrantMutexGuard::unlocked(&mut outer, || {
        thread::scope(|s| {
            s.spawn(|| {
                let g = m.lock();
                g.set(g.get() + 1);
            });
        });
        free_for_others(&m)
    });
    assert!(other);
    assert_eq!(outer.get(), 1);
    assert!(m.is_owned_by_current_thread());
    // `bump` with nobody waiting keeps ownership.
    ReentrantMutexGuard::bump(&mut outer);
    assert!(m.is_owned_by_current_thread());
    ReentrantMutexGuard::unlock_fair(outer);
    assert!(!m.is_locked());
}

#[test]
fn map_to_a_part() {
    let m = ReentrantMutex::new((Cell::new(1), String::from("x")));
    let g = m.lock();
    let first: MappedReentrantMutexGuard<'_, Cell<i32>> = ReentrantMutexGuard::map(g, |(a, _)| a);
    let again = m.lock();
    first.set(2);
    assert_eq!(again.0.get(), 2);
    assert_eq!(again.1, "x");
    drop(first);
    assert!(!free_for_others(&m));
    drop(again);
    assert!(free_for_others(&m));
}

#[test]
fn threads_that_exit_leave_it_free() {
    // Threads come and go, each taking the lock nested; every one leaves
    // it free, and later threads, which may get an exited thread's
    // identity, still find it held by a live owner.
    let m = Arc::new(ReentrantMutex::new(Cell::new(0u32)));
    for _ in 0..20 {
        let m = m.clone();
        thread::spawn(move || {
            let a = m.lock();
            let b = m.lock();
            b.set(a.get() + 1);
        })
        .join()
        .unwrap();
    }
    let g = m.lock();
    assert_eq!(g.get(), 20);
    for _ in 0..5 {
        assert!(!free_for_others(&m));
    }
}

#[test]
fn const_static_and_classed() {
    static PLAIN: ReentrantMutex<u32> = ReentrantMutex::new(7);
    static GRANT: LockClass = LockClass::new("remutex-grant-table");
    static CLASSED: ReentrantMutex<u32> = ReentrantMutex::from_raw(
        RawQSpinLock::with_class(ClassRef::of(&GRANT)),
        RawThreadId,
        8,
    );
    let (a, b) = (PLAIN.lock(), CLASSED.lock());
    assert_eq!(*a + *PLAIN.lock(), 14);
    assert_eq!(*b + *CLASSED.lock(), 16);
}

#[test]
fn debug_shows_data_or_locked() {
    let m = Arc::new(ReentrantMutex::new(vec![1, 2]));
    assert_eq!(format!("{m:?}"), "ReentrantMutex { data: [1, 2] }");
    let g = m.lock();
    // The owner's Debug takes a nested level and shows the data.
    assert_eq!(format!("{m:?}"), "ReentrantMutex { data: [1, 2] }");
    let m2 = m.clone();
    let other = thread::spawn(move || format!("{m2:?}")).join().unwrap();
    assert_eq!(other, "ReentrantMutex { data: <locked> }");
    drop(g);
}

#[test]
fn is_sync_and_send() {
    fn sync_send<T: Sync + Send>() {}
    // A Cell inside is fine: only the owner reaches it.
    sync_send::<ReentrantMutex<Cell<u64>>>();
    sync_send::<ReentrantMutex<RefCell<Vec<u8>>>>();
}

#[test]
fn thread_ids_nonzero_stable_and_distinct_among_live_threads() {
    const THREADS: usize = 8;
    let barrier = Arc::new(Barrier::new(THREADS));
    let ids: Vec<usize> = (0..THREADS)
        .map(|_| {
            let barrier = barrier.clone();
            thread::spawn(move || {
                let id = RawThreadId.nonzero_thread_id().get();
                // All alive at once while the ids are compared below.
                barrier.wait();
                assert_eq!(RawThreadId.nonzero_thread_id().get(), id, "stable");
                id
            })
        })
        .collect::<Vec<_>>()
        .into_iter()
        .map(|h| h.join().unwrap())
        .collect();
    let distinct: HashSet<_> = ids.iter().collect();
    assert_eq!(distinct.len(), THREADS, "{ids:x?}");
    let me = RawThreadId.nonzero_thread_id().get();
    assert!(!ids.contains(&me));
}
