#!/usr/bin/env bash
# gpubench's GPU acceptance, one entry for every suite (docs/measurements.md lists what each part last read):
#   bash tests/gpu/run_acceptance.sh OUT_DIR CLUSTER_LABEL [PART...]
# PARTS on one GPU (the default when the machine has one):
#   elementwise  the test suite, --quick cold and warm, the full suite beside tests/gpu/hand_probe.py
#   gemm         elementwise+gemm grid, roofline, --search bf16/fp8, --quick, launch (hand_gemm/launch probes)
#   copy-launch  copy and launch, --quick and in full, beside hand_copy_probe.py and hand_launch_probe.py
#   search       gemm --search beside mamf-finder (MAMF=<path to mamf-finder.py>)
#   aa           10 A=A runs of elementwise and gemm --quick plus a forced slowdown, every pair compared
#   kernels      the Triton launch-shape sweep and its exports
#   triton       gpubench's Triton GEMM and elementwise kernels against torch, with the sweep's exported configs
#   nightly      ci/nightly.sh's gate and its memory: 10 A=A nights of the quick set, 3 slowed nights, a restored
#                one, a shared GPU, an accepted slowdown (nightly_aa.sh); replay_nights.sh then replays them
#                through a plain compare (on any machine)
#   quick-wall   the quick set's wall time against another build (OTHER=<its checkout>), twice each
#   smoke-comm   the comm suite's CUDA paths in a world of one (NCCL_TESTS_DIR for its nccl-tests part)
# and on two or more GPUs (the default there):
#   comm         comm beside nccl-tests (NCCL_TESTS_DIR=<built nccl-tests>/build)
#   peer         the copy suite's peer matrix beside the hand probe
#   fleet        elementwise and gemm --quick on every GPU at once, then compare --fleet
#   nccl         the NCCL knob sweep and a rerun under its best.env
# Each part writes under OUT_DIR/PART and prints its acceptance lines; the exit code is the number of parts
# whose script failed. Peer tools (nccl-tests, mamf-finder) are built or fetched beside the repository, never
# part of it.
set -u -o pipefail
out=${1:?OUT_DIR}; cluster=${2:?CLUSTER_LABEL}; shift 2
here=$(cd "$(dirname "$0")" && pwd)
source "$here/setup.sh"
gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)
if [ $# -gt 0 ]; then parts=("$@")
elif [ "${gpus:-0}" -ge 2 ]; then parts=(comm peer fleet nccl)
else parts=(elementwise gemm copy-launch aa kernels triton smoke-comm); fi
failed=0
for part in "${parts[@]}"; do
  dir="$out/$part"; mkdir -p "$dir"
  echo "=== $part ($(date -u +%H:%M:%S))"
  case $part in
    elementwise) bash "$here/run_elementwise.sh" "$dir" "$cluster" ;;
    gemm) bash "$here/run_gemm_roofline.sh" "$dir" "$cluster" ;;
    copy-launch) bash "$here/run_copy_launch.sh" "$dir" "$cluster" ;;
    search) bash "$here/run_search.sh" "$dir" "$cluster" ;;
    aa) bash "$here/run_aa.sh" "$dir" "$cluster" ;;
    kernels) bash "$here/run_autotune.sh" "$dir" "$cluster" kernels ;;
    triton) bash "$here/run_triton_roofs.sh" "$dir" "$cluster" ;;
    nightly) bash "$here/nightly_aa.sh" "$dir" 10 ;;
    quick-wall) bash "$here/quick_wall.sh" "$dir" "${OTHER:?OTHER=<checkout of the build to compare with>}" 2 ;;
    nccl) bash "$here/run_autotune.sh" "$dir" "$cluster" nccl ;;
    smoke-comm) bash "$here/smoke_comm_one_gpu.sh" "$dir" ;;
    comm) bash "$here/run_comm.sh" "$dir" "$cluster" ;;
    peer) bash "$here/run_peer.sh" "$dir" "$cluster" ;;
    fleet) bash "$here/run_fleet.sh" "$dir" "$cluster" ;;
    *) echo "unknown part $part: see the list at the top of $0" >&2; exit 2 ;;
  esac || { echo "$part: failed"; failed=$((failed + 1)); }
done
exit "$failed"
