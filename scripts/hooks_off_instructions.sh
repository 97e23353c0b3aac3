#!/usr/bin/env bash
# Instructions per lock/unlock of each path of the stats_overhead bench,
# without the hook features, with them compiled in but switched off
# (`stats,lockdep`, run-time switch off), and with statistics alone
# switched on (a `stats` build, `COUNT_MODE=stats`, holds sampled at the
# default rate): valgrind (callgrind) counts the instructions inside each
# path's loop function only, so the figure is exact and no code layout or
# noisy neighbour moves it, unlike a time.
# usage: scripts/hooks_off_instructions.sh [COMMIT]
# env: COUNT_OPS (204800, a multiple of the bench's batch of 4096). Needs
# valgrind.
set -euo pipefail
source "$(dirname "$0")/ab_build.sh"
C=$(git rev-parse --short "${1:-HEAD}^{commit}")
ops=${COUNT_OPS:-204800}
off=$(ab_build stats_overhead $C); hooks=$(ab_build stats_overhead $C stats,lockdep)
stats=$(ab_build stats_overhead $C stats)
# count BINARY PATH LOOP_FUNCTION [MODE]: instructions per operation
count() {
  COUNT_MODE=${4:-off} COUNT_PATH=$2 COUNT_OPS=$ops callgrind_per_op $ops "stats_overhead::$3" $1 --bench
}
echo "| path | instructions/op, features off | compiled in, switched off | difference | statistics switched on |"
echo "| --- | --- | --- | --- | --- |"
for p in hooked:loop_hooked seqlock-write:loop_seq_write seqlock-read:loop_seq_read \
         qspinlock:loop_qspin qrwlock-read:loop_qrw_read qrwlock-write:loop_qrw_write \
         percpu-read:loop_percpu_read percpu-write:loop_percpu_write; do
  a=$(count $off ${p%%:*} ${p#*:}); b=$(count $hooks ${p%%:*} ${p#*:})
  c=$(count $stats ${p%%:*} ${p#*:} stats)
  echo "| ${p%%:*} | $a | $b | $(python3 -c "print(f'{$b - $a:+.1f}')") | $c |"
done
