#!/usr/bin/env bash
# The launch and copy suites' GPU acceptance (docs/measurements.md): each with --quick (timed) and in full,
# each beside its hand-written probe.
#   bash tests/gpu/run_copy_launch.sh OUT_DIR CLUSTER_LABEL
set -u -o pipefail
out=${1:?OUT_DIR}; cluster=${2:?CLUSTER_LABEL}
mkdir -p "$out"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
python3 -m pip install -q --no-deps --no-build-isolation . 2>&1 | grep -v -i warning
nvidia-smi topo -m 2>/dev/null | head -8; lscpu | grep -i numa
timed() {  # timed NAME CMD...: wall time of a command, its rc, its log in $out/NAME.log
  local name=$1; shift; local start=$EPOCHREALTIME
  "$@" >"$out/$name.log" 2>&1; local rc=$?
  echo "$name: rc=$rc wall=$(awk "BEGIN{printf \"%.1f\", $EPOCHREALTIME - $start}") s"
}

for suite in launch copy; do
  echo "== $suite"
  timed "$suite-quick" gpubench run --suite "$suite" --quick --out "$out/$suite-quick" --cluster "$cluster"
  timed "$suite-full" gpubench run --suite "$suite" --out "$out/runs" --cluster "$cluster"
  grep -v '^\[' "$out/$suite-full.log" | tail -80
done
python3 tests/gpu/hand_launch_probe.py --out "$out/hand-launch.json"
python3 tests/gpu/hand_copy_probe.py --out "$out/hand-copy.json"
runs=$(ls -d "$out"/runs/"$cluster"/*/)
launch_run=$(echo "$runs" | head -1); copy_run=$(echo "$runs" | tail -1)
python3 tests/gpu/compare_launch.py "$launch_run" "$out/hand-launch.json"; echo "compare launch: rc=$?"
python3 tests/gpu/compare_copy.py "$copy_run" "$out/hand-copy.json"; echo "compare copy: rc=$?"
