//! Loom models of the per-CPU rwlock's protocols: a fast reader against a
//! revoking writer (including the bias cleared between the reader's slot
//! store and its re-check, and a writer parking on the reader's slot), the
//! Xen policy (bias restored at write unlock), slow readers re-enabling the
//! bias, recursive reads during a revocation, slot fallback (a second
//! lock of the same table read through the underlying lock), and counted
//! (inhibited) reads against a writer of another lock. Under loom
//! `Platform::light_fence` is a SeqCst fence, `now_ns()` is 0 (inhibition
//! windows end at once) and each model thread has its own slot.
//!
//! Run: `RUSTFLAGS="--cfg loom" LOOM_MAX_PREEMPTIONS=2 cargo test -p scalelock
//! --release --test loom_percpu`
#![cfg(loom)]

use loom::cell::UnsafeCell;
use loom::sync::Arc;
use loom::thread;

use lock_api::RawRwLock;
use scalelock::{RawPerCpuRwLock, ReaderTable};

struct Shared {
    lock: RawPerCpuRwLock,
    data: UnsafeCell<usize>,
}

// SAFETY: `data` is written only under the exclusive lock and read only
// under a shared one; loom reports a race if exclusion fails.
unsafe impl Sync for Shared {}
unsafe impl Send for Shared {}

impl Shared {
    fn new(lock: RawPerCpuRwLock) -> Arc<Self> {
        Arc::new(Shared {
            lock,
            data: UnsafeCell::new(0),
        })
    }

    fn write(&self) {
        let t = self.lock.lock_exclusive();
        // SAFETY: exclusive lock held.
        self.data.with_mut(|d| unsafe { *d += 1 });
        // SAFETY: `t` came from `lock_exclusive` above.
        unsafe { self.lock.unlock_exclusive(t) };
    }

    fn read(&self) -> usize {
        let t = self.lock.lock_shared();
        // SAFETY: shared lock held.
        let v = self.data.with(|d| unsafe { *d });
        // SAFETY: `t` came from `lock_shared` on this thread.
        unsafe { self.lock.unlock_shared(t) };
        v
    }
}

/// A table per model execution (loom objects must not outlive it; leaking a
/// few hundred bytes per execution is fine).
fn table(inhibit: u8) -> &'static ReaderTable {
    Box::leak(Box::new(ReaderTable::with_inhibition(inhibit)))
}

/// Fast reader (reading twice, so the second read may meet the cleared
/// bias mid-way) against one writer, on a BRAVO table.
#[test]
fn reader_vs_writer_bravo() {
    loom::model(|| {
        let s = Shared::new(RawPerCpuRwLock::with_table(table(9)));
        // Give the lock its id and warm the bias up front.
        assert_eq!(s.read(), 0);
        let r = {
            let s = s.clone();
            thread::spawn(move || {
                let a = s.read();
                let b = s.read();
                assert!(a <= b);
            })
        };
        s.write();
        r.join().unwrap();
        assert_eq!(s.read(), 1);
    });
}

/// The same in Xen mode (`with_inhibition(0)`): the writer restores the bias at
/// unlock, so two writes each revoke it.
#[test]
fn reader_vs_two_writes_xen() {
    loom::model(|| {
        let s = Shared::new(RawPerCpuRwLock::with_table(table(0)));
        let r = {
            let s = s.clone();
            thread::spawn(move || {
                let _ = s.read();
            })
        };
        s.write();
        s.write();
        r.join().unwrap();
        assert_eq!(s.read(), 2);
    });
}

/// Two readers (each with its own slot) against a writer.
#[test]
fn two_readers_vs_writer() {
    loom::model(|| {
        let s = Shared::new(RawPerCpuRwLock::with_table(table(0)));
        let readers: Vec<_> = (0..2)
            .map(|_| {
                let s = s.clone();
                thread::spawn(move || {
                    let _ = s.read();
                })
            })
            .collect();
        s.write();
        for r in readers {
            r.join().unwrap();
        }
        assert_eq!(s.read(), 1);
    });
}

/// A recursive read while a writer revokes: the inner read must not queue
/// behind the writer that waits for the outer read's slot.
#[test]
fn recursive_read_vs_writer() {
    loom::model(|| {
        let s = Shared::new(RawPerCpuRwLock::with_table(table(0)));
        let r = {
            let s = s.clone();
            thread::spawn(move || {
                let outer = s.lock.lock_shared();
                let inner = s.lock.lock_shared();
                // SAFETY: shared lock held (twice).
                let v = s.data.with(|d| unsafe { *d });
                // SAFETY: both tokens came from this lock on this thread;
                // released out of order on purpose.
                unsafe {
                    s.lock.unlock_shared(outer);
                    assert_eq!(v, s.data.with(|d| *d));
                    s.lock.unlock_shared(inner);
                }
            })
        };
        s.write();
        r.join().unwrap();
    });
}

