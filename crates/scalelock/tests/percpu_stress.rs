//! Stress tests for `PerCpuRwLock`: reader/writer exclusion checked with
//! non-atomic data, readers re-pinned to another CPU inside their read
//! sections (so they unlock on a different CPU than they locked on),
//! readers preempted inside sections (yield, sleep), nested reads of locks
//! sharing a table (slot fallback), thread churn (slot indices recycled
//! under load), both bias policies (BRAVO and Xen), and writer progress
//! under a continuous stream of readers.
#![cfg(not(loom))]

use std::cell::UnsafeCell;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use lock_api::{RawRwLock, RawRwLockDowngrade};
use scalelock::reader_table::SLOTS;
use scalelock::{RawPerCpuRwLock, ReaderTable};

const RUN: Duration = Duration::from_millis(if cfg!(miri) { 20 } else { 300 });

static XEN: ReaderTable = ReaderTable::with_inhibition(0);
static NESTED: ReaderTable = ReaderTable::new();
static BRAVO: ReaderTable = ReaderTable::with_inhibition(9);

/// Two words written by writers only, protected only by the raw lock: a
/// reader that overlaps a writer sees them differ (and TSan sees the race).
struct Shared {
    lock: RawPerCpuRwLock,
    data: UnsafeCell<[usize; 2]>,
    writes: AtomicUsize,
    reads: AtomicUsize,
}

// SAFETY: `data` is written only under the exclusive lock, read only under a
// shared one.
unsafe impl Sync for Shared {}

impl Shared {
    fn new(lock: RawPerCpuRwLock) -> Arc<Self> {
        Arc::new(Shared {
            lock,
            data: UnsafeCell::new([0, 0]),
            writes: AtomicUsize::new(0),
            reads: AtomicUsize::new(0),
        })
    }

    fn write(&self) {
        let t = self.lock.lock_exclusive();
        // SAFETY: exclusive lock held.
        let d = unsafe { &mut *self.data.get() };
        d[0] += 1;
        std::hint::spin_loop();
        d[1] += 1;
        self.writes.fetch_add(1, Ordering::Relaxed);
        // SAFETY: `t` came from `lock_exclusive` above.
        unsafe { self.lock.unlock_exclusive(t) };
    }

    /// Reads under the lock; `inside` runs in the section (may migrate,
    /// yield or sleep) and the data is checked before and after it.
    fn read(&self, inside: impl FnOnce()) {
        let t = self.lock.lock_shared();
        // SAFETY: shared lock held: no writer runs.
        let before = unsafe { *self.data.get() };
        assert_eq!(before[0], before[1], "reader overlapped a writer");
        inside();
        // SAFETY: still held.
        let after = unsafe { *self.data.get() };
        assert_eq!(before, after, "a writer ran inside a read section");
        self.reads.fetch_add(1, Ordering::Relaxed);
        // SAFETY: `t` came from `lock_shared` on this thread.
        unsafe { self.lock.unlock_shared(t) };
    }

    fn check(&self) {
        let t = self.lock.lock_shared();
        // SAFETY: shared lock held.
        let d = unsafe { *self.data.get() };
        assert_eq!(d, [self.writes.load(Ordering::Relaxed); 2]);
        // SAFETY: from `lock_shared` above.
        unsafe { self.lock.unlock_shared(t) };
    }
}

#[cfg(target_os = "linux")]
fn cpus() -> Vec<usize> {
    let set = rustix::thread::sched_getaffinity(None).expect("sched_getaffinity");
    (0..rustix::thread::CpuSet::MAX_CPU)
        .filter(|&c| set.is_set(c))
        .collect()
}

/// Moves the calling thread to `cpu` (and lets the scheduler do it now).
#[cfg(target_os = "linux")]
fn pin(cpu: usize) {
    let mut set = rustix::thread::CpuSet::new();
    set.set(cpu);
    let _ = rustix::thread::sched_setaffinity(None, &set);
    thread::yield_now();
}

#[cfg(target_os = "linux")]
fn unpin(all: &[usize]) {
    let mut set = rustix::thread::CpuSet::new();
    for &c in all {
        set.set(c);
    }
    let _ = rustix::thread::sched_setaffinity(None, &set);
}

