#!/usr/bin/env bash
# What statistics cost switched on, at two commits: builds the
# stats_overhead bench of commits A and B with `stats`, runs the two
# binaries alternately (ABBA) for PAIRS pairs, and prints per lock path the
# median over pairs of B's ns/op over A's for the switched-on contender
# (`-stats`) and for the switched-off one (`-off`), with each side's median.
# Two processes per pair: read the median, not a pair.
# usage: scripts/ab_stats_on.sh COMMIT_A COMMIT_B [PAIRS]
# env: ROUNDS (3), RUNTIME_MS (100). Needs python3.
set -euo pipefail
source "$(dirname "$0")/ab_common.sh"
ba=$(ab_build stats_overhead $A stats); bb=$(ab_build stats_overhead $B stats)
run() { # SIDE BINARY PAIR
  ROUNDS=${ROUNDS:-3} RUNTIME_MS=${RUNTIME_MS:-100} $2 --bench 2>/dev/null \
    | awk -v s=$1 -v r=$3 '$1 ~ /-(stats|off)$/ { print r, s, $1, $2 }'
}
ab_alternate $out/rawstatson.txt run $ba $bb
python3 - $out/rawstatson.txt $A $B <<'PY'
import sys, statistics as st, collections
d=collections.defaultdict(dict)
for l in open(sys.argv[1]):
  r,s,name,ns=l.split(); d[(name,int(r))][s]=float(ns)
names=list(dict.fromkeys(n for n,_ in d))
a,b=sys.argv[2],sys.argv[3]
print(f"| contender | {a} ns/op | {b} ns/op | {b} / {a} (median of pairs) | per pair |")
print("| --- | --- | --- | --- | --- |")
for n in names:
  k=[v for (nn,_),v in sorted(d.items()) if nn==n and len(v)==2]
  q=[v['B']/v['A'] for v in k]
  print(f"| {n} | {st.median(v['A'] for v in k):.2f} | {st.median(v['B'] for v in k):.2f} | {st.median(q):.3f} | {' '.join(f'{x:.2f}' for x in q)} |")
PY
