#!/usr/bin/env bash
# Issue 3's GPU acceptance in one command, plus the launch suite re-run (see docs/measurements.md):
#   bash tests/gpu/run_gemm_roofline.sh OUT_DIR CLUSTER_LABEL
# 1. `--suite elementwise,gemm` in one run directory (copy/triad/fma sweep; square 8192³ GEMMs in every
#    dtype and layout), the roofline's input, beside tests/gpu/hand_gemm_probe.py;
# 2. `--search` bf16 over M, N, K ∈ $SEARCH_SIZES (default 2K,4K,8K,16K), fp8 (both accumulation modes) over
#    $SEARCH_SIZES_FP8 (default the same; 1K,2K,4K,8K,16K took over 240 s on H100, 2026-11-23); 3. gemm and elementwise
#    --quick, timed;
# 4. launch + its probe (first, on a cool GPU). tests/gpu/compare_gemm.py reads the acceptance off the runs.
set -u -o pipefail
out=${1:?OUT_DIR}; cluster=${2:?CLUSTER_LABEL}
mkdir -p "$out"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
python3 -m pip install -q --no-deps --no-build-isolation . 2>&1 | grep -v -i warning
timed() {  # timed NAME LIMIT_S CMD...: wall time and rc of a command (SIGINT at LIMIT_S: gpubench keeps what it measured)
  local name=$1 limit=$2; shift 2; local start=$EPOCHREALTIME
  timeout -s INT "$limit" "$@" >"$out/$name.log" 2>&1; local rc=$?
  echo "$name: rc=$rc wall=$(awk "BEGIN{printf \"%.1f\", $EPOCHREALTIME - $start}") s"
  grep -v '^\[' "$out/$name.log" | grep -v '^$' | tail -${TAIL:-0}
}
[ -n "${SKIP_LAUNCH:-}" ] || {
TAIL=30 timed launch 90 gpubench run --suite launch --out "$out/runs" --cluster "$cluster"
python3 tests/gpu/hand_launch_probe.py --out "$out/hand-launch.json"
python3 tests/gpu/compare_launch.py "$(ls -d "$out"/runs/"$cluster"/*/ | tail -1)" "$out/hand-launch.json"; echo "compare launch: rc=$?"
}
square='^shape=square,dtype=[a-z0-9]+,layout=N[NT],M=8192,N=8192,K=8192,impl=(torch|torch_fast_accum|cupy)$'
triton='^shape=square,dtype=(bf16|fp8),layout=NT,M=8192,N=8192,K=8192,impl=triton$'
TAIL=40 timed roof 240 gpubench run --suite elementwise,gemm --filter "^op=(copy|triad|fma)|$square|$triton" --out "$out/runs" --cluster "$cluster"
python3 tests/gpu/hand_gemm_probe.py --out "$out/hand-gemm.json"
sizes=${SEARCH_SIZES:-2K,4K,8K,16K}
TAIL=8 timed search-bf16 120 gpubench run --suite gemm --search --dtype bf16 --sizes "$sizes" --out "$out/runs" --cluster "$cluster"
TAIL=16 timed search-fp8 240 gpubench run --suite gemm --search --dtype fp8 --sizes "${SEARCH_SIZES_FP8:-$sizes}" --out "$out/runs" --cluster "$cluster"
grid_run=$(grep -h '^run directory:' "$out/roof.log" | tail -1 | cut -d' ' -f3)
search_runs=$(grep -h '^run directory:' "$out/search-bf16.log" "$out/search-fp8.log" | cut -d' ' -f3)
python3 tests/gpu/compare_gemm.py "$grid_run" "$out/hand-gemm.json" $search_runs; echo "compare gemm: rc=$?"
timed gemm-quick 60 gpubench run --suite gemm --quick --out "$out/quick" --cluster "$cluster"
timed elementwise-quick 60 gpubench run --suite elementwise --quick --out "$out/quick" --cluster "$cluster"
