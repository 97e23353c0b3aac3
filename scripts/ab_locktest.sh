#!/usr/bin/env bash
# A/B of two commits through locktest itself: builds locktest at each (a
# detached worktree in /tmp, its own target dir), runs one round of
# `locktest bench` with each alternately (ABBA) for PAIRS pairs, and prints
# per lock and thread count the median over pairs of its throughput over
# the baseline lock's (parking_lot's) within the same run, per side, with
# the median per-thread fairness (min/max ops) and CPU share (the
# process's CPU time over the run's wall time on every core: 0.5 on 2
# cores means one CPU stayed idle).
# usage: scripts/ab_locktest.sh COMMIT_A COMMIT_B [PAIRS]
# env: LOCKS (qspinlock,pl-mutex; the last is the baseline), THREADS
# (8,16), READS (locktest's --read-pct, for rwlocks), WORKLOAD (its
# --workload: lock or kv), RUNTIME (0.3 s), FEATURES_A / FEATURES_B
# (locktest features for that side's build, e.g. FEATURES_B=stats with
# COMMIT_A = COMMIT_B: what compiling lock statistics in, switched off,
# costs).
# Needs python3.
set -euo pipefail
source "$(dirname "$0")/ab_common.sh"
locks=${LOCKS:-qspinlock,pl-mutex}
build() { # COMMIT [FEATURES]: prints the locktest binary's path (ALIGN=1: see ab_build.sh)
  local d=/tmp/ab-$1 f=${2:-} t=/tmp/ab-target-$1-locktest${2:+-${2//,/-}}${ALIGN:+-aligned}
  ab_worktree $1 || return 1
  (cd $d && RUSTFLAGS="$ab_align_flags" CARGO_TARGET_DIR=$t cargo build -q --release -p locktest \
    ${f:+--features $f} 2>&1 | tail -1 >&2) || { echo "locktest at $1 did not build" >&2; return 1; }
  echo $t/release/locktest
}
run() { # SIDE BINARY PAIR
  local j=$out/locktest-$1.json
  $2 bench --lock $locks --threads ${THREADS:-8,16} ${READS:+--read-pct $READS} \
    ${WORKLOAD:+--workload $WORKLOAD} \
    --rounds 1 --runtime ${RUNTIME:-0.3} --json $j >/dev/null 2>&1
  python3 - $j $1 $3 <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
for x in d['runs']:
    print(sys.argv[3], sys.argv[2], x['lock'], x['threads'], x.get('read_pct') or 0,
          x['total_rate'], x['min'] / max(x['max'], 1), x.get('cpu_share') or 0)
PY
}
# Built apart from ab_alternate's arguments, where a failed build's status
# is lost (and the last good build's binary would run).
ba=$(build $A ${FEATURES_A:-}); bb=$(build $B ${FEATURES_B:-})
ab_alternate $out/locktest.txt run $ba $bb
python3 - $out/locktest.txt "$locks" "$A${FEATURES_A:++$FEATURES_A}" "$B${FEATURES_B:++$FEATURES_B}" <<'PY'
import sys, statistics as st, collections
raw, locks, a, b = sys.argv[1], sys.argv[2].split(','), sys.argv[3], sys.argv[4]
base = locks[-1]
d = collections.defaultdict(dict)
for l in open(raw):
    p, s, lock, t, r, rate, fair, cpu = l.split()
    d[(s, int(t), float(r), int(p))][lock] = (float(rate), float(fair), float(cpu))
print(f"| lock | threads | read % | {a} x {base} | {b} x {base} | fairness {a} / {b} | CPU share {a} / {b} | per pair x {base}, {a} / {b} |")
print("| --- | --- | --- | --- | --- | --- | --- | --- |")
keys = sorted({(t, r) for (_, t, r, _) in d})
for lock in locks[:-1]:
    for t, r in keys:
        cols = {}
        for s in 'AB':
            runs = [v for (ss, tt, rr, _), v in sorted(d.items()) if (ss, tt, rr) == (s, t, r)
                    and lock in v and base in v]
            cols[s] = ([v[lock][0] / v[base][0] for v in runs], [v[lock][1] for v in runs],
                       [v[lock][2] for v in runs])
        A, B = cols['A'], cols['B']
        if not A[0] or not B[0]:
            continue
        print(f"| {lock} | {t} | {r:g} | {st.median(A[0]):.2f} | {st.median(B[0]):.2f} | "
              f"{st.median(A[1]):.2f} / {st.median(B[1]):.2f} | {st.median(A[2]):.2f} / {st.median(B[2]):.2f} | "
              f"{' '.join(f'{x:.2f}' for x in A[0])} / {' '.join(f'{x:.2f}' for x in B[0])} |")
PY
