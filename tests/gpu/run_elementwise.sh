#!/usr/bin/env bash
# The elementwise suite's GPU acceptance (docs/measurements.md):
#   bash tests/gpu/run_elementwise.sh OUT_DIR CLUSTER_LABEL
# installs gpubench, runs the test suite, times `--quick` (cold and warm Triton cache), runs the full
# elementwise suite and the hand probe back to back, and compares them.
set -u -o pipefail
out=${1:?OUT_DIR}; cluster=${2:?CLUSTER_LABEL}
mkdir -p "$out"
# NVLink multicast stays off in every process started here (it can take a shared host down).
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,power.limit --format=csv
python3 -m pip install -q --no-deps --no-build-isolation . 2>&1 | grep -v -i warning
python3 -c 'import torch, triton; print("torch", torch.__version__, "triton", triton.__version__)'
python3 -m pytest -q -x tests 2>&1 | tail -5
rm -rf ~/.triton/cache
for pass in cold warm; do
  start=$EPOCHREALTIME
  gpubench run --suite elementwise --quick --out "$out/quick" --cluster "$cluster" >"$out/quick-$pass.log" 2>&1
  rc=$?
  echo "quick ($pass triton cache): rc=$rc wall=$(awk "BEGIN{printf \"%.1f\", $EPOCHREALTIME - $start}") s"
done
start=$EPOCHREALTIME
gpubench run --suite elementwise --out "$out/runs" --cluster "$cluster" >"$out/full.log" 2>&1; rc=$?
echo "full: rc=$rc wall=$(awk "BEGIN{printf \"%.1f\", $EPOCHREALTIME - $start}") s"
python3 tests/gpu/hand_probe.py --sizes 256M,1G --out "$out/hand.json"
run=$(ls -d "$out"/runs/"$cluster"/*/ | tail -1)
python3 tests/gpu/compare_hand.py "$run" "$out/hand.json"; echo "compare: rc=$?"
tail -120 "$out/full.log" | grep -v '^\[' | head -110
