# Shared by scripts/ab_*.sh and hooks_off_instructions.sh (sourced, not
# run): the repository root, and building one commit's bench binary.
root=$(git rev-parse --show-toplevel)

# ab_build BENCH COMMIT [FEATURES]: builds bench BENCH of scalelock at
# COMMIT (a detached worktree in /tmp, its own target dir per commit and
# feature list) and prints the binary's path.
ab_build() {
  local bench=$1 c=$2 f=${3:-} d=/tmp/ab-$2 t=/tmp/ab-target-$2${3:+-${3//,/-}}
  [ -d $d ] || git -C "$root" worktree add -q --detach $d $c
  (cd $d && CARGO_TARGET_DIR=$t cargo bench -q -p scalelock --bench $bench \
    ${f:+--features $f} --no-run 2>&1 | tail -1 >&2)
  ls -t $t/release/deps/$bench-* | grep -v '\.d$' | head -1
}
