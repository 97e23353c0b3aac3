#!/usr/bin/env bash
# A/B of two commits on the qrwlock bench (as scripts/ab_qspinlock.sh):
# per thread count and read share, the median of the per-pair B/A
# throughput ratios, each side's ratio to parking_lot and its fairness.
# usage: scripts/ab_qrwlock.sh COMMIT_A COMMIT_B [PAIRS]
# env: THREADS (2,16), READS (50,95,100). Needs python3.
set -euo pipefail
source "$(dirname "$0")/ab_common.sh"
run_one() { # SIDE BINARY PAIR
  ROUNDS=1 THREADS=${THREADS:-2,16} READS=${READS:-50,95,100} $2 --bench 2>/dev/null \
    | awk -v s=$1 -v r=$3 -F'|' '$4 ~ /qrwlock/ {gsub(/ /,"");print r, s, $2, $3, $5, $6, $7}'
}
ab_pairs qrwlock $out/rawrw.txt run_one
python3 - $out/rawrw.txt <<'PY'
import sys, statistics as st, collections
d=collections.defaultdict(dict)
for l in open(sys.argv[1]):
  r,s,t,rd,m,x,f=l.split(); d[(int(t),rd,int(r))][s]=(float(m),float(x),float(f))
keys=sorted({(t,rd) for t,rd,_ in d})
print("| threads | read % | B/A throughput (median) | per-round | A x pl | B x pl | A fairness | B fairness |")
print("| --- | --- | --- | --- | --- | --- | --- | --- |")
for t,rd in keys:
  k=[v for (tt,rr,_),v in sorted(d.items()) if (tt,rr)==(t,rd) and len(v)==2]
  q=[v['B'][0]/v['A'][0] for v in k]
  m=lambda s,i: st.median(v[s][i] for v in k)
  print(f"| {t} | {rd} | {st.median(q):.3f} | {' '.join(f'{x:.2f}' for x in q)} | {m('A',1):.2f} | {m('B',1):.2f} | {m('A',2):.2f} | {m('B',2):.2f} |")
PY
