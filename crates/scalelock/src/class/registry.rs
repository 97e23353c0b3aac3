//! The process-wide class registry: numeric ids for classes, and what
//! reports and snapshots print about them.
//!
//! A `static` [`LockClass`] caches its id in itself (one Relaxed load once
//! registered). A construction-site class is keyed by its
//! `core::panic::Location`: the first lookup of a site takes the registry
//! mutex and records the location's address in a small lock-free table,
//! later lookups probe that table (a site whose few slots there are taken
//! goes on a lock-free list instead). Sites are compared by file, line and
//! column when first registered, so two copies of one `Location` (the
//! compiler may emit several) name one class. Ids are never freed: classes
//! are static code locations or statics.
//!
//! Registering happens on a lock path, with the lock held (a class's first
//! instrumented acquisition), and the lock may be a global allocator's:
//! the registry's memory comes from `std::alloc::System`, never from the
//! global allocator, which could come back to that lock and wait for
//! itself (or for the registry's mutex, which this thread holds).

use core::panic::Location;
use core::ptr;
use core::sync::atomic::{AtomicPtr, AtomicU32, AtomicUsize, Ordering};
use std::string::String;
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::vec::Vec;

use super::{ClassId, LockClass, LockKind};
use crate::sys_vec::SysVec;

/// What the registry knows about a class.
#[derive(Clone, Copy, Debug)]
pub(crate) struct ClassInfo {
    pub(crate) name: &'static str,
    pub(crate) site: Option<&'static Location<'static>>,
    pub(crate) kind: LockKind,
}

impl ClassInfo {
    /// The class's construction site as `file:line:column`.
    pub(crate) fn site_string(&self) -> Option<String> {
        self.site.map(|s| std::format!("{s}"))
    }
}

struct Registry {
    /// Indexed by id; entry 0 is unused (0 means "not registered").
    classes: SysVec<ClassInfo>,
    /// Site classes: (file, line, column) -> id.
    sites: SysVec<(&'static str, u32, u32, u32)>,
}

static REGISTRY: Mutex<Registry> = Mutex::new(Registry {
    classes: SysVec::new(),
    sites: SysVec::new(),
});

fn registry() -> MutexGuard<'static, Registry> {
    // The registry stays consistent at every step: a panic elsewhere while
    // it was held cannot leave it half-updated.
    REGISTRY.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Registry {
    fn push(&mut self, info: ClassInfo) -> u32 {
        if self.classes.is_empty() {
            self.classes.push(ClassInfo {
                name: "(none)",
                site: None,
                kind: LockKind::Other,
            });
        }
        let id = u32::try_from(self.classes.len()).expect("more than 2^32 lock classes");
        self.classes.push(info);
        id
    }
}

/// The classes of the lock types' unnamed locks.
static TYPE_CLASSES: [LockClass; 6] = [
    LockClass::of_type(LockKind::QSpinLock),
    LockClass::of_type(LockKind::QRwLock),
    LockClass::of_type(LockKind::PerCpuRwLock),
    LockClass::of_type(LockKind::SeqLock),
    LockClass::of_type(LockKind::RefreshOnce),
    LockClass::of_type(LockKind::Other),
];

#[inline(always)]
pub(crate) fn type_class(kind: LockKind) -> &'static LockClass {
    &TYPE_CLASSES[match kind {
        LockKind::QSpinLock => 0,
        LockKind::QRwLock => 1,
        LockKind::PerCpuRwLock => 2,
        LockKind::SeqLock => 3,
        LockKind::RefreshOnce => 4,
        LockKind::Other => 5,
    }]
}

/// The id of a `static` class, registering it (as a class of `kind`) on
/// first use.
#[inline(always)]
pub(crate) fn of_class(class: &'static LockClass, kind: LockKind) -> ClassId {
    // Relaxed: the id is only a number; what it names is read under the
    // registry mutex.
    let index = match class.id.load(Ordering::Relaxed) {
        0 => register_class(class, kind),
        id => id,
    };
    ClassId {
        index,
        ordered: class.ordered,
    }
}

#[cold]
fn register_class(class: &'static LockClass, kind: LockKind) -> u32 {
    let mut r = registry();
    // Re-check under the mutex: another thread may have registered it.
    match class.id.load(Ordering::Relaxed) {
        0 => {
            let id = r.push(ClassInfo {
                name: class.name,
                site: None,
                kind,
            });
            class.id.store(id, Ordering::Relaxed);
            id
        }
        id => id,
    }
}

