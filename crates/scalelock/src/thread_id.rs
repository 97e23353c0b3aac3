//! The thread identity [`ReentrantMutex`](crate::ReentrantMutex) checks its
//! owner with: lock_api's [`GetThreadId`] for std threads.
//!
//! The identity is the address of a one-byte thread-local, as parking_lot's
//! `RawThreadId` does: while a thread lives its thread-locals occupy
//! distinct, non-null addresses, which is exactly lock_api's contract
//! (non-zero, unique among live threads, stable for a thread). An exited
//! thread's address may be given to a new thread; that only matters for a
//! reentrant mutex whose guard was leaked (`mem::forget`) by a thread that
//! then exited, and the new thread then owns that lock as lock_api allows.

use core::num::NonZeroUsize;

use lock_api::GetThreadId;

/// The calling thread's identity for [`ReentrantMutex`](crate::ReentrantMutex):
/// the address of a thread-local byte (parking_lot's `RawThreadId`, under
/// the same name so that code naming it keeps compiling).
///
/// An exited thread's identity may be given to a later thread. That
/// matters only if the exited thread leaked a reentrant mutex guard
/// (`mem::forget`): the later thread then finds itself the owner.
///
/// Only with `std`: the [`Platform`](crate::platform::Platform) trait has no
/// notion of a thread, and a kernel's per-CPU context is not one (a task
/// preempted while holding the lock would pass its identity to the next
/// task on that CPU). A kernel implements [`GetThreadId`] with its current
/// task pointer and uses `lock_api::ReentrantMutex<RawQSpinLock<MyPlatform>,
/// MyTaskId, T>`, with lock_api's `atomic_usize` feature on.
#[derive(Clone, Copy, Debug, Default)]
pub struct RawThreadId;

// SAFETY: `nonzero_thread_id` returns the address of the calling thread's
// instance of a thread-local `u8`. Every live thread has its own instance,
// one byte in size and alive until the thread exits, so no two live threads
// get the same address, and a thread gets the same address on every call.
// The address of a live object is never 0.
unsafe impl GetThreadId for RawThreadId {
    const INIT: Self = RawThreadId;

    #[inline]
    fn nonzero_thread_id(&self) -> NonZeroUsize {
        // One byte, not zero-sized: zero-sized thread-locals may share an
        // address. Const-initialized without a destructor, so `with` works
        // at any point of the thread's life, thread-local destructors
        // included.
        std::thread_local!(static ME: u8 = const { 0 });
        ME.with(|me| {
            NonZeroUsize::new(core::ptr::from_ref(me).addr())
                .expect("a thread-local has a non-null address")
        })
    }
}
