//! A small reader-writer lock built on the public hook API, as a lock
//! outside the crate would be: the stats and lockdep tests drive it where
//! they need read modes or exact control over waiting.
#![allow(dead_code)] // each test binary uses part of it

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Condvar, Mutex};

use scalelock::hook::{self, Held};
use scalelock::{Access, ClassRef, LockKind};

const WRITER: u32 = 1 << 31;

/// Writer bit plus reader count in `state`; waiters sleep on a condvar
/// (each sleep is a park, each return a wake).
pub struct HookRwLock {
    state: AtomicU32,
    waiters: Mutex<u32>,
    cv: Condvar,
    class: ClassRef,
}

pub struct Guard<'a> {
    lock: &'a HookRwLock,
    write: bool,
    held: Held,
}

impl HookRwLock {
    pub const fn new(class: ClassRef) -> Self {
        Self {
            state: AtomicU32::new(0),
            waiters: Mutex::new(0),
            cv: Condvar::new(),
            class,
        }
    }

    fn addr(&self) -> usize {
        self as *const Self as usize
    }

    fn try_take(&self, write: bool) -> bool {
        let s = self.state.load(Ordering::Relaxed);
        if write {
            s == 0
                && self
                    .state
                    .compare_exchange(0, WRITER, Ordering::Acquire, Ordering::Relaxed)
                    .is_ok()
        } else {
            s & WRITER == 0
                && self
                    .state
                    .compare_exchange(s, s + 1, Ordering::Acquire, Ordering::Relaxed)
                    .is_ok()
        }
    }

    /// Takes the lock with `access` (`Write`, `Read` or `RecursiveRead`).
    pub fn lock(&self, access: Access) -> Guard<'_> {
        let write = access == Access::Write;
        let mut p = hook::start(self.class, LockKind::Other, self.addr(), access);
        if !self.try_take(write) {
            p.contended();
            let mut w = self.waiters.lock().unwrap();
            *w += 1;
            hook::queue_depth(self.class, LockKind::Other, access, *w);
            while !self.try_take(write) {
                hook::park(self.class, LockKind::Other, access);
                w = self.cv.wait(w).unwrap();
                let still_held = self.state.load(Ordering::Relaxed) & WRITER != 0
                    || (write && self.state.load(Ordering::Relaxed) != 0);
                hook::wake(self.class, LockKind::Other, access, still_held);
            }
            *w -= 1;
        }
        Guard {
            lock: self,
            write,
            held: p.acquired(),
        }
    }

    pub fn try_lock(&self, access: Access) -> Option<Guard<'_>> {
        let write = access == Access::Write;
        self.try_take(write).then(|| Guard {
            lock: self,
            write,
            held: hook::try_acquired(self.class, LockKind::Other, self.addr(), access),
        })
    }

    pub fn write(&self) -> Guard<'_> {
        self.lock(Access::Write)
    }

    pub fn read(&self) -> Guard<'_> {
        self.lock(Access::Read)
    }

    pub fn read_recursive(&self) -> Guard<'_> {
        self.lock(Access::RecursiveRead)
    }
}

impl Drop for Guard<'_> {
    fn drop(&mut self) {
        let l = self.lock;
        if self.write {
            l.state.fetch_and(!WRITER, Ordering::Release);
        } else {
            l.state.fetch_sub(1, Ordering::Release);
        }
        let w = l.waiters.lock().unwrap();
        if *w != 0 {
            // Counted by the releaser, on its own access's row.
            let access = if self.write {
                Access::Write
            } else {
                Access::Read
            };
            hook::handoff(l.class, LockKind::Other, access);
            l.cv.notify_all();
        }
        drop(w);
        std::mem::replace(&mut self.held, Held::NONE).release(l.addr());
    }
}

/// Polls `cond` until it holds, failing after 30 s.
pub fn wait_until(what: &str, cond: impl Fn() -> bool) {
    let start = std::time::Instant::now();
    while !cond() {
        assert!(
            start.elapsed() < std::time::Duration::from_secs(30),
            "timed out waiting until {what}"
        );
        std::thread::sleep(std::time::Duration::from_micros(200));
    }
}

/// Runs `f` on a thread named `name`; its panic message, if it panicked.
pub fn on_thread(name: &str, f: impl FnOnce() + Send + 'static) -> Option<String> {
    let r = std::thread::Builder::new()
        .name(name.into())
        .spawn(f)
        .unwrap()
        .join();
    r.err().map(|e| match e.downcast::<String>() {
        Ok(s) => *s,
        Err(e) => e
            .downcast::<&str>()
            .map(|s| s.to_string())
            .unwrap_or_default(),
    })
}

/// Turns statistics on and times every hold (no test changes it).
#[cfg(feature = "stats")]
pub fn stats_setup() {
    scalelock::stats::enable();
    scalelock::stats::set_hold_sample(1);
}

/// The statistics of class `name`; panics if there are none.
#[cfg(feature = "stats")]
pub fn class_stats(name: &str) -> scalelock::stats::ClassStats {
    scalelock::stats::snapshot()
        .class(name)
        .cloned()
        .unwrap_or_else(|| panic!("no statistics for class {name}"))
}

/// A thread holding a read of `lock` taken after a few others (the bias
/// on: a fast read, in its slot), until [`FastReader::release`].
pub struct FastReader {
    go: std::sync::mpsc::Sender<()>,
    thread: std::thread::JoinHandle<()>,
}

impl FastReader {
    /// Returns once the read is held.
    pub fn hold(lock: &'static scalelock::PerCpuRwLock<u64>) -> Self {
        let (held_tx, held_rx) = std::sync::mpsc::channel();
        let (go, go_rx) = std::sync::mpsc::channel::<()>();
        let thread = std::thread::spawn(move || {
            for _ in 0..4 {
                let _ = *lock.read();
            }
            let g = lock.read();
            held_tx.send(()).unwrap();
            go_rx.recv().unwrap();
            drop(g);
        });
        held_rx.recv().unwrap();
        FastReader { go, thread }
    }

    /// Lets the read go and waits for the thread.
    pub fn release(self) {
        self.go.send(()).unwrap();
        self.thread.join().unwrap();
    }
}
