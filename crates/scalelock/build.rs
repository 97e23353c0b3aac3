//! One cfg: `patched_switch`, where the hooks' run-time switch is patched
//! into the code (`src/hook/patched_switch.rs`): x86-64
//! Linux with `stats` or `lockdep`, and not under Miri, loom or shuttle
//! (which run no patched code).
fn main() {
    println!("cargo::rustc-check-cfg=cfg(patched_switch)");
    println!("cargo::rerun-if-changed=build.rs");
    let env = |k: &str| std::env::var(k).unwrap_or_default();
    let set = |k: &str| std::env::var_os(k).is_some();
    let hooks = set("CARGO_FEATURE_STATS") || set("CARGO_FEATURE_LOCKDEP");
    // 64-bit pointers: the site tables hold 64-bit addresses (x32 is
    // x86_64 Linux too).
    let target = env("CARGO_CFG_TARGET_ARCH") == "x86_64"
        && env("CARGO_CFG_TARGET_OS") == "linux"
        && env("CARGO_CFG_TARGET_POINTER_WIDTH") == "64";
    let modelled = set("CARGO_CFG_MIRI") || set("CARGO_CFG_LOOM") || set("CARGO_CFG_SHUTTLE");
    if hooks && target && !modelled {
        println!("cargo::rustc-cfg=patched_switch");
    }
}
