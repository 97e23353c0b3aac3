//! Lockdep: lock-order cycles are reported at the acquisition that closes
//! them, before anything deadlocks, naming both chains; orders that cannot
//! deadlock (try-locks, recursive reads of shared holders, type classes)
//! are not reported.
//! Run: `cargo test -p scalelock --features lockdep --test lockdep_order`
#![cfg(feature = "lockdep")]

mod hook_lock;

use hook_lock::{HookRwLock, on_thread};
use scalelock::{ClassRef, LockClass, RefreshOnce, SeqLock};

#[test]
fn ab_ba_is_reported_without_deadlocking() {
    static A: LockClass = LockClass::new("order-A");
    static B: LockClass = LockClass::new("order-B");
    static LA: SeqLock<u32> = SeqLock::with_class(0, ClassRef::of(&A));
    static LB: SeqLock<u32> = SeqLock::with_class(0, ClassRef::of(&B));

    let first = on_thread("first", || {
        let a = LA.lock();
        let b = LB.lock();
        drop(b);
        drop(a);
    });
    assert_eq!(first, None, "A then B alone is fine");
    let report = on_thread("second", || {
        let _b = LB.lock();
        let _a = LA.lock(); // closes B -> A -> B: reported, not taken
        unreachable!("lockdep must report before taking A");
    })
    .expect("B then A must be reported");
    assert!(
        report.contains("possible circular locking dependency"),
        "{report}"
    );
    assert!(
        report.contains("thread 'second' is taking \"order-A\""),
        "{report}"
    );
    assert!(report.contains("#0 \"order-B\""), "{report}");
    assert!(
        report.contains("chain 1 (this thread, new): \"order-B\" (write) -> \"order-A\" (write)"),
        "{report}"
    );
    assert!(
        report.contains(
            "\"order-A\" (write) -> \"order-B\" (write): first on thread 'first' while holding [\"order-A\"]"
        ),
        "{report}"
    );
    // Nothing stayed locked: B's guard unwound, A was never taken.
    assert!(LA.try_lock().is_some());
    assert!(LB.try_lock().is_some());
    // Once reported, the same order is let through (reported once).
    assert_eq!(
        on_thread("third", || {
            let _b = LB.lock();
            let _a = LA.lock();
        }),
        None
    );
}

#[test]
fn a_longer_cycle_names_every_step() {
    static C1: LockClass = LockClass::new("ring-1");
    static C2: LockClass = LockClass::new("ring-2");
    static C3: LockClass = LockClass::new("ring-3");
    static L1: SeqLock<u8> = SeqLock::with_class(0, ClassRef::of(&C1));
    static L2: SeqLock<u8> = SeqLock::with_class(0, ClassRef::of(&C2));
    static L3: SeqLock<u8> = SeqLock::with_class(0, ClassRef::of(&C3));
    assert_eq!(
        on_thread("t12", || {
            let _a = L1.lock();
            let _b = L2.lock();
        }),
        None
    );
    assert_eq!(
        on_thread("t23", || {
            let _a = L2.lock();
            let _b = L3.lock();
        }),
        None
    );
    let report = on_thread("t31", || {
        let _a = L3.lock();
        let _b = L1.lock();
    })
    .expect("3 -> 1 closes 1 -> 2 -> 3");
    let chain: Vec<&str> = report
        .lines()
        .skip_while(|l| !l.starts_with("chain 2"))
        .filter(|l| l.contains("first on thread"))
        .collect();
    assert_eq!(chain.len(), 2, "{report}");
    assert!(
        chain[0].contains("\"ring-1\" (write) -> \"ring-2\" (write): first on thread 't12'"),
        "{report}"
    );
    assert!(
        chain[1].contains("\"ring-2\" (write) -> \"ring-3\" (write): first on thread 't23'"),
        "{report}"
    );
}

#[test]
fn construction_site_classes_are_named_by_their_site() {
    struct Pair {
        x: SeqLock<u8>,
        y: SeqLock<u8>,
    }
    let p: &'static Pair = Box::leak(Box::new(Pair {
        x: SeqLock::with_class(0, ClassRef::here()),
        y: SeqLock::with_class(0, ClassRef::here()),
    }));
    assert_eq!(
        on_thread("xy", move || {
            let _x = p.x.lock();
            let _y = p.y.lock();
        }),
        None
    );
    let report = on_thread("yx", move || {
        let _y = p.y.lock();
        let _x = p.x.lock();
    })
    .expect("reported");
    assert!(report.contains("lockdep_order.rs:"), "{report}");
    assert!(report.contains("class constructed at"), "{report}");
}

