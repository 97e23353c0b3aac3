# Shared by scripts/ab_*.sh, hooks_off_instructions.sh and mix_instructions.sh
# run): the repository root, building one commit's bench binary, and
# running two binaries alternately.
root=$(git rev-parse --show-toplevel)

# ab_worktree COMMIT: makes /tmp/ab-COMMIT a detached worktree of COMMIT
# (once), and refuses one found there that is not a clean checkout of
# COMMIT (a build there would not be COMMIT's; Cargo.lock aside, which
# cargo itself may bring up to date with the commit's manifests).
ab_worktree() {
  local d=/tmp/ab-$1
  [ -d $d ] || git -C "$root" worktree add -q --detach $d $1 || return 1
  if [ "$(git -C $d rev-parse HEAD 2>/dev/null)" != "$(git -C "$root" rev-parse "$1^{commit}")" ] ||
     [ -n "$(git -C $d status --porcelain --untracked-files=no -- . ':!Cargo.lock' 2>/dev/null)" ]; then
    echo "ab_worktree: $d is not a clean checkout of $1" >&2
    return 1
  fi
}

# ab_build BENCH COMMIT [FEATURES]: builds bench BENCH of scalelock at
# COMMIT (a detached worktree in /tmp, its own target dir per commit and
# feature list) and prints the binary's path; fails (status 1, nothing
# printed) if the build fails. Callers must check the status: bash does
# not carry `set -e` into a command substitution, and a failed build used
# to hand over whatever binary an earlier build had left in the target dir.
# The path is the one cargo reports for this build (the newest file in
# deps may be another build's, e.g. another toolchain's).
# With ALIGN=1 in the environment both sides are built with every function
# and every branch target aligned (64 and 32 bytes): a change to one
# function moves the code after it, and on some CPUs that alone moved
# whole regimes by 20% (8-16 threads, 200 ns inside and 500 ns outside the
# critical sections, on the 2-vCPU Intel VM); aligned, a build measures
# what the change does, not where its code landed.
ab_align_flags=${ALIGN:+-C llvm-args=-align-all-functions=6 -C llvm-args=-align-all-nofallthru-blocks=5}
ab_build() {
  local bench=$1 c=$2 f=${3:-} d=/tmp/ab-$2 t=/tmp/ab-target-$2${3:+-${3//,/-}}${ALIGN:+-aligned} log exe
  ab_worktree $c || return 1
  log=$(mktemp)
  exe=$(cd $d && RUSTFLAGS="$ab_align_flags" CARGO_TARGET_DIR=$t cargo bench -q -p scalelock --bench $bench \
    ${f:+--features $f} --no-run --message-format=json-render-diagnostics 2>$log |
    python3 -c '
import json, sys
for line in sys.stdin:
    m = json.loads(line)
    if (m.get("reason") == "compiler-artifact" and m.get("executable")
            and m["target"]["name"] == sys.argv[1] and "bench" in m["target"]["kind"]):
        print(m["executable"])' $bench) || exe=
  if [ -z "$exe" ] || [ ! -x "$exe" ]; then
    tail -20 $log >&2; rm -f $log
    echo "ab_build: bench $bench at $c${f:+ (features $f)} did not build" >&2
    return 1
  fi
  tail -1 $log >&2; rm -f $log
  echo "$exe"
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
