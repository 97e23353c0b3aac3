//! The crate linked into a Rust `dylib` (and a program that links that
//! dylib, `-C prefer-dynamic`): the switch's sites link, are patched, and
//! the counting follows the switch. Builds and runs a small package in a
//! temporary directory with this cargo (offline, the workspace's lock
//! file), so it takes a build of the crate.
//! Run: `cargo test -p scalelock --release --features stats --test switch_patched_dylib`
#![cfg(all(feature = "stats", target_arch = "x86_64", target_os = "linux"))]

use std::path::PathBuf;
use std::process::Command;

const LIB: &str = r#"
use scalelock::{ClassRef, LockClass, QSpinLock, RawQSpinLock, stats};

static C: LockClass = LockClass::new("dylib-qspinlock");

pub fn run() {
    let m = QSpinLock::from_raw(RawQSpinLock::with_class(ClassRef::of(&C)), 0u64);
    *m.lock() += 1;
    assert!(scalelock::hook::switch_is_patched(), "not patched");
    stats::enable();
    for _ in 0..5 {
        *m.lock() += 1;
    }
    stats::disable();
    *m.lock() += 1;
    let n = stats::snapshot().class("dylib-qspinlock").map_or(0, |c| c.write.acquisitions);
    assert_eq!(n, 5);
    println!("dylib ok");
}
"#;

#[test]
fn the_crate_links_and_patches_in_a_rust_dylib() {
    let manifest = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("switch_patched_dylib");
    let _ = std::fs::remove_dir_all(dir.join("src"));
    std::fs::create_dir_all(dir.join("src")).unwrap();
    std::fs::write(
        dir.join("Cargo.toml"),
        format!(
            "[package]\nname = \"switch_patched_dylib\"\nversion = \"0.0.0\"\nedition = \"2024\"\n\
             [lib]\ncrate-type = [\"dylib\"]\n\
             [dependencies]\nscalelock = {{ path = {:?}, features = [\"stats\"] }}\n\
             [workspace]\n",
            manifest
        ),
    )
    .unwrap();
    std::fs::copy(manifest.join("../../Cargo.lock"), dir.join("Cargo.lock")).unwrap();
    std::fs::write(dir.join("src/lib.rs"), LIB).unwrap();
    std::fs::write(
        dir.join("src/main.rs"),
        "fn main() { switch_patched_dylib::run() }\n",
    )
    .unwrap();
    let out = Command::new(env!("CARGO"))
        .current_dir(&dir)
        .args(["run", "--offline", "--quiet"])
        .env("CARGO_TARGET_DIR", dir.join("target"))
        .env("RUSTFLAGS", "-C prefer-dynamic")
        .env_remove("CARGO_ENCODED_RUSTFLAGS")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success() && stdout.contains("dylib ok"),
        "{}:\n{stdout}\n{stderr}",
        out.status
    );
}