#[test]
fn try_locks_add_no_dependency_into_them() {
    static A: LockClass = LockClass::new("try-A");
    static B: LockClass = LockClass::new("try-B");
    static LA: SeqLock<u8> = SeqLock::with_class(0, ClassRef::of(&A));
    static LB: SeqLock<u8> = SeqLock::with_class(0, ClassRef::of(&B));
    assert_eq!(
        on_thread("a-then-try-b", || {
            let _a = LA.lock();
            let _b = LB.try_lock().expect("free");
        }),
        None
    );
    // B then A would close A -> B if the try-lock had recorded it.
    assert_eq!(
        on_thread("b-then-a", || {
            let _b = LB.lock();
            let _a = LA.lock();
        }),
        None
    );
    // But a try-locked lock, once held, does order what is taken under it:
    // B (try) then A is recorded, so A then B (blocking) closes it.
    static C: LockClass = LockClass::new("try-C");
    static D: LockClass = LockClass::new("try-D");
    static LC: SeqLock<u8> = SeqLock::with_class(0, ClassRef::of(&C));
    static LD: SeqLock<u8> = SeqLock::with_class(0, ClassRef::of(&D));
    assert_eq!(
        on_thread("try-d-then-c", || {
            let _d = LD.try_lock().expect("free");
            let _c = LC.lock();
        }),
        None
    );
    assert!(
        on_thread("c-then-d", || {
            let _c = LC.lock();
            let _d = LD.lock();
        })
        .is_some()
    );
}

/// T1 reads A then writes B; T2 reads B then reads A. With fair reads a
/// writer queued on A makes T2 wait for it, and it waits for T1: reported.
#[test]
fn fair_read_inversion_is_reported() {
    static A: LockClass = LockClass::new("fair-A");
    static B: LockClass = LockClass::new("fair-B");
    static LA: HookRwLock = HookRwLock::new(ClassRef::of(&A));
    static LB: HookRwLock = HookRwLock::new(ClassRef::of(&B));
    assert_eq!(
        on_thread("t1", || {
            let _a = LA.read();
            let _b = LB.write();
        }),
        None
    );
    let report = on_thread("t2", || {
        let _b = LB.read();
        let _a = LA.read();
    })
    .expect("fair reads can deadlock through a queued writer");
    assert!(
        report.contains("\"fair-A\" (read) -> \"fair-B\" (write)"),
        "{report}"
    );
}

/// The same shape with recursive reads of A: T2's read of A is not blocked
/// by T1's read, and nothing else blocks it: not reported.
#[test]
fn recursive_read_of_a_shared_holder_is_not_reported() {
    static A: LockClass = LockClass::new("rec-A");
    static B: LockClass = LockClass::new("rec-B");
    static LA: HookRwLock = HookRwLock::new(ClassRef::of(&A));
    static LB: HookRwLock = HookRwLock::new(ClassRef::of(&B));
    assert_eq!(
        on_thread("t1", || {
            let _a = LA.read_recursive();
            let _b = LB.write();
        }),
        None
    );
    assert_eq!(
        on_thread("t2", || {
            let _b = LB.read();
            let _a = LA.read_recursive();
        }),
        None
    );
    // But T2's recursive read does wait for a writer of A: taking A for
    // writing, then B, closes A -> B -(recursive read)-> A.
    let report = on_thread("t3", || {
        let _a = LA.write();
        let _b = LB.write();
    })
    .expect("a writer of A blocks T2's recursive read");
    assert!(
        report.contains("\"rec-B\" (read) -> \"rec-A\" (recursive read): first on thread 't2'"),
        "{report}"
    );
}

/// Write-then-read against write-then-read: each reader waits for the
/// other's writer.
#[test]
fn read_after_write_inversion_is_reported() {
    static E: LockClass = LockClass::new("raw-E");
    static F: LockClass = LockClass::new("raw-F");
    static LE: HookRwLock = HookRwLock::new(ClassRef::of(&E));
    static LF: HookRwLock = HookRwLock::new(ClassRef::of(&F));
    assert_eq!(
        on_thread("t1", || {
            let _e = LE.write();
            let _f = LF.read_recursive();
        }),
        None
    );
    let report = on_thread("t2", || {
        let _f = LF.write();
        let _e = LE.read_recursive();
    })
    .expect("reported");
    assert!(
        report.contains("\"raw-E\" (write) -> \"raw-F\" (recursive read)"),
        "{report}"
    );
}

