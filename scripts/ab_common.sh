# Shared by scripts/ab_*.sh (sourced, not run): the commits, the output
# directory, and building one commit's bench binary.
# Sets root, A, B (both resolved to short hashes, so that a branch name or
# HEAD never reuses a stale worktree or build of another commit), R (pairs)
# and out, from the caller's arguments COMMIT_A COMMIT_B [PAIRS].
root=$(git rev-parse --show-toplevel)
A=$(git rev-parse --short "$1^{commit}"); B=$(git rev-parse --short "$2^{commit}"); R=${3:-6}
out=$root/target/ab; mkdir -p "$out"

# ab_build BENCH COMMIT: builds bench BENCH at COMMIT (a detached worktree
# in /tmp, its own target dir) and prints the binary's path.
ab_build() {
  local bench=$1 c=$2 d=/tmp/ab-$2
  [ -d $d ] || git -C "$root" worktree add -q --detach $d $c
  (cd $d && CARGO_TARGET_DIR=/tmp/ab-target-$c cargo bench -q -p scalelock --bench $bench --no-run 2>&1 | tail -1 >&2)
  ls -t /tmp/ab-target-$c/release/deps/$bench-* | grep -v '\.d$' | head -1
}

# ab_pairs BENCH RAW RUN: builds bench BENCH at A and at B, empties RAW, and
# runs the two binaries alternately (ABBA...) for R pairs: `RUN SIDE BINARY
# PAIR` (SIDE is A or B) prints its result lines, which go to RAW.
ab_pairs() {
  local bench=$1 raw=$2 run=$3 ba bb i s order
  ba=$(ab_build $bench $A); bb=$(ab_build $bench $B)
  : > $raw
  for i in $(seq 1 $R); do
    if (( i % 2 )); then order="A B"; else order="B A"; fi
    for s in $order; do
      if [ $s = A ]; then $run $s $ba $i; else $run $s $bb $i; fi >> $raw
    done
  done
}
