#!/usr/bin/env bash
# Issue 8's GPU acceptance on one GPU (docs/measurements.md):  bash tests/gpu/run_aa.sh OUT_DIR CLUSTER [N]
# N (default 10) runs each of `elementwise --quick` and `gemm --quick`, then elementwise with its Triton
# kernels forced to one warp per program (--triton-warps 1, slower); compares every pair with aa_pairs.py.
set -u -o pipefail
out=${1:?OUT_DIR}; cluster=${2:?CLUSTER}; n=${3:-10}
mkdir -p "$out"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
python3 -m pip install -q --no-deps --no-build-isolation . 2>&1 | grep -v -i warning
t0=$EPOCHREALTIME
wall() { local s=$EPOCHREALTIME; "$@" >>"$out/aa.log" 2>&1; local rc=$?; echo "$(awk "BEGIN{printf \"%.1f\", $EPOCHREALTIME - $s}") s rc=$rc"; }
for i in $(seq "$n"); do
  echo "run $i: elementwise --quick $(wall gpubench run --suite elementwise --quick --out "$out/a/ew" --cluster "$cluster"), gemm --quick $(wall gpubench run --suite gemm --quick --out "$out/a/gemm" --cluster "$cluster")"
done
for i in 1 2; do
  gpubench run --suite elementwise --quick --triton-warps 1 --out "$out/slow" --cluster "$cluster" >>"$out/aa.log" 2>&1 || echo "slow run $i rc=$?"
done
echo "runs: $(awk "BEGIN{printf \"%.0f\", $EPOCHREALTIME - $t0}") s"
python3 tests/gpu/aa_pairs.py "$out/a/ew" elementwise $(ls -d "$out"/slow/"$cluster"/*/) | tee "$out/aa-elementwise.txt" | grep -v "^slow" ; grep "^slow" "$out/aa-elementwise.txt" | head -4
python3 tests/gpu/aa_pairs.py "$out/a/gemm" gemm | tee "$out/aa-gemm.txt"
