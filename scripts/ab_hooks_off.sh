#!/usr/bin/env bash
# What compiling the hooks in costs while they are switched off: builds the
# stats_overhead bench of one commit twice, without features (A) and with
# `stats,lockdep` (B), runs the two binaries alternately (ABBA) for PAIRS
# pairs, and prints per lock path the median over pairs of B's ns/op over
# A's (the "-off" contender of B against the "(features off)" one of A),
# with each side's median ns/op. Two processes per pair, so a pair that
# spans one of this VM's slow spells is off: read the median, not a pair.
# usage: scripts/ab_hooks_off.sh [COMMIT] [PAIRS]
# env: ROUNDS (3), RUNTIME_MS (100). Needs python3.
set -euo pipefail
source "$(dirname "$0")/ab_build.sh"
C=$(git rev-parse --short "${1:-HEAD}^{commit}"); R=${2:-8}
out=$root/target/ab; mkdir -p "$out"
ba=$(ab_build stats_overhead $C); bb=$(ab_build stats_overhead $C stats,lockdep)
run() { # SIDE BINARY PAIR
  ROUNDS=${ROUNDS:-3} RUNTIME_MS=${RUNTIME_MS:-100} $2 --bench 2>/dev/null \
    | awk -v s=$1 -v r=$3 '
        $2 == "(features" && $3 == "off)" { print r, s, $1, $4 }
        $1 ~ /-off$/ { n = $1; sub(/-off$/, "", n); print r, s, n, $2 }'
}
ab_alternate $out/rawhooks.txt run $ba $bb
python3 - $out/rawhooks.txt <<'PY'
import sys, statistics as st, collections
d=collections.defaultdict(dict)
for l in open(sys.argv[1]):
  r,s,name,ns=l.split(); d[(name,int(r))][s]=float(ns)
names=list(dict.fromkeys(n for n,_ in d))
print("| path | features off, ns/op | compiled in, switched off, ns/op | off-switch / no features (median of pairs) | per pair |")
print("| --- | --- | --- | --- | --- |")
for n in names:
  k=[v for (nn,_),v in sorted(d.items()) if nn==n and len(v)==2]
  q=[v['B']/v['A'] for v in k]
  print(f"| {n} | {st.median(v['A'] for v in k):.2f} | {st.median(v['B'] for v in k):.2f} | {st.median(q):.3f} | {' '.join(f'{x:.2f}' for x in q)} |")
PY
