//! The `/proc/lock_stat`-style table: `Display` for [`Snapshot`].
//!
//! One row per class and access mode that saw acquisitions, then a line of
//! slow-path events per access mode (its waiters' parks, hand-offs, ...),
//! and one of the class's other events (only those that happened):
//!
//! ```text
//! class      kind      acc        acq   contended   con%  wait-avg  wait-p50 ... hold-max
//! gnttab     QRwLock   read   1200000        3400  0.28%     1.2us     2.0us ...
//!                      write      812          90  11.1%     3.1us ...
//!   read events: batch-ends 3, parks 12, wakes 12
//!   write events: queue-max 3, handoffs 1, parks 2, wakes 2, long-holds 1
//! ```
//!
//! `con%` is `-` for an access mode with waits but no acquisition yet (a
//! live snapshot counts a waiter contended before it acquires).

use core::fmt::{self, Display, Formatter, Write as _};
use std::borrow::Cow;
use std::string::String;

use super::snapshot::{AccessStats, ClassStats, Events, Snapshot};

/// A duration in ns, printed with a unit (`40ns`, `1.2us`, `3.4ms`,
/// `1.20s`); honours width and alignment.
pub(crate) struct Ns(pub(crate) u64);

impl Display for Ns {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        let ns = self.0;
        // A unit's upper limit is where its rounded figure would read 1000
        // (999.95 us is "1.0ms", not "1000.0us").
        let s = if ns < 1_000 {
            std::format!("{ns}ns")
        } else if ns < 999_950 {
            std::format!("{:.1}us", ns as f64 / 1e3)
        } else if ns < 999_950_000 {
            std::format!("{:.1}ms", ns as f64 / 1e6)
        } else {
            std::format!("{:.2}s", ns as f64 / 1e9)
        };
        f.pad(&s)
    }
}

const HEADER: [&str; 13] = [
    "acq",
    "contended",
    "con%",
    "wait-avg",
    "wait-p50",
    "wait-p99",
    "wait-max",
    "wait-total",
    "holds",
    "hold-avg",
    "hold-p50",
    "hold-p99",
    "hold-max",
];

/// The class column's width, unless a class's name is longer: then the
/// longest name's, so that every row's figures stay under their headings.
const NAME_WIDTH: usize = 32;

/// A class name as the table shows it: its control characters escaped (a
/// newline in a name would end its row).
fn shown_name(name: &str) -> Cow<'_, str> {
    if !name.chars().any(char::is_control) {
        return Cow::Borrowed(name);
    }
    let mut s = String::new();
    for c in name.chars() {
        if c.is_control() {
            s.extend(c.escape_default());
        } else {
            s.push(c);
        }
    }
    Cow::Owned(s)
}

/// One access mode's row, the class name in a column `width` wide.
fn row(
    f: &mut Formatter<'_>,
    name: &str,
    width: usize,
    kind: &str,
    acc: &str,
    a: &AccessStats,
) -> fmt::Result {
    // Waiters are counted contended before they acquire: a live snapshot
    // can hold waits with no acquisition yet, whose share is no number
    // (0% would read as "never contended").
    let con = if a.acquisitions == 0 {
        String::from("-")
    } else {
        std::format!("{:.2}%", a.contention() * 100.0)
    };
    writeln!(
        f,
        "{name:<width$} {kind:<12} {acc:<5} {:>12} {:>10} {con:>7} {:>9} {:>9} {:>9} {:>9} {:>10} {:>9} {:>9} {:>9} {:>9} {:>9}",
        a.acquisitions,
        a.contended,
        Ns(a.wait.mean_ns()),
        Ns(a.wait.p50_ns),
        Ns(a.wait.p99_ns),
        Ns(a.wait.max_ns),
        Ns(a.wait.total_ns),
        a.hold.count,
        Ns(a.hold.mean_ns()),
        Ns(a.hold.p50_ns),
        Ns(a.hold.p99_ns),
        Ns(a.hold.max_ns),
    )
}

/// Appends `name value` to a comma-separated list if `v` is not 0.
fn item(s: &mut String, name: &str, v: u64) {
    if v != 0 {
        if !s.is_empty() {
            s.push_str(", ");
        }
        let _ = write!(s, "{name} {v}");
    }
}

