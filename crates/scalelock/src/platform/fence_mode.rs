//! Which form the asymmetric fences take, decided once per process.
//!
//! The std platform's fences are either a compiler fence (light) against a
//! `membarrier` (heavy), or `fence(SeqCst)` on both sides. A light side may
//! use the compiler-fence form only if *every* heavy side that can pair with
//! it issues the membarrier. So the answer must never change once any
//! thread acted on it: the first answer sticks (`UNKNOWN -> DECIDING ->
//! READY | UNAVAILABLE`, one `cmpxchg` elects the single thread that asks
//! the kernel), and no heavy side acts before the answer exists (heavy
//! sides that find it undecided wait for it). A light side that finds it
//! undecided uses the full fence, which pairs with either heavy form, and
//! moves on. A racing registration that fails transiently (ENOMEM in a busy
//! multithreaded process) can therefore not turn `READY` into `UNAVAILABLE`
//! under the feet of readers already relying on it.

use crate::platform::DefaultPlatform;
use crate::sync::atomic::{AtomicU8, Ordering};
use crate::wait::Backoff;

/// Nobody has asked yet.
const UNKNOWN: u8 = 0;
/// One thread is registering with the kernel.
const DECIDING: u8 = 1;
/// Registered: light = compiler fence, heavy = membarrier.
const READY: u8 = 2;
/// Not available: both sides are `fence(SeqCst)`.
const UNAVAILABLE: u8 = 3;

/// The decision: see the module docs.
pub(crate) struct FenceMode(AtomicU8);

impl FenceMode {
    /// Undecided.
    #[cfg(not(loom))]
    pub(crate) const fn new() -> Self {
        Self(AtomicU8::new(UNKNOWN))
    }

    /// Undecided.
    #[cfg(loom)]
    pub(crate) fn new() -> Self {
        Self(AtomicU8::new(UNKNOWN))
    }

    /// For a heavy side: whether the asymmetric form is in use, deciding
    /// with `register` (called by at most one thread, ever) on first use,
    /// and waiting for another thread's decision in progress.
    #[cfg_attr(not(test), allow(dead_code))]
    #[inline]
    pub(crate) fn asymmetric(&self, register: impl FnOnce() -> bool) -> bool {
        self.asymmetric_unless(register, || false)
    }

    /// [`asymmetric`](Self::asymmetric), except that a heavy side that
    /// finds the decision in progress and `deciding_here()` (it runs inside
    /// `register`, on the deciding thread: a lock taken by an allocation
    /// there) does not wait for it, which would be for ever: it gets
    /// `false`, the full-fence form. That pairs with every light side
    /// meanwhile (they find the decision in progress and use the full fence
    /// too), and the light sides that find the answer later come after it
    /// (the answer is stored, Release, after `register` returned).
    #[inline]
    pub(crate) fn asymmetric_unless(
        &self,
        register: impl FnOnce() -> bool,
        deciding_here: impl FnOnce() -> bool,
    ) -> bool {
        // Acquire pairs with the Release store of the decision: the
        // registration (a syscall) came first.
        match self.0.load(Ordering::Acquire) {
            READY => true,
            UNAVAILABLE => false,
            DECIDING if deciding_here() => false,
            _ => self.decide(register, true).unwrap_or(false),
        }
    }

    /// For a light side: `Some(true)` if it may use the compiler fence,
    /// `Some(false)` or `None` (decision in progress in another thread) if
    /// it must use the full fence.
    #[inline]
    pub(crate) fn light_may_skip_fence(&self, register: impl FnOnce() -> bool) -> Option<bool> {
        // Acquire as in `asymmetric`.
        match self.0.load(Ordering::Acquire) {
            READY => Some(true),
            UNAVAILABLE => Some(false),
            _ => self.decide(register, false),
        }
    }

    /// Whether a light side may use the compiler fence, as far as known
    /// without deciding: `false` means ask
    /// [`light_may_skip_fence`](Self::light_may_skip_fence). Acquire as in
    /// `asymmetric`.
    #[inline]
    pub(crate) fn light_may_skip_fence_quick(&self) -> bool {
        self.0.load(Ordering::Acquire) == READY
    }

    /// The decision, if made (`Some(true)`: asymmetric), without making it.
    #[cfg(all(test, not(loom), not(miri)))]
    pub(crate) fn decided(&self) -> Option<bool> {
        match self.0.load(Ordering::Acquire) {
            READY => Some(true),
            UNAVAILABLE => Some(false),
            _ => None,
        }
    }

