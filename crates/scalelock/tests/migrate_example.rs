//! `examples/migrate_from_parking_lot.rs`, which the README shows: its
//! parking_lot and scalelock halves compute the same, differ only by the
//! type names (so the README's claim stays true as the example grows), and
//! the README's diff is taken from them.
#![cfg(not(any(loom, shuttle)))]

#[path = "../examples/migrate_from_parking_lot.rs"]
#[allow(dead_code)]
mod example;

const SOURCE: &str = include_str!("../examples/migrate_from_parking_lot.rs");
const README: &str = include_str!("../../../README.md");

/// parking_lot's names and ours.
const RENAMES: &[(&str, &str)] = &[
    ("parking_lot", "scalelock"),
    ("before", "after"),
    ("Mutex", "QSpinLock"),
    ("MutexGuard", "QSpinLockGuard"),
    ("RwLock", "QRwLock"),
    ("RwLockUpgradableReadGuard", "QRwLockUpgradableReadGuard"),
    ("RwLockWriteGuard", "QRwLockWriteGuard"),
];

#[test]
fn both_halves_compute_the_same() {
    let ours = example::after::run();
    assert_eq!(ours, example::before::run());
    let (names, hits, journal) = ours;
    assert_eq!(names, 10);
    assert_eq!(hits, 4 * 100 * 2 + 4);
    assert_eq!(journal.len(), 10 + 4 * 2);
    // A batch's lines are adjacent in the unsorted journal; here, present.
    assert!(journal.contains(&"worker 3 end".to_string()));
}

#[cfg(feature = "arc_lock")]
#[test]
fn lock_arc_halves_agree() {
    use std::sync::Arc;
    assert_eq!(
        example::before::bump_owned(Arc::new(parking_lot::Mutex::new(5))),
        example::after::bump_owned(Arc::new(scalelock::QSpinLock::new(5)))
    );
}

/// The text of `pub mod <name> { ... }` (up to the closing brace in
/// column 0).
fn module(name: &str) -> &'static str {
    let open = format!("pub mod {name} {{\n");
    let start = SOURCE.find(&open).unwrap_or_else(|| panic!("no `{open}`"));
    let len = SOURCE[start..].find("\n}\n").expect("module end");
    &SOURCE[start..start + len + 2]
}

/// Tokens: identifiers and single other characters, whitespace dropped
/// (rustfmt wraps lines differently when names are longer).
fn tokens(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut ident = String::new();
    for c in text.chars() {
        if c.is_alphanumeric() || c == '_' {
            ident.push(c);
            continue;
        }
        if !ident.is_empty() {
            out.push(std::mem::take(&mut ident));
        }
        if !c.is_whitespace() {
            out.push(c.to_string());
        }
    }
    out
}

/// The names a `use <krate>::{...};` brings in, and the module's text
/// without that statement.
fn split_import(module: &str, krate: &str) -> (Vec<String>, String) {
    let open = format!("use {krate}::{{");
    let start = module.find(&open).unwrap_or_else(|| panic!("no `{open}`"));
    let end = start + module[start..].find("};").expect("end of use") + 2;
    let names = module[start + open.len()..end - 2]
        .split(',')
        .map(str::trim)
        .filter(|n| !n.is_empty())
        .map(String::from)
        .collect();
    (names, format!("{}{}", &module[..start], &module[end..]))
}

fn rename(token: &str) -> String {
    RENAMES
        .iter()
        .find(|(from, _)| *from == token)
        .map_or(token, |(_, to)| to)
        .to_string()
}

