#!/usr/bin/env bash
# The nightly gate on one GPU (issues 26 and 36):  bash tests/gpu/nightly_aa.sh OUT_DIR [N] [aa]
# With ci/nightly.sh's settings (RUN_ARGS=--quick):
#   night0 starts the window; aa1..aaN change nothing (A=A), the quick set (SUITES=elementwise,gemm,launch,copy);
# and then, with the nightly's own suites (SUITES=elementwise,gemm unless SCENARIO_SUITES says otherwise):
#   slow1..slow3 force elementwise's Triton kernels to one warp per program (a real slowdown: WORSE every night,
#     each naming slow1 as the first);
#   restored runs at the normal speed again (recovered: nothing WORSE);
#   shared runs beside a second process doing bf16 matmuls in a loop (the run names it; compare blames nothing);
#   after is a normal night (the shared night is no part of its window);
#   slow4 is the slowdown again (WORSE since slow4), which `gpubench accept` then accepts, and slow5 is one more
#     slow night (the accepted level: nothing WORSE).
# A third argument "aa" runs the A=A nights only; UNTIL=restored ends the series after the restored night. Prints
# each night's exit code, seconds and counts, and the rows that are not SAME or BETTER; OUT_DIR gets nights.txt,
# each night's verdicts and summary, and the run directories (tables, run.json and what compare recorded).
# ci/nightly.sh's variables pass through; CLUSTER names the nights' cluster (default h100).
# Resumable across device calls (each has a time limit): NIGHTS_STATE=DIR keeps the nights' results there and
# skips the nights it already holds; NIGHTS_DEADLINE_S=S starts no night after S seconds; OUT_DIR/state.tgz
# then holds DIR, to unpack and carry into the next call.
set -u -o pipefail
out=${1:?OUT_DIR}; n=${2:-10}; only=${3:-}
root=$PWD
work=${NIGHTS_STATE:-$(mktemp -d)}
deadline=${NIGHTS_DEADLINE_S:-0}
res="$work/results"
mkdir -p "$out" "$work"
export SUITES=elementwise,gemm,launch,copy
scenario=SUITES=${SCENARIO_SUITES:-elementwise,gemm}

night() {  # LABEL [VAR=VALUE...]: one ci/nightly.sh night in its own directory; returns 1 past the deadline
  local label=$1 start=$SECONDS rc=0
  shift
  [[ -f "$work/$label/done" ]] && return 0
  if [[ "$deadline" -gt 0 && $SECONDS -ge "$deadline" ]]; then
    echo "$label: not started (past NIGHTS_DEADLINE_S=$deadline); resume with NIGHTS_STATE"
    return 1
  fi
  rm -rf "$work/$label"; mkdir -p "$work/$label"
  (cd "$work/$label" && env "$@" bash "$root/ci/nightly.sh" "${CLUSTER:-h100}" "$res" > stdout.txt 2>&1) || rc=$?
  local head=""
  [[ -f "$work/$label/compare-summary.md" ]] && head=$(head -n 1 "$work/$label/compare-summary.md")
  echo "$label rc=$rc $((SECONDS - start))s $(grep -o 'ran .* in [0-9]* s' "$work/$label/stdout.txt" | head -n 1) ${head#'### '}"
  python3 - "$work/$label/compare.json" <<'EOF' 2>/dev/null
import json, sys
doc = json.load(open(sys.argv[1]))
print("   " + (doc.get("window") or "no window"))
for line in doc.get("contention") or []:
    print("   " + line)
for r in doc.get("regressions") or []:
    print(f"   regression: since {r['since']} ({r['nights']} nights, {r['figures']} figures); last good "
          f"{r['last_good']}; differs: {'; '.join(r['differences']) or 'nothing recorded'}")
for r in doc["rows"]:
    v = r["verdict"] if r["status"] == "compared" else r["status"]
    if v not in ("SAME", "BETTER"):
        ch = f"{100 * r['change']:+.1f}%" if r["change"] is not None else ""
        print(f"   {v} {r['suite']} {r['case']} {r['metric']} {ch} {(r['note'] or '')[:160]}")
EOF
  touch "$work/$label/done"
}

hog() {  # a second process on the GPU: bf16 matmuls in a loop for at most 300 s
  python3 -c "
import torch, time
a = torch.randn(8192, 8192, device='cuda', dtype=torch.bfloat16); b = torch.randn_like(a)
end = time.time() + 300
while time.time() < end:
    for _ in range(20): a @ b
    torch.cuda.synchronize()
" >/dev/null 2>&1 & echo $!
}

{
  night night0 || exit 0
  for i in $(seq "$n"); do night "aa$i" || exit 0; done
  [[ "$only" == aa ]] && exit 0
  for i in 1 2 3; do night "slow$i" "$scenario" RUN_ARGS="--quick --triton-warps 1" || exit 0; done
  night restored "$scenario" || exit 0
  [[ "${UNTIL:-}" == restored ]] && exit 0
  if [[ ! -f "$work/shared/done" ]]; then
    pid=$(hog); sleep 8
    night shared "$scenario"; kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null
  fi
  night after "$scenario" || exit 0
  night slow4 "$scenario" RUN_ARGS="--quick --triton-warps 1" || exit 0
  if [[ ! -f "$work/accept.done" ]]; then
    gpubench accept "$res/h100" --reason "one warp per Triton program (a test of the gate)" && touch "$work/accept.done"
  fi
  night slow5 "$scenario" RUN_ARGS="--quick --triton-warps 1" || exit 0
} | tee -a "$work/nights.txt"
cp "$work/nights.txt" "$out/nights.txt"

(cd "$res" && find . \( -name '*.parquet' -o -name '*.json' \) | tar czf "$out/runs.tgz" -T -)
(cd "$work" && find . -maxdepth 2 \( -name compare.json -o -name compare-summary.md -o -name stdout.txt \) \
  | tar czf "$out/nights.tgz" -T -)
[[ -n "${NIGHTS_STATE:-}" ]] && tar czf "$out/state.tgz" -C "$work" .
