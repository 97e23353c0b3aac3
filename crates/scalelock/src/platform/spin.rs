//! `SpinPlatform`: a platform that only spins. No clock, no sleeping, no queue
//! nodes: waiters poll and, past their budget, keep polling. It is what a
//! `no_std` build gets by default and a starting point for bare metal.

use super::Platform;
use crate::qnode::{NodeIndex, QNode};
use crate::sync::atomic::{AtomicU32, Ordering, fence};

/// Busy-waiting platform without queue nodes (see the module docs).
#[derive(Debug, Clone, Copy, Default)]
pub struct SpinPlatform;

// SAFETY: `wait` returns immediately (a permitted spurious return), both
// fences are full SeqCst fences, and `queue_node` never hands out a node.
unsafe impl Platform for SpinPlatform {
    #[inline]
    fn relax() {
        core::hint::spin_loop();
    }
    #[inline]
    fn yield_now() {
        for _ in 0..32 {
            core::hint::spin_loop();
        }
    }
    #[inline]
    fn now_ns() -> u64 {
        0
    }
    #[inline]
    fn wait(word: &AtomicU32, expected: u32) {
        for _ in 0..64 {
            if word.load(Ordering::Relaxed) != expected {
                return;
            }
            core::hint::spin_loop();
        }
    }
    #[inline]
    fn wake_one(_: &AtomicU32) {}
    #[inline]
    fn wake_all(_: &AtomicU32) {}
    #[inline]
    fn light_fence() {
        fence(Ordering::SeqCst);
    }
    #[inline]
    fn heavy_fence() {
        fence(Ordering::SeqCst);
    }
    #[inline]
    fn queue_node() -> Option<NodeIndex> {
        None
    }
    fn node(_: NodeIndex) -> &'static QNode {
        unreachable!("SpinPlatform hands out no queue nodes")
    }
    #[inline]
    fn cpu_id() -> usize {
        0
    }
    #[inline]
    fn cpu_count() -> usize {
        1
    }
}
