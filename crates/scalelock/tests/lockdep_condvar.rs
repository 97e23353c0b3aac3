//! Lockdep through a condvar wait: the mutex leaves the waiter's held
//! stack while it waits and is back on it after the re-lock, which lockdep
//! checks like any acquisition.
//! Run: `cargo test -p scalelock --features lockdep --test lockdep_condvar`
#![cfg(feature = "lockdep")]

mod hook_lock;

use hook_lock::{on_thread, wait_until};
use scalelock::{ClassRef, Condvar, LockClass, QSpinLock, RawQSpinLock, lockdep};

static OUTER: LockClass = LockClass::new("condvar-outer");
static INNER: LockClass = LockClass::new("condvar-inner");
static LO: QSpinLock<()> = QSpinLock::from_raw(RawQSpinLock::with_class(ClassRef::of(&OUTER)), ());
static LI: QSpinLock<bool> =
    QSpinLock::from_raw(RawQSpinLock::with_class(ClassRef::of(&INNER)), false);

/// A wait on the inner lock while holding the outer one: the held stack
/// has both before and after (the wait's unlock popped the inner lock and
/// its re-lock pushed it again, once), and the re-lock (outer -> inner
/// again) reports nothing.
#[test]
fn wait_keeps_the_held_stack_right() {
    static CV: Condvar = Condvar::new();
    let waiter = std::thread::spawn(|| {
        on_thread("condvar-waiter", || {
            let _o = LO.lock();
            let mut g = LI.lock();
            assert_eq!(lockdep::held_count(), 2);
            CV.wait_while(&mut g, |ready| !*ready);
            assert_eq!(lockdep::held_count(), 2);
            drop(g);
            assert_eq!(lockdep::held_count(), 1);
        })
    });
    wait_until("the waiter waits", || CV.raw().waiters() == 1);
    let notifier = on_thread("condvar-notifier", || {
        let mut g = LI.lock();
        *g = true;
        drop(g);
        assert!(CV.notify_one());
        assert_eq!(lockdep::held_count(), 0);
    });
    assert_eq!(notifier, None);
    assert_eq!(waiter.join().unwrap(), None, "no lockdep report");
    assert!(!LI.is_locked());
    assert!(!LO.is_locked());
}

static LATER_M: LockClass = LockClass::new("condvar-later-M");
static LATER_X: LockClass = LockClass::new("condvar-later-X");
static LM: QSpinLock<()> =
    QSpinLock::from_raw(RawQSpinLock::with_class(ClassRef::of(&LATER_M)), ());
static LX: QSpinLock<()> =
    QSpinLock::from_raw(RawQSpinLock::with_class(ClassRef::of(&LATER_X)), ());
static LATER: std::sync::Mutex<Vec<(String, bool)>> = std::sync::Mutex::new(Vec::new());

fn record_later(r: &lockdep::Report) {
    let s = format!("{r}");
    if s.contains("condvar-later") {
        // Whether the waiter still held M when it was told.
        LATER.lock().unwrap().push((s, LM.is_locked()));
    }
}

/// Review: a wait on M while holding X, taken after M, re-locks M under X
/// (X -> M, against the M -> X just recorded): a notifier that takes M and
/// then X deadlocks with the woken waiter. Lockdep checked it only at the
/// re-lock, after the wait gave M up (with the default panic, inside the
/// wait's abort-on-unwind: the process aborted). As `bump` does, the wait
/// must check its re-acquisition before it unlocks anything.
#[test]
fn a_wait_under_a_later_lock_is_reported_before_it_unlocks() {
    static CV: Condvar = Condvar::new();
    lockdep::set_report_handler(Some(record_later));
    on_thread("condvar-later", || {
        let mut m = LM.lock();
        let _x = LX.lock();
        let _ = CV.wait_for(&mut m, std::time::Duration::from_millis(1));
    });
    lockdep::set_report_handler(None);
    let got = LATER.lock().unwrap().clone();
    assert_eq!(got.len(), 1, "{got:?}");
    assert!(got[0].1, "reported after the wait gave M up: {}", got[0].0);
}
