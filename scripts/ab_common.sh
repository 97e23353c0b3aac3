# Shared by scripts/ab_*.sh (sourced, not run): the commits, the output
# directory, and the alternating runs (building is ab_build.sh's).
# Sets root, A, B (both resolved to short hashes, so that a branch name or
# HEAD never reuses a stale worktree or build of another commit), R (pairs)
# and out, from the caller's arguments COMMIT_A COMMIT_B [PAIRS].
source "$(dirname "${BASH_SOURCE[0]}")/ab_build.sh"
A=$(git rev-parse --short "$1^{commit}"); B=$(git rev-parse --short "$2^{commit}"); R=${3:-6}
out=$root/target/ab; mkdir -p "$out"

# ab_pairs BENCH RAW RUN: builds bench BENCH at A and at B, empties RAW, and
# runs the two binaries alternately (ABBA...) for R pairs: `RUN SIDE BINARY
# PAIR` (SIDE is A or B) prints its result lines, which go to RAW.
ab_pairs() {
  local bench=$1 raw=$2 run=$3 ba bb
  # Not in ab_alternate's arguments, where a failed build's status is lost.
  ba=$(ab_build $bench $A) || return 1
  bb=$(ab_build $bench $B) || return 1
  ab_alternate $raw $run $ba $bb
}