/// Entries of the lock-free site table; lookups probe `SITE_PROBES` slots.
const SITE_SLOTS: usize = 1024;
const SITE_PROBES: usize = 8;

struct SiteSlot {
    /// Address of a `Location`, 0 if free.
    key: AtomicUsize,
    id: AtomicU32,
}

static SITE_TABLE: [SiteSlot; SITE_SLOTS] = [const {
    SiteSlot {
        key: AtomicUsize::new(0),
        id: AtomicU32::new(0),
    }
}; SITE_SLOTS];

#[inline]
fn site_hash(addr: usize) -> usize {
    // Fibonacci hashing; `Location`s are 8-byte aligned.
    ((addr as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 54) as usize % SITE_SLOTS
}

/// The id of the construction-site class `site`.
#[inline(never)]
pub(crate) fn of_site(site: &'static Location<'static>, kind: LockKind) -> ClassId {
    let addr = site as *const Location<'static> as usize;
    let h = site_hash(addr);
    let mut full = true;
    for i in 0..SITE_PROBES {
        let slot = &SITE_TABLE[(h + i) % SITE_SLOTS];
        // Acquire pairs with the Release key store in `register_site`: the
        // id stored before it is visible.
        match slot.key.load(Ordering::Acquire) {
            k if k == addr => {
                return ClassId {
                    index: slot.id.load(Ordering::Relaxed),
                    ordered: true,
                };
            }
            0 => {
                full = false;
                break;
            }
            _ => {}
        }
    }
    // Slots are never freed: a window full now was full when the site
    // registered, which then put it on the overflow list.
    if full && let Some(index) = overflowed(addr) {
        return ClassId {
            index,
            ordered: true,
        };
    }
    ClassId {
        index: register_site(site, kind),
        ordered: true,
    }
}

#[cold]
fn register_site(site: &'static Location<'static>, kind: LockKind) -> u32 {
    let mut r = registry();
    let (file, line, col) = (site.file(), site.line(), site.column());
    let id = match r
        .sites
        .iter()
        .find(|&&(f, l, c, _)| f == file && l == line && c == col)
    {
        Some(&(_, _, _, id)) => id,
        None => {
            let name = site_name(site);
            let id = r.push(ClassInfo {
                name,
                site: Some(site),
                kind,
            });
            r.sites.push((file, line, col, id));
            id
        }
    };
    // Cache the address. Writers are serialised by the registry mutex; a
    // full probe window puts the site on the overflow list, which lookups
    // walk without the mutex (a lock path must not take it on every
    // acquisition).
    let addr = site as *const Location<'static> as usize;
    let h = site_hash(addr);
    for i in 0..SITE_PROBES {
        let slot = &SITE_TABLE[(h + i) % SITE_SLOTS];
        let k = slot.key.load(Ordering::Relaxed);
        if k == addr {
            return id;
        }
        if k == 0 {
            slot.id.store(id, Ordering::Relaxed);
            // Release pairs with the Acquire key load in `of_site`.
            slot.key.store(addr, Ordering::Release);
            return id;
        }
    }
    if overflowed(addr).is_none() {
        let node = crate::sys_vec::leak(Overflowed {
            addr,
            id,
            next: OVERFLOWED.load(Ordering::Relaxed),
        });
        // Release pairs with the Acquire load in `overflowed`.
        OVERFLOWED.store(ptr::from_ref(node).cast_mut(), Ordering::Release);
    }
    id
}

/// A site class whose probe window was full when it registered: a list
/// that only grows (pushed under the registry mutex), read without it.
struct Overflowed {
    addr: usize,
    id: u32,
    next: *mut Overflowed,
}

static OVERFLOWED: AtomicPtr<Overflowed> = AtomicPtr::new(ptr::null_mut());

/// The id of the site at `addr` on the overflow list.
fn overflowed(addr: usize) -> Option<u32> {
    // Acquire pairs with the Release store in `register_site`: the nodes
    // pushed before it are visible.
    let mut p = OVERFLOWED.load(Ordering::Acquire);
    // SAFETY: nodes are leaked (never freed) and never written after they
    // are published.
    while let Some(node) = unsafe { p.as_ref() } {
        if node.addr == addr {
            return Some(node.id);
        }
        p = node.next;
    }
    None
}

/// `site` as `file:line:column`, in `System` memory, never freed.
fn site_name(site: &Location<'_>) -> &'static str {
    struct Bytes(SysVec<u8>);
    impl core::fmt::Write for Bytes {
        fn write_str(&mut self, s: &str) -> core::fmt::Result {
            for &b in s.as_bytes() {
                self.0.push(b);
            }
            Ok(())
        }
    }
    let mut name = Bytes(SysVec::new());
    let _ = core::fmt::Write::write_fmt(&mut name, format_args!("{site}"));
    let name = core::mem::ManuallyDrop::new(name.0);
    // SAFETY: `name` holds the UTF-8 that `fmt` wrote, and is never freed.
    unsafe {
        core::str::from_utf8_unchecked(core::slice::from_raw_parts(name.as_ptr(), name.len()))
    }
}

/// What the registry knows about class `id`.
pub(crate) fn info(id: u32) -> ClassInfo {
    let r = registry();
    r.classes.get(id as usize).copied().unwrap_or(ClassInfo {
        name: "(unknown class)",
        site: None,
        kind: LockKind::Other,
    })
}

/// Every registered class, indexed by id (entry 0 unused).
#[cfg_attr(not(feature = "stats"), allow(dead_code))]
pub(crate) fn all() -> Vec<ClassInfo> {
    // Copied out in `System` memory: nothing goes through the global
    // allocator with the registry's mutex held.
    let classes = registry().classes.copied();
    classes.to_vec()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc;
    use std::time::Duration;

    #[test]
    fn a_site_past_a_full_probe_window_is_found_without_the_registry_mutex() {
        let site: &'static Location<'static> = Location::caller();
        let addr = ptr::from_ref(site) as usize;
        {
            // Fill the site's probe window with keys no `Location` has
            // (odd), as other sites would.
            let _r = registry();
            let h = site_hash(addr);
            for i in 0..SITE_PROBES {
                let slot = &SITE_TABLE[(h + i) % SITE_SLOTS];
                let _ =
                    slot.key
                        .compare_exchange(0, 2 * i + 1, Ordering::Relaxed, Ordering::Relaxed);
            }
        }
        let id = of_site(site, LockKind::Other).index;
        assert_ne!(id, 0);
        assert_eq!(info(id).site.map(|s| s.line()), Some(site.line()));
        // Later lookups (every instrumented acquisition) while another
        // thread holds the registry's mutex (registering a class).
        let r = registry();
        let (tx, rx) = mpsc::channel();
        let t = std::thread::spawn(move || tx.send(of_site(site, LockKind::Other).index));
        let got = rx.recv_timeout(Duration::from_secs(5));
        drop(r);
        t.join().unwrap().unwrap();
        assert_eq!(got, Ok(id), "the lookup waited for the registry's mutex");
        assert_eq!(of_site(site, LockKind::Other).index, id);
    }

    #[test]
    fn racing_first_uses_get_one_id_and_one_kind() {
        static RACED: LockClass = LockClass::new("raced");
        let site: &'static Location<'static> = Location::caller();
        let kinds = [LockKind::QSpinLock, LockKind::SeqLock, LockKind::QRwLock];
        let barrier = std::sync::Barrier::new(6);
        let ids: Vec<(u32, u32)> = std::thread::scope(|s| {
            let hs: Vec<_> = (0..6)
                .map(|i| {
                    let barrier = &barrier;
                    s.spawn(move || {
                        barrier.wait();
                        let kind = kinds[i % kinds.len()];
                        (of_class(&RACED, kind).index, of_site(site, kind).index)
                    })
                })
                .collect();
            hs.into_iter().map(|h| h.join().unwrap()).collect()
        });
        assert!(ids.iter().all(|&p| p == ids[0]), "{ids:?}");
        let (c, s) = ids[0];
        assert_ne!(c, s);
        assert!(kinds.contains(&info(c).kind) && kinds.contains(&info(s).kind));
        assert_eq!(info(c).name, "raced");
    }

    #[test]
    fn site_names_are_file_line_column() {
        let site: &'static Location<'static> = Location::caller();
        let id = of_site(site, LockKind::Other).index;
        assert_eq!(info(id).name, std::format!("{site}"));
        assert_eq!(info(id).site_string(), Some(std::format!("{site}")));
    }
}
