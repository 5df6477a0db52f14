#!/usr/bin/env bash
# gpubench check's acceptance on the lent GPU(s) (docs/check.md, docs/measurements.md):
#   bash tests/gpu/run_check.sh OUT LABEL [PART...]
# PARTS: cal      3 checks with no envelope (--expect none), then gpubench expect over them: OUT/expect-LABEL.toml
#        idle     the check against that envelope (or ENVELOPE=<file>) on the idle GPU(s), wall time measured
#        cotenant the same while another process runs bf16 matmuls (tests/gpu/cotenant.py matmul)
#        hog      the same while another process holds half the SMs with a spinning kernel (cotenant.py hog)
# The co-tenant runs on GPU ${COTENANT_GPU:-0} (on several GPUs, one GPU's figures then stand out from its peers').
# Default: cal idle cotenant hog. Each check's output is in OUT/<part>.log, its JSON (check.json) in its run directory;
# OUT/wall.txt has part, wall seconds and exit code; the run directories are under OUT/runs.
set -u -o pipefail
out=${1:?OUT}; label=${2:?LABEL}; shift 2
here=$(cd "$(dirname "$0")" && pwd)
source "$here/setup.sh"
backend=${BACKEND:-cuda}
mkdir -p "$out"
python3 -c 'import pynvml; print("nvidia-ml-py", pynvml.__version__ if hasattr(pynvml, "__version__") else "present")' \
  || echo "no pynvml here: every health fact will be SKIP"
parts=("$@"); [ ${#parts[@]} -gt 0 ] || parts=(cal idle cotenant hog)
envelope=${ENVELOPE:-$out/expect-$label.toml}

check() {  # check NAME [ARGS...]: one timed gpubench check
  local name=$1; shift
  local start; start=$(date +%s.%N)
  COLUMNS=160 python3 -m gpubench check --backend "$backend" --out "$out/runs" "$@" > "$out/$name.log" 2>&1
  local rc=$?
  echo "$name $(python3 -c "print(f'{$(date +%s.%N) - $start:.1f}')") rc=$rc" | tee -a "$out/wall.txt"
  grep -a -m1 '^node ' "$out/$name.log" || tail -3 "$out/$name.log"
}

with_load() {  # with_load MODE NAME: a check while tests/gpu/cotenant.py MODE runs
  local mode=$1 name=$2
  CUDA_VISIBLE_DEVICES=${COTENANT_GPU:-0} python3 "$here/cotenant.py" "$mode" 600 > "$out/$name-cotenant.txt" 2>&1 &
  local pid=$!
  sleep 8  # its CUDA context and first kernels are up before the check starts
  echo "cotenant $mode pid $pid" | tee -a "$out/wall.txt"
  check "$name" --cluster "$label-$mode" --expect "$envelope"
  kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null
}

for part in "${parts[@]}"; do
  echo "=== $part ($(date -u +%H:%M:%S))"
  case $part in
    cal)
      for i in 1 2 3; do check "cal-$i" --cluster "$label" --expect none; done
      python3 -m gpubench expect "$out/runs/$label" --out "$envelope" 2>&1 | tee "$out/expect.log" ;;
    idle) check idle --cluster "$label-idle" --expect "$envelope" ;;
    cotenant) with_load matmul cotenant ;;
    hog) with_load hog hog ;;
    *) echo "unknown part $part"; exit 2 ;;
  esac
done
