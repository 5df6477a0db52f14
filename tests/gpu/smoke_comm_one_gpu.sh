#!/usr/bin/env bash
# The comm suite's CUDA paths on a machine with one GPU, where no collective can be compared with nccl-tests
# but every piece a multi-GPU session relies on can break: NCCL start-up in a world of one, --graph, the
# nccl-tests engine (nccl-tests built from its own source beforehand, never part of this repository), buffers
# from ncclMemAlloc and registered with NCCL (--alloc nccl, --register; each case's released when it ends), and
# the spawner's SIGTERM and SIGINT paths with NCCL ranks (no rank left behind, the rows measured kept):
#   NCCL_TESTS_DIR=<built nccl-tests>/build bash tests/gpu/smoke_comm_one_gpu.sh OUT_DIR
# PARTS (default "runs signals") picks the parts; "signals" alone needs no nccl-tests.
set -u -o pipefail
parts=" ${PARTS:-runs signals} "
out=${1:?OUT_DIR}; cluster=one
nt=${NCCL_TESTS_DIR:-}
[[ -z $nt && $parts != " signals " ]] && { echo "NCCL_TESTS_DIR=<nccl-tests build directory>" >&2; exit 2; }
mkdir -p "$out"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
python3 -m pip install -q --no-deps --no-build-isolation . 2>&1 | grep -v -i warning
nvidia-smi -L
python3 -c 'import torch; print("torch", torch.__version__, "nccl", torch.cuda.nccl.version())'
t() { local s=$EPOCHREALTIME; "$@"; echo "rc=$? wall=$(awk "BEGIN{printf \"%.1f\", $EPOCHREALTIME - $s}") s: $*"; }
last() { ls -d "$out"/runs/"$cluster"/*/ | tail -1; }
summary() {  # status of each case and the run's own status
  python3 - "$1" <<'PY'
import json, sys
from gpubench import results
run = sys.argv[1]
df = results.load(run)
meta = json.load(open(run + "/run.json"))
t = df[df.metric == "time"]
how = {(a, r) for a, r in zip(t.alloc, t.register)} if "alloc" in t.columns else meta.get("engine", {})
print(f"  {run}: run {meta['status']} {meta.get('error', '')!r}; {t['case'].nunique()} cases, status "
      f"{t.status.value_counts().to_dict()}, valid {t.valid.value_counts().to_dict()}, engine {set(t.engine)}, "
      f"alloc/register {how if 'alloc' in t.columns else how.get('register')}")
for message in dict.fromkeys(t[t.status == "error"].message):
    print(f"    error: {message}")
PY
}
q=(--nproc 1 --quick --out "$out/runs" --cluster "$cluster")

if [[ $parts == *" runs "* ]]; then
echo "== eager, --graph, the nccl-tests engine, NCCL's buffers and registered ones (a world of one)"
t timeout 150 gpubench run --suite comm "${q[@]}" >"$out/eager.log" 2>&1; plain=$(last); summary "$plain"
t timeout 100 gpubench run --suite comm --graph "${q[@]}" >"$out/graph.log" 2>&1; summary "$(last)"
NCCL_TESTS_DIR=$nt t timeout 150 gpubench run --suite comm --engine nccl-tests "${q[@]}" >"$out/nt.log" 2>&1
summary "$(last)"
t timeout 150 gpubench run --suite comm --alloc nccl "${q[@]}" >"$out/alloc-nccl.log" 2>&1; summary "$(last)"
t timeout 150 gpubench run --suite comm --register "${q[@]}" >"$out/registered.log" 2>&1
reg=$(last); summary "$reg"
t timeout 100 gpubench run --suite comm --register --graph "${q[@]}" >"$out/registered-graph.log" 2>&1
summary "$(last)"
NCCL_TESTS_DIR=$nt t timeout 150 gpubench run --suite comm --engine nccl-tests --register "${q[@]}" \
  >"$out/nt-registered.log" 2>&1
summary "$(last)"; grep -c -- "-R 1" "$out/nt-registered.log" | sed 's/^/  nccl-tests commands with -R 1: /'
gpubench compare "$plain" "$reg" --format markdown --out "$out/compare.md" >"$out/compare.txt" 2>&1
echo "compare (default against --register) rc=$?"
# Each case's NCCL buffers are released when it ends: 200 cases' worth of 256 MiB registered pairs, the free
# memory before and after (a leak would take 100 GiB).
python3 - <<'PY'
import os, torch, torch.distributed as dist
from gpubench.ranks import ncclmem
os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT="29561")
dev = torch.device("cuda", 0); torch.cuda.set_device(dev)
dist.init_process_group("nccl", rank=0, world_size=1, device_id=dev)
lib, comm = ncclmem.library(), ncclmem.comm_of(dist.group.WORLD, dev)
before = torch.cuda.mem_get_info()[0]
for i in range(200):
    arena = ncclmem.Arena(lib, comm, torch.cuda.synchronize)
    a, b = arena.empty(64 << 20, torch.float32, dev), arena.empty(64 << 20, torch.float32, dev)
    a.normal_(); dist.all_reduce(a); b.copy_(a)
    if i == 0:
        during = torch.cuda.mem_get_info()[0]
    arena.close()
after = torch.cuda.mem_get_info()[0]
print(f"  arena: free memory {before / 2**30:.2f} GiB before, {during / 2**30:.2f} with one case's 512 MiB, "
      f"{after / 2**30:.2f} after 200 cases; library {lib._name}")
# What one ncclMemAlloc of 4 KiB takes (its granularity), and 128 small buffers in one arena (one chunk).
import ctypes
free0 = torch.cuda.mem_get_info()[0]
p = ctypes.c_void_p(); lib.ncclMemAlloc(ctypes.byref(p), 4096)
free1 = torch.cuda.mem_get_info()[0]; lib.ncclMemFree(p)
arena = ncclmem.Arena(lib, comm, torch.cuda.synchronize)
small = [arena.empty(1024, torch.float32, dev).fill_(i) for i in range(128)]
free2 = torch.cuda.mem_get_info()[0]
ok = all(int(t[0].item()) == i and int(t[-1].item()) == i for i, t in enumerate(small))
arena.close()
print(f"  ncclMemAlloc(4 KiB) took {(free0 - free1) / 2**20:.1f} MiB; 128 buffers of 4 KiB in one arena took "
      f"{(free0 - free2) / 2**20:.1f} MiB in {len(small)} views, each still holding its own value: {ok}")
dist.destroy_process_group()
PY

fi

if [[ $parts == *" signals "* ]]; then
# A signal to the spawner mid-sweep: SIGTERM (a job's time limit) ends the ranks at once (exit 143); SIGINT to
# it alone (a CI runner's cancel) and to its process group (a terminal's Ctrl-C) stop them after the case (130).
# Job control on: each background run leads its own process group, and its SIGINT is not ignored (a
# non-interactive shell starts background commands with SIGINT ignored, and Python then keeps it so).
# The sweep is every collective a world of one runs, eager, 1 MiB to 4 GiB: there the default sweep (the local
# copy, in graphs) ends within seconds, before a signal could reach it mid-way.
set -m
for how in TERM INT INT-group; do
  echo "== SIG${how%-group} to the spawner$([ "$how" = INT-group ] && echo "'s process group"), mid-sweep"
  before=$(ls "$out"/runs/"$cluster"/*/comm.parquet 2>/dev/null | wc -l)
  gpubench run --suite comm --nproc 1 --eager --collectives all_reduce,all_gather,reduce_scatter,alltoall,broadcast,reduce \
    --min-bytes 1M --max-bytes 4G --step-factor 2 --out "$out/runs" --cluster "$cluster" >"$out/sig$how.log" 2>&1 &
  pid=$!
  # Signal once the run has saved rows (it is measuring), a few seconds on.
  for _ in $(seq 120); do
    [ "$(ls "$out"/runs/"$cluster"/*/comm.parquet 2>/dev/null | wc -l)" -gt "$before" ] && break; sleep 0.5
  done
  sleep 3
  kill -0 "$pid" 2>/dev/null || echo "FAIL: the run ended before the signal, nothing was tested"
  if [ "$how" = INT-group ]; then kill -INT -- "-$pid"; else kill "-$how" "$pid"; fi
  s=$EPOCHREALTIME; wait "$pid"
  echo "spawner rc=$? after $(awk "BEGIN{printf \"%.1f\", $EPOCHREALTIME - $s}") s"
  sleep 3
  pgrep -af "gpubench run" || echo "no gpubench process left"
  summary "$(last)"
  grep -v '^\[' "$out/sig$how.log" | grep -iE "stop|error" | tail -n 3
done
set +m

fi
