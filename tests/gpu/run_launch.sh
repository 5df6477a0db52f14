#!/usr/bin/env bash
# The launch suite's GPU acceptance in one command (see docs/measurements.md):
#   bash tests/gpu/run_launch.sh OUT_DIR CLUSTER_LABEL
set -u -o pipefail
out=${1:?OUT_DIR}; cluster=${2:?CLUSTER_LABEL}
mkdir -p "$out"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
python3 -m pip install -q --no-deps --no-build-isolation . 2>&1 | grep -v -i warning
python3 -c 'import torch, triton, cupy; print("torch", torch.__version__, "triton", triton.__version__, "cupy", cupy.__version__)'
start=$EPOCHREALTIME
gpubench run --suite launch --quick --out "$out/quick" --cluster "$cluster" >"$out/quick.log" 2>&1; rc=$?
echo "quick: rc=$rc wall=$(awk "BEGIN{printf \"%.1f\", $EPOCHREALTIME - $start}") s"
start=$EPOCHREALTIME
gpubench run --suite launch --out "$out/runs" --cluster "$cluster" >"$out/full.log" 2>&1; rc=$?
echo "full: rc=$rc wall=$(awk "BEGIN{printf \"%.1f\", $EPOCHREALTIME - $start}") s"
python3 tests/gpu/hand_launch_probe.py --out "$out/hand-launch.json"
run=$(ls -d "$out"/runs/"$cluster"/*/ | tail -1)
python3 tests/gpu/compare_launch.py "$run" "$out/hand-launch.json"; echo "compare: rc=$?"
grep -v '^\[' "$out/full.log" | tail -40
