#!/usr/bin/env bash
# Where the comm suite's sendrecv loses to nccl-tests below 16 MiB (issue 45): tests/gpu/p2p_isolate.py's four
# ways on every GPU of the machine, then nccl-tests' sendrecv at the same sizes in the matching layout (one thread
# per GPU, graphs of 10), ROUNDS times alternated:
#   NCCL_TESTS_DIR=<nccl-tests built on the machine>/build bash tests/gpu/run_p2p.sh OUT_DIR
# ALLOC=nccl or nccl-shared: where the buffers come from (p2p_isolate.py --alloc; torch by default).
# COLLECTIVE=alltoall: the same for alltoall (p2p_isolate.py --collective; nccl-tests' alltoall_perf).
# (nccl-tests is built from its own source on the machine beforehand, never part of this repository; without
# NCCL_TESTS_DIR only the four ways run.) OUT_DIR gets p2p-<round>.tsv and nccl-tests-<round>.txt.
set -u -o pipefail
out=${1:?OUT_DIR}
mkdir -p "$out"
. "$(dirname "$0")/setup.sh"
gpus=$(nvidia-smi -L | grep -c '^GPU')
sizes=${SIZES:-1M,4M,16M,256M}
for i in $(seq 1 "${ROUNDS:-2}"); do
  # bounded: the ranks' teardown stalled once after every size had been written (4 x H100, 2026-11-27)
  timeout "${P2P_TIMEOUT_S:-180}" torchrun --nproc-per-node "$gpus" --master-port $((29500 + i)) \
    "$(dirname "$0")/p2p_isolate.py" --sizes "$sizes" --alloc "${ALLOC:-torch}" --collective "${COLLECTIVE:-sendrecv}" \
    --out "$out/p2p-$i.tsv" > "$out/p2p-$i.log" 2>&1 || echo "p2p round $i: exit $?"
  if [[ -n "${NCCL_TESTS_DIR:-}" ]]; then
    "$NCCL_TESTS_DIR/${COLLECTIVE:-sendrecv}_perf" -b 1M -e 256M -f 4 -t "$gpus" -g 1 -G 10 -n 30 -w 5 > "$out/nccl-tests-$i.txt" 2>&1 \
      || echo "nccl-tests round $i: exit $?"
  fi
done
cat "$out"/p2p-*.tsv
grep -E '^ +[0-9]' "$out"/nccl-tests-*.txt 2>/dev/null
