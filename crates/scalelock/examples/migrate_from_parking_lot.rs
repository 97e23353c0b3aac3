//! Moving from parking_lot to scalelock: the same code twice, first on
//! parking_lot (`mod before`), then on scalelock (`mod after`). Only the
//! `use` line and the type names differ: `Mutex` → `QSpinLock`, `RwLock` →
//! `QRwLock` (or `PerCpuRwLock` for read-mostly data), their guards
//! likewise, `ReentrantMutex` and `Condvar` stay. Both are lock_api types, so every
//! method call is unchanged.
//!
//! `cargo run -p scalelock --example migrate_from_parking_lot` runs both
//! and compares what they computed (add `--features arc_lock` for the
//! `lock_arc` part). `tests/migrate_example.rs` runs them in
//! `cargo test` and checks that the two modules differ by the renames only.

/// The parking_lot original.
pub mod before {
    use std::cell::RefCell;
    use std::collections::HashMap;
    use std::sync::Arc;
    use std::thread;
    use std::time::Duration;

    use parking_lot::{
        Condvar, Mutex, MutexGuard, ReentrantMutex, RwLock, RwLockUpgradableReadGuard,
        RwLockWriteGuard,
    };

    /// Names shared by worker threads, a hit counter, and a journal that
    /// helpers append to while a caller may already hold it.
    pub struct Registry {
        names: RwLock<HashMap<u32, String>>,
        hits: Mutex<u64>,
        journal: ReentrantMutex<RefCell<Vec<String>>>,
        /// Set once the registry is open; workers wait for it.
        open: Mutex<bool>,
        opened: Condvar,
    }

    impl Default for Registry {
        fn default() -> Self {
            Registry {
                names: RwLock::new(HashMap::new()),
                hits: Mutex::new(0),
                journal: ReentrantMutex::new(RefCell::new(Vec::new())),
                open: Mutex::new(false),
                opened: Condvar::new(),
            }
        }
    }

    impl Registry {
        /// Looks `id` up under an upgradable read (other readers go on);
        /// upgrades to a write only to insert, then downgrades to a read.
        pub fn intern(&self, id: u32, name: &str) -> String {
            let names = self.names.upgradable_read();
            if let Some(known) = names.get(&id) {
                return known.clone();
            }
            let mut names = RwLockUpgradableReadGuard::upgrade(names);
            names.insert(id, name.to_owned());
            let names = RwLockWriteGuard::downgrade(names);
            self.record(&format!("interned {id}"));
            names[&id].clone()
        }

        /// Counts a hit and hands the lock to the next waiter in line.
        pub fn hit(&self) {
            let mut hits = self.hits.lock();
            *hits += 1;
            MutexGuard::unlock_fair(hits);
        }

        /// Counts a hit if the counter is free right now.
        pub fn try_hit(&self) -> bool {
            match self.hits.try_lock() {
                Some(mut hits) => {
                    *hits += 1;
                    true
                }
                None => false,
            }
        }

        /// Appends a line; called with or without the journal held.
        pub fn record(&self, line: &str) {
            let journal = self.journal.lock();
            journal.borrow_mut().push(line.to_owned());
        }

        /// Appends lines with no other thread's lines between them:
        /// `record` locks the journal again on this thread.
        pub fn record_batch(&self, lines: &[String]) {
            let _batch = self.journal.lock();
            for line in lines {
                self.record(line);
            }
        }

        /// Opens the registry: wakes every thread waiting for it.
        pub fn open(&self) {
            *self.open.lock() = true;
            self.opened.notify_all();
        }

        /// Waits until the registry is open, giving up after `patience`
        /// without a wake-up; whether it is open.
        pub fn wait_open(&self, patience: Duration) -> bool {
            let mut open = self.open.lock();
            while !*open {
                if self.opened.wait_for(&mut open, patience).timed_out() {
                    break;
                }
            }
            *open
        }

        /// Counts a hit unless the counter stays busy for `patience`.
        pub fn hit_within(&self, patience: Duration) -> bool {
            match self.hits.try_lock_for(patience) {
                Some(mut hits) => {
                    *hits += 1;
                    true
                }
                None => false,
            }
        }

