#!/usr/bin/env bash
# A series of one `gpubench run` command on one machine with nothing changed, for how far the gate's figures move
# between runs (issue 47: docs/compare.md, results/reference/h200/nights6-20261201/):
#   bash tests/gpu/run_series.sh OUT CLUSTER [RUN_ARGS...]
# RUN_ARGS default: --suite elementwise,gemm,launch,copy --quick --processes 6 (a quick night of 6 processes).
# Runs `gpubench run RUN_ARGS --cluster CLUSTER` again and again, starting none after DEADLINE_S seconds from the
# script's start (default 460: a device call's 10 minutes less one run of 6 processes and the analyses). Resumable
# across the calls of one warm machine: SERIES_STATE (default /tmp/gpubench-series) keeps the runs, and each call
# adds to them.
# OUT/runs.txt: each run's exit code, start and wall seconds; OUT/series.tgz: every run of the series so far (tables
# and run.json, the folder CLUSTER/); OUT/spreads.txt: each figure's range of run medians at the host's pace and as
# measured (tests/gpu/pooled_aa.py --spreads); from 7 runs on, OUT/replay.txt: each run from the sixth judged by
# compare against the 5 before it (tests/gpu/window_rule.py). Every process runs with NCCL_NVLS_ENABLE=0
# TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 (setup.sh). SETUP=0 skips setup.sh (a dry run on a CPU
# machine, with RUN_ARGS naming --backend fake).
set -u -o pipefail
out=${1:?OUT}; cluster=${2:?CLUSTER}; shift 2
args=("$@")
[ ${#args[@]} -eq 0 ] && args=(--suite elementwise,gemm,launch,copy --quick --processes 6)
here=$(cd "$(dirname "$0")" && pwd)
start=$SECONDS
[ "${SETUP:-1}" = 1 ] && source "$here/setup.sh"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
state=${SERIES_STATE:-/tmp/gpubench-series}
deadline=${DEADLINE_S:-460}
mkdir -p "$out" "$state/runs" "$state/logs"
echo "call $(date -u +%FT%TZ): gpubench run ${args[*]} --cluster $cluster" >> "$state/runs.txt"
while [ $((SECONDS - start)) -lt "$deadline" ]; do
  n=$(ls "$state/logs" | wc -l)
  t0=$SECONDS
  python3 -m gpubench run "${args[@]}" --cluster "$cluster" --out "$state/runs" > "$state/logs/run-$n.txt" 2>&1
  rc=$?
  echo "run $n rc=$rc start=$((t0 - start))s wall=$((SECONDS - t0))s $(date -u +%T)" >> "$state/runs.txt"
  [ "$rc" -gt 1 ] && { echo "run $n: exit $rc, the series stops (see $state/logs/run-$n.txt)" >> "$state/runs.txt"; break; }
done
cp "$state/runs.txt" "$out/runs.txt"
tar czf "$out/series.tgz" -C "$state/runs" "$cluster"
python3 "$here/pooled_aa.py" "$state/runs/$cluster" --spreads > "$out/spreads.txt" 2>&1
if [ "$(ls -d "$state/runs/$cluster"/*/ 2>/dev/null | wc -l)" -ge 7 ]; then
  python3 "$here/window_rule.py" "$state/runs/$cluster" > "$out/replay.txt" 2>&1
fi
cat "$out/runs.txt"