/// Runs `readers` reader threads and `writers` writer threads for `RUN`.
/// Every `migrate_every`-th read re-pins the reader to the next CPU inside
/// its section; every `sleep_every`-th sleeps inside it (preemption).
fn hammer(
    lock: RawPerCpuRwLock,
    readers: usize,
    writers: usize,
    migrate_every: usize,
    sleep_every: usize,
) {
    let s = Shared::new(lock);
    let stop = Arc::new(AtomicBool::new(false));
    let migrated = Arc::new(AtomicUsize::new(0));
    let mut handles = Vec::new();
    for r in 0..readers {
        let (s, stop, migrated) = (s.clone(), stop.clone(), migrated.clone());
        handles.push(thread::spawn(move || {
            #[cfg(target_os = "linux")]
            let all = cpus();
            let mut i = r;
            while !stop.load(Ordering::Relaxed) {
                i += 1;
                s.read(|| {
                    #[cfg(target_os = "linux")]
                    if migrate_every != 0 && i % migrate_every == 0 && all.len() > 1 {
                        let here = rustix::thread::sched_getcpu();
                        let pos = all.iter().position(|&c| c == here).unwrap_or(0);
                        pin(all[(pos + 1) % all.len()]);
                        if rustix::thread::sched_getcpu() != here {
                            migrated.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                    if sleep_every != 0 && i % sleep_every == 0 {
                        thread::sleep(Duration::from_micros(50));
                    } else if i % 7 == 0 {
                        thread::yield_now();
                    }
                });
                #[cfg(target_os = "linux")]
                if migrate_every != 0 && i % migrate_every == 0 {
                    unpin(&all);
                }
            }
        }));
    }
    for _ in 0..writers {
        let (s, stop) = (s.clone(), stop.clone());
        handles.push(thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                s.write();
                thread::sleep(Duration::from_micros(20));
            }
        }));
    }
    thread::sleep(RUN);
    stop.store(true, Ordering::Relaxed);
    for h in handles {
        h.join().unwrap();
    }
    s.check();
    #[cfg(target_os = "linux")]
    if migrate_every != 0 && cpus().len() > 1 && !cfg!(miri) {
        assert!(
            migrated.load(Ordering::Relaxed) > 0,
            "no reader migrated inside a section"
        );
    }
    assert!(
        s.writes.load(Ordering::Relaxed) > 0,
        "writers made progress"
    );
    assert!(s.reads.load(Ordering::Relaxed) > 0, "readers made progress");
}

#[test]
fn exclusion_2_readers_1_writer() {
    hammer(RawPerCpuRwLock::new(), 2, 1, 0, 0);
}

#[test]
fn exclusion_readers_migrate_inside_sections() {
    hammer(RawPerCpuRwLock::new(), 4, 1, 3, 0);
}

#[test]
fn exclusion_readers_preempted_inside_sections() {
    hammer(RawPerCpuRwLock::new(), 8, 2, 0, 5);
}

#[test]
fn exclusion_16_threads_migrating_and_sleeping_xen_mode() {
    hammer(RawPerCpuRwLock::with_table(&XEN), 14, 2, 5, 11);
}

#[test]
fn exclusion_16_threads_bravo_mode() {
    hammer(RawPerCpuRwLock::with_table(&BRAVO), 14, 2, 0, 0);
}

/// Readers hold reads of two locks of one table (the second read falls back
/// to the underlying lock) while writers write each. Always `a` before `b`:
/// opposite nesting orders deadlock any fair rwlock once writers queue.
#[test]
fn nested_reads_of_one_table_fall_back() {
    let a = Shared::new(RawPerCpuRwLock::with_table(&NESTED));
    let b = Shared::new(RawPerCpuRwLock::with_table(&NESTED));
    let stop = Arc::new(AtomicBool::new(false));
    let mut handles = Vec::new();
    for _ in 0..4 {
        let (x, y, stop) = (a.clone(), b.clone(), stop.clone());
        handles.push(thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                x.read(|| y.read(thread::yield_now));
                y.read(|| {});
            }
        }));
    }
    for w in 0..2 {
        let (s, stop) = (if w == 0 { a.clone() } else { b.clone() }, stop.clone());
        handles.push(thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                s.write();
                thread::yield_now();
            }
        }));
    }
    thread::sleep(RUN);
    stop.store(true, Ordering::Relaxed);
    for h in handles {
        h.join().unwrap();
    }
    a.check();
    b.check();
}

/// Short-lived reader threads come and go (slot indices are recycled)
/// while a writer writes; more threads than slots are alive at times.
#[test]
fn thread_churn() {
    let s = Shared::new(RawPerCpuRwLock::new());
    let stop = Arc::new(AtomicBool::new(false));
    let writer = {
        let (s, stop) = (s.clone(), stop.clone());
        thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                s.write();
                thread::sleep(Duration::from_micros(50));
            }
        })
    };
    let deadline = Instant::now() + RUN;
    while Instant::now() < deadline {
        let batch: Vec<_> = (0..if cfg!(miri) { 2 } else { SLOTS + 16 })
            .map(|_| {
                let s = s.clone();
                thread::spawn(move || {
                    for _ in 0..20 {
                        s.read(|| {});
                    }
                })
            })
            .collect();
        for h in batch {
            h.join().unwrap();
        }
    }
    stop.store(true, Ordering::Relaxed);
    writer.join().unwrap();
    s.check();
}

