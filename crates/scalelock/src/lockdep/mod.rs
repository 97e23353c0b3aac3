//! Lock-order checking (feature `lockdep`): Linux's lockdep for these locks.
//!
//! Each thread keeps a stack of the locks it holds. Each acquisition of a
//! lock in a named [class](crate::LockClass) records, in a process-wide
//! graph, that its class was taken while the held ones were held. The
//! first acquisition that closes a cycle in that graph is reported, *before*
//! the thread can block: a report names both chains (this thread's new
//! dependency, and the recorded chain back, each step with the thread that
//! first took it and, with `RUST_BACKTRACE=1`, where). An AB/BA inversion is
//! thus found from two runs that never raced.
//!
//! Also reported: taking a lock this thread already holds in a mode that
//! blocks it ([`ReportKind::Recursion`]): a mutex or write lock twice, a
//! write after a read or a read after a write of one rwlock, a second
//! fair read ([`Access::Read`]: QRwLock readers queue behind a waiting
//! writer, which waits for the first read), an upgradable read after a
//! read, and an upgrade while the thread also reads the lock (the upgrade
//! waits for every reader).
//!
//! # Rules (what is and is not reported)
//! - **Try-locks** never wait, so they add no dependency *into* the lock
//!   they take; the locks taken while one is held do depend on it (as in
//!   Linux's lockdep). A try-lock of a lock already held is not a report.
//! - **Reads**: a [fair read](Access::Read) waits for a queued writer, so it
//!   is checked like a write (a read held by another thread blocks it
//!   through a writer queued between them); a [recursive
//!   read](Access::RecursiveRead) is blocked only by a writer holding the
//!   lock. An acquisition of a lock the thread already holds in a mode
//!   that lets it through (a reentrant read again, a read under the
//!   thread's upgradable read) adds no dependency into the lock, as a
//!   try-lock does not. A cycle is reported only if every thread in it can
//!   really block the next (see the graph's source for the edge types).
//! - **Reentrant reads** ([`Access::ReentrantRead`], PerCpuRwLock): a
//!   thread may read a lock it already read-holds; against other threads
//!   they are fair reads (a first read queues behind a waiting writer).
//! - **Upgradable reads** ([`Access::Upgradable`]): their holder may read
//!   the lock (its reads never meet a writer); against other threads they
//!   are exclusive (a reader that queued behind a writer waits for the
//!   upgradable reader, which holds the queue). An untimed upgrade waits
//!   for the readers inside and nothing else: it is reported if this
//!   thread reads the lock too, or if it closes a cycle through a reader
//!   of the lock (a report that panics gives the upgradable read back
//!   first, so nothing stays held); after any upgrade the hold counts as
//!   a write.
//! - **SeqLock reads** are not checked: they never wait for anything that
//!   can block (a writer keeps the sequence odd only while it stores).
//! - **Type classes** (locks without a class of their own) merge unrelated
//!   locks, so their order is not checked; their instances are still
//!   checked for recursion. Two locks of one class nested in each other are
//!   not checked against each other (give them distinct classes).
//! - A thread's held stack records at most [`MAX_HELD`] locks (Linux's
//!   `MAX_LOCK_DEPTH` is 48): an acquisition past it is still checked
//!   against the locks on the stack (recursion, new order dependencies),
//!   but not recorded, so later acquisitions are not checked against it
//!   (nor is taking it again). The stack lives in the thread's state and recording
//!   allocates nothing, so a global allocator may be built on a lock of
//!   this crate (`tests/allocator_on_a_queued_lock.rs` runs with lockdep).
//!   Looking up a dependency already recorded (by any thread) allocates
//!   nothing either; recording a new one does (its origin, the graph's
//!   maps), with the thread's locks held: an allocator that takes one lock
//!   of this crate inside another must have that order recorded once with
//!   its allocations not going through the locks (see
//!   [`LockClass`](crate::LockClass);
//!   `tests/lockdep_allocator_nested_locks.rs`; registering a class
//!   allocates from `std::alloc::System` only).
//! - A guard released on another thread than the one that took it
//!   (`QSpinLock`'s and `QRwLock`'s guards are `Send`, and so are
//!   `PerCpuRwLock`'s write and upgradable guards and `SeqLock`'s write
//!   guard; only `PerCpuRwLock`'s read guards and `ReentrantMutex`'s are
//!   not) leaves its entry
//!   on the taker's stack (lockdep cannot tell): the taker's next
//!   acquisition of that lock is then reported as a recursive acquisition
//!   (a panic without a report handler), and its acquisitions of other
//!   classes add order edges from a lock it no longer holds. With lockdep
//!   on, release a guard on the thread that took it.
//! - A guard leaked with `mem::forget` keeps its entry for good; the
//!   thread's later acquisitions add order edges from it, and if the lock
//!   is freed, a new lock of the same class at the same address (a type
//!   class is shared by every lock of the type; an allocator reuses
//!   addresses) is reported at its first acquisition as taken again.
//!   Linux checks freed memory for held locks
//!   (`debug_check_no_locks_freed`); this crate does not. With lockdep
//!   on, do not leak the guard of a lock that will be freed.
//!
//! # Reports
//! By default a report panics (on the thread that would have deadlocked,
//! before it blocks: the lock is not taken), which fails the test that
//! found it. [`set_report_handler`] installs a callback instead; the
//! acquisition then goes ahead. Each closing dependency is reported once.
//! Lockdep is on from the start when compiled in; [`set_enabled`] switches
//! it.

