#!/usr/bin/env bash
# Instructions per operation of a 1-thread read/write mix, each op a read
# or a write drawn at random (xorshift, as the percpu_rwlock bench's
# ORDER=random), on PerCpuRwLock (default table: at these write shares it
# runs inhibited, its reads on the underlying lock) and on QRwLock, for
# each commit given. valgrind (callgrind) counts the instructions inside
# each lock's loop function only, so the figure is exact and no code
# layout or noisy neighbour moves it, unlike a time. The loop is a small
# program built in /tmp against the commit's scalelock (a detached
# worktree), so any commit can be counted.
# usage: scripts/mix_instructions.sh COMMIT [COMMIT...]
# env: READS (50,90: read percentages), COUNT_OPS (100000 per call; the
# program calls each loop four times, the first one settling the lock's
# id, slot and mode, and the count is divided by all four). Needs
# valgrind.
set -euo pipefail
source "$(dirname "$0")/ab_build.sh"
ops=${COUNT_OPS:-100000}
build() { # COMMIT: prints the program's path
  local c=$1 p=/tmp/mix-count-$1
  ab_worktree $c || return 1
  mkdir -p $p/src
  cat > $p/Cargo.toml <<EOF
[package]
name = "mix_count"
version = "0.1.0"
edition = "2024"
[dependencies]
scalelock = { path = "/tmp/ab-$c/crates/scalelock" }
[profile.release]
debug = true
EOF
  cat > $p/src/main.rs <<'EOF'
use scalelock::{PerCpuRwLock, QRwLock};
use std::hint::black_box;
macro_rules! mix {
    ($name:ident, $ty:ty) => {
        #[inline(never)]
        fn $name(lock: &$ty, n: u64, threshold: u64) -> u64 {
            let mut rng = 0x9E37_79B9_7F4A_7C15u64;
            let mut sink = 0u64;
            for _ in 0..n {
                rng ^= rng << 13;
                rng ^= rng >> 7;
                rng ^= rng << 17;
                if rng < threshold {
                    let mut g = lock.write();
                    for w in g.iter_mut() {
                        *w += 1;
                    }
                } else {
                    sink = sink.wrapping_add(lock.read().iter().sum::<u64>());
                }
            }
            sink
        }
    };
}
mix!(loop_percpu, PerCpuRwLock<[u64; 4]>);
mix!(loop_qrw, QRwLock<[u64; 4]>);
fn main() {
    let reads: f64 = std::env::var("READS").unwrap().parse().unwrap();
    let n: u64 = std::env::var("COUNT_OPS").unwrap().parse().unwrap();
    let threshold = u64::MAX / (100.0 / (100.0 - reads)).round() as u64;
    let (p, q) = (PerCpuRwLock::new([0; 4]), QRwLock::new([0; 4]));
    for _ in 0..4 {
        black_box(loop_percpu(&p, n, threshold));
        black_box(loop_qrw(&q, n, threshold));
    }
}
EOF
  (cd $p && CARGO_TARGET_DIR=$p/target cargo build -q --release 2>&1 | tail -1 >&2) ||
    { echo "mix_count at $c did not build" >&2; return 1; }
  echo $p/target/release/mix_count
}
count() { # BINARY READS LOOP
  READS=$2 COUNT_OPS=$ops callgrind_per_op $((4 * ops)) "mix_count::$3" $1
}
echo "| commit | reads | PerCpuRwLock instructions/op | QRwLock instructions/op |"
echo "| --- | --- | --- | --- |"
for c in "$@"; do
  c=$(git -C "$root" rev-parse --short "$c^{commit}")
  bin=$(build $c)
  for r in $(echo ${READS:-50,90} | tr , ' '); do
    echo "| $c | $r% | $(count $bin $r loop_percpu) | $(count $bin $r loop_qrw) |"
  done
done
