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
