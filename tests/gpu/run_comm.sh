#!/usr/bin/env bash
# The comm suite beside nccl-tests on one multi-GPU machine (see docs/measurements.md):
#   NCCL_TESTS_DIR=<built nccl-tests>/build bash tests/gpu/run_comm.sh OUT_DIR CLUSTER_LABEL
# nccl-tests is built from its own source on the machine beforehand (never part of this repository).
# ROUNDS=N (default 1) repeats the eager pair, gpubench then nccl-tests, N times in turn, each pair compared on its
# own: run-to-run spread on both sides is as large as the acceptance's 2 % margin, and alternating shows
# whether a gap follows the tool or the moment; compare_comm.py --rounds then compares per-case medians.
# GRAPH=0 and TORCHRUN=0 leave out the --graph pair and the torchrun run; MIN_BYTES (default 1M) starts the sweep;
# COLLECTIVES=a,b limits the eager sweeps to those collectives. NCCL_TESTS_MPI_DIR=<an MPI=1 build> adds, in each
# round, nccl-tests in the suite's own layout (one process per GPU under mpirun, --nccl-tests-launcher) and
# compares the suite with that reference too (compare_comm-mpi*.txt). REGISTER=1 runs both engines with
# --register: the suite's buffers from ncclMemAlloc and registered with NCCL, nccl-tests with -R 1.
set -u -o pipefail
out=${1:?OUT_DIR}; cluster=${2:?CLUSTER_LABEL}
mkdir -p "$out"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
python3 -m pip install -q --no-deps --no-build-isolation . 2>&1 | grep -v -i warning
nvidia-smi topo -m 2>/dev/null | head -8
sweep=(--min-bytes ${MIN_BYTES:-1M} --max-bytes 4G --step-factor ${STEP:-64} ${COLLECTIVES:+--collectives "$COLLECTIVES"})
reg=(); [ "${REGISTER:-0}" = 1 ] && reg=(--register)
last() { ls -d "$out"/runs/"$cluster"/*/ | tail -1; }
t() { local s=$EPOCHREALTIME; "$@"; echo "rc=$? wall=$(awk "BEGIN{printf \"%.1f\", $EPOCHREALTIME - $s}") s: $*"; }

t gpubench run --suite comm "${reg[@]}" "${sweep[@]}" --out "$out/runs" --cluster "$cluster" >"$out/native.log" 2>&1
native=$(last)
t gpubench run --suite comm "${reg[@]}" --engine nccl-tests "${sweep[@]}" --out "$out/runs" --cluster "$cluster" >"$out/nt.log" 2>&1
nt=$(last)
gnative= gnt=
if [ "${GRAPH:-1}" = 1 ]; then
  t gpubench run --suite comm "${reg[@]}" --graph --min-bytes 1M --max-bytes 1M --out "$out/runs" --cluster "$cluster" >"$out/native-graph.log" 2>&1
  gnative=$(last)
  t gpubench run --suite comm "${reg[@]}" --engine nccl-tests --graph --min-bytes 1M --max-bytes 1M --out "$out/runs" --cluster "$cluster" >"$out/nt-graph.log" 2>&1
  gnt=$(last)
fi
ngpu=$(python3 -c 'import torch; print(torch.cuda.device_count())')
mpi_nt() {  # nccl-tests one process per GPU: the MPI build under Open MPI's mpirun (root needs its flag)
  t gpubench run --suite comm "${reg[@]}" --engine nccl-tests --nccl-tests-dir "$NCCL_TESTS_MPI_DIR" \
    --nccl-tests-launcher "mpirun --allow-run-as-root -np $ngpu" "${sweep[@]}" --out "$out/runs" \
    --cluster "$cluster" >"$out/nt-mpi-$1.log" 2>&1
}
pairs=("$native $nt") mpi_pairs=()
[ -n "${NCCL_TESTS_MPI_DIR:-}" ] && mpi_nt 1 && mpi_pairs+=("$native $(last)")
for r in $(seq 2 "${ROUNDS:-1}"); do
  t gpubench run --suite comm "${reg[@]}" "${sweep[@]}" --out "$out/runs" --cluster "$cluster" >"$out/native-$r.log" 2>&1
  n2=$(last)
  t gpubench run --suite comm "${reg[@]}" --engine nccl-tests "${sweep[@]}" --out "$out/runs" --cluster "$cluster" >"$out/nt-$r.log" 2>&1
  pairs+=("$n2 $(last)")
  [ -n "${NCCL_TESTS_MPI_DIR:-}" ] && mpi_nt "$r" && mpi_pairs+=("$n2 $(last)")
done
if [ "${TORCHRUN:-1}" = 1 ]; then
  t torchrun --standalone --nproc-per-node "$ngpu" -m gpubench run --suite comm "${reg[@]}" --collectives all_reduce,all_gather \
    --min-bytes 64M --max-bytes 4G --step-factor 64 --out "$out/runs" --cluster "$cluster" >"$out/torchrun.log" 2>&1
  echo "torchrun run: $(last)"
fi
python3 tests/gpu/compare_comm.py "$native" "$nt" ${gnative:+--graph-native "$gnative" --graph-nt "$gnt"} | tee "$out/compare_comm.txt"
for r in $(seq 2 "${ROUNDS:-1}"); do
  echo "round $r:"; python3 tests/gpu/compare_comm.py ${pairs[$((r - 1))]} | tee "$out/compare_comm-round$r.txt"
done
[ "${ROUNDS:-1}" -gt 1 ] && python3 tests/gpu/compare_comm.py --rounds ${pairs[@]} | tee "$out/compare_comm-median.txt"
if [ ${#mpi_pairs[@]} -gt 0 ]; then
  echo "against nccl-tests one process per GPU (mpirun -np $ngpu, -g 1):"
  python3 tests/gpu/compare_comm.py --rounds ${mpi_pairs[@]} | tee "$out/compare_comm-mpi-median.txt"
fi
gpubench compare "$nt" "$native" --cross-cluster --format markdown --out "$out/compare.md" >"$out/compare.txt" 2>&1
echo "gpubench compare rc=$?"
grep -v '^\[' "$out/native.log" | tail -45
tar czf "$out.tgz" -C "$(dirname "$out")" "$(basename "$out")"  # the logs and runs in one file
