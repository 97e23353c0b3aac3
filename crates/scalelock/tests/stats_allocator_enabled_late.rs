//! A global allocator built on a `QSpinLock`, taken once before allocations
//! go through it, as the `LockClass` docs ask, but while statistics were
//! still switched off (they start off): that acquisition registered no
//! class. Statistics switched on later, the allocator's next acquisition
//! registers its class from inside the allocator, with the lock held. The
//! registration must not allocate through the global allocator, or the
//! thread comes back to the lock it holds and waits for itself.
//! Run with `--features stats`, and with `--features stats,lockdep`.
#![cfg(feature = "stats")]

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::time::Duration;

use scalelock::{ClassRef, LockClass, QSpinLock, RawQSpinLock};

static CLASS: LockClass = LockClass::new("allocator enabled late");
static SITE_LOCK: QSpinLock<u64> =
    QSpinLock::from_raw(RawQSpinLock::with_class(ClassRef::here()), 0);
static LOCK: QSpinLock<u64> =
    QSpinLock::from_raw(RawQSpinLock::with_class(ClassRef::of(&CLASS)), 0);

std::thread_local! {
    /// Which lock this thread's allocations take, if any.
    static THROUGH: Cell<Option<&'static QSpinLock<u64>>> = const { Cell::new(None) };
}

struct OnALock;

impl OnALock {
    fn locked<R>(&self, f: impl FnOnce() -> R) -> R {
        match THROUGH.with(Cell::get) {
            None => f(),
            Some(lock) => {
                let mut guard = lock.lock();
                *guard += 1;
                f()
            }
        }
    }
}

// SAFETY: `System`'s, with a lock taken around each call.
unsafe impl GlobalAlloc for OnALock {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller's contract is `System`'s.
        self.locked(|| unsafe { System.alloc(layout) })
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: the caller's contract is `System`'s.
        self.locked(|| unsafe { System.dealloc(ptr, layout) })
    }
}

#[global_allocator]
static ALLOCATOR: OnALock = OnALock;

fn through(lock: &'static QSpinLock<u64>) {
    THROUGH.with(|t| t.set(Some(lock)));
    let v: Vec<u64> = (0..1000).collect();
    let s = format!("{}", v.iter().sum::<u64>());
    assert_eq!(s, "499500");
    drop(v);
    THROUGH.with(|t| t.set(None));
}

#[test]
fn a_class_registered_from_inside_the_allocator_does_not_wait_for_itself() {
    // A hang fails the test instead of the whole run.
    std::thread::spawn(|| {
        std::thread::sleep(Duration::from_secs(20));
        let _ = std::io::Write::write_all(
            &mut std::io::stderr(),
            b"the allocator's lock waited for itself (class registration)\n",
        );
        std::process::abort();
    });
    // As the docs ask, each lock is taken once before allocations go
    // through it; but with both hooks switched off, which registers nothing.
    #[cfg(feature = "lockdep")]
    scalelock::lockdep::set_enabled(false);
    drop(SITE_LOCK.lock());
    drop(LOCK.lock());
    scalelock::stats::enable();
    // A `static` class and a construction-site class.
    std::thread::spawn(|| through(&LOCK)).join().unwrap();
    std::thread::spawn(|| through(&SITE_LOCK)).join().unwrap();
    let snap = scalelock::stats::snapshot();
    for name in ["allocator enabled late", "stats_allocator_enabled_late.rs"] {
        let c = snap
            .classes
            .iter()
            .find(|c| c.name.contains(name))
            .unwrap_or_else(|| panic!("{name}: {snap:?}"));
        assert!(c.write.acquisitions > 0, "{name}: {c:?}");
    }
}
