#!/usr/bin/env bash
# gpubench check's acceptance (issues 47 and 48; docs/check.md, docs/measurements.md), in one device call per kind:
#   bash tests/gpu/check_acceptance.sh OUT LABEL [N]
# PARTS (default "idle cotenant history expect"):
#   idle      N checks (default 10) of the idle node with the shipped envelope, each timed
#   cotenant  one check while another process spins a kernel on half the SMs of GPU $COTENANT_GPU (default 2 on a
#             node of 3 GPUs or more, else 0; tests/gpu/cotenant.py hog)
#   history   one check with --expect history: the idle checks are this node's own envelope (h2d_all, d2h_all too)
#   expect    gpubench expect over the idle checks: OUT/expect-LABEL.toml, this host class's envelope
# A time guard starts an idle check only while the parts after it still fit in BUDGET_S (default 540: the device
# call's 10 minutes less the set-up), and says how many ran; run again with PARTS=idle for more.
# Every process runs with NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 (setup.sh).
# OUT/summary.txt: one line per check (part, wall s, exit code, state, phases), every verdict that is not PASS,
# then the idle checks' count of PASS and of false WARN/FAIL; OUT/<part>.log each check's terminal output;
# OUT/runs the check's run directories (check.json beside the per-GPU figures).
set -u -o pipefail
out=${1:?OUT}; label=${2:?LABEL}; n=${3:-10}
here=$(cd "$(dirname "$0")" && pwd)
t_start=$(date +%s)
[ "${SETUP:-1}" = 1 ] && source "$here/setup.sh"  # SETUP=0 BACKEND=fake: a dry run of this script on a CPU machine
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
mkdir -p "$out/runs"
read -r -a parts <<< "${PARTS:-idle cotenant history expect}"
budget=${BUDGET_S:-540}
gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)
cotenant_gpu=${COTENANT_GPU:-$([ "${gpus:-1}" -ge 3 ] && echo 2 || echo 0)}
{ nvidia-smi topo -m; lscpu | grep -E 'Model name|Socket|NUMA'; } > "$out/host.txt" 2>&1
summary="$out/summary.txt"
last_wall=60

check() {  # check PART CLUSTER [ARGS...]: one timed gpubench check, summarised from its check.json
  local part=$1 cluster=$2; shift 2
  local t0; t0=$(date +%s.%N)
  COLUMNS=200 timeout 300 python3 -m gpubench check ${BACKEND:+--backend "$BACKEND"} --out "$out/runs" \
    --cluster "$cluster" "$@" > "$out/$part.log" 2>&1
  local rc=$?
  last_wall=$(python3 -c "print(round($(date +%s.%N) - $t0, 1))")
  python3 "$here/check_summary.py" "$part" "$last_wall" "$rc" "$out/runs/$cluster" | tee -a "$summary"
}

fits() {  # fits PARTS_LEFT: whether another idle check and the parts after it fit the budget
  local left=$1
  python3 -c "import sys, time; sys.exit(0 if time.time() - $t_start + (1 + $left) * $last_wall + 20 < $budget else 1)"
}

after=0
for p in "${parts[@]}"; do [[ $p == cotenant || $p == history ]] && after=$((after + 1)); done
for part in "${parts[@]}"; do
  echo "=== $part ($(date -u +%H:%M:%S))"
  case $part in
    idle)
      ran=0
      for i in $(seq "$n"); do
        if [ "$ran" -gt 0 ] && ! fits "$after"; then echo "time guard: $ran of $n idle checks ran" | tee -a "$summary"; break; fi
        check "idle-$i" "$label"; ran=$((ran + 1))
      done ;;
    cotenant)
      CUDA_VISIBLE_DEVICES=$cotenant_gpu python3 "$here/cotenant.py" hog 300 > "$out/cotenant-hog.txt" 2>&1 &
      hog=$!
      sleep 8  # its context and first kernels are up before the check starts
      echo "co-tenant: $(head -1 "$out/cotenant-hog.txt") on GPU $cotenant_gpu" | tee -a "$summary"
      check cotenant "$label-hog"
      kill "$hog" 2>/dev/null; wait "$hog" 2>/dev/null ;;
    history) check history "$label" --expect history ;;
    expect) python3 -m gpubench expect "$out/runs/$label" --out "$out/expect-$label.toml" 2>&1 | tee "$out/expect.log" ;;
    *) echo "unknown part $part"; exit 2 ;;
  esac
done
python3 "$here/check_summary.py" --tally "$summary" | tee -a "$summary"
echo "total $(( $(date +%s) - t_start )) s" | tee -a "$summary"
