#!/usr/bin/env bash
# A/B of two commits on the percpu_rwlock bench (as scripts/ab_qrwlock.sh):
# each pair runs both commits' bench binaries one after the other, in
# alternating order (ABBA...), with every contender in the same process.
# Per thread count and read share it prints the median over pairs of
# PerCpuRwLock's ratio to the better of QRwLock and ShardedLock (taken
# within each run, so machine drift between runs cancels) for A and B,
# their per-pair quotient B/A, and each side's ratio to parking_lot.
# usage: scripts/ab_percpu.sh COMMIT_A COMMIT_B [PAIRS]
# env: THREADS (1,2,16), READS (50,90,99,100), RUNTIME_MS (150). Needs python3.
set -euo pipefail
source "$(dirname "$0")/ab_common.sh"
run_one() { # SIDE BINARY PAIR
  ROUNDS=1 RUNTIME_MS=${RUNTIME_MS:-150} THREADS=${THREADS:-1,2,16} READS=${READS:-50,90,99,100} \
    LOCKS=percpu,qrwlock,sharded SECTIONS=throughput $2 --bench 2>/dev/null \
    | awk -v s=$1 -v r=$3 -F'|' '$4 ~ /percpu/ {gsub(/ /,"");print r, s, $2, $3, $6, $7}'
}
ab_pairs percpu_rwlock $out/rawpc.txt run_one
python3 - $out/rawpc.txt <<'PY'
import sys, statistics as st, collections
d=collections.defaultdict(dict)
for l in open(sys.argv[1]):
  r,s,t,rd,xpl,xbest=l.split(); d[(int(t),rd,int(r))][s]=(float(xpl),float(xbest))
keys=sorted({(t,rd) for t,rd,_ in d}, key=lambda k:(k[0], float(k[1].rstrip('%'))))
print("| threads | read % | A x best | B x best | B/A (median of pairs) | A x pl | B x pl |")
print("| --- | --- | --- | --- | --- | --- | --- |")
for t,rd in keys:
  k=[v for (tt,rr,_),v in sorted(d.items()) if (tt,rr)==(t,rd) and len(v)==2]
  m=lambda s,i: st.median(v[s][i] for v in k)
  q=st.median(v['B'][1]/v['A'][1] for v in k)
  print(f"| {t} | {rd} | {m('A',1):.2f} | {m('B',1):.2f} | {q:.2f} | {m('A',0):.2f} | {m('B',0):.2f} |")
PY
