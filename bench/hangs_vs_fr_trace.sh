#!/usr/bin/env bash
# Compare torch's Flight Recorder analyzer with `trainctl diagnose` on real gloo hang dumps.
# Usage: bench/hangs_vs_fr_trace.sh [SCENARIO...]   (from the repo root, after scripts/setup.sh)
set -u
PY=.venv/bin/python
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
for s in "${@:-never_joins wrong_op subgroup_skip}"; do
  for scen in $s; do
    GLOO_SOCKET_IFNAME=lo $PY tests/fixtures/hangs/hang_scenario.py "$scen" "$work/$scen" 2>/dev/null || { echo "$scen: scenario failed"; continue; }
    mkdir -p "$work/flat_$scen"
    for p in "$work/$scen"/fr/*/rank-*.pkl; do b=$(basename "$p" .pkl); cp "$p" "$work/flat_$scen/trace_${b#rank-}"; done
    echo "== $scen: torch fr_trace"
    /usr/bin/time -f "%e s" $PY -m torch.distributed.flight_recorder.fr_trace "$work/flat_$scen" -p trace_ 2>&1 | tail -2
    echo "== $scen: trainctl diagnose"
    /usr/bin/time -f "%e s" .venv/bin/trainctl diagnose "$work/flat_$scen" --json 2>&1 | $PY -c 'import json,sys
t=sys.stdin.read(); i=t.rfind("}"); print(t[i+1:].strip())
for f in json.loads(t[:i+1])["findings"]: print(f["kind"], f["ranks"], f["summary"][:150])'
  done
done
