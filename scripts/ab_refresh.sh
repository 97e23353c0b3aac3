#!/usr/bin/env bash
# A/B of two commits on the refresh bench (`lock+recompute (qspinlock)`
# against `lock+recompute (pl-mutex)`, with and without work between
# calls): builds the bench binary of each (a detached worktree in /tmp, its
# own target dir), runs them alternately (ABBA) for PAIRS pairs, and prints
# per configuration the median of each side's qspinlock / parking_lot ratio
# (measured within one run) and of the per-pair B/A ratio of those ratios.
# usage: scripts/ab_refresh.sh COMMIT_A COMMIT_B [PAIRS]
# env: THREADS (2,16), WORK_NS (100,1000), THINK_NS (0,2000),
# RUNTIME_MS (200). Needs python3.
set -euo pipefail
source "$(dirname "$0")/ab_common.sh"
run_one() { # SIDE BINARY PAIR
  ROUNDS=1 RUNTIME_MS=${RUNTIME_MS:-200} THREADS=${THREADS:-2,16} WORK_NS=${WORK_NS:-100,1000} \
    THINK_NS=${THINK_NS:-0,2000} $2 --bench 2>/dev/null \
    | awk -v s=$1 -v r=$3 -F'|' '$5 ~ /lock\+recompute \((qspinlock|pl-mutex)\)/ {
        v=$5; gsub(/ /,"",v); gsub(/ /,"",$2); gsub(/ /,"",$3); gsub(/ /,"",$4); gsub(/ /,"",$6);
        print r, s, $2 "/" $3 "/" $4, v, $6}'
}
ab_pairs refresh $out/rawrf.txt run_one
python3 - $out/rawrf.txt <<'PY'
import sys, statistics as st, collections
d=collections.defaultdict(dict)
for l in open(sys.argv[1]):
    r,s,cfg,v,x=l.split()
    d[(int(r),cfg,s)][v]=float(x)
cfgs=sorted({c for _,c,_ in d}, key=lambda c: [int(x) for x in c.split('/')])
print("| threads/work ns/think ns | A qspinlock x pl | B qspinlock x pl | B/A (median of pairs) |")
print("| --- | --- | --- | --- |")
q=lambda e: e['lock+recompute(qspinlock)']/e['lock+recompute(pl-mutex)']
for c in cfgs:
  rs=sorted({r for r,cc,_ in d if cc==c})
  a=[q(d[(r,c,'A')]) for r in rs]; b=[q(d[(r,c,'B')]) for r in rs]
  print(f"| {c} | {st.median(a):.2f} | {st.median(b):.2f} | {st.median(y/x for x,y in zip(a,b)):.2f} |")
PY
