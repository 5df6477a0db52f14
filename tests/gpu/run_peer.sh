#!/usr/bin/env bash
# The copy suite's peer matrix on a machine with ≥2 GPUs, beside the hand probe (see docs/measurements.md):
#   bash tests/gpu/run_peer.sh OUT_DIR CLUSTER_LABEL
set -u -o pipefail
out=${1:?OUT_DIR}; cluster=${2:?CLUSTER_LABEL}
mkdir -p "$out"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
python3 -m pip install -q --no-deps --no-build-isolation . 2>&1 | grep -v -i warning
nvidia-smi topo -m 2>/dev/null | head -6
start=$EPOCHREALTIME
gpubench run --suite copy --filter 'direction=(peer|d2d)' --out "$out/runs" --cluster "$cluster" >"$out/peer.log" 2>&1
echo "peer+d2d run: rc=$? wall=$(awk "BEGIN{printf \"%.1f\", $EPOCHREALTIME - $start}") s"
grep -v '^\[' "$out/peer.log" | tail -40
python3 tests/gpu/hand_copy_probe.py --out "$out/hand-copy.json"
python3 tests/gpu/compare_copy.py "$(ls -d "$out"/runs/"$cluster"/*/ | tail -1)" "$out/hand-copy.json"