/// One access mode's events that happened (its slow path's, and its long
/// holds), comma-separated ("" if none).
pub(crate) fn access_events_line(a: &AccessStats) -> String {
    let e = &a.events;
    let mut s = String::new();
    item(&mut s, "pending-path", e.pending_path);
    item(&mut s, "queue-max", e.queue_depth_max);
    item(&mut s, "batch-ends", e.batch_ends);
    item(&mut s, "handoffs", e.handoffs);
    item(&mut s, "steals", e.steals);
    item(&mut s, "parks", e.parks);
    item(&mut s, "wakes", e.wakes);
    item(&mut s, "spurious-wakes", e.spurious_wakes);
    item(&mut s, "timeouts", e.timeouts);
    item(&mut s, "long-holds", a.long_holds);
    s
}

/// The class's events that happened, except those shown per access mode
/// (the slow path's, and long holds), comma-separated ("" if none).
pub(crate) fn events_line(e: &Events) -> String {
    let mut s = String::new();
    item(&mut s, "fast-reads", e.fast_reads);
    item(&mut s, "fallback-reads", e.fallback_reads);
    item(&mut s, "seqlock-retries", e.seqlock_retries);
    item(&mut s, "refresh-coalesced", e.refresh_coalesced);
    if e.revocations.count != 0 {
        if !s.is_empty() {
            s.push_str(", ");
        }
        let r = &e.revocations;
        let _ = write!(
            s,
            "revocations {} (avg {}, p99 {}, max {}; {} with a heavy fence)",
            r.count,
            Ns(r.mean_ns()),
            Ns(r.p99_ns),
            Ns(r.max_ns),
            e.heavy_revocations
        );
    }
    s
}

/// The rows of class `c`, its name in a column `width` wide.
fn class_rows(f: &mut Formatter<'_>, c: &ClassStats, width: usize) -> fmt::Result {
    let kind = c.kind.map_or("?", |k| k.name());
    let name = shown_name(&c.name);
    let mut first = true;
    for (acc, a) in [("read", &c.read), ("write", &c.write)] {
        if a.acquisitions == 0 && a.contended == 0 {
            continue;
        }
        if first {
            row(f, &name, width, kind, acc, a)?;
            first = false;
        } else {
            row(f, "", width, "", acc, a)?;
        }
    }
    if first {
        writeln!(f, "{name:<width$} {kind:<12} (no acquisitions)")?;
    }
    if let Some(site) = &c.site
        && *site != c.name
    {
        writeln!(f, "  site: {site}")?;
    }
    for (acc, a) in [("read", &c.read), ("write", &c.write)] {
        let ev = access_events_line(a);
        if !ev.is_empty() {
            writeln!(f, "  {acc} events: {ev}")?;
        }
    }
    let ev = events_line(&c.events);
    if !ev.is_empty() {
        writeln!(f, "  events: {ev}")?;
    }
    Ok(())
}