#[test]
fn halves_differ_only_by_type_names() {
    let (before_names, before_rest) = split_import(module("before"), "parking_lot");
    let (after_names, after_rest) = split_import(module("after"), "scalelock");
    let mut renamed: Vec<String> = before_names.iter().map(|n| rename(n)).collect();
    renamed.sort();
    let mut after_names = after_names;
    after_names.sort();
    assert_eq!(
        renamed, after_names,
        "the imports differ by more than names"
    );

    let before: Vec<String> = tokens(&before_rest).iter().map(|t| rename(t)).collect();
    let after = tokens(&after_rest);
    if let Some(i) = (0..before.len().min(after.len())).find(|&i| before[i] != after[i]) {
        let context = |v: &[String]| v[i.saturating_sub(8)..(i + 8).min(v.len())].join(" ");
        panic!(
            "the halves differ beyond the renames at token {i}:\n  before (renamed): {}\n  after: {}",
            context(&before),
            context(&after)
        );
    }
    assert_eq!(before.len(), after.len(), "one half is longer");
}

/// Whether the trimmed non-empty lines of `excerpt` occur in `module`'s
/// lines in the same order; the first one that does not, if any.
fn first_missing<'a>(excerpt: &[&'a str], module: &str) -> Option<&'a str> {
    let mut lines = module.lines().map(str::trim);
    excerpt
        .iter()
        .map(|l| l.trim())
        .filter(|l| !l.is_empty())
        .find(|want| !lines.any(|l| l == *want))
}

#[test]
fn readme_diff_is_taken_from_the_example() {
    let section = README
        .split("## From parking_lot")
        .nth(1)
        .expect("the README's migration section");
    let diff = section
        .split("```diff\n")
        .nth(1)
        .and_then(|d| d.split("```").next())
        .expect("its diff block");
    let side = |mark: char| -> Vec<&str> {
        diff.lines()
            .filter(|l| l.is_empty() || l.starts_with(' ') || l.starts_with(mark))
            .map(|l| l.get(1..).unwrap_or(""))
            .collect()
    };
    let (old, new) = (side('-'), side('+'));
    assert!(old.len() > 20 && new.len() > 20, "a real excerpt");
    assert_eq!(
        first_missing(&old, module("before")),
        None,
        "README's old side"
    );
    assert_eq!(
        first_missing(&new, module("after")),
        None,
        "README's new side"
    );
}

/// The README's "change only the `use` line" import: every parking_lot name
/// the example's `before` half imports and uses must be aliased there
/// (`QSpinLockGuard as MutexGuard`, ...), or code that names a guard type
/// (`MutexGuard::unlock_fair`, `RwLockWriteGuard::downgrade`) does not
/// compile with that line alone.
#[test]
fn readme_alias_import_covers_the_example() {
    let section = README
        .split("To change only the `use` line")
        .nth(1)
        .expect("README: the alias import");
    let start = section
        .find("`use scalelock::{")
        .expect("the alias `use` line")
        + 1;
    let len = section[start..].find('`').expect("end of the `use` line");
    let line = section[start..start + len]
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ");
    let (before_names, _) = split_import(module("before"), "parking_lot");
    for name in before_names {
        let ours = rename(&name);
        if ours != name {
            let alias = format!("{ours} as {name}");
            assert!(
                line.contains(&alias),
                "README's alias import lacks `{alias}`: {line}"
            );
        }
    }
}

/// The README's alias import as written there: parking_lot code that names
/// the guard types compiles with it alone.
mod readme_alias_import {
    use scalelock::{
        Condvar, QRwLock as RwLock, QRwLockUpgradableReadGuard as RwLockUpgradableReadGuard,
        QRwLockWriteGuard as RwLockWriteGuard, QSpinLock as Mutex, QSpinLockGuard as MutexGuard,
        ReentrantMutex,
    };

    #[test]
    fn parking_lot_code_compiles_with_it() {
        let m = Mutex::new(0);
        let mut g = m.lock();
        *g += 1;
        MutexGuard::unlock_fair(g);
        let l = RwLock::new(0);
        let w = RwLockUpgradableReadGuard::upgrade(l.upgradable_read());
        assert_eq!(*RwLockWriteGuard::downgrade(w), 0);
        let r = ReentrantMutex::new(());
        let _outer = r.lock();
        let _inner = r.lock();
        assert!(!Condvar::new().notify_one());
    }
}
