#!/usr/bin/env bash
# The fleet view on one multi-GPU machine (docs/measurements.md, issue 8):
#   bash tests/gpu/run_fleet.sh OUT_DIR CLUSTER_LABEL
# runs elementwise and gemm --quick on every GPU at once (--devices all), then `gpubench compare --fleet`.
set -u -o pipefail
out=${1:?OUT_DIR}; cluster=${2:?CLUSTER_LABEL}
mkdir -p "$out"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
python3 -m pip install -q --no-deps --no-build-isolation . 2>&1 | grep -v -i warning
s=$EPOCHREALTIME
gpubench run --suite elementwise,gemm --quick --devices all --out "$out/runs" --cluster "$cluster" >"$out/fleet-run.log" 2>&1
echo "run rc=$? wall=$(awk "BEGIN{printf \"%.1f\", $EPOCHREALTIME - $s}") s"
run=$(ls -d "$out"/runs/"$cluster"/*/ | tail -1)
gpubench compare --fleet "$run" >"$out/fleet.txt" 2>&1; echo "compare --fleet rc=$?"
gpubench compare --fleet "$run" --format json --out "$out/fleet.json" >/dev/null 2>&1
cat "$out/fleet.txt"
grep -v '^\[' "$out/fleet-run.log" | tail -30
