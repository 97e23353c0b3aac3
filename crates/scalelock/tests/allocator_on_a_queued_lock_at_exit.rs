//! A global allocator built on a `QSpinLock`, and a thread that exits
//! with a queue node: it gives the node's index back to the free list. If
//! that allocated under the free list's mutex (it did: a `Vec` grew), the
//! exiting thread could wait for the allocator's lock while holding the
//! mutex, and the allocator lock's holder, asking for its first node
//! (its first queued wait on another lock), waited for the mutex: a
//! deadlock.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::mpsc::{Receiver, channel};
use std::time::Duration;

use scalelock::QSpinLock;

/// The allocator's lock.
static LOCK: QSpinLock<()> = QSpinLock::new(());
/// Another lock, on which threads queue.
static OTHER: QSpinLock<()> = QSpinLock::new(());

std::thread_local! {
    /// Whether this thread's allocations take `LOCK`.
    static THROUGH_LOCK: Cell<bool> = const { Cell::new(false) };
}

/// Makes the thread's allocations take `LOCK` when it is destroyed: at
/// thread exit, after the thread's own code and before the thread-local
/// destructors registered before it (they run in reverse order), so
/// before the queue node is given back if touched after the thread took
/// its node.
struct ThroughLockFromHere;

impl Drop for ThroughLockFromHere {
    fn drop(&mut self) {
        THROUGH_LOCK.with(|t| t.set(true));
    }
}

std::thread_local! {
    static AT_EXIT: ThroughLockFromHere = const { ThroughLockFromHere };
}

struct OnALock;

impl OnALock {
    fn locked<R>(&self, f: impl FnOnce() -> R) -> R {
        // A const thread-local without a destructor: readable in every
        // thread-local destructor.
        let _guard = THROUGH_LOCK.with(Cell::get).then(|| LOCK.lock());
        f()
    }
}

// SAFETY: `System`'s, with a lock taken around each call.
unsafe impl GlobalAlloc for OnALock {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller's contract is `System`'s.
        self.locked(|| unsafe { System.alloc(layout) })
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: the caller's contract is `System`'s.
        self.locked(|| unsafe { System.dealloc(ptr, layout) })
    }
}

#[global_allocator]
static ALLOCATOR: OnALock = OnALock;

/// Takes `OTHER` after a queued wait: a holder keeps it for `hold`, and a
/// second thread waits as its word waiter (the pending path, no node), so
/// the caller queues (and takes its queue node, if it has none yet).
fn take_other_queued(hold: Duration) {
    let (held_tx, held_rx) = channel();
    let holder = std::thread::spawn(move || {
        let guard = OTHER.lock();
        held_tx.send(()).unwrap();
        std::thread::sleep(hold);
        drop(guard);
    });
    held_rx.recv().unwrap();
    let word_waiter = std::thread::spawn(|| drop(OTHER.lock()));
    std::thread::sleep(Duration::from_millis(50));
    drop(OTHER.lock());
    holder.join().unwrap();
    word_waiter.join().unwrap();
}

fn wait(rx: &Receiver<()>) {
    rx.recv().unwrap();
}

#[test]
fn an_exiting_thread_gives_its_node_back_without_allocating() {
    // A hang fails the test instead of the whole run.
    std::thread::spawn(|| {
        std::thread::sleep(Duration::from_secs(30));
        let _ = std::io::Write::write_all(
            &mut std::io::stderr(),
            b"the exiting thread and the allocator's lock deadlocked\n",
        );
        std::process::abort();
    });
    // The first thread to exit with a node: its index goes to an empty
    // free list.
    let (ready_tx, ready_rx) = channel();
    let (go_tx, go_rx) = channel();
    let exiting = std::thread::spawn(move || {
        take_other_queued(Duration::from_millis(100));
        AT_EXIT.with(|_| {});
        ready_tx.send(()).unwrap();
        wait(&go_rx);
    });
    wait(&ready_rx);
    // A thread without a node holds the allocator's lock while the other
    // exits (and gives its index back), then takes its first node.
    let holder = std::thread::spawn(move || {
        let guard = LOCK.lock();
        go_tx.send(()).unwrap();
        std::thread::sleep(Duration::from_millis(100));
        take_other_queued(Duration::from_millis(100));
        drop(guard);
    });
    holder.join().unwrap();
    exiting.join().unwrap();
}
