#!/usr/bin/env bash
# What an eager collective call costs the host, on a machine with one GPU (a world of one, where an in-place
# call leaves NCCL next to nothing to do): tests/gpu/probe_comm_host_cost.py twice (a plain torch.distributed
# loop and its variants), then the comm suite's own figures for the same calls, spawned and under torchrun,
# and, with NCCL_TESTS_DIR (nccl-tests built from its own source beforehand, never part of this repository),
# nccl-tests' figures for them through --engine nccl-tests.
#   [NCCL_TESTS_DIR=…/build] bash tests/gpu/run_comm_host_cost.sh OUT_DIR
set -u -o pipefail
out=${1:?OUT_DIR}
mkdir -p "$out"
source tests/gpu/setup.sh
for i in 1 2; do
  torchrun --standalone --nproc-per-node 1 tests/gpu/probe_comm_host_cost.py --out "$out/probe-$i.json" 2>&1 | grep -v "^\[W"
done
q=(--collectives all_reduce,all_gather --min-bytes 1M --max-bytes 64M --step-factor 64 --out "$out/runs")
show() {
  python3 - "$1" <<'PY'
import sys
from gpubench import results
df = results.load(sys.argv[1])
t = df[df.metric == "time"]
print(sys.argv[1])
print(t[["engine", "collective", "bytes", "inplace", "value", "min", "cv", "n", "inner", "sets", "status"]]
      .to_string(index=False))
PY
}
gpubench run --suite comm --nproc 1 "${q[@]}" --cluster spawn >"$out/spawn.log" 2>&1; echo "spawn rc=$?"
show "$(ls -d "$out"/runs/spawn/*/ | tail -1)"
torchrun --standalone --nproc-per-node 1 -m gpubench run --suite comm "${q[@]}" --cluster torchrun \
  >"$out/torchrun.log" 2>&1; echo "torchrun rc=$?"
show "$(ls -d "$out"/runs/torchrun/*/ | tail -1)"
if [[ -n ${NCCL_TESTS_DIR:-} ]]; then
  gpubench run --suite comm --engine nccl-tests --nproc 1 "${q[@]}" --cluster nccl-tests >"$out/nt.log" 2>&1
  echo "nccl-tests rc=$?"; show "$(ls -d "$out"/runs/nccl-tests/*/ | tail -1)"
  gpubench compare "$(ls -d "$out"/runs/spawn/*/ | tail -1)" "$(ls -d "$out"/runs/nccl-tests/*/ | tail -1)" \
    >"$out/compare-spawn-nt.txt" 2>&1
  echo "compare rc=$?"; grep -i "settings differ" "$out/compare-spawn-nt.txt"
fi
# The run directories are three levels down: one archive brings them back whole.
tar -C "$out" -czf "$out/runs.tgz" runs && rm -rf "$out/runs"