    /// Decides if nobody has yet; else waits for the decision if `wait`,
    /// or returns `None`.
    #[cold]
    fn decide(&self, register: impl FnOnce() -> bool, wait: bool) -> Option<bool> {
        if self
            .0
            .compare_exchange(UNKNOWN, DECIDING, Ordering::Relaxed, Ordering::Relaxed)
            .is_ok()
        {
            let answer = if register() { READY } else { UNAVAILABLE };
            // Release pairs with the Acquire loads of every later user.
            self.0.store(answer, Ordering::Release);
            return Some(answer == READY);
        }
        // Another thread is asking the kernel: wait for its answer rather
        // than act on a guess. The registration waits for an RCU grace period in the kernel
        // (milliseconds in a multithreaded process, 18-30 ms measured on a
        // busy 2-CPU VM): `Backoff` soon sleeps between polls, so the wait
        // does not keep a CPU from the registering thread and everyone
        // else that long (a `perf` profile of 16 threads on 2 CPUs had one
        // thread spinning here for 2.4% of the run's CPU time).
        let mut backoff = Backoff::new();
        loop {
            // Acquire as in `asymmetric`.
            match self.0.load(Ordering::Acquire) {
                READY => return Some(true),
                UNAVAILABLE => return Some(false),
                _ if !wait => return None,
                _ => backoff.snooze::<DefaultPlatform>(),
            }
        }
    }
}

/// Loom models: racing first users elect one registration, and its answer
/// is the only one anybody ever sees, even when a second registration
/// attempt would have failed. Run: `RUSTFLAGS="--cfg loom" cargo test -p
/// scalelock --lib --release fence_mode`
#[cfg(all(test, loom))]
mod loom_models {
    use super::*;
    use loom::sync::Arc;
    use loom::sync::atomic::AtomicUsize;
    use loom::thread;

    #[test]
    fn first_answer_sticks() {
        loom::model(|| {
            let mode = Arc::new(FenceMode::new());
            let calls = Arc::new(AtomicUsize::new(0));
            // Thread `i`'s registration would succeed for i = 0 and fail
            // (transiently) for i = 1.
            let users: Vec<_> = (0..2)
                .map(|i| {
                    let (mode, calls) = (mode.clone(), calls.clone());
                    thread::spawn(move || {
                        // Thread 1 asks as a light side first: it may find
                        // no answer yet, but never one that changes later.
                        let light = (i == 1)
                            .then(|| {
                                mode.light_may_skip_fence(|| {
                                    calls.fetch_add(1, Ordering::Relaxed);
                                    false
                                })
                            })
                            .flatten();
                        let first = mode.asymmetric(|| {
                            calls.fetch_add(1, Ordering::Relaxed);
                            i == 0
                        });
                        let again = mode.asymmetric(|| unreachable!("decided already"));
                        assert_eq!(first, again, "the decision changed");
                        if let Some(light) = light {
                            assert_eq!(light, first, "the light side acted on another answer");
                        }
                        first
                    })
                })
                .collect();
            let answers: Vec<bool> = users.into_iter().map(|t| t.join().unwrap()).collect();
            assert_eq!(answers[0], answers[1], "threads saw different decisions");
            assert_eq!(
                calls.load(Ordering::Relaxed),
                1,
                "registered more than once"
            );
        });
    }
}

#[cfg(all(test, not(loom), feature = "std"))]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::AtomicBool;
    use std::time::Duration;

    fn thread_cpu_ns() -> u64 {
        let t = rustix::time::clock_gettime(rustix::time::ClockId::ThreadCPUTime);
        t.tv_sec as u64 * 1_000_000_000 + t.tv_nsec as u64
    }

    /// A heavy side that finds another thread's registration in progress
    /// (which takes milliseconds in the kernel) waits for its answer off
    /// the CPU: over a 100 ms registration it uses a small part of that in
    /// CPU time (spinning, it used all of it), and gets the answer.
    #[test]
    #[cfg_attr(miri, ignore = "thread CPU time")]
    fn a_heavy_side_waits_for_a_slow_registration_asleep() {
        let mode = Arc::new(FenceMode::new());
        let started = Arc::new(AtomicBool::new(false));
        let registrar = {
            let (mode, started) = (mode.clone(), started.clone());
            std::thread::spawn(move || {
                mode.asymmetric(|| {
                    started.store(true, Ordering::Release);
                    std::thread::sleep(Duration::from_millis(100));
                    true
                })
            })
        };
        while !started.load(Ordering::Acquire) {
            std::thread::yield_now();
        }
        let cpu = thread_cpu_ns();
        let answer = mode.asymmetric(|| unreachable!("another thread is registering"));
        let cpu = thread_cpu_ns() - cpu;
        assert!(answer, "the waiter got the registrar's answer");
        assert!(registrar.join().unwrap());
        assert!(
            cpu < 30_000_000,
            "waited 100 ms for the answer using {cpu} ns of CPU"
        );
    }
}