        /// Renames `id` unless the names stay busy for `patience`; hands
        /// the write lock to the next waiter in line.
        pub fn rename_within(&self, id: u32, name: &str, patience: Duration) -> bool {
            match self.names.try_write_for(patience) {
                Some(mut names) => {
                    names.insert(id, name.to_owned());
                    RwLockWriteGuard::unlock_fair(names);
                    true
                }
                None => false,
            }
        }

        /// Names, hits, and the journal (sorted: threads interleave).
        pub fn summary(&self) -> (usize, u64, Vec<String>) {
            let journal = self.journal.lock();
            let mut lines = journal.borrow().clone();
            lines.sort();
            (self.names.read().len(), *self.hits.lock(), lines)
        }
    }

    /// A guard that owns an `Arc` of its lock instead of borrowing it
    /// (feature `arc_lock`): it outlives every other handle.
    #[cfg(feature = "arc_lock")]
    pub fn bump_owned(counter: Arc<Mutex<u64>>) -> u64 {
        let mut guard = counter.lock_arc();
        drop(counter);
        *guard += 1;
        *guard
    }

    /// Four workers on one registry.
    pub fn run() -> (usize, u64, Vec<String>) {
        let registry = Arc::new(Registry::default());
        let workers: Vec<_> = (0..4u32)
            .map(|w| {
                let registry = registry.clone();
                thread::spawn(move || {
                    assert!(registry.wait_open(Duration::from_secs(30)), "never opened");
                    for i in 0..100 {
                        registry.intern(i % 10, &format!("name-{}", i % 10));
                        registry.hit();
                        if !registry.try_hit() {
                            registry.hit();
                        }
                    }
                    registry
                        .record_batch(&[format!("worker {w} start"), format!("worker {w} end")]);
                    let patience = Duration::from_secs(10);
                    assert!(registry.hit_within(patience), "hits busy for 10 s");
                    assert!(registry.rename_within(w, &format!("worker-{w}"), patience));
                })
            })
            .collect();
        registry.open();
        for worker in workers {
            worker.join().unwrap();
        }
        registry.summary()
    }
}

/// The same code on scalelock.
pub mod after {
    use std::cell::RefCell;
    use std::collections::HashMap;
    use std::sync::Arc;
    use std::thread;
    use std::time::Duration;

    use scalelock::{
        Condvar, QRwLock, QRwLockUpgradableReadGuard, QRwLockWriteGuard, QSpinLock, QSpinLockGuard,
        ReentrantMutex,
    };

    /// Names shared by worker threads, a hit counter, and a journal that
    /// helpers append to while a caller may already hold it.
    pub struct Registry {
        names: QRwLock<HashMap<u32, String>>,
        hits: QSpinLock<u64>,
        journal: ReentrantMutex<RefCell<Vec<String>>>,
        /// Set once the registry is open; workers wait for it.
        open: QSpinLock<bool>,
        opened: Condvar,
    }

    impl Default for Registry {
        fn default() -> Self {
            Registry {
                names: QRwLock::new(HashMap::new()),
                hits: QSpinLock::new(0),
                journal: ReentrantMutex::new(RefCell::new(Vec::new())),
                open: QSpinLock::new(false),
                opened: Condvar::new(),
            }
        }
    }

    impl Registry {
        /// Looks `id` up under an upgradable read (other readers go on);
        /// upgrades to a write only to insert, then downgrades to a read.
        pub fn intern(&self, id: u32, name: &str) -> String {
            let names = self.names.upgradable_read();
            if let Some(known) = names.get(&id) {
                return known.clone();
            }
            let mut names = QRwLockUpgradableReadGuard::upgrade(names);
            names.insert(id, name.to_owned());
            let names = QRwLockWriteGuard::downgrade(names);
            self.record(&format!("interned {id}"));
            names[&id].clone()
        }

        /// Counts a hit and hands the lock to the next waiter in line.
        pub fn hit(&self) {
            let mut hits = self.hits.lock();
            *hits += 1;
            QSpinLockGuard::unlock_fair(hits);
        }