/// `refresh` waits for the running update, whose `f` may take locks: a
/// caller holding L that refreshes, against an `f` that takes L.
#[test]
fn refresh_orders_against_locks_taken_in_its_update() {
    static L: LockClass = LockClass::new("refresh-L");
    static R: LockClass = LockClass::new("refresh-R");
    static LL: SeqLock<u8> = SeqLock::with_class(0, ClassRef::of(&L));
    static RR: RefreshOnce<u64> = RefreshOnce::with_class(0, ClassRef::of(&R));
    assert_eq!(
        on_thread("holds-L-refreshes", || {
            let _l = LL.lock();
            RR.refresh(|v| v + 1);
        }),
        None
    );
    let report = on_thread("updater-takes-L", || {
        RR.refresh(|v| {
            let _l = LL.lock();
            v + 1
        });
    })
    .expect("reported");
    assert!(
        report.contains("\"refresh-R\" (write, RefreshOnce"),
        "{report}"
    );
    // The unwound update was abandoned; the lock works.
    assert!(!RR.is_refreshing());
    assert_eq!(RR.refresh(|v| v + 1), 2);
}

/// Locks without a class of their own share their type's class, which
/// merges unrelated locks: their order is not checked.
#[test]
fn type_classes_are_not_order_checked() {
    static S: SeqLock<u8> = SeqLock::new(0);
    static R: RefreshOnce<u8> = RefreshOnce::new(0);
    assert_eq!(
        on_thread("s-then-r", || {
            let _s = S.lock();
            R.refresh(|v| *v);
        }),
        None
    );
    assert_eq!(
        on_thread("r-then-s", || {
            R.refresh(|v| {
                let _s = S.lock();
                *v
            });
        }),
        None
    );
}

#[test]
fn locks_past_the_held_stack_are_not_checked_or_lost() {
    // More locks held at once than the stack records (each its own
    // instance of the type class).
    let locks: Vec<SeqLock<u32>> = (0..scalelock::lockdep::MAX_HELD + 6)
        .map(|_| SeqLock::new(0))
        .collect();
    let outcome = on_thread("deep", move || {
        let before = scalelock::lockdep::held_count();
        let guards: Vec<_> = locks.iter().map(|l| l.lock()).collect();
        assert_eq!(
            scalelock::lockdep::held_count() - before,
            scalelock::lockdep::MAX_HELD - before,
            "the stack records up to its capacity"
        );
        drop(guards);
        assert_eq!(scalelock::lockdep::held_count(), before, "left entries");
        // The stack works on.
        let g = locks[0].lock();
        assert_eq!(scalelock::lockdep::held_count(), before + 1);
        drop(g);
    });
    assert_eq!(outcome, None);
}

/// Review: a recursive read held between two locks does not make the outer
/// lock reach the inner one. T1 writes A, reads B recursively, writes C;
/// T2 writes C then A: T1 holds A and waits for C, T2 holds C and waits
/// for A, whatever B is. `dependencies` stopped at B (B -(SR)-> C), and
/// A -(ER)-> B -(SR)-> C is no deadlock path (a read of B does not block
/// a recursive read of it), so A -> C was never recorded.
#[test]
fn a_recursive_read_in_between_still_orders_the_locks_around_it() {
    static A: LockClass = LockClass::new("between-A");
    static B: LockClass = LockClass::new("between-B");
    static C: LockClass = LockClass::new("between-C");
    static LA: HookRwLock = HookRwLock::new(ClassRef::of(&A));
    static LB: HookRwLock = HookRwLock::new(ClassRef::of(&B));
    static LC: HookRwLock = HookRwLock::new(ClassRef::of(&C));
    assert_eq!(
        on_thread("t1", || {
            let _a = LA.write();
            let _b = LB.read_recursive();
            let _c = LC.write();
        }),
        None
    );
    let report = on_thread("t2", || {
        let _c = LC.write();
        let _a = LA.write();
    })
    .expect("C then A closes A -> C -> A (T1 holds A while it waits for C)");
    assert!(report.contains("between-A"), "{report}");
}

