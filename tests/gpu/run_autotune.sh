#!/usr/bin/env bash
# Issue 7's GPU acceptance (not run yet):  bash tests/gpu/run_autotune.sh OUT_DIR CLUSTER [nccl|kernels|both]
# nccl: on a multi-GPU machine, ALGO × PROTO × two channel caps for all_reduce and all_gather at 5 sizes within a
#       10-minute budget, then the comm suite again under best.env (the winner's figure must come back).
# kernels: the Triton launch-shape sweep (bf16 GEMM, triad) and its exports.
set -u -o pipefail
out=${1:?OUT_DIR}; cluster=${2:?CLUSTER}; what=${3:-both}
mkdir -p "$out"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
python3 -m pip install -q --no-deps --no-build-isolation . 2>&1 | grep -v -i warning
last() { ls -d "$out"/runs/"$cluster"/*/ | tail -1; }
t() { local s=$EPOCHREALTIME; "$@"; echo "rc=$? wall=$(awk "BEGIN{printf \"%.1f\", $EPOCHREALTIME - $s}") s: $*"; }
sizes=(--min-bytes 1M --max-bytes 256M --step-factor 4)
if [ "$what" != kernels ]; then
  t gpubench run --suite autotune --knob NCCL_ALGO=Ring,Tree --knob NCCL_PROTO=LL,LL128,Simple \
    --knob NCCL_MAX_NCHANNELS=16,32 --collectives all_reduce,all_gather "${sizes[@]}" --budget "${BUDGET:-10}" \
    --out "$out/runs" --cluster "$cluster" >"$out/autotune.log" 2>&1
  sweep=$(last); grep -v '^\[' "$out/autotune.log" | tail -40
  cat "$sweep/best.env" "$sweep/nccl-tuner.csv"
  (set -a; . "$sweep/best.env"; set +a
   t gpubench run --suite comm --collectives all_reduce,all_gather "${sizes[@]}" --out "$out/runs" \
     --cluster "$cluster" >"$out/rerun.log" 2>&1)
  echo "rerun under best.env: $(last)"
fi
if [ "$what" != nccl ]; then
  # FILTER: a --filter regex for a subset of the sweep; KERNEL_LIMIT: seconds before a SIGINT (what was measured stays)
  t timeout -s INT "${KERNEL_LIMIT:-3600}" gpubench run --suite autotune-kernels ${FILTER:+--filter "$FILTER"} \
    --out "$out/runs" --cluster "$cluster" >"$out/kernels.log" 2>&1
  k=$(last); grep -v '^\[' "$out/kernels.log" | tail -30
  gpubench export "$k" --format tunableop --out "$out/triton_tuned.csv" && cat "$out/triton_tuned.csv"
  gpubench export "$k" --format triton-configs --out "$out/triton_configs.json"
fi
tar czf "$out.tgz" -C "$(dirname "$out")" "$(basename "$out")"