mod graph;
mod held;
mod report;

use core::cell::RefCell;
use core::sync::atomic::{AtomicU64, Ordering};
use std::string::String;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, RwLock};
use std::vec::Vec;

use self::graph::{Graph, Origin, UPGRADE, acquire_mode, blocks_itself, edge_type};
pub use self::held::MAX_HELD;
use self::held::{HeldLock, HeldStack};
pub use self::report::{Dependency, LockDesc, Report, ReportKind};
pub use crate::class::Access;
use crate::class::{ClassId, registry};
use crate::hook::active;

/// Switches checking on or off (process-wide). Locks taken while it was
/// off are not on the held stacks.
pub fn set_enabled(on: bool) {
    active::set(active::LOCKDEP, on);
}

/// Whether lockdep is checking.
pub fn is_enabled() -> bool {
    active::load() & active::LOCKDEP != 0
}

static HANDLER: RwLock<Option<fn(&Report)>> = RwLock::new(None);

/// Calls `handler` for each report instead of panicking; `None` restores
/// the panic.
pub fn set_report_handler(handler: Option<fn(&Report)>) {
    *HANDLER.write().unwrap_or_else(PoisonError::into_inner) = handler;
}

fn report(r: &Report) {
    report_or(r, || {});
}

/// Reports `r` to the handler, or runs `before_panic` and panics. A
/// handler that panics gets `before_panic` run as its panic unwinds: the
/// unwind must leave nothing held either way.
fn report_or(r: &Report, before_panic: impl FnOnce()) {
    struct OnUnwind<F: FnOnce()>(Option<F>);
    impl<F: FnOnce()> Drop for OnUnwind<F> {
        fn drop(&mut self) {
            if let Some(f) = self.0.take() {
                f();
            }
        }
    }
    let handler = *HANDLER.read().unwrap_or_else(PoisonError::into_inner);
    let mut on_unwind = OnUnwind(Some(before_panic));
    match handler {
        Some(h) => {
            h(r);
            // Returned: the acquisition goes ahead.
            on_unwind.0 = None;
        }
        None => {
            if let Some(f) = on_unwind.0.take() {
                f();
            }
            panic!("{r}")
        }
    }
}

struct ThreadState {
    held: HeldStack,
}

/// Slots of [`KNOWN`]; a lookup probes `KNOWN_PROBES` of them.
const KNOWN_SLOTS: usize = 4096;
const KNOWN_PROBES: usize = 8;

/// Edges (from, to, type) known to be in the graph, as [`edge_key`]s (0:
/// a free slot): the graph only grows, so they need not be looked up under
/// its mutex again. A lock-free table in static memory, filled under the
/// graph's mutex: looking a dependency up allocates nothing and waits for
/// no one. (Each thread kept a `HashSet`, which allocated on its first
/// insert, with the locks the thread holds held: a global allocator built
/// on two locks of this crate, one taken inside the other, came back to the
/// outer one on each new thread's first allocation and waited for itself;
/// `tests/lockdep_allocator_nested_locks.rs`. And looking an edge up
/// under the mutex waited for a thread recording a new edge, which
/// allocates under it.) An edge that finds no room is looked up under the
/// mutex every time: still correct.
static KNOWN: [AtomicU64; KNOWN_SLOTS] = [const { AtomicU64::new(0) }; KNOWN_SLOTS];