/// A writer keeps getting in while readers overlap continuously (each
/// reader's section starts before another's ends).
#[test]
fn writer_progress_under_continuous_readers() {
    let s = Shared::new(RawPerCpuRwLock::new());
    let stop = Arc::new(AtomicBool::new(false));
    let readers: Vec<_> = (0..4)
        .map(|_| {
            let (s, stop) = (s.clone(), stop.clone());
            thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    s.read(|| {
                        for _ in 0..200 {
                            std::hint::spin_loop();
                        }
                    });
                }
            })
        })
        .collect();
    let start = Instant::now();
    let mut worst = Duration::ZERO;
    for _ in 0..if cfg!(miri) { 3 } else { 200 } {
        let t0 = Instant::now();
        s.write();
        worst = worst.max(t0.elapsed());
    }
    stop.store(true, Ordering::Relaxed);
    for h in readers {
        h.join().unwrap();
    }
    s.check();
    assert!(
        start.elapsed() < Duration::from_secs(20),
        "200 writes took {:?} (worst {worst:?})",
        start.elapsed()
    );
}

/// Downgrade under load: the downgraded reader still excludes writers.
#[test]
fn downgrade_under_load() {
    let s = Shared::new(RawPerCpuRwLock::new());
    let stop = Arc::new(AtomicBool::new(false));
    let mut handles = Vec::new();
    for _ in 0..3 {
        let (s, stop) = (s.clone(), stop.clone());
        handles.push(thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                let t = s.lock.lock_exclusive();
                // SAFETY: exclusive lock held.
                let d = unsafe { &mut *s.data.get() };
                d[0] += 1;
                d[1] += 1;
                s.writes.fetch_add(1, Ordering::Relaxed);
                // SAFETY: `t` came from `lock_exclusive` above.
                let r = unsafe { s.lock.downgrade(t) };
                // SAFETY: shared lock held.
                let d = unsafe { *s.data.get() };
                assert_eq!(d[0], d[1]);
                thread::yield_now();
                // SAFETY: shared lock held.
                assert_eq!(d, unsafe { *s.data.get() });
                // SAFETY: `r` came from `downgrade` on this thread.
                unsafe { s.lock.unlock_shared(r) };
                s.read(|| {});
            }
        }));
    }
    thread::sleep(RUN);
    stop.store(true, Ordering::Relaxed);
    for h in handles {
        h.join().unwrap();
    }
    s.check();
}

/// More reading threads than reader slots (`SLOTS + 16`): the threads
/// without a slot read through the underlying lock, and read recursively
/// (two and three deep) while writers queue. A nested read must never wait
/// behind a writer that waits for the outer read: every thread finishes
/// within the watchdog, and readers and writers still exclude each other.
#[test]
fn nested_reads_without_slots_pass_queued_writers() {
    if cfg!(miri) {
        return;
    }
    static MANY: ReaderTable = ReaderTable::new();
    let s = Shared::new(RawPerCpuRwLock::with_table(&MANY));
    let stop = Arc::new(AtomicBool::new(false));
    let readers = SLOTS + 16;
    let started = Arc::new(std::sync::Barrier::new(readers + 1));
    let mut handles = Vec::new();
    for r in 0..readers {
        let (s, stop, started) = (s.clone(), stop.clone(), started.clone());
        handles.push(thread::spawn(move || {
            // Every thread holds a read while the others start, so that
            // all are alive at once and 16 of them find no slot.
            s.read(|| {
                started.wait();
            });
            let mut i = r;
            while !stop.load(Ordering::Relaxed) {
                i += 1;
                s.read(|| {
                    // Give a writer time to queue between the outer read and
                    // the nested one.
                    thread::yield_now();
                    s.read(|| {
                        if i % 3 == 0 {
                            s.read(thread::yield_now);
                        }
                    });
                });
            }
        }));
    }
    started.wait();
    {
        let (s, stop) = (s.clone(), stop.clone());
        handles.push(thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                s.write();
                thread::sleep(Duration::from_micros(50));
            }
        }));
    }
    thread::sleep(RUN);
    stop.store(true, Ordering::Relaxed);
    let deadline = Instant::now() + Duration::from_secs(30);
    for h in &handles {
        while !h.is_finished() {
            assert!(
                Instant::now() < deadline,
                "a nested read waits behind a writer: {:?}",
                s.lock
            );
            thread::sleep(Duration::from_millis(5));
        }
    }
    for h in handles {
        h.join().unwrap();
    }
    s.check();
    assert!(
        s.writes.load(Ordering::Relaxed) > 0,
        "writers made progress"
    );
}
