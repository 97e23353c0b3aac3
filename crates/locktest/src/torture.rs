//! A locktorture-style correctness run: threads hammer one lock whose data
//! carries invariants that only mutual exclusion keeps, and every critical
//! section checks them.
//!
//! The protected [`TortureData`] holds:
//! - `owner`: 0, or the id of the writer inside. A writer finds it 0 on entry
//!   and its own id on exit; a reader always finds it 0.
//! - `a`, `b`, `counter`: a writer bumps `counter` and `a`, pauses now and
//!   then (yield or a short sleep) while they disagree with `b`, then bumps
//!   `b`. Everyone who enters must see `a == b == counter`; a reader pauses
//!   between reading `a` and `b`, so a writer sneaking in is caught.
//! - At the end `counter` must equal the sum of every thread's writes: a lost
//!   update means two writers overlapped.
//!
//! The fields are read and written with volatile accesses so the compiler
//! keeps every intermediate state in memory where a racing thread would see
//! it. Under a correct lock there is no race; under a broken one the run
//! reports the first violation and exits non-zero. A lock that deadlocks or
//! loses a wake-up is caught by a watchdog after the stop flag is set.

use std::ptr::{read_volatile, write_volatile};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use crossbeam_utils::CachePadded;

use crate::locks::{Kind, Lockable};

/// The data a torture lock protects; see the module docs for its invariants.
#[derive(Debug, Default)]
pub struct TortureData {
    owner: u64,
    a: u64,
    b: u64,
    counter: u64,
}

/// What one torture run does.
#[derive(Clone, Debug)]
pub struct TortureConfig {
    /// Number of threads.
    pub threads: usize,
    /// How long they hammer the lock.
    pub seconds: f64,
    /// Share of operations that take the read lock (rwlocks only).
    pub read_pct: u8,
}

/// What one torture run found.
#[derive(Debug)]
pub struct Outcome {
    /// Write-lock operations completed, all threads.
    pub writes: u64,
    /// Read-lock operations completed, all threads.
    pub reads: u64,
    /// `counter` at the end (must equal `writes`).
    pub final_counter: u64,
    /// `Ok`, or the first violation seen.
    pub verdict: Result<(), String>,
    /// Some thread never came back out of the lock: its threads are leaked
    /// and the process should not go on to torture anything else.
    pub hung: bool,
}

/// Per-thread completed operations, padded so counting is not contention.
#[derive(Default)]
struct Tally {
    writes: AtomicU64,
    reads: AtomicU64,
}

/// State shared by the threads of one run.
struct Shared<L> {
    lock: L,
    stop: AtomicBool,
    violation: Mutex<Option<String>>,
    tallies: Vec<CachePadded<Tally>>,
    running: AtomicUsize,
}

