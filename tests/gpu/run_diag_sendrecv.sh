#!/usr/bin/env bash
# Where the comm suite's sendrecv loses ~3 % to nccl-tests at 64 MiB on 2 x H200 (docs/measurements.md), in one
# command on that machine; nccl-tests is built from its own source there beforehand (never part of this repo):
#   NCCL_TESTS_DIR=<built nccl-tests>/build bash tests/gpu/run_diag_sendrecv.sh OUT_DIR CLUSTER_LABEL
# 1. nccl-tests sendrecv, alltoall and all_gather (the control) as gpubench runs it (-g 2: one process drives
#    both GPUs), 64 MiB to 4 GiB, by default and with NCCL_P2P_DIRECT_DISABLE=1 (NCCL then stops using the peer's
#    user buffers directly within the process), taking turns twice; NCCL_DEBUG's P2P lines say which transport
#    each layout connects. At 4 GiB the suite trails nccl-tests steadily on sendrecv and alltoall, not on
#    all_gather (docs/measurements.md): if direct access is what one process has over two, turning it off
#    should move nccl-tests onto the suite's figures there. With NCCL_TESTS_MPI_DIR (an MPI=1 build with
#    NAME_SUFFIX=_mpi; the device image has Open MPI's mpirun), also nccl-tests as one process per GPU
#    (mpirun -np N ... -g 1), the suite's own layout: the like-for-like reference.
# 2. tests/gpu/diag_sendrecv.py: the same NCCL calls in one process and in two, torch's path, the suite's method.
# 3. The suite (default; buffers from ncclMemAlloc as nccl-tests allocates them, --alloc nccl; and those
#    registered with NCCL, --register, nccl-tests -R 1) against the nccl-tests engine (default, direct access
#    off, and with NCCL_TESTS_MPI_DIR one process per GPU under mpirun) at 64 MiB and 4 GiB, PAIRS (default 4)
#    alternated rounds, each run's time.
# Each step has its own time limit (timeout), so that a hung one leaves the rest of the call its time.
# SECTIONS (default "1 2 3") runs some of them, to split the work over two calls.
set -u -o pipefail
out=${1:?OUT_DIR}; cluster=${2:?CLUSTER_LABEL}
nt=${NCCL_TESTS_DIR:?NCCL_TESTS_DIR=<nccl-tests build directory>}
mkdir -p "$out"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
python3 -m pip install -q --no-deps --no-build-isolation . 2>&1 | grep -v -i warning
# torch's wheel NCCL first on the path: nccl-tests was built against it, and CuPy then loads it too.
NH=$(python3 -c 'import nvidia.nccl; print(list(nvidia.nccl.__path__)[0])' 2>/dev/null) \
  && export LD_LIBRARY_PATH=$NH/lib:${LD_LIBRARY_PATH:-}
