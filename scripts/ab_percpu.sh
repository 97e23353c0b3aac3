#!/usr/bin/env bash
# A/B of two commits on the percpu_rwlock bench: each pair runs both
# commits' bench binaries one after the other for each cell, in
# alternating order (ABBA...), with every contender in the same process.
# Per thread count and read share it prints the median over pairs of
# PerCpuRwLock's ratio to the better of QRwLock and ShardedLock (taken
# within each run, so machine drift between runs cancels) for A and B,
# their per-pair quotient B/A, each side's ratio to parking_lot, and the
# per-pair quotient of PerCpuRwLock's own throughput.
# usage: scripts/ab_percpu.sh COMMIT_A COMMIT_B [PAIRS]
# env: THREADS (1,2,16), READS (50,90,99,100), RUNTIME_MS (150), ORDER
# (staggered; random: the bench draws each op, as locktest does; both
# commits need the bench's ORDER). Needs python3.
set -euo pipefail
source "$(dirname "$0")/ab_common.sh"
# One process per cell (thread count, read share) and side, A and B of a
# cell back to back (ABBA over pairs): this VM has slow spells lasting
# seconds in which every lock runs up to 2x slower, and a pair that spans
# one compares two machines.
run_cell() { # SIDE BINARY PAIR THREADS READS
  ROUNDS=1 RUNTIME_MS=${RUNTIME_MS:-150} THREADS=$4 READS=$5 \
    LOCKS=percpu,qrwlock,sharded SECTIONS=throughput $2 --bench 2>/dev/null \
    | awk -v s=$1 -v r=$3 -F'|' '$4 ~ /percpu/ {gsub(/ /,"");print r, s, $2, $3, $6, $7, $5}'
}
ba=$(ab_build percpu_rwlock $A); bb=$(ab_build percpu_rwlock $B)
: > $out/rawpc.txt
for i in $(seq 1 $R); do
  if (( i % 2 )); then order="A B"; else order="B A"; fi
  for t in $(echo ${THREADS:-1,2,16} | tr , ' '); do
    for rd in $(echo ${READS:-50,90,99,100} | tr , ' '); do
      for s in $order; do
        if [ $s = A ]; then run_cell A $ba $i $t $rd; else run_cell B $bb $i $t $rd; fi >> $out/rawpc.txt
      done
    done
  done
done
python3 - $out/rawpc.txt <<'PY'
import sys, statistics as st, collections
d=collections.defaultdict(dict)
for l in open(sys.argv[1]):
  r,s,t,rd,xpl,xbest,mops=l.split(); d[(int(t),rd,int(r))][s]=(float(xpl),float(xbest),float(mops))
keys=sorted({(t,rd) for t,rd,_ in d}, key=lambda k:(k[0], float(k[1].rstrip('%'))))
print("| threads | read % | A x best | B x best | B/A (median of pairs) | A x pl | B x pl | B/A Mops/s |")
print("| --- | --- | --- | --- | --- | --- | --- | --- |")
for t,rd in keys:
  k=[v for (tt,rr,_),v in sorted(d.items()) if (tt,rr)==(t,rd) and len(v)==2]
  m=lambda s,i: st.median(v[s][i] for v in k)
  q=st.median(v['B'][1]/v['A'][1] for v in k)
  qm=st.median(v['B'][2]/v['A'][2] for v in k)
  print(f"| {t} | {rd} | {m('A',1):.2f} | {m('B',1):.2f} | {q:.2f} | {m('A',0):.2f} | {m('B',0):.2f} | {qm:.2f} |")
PY