/// The table key of edge `from -> to` of type `ty` (never 0: class ids
/// start at 1); `None` for ids past 24 bits (never remembered).
fn edge_key(from: u32, to: u32, ty: u16) -> Option<u64> {
    (from < 1 << 24 && to < 1 << 24)
        .then(|| u64::from(from) << 40 | u64::from(to) << 16 | u64::from(ty))
}

fn known_slots(key: u64) -> impl Iterator<Item = &'static AtomicU64> {
    // Fibonacci hashing.
    let h = (key.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 52) as usize;
    (0..KNOWN_PROBES).map(move |i| &KNOWN[(h + i) % KNOWN_SLOTS])
}

/// Whether the edge of `key` is known to be in the graph.
fn edge_known(key: Option<u64>) -> bool {
    let Some(key) = key else { return false };
    for slot in known_slots(key) {
        // Relaxed: only the number matters (the graph, read under its
        // mutex, holds the rest).
        match slot.load(Ordering::Relaxed) {
            k if k == key => return true,
            0 => return false,
            _ => {}
        }
    }
    false
}

/// Remembers that the edge of `key` is in the graph (under the graph's
/// mutex: one writer at a time).
fn remember_edge(key: Option<u64>) {
    let Some(key) = key else { return };
    for slot in known_slots(key) {
        match slot.load(Ordering::Relaxed) {
            k if k == key => return,
            0 => {
                slot.store(key, Ordering::Relaxed);
                return;
            }
            _ => {}
        }
    }
}

std::thread_local! {
    static THREAD: RefCell<Option<ThreadState>> = const { RefCell::new(None) };
}

static GRAPH: Mutex<Option<Graph>> = Mutex::new(None);

fn graph() -> MutexGuard<'static, Option<Graph>> {
    // Updates leave the graph consistent (a report panics outside it).
    GRAPH.lock().unwrap_or_else(PoisonError::into_inner)
}

fn thread_name() -> String {
    let t = std::thread::current();
    match t.name() {
        Some(n) => n.into(),
        None => std::format!("{:?}", t.id()),
    }
}

fn desc(class: ClassId, instance: usize, access: Access, try_lock: bool) -> LockDesc {
    let info = registry::info(class.index);
    LockDesc {
        class: info.name.into(),
        site: info.site_string(),
        kind: info.kind,
        access,
        try_lock,
        instance,
    }
}

fn held_desc(held: &[HeldLock]) -> Vec<LockDesc> {
    held.iter()
        .map(|h| desc(h.class, h.instance, h.access, h.try_lock))
        .collect()
}

/// Runs `f` on this thread's state; `None` if it is being destroyed or in
/// use (a report handler that takes a lock).
fn with_thread<R>(f: impl FnOnce(&mut ThreadState) -> R) -> Option<R> {
    THREAD
        .try_with(|t| {
            let mut t = t.try_borrow_mut().ok()?;
            let t = t.get_or_insert_with(|| ThreadState {
                held: HeldStack::new(),
            });
            Some(f(t))
        })
        .ok()
        .flatten()
}

/// Checks an acquisition before it can block: recursion, then new order
/// dependencies. Reports (panics, by default) what it finds.
pub(crate) fn check(class: ClassId, instance: usize, access: Access) {
    let found = with_thread(|t| check_thread(t, class, instance, access)).flatten();
    if let Some(r) = found {
        report(&r);
    }
}

fn check_thread(
    t: &mut ThreadState,
    class: ClassId,
    instance: usize,
    access: Access,
) -> Option<Report> {
    if let Some(r) = recursion(t, class, instance, access, None) {
        return Some(r);
    }
    // A lock this thread already holds in a mode that lets this
    // acquisition through never makes it wait: like a try-lock it adds no
    // dependency into the lock (Linux's lockdep does the same for a
    // nested recursive read). Otherwise a thread that reads A, locks B and
    // reads A again would close A -> B -> A with itself.
    if t.held.iter().any(|h| h.is(class.index, instance)) {
        return None;
    }
    dependencies(t, class, instance, access, acquire_mode(access))
}