ngpu=$(python3 -c 'import torch; print(torch.cuda.device_count())')
t() { local s=$EPOCHREALTIME; "$@"; echo "rc=$? wall=$(awk "BEGIN{printf \"%.1f\", $EPOCHREALTIME - $s}") s: $*"; }
row() { grep -E "^ +$1 " "$2" | awk -v l="$3" '{printf "%-24s %s B: out-of-place %s us %s GB/s, in place %s us %s GB/s\n", l, $1, $6, $8, $10, $12}'; }

sections=" ${SECTIONS:-1 2 3} "
# Whether an MPI is at hand: nccl-tests built with MPI=1 runs one process per GPU (mpirun -np 2 ... -g 1), the
# suite's layout, which would give a like-for-like reference if the layout decides.
echo "MPI launchers: $(command -v mpirun mpiexec 2>/dev/null | tr '\n' ' ')"
python3 -c 'import mpi4py; print("mpi4py", mpi4py.__version__, mpi4py.get_config())' 2>&1 | tail -1
if [[ $sections == *" 1 "* ]]; then
modes=(default nodirect)
mpi=${NCCL_TESTS_MPI_DIR:-}
# Open MPI refuses root unless told; its mpirun hands its environment (the NCCL_* above) to the local ranks.
[ -n "$mpi" ] && modes+=(mpi) && mpirun --version 2>&1 | head -1
echo "== 1. nccl-tests ${modes[*]}: -g $ngpu in one process, NCCL_P2P_DIRECT_DISABLE=1, mpirun -np $ngpu -g 1"
nt_cmd() {  # nccl-tests' $2 in layout $1, into the array cmd
  cmd=(env); [ "$1" = nodirect ] && cmd+=(NCCL_P2P_DIRECT_DISABLE=1)
  if [ "$1" = mpi ]; then cmd+=(mpirun --allow-run-as-root -np "$ngpu" "$mpi/${2}_perf_mpi" -g 1)
  else cmd+=("$nt/${2}_perf" -g "$ngpu"); fi
}
for i in 1 2; do
  for mode in "${modes[@]}"; do
    for coll in sendrecv alltoall all_gather; do
      f="$out/nt-$coll-$mode-$i.txt"
      nt_cmd "$mode" "$coll"
      t timeout 120 "${cmd[@]}" -b 64M -e 4G -f 4 -d float -n 20 -w 5 -c 1 >"$f" 2>&1
      tail -n 1 "$f"  # t's line: the run's exit status and wall time
      for b in 67108864 268435456 4294967296; do row "$b" "$f" "$coll $mode $i"; done
    done
  done
done
for mode in "${modes[@]}"; do
  nt_cmd "$mode" sendrecv
  NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,P2P timeout 120 "${cmd[@]}" -b 64M -e 64M -n 2 -w 1 >"$out/nt-debug-$mode.txt" 2>&1
  echo "nccl-tests $mode transport: $(grep -o 'via P2P[^ ]*' "$out/nt-debug-$mode.txt" | sort | uniq -c | tr '\n' ' ')"
done

fi

if [[ $sections == *" 2 "* ]]; then
echo "== 2. diag_sendrecv.py"
t timeout 240 python3 tests/gpu/diag_sendrecv.py --single 2>&1 | tee "$out/diag-single.txt"
NCCL_P2P_DIRECT_DISABLE=1 DIAG_TAG="one, no direct" t timeout 240 python3 tests/gpu/diag_sendrecv.py --single 2>&1 \
  | tee "$out/diag-single-nodirect.txt"
NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,P2P NCCL_DEBUG_FILE="$out/diag-nccl-debug.%p.txt" \
  t timeout 300 torchrun --standalone --nproc-per-node "$ngpu" tests/gpu/diag_sendrecv.py 2>&1 | tee "$out/diag-per-process.txt"
echo "torch per-process transport: $(cat "$out"/diag-nccl-debug.*.txt 2>/dev/null | grep -o 'via P2P[^ ]*' | sort | uniq -c | tr '\n' ' ')"

fi

if [[ $sections == *" 3 "* ]]; then
echo "== 3. the suite (default, --alloc nccl, --register) against the nccl-tests engine (default, direct access"
echo "   off, mpirun), PAIRS alternated rounds at 64 MiB and 4 GiB"
# Both tools have read sendrecv 64 MiB at one of two times per process (docs/measurements.md): many short
# rounds show how often each lands on which, where a few long ones compare two draws. At 4 GiB the figures are
# steady (0.3 %) and the suite trails by 0.86 %. Between processes NCCL moves P2P data through its own buffers
# unless the user's are registered with it (NCCL's user guide, "User Buffer Registration": intra-node
# registration since 2.23, by ncclCommRegister or by CUDA graph capture): --register registers the suite's
# buffers as nccl-tests -R 1 does. nccl-tests also allocates with ncclMemAlloc, not cudaMalloc: --alloc nccl
# alone tells the allocation from the registration. Within one process (nccl-tests -g 2) NCCL reaches the
# peer's user buffers directly.
sweep=(--collectives sendrecv --min-bytes 64M --max-bytes 4G --step-factor 64)
last() { ls -d "$out"/runs/"$cluster"/*/ | tail -1; }
pairs_default=() pairs_nodirect=() pairs_alloc=() pairs_registered=() pairs_mpi=()
for i in $(seq 1 "${PAIRS:-4}"); do
  t gpubench run --suite comm "${sweep[@]}" --out "$out/runs" --cluster "$cluster" >"$out/native-$i.log" 2>&1
  n=$(last)
  t gpubench run --suite comm "${sweep[@]}" --alloc nccl --out "$out/runs" --cluster "$cluster" \
    >"$out/native-alloc-nccl-$i.log" 2>&1
  a=$(last)
  t gpubench run --suite comm "${sweep[@]}" --register --out "$out/runs" --cluster "$cluster" \
    >"$out/native-registered-$i.log" 2>&1
  r=$(last)
  t gpubench run --suite comm --engine nccl-tests "${sweep[@]}" --out "$out/runs" --cluster "$cluster" \
    >"$out/nt-engine-default-$i.log" 2>&1
  d=$(last)
  pairs_default+=("$n" "$d") pairs_alloc+=("$a" "$d") pairs_registered+=("$r" "$d")
  NCCL_P2P_DIRECT_DISABLE=1 t gpubench run --suite comm --engine nccl-tests "${sweep[@]}" --out "$out/runs" \
    --cluster "$cluster" >"$out/nt-engine-nodirect-$i.log" 2>&1
  pairs_nodirect+=("$n" "$(last)")
  if [ -n "${NCCL_TESTS_MPI_DIR:-}" ]; then  # nccl-tests in the suite's layout: one process per GPU
    t gpubench run --suite comm --engine nccl-tests --nccl-tests-dir "$NCCL_TESTS_MPI_DIR" \
      --nccl-tests-launcher "mpirun --allow-run-as-root -np $ngpu" "${sweep[@]}" --out "$out/runs" \
      --cluster "$cluster" >"$out/nt-engine-mpi-$i.log" 2>&1
    pairs_mpi+=("$n" "$(last)")
  fi
done
python3 - "${pairs_default[@]}" "${pairs_alloc[@]}" "${pairs_registered[@]}" "${pairs_nodirect[@]}" \
  "${pairs_mpi[@]}" <<'PY' \
  | tee "$out/times-per-run.txt"
import json, os, sys
from gpubench import results
from gpubench.units import format_bytes
for run in dict.fromkeys(sys.argv[1:]):  # each run once
    df = results.load(run)
    d = df[(df.metric == "time") & (df.collective == "sendrecv") & (df.status == "ok") & ~df.inplace.astype(bool)]
    meta = json.load(open(os.path.join(run, "run.json")))
    env = meta["fingerprint"]["volatile"].get("env", {})
    torch_rows = len(d) and "alloc" in d.columns and d.engine.iloc[0] == "torch"
    mode = ("mpirun" if meta.get("engine", {}).get("launcher") else
            "no direct" if env.get("NCCL_P2P_DIRECT_DISABLE") == "1" else
            "registered" if torch_rows and bool(d.register.iloc[0]) else
            "alloc nccl" if torch_rows and d.alloc.iloc[0] == "nccl" else "")
    print(f"{d.engine.iloc[0] if len(d) else '?':10s} {mode:10s} {run.rstrip('/').split('/')[-1]}  "
          + " ".join(f"{format_bytes(int(b))} {v:.1f} us" for b, v in zip(d.bytes, d.value)))
PY
echo "the suite against nccl-tests as gpubench runs it (-g $ngpu, default):"
python3 tests/gpu/compare_comm.py --rounds "${pairs_default[@]}" | tee "$out/compare-default.txt"
echo "the suite with ncclMemAlloc buffers (--alloc nccl) against the same nccl-tests runs:"
python3 tests/gpu/compare_comm.py --rounds "${pairs_alloc[@]}" | tee "$out/compare-alloc-nccl.txt"
echo "the suite with registered buffers (--register) against the same nccl-tests runs:"
python3 tests/gpu/compare_comm.py --rounds "${pairs_registered[@]}" | tee "$out/compare-registered.txt"
echo "the suite against nccl-tests with NCCL_P2P_DIRECT_DISABLE=1:"
python3 tests/gpu/compare_comm.py --rounds "${pairs_nodirect[@]}" | tee "$out/compare-nodirect.txt"
if [ ${#pairs_mpi[@]} -gt 0 ]; then
  echo "the suite against nccl-tests one process per GPU (mpirun -np $ngpu, -g 1):"
  python3 tests/gpu/compare_comm.py --rounds "${pairs_mpi[@]}" | tee "$out/compare-mpi.txt"
fi
fi
tar czf "$out.tgz" -C "$(dirname "$out")" "$(basename "$out")"  # the logs and runs in one file