        /// Counts a hit if the counter is free right now.
        pub fn try_hit(&self) -> bool {
            match self.hits.try_lock() {
                Some(mut hits) => {
                    *hits += 1;
                    true
                }
                None => false,
            }
        }

        /// Appends a line; called with or without the journal held.
        pub fn record(&self, line: &str) {
            let journal = self.journal.lock();
            journal.borrow_mut().push(line.to_owned());
        }

        /// Appends lines with no other thread's lines between them:
        /// `record` locks the journal again on this thread.
        pub fn record_batch(&self, lines: &[String]) {
            let _batch = self.journal.lock();
            for line in lines {
                self.record(line);
            }
        }

        /// Opens the registry: wakes every thread waiting for it.
        pub fn open(&self) {
            *self.open.lock() = true;
            self.opened.notify_all();
        }

        /// Waits until the registry is open, giving up after `patience`
        /// without a wake-up; whether it is open.
        pub fn wait_open(&self, patience: Duration) -> bool {
            let mut open = self.open.lock();
            while !*open {
                if self.opened.wait_for(&mut open, patience).timed_out() {
                    break;
                }
            }
            *open
        }

        /// Counts a hit unless the counter stays busy for `patience`.
        pub fn hit_within(&self, patience: Duration) -> bool {
            match self.hits.try_lock_for(patience) {
                Some(mut hits) => {
                    *hits += 1;
                    true
                }
                None => false,
            }
        }

        /// Renames `id` unless the names stay busy for `patience`; hands
        /// the write lock to the next waiter in line.
        pub fn rename_within(&self, id: u32, name: &str, patience: Duration) -> bool {
            match self.names.try_write_for(patience) {
                Some(mut names) => {
                    names.insert(id, name.to_owned());
                    QRwLockWriteGuard::unlock_fair(names);
                    true
                }
                None => false,
            }
        }

        /// Names, hits, and the journal (sorted: threads interleave).
        pub fn summary(&self) -> (usize, u64, Vec<String>) {
            let journal = self.journal.lock();
            let mut lines = journal.borrow().clone();
            lines.sort();
            (self.names.read().len(), *self.hits.lock(), lines)
        }
    }

    /// A guard that owns an `Arc` of its lock instead of borrowing it
    /// (feature `arc_lock`): it outlives every other handle.
    #[cfg(feature = "arc_lock")]
    pub fn bump_owned(counter: Arc<QSpinLock<u64>>) -> u64 {
        let mut guard = counter.lock_arc();
        drop(counter);
        *guard += 1;
        *guard
    }

    /// Four workers on one registry.
    pub fn run() -> (usize, u64, Vec<String>) {
        let registry = Arc::new(Registry::default());
        let workers: Vec<_> = (0..4u32)
            .map(|w| {
                let registry = registry.clone();
                thread::spawn(move || {
                    assert!(registry.wait_open(Duration::from_secs(30)), "never opened");
                    for i in 0..100 {
                        registry.intern(i % 10, &format!("name-{}", i % 10));
                        registry.hit();
                        if !registry.try_hit() {
                            registry.hit();
                        }
                    }
                    registry
                        .record_batch(&[format!("worker {w} start"), format!("worker {w} end")]);
                    let patience = Duration::from_secs(10);
                    assert!(registry.hit_within(patience), "hits busy for 10 s");
                    assert!(registry.rename_within(w, &format!("worker-{w}"), patience));
                })
            })
            .collect();
        registry.open();
        for worker in workers {
            worker.join().unwrap();
        }
        registry.summary()
    }
}

#[allow(dead_code)] // also compiled as a module of tests/migrate_example.rs
fn main() {
    let ours = after::run();
    assert_eq!(ours, before::run(), "scalelock computed something else");
    let (names, hits, journal) = ours;
    println!(
        "parking_lot and scalelock agree: {names} names, {hits} hits, {} journal lines",
        journal.len()
    );
    #[cfg(feature = "arc_lock")]
    {
        use std::sync::Arc;
        assert_eq!(before::bump_owned(Arc::new(parking_lot::Mutex::new(1))), 2);
        assert_eq!(after::bump_owned(Arc::new(scalelock::QSpinLock::new(1))), 2);
        println!("lock_arc: the same on both");
    }
}