/// A hold of the same lock (but entry `except`) in a mode that blocks this
/// acquisition (`graph::blocks_itself`): the innermost such hold. None
/// either if the thread holds an upgradable read of the lock and this is
/// a read: while it does, no writer can wait or enter, so none of its
/// reads waits, whatever other reads it holds.
fn recursion(
    t: &ThreadState,
    class: ClassId,
    instance: usize,
    access: Access,
    except: Option<usize>,
) -> Option<Report> {
    if access.is_read()
        && t.held.iter().enumerate().any(|(i, h)| {
            Some(i) != except && h.is(class.index, instance) && h.access == Access::Upgradable
        })
    {
        return None;
    }
    let i = t.held.iter().enumerate().rposition(|(i, h)| {
        Some(i) != except && h.is(class.index, instance) && blocks_itself(h.access, access)
    })?;
    Some(Report {
        kind: report::ReportKind::Recursion,
        thread: thread_name(),
        held: held_desc(&t.held),
        conflict: i,
        acquiring: desc(class, instance, access, false),
        existing: Vec::new(),
    })
}

/// Records the new order dependencies of taking `class` (with `access`,
/// acquiring in mode `acq`, see `graph::acquire_mode`) with what the
/// thread holds; a report if one closes a cycle.
fn dependencies(
    t: &mut ThreadState,
    class: ClassId,
    instance: usize,
    access: Access,
    acq: u8,
) -> Option<Report> {
    if !class.ordered {
        return None;
    }
    // New dependencies: from each held lock down to the first that is not
    // a try-lock (the ones below it reach us through it).
    let mut found = None;
    for i in (0..t.held.len()).rev() {
        let h = t.held[i];
        if !h.class.ordered || h.class.index == class.index {
            continue;
        }
        let ty = edge_type(h.access, acq);
        if !edge_known(edge_key(h.class.index, class.index, ty)) {
            let r = add_dependency(t, i, class, instance, access, ty);
            if found.is_none() {
                found = r;
            }
        }
        // The locks below reach us through this one only if its own
        // acquisition recorded their dependencies into it (see
        // `HeldLock::linked`; stopping at a recursive read, or at a lock
        // taken again, lost A -> C of "A, B, C" and of "B, A, B, C").
        if h.linked {
            break;
        }
    }
    found
}

/// Records held[i] -> class; returns a report if it closes a cycle that can
/// deadlock (the first time this pair closes one).
fn add_dependency(
    t: &ThreadState,
    i: usize,
    class: ClassId,
    instance: usize,
    access: Access,
    ty: u16,
) -> Option<Report> {
    let h = t.held[i];
    let (from, to) = (h.class.index, class.index);
    let key = edge_key(from, to, ty);
    let mut g = graph();
    let g = g.get_or_insert_with(Graph::default);
    if g.has(from, to, ty) {
        remember_edge(key);
        return None;
    }
    let mut found = None;
    if let Some(path) = g.deadlock_path_typed(to, from, ty)
        && g.first_report(from, to)
    {
        let existing = path
            .iter()
            .filter_map(|&(a, b, bit)| {
                let e = g.edge(a, b)?.origin(bit)?;
                Some(Dependency {
                    from: registry::info(a).name.into(),
                    from_access: e.from_access,
                    to: registry::info(b).name.into(),
                    to_access: e.to_access,
                    thread: e.thread.clone(),
                    holding: e
                        .held
                        .iter()
                        .map(|&c| registry::info(c).name.into())
                        .collect(),
                    backtrace: e.backtrace.as_ref().map(|b| std::format!("{b}")),
                })
            })
            .collect();
        found = Some(Report {
            kind: report::ReportKind::Cycle,
            thread: thread_name(),
            held: held_desc(&t.held),
            conflict: i,
            acquiring: desc(class, instance, access, false),
            existing,
        });
    }
    g.add(from, to, ty, || {
        let bt = std::backtrace::Backtrace::capture();
        Origin {
            from_access: h.access,
            to_access: access,
            thread: thread_name(),
            held: t.held.iter().map(|h| h.class.index).collect(),
            backtrace: (bt.status() == std::backtrace::BacktraceStatus::Captured)
                .then(|| Arc::new(bt)),
        }
    });
    remember_edge(key);
    found
}

