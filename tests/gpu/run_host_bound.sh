#!/usr/bin/env bash
# Which rows the engine calls host-bound on one GPU: the comm suite in a world of one (eager and --graph),
# and --quick runs of elementwise, launch and gemm; per row the per-call time, the host's time to issue a
# call (host_us) and the flag. Run directories come back in one archive.
#   bash tests/gpu/run_host_bound.sh OUT_DIR
set -u -o pipefail
out=${1:?OUT_DIR}
mkdir -p "$out"
source tests/gpu/setup.sh
o=(--out "$out/runs")
c=(--suite comm --nproc 1 --collectives all_reduce,all_gather --min-bytes 1M --max-bytes 64M --step-factor 64)
gpubench run "${c[@]}" "${o[@]}" --cluster comm >"$out/comm.log" 2>&1; echo "comm rc=$?"
gpubench run "${c[@]}" --graph "${o[@]}" --cluster comm-graph >"$out/comm-graph.log" 2>&1; echo "comm --graph rc=$?"
for s in elementwise launch gemm; do
  gpubench run --suite $s --quick "${o[@]}" --cluster $s >"$out/$s.log" 2>&1; echo "$s rc=$?"
done
python3 - "$out/runs" <<'PY'
import glob, sys
import pandas as pd
from gpubench import results
pd.set_option("display.width", 250)
for run in sorted(glob.glob(sys.argv[1] + "/*/*/")):
    df = results.load(run)
    t = df[(df.metric == "time") & (df.status == "ok")]
    print(run.split("/")[-3], len(t), "rows; host_bound:", t.host_bound.map(repr).value_counts().to_dict())
    print(t[["case", "value", "host_us", "host_bound", "inner"]].to_string(index=False, max_colwidth=70))
PY
tar -C "$out" -czf "$out/runs.tgz" runs && rm -rf "$out/runs"
