# Shared by scripts/ab_*.sh, hooks_off_instructions.sh and mix_instructions.sh
# run): the repository root, building one commit's bench binary, and
# running two binaries alternately.
root=$(git rev-parse --show-toplevel)

# ab_worktree COMMIT: makes /tmp/ab-COMMIT a detached worktree of COMMIT
# (once).
ab_worktree() {
  [ -d /tmp/ab-$1 ] || git -C "$root" worktree add -q --detach /tmp/ab-$1 $1
}

# ab_build BENCH COMMIT [FEATURES]: builds bench BENCH of scalelock at
# COMMIT (a detached worktree in /tmp, its own target dir per commit and
# feature list) and prints the binary's path.
# With ALIGN=1 in the environment both sides are built with every function
# and every branch target aligned (64 and 32 bytes): a change to one
# function moves the code after it, and on some CPUs that alone moved
# whole regimes by 20% (8-16 threads, 200 ns inside and 500 ns outside the
# critical sections, on the 2-vCPU Intel VM); aligned, a build measures
# what the change does, not where its code landed.
ab_align_flags=${ALIGN:+-C llvm-args=-align-all-functions=6 -C llvm-args=-align-all-nofallthru-blocks=5}
ab_build() {
  local bench=$1 c=$2 f=${3:-} d=/tmp/ab-$2 t=/tmp/ab-target-$2${3:+-${3//,/-}}${ALIGN:+-aligned}
  ab_worktree $c
  (cd $d && RUSTFLAGS="$ab_align_flags" CARGO_TARGET_DIR=$t cargo bench -q -p scalelock --bench $bench \
    ${f:+--features $f} --no-run 2>&1 | tail -1 >&2)
  ls -t $t/release/deps/$bench-* | grep -v '\.d$' | head -1
}

# ab_alternate RAW RUN BIN_A BIN_B: empties RAW and runs the two binaries
# alternately (ABBA...) for R pairs (R set by the caller): `RUN SIDE BINARY
# PAIR` (SIDE is A or B) prints its result lines, which go to RAW.
ab_alternate() {
  local raw=$1 run=$2 ba=$3 bb=$4 i s order
  : > $raw
  for i in $(seq 1 $R); do
    if (( i % 2 )); then order="A B"; else order="B A"; fi
    for s in $order; do
      if [ $s = A ]; then $run $s $ba $i; else $run $s $bb $i; fi >> $raw
    done
  done
}

# callgrind_per_op OPS FUNCTION COMMAND...: runs COMMAND under callgrind,
# counting only inside FUNCTION (a symbol pattern, e.g. `crate::loop_fn`),
# and prints the instructions counted over OPS. Environment the program
# reads goes before the call (`VAR=x callgrind_per_op ...`). Needs valgrind.
callgrind_per_op() {
  local n=$1 fn=$2 f; shift 2
  f=$(mktemp)
  valgrind --tool=callgrind --smc-check=all --callgrind-out-file=$f \
    --collect-atstart=no --toggle-collect="$fn" "$@" >/dev/null 2>&1
  callgrind_annotate $f 2>/dev/null | awk -v n=$n '/PROGRAM TOTALS/ {gsub(/,/,"",$1); printf "%.1f", $1 / n}'
  rm -f $f
}
