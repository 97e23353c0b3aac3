//! The architecture rule the crate's layout keeps: its modules import each
//! other in one direction only (no import circles), and nothing imports
//! from the crate root (`main.rs` only parses the command line and
//! dispatches).

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// Top-level module of a source file: `src/torture/ops.rs` -> `torture`.
fn module_of(src: &Path, file: &Path) -> String {
    let rel = file.strip_prefix(src).unwrap();
    let first = rel
        .components()
        .next()
        .unwrap()
        .as_os_str()
        .to_string_lossy();
    first.trim_end_matches(".rs").to_string()
}

fn rust_files(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// `crate::NAME` references in `text`, outside comments.
fn crate_refs(text: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for line in text.lines() {
        let code = line.split("//").next().unwrap_or("");
        let mut rest = code;
        while let Some(at) = rest.find("crate::") {
            let tail = &rest[at + "crate::".len()..];
            let name: String = tail
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            // `use crate::{a, b}`.
            if name.is_empty() && tail.starts_with('{') {
                let inner = &tail[1..tail.find('}').unwrap_or(tail.len())];
                for part in inner.split(',') {
                    let n: String = part
                        .trim()
                        .chars()
                        .take_while(|c| c.is_alphanumeric() || *c == '_')
                        .collect();
                    if !n.is_empty() {
                        out.insert(n);
                    }
                }
            } else if !name.is_empty() {
                out.insert(name);
            }
            rest = tail;
        }
    }
    out
}

#[test]
fn modules_import_in_one_direction_and_not_from_the_root() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let modules: BTreeSet<String> = files
        .iter()
        .map(|f| module_of(&src, f))
        .filter(|m| m != "main")
        .collect();
    let mut edges: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for f in &files {
        let from = module_of(&src, f);
        if from == "main" {
            continue;
        }
        let text = std::fs::read_to_string(f).unwrap();
        for to in crate_refs(&text) {
            assert!(
                modules.contains(&to),
                "{} uses crate::{to}, which is not a module (the crate root exports nothing)",
                f.display()
            );
            if to != from {
                edges.entry(from.clone()).or_default().insert(to);
            }
        }
    }
    // Depth-first search for a cycle.
    fn visit<'a>(
        m: &'a str,
        edges: &'a BTreeMap<String, BTreeSet<String>>,
        path: &mut Vec<&'a str>,
        done: &mut BTreeSet<&'a str>,
    ) {
        if done.contains(m) {
            return;
        }
        if let Some(at) = path.iter().position(|p| *p == m) {
            panic!("import circle: {} -> {m}", path[at..].join(" -> "));
        }
        path.push(m);
        for to in edges.get(m).into_iter().flatten() {
            visit(to, edges, path, done);
        }
        path.pop();
        done.insert(m);
    }
    let mut done = BTreeSet::new();
    for m in &modules {
        visit(m, &edges, &mut Vec::new(), &mut done);
    }
    // The shared pieces are shared: every command runs on the one harness
    // and the one statistics type.
    for user in ["bench", "kv", "scenarios", "torture"] {
        assert!(
            edges[user].contains("harness"),
            "{user} has its own harness"
        );
    }
    for user in ["report", "scenarios", "torture"] {
        assert!(
            edges[user].contains("stats"),
            "{user} has its own statistics"
        );
    }
}

#[test]
fn the_reference_scanner_sees_every_form() {
    let refs = crate_refs(
        "use crate::a::B;\nuse crate::{c, d::E};\nlet x = crate::f::g(); // crate::comment\n",
    );
    assert_eq!(refs.into_iter().collect::<Vec<_>>(), ["a", "c", "d", "f"]);
}
