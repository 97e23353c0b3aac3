//! `LoomPlatform`: the platform for loom model checks. Waiting yields to the
//! model's scheduler (so every interleaving of a sleep is still explored as a
//! spin), fences are real SeqCst fences, and a handful of queue nodes are
//! handed out per model thread.

use super::Platform;
use crate::qnode::{NodeIndex, QNode};
use crate::sync::atomic::{AtomicU32, Ordering, fence};

const NODES: usize = 8;

/// The platform used under `cfg(loom)`.
#[derive(Debug, Clone, Copy, Default)]
pub struct LoomPlatform;

loom::lazy_static! {
    static ref TABLE: [QNode; NODES] = core::array::from_fn(|_| QNode::new());
    static ref NEXT: AtomicU32 = AtomicU32::new(1);
}

loom::thread_local! {
    static MINE: core::cell::Cell<u16> = core::cell::Cell::new(0);
}

// SAFETY: `wait` only yields (a spurious return), fences are SeqCst, and each
// model thread gets a distinct index from `NEXT`.
unsafe impl Platform for LoomPlatform {
    fn relax() {
        loom::thread::yield_now();
    }
    fn yield_now() {
        loom::thread::yield_now();
    }
    fn now_ns() -> u64 {
        0
    }
    fn wait(_: &AtomicU32, _: u32) {
        loom::thread::yield_now();
    }
    fn wake_one(_: &AtomicU32) {}
    fn wake_all(_: &AtomicU32) {}
    fn light_fence() {
        fence(Ordering::SeqCst);
    }
    fn heavy_fence() {
        fence(Ordering::SeqCst);
    }
    fn queue_node() -> Option<NodeIndex> {
        MINE.with(|m| {
            if m.get() == 0 {
                let i = NEXT.fetch_add(1, Ordering::Relaxed);
                if i as usize >= NODES {
                    return None;
                }
                m.set(i as u16);
            }
            NodeIndex::new(m.get())
        })
    }
    fn node(index: NodeIndex) -> &'static QNode {
        &TABLE[index.get() as usize]
    }
    fn cpu_id() -> usize {
        0
    }
    fn cpu_count() -> usize {
        2
    }
    fn reader_slot() -> Option<usize> {
        crate::reader_table::thread_slot::current()
    }
    fn reader_slot_bound() -> usize {
        crate::reader_table::thread_slot::bound()
    }
}