/// An upgradable read of the lock at `instance` is about to wait to become
/// a write: it waits for the lock's readers (and nothing else), so a read
/// of it that this thread also holds is reported (recursion), and so are
/// new dependencies of mode `UPGRADE` from the locks the thread holds (a
/// reader of this lock may wait for one of them taken after the
/// upgradable read; from those taken before, the upgradable read's own
/// plain dependency already says more).
/// Then the entry counts as a write. A report that panics first calls
/// `give_up` (which releases the upgradable read) and removes the entry:
/// like an acquisition reported before it waits, the upgrade leaves
/// nothing held.
pub(crate) fn upgrading(class: u32, instance: usize, give_up: impl FnOnce()) {
    let found = with_thread(|t| {
        let u = t
            .held
            .iter()
            .rposition(|h| h.is(class, instance) && h.access == Access::Upgradable)?;
        let id = t.held[u].class;
        let found = recursion(t, id, instance, Access::Write, Some(u))
            .or_else(|| dependencies(t, id, instance, Access::Write, UPGRADE));
        t.held[u].access = Access::Write;
        found
    })
    .flatten();
    if let Some(r) = found {
        report_or(&r, || {
            give_up();
            // The entry itself, now the lock's only write (another of the
            // same lock, a read, may be above it). Looked up again: a
            // report handler that panics may have changed the stack.
            with_thread(|t| {
                if let Some(u) = t
                    .held
                    .iter()
                    .rposition(|h| h.is(class, instance) && h.access == Access::Write)
                {
                    t.held.remove(u);
                }
            });
        });
    }
}

/// A `bump` of the lock at `instance` (its hold of `access`), before it
/// releases anything: checked as the re-acquisition a bump makes whenever
/// somebody waits (release, then take again under what the thread holds),
/// so that the order it takes the lock in is reported whether or not a
/// thread happens to wait at that moment, and before the lock is given
/// up. The stack is left as it is.
pub(crate) fn check_bump(class: u32, instance: usize, access: Access) {
    let found = with_thread(|t| {
        let of = |a: Access| {
            t.held
                .iter()
                .rposition(|h| h.is(class, instance) && h.access == a)
        };
        // An upgraded hold's entry is a write (as in `release`).
        let u = match of(access) {
            None if access == Access::Upgradable => of(Access::Write),
            found => found,
        }?;
        let (id, access) = (t.held[u].class, t.held[u].access);
        // As `check_thread`, with the bumped entry taken off the stack.
        if let Some(r) = recursion(t, id, instance, access, Some(u)) {
            return Some(r);
        }
        if t.held
            .iter()
            .enumerate()
            .any(|(i, h)| i != u && h.is(class, instance))
        {
            return None;
        }
        dependencies(t, id, instance, access, acquire_mode(access))
    })
    .flatten();
    if let Some(r) = found {
        report(&r);
    }
}

/// An upgradable read of the lock at `instance` became a write without
/// waiting (a try or timed upgrade): the entry counts as a write.
pub(crate) fn upgraded(class: u32, instance: usize) {
    with_thread(|t| {
        if let Some(h) = t
            .held
            .iter_mut()
            .rev()
            .find(|h| h.is(class, instance) && h.access == Access::Upgradable)
        {
            h.access = Access::Write;
        }
    });
}

/// Pushes an acquired lock on this thread's held stack; false if the
/// thread's state is unavailable or its stack full ([`MAX_HELD`]): then
/// the lock is not recorded, and `release` must not be called.
pub(crate) fn push(class: ClassId, instance: usize, access: Access, try_lock: bool) -> bool {
    with_thread(|t| {
        // As `check_thread` decided (the stack is the one it saw: nothing
        // is taken between the check and the acquisition).
        let linked = !try_lock
            && access != Access::RecursiveRead
            && !t.held.iter().any(|h| h.is(class.index, instance));
        t.held.push(HeldLock {
            class,
            instance,
            access,
            try_lock,
            linked,
        })
    })
    .unwrap_or(false)
}

/// Pops the hold of the lock at `instance` (class `class`) acquired with
/// `access` off this thread's held stack, wherever it is (locks may be
/// released in any order): the latest entry of that lock with that access
/// (an upgradable read's entry is a write once upgraded). Not the latest
/// entry of the lock whatever its access: a thread that reads a lock under
/// its upgradable read and releases the upgradable read first holds a
/// read, and its stack must say so. A hold not found was taken on another
/// thread (its guard was sent here): ignored.
pub(crate) fn release(class: u32, instance: usize, access: Access) {
    with_thread(|t| {
        let of = |a: Access| {
            t.held
                .iter()
                .rposition(|h| h.is(class, instance) && h.access == a)
        };
        let found = match of(access) {
            None if access == Access::Upgradable => of(Access::Write),
            found => found,
        };
        if let Some(i) = found {
            t.held.remove(i);
        }
    });
}

/// The number of locks this thread holds, as lockdep sees them (for tests
/// and assertions like Linux's `lockdep_assert_held`).
pub fn held_count() -> usize {
    with_thread(|t| t.held.len()).unwrap_or(0)
}
