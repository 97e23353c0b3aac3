//! Lockdep: taking a lock this thread already holds in a mode that blocks
//! is reported before the thread waits for itself.
//! Run: `cargo test -p scalelock --features lockdep --test lockdep_recursion`
#![cfg(feature = "lockdep")]

mod hook_lock;

use std::panic::{AssertUnwindSafe, catch_unwind};

use hook_lock::HookRwLock;
use scalelock::{ClassRef, LockClass, RefreshOnce, SeqLock, lockdep};

/// The panic message of `f`, if it panicked.
fn report_of(f: impl FnOnce()) -> Option<String> {
    catch_unwind(AssertUnwindSafe(f))
        .err()
        .map(|e| e.downcast::<String>().map(|s| *s).unwrap_or_default())
}

#[test]
fn seqlock_writer_lock_taken_twice() {
    static S: SeqLock<u32> = SeqLock::new(0);
    let r = report_of(|| {
        let _g = S.lock();
        let _again = S.lock();
    })
    .expect("reported instead of deadlocking");
    assert!(r.contains("possible recursive locking"), "{r}");
    assert!(r.contains("\"SeqLock\" (write, SeqLock at"), "{r}");
    assert!(r.contains("<- the same lock"), "{r}");
    assert!(r.contains("not recursive"), "{r}");
    // The outer guard unwound; the stack is empty again.
    assert!(S.try_lock().is_some());
    assert_eq!(lockdep::held_count(), 0);
}

#[test]
fn two_locks_of_one_class_are_not_recursion() {
    static C: LockClass = LockClass::new("rec-same-class");
    let a: SeqLock<u8> = SeqLock::with_class(0, ClassRef::of(&C));
    let b: SeqLock<u8> = SeqLock::with_class(0, ClassRef::of(&C));
    assert_eq!(
        report_of(|| {
            let _a = a.lock();
            let _b = b.lock();
            assert_eq!(lockdep::held_count(), 2);
        }),
        None
    );
    assert_eq!(lockdep::held_count(), 0);
}

#[test]
fn rwlock_modes() {
    static C: LockClass = LockClass::new("rec-rw");
    static L: HookRwLock = HookRwLock::new(ClassRef::of(&C));
    // A second fair read can queue behind a writer that waits for the
    // first: reported.
    let r = report_of(|| {
        let _r1 = L.read();
        let _r2 = L.read();
    })
    .expect("fair read twice");
    assert!(r.contains("a second fair read queues behind"), "{r}");
    // Recursive reads are not blocked by readers.
    assert_eq!(
        report_of(|| {
            let _r1 = L.read_recursive();
            let _r2 = L.read_recursive();
            let _r3 = L.read();
        })
        .as_deref()
        .map(|r| r.contains("(read, other")),
        Some(true),
        "a fair read after recursive reads still queues behind writers"
    );
    assert_eq!(
        report_of(|| {
            let _r1 = L.read();
            let _r2 = L.read_recursive();
        }),
        None
    );
    // Read then write, write then (recursive) read: waits for itself.
    assert!(
        report_of(|| {
            let _r = L.read();
            let _w = L.write();
        })
        .is_some()
    );
    assert!(
        report_of(|| {
            let _w = L.write();
            let _r = L.read_recursive();
        })
        .is_some()
    );
    // A try-lock of a held lock just fails: not reported.
    assert_eq!(
        report_of(|| {
            let _w = L.write();
            assert!(L.try_lock(scalelock::Access::Write).is_none());
        }),
        None
    );
    assert_eq!(lockdep::held_count(), 0);
}

#[test]
fn refresh_inside_its_own_update() {
    static R: RefreshOnce<u64> = RefreshOnce::new(0);
    let r = report_of(|| {
        R.refresh(|v| R.refresh(|w| w + 1) + v);
    })
    .expect("the inner refresh would wait for its own update");
    assert!(r.contains("\"RefreshOnce\" (write, RefreshOnce"), "{r}");
    assert!(!R.is_refreshing(), "the outer update was abandoned");
    assert_eq!(R.refresh(|v| v + 1), 1);
    assert_eq!(lockdep::held_count(), 0);
}

/// Past `MAX_HELD`, an acquisition is not recorded on the held stack but
/// is still checked against the locks on it.
#[test]
fn past_the_held_stack_an_acquisition_is_still_checked() {
    use scalelock::QSpinLock;
    let locks: Vec<QSpinLock<()>> = (0..lockdep::MAX_HELD).map(|_| QSpinLock::new(())).collect();
    let extra = QSpinLock::new(());
    let r = report_of(|| {
        let _held: Vec<_> = locks.iter().map(|l| l.lock()).collect();
        assert_eq!(lockdep::held_count(), lockdep::MAX_HELD);
        // Not recorded: the stack is full.
        let _extra = extra.lock();
        assert_eq!(lockdep::held_count(), lockdep::MAX_HELD);
        // Checked all the same: a lock on the stack taken again.
        let _again = locks[0].lock();
    })
    .expect("checked past MAX_HELD, reported instead of deadlocking");
    assert!(r.contains("possible recursive locking"), "{r}");
    assert_eq!(lockdep::held_count(), 0);
}

/// The lockdep docs' list of guards that are `Send` (released on another
/// thread, their entry stays on the taker's held stack): `PerCpuRwLock`'s
/// write and upgradable guards and `SeqLock`'s write guard are among them,
/// `PerCpuRwLock`'s read guards are not.
#[test]
fn write_guards_released_on_another_thread_stay_on_the_takers_stack() {
    fn send<T: Send>(_: &T) {}
    static P: scalelock::PerCpuRwLock<u32> = scalelock::PerCpuRwLock::new(0);
    static U: scalelock::PerCpuRwLock<u32> = scalelock::PerCpuRwLock::new(0);
    static S: SeqLock<u32> = SeqLock::new(0);
    let before = lockdep::held_count();
    let w = P.write();
    send(&w);
    std::thread::spawn(move || drop(w)).join().unwrap();
    let u = U.upgradable_read();
    send(&u);
    std::thread::spawn(move || drop(u)).join().unwrap();
    let s = S.lock();
    send(&s);
    std::thread::spawn(move || drop(s)).join().unwrap();
    assert_eq!(
        lockdep::held_count(),
        before + 3,
        "the taker's stack keeps them"
    );
}

/// `SeqLock::raw_lock()` is the writer lock, in the seqlock's class; taking
/// it under this thread's own write guard is the same self-deadlock as a
/// second `lock()`, reported whatever the layout (lockdep named the seqlock
/// by its own address, which differs from the writer lock's unless `lock`
/// comes first, and saw "another instance").
#[test]
fn taking_a_seqlocks_writer_lock_under_its_write_guard_is_reported() {
    use lock_api::RawMutex;
    use std::time::{Duration, Instant};
    static C: LockClass = LockClass::new("seqlock-raw-lock");
    // `[u128; 2]`: the layout puts `lock` at offset 40 here (at 0 for a
    // `u64`, where the two addresses happen to agree).
    static S: SeqLock<[u128; 2]> = SeqLock::with_class([0; 2], ClassRef::of(&C));
    let t = std::thread::spawn(|| {
        let _g = S.lock();
        // Deadlocks unless lockdep reports (panics) first.
        let held = S.raw_lock().lock();
        let _ = held;
    });
    let start = Instant::now();
    while !t.is_finished() {
        assert!(
            start.elapsed() < Duration::from_secs(2),
            "self-deadlock on the seqlock's writer lock, not reported"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(t.join().is_err(), "lockdep reported the recursion");
}
