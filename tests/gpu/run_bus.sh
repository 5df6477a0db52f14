#!/usr/bin/env bash
# The comm suite's bus figures against nccl-tests in the same layout, collective by collective (issue 45):
#   NCCL_TESTS_DIR=<nccl-tests built on the machine>/build bash tests/gpu/run_bus.sh OUT_DIR CLUSTER_LABEL
# nccl-tests is built from its own source on the machine beforehand (never part of this repository).
# Runs: the nccl-tests engine (-t N -g 1 -G 10) and the torch engine (graphs, NCCL's buffers: the defaults) from
# 1 MiB to 4 GiB; the torch engine with --alloc torch (the caching allocator); both engines eager from 64 MiB;
# the nccl-tests engine with -g N (one thread for every GPU) for all_reduce; one NCCL REG log of a sendrecv.
# ROUNDS=N (default 1) repeats the two default runs N times, alternated, and compares medians. Prints
# bus_ratios.py's tables; every run directory stays under OUT_DIR/runs; invalid rows are listed.
# COLLECTIVES=a,b limits the alternated rounds to those collectives; PARTS (default "rounds alloc eager one reg")
# picks the runs (PARTS=rounds with MIN_BYTES/MAX_BYTES: more rounds of a few cells). STEP=2: every size of the
# default sweep (×2, as the suite and nccl-tests -f 2), not every other one (the default here, ×4).
set -u -o pipefail
out=${1:?OUT_DIR}; cluster=${2:?CLUSTER_LABEL}
mkdir -p "$out"
. "$(dirname "$0")/setup.sh"
nvidia-smi topo -m 2>/dev/null | head -6
sweep=(--min-bytes ${MIN_BYTES:-1M} --max-bytes ${MAX_BYTES:-4G} --step-factor ${STEP:-4})
eager=(--min-bytes 64M --max-bytes ${MAX_BYTES:-4G} --step-factor ${STEP:-4} --eager)
last() { ls -d "$out"/runs/"$cluster"/*/ | tail -1; }
t() { local s=$EPOCHREALTIME; "$@"; echo "rc=$? wall=$(awk "BEGIN{printf \"%.1f\", $EPOCHREALTIME - $s}") s: $*"; }
g() { t gpubench run --suite comm --out "$out/runs" --cluster "$cluster" "$@"; }

parts=" ${PARTS:-rounds alloc eager one reg} "
has() { [[ $parts == *" $1 "* ]]; }
cols=(${COLLECTIVES:+--collectives "$COLLECTIVES"})
r() { python3 "$(dirname "$0")/bus_ratios.py" "$@" | tee -a "$out/ratios.txt"; }
nt= torch=
for i in $(seq 1 "${ROUNDS:-1}"); do
  has rounds || break
  g --engine nccl-tests "${cols[@]}" "${sweep[@]}" >"$out/nt-$i.log" 2>&1; nt=$nt${nt:+,}$(last)
  g "${cols[@]}" "${sweep[@]}" >"$out/torch-$i.log" 2>&1; torch=$torch${torch:+,}$(last)
done
if has alloc; then
  g --alloc torch --collectives sendrecv,alltoall,all_gather "${sweep[@]}" >"$out/torch-alloc.log" 2>&1; talloc=$(last)
fi
if has eager; then
  g --engine nccl-tests "${eager[@]}" >"$out/nt-eager.log" 2>&1; nte=$(last)
  g "${eager[@]}" >"$out/torch-eager.log" 2>&1; te=$(last)
fi
if has one; then
  g --engine nccl-tests --nccl-tests-layout one-thread --collectives all_reduce "${sweep[@]}" >"$out/nt-one.log" 2>&1
  one=$(last)
fi
if has reg; then
  NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,REG g --collectives sendrecv --sizes 64M >"$out/reg.log" 2>&1
  grep -E "regAddr|register|p2p channels" "$out/reg.log" | sort | uniq -c | sort -rn | head -8
fi
if has rounds; then
  r "torch engine / nccl-tests, graphs" "$torch" "$nt"
  r "nccl-tests engine / torch engine, graphs" "$nt" "$torch"
fi
has alloc && r "torch engine --alloc torch / nccl-tests, graphs" "$talloc" "$nt"
has eager && r "torch engine / nccl-tests, eager" "$te" "$nte" --from 64M
has one && r "nccl-tests -g N / -t N -g 1, graphs" "$one" "$nt" --band 0 10
grep -h "^comm:" "$out"/torch*.log | sort | uniq
python3 - "$out/runs/$cluster" <<'PY'
import pathlib, sys
from gpubench import results
for d in sorted(pathlib.Path(sys.argv[1]).iterdir()):
    df = results.load(d)
    bad = df[df.status != "ok"].drop_duplicates("case")
    for r in bad.itertuples():
        print(f"not ok: {d.name} {r.case} {r.status}: {r.message}")
PY
