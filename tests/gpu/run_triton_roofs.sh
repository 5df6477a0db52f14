#!/usr/bin/env bash
# Issue 29's acceptance on one GPU:  bash tests/gpu/run_triton_roofs.sh OUT_DIR [CLUSTER]
# 1. autotune-kernels: torch and the persistent-TMA GEMM's launch shapes, bf16 and fp8 at 4096³ and 8192³;
#    its winners exported (gpubench export --format triton-configs) to OUT_DIR/triton_configs.json.
# 2. gemm (layout NT, torch vs triton) at 4096³ and 8192³, bf16 and fp8, with the Triton GEMM reading that export
#    (GPUBENCH_TRITON_CONFIGS); 3. elementwise, every op in fp32 and bf16 at 256 MiB, torch vs triton.
# Each run's parquet and run.json are copied flat to OUT_DIR/<step>/ (the export beside autotune's); the Triton/torch
# ratios, with the engine's host issue time per GEMM call (host_us), to OUT_DIR/ratios.txt; the runs' log stays in /tmp.
set -u -o pipefail
out=${1:?OUT_DIR}; cluster=${2:-roofs}
source "$(dirname "$0")/setup.sh"
runs=$(mktemp -d); log=$runs/steps.log
last() { ls -d "$runs"/"$cluster"/*/ | tail -1; }
keep() { mkdir -p "$out/$1"; cp "$(last)"/*.parquet "$(last)"/run.json "$out/$1/"; }
t() { local s=$EPOCHREALTIME; "$@"; echo "rc=$? wall=$(awk "BEGIN{printf \"%.1f\", $EPOCHREALTIME - $s}") s: $*"; }
t gpubench run --suite autotune-kernels --out "$runs" --cluster "$cluster" \
  --filter '^kernel=gemm,dtype=(bf16|fp8),shape=(4096x4096x4096|8192x8192x8192),config=(torch|ptma_.*)$' \
  > "$log" 2>&1
keep autotune
t gpubench export "$(last)" --format triton-configs --out "$out/autotune/triton_configs.json" >> "$log" 2>&1
export GPUBENCH_TRITON_CONFIGS="$out/autotune/triton_configs.json"
t gpubench run --suite gemm --sizes 4096,8192 --dtype bf16,fp8 --filter 'layout=NT,.*impl=(torch|triton)$' \
  --out "$runs" --cluster "$cluster" >> "$log" 2>&1
keep gemm
t gpubench run --suite elementwise --sizes 256M --dtype fp32,bf16 --filter '^op=(copy|mul|add|triad|dot|fill),' \
  --out "$runs" --cluster "$cluster" >> "$log" 2>&1
keep elementwise
python3 "$(dirname "$0")/triton_roofs_ratios.py" "$out/gemm" "$out/elementwise" | tee "$out/ratios.txt"
grep -v '^\[' "$log" | tail -60
