#!/usr/bin/env bash
# A/B of two commits on the qspinlock bench: builds the bench binary of each
# (a detached worktree in /tmp, its own target dir), runs them alternately
# (ABBA) for PAIRS pairs, and prints per thread count the median of the
# per-pair B/A throughput ratios, each side's ratio to parking_lot and its
# per-thread fairness (min/max ops).
# usage: scripts/ab_qspinlock.sh COMMIT_A COMMIT_B [PAIRS]
# env: THREADS (1,2,16), RUNTIME_MS (400). Needs python3.
set -euo pipefail
source "$(dirname "$0")/ab_common.sh"
run_one() { # SIDE BINARY PAIR
  ROUNDS=1 RUNTIME_MS=${RUNTIME_MS:-400} THREADS=${THREADS:-1,2,16} LOCKS=qspinlock $2 --bench 2>/dev/null \
    | awk -v s=$1 -v r=$3 -F'|' '$3 ~ /qspinlock/ {gsub(/ /,"");print r, s, $2, $4, $5, $6}'
}
ab_pairs qspinlock $out/raw.txt run_one
python3 - $out/raw.txt <<'PY'
import sys, statistics as st, collections
rows=[l.split() for l in open(sys.argv[1])]
d=collections.defaultdict(dict)
for r,s,t,m,x,f in rows: d[(int(r),int(t))][s]=(float(m),float(x),float(f))
ts=sorted({t for _,t in d})
print("| threads | B/A throughput (median) | per-round | A x pl | B x pl | A min/max | B min/max |")
print("| --- | --- | --- | --- | --- | --- | --- |")
for t in ts:
  k=[v for (r,tt),v in sorted(d.items()) if tt==t and 'A' in v and 'B' in v]
  q=[v['B'][0]/v['A'][0] for v in k]
  print(f"| {t} | {st.median(q):.3f} | {' '.join(f'{x:.2f}' for x in q)} | {st.median(v['A'][1] for v in k):.2f} | {st.median(v['B'][1] for v in k):.2f} | {st.median(v['A'][2] for v in k):.2f} | {st.median(v['B'][2] for v in k):.2f} |")
PY