impl Display for Snapshot {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "lock_stat (scalelock): {} classes, collection {}, hold times sampled 1 in {}{}",
            self.classes.len(),
            if self.enabled { "on" } else { "off" },
            self.hold_sample,
            if self.dropped_events != 0 {
                std::format!(", {} events dropped", self.dropped_events)
            } else {
                String::new()
            }
        )?;
        let h = &HEADER;
        let width = self
            .classes
            .iter()
            .map(|c| shown_name(&c.name).chars().count())
            .fold(NAME_WIDTH, usize::max);
        writeln!(
            f,
            "{:<width$} {:<12} {:<5} {:>12} {:>10} {:>7} {:>9} {:>9} {:>9} {:>9} {:>10} {:>9} {:>9} {:>9} {:>9} {:>9}",
            "class",
            "kind",
            "acc",
            h[0],
            h[1],
            h[2],
            h[3],
            h[4],
            h[5],
            h[6],
            h[7],
            h[8],
            h[9],
            h[10],
            h[11],
            h[12]
        )?;
        for c in &self.classes {
            class_rows(f, c, width)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::TimeStats;
    use crate::stats::snapshot::WaitEvents;

    #[test]
    fn ns_units() {
        assert_eq!(std::format!("{}", Ns(40)), "40ns");
        assert_eq!(std::format!("{}", Ns(1_250)), "1.2us");
        assert_eq!(std::format!("{}", Ns(3_400_000)), "3.4ms");
        assert_eq!(std::format!("{}", Ns(1_200_000_000)), "1.20s");
        assert_eq!(std::format!("{:>6}", Ns(40)), "  40ns");
        // Rounding never shows 1000 of a unit.
        assert_eq!(std::format!("{}", Ns(999_949)), "999.9us");
        assert_eq!(std::format!("{}", Ns(999_960)), "1.0ms");
        assert_eq!(std::format!("{}", Ns(999_960_000)), "1.00s");
    }

    #[test]
    fn long_and_odd_class_names_keep_the_columns() {
        let class = |name: &str| ClassStats {
            name: name.into(),
            kind: Some(crate::LockKind::QSpinLock),
            write: AccessStats {
                acquisitions: 5,
                contended: 1,
                wait: TimeStats::from_samples(&[100]),
                hold: TimeStats::from_samples(&[40]),
                ..AccessStats::default()
            },
            ..ClassStats::default()
        };
        let snap = Snapshot {
            enabled: true,
            hold_sample: 1,
            dropped_events: 0,
            classes: std::vec![
                class("short"),
                // A construction-site class's name.
                class("crates/scalelock/tests/stats_snapshot.rs:123:45"),
                class("two\nlines\tand a tab"),
            ],
        };
        let t = std::format!("{snap}");
        let lines: std::vec::Vec<&str> = t.lines().collect();
        // The title, the header and one row per class.
        assert_eq!(lines.len(), 5, "{t}");
        // Every figure fits its column: the rows are as wide as the header
        // when their columns line up with it.
        let width = lines[1].chars().count();
        for l in &lines[2..] {
            assert_eq!(l.chars().count(), width, "{l:?} in\n{t}");
        }
        assert!(lines[4].starts_with("two\\nlines\\tand a tab "), "{t}");
    }

    #[test]
    fn table_rows_and_events() {
        let snap = Snapshot {
            enabled: true,
            hold_sample: 16,
            dropped_events: 0,
            classes: std::vec![ClassStats {
                name: "gnttab".into(),
                kind: Some(crate::LockKind::QRwLock),
                read: AccessStats {
                    acquisitions: 1000,
                    contended: 10,
                    wait: TimeStats::from_samples(&[100; 10]),
                    hold: TimeStats::from_samples(&[40; 62]),
                    long_holds: 0,
                    events: WaitEvents {
                        parks: 3,
                        wakes: 3,
                        ..WaitEvents::default()
                    },
                },
                write: AccessStats {
                    acquisitions: 10,
                    contended: 1,
                    wait: TimeStats::from_samples(&[500]),
                    hold: TimeStats::from_samples(&[40; 10]),
                    long_holds: 1,
                    events: WaitEvents {
                        queue_depth_max: 2,
                        handoffs: 1,
                        ..WaitEvents::default()
                    },
                },
                events: Events {
                    parks: 3,
                    wakes: 3,
                    queue_depth_max: 2,
                    handoffs: 1,
                    long_holds: 1,
                    ..Events::default()
                },
                ..ClassStats::default()
            }],
        };
        let t = std::format!("{snap}");
        let lines: std::vec::Vec<&str> = t.lines().collect();
        assert_eq!(lines.len(), 6, "{t}");
        assert!(lines[1].starts_with("class"));
        assert!(lines[2].starts_with("gnttab"), "{t}");
        assert!(lines[2].contains(" read "), "{t}");
        assert!(lines[2].contains("1.00%"), "{t}");
        assert!(lines[2].contains("100ns"), "{t}");
        assert!(lines[3].trim_start().starts_with("write "), "{t}");
        assert!(lines[3].contains("10.00%"), "{t}");
        // The slow-path events and long holds on their access's line; the
        // class's totals of them are not shown again (no other events
        // here, so no class line).
        assert_eq!(lines[4], "  read events: parks 3, wakes 3");
        assert_eq!(
            lines[5],
            "  write events: queue-max 2, handoffs 1, long-holds 1"
        );
    }

    #[test]
    fn a_class_only_waited_on_shows_no_contention_share() {
        // A live snapshot taken while the first writer still waits: one
        // contended wait, no acquisition yet.
        let snap = Snapshot {
            enabled: true,
            hold_sample: 1,
            dropped_events: 0,
            classes: std::vec![ClassStats {
                name: "waiting".into(),
                kind: Some(crate::LockKind::QSpinLock),
                write: AccessStats {
                    contended: 1,
                    ..AccessStats::default()
                },
                ..ClassStats::default()
            }],
        };
        let t = std::format!("{snap}");
        let row = t.lines().find(|l| l.starts_with("waiting")).expect(&t);
        let cells: std::vec::Vec<&str> = row.split_whitespace().collect();
        // name, kind, acc, acq, contended, con%, ...
        assert_eq!(
            &cells[..6],
            ["waiting", "QSpinLock", "write", "0", "1", "-"],
            "{t}"
        );
        // The column keeps its width: the heading's `con%` ends where the
        // cell does.
        let header = t.lines().find(|l| l.starts_with("class")).expect(&t);
        let end = |l: &str, w: &str| l.find(w).map(|i| i + w.len());
        assert_eq!(end(header, "con%"), end(row, " - ").map(|e| e - 1), "{t}");
    }
}
