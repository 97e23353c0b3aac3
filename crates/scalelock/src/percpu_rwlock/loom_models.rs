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