impl<L> Shared<L> {
    /// Records the first violation and stops the run.
    fn fail(&self, msg: String) {
        let mut slot = self
            .violation
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if slot.is_none() {
            *slot = Some(msg);
        }
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// A tiny xorshift64 generator per thread.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }

    /// Sometimes gives the CPU away inside the critical section: a yield one
    /// time in 64, a 10-80 µs sleep one time in 1024.
    fn maybe_pause(&mut self) {
        let r = self.next();
        if r.is_multiple_of(1024) {
            std::thread::sleep(Duration::from_micros(10 + (r >> 32) % 70));
        } else if r % 64 == 1 {
            std::thread::yield_now();
        }
    }
}

/// The writer's critical section. Returns a violation, if any.
fn write_section(d: &mut TortureData, me: u64, rng: &mut Rng) -> Result<(), String> {
    // SAFETY (all volatile accesses below): the pointers come from `&mut`
    // fields, so they are valid and aligned. Volatile only keeps each access
    // in place; exclusivity is what the lock under test must provide.
    unsafe {
        let owner = read_volatile(&d.owner);
        if owner != 0 {
            return Err(format!(
                "writer {me} entered while writer {owner} was inside"
            ));
        }
        write_volatile(&mut d.owner, me);
        let (a, b, c) = (
            read_volatile(&d.a),
            read_volatile(&d.b),
            read_volatile(&d.counter),
        );
        if a != b || a != c {
            return Err(format!(
                "writer {me} entered to a half-done update: a={a} b={b} counter={c}"
            ));
        }
        write_volatile(&mut d.counter, c + 1);
        write_volatile(&mut d.a, a + 1);
        rng.maybe_pause();
        let b_now = read_volatile(&d.b);
        if b_now != b {
            return Err(format!(
                "writer {me}: b changed under it from {b} to {b_now}"
            ));
        }
        write_volatile(&mut d.b, b + 1);
        let owner = read_volatile(&d.owner);
        if owner != me {
            return Err(format!(
                "writer {me} found writer {owner} inside its critical section"
            ));
        }
        write_volatile(&mut d.owner, 0);
    }
    Ok(())
}

/// The reader's critical section. Returns a violation, if any.
fn read_section(d: &TortureData, me: u64, rng: &mut Rng) -> Result<(), String> {
    // SAFETY (all volatile accesses below): the pointers come from `&`
    // fields, so they are valid and aligned; nothing is written.
    unsafe {
        let owner = read_volatile(&d.owner);
        if owner != 0 {
            return Err(format!(
                "reader {me} entered while writer {owner} was inside"
            ));
        }
        let a = read_volatile(&d.a);
        rng.maybe_pause();
        let b = read_volatile(&d.b);
        let c = read_volatile(&d.counter);
        if a != b || a != c {
            return Err(format!(
                "reader {me} saw a half-done update: a={a} b={b} counter={c}"
            ));
        }
        let owner = read_volatile(&d.owner);
        if owner != 0 {
            return Err(format!(
                "writer {owner} entered while reader {me} was inside"
            ));
        }
    }
    Ok(())
}

fn worker<L: Lockable<TortureData>>(shared: &Shared<L>, index: usize, read_pct: u8) {
    let me = index as u64 + 1;
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15u64.wrapping_mul(me) | 1);
    let tally = &shared.tallies[index];
    let (mut writes, mut reads) = (0u64, 0u64);
    // Relaxed: the flag only says "stop soon"; results are read after join.
    while !shared.stop.load(Ordering::Relaxed) {
        let read = (rng.next() % 100) < u64::from(read_pct);
        let result = if read {
            shared.lock.with_read(|d| read_section(d, me, &mut rng))
        } else {
            shared.lock.with_write(|d| write_section(d, me, &mut rng))
        };
        if let Err(msg) = result {
            shared.fail(msg);
            break;
        }
        if read {
            reads += 1;
        } else {
            writes += 1;
        }
    }
    // Relaxed: read by the main thread after it joins this one.
    tally.writes.store(writes, Ordering::Relaxed);
    tally.reads.store(reads, Ordering::Relaxed);
    // Release: pairs with the watchdog's Acquire load, so a zero count means
    // every tally above is visible (the join makes that certain anyway).
    shared.running.fetch_sub(1, Ordering::Release);
}