/// Review: a lock taken again in a mode that lets it through (a reentrant
/// read of a PerCpuRwLock it already reads; a read under its own
/// upgradable read) gets no dependency into it, yet `dependencies` stopped
/// at it as if the locks below it reached the new lock through it. T1
/// reads P, locks X, reads P again, locks Y: X -> Y was never recorded,
/// and T2 locking Y then X (a real deadlock with T1) went unreported.
#[test]
fn a_lock_taken_again_in_between_still_orders_the_locks_around_it() {
    use scalelock::{PerCpuRwLock, QRwLock, QSpinLock, RawPerCpuRwLock, RawQRwLock, RawQSpinLock};
    static P: LockClass = LockClass::new("again-P");
    static X: LockClass = LockClass::new("again-X");
    static Y: LockClass = LockClass::new("again-Y");
    static LP: PerCpuRwLock<()> =
        PerCpuRwLock::from_raw(RawPerCpuRwLock::with_class(ClassRef::of(&P)), ());
    static LX: QSpinLock<()> = QSpinLock::from_raw(RawQSpinLock::with_class(ClassRef::of(&X)), ());
    static LY: QSpinLock<()> = QSpinLock::from_raw(RawQSpinLock::with_class(ClassRef::of(&Y)), ());
    assert_eq!(
        on_thread("t1", || {
            let _p = LP.read();
            let _x = LX.lock();
            let _p2 = LP.read(); // never waits: no dependency into P
            let _y = LY.lock();
        }),
        None
    );
    on_thread("t2", || {
        let _y = LY.lock();
        let _x = LX.lock();
    })
    .expect("Y then X closes X -> Y -> X (T1 holds X while it waits for Y)");

    // The same through a read under the thread's own upgradable read.
    static Q: LockClass = LockClass::new("again-Q");
    static Z: LockClass = LockClass::new("again-Z");
    static W: LockClass = LockClass::new("again-W");
    static LQ: QRwLock<()> = QRwLock::from_raw(RawQRwLock::with_class(ClassRef::of(&Q)), ());
    static LZ: QSpinLock<()> = QSpinLock::from_raw(RawQSpinLock::with_class(ClassRef::of(&Z)), ());
    static LW: QSpinLock<()> = QSpinLock::from_raw(RawQSpinLock::with_class(ClassRef::of(&W)), ());
    assert_eq!(
        on_thread("t3", || {
            let _u = LQ.upgradable_read();
            let _z = LZ.lock();
            let _r = LQ.read(); // under its upgradable read: never waits
            let _w = LW.lock();
        }),
        None
    );
    on_thread("t4", || {
        let _w = LW.lock();
        let _z = LZ.lock();
    })
    .expect("W then Z closes Z -> W -> Z (T3 holds Z while it waits for W)");

    // And once the upgradable read is given up, the read taken under it
    // (no dependency into it) is the lock's only entry: the stack alone no
    // longer tells that it did not record the locks below it.
    static S: LockClass = LockClass::new("again-S");
    static V: LockClass = LockClass::new("again-V");
    static T: LockClass = LockClass::new("again-T");
    static LS: QRwLock<()> = QRwLock::from_raw(RawQRwLock::with_class(ClassRef::of(&S)), ());
    static LV: QSpinLock<()> = QSpinLock::from_raw(RawQSpinLock::with_class(ClassRef::of(&V)), ());
    static LT: QSpinLock<()> = QSpinLock::from_raw(RawQSpinLock::with_class(ClassRef::of(&T)), ());
    assert_eq!(
        on_thread("t5", || {
            let u = LS.upgradable_read();
            let _v = LV.lock();
            let _r = LS.read(); // under its upgradable read: never waits
            drop(u);
            let _t = LT.lock();
        }),
        None
    );
    on_thread("t6", || {
        let _t = LT.lock();
        let _v = LV.lock();
    })
    .expect("T then V closes V -> T -> V (T5 holds V while it waits for T)");
}

/// Review: a report's recorded chain names the first origin of each edge,
/// whatever type of it the deadlock path uses. A -> B was first recorded
/// by T0's read of A and recursive read of B (no deadlock with T2: T2's
/// read of B does not block T0's recursive read), then by T1 writing A
/// and B. T2 reading B and writing A deadlocks with T1 only; the report
/// named T0's dependency.
#[test]
fn the_recorded_chain_is_the_one_that_deadlocks() {
    static A: LockClass = LockClass::new("chain-A");
    static B: LockClass = LockClass::new("chain-B");
    static LA: HookRwLock = HookRwLock::new(ClassRef::of(&A));
    static LB: HookRwLock = HookRwLock::new(ClassRef::of(&B));
    assert_eq!(
        on_thread("chain-t0", || {
            let _a = LA.read();
            let _b = LB.read_recursive();
        }),
        None
    );
    assert_eq!(
        on_thread("chain-t1", || {
            let _a = LA.write();
            let _b = LB.write();
        }),
        None
    );
    let report = on_thread("chain-t2", || {
        let _b = LB.read();
        let _a = LA.write();
    })
    .expect("B read then A write deadlocks with T1");
    assert!(
        report.contains("\"chain-A\" (write) -> \"chain-B\" (write): first on thread 'chain-t1'"),
        "{report}"
    );
}
