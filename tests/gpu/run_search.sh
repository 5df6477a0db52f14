#!/usr/bin/env bash
# gemm --search (mamf-finder's method: one product per sample behind a cache flush) beside mamf-finder itself
# on the same GPU, and the launch acceptance with the hand probe's two batch lengths (see docs/measurements.md):
#   MAMF=<path to mamf-finder.py> bash tests/gpu/run_search.sh OUT_DIR CLUSTER_LABEL
# mamf-finder (stas00/ml-engineering) is fetched beside the repository, never part of it.
set -u -o pipefail
out=${1:?OUT_DIR}; cluster=${2:?CLUSTER_LABEL}
mkdir -p "$out"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
python3 -m pip install -q --no-deps --no-build-isolation . 2>&1 | grep -v -i warning
timed() {  # timed NAME LIMIT_S CMD...
  local name=$1 limit=$2; shift 2; local start=$EPOCHREALTIME
  timeout -s INT "$limit" "$@" >"$out/$name.log" 2>&1; local rc=$?
  echo "$name: rc=$rc wall=$(awk "BEGIN{printf \"%.1f\", $EPOCHREALTIME - $start}") s"
}
last() { ls -d "$out"/runs/"$cluster"/*/ | tail -1; }
timed launch 90 gpubench run --suite launch --out "$out/runs" --cluster "$cluster"
python3 tests/gpu/hand_launch_probe.py --out "$out/hand-launch.json"
python3 tests/gpu/compare_launch.py "$(last)" "$out/hand-launch.json"; echo "compare launch: rc=$?"
shapes=(4096 8192)
summary() {  # the search's derived rows and its clocks
  python3 -c "import sys, gpubench.results as r; d = r.load(sys.argv[1]); s = d[d.stop == 'derived']
print(s[['dtype', 'metric', 'value', 'message']].to_string(index=False))
t = d[(d.shape == 'search') & (d.metric == 'throughput')]
print(t[['M', 'N', 'K', 'value', 'cv', 'sm_clock_mhz', 'power_w', 'method']].to_string(index=False))" "$1"
}
[ -n "${MAMF:-}" ] && timed mamf-bf16 120 python3 "$MAMF" --m "${shapes[@]}" --n "${shapes[@]}" --k "${shapes[@]}" --dtype bfloat16 --output_file "$out/mamf-bf16.out"
timed search-bf16 150 gpubench run --suite gemm --search --dtype bf16 --sizes 4K,8K --out "$out/runs" --cluster "$cluster"
summary "$(last)"
timed search-fp8 150 gpubench run --suite gemm --search --dtype fp8 --sizes 4K,8K --out "$out/runs" --cluster "$cluster"
summary "$(last)"
[ -n "${MAMF:-}" ] && timed mamf-fp8 120 python3 "$MAMF" --m "${shapes[@]}" --n "${shapes[@]}" --k "${shapes[@]}" --dtype float8_e4m3fn --output_file "$out/mamf-fp8.out"
for f in "$out"/mamf-*.out; do echo "== $f"; grep -i -A6 "best\|Tflops" "$f" | tail -12; done