/// Tortures lock type `L` once under `cfg`.
pub fn run<L: Lockable<TortureData> + 'static>(cfg: &TortureConfig) -> Outcome {
    let read_pct = match L::KIND {
        Kind::Mutex => 0,
        Kind::RwLock => cfg.read_pct,
    };
    let shared = Arc::new(Shared {
        lock: L::new(TortureData::default()),
        stop: AtomicBool::new(false),
        violation: Mutex::new(None),
        tallies: (0..cfg.threads)
            .map(|_| CachePadded::new(Tally::default()))
            .collect(),
        running: AtomicUsize::new(cfg.threads),
    });
    let mut handles = Vec::with_capacity(cfg.threads);
    for i in 0..cfg.threads {
        let s = Arc::clone(&shared);
        match std::thread::Builder::new()
            .name(format!("torture-{i}"))
            .spawn(move || worker(&s, i, read_pct))
        {
            Ok(h) => handles.push(h),
            Err(e) => {
                shared.fail(format!("cannot spawn thread {i} of {}: {e}", cfg.threads));
                shared.running.fetch_sub(cfg.threads - i, Ordering::Relaxed);
                break;
            }
        }
    }

    // Sleep in slices so a violation ends the run early.
    let deadline = Instant::now() + Duration::from_secs_f64(cfg.seconds);
    while !shared.stop.load(Ordering::Relaxed) {
        let now = Instant::now();
        if now >= deadline {
            break;
        }
        std::thread::sleep((deadline - now).min(Duration::from_millis(20)));
    }
    shared.stop.store(true, Ordering::Relaxed);

    // Watchdog: every thread must notice the stop flag and leave the lock.
    let grace = Duration::from_secs_f64((cfg.seconds * 2.0).max(10.0));
    let stopped = Instant::now();
    while shared.running.load(Ordering::Acquire) > 0 {
        if stopped.elapsed() > grace {
            let stuck = shared.running.load(Ordering::Relaxed);
            return Outcome {
                writes: 0,
                reads: 0,
                final_counter: 0,
                verdict: Err(format!(
                    "{stuck} of {} threads still not done {:.1}s after stop: deadlock or lost wake-up",
                    cfg.threads,
                    grace.as_secs_f64()
                )),
                hung: true,
            };
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    for h in handles {
        if h.join().is_err() {
            shared.fail("a torture thread panicked".to_string());
        }
    }

    let writes: u64 = shared
        .tallies
        .iter()
        .map(|t| t.writes.load(Ordering::Relaxed))
        .sum();
    let reads: u64 = shared
        .tallies
        .iter()
        .map(|t| t.reads.load(Ordering::Relaxed))
        .sum();
    let (final_counter, a, b, owner) = shared.lock.with_read(|d| (d.counter, d.a, d.b, d.owner));
    let violation = shared
        .violation
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .take();
    let verdict = match violation {
        Some(msg) => Err(msg),
        None if final_counter != writes => Err(format!(
            "lost updates: counter = {final_counter} but threads completed {writes} writes"
        )),
        None if a != final_counter || b != final_counter || owner != 0 => Err(format!(
            "final state broken: a={a} b={b} counter={final_counter} owner={owner}"
        )),
        None => Ok(()),
    };
    Outcome {
        writes,
        reads,
        final_counter,
        verdict,
        hung: false,
    }
}

#[cfg(test)]
mod tests {
    use std::cell::UnsafeCell;

    use super::*;

    /// A "lock" that excludes nobody: the fixture that proves the checks
    /// catch a broken lock. It is deliberately unsound (that is what it is
    /// for), so it never leaves this test module and Miri skips the test.
    struct NoLock<T>(UnsafeCell<T>);

    // SAFETY: it is not: NoLock hands out overlapping `&mut` on purpose, to
    // produce the races the torture run must detect. Every access the torture
    // sections make through it is volatile, so each race is a plain load or
    // store of a u64 in practice; nothing else uses the type.
    unsafe impl<T: Send> Sync for NoLock<T> {}

    impl<T: Send> Lockable<T> for NoLock<T> {
        const KIND: Kind = Kind::RwLock;
        fn new(value: T) -> Self {
            NoLock(UnsafeCell::new(value))
        }
        fn with_write<R>(&self, f: impl FnOnce(&mut T) -> R) -> R {
            // SAFETY: see the `Sync` impl: deliberately unexcluded.
            f(unsafe { &mut *self.0.get() })
        }
        fn with_read<R>(&self, f: impl FnOnce(&T) -> R) -> R {
            // SAFETY: see the `Sync` impl: deliberately unexcluded.
            f(unsafe { &*self.0.get() })
        }
    }

    #[test]
    #[cfg_attr(miri, ignore)]
    fn catches_a_lock_that_excludes_nobody() {
        let cfg = TortureConfig {
            threads: 4,
            seconds: 5.0,
            read_pct: 50,
        };
        let out = run::<NoLock<TortureData>>(&cfg);
        assert!(
            out.verdict.is_err(),
            "a lock without exclusion passed: {out:?}"
        );
        assert!(!out.hung);
    }

    #[test]
    fn passes_a_real_lock() {
        let cfg = TortureConfig {
            threads: 3,
            seconds: 0.2,
            read_pct: 50,
        };
        let out = run::<parking_lot::RwLock<TortureData>>(&cfg);
        assert_eq!(out.verdict, Ok(()));
        assert_eq!(out.final_counter, out.writes);
        assert!(out.writes > 0 && out.reads > 0);
    }
}
