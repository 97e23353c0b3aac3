//! Loom models that need the lock's internals (the others are in
//! `tests/loom_percpu.rs`). Run: `RUSTFLAGS="--cfg loom" cargo test -p
//! scalelock --lib --release percpu_rwlock::loom_models`

use std::boxed::Box;
use std::format;

use loom::sync::Arc;
use loom::thread;

use super::*;
use crate::platform::LoomPlatform;

type Raw = RawPerCpuRwLock<LoomPlatform>;

/// A counted read (an inhibited read recorded only in the thread's count)
/// holds the lock while a writer waits for it (`W_WAITING`): the thread's
/// second read of the lock must pass that writer, or both wait for each
/// other (loom reports the deadlock).
#[test]
fn counted_recursive_read_passes_a_waiting_writer() {
    // Two preemptions, as the integration models (the spin on the
    // writer's bit below makes unbounded schedules explode).
    let mut builder = loom::model::Builder::new();
    builder.preemption_bound = Some(2);
    builder.check(|| {
        let table: &'static ReaderTable = Box::leak(Box::new(ReaderTable::with_inhibition(9)));
        let lock = Arc::new(Raw::with_table(table));
        // The first write of a lock inhibits the bias (the model's clock
        // stands still, so the window never ends).
        let w = lock.lock_exclusive();
        // SAFETY: from `lock_exclusive` above.
        unsafe { lock.unlock_exclusive(w) };
        let outer = lock.lock_shared();
        assert!(outer.slot.is_none(), "an inhibited read is counted");
        let writer = {
            let lock = lock.clone();
            thread::spawn(move || {
                let w = lock.lock_exclusive();
                // SAFETY: from `lock_exclusive` above.
                unsafe { lock.unlock_exclusive(w) };
            })
        };
        while !format!("{:?}", lock.inner).contains("write_waiting: true") {
            thread::yield_now();
        }
        let inner = lock.lock_shared();
        // SAFETY: both from `lock_shared` above, on this thread.
        unsafe {
            lock.unlock_shared(outer);
            lock.unlock_shared(inner);
        }
        writer.join().unwrap();
    });
}

loom::thread_local! {
    /// Whether this model thread's `light_fence_asymmetric` is, as on the
    /// std platform with `membarrier`, a compiler fence only (nothing to
    /// the model).
    static LIGHT_IS_COMPILER_FENCE: core::cell::Cell<bool> = core::cell::Cell::new(false);
}

/// `LoomPlatform`, except that the next `light_fence_asymmetric` is nothing
/// in a model thread that set `LIGHT_IS_COMPILER_FENCE` (the std
/// platform's compiler fence). Elsewhere it stays a SeqCst fence (stronger than the
/// real one: it can only hide a failure).
struct CompilerFenceLight;

// SAFETY: `LoomPlatform`'s; the weaker light fence is what the model
// checks (it breaks the light/heavy contract on purpose only while set).
unsafe impl Platform for CompilerFenceLight {
    fn relax() {
        LoomPlatform::relax()
    }
    fn yield_now() {
        LoomPlatform::yield_now()
    }
    fn now_ns() -> u64 {
        LoomPlatform::now_ns()
    }
    fn wait(word: &crate::sync::atomic::AtomicU32, expected: u32) {
        LoomPlatform::wait(word, expected)
    }
    fn wait_timeout(word: &crate::sync::atomic::AtomicU32, expected: u32, ns: u64) {
        LoomPlatform::wait_timeout(word, expected, ns)
    }
    fn with_local<R>(f: impl FnOnce(&crate::platform::LocalState) -> R) -> Option<R> {
        LoomPlatform::with_local(f)
    }
    fn wake_one(word: &crate::sync::atomic::AtomicU32) {
        LoomPlatform::wake_one(word)
    }
    fn wake_all(word: &crate::sync::atomic::AtomicU32) {
        LoomPlatform::wake_all(word)
    }
    fn light_fence() {
        LoomPlatform::light_fence()
    }
    fn heavy_fence() {
        LoomPlatform::heavy_fence()
    }
    fn light_fence_asymmetric() {
        // One-shot: the read's own light fence. Its unlock's (or step
        // aside's), which pairs with the heavy fence a writer parks after
        // (a `membarrier`: a SeqCst fence in the model), stays SeqCst.
        if !LIGHT_IS_COMPILER_FENCE.with(|c| c.replace(false)) {
            fence(Ordering::SeqCst);
        }
    }
    fn queue_node() -> Option<crate::qnode::NodeIndex> {
        LoomPlatform::queue_node()
    }
    fn node(index: crate::qnode::NodeIndex) -> &'static crate::qnode::QNode {
        LoomPlatform::node(index)
    }
    fn cpu_id() -> usize {
        LoomPlatform::cpu_id()
    }
    fn cpu_count() -> usize {
        LoomPlatform::cpu_count()
    }
    fn reader_slot() -> Option<usize> {
        LoomPlatform::reader_slot()
    }
    fn reader_slot_bound() -> usize {
        LoomPlatform::reader_slot_bound()
    }
}

