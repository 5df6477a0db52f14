#!/usr/bin/env bash
# The nightly gate on one GPU (issue 26):  bash tests/gpu/nightly_aa.sh OUT_DIR [N] [aa]
# Night 0 sets the baseline; nights 1..N change nothing (A=A), with ci/nightly.sh's default settings and the
# quick set (SUITES=elementwise,gemm,launch,copy RUN_ARGS=--quick); then one night whose runs force
# elementwise's Triton kernels to one warp per program (a real slowdown: WORSE on those rows only), then one
# night with a second process doing bf16 matmuls in a loop on the same GPU (the run must say it was shared
# and name it). Prints each night's exit code, seconds and counts, and the rows that are not SAME or BETTER;
# OUT_DIR gets nights.txt, the tables (parquet + run.json) and each night's verdicts and summary. A third
# argument "aa" runs the A=A nights only; ci/nightly.sh's variables (BASELINE_WINDOW) pass through.
# Resumable across device calls (each has a time limit): NIGHTS_STATE=DIR keeps the nights' results there and
# skips the nights it already holds; NIGHTS_DEADLINE_S=S starts no night after S seconds; OUT_DIR/state.tgz
# then holds DIR, to unpack and carry into the next call.
set -u -o pipefail
out=${1:?OUT_DIR}; n=${2:-5}; only=${3:-}
root=$PWD
work=${NIGHTS_STATE:-$(mktemp -d)}
deadline=${NIGHTS_DEADLINE_S:-0}
res="$work/results"
mkdir -p "$out" "$work"
export SUITES=elementwise,gemm,launch,copy

night() {  # LABEL [VAR=VALUE...]: one ci/nightly.sh night in its own directory; returns 1 past the deadline
  local label=$1 start=$SECONDS rc=0
  shift
  [[ -f "$work/$label/done" ]] && return 0
  if [[ "$deadline" -gt 0 && $SECONDS -ge "$deadline" ]]; then
    echo "$label: not started (past NIGHTS_DEADLINE_S=$deadline); resume with NIGHTS_STATE"
    return 1
  fi
  rm -rf "$work/$label"; mkdir -p "$work/$label"
  (cd "$work/$label" && env "$@" bash "$root/ci/nightly.sh" h100 "$res" > stdout.txt 2>&1) || rc=$?
  local head=""
  [[ -f "$work/$label/compare-summary.md" ]] && head=$(head -n 1 "$work/$label/compare-summary.md")
  echo "$label rc=$rc $((SECONDS - start))s lines=$(wc -l < "$work/$label/stdout.txt")/$(cat "$work/$label/compare-summary.md" 2>/dev/null | wc -l) ${head#'### '}"
  python3 - "$work/$label/compare.json" <<'EOF' 2>/dev/null
import json, sys
doc = json.load(open(sys.argv[1]))
for r in doc["rows"]:
    v = r["verdict"] if r["status"] == "compared" else r["status"]
    if v not in ("SAME", "BETTER"):
        ch = r["change"]
        print(f"   {v} {r['suite']} {r['case']} {r['metric']} {100 * ch:+.1f}% " if ch is not None else f"   {v} {r['suite']} {r['case']} {r['metric']} ", (r["note"] or "")[:150])
EOF
  touch "$work/$label/done"
}

{
  night night0 || exit 0
  for i in $(seq "$n"); do night "aa$i" || exit 0; done
  [[ "$only" == aa ]] && exit 0
  night slow RUN_ARGS="--quick --triton-warps 1" || exit 0
  [[ -f "$work/shared/done" ]] && exit 0
  python3 -c "
import torch, time
a = torch.randn(8192, 8192, device='cuda', dtype=torch.bfloat16); b = torch.randn_like(a)
end = time.time() + 300
while time.time() < end:
    for _ in range(20): a @ b
    torch.cuda.synchronize()
" & hog=$!
  sleep 8
  night shared
  kill "$hog" 2>/dev/null; wait "$hog" 2>/dev/null
} | tee -a "$work/nights.txt"
cp "$work/nights.txt" "$out/nights.txt"

(cd "$res" && find . -name '*.parquet' -o -name run.json | tar czf "$out/tables.tgz" -T -)
(cd "$work" && find . -maxdepth 2 \( -name compare.json -o -name compare-summary.md -o -name stdout.txt \) | tar czf "$out/nights.tgz" -T -)
[[ -n "${NIGHTS_STATE:-}" ]] && tar czf "$out/state.tgz" -C "$work" .