/// The reader holds a read of `a` and reads `b` (same table) while a writer
/// writes `b`; both locks are written `writes_before` times first (with
/// BRAVO inhibition, one write leaves a lock inhibited).
fn read_b_holding_a_vs_writer_of_b(inhibit: u8, writes_before: usize) {
    loom::model(move || {
        let t = table(inhibit);
        let a = Shared::new(RawPerCpuRwLock::with_table(t));
        let b = Shared::new(RawPerCpuRwLock::with_table(t));
        for _ in 0..writes_before {
            a.write();
            b.write();
        }
        let r = {
            let (a, b) = (a.clone(), b.clone());
            thread::spawn(move || {
                let ta = a.lock.lock_shared();
                let _ = b.read();
                // SAFETY: from `lock_shared` above, on this thread.
                unsafe { a.lock.unlock_shared(ta) };
            })
        };
        b.write();
        r.join().unwrap();
        assert_eq!(b.read(), writes_before + 1);
    });
}

/// Slot fallback: the reader holds `a` on its slot, so its read of `b` (same
/// table) goes through `b`'s underlying lock, while a writer writes `b`.
#[test]
fn slot_fallback_vs_writer() {
    read_b_holding_a_vs_writer_of_b(0, 0);
}

/// A counted read (an inhibited read recorded only in the thread's count)
/// of `a` does not let its thread join `b`'s readers while a writer is
/// inside `b` (loom reports the data race). The counted read that passes a
/// writer waiting for it is modelled in `percpu_rwlock::loom_models`.
#[test]
fn counted_read_vs_writer_of_another_lock() {
    read_b_holding_a_vs_writer_of_b(9, 1);
}

/// BRAVO: after the writer revoked, a slow reader (window over at once
/// under loom) re-enables the bias while another reader and the writer run.
#[test]
fn slow_reader_reenables_bias() {
    loom::model(|| {
        let s = Shared::new(RawPerCpuRwLock::with_table(table(9)));
        s.write(); // revokes nothing yet (no id), but clears the bias
        let r = {
            let s = s.clone();
            thread::spawn(move || {
                let _ = s.read(); // slow; sets FAST again
                let _ = s.read(); // fast if FAST stayed set
            })
        };
        s.write();
        r.join().unwrap();
        assert_eq!(s.read(), 2);
    });
}

/// The default lock (default table: BRAVO inhibition on): a reader reading
/// twice against two writes, so a write may revoke, the next find the bias
/// off (no revocation), and a slow reader re-enable it in between.
#[test]
fn default_lock_reader_vs_two_writes() {
    loom::model(|| {
        let s = Shared::new(RawPerCpuRwLock::new());
        assert_eq!(s.read(), 0);
        let r = {
            let s = s.clone();
            thread::spawn(move || {
                let a = s.read();
                let b = s.read();
                assert!(a <= b);
            })
        };
        s.write();
        s.write();
        r.join().unwrap();
        assert_eq!(s.read(), 2);
    });
}

/// Mode switches: the first write revokes the biased mode with the heavy
/// fence and switches the lock to the symmetric mode (forced here: loom has
/// no clock to measure the revocation by); the second revokes symmetric
/// reads with a plain fence and, the reads per write being too few (the
/// models count no read saving), inhibits the bias
/// (symmetric kept). A reader reads twice meanwhile, so its reads meet
/// every mode and every switch; loom reports a data race if a read and a
/// write overlap.
#[test]
fn reader_across_biased_symmetric_inhibited_switches() {
    loom::model(|| {
        let t = table(9);
        t.force_symmetric();
        let s = Shared::new(RawPerCpuRwLock::with_table(t));
        // Give the lock its id and the reader bias up front.
        assert_eq!(s.read(), 0);
        let r = {
            let s = s.clone();
            thread::spawn(move || {
                let a = s.read();
                let b = s.read();
                assert!(a <= b);
            })
        };
        s.write();
        s.write();
        r.join().unwrap();
        assert_eq!(s.read(), 2);
    });
}

/// Symmetric mode from the start: two readers (full-fence reads) against a
/// writer that revokes with a plain SeqCst fence.
#[test]
fn symmetric_readers_vs_writer() {
    loom::model(|| {
        let t = table(9);
        t.force_symmetric();
        let s = Shared::new(RawPerCpuRwLock::with_table(t));
        assert_eq!(s.read(), 0);
        // One write turns the lock symmetric (and the bias stays on).
        s.write();
        let readers: Vec<_> = (0..2)
            .map(|_| {
                let s = s.clone();
                thread::spawn(move || {
                    let v = s.read();
                    assert!(v == 1 || v == 2);
                })
            })
            .collect();
        s.write();
        for r in readers {
            r.join().unwrap();
        }
    });
}
