//! What lockdep reports: [`Report`], printed like Linux's lockdep splats.

use core::fmt::{self, Display, Formatter};
use std::string::String;
use std::vec::Vec;

use crate::class::{Access, LockKind};

/// What kind of problem a [`Report`] describes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReportKind {
    /// Taking `acquiring` while holding `held[conflict]` closes a cycle in
    /// the class order: another thread, following the recorded chain, can
    /// hold what this one waits for and wait for what this one holds.
    Cycle,
    /// `acquiring` is a lock this thread already holds (`held[conflict]`)
    /// in a mode that blocks it: a mutex or write lock taken twice, a write
    /// after a read or a read after a write of one rwlock, or a second fair
    /// read (it queues behind any writer that arrived after the first).
    Recursion,
}

/// One lock in a report.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LockDesc {
    /// Its class.
    pub class: String,
    /// The class's construction site, for a class named by it.
    pub site: Option<String>,
    /// The kind of lock (the class's first).
    pub kind: LockKind,
    /// How it is (or was) taken.
    pub access: Access,
    /// Taken by a try-lock.
    pub try_lock: bool,
    /// The lock's address.
    pub instance: usize,
}

/// One recorded dependency of the existing chain.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Dependency {
    /// The class that was held.
    pub from: String,
    /// How it was held.
    pub from_access: Access,
    /// The class taken while holding it.
    pub to: String,
    /// How it was taken.
    pub to_access: Access,
    /// The thread that first took them in this order.
    pub thread: String,
    /// The classes that thread held then, outermost first.
    pub holding: Vec<String>,
    /// Where, if a backtrace was captured (`RUST_BACKTRACE=1` or
    /// `RUST_LIB_BACKTRACE=1` when the dependency was first recorded).
    pub backtrace: Option<String>,
}

/// A problem lockdep found, before it could deadlock.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Report {
    /// What was found.
    pub kind: ReportKind,
    /// The thread taking the lock.
    pub thread: String,
    /// The locks it holds, outermost first.
    pub held: Vec<LockDesc>,
    /// Index in `held` of the lock in conflict (see [`ReportKind`]).
    pub conflict: usize,
    /// The lock it is taking.
    pub acquiring: LockDesc,
    /// For a cycle, the recorded chain from `acquiring`'s class back to
    /// `held[conflict]`'s, each step where it was first recorded.
    pub existing: Vec<Dependency>,
}

impl Display for LockDesc {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "\"{}\" ({}{}, {} at {:#x}",
            self.class,
            if self.try_lock { "try " } else { "" },
            self.access.name(),
            self.kind,
            self.instance
        )?;
        if let Some(site) = &self.site {
            write!(f, ", class constructed at {site}")?;
        }
        f.write_str(")")
    }
}

impl Display for Report {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        let conflict = self.held.get(self.conflict);
        match self.kind {
            ReportKind::Cycle => writeln!(
                f,
                "lockdep: possible circular locking dependency (deadlock) on thread '{}'",
                self.thread
            )?,
            ReportKind::Recursion => writeln!(
                f,
                "lockdep: possible recursive locking (deadlock) on thread '{}'",
                self.thread
            )?,
        }
        writeln!(f, "thread '{}' is taking {}", self.thread, self.acquiring)?;
        writeln!(f, "while holding (outermost first):")?;
        for (i, h) in self.held.iter().enumerate() {
            let mark = if i == self.conflict {
                match self.kind {
                    ReportKind::Cycle => "   <- closes the cycle",
                    ReportKind::Recursion => "   <- the same lock",
                }
            } else {
                ""
            };
            writeln!(f, "  #{i} {h}{mark}")?;
        }
        match self.kind {
            ReportKind::Cycle => {
                if let Some(c) = conflict {
                    writeln!(
                        f,
                        "chain 1 (this thread, new): \"{}\" ({}) -> \"{}\" ({})",
                        c.class,
                        c.access.name(),
                        self.acquiring.class,
                        self.acquiring.access.name()
                    )?;
                }
                writeln!(f, "chain 2 (recorded earlier):")?;
                for d in &self.existing {
                    writeln!(
                        f,
                        "  \"{}\" ({}) -> \"{}\" ({}): first on thread '{}' while holding [{}]",
                        d.from,
                        d.from_access.name(),
                        d.to,
                        d.to_access.name(),
                        d.thread,
                        d.holding
                            .iter()
                            .map(|c| std::format!("\"{c}\""))
                            .collect::<Vec<_>>()
                            .join(", ")
                    )?;
                    if let Some(bt) = &d.backtrace {
                        for line in bt.lines() {
                            writeln!(f, "      {line}")?;
                        }
                    }
                }
                write!(
                    f,
                    "if these run at once, each thread waits for a lock another holds: deadlock"
                )
            }
            ReportKind::Recursion => {
                let held = conflict.map_or(Access::Write, |c| c.access);
                let why = match (held, self.acquiring.access) {
                    (h, Access::Write) if h.is_read() => {
                        "a write (or an upgrade) waits for every reader, this thread's own \
                         read included: it would wait for itself"
                    }
                    (h, Access::Upgradable) if h.is_read() => {
                        "an upgradable read queues behind any writer that arrived after the \
                         read, and that writer waits for the read: deadlock"
                    }
                    (h, _) if h.is_read() => {
                        "a second fair read queues behind any writer that arrived after the \
                         first read, and that writer waits for the first read: deadlock"
                    }
                    _ => "the lock is not recursive: this thread would wait for itself",
                };
                write!(f, "{why}")
            }
        }
    }
}
