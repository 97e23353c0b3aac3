//! The process-wide class registry: numeric ids for classes, and what
//! reports and snapshots print about them.
//!
//! A `static` [`LockClass`] caches its id in itself (one Relaxed load once
//! registered). A construction-site class is keyed by its
//! `core::panic::Location`: the first lookup of a site takes the registry
//! mutex and records the location's address in a small lock-free table,
//! later lookups probe that table. Sites are compared by file, line and
//! column when first registered, so two copies of one `Location` (the
//! compiler may emit several) name one class. Ids are never freed: classes
//! are static code locations or statics.

use core::panic::Location;
use core::sync::atomic::{AtomicU32, AtomicUsize, Ordering};
use std::string::String;
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::vec::Vec;

use super::{ClassId, LockClass, LockKind};

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
    classes: Vec<ClassInfo>,
    /// Site classes: (file, line, column) -> id.
    sites: Vec<(&'static str, u32, u32, u32)>,
}

static REGISTRY: Mutex<Registry> = Mutex::new(Registry {
    classes: Vec::new(),
    sites: Vec::new(),
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
            0 => break,
            _ => {}
        }
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
            let name: &'static str = std::boxed::Box::leak(std::format!("{site}").into_boxed_str());
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
    // full probe window leaves the site to this slow path (still correct).
    let addr = site as *const Location<'static> as usize;
    let h = site_hash(addr);
    for i in 0..SITE_PROBES {
        let slot = &SITE_TABLE[(h + i) % SITE_SLOTS];
        let k = slot.key.load(Ordering::Relaxed);
        if k == addr {
            break;
        }
        if k == 0 {
            slot.id.store(id, Ordering::Relaxed);
            // Release pairs with the Acquire key load in `of_site`.
            slot.key.store(addr, Ordering::Release);
            break;
        }
    }
    id
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
    registry().classes.clone()
}