/// A biased read whose state load came before a write that switched
/// the lock symmetric. The write's heavy fence (a `membarrier`) lands in
/// the reader between its state load and its slot store, which the model
/// gives by running that write on the reader's own thread, in between:
/// the reader then sees everything before the fence, and the write finds
/// no slot (the store is still to come). The read goes on with its light
/// fence, a compiler fence, and finds `FAST | SYM` on its re-check; the
/// next write revokes symmetric, with a plain SeqCst fence, which has
/// nothing to pair with: loom finds the write and the read side by side
/// (a causality violation on `data`).
#[test]
fn a_stale_biased_read_vs_a_symmetric_revocation() {
    let mut builder = loom::model::Builder::new();
    builder.preemption_bound = Some(2);
    builder.check(|| {
        let table: &'static ReaderTable = Box::leak(Box::new(ReaderTable::with_inhibition(9)));
        table.force_symmetric();
        let shared = Arc::new((
            RawPerCpuRwLock::<CompilerFenceLight>::with_table(table),
            loom::cell::UnsafeCell::new(0usize),
        ));
        // This thread's slot, and the lock's id; biased.
        let t = shared.0.lock_shared();
        // SAFETY: from `lock_shared` above.
        unsafe { shared.0.unlock_shared(t) };
        let stale = shared.0.state.load(Ordering::Relaxed);
        assert_eq!(stale & (FAST | SYM), FAST);
        // The write whose heavy fence lands here: it leaves the lock
        // symmetric (forced).
        let w = shared.0.lock_exclusive();
        assert_eq!(w.next & (FAST | SYM), FAST | SYM);
        // SAFETY: from `lock_exclusive` above.
        unsafe { shared.0.unlock_exclusive(w) };
        let writer = {
            let shared = shared.clone();
            thread::spawn(move || {
                let w = shared.0.lock_exclusive();
                // SAFETY: exclusive lock held.
                shared.1.with_mut(|d| unsafe { *d += 1 });
                // SAFETY: from `lock_exclusive` above.
                unsafe { shared.0.unlock_exclusive(w) };
            })
        };
        // The rest of the biased read, from the state it loaded.
        LIGHT_IS_COMPILER_FENCE.with(|c| c.set(true));
        let got = shared.0.try_read_slot_as::<false>(stale);
        LIGHT_IS_COMPILER_FENCE.with(|c| c.set(false));
        if let Some(slot) = got {
            // SAFETY: shared lock held.
            let _ = shared.1.with(|d| unsafe { *d });
            // SAFETY: the read above got the lock on this thread's slot.
            unsafe { shared.0.unlock_shared(PerCpuReadToken::slot(slot)) };
        }
        writer.join().unwrap();
    });
}

/// The other way out of the symmetric mode: a stale biased read (as in
/// `a_stale_biased_read_vs_a_symmetric_revocation`: the heavy fence of the
/// write that switched the lock symmetric lands between its state load and
/// its slot store) meets a symmetric revocation (a plain SeqCst fence) that
/// brings the bias back (the symmetric mode's probe; a Xen-style table, so
/// that the writes in between keep the bias on). Its re-check finds `FAST |
/// SYM` (steps aside), `SYM` alone (steps aside) or the returned bias, set
/// by the write's Release store at unlock, after its section: the read
/// holds only after the write, so the plain fence meeting the read's
/// compiler fence does no harm. (With the re-check before ac27962, `FAST`
/// alone, the read would hold on `FAST | SYM` beside the write.)
#[test]
fn a_stale_biased_read_vs_a_symmetric_write_that_brings_the_bias_back() {
    let mut builder = loom::model::Builder::new();
    builder.preemption_bound = Some(2);
    builder.check(|| {
        let table: &'static ReaderTable = Box::leak(Box::new(ReaderTable::with_inhibition(0)));
        table.force_symmetric();
        let shared = Arc::new((
            RawPerCpuRwLock::<CompilerFenceLight>::with_table(table),
            loom::cell::UnsafeCell::new(0usize),
        ));
        let t = shared.0.lock_shared();
        // SAFETY: from `lock_shared` above.
        unsafe { shared.0.unlock_shared(t) };
        let stale = shared.0.state.load(Ordering::Relaxed);
        assert_eq!(stale & (FAST | SYM), FAST);
        // The write whose heavy fence lands here (biased -> symmetric,
        // forced), then a symmetric write that does not probe (the first
        // symmetric revocation of the table).
        for _ in 0..2 {
            let w = shared.0.lock_exclusive();
            assert_eq!(w.next & (FAST | SYM), FAST | SYM);
            // SAFETY: from `lock_exclusive` above.
            unsafe { shared.0.unlock_exclusive(w) };
        }
        let writer = {
            let shared = shared.clone();
            thread::spawn(move || {
                let w = shared.0.lock_exclusive();
                // The second symmetric revocation probes: biased at unlock.
                assert_eq!(w.next & (FAST | SYM), FAST);
                // SAFETY: exclusive lock held.
                shared.1.with_mut(|d| unsafe { *d += 1 });
                // SAFETY: from `lock_exclusive` above.
                unsafe { shared.0.unlock_exclusive(w) };
            })
        };
        LIGHT_IS_COMPILER_FENCE.with(|c| c.set(true));
        let got = shared.0.try_read_slot_as::<false>(stale);
        LIGHT_IS_COMPILER_FENCE.with(|c| c.set(false));
        if let Some(slot) = got {
            // SAFETY: shared lock held.
            let _ = shared.1.with(|d| unsafe { *d });
            // SAFETY: the read above got the lock on this thread's slot.
            unsafe { shared.0.unlock_shared(PerCpuReadToken::slot(slot)) };
        }
        writer.join().unwrap();
    });
}
