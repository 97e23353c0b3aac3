//! A reentrant mutex: lock_api's `ReentrantMutex` over [`RawQSpinLock`]
//! with [`RawThreadId`] as the owner's identity.

use crate::qspinlock::RawQSpinLock;
use crate::thread_id::RawThreadId;

/// A mutex that the thread holding it may lock again without deadlocking,
/// built on [`RawQSpinLock`] (parking_lot's `ReentrantMutex`, with the
/// queued spinlock underneath).
///
/// Only the first `lock` of a thread takes the queued spinlock; nested
/// `lock`s and `try_lock`s by the owner bump a count, and the last guard
/// dropped releases it. A guard gives `&T`, not `&mut T`, because several
/// guards of one thread can be alive at once: put a `Cell` or `RefCell`
/// inside to mutate.
///
/// The `stats` and `lockdep` features see the queued spinlock, so they see
/// one acquisition per outermost `lock` (hold time from the first `lock` to
/// the last guard's drop), and lockdep does not report the nested locking
/// as recursive: it never waits.
///
/// ```
/// use scalelock::ReentrantMutex;
/// use std::cell::RefCell;
///
/// let log = ReentrantMutex::new(RefCell::new(Vec::new()));
/// let outer = log.lock();
/// outer.borrow_mut().push("outer");
/// {
///     // A callee that locks again on the same thread does not deadlock.
///     let inner = log.lock();
///     inner.borrow_mut().push("inner");
/// }
/// drop(outer);
/// assert_eq!(*log.lock().borrow(), ["outer", "inner"]);
/// ```
///
/// Needs the `std` feature (the owner check needs a thread identity, see
/// [`RawThreadId`]); a `no_std` user supplies its own
/// [`lock_api::GetThreadId`].
pub type ReentrantMutex<T> = lock_api::ReentrantMutex<RawQSpinLock, RawThreadId, T>;
/// The guard of a [`ReentrantMutex`]: releases one level of locking when
/// dropped.
pub type ReentrantMutexGuard<'a, T> =
    lock_api::ReentrantMutexGuard<'a, RawQSpinLock, RawThreadId, T>;
/// A [`ReentrantMutexGuard`] mapped to a part of the data.
pub type MappedReentrantMutexGuard<'a, T> =
    lock_api::MappedReentrantMutexGuard<'a, RawQSpinLock, RawThreadId, T>;
