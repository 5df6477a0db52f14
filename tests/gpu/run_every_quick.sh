#!/usr/bin/env bash
# One `--quick` run of every built-in suite on one GPU, each in its own process:
#   bash tests/gpu/run_every_quick.sh OUT LABEL
# OUT/walls.txt: suite, exit code and wall seconds; OUT/rows.tsv: suite, case, metric, unit, status of every row
# (what tests/test_rows_unchanged.py compares on the fake backend); OUT/figures.txt: each suite's rows by status
# and its headline medians; OUT/runs.tgz the run directories; OUT/logs.tgz each run's output.
# comm and autotune run as a world of one (one GPU: NCCL's local path, no link); autotune sweeps NCCL_PROTO only.
set -u -o pipefail
out=${1:?OUT}; label=${2:?LABEL}
source tests/gpu/setup.sh
git log -1 --format='commit %h %s' 2>/dev/null | cut -c1-120
mkdir -p "$out/logs"; runs=/tmp/every-quick
declare -A extra=([comm]="--nproc 1" [autotune]="--nproc 1 --knob NCCL_PROTO=LL,Simple")
for s in elementwise gemm launch copy comm autotune-kernels autotune; do
  start=$EPOCHREALTIME
  # shellcheck disable=SC2086
  timeout 400 gpubench run --suite "$s" --quick ${extra[$s]:-} --out "$runs/$s" --cluster "$label" >"$out/logs/$s.log" 2>&1
  rc=$?
  echo "$s rc=$rc wall=$(awk "BEGIN{printf \"%.1f\", $EPOCHREALTIME - $start}") s" | tee -a "$out/walls.txt"
done
python3 - "$runs" "$out" <<'PY'
import sys, pathlib
import pandas as pd
from gpubench import results
runs, out = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
frames = [results.load(d) for d in sorted(runs.glob("*/*/*")) if d.is_dir() and (d / "run.json").exists()]
df = pd.concat(frames, ignore_index=True)
df[["suite", "case", "metric", "unit", "status"]].astype(str).sort_values(["suite", "case", "metric"]).to_csv(
    out / "rows.tsv", sep="\t", index=False)
with open(out / "figures.txt", "w") as f:
    for suite, g in df.groupby("suite"):
        f.write(f"{suite}: {g['case'].nunique()} cases, rows by status {g.status.value_counts().to_dict()}\n")
        ok = g[g.status == "ok"]
        for metric, m in ok.groupby("metric"):
            f.write(f"  {metric} [{m.unit.iloc[0]}]: median of cases {m.value.median():.4g}, max {m.value.max():.4g}"
                    f", min {m.value.min():.4g} over {len(m)} rows\n")
print(open(out / "figures.txt").read())
PY
(cd "$runs" && tar czf "$out/runs.tgz" .) && (cd "$out" && tar czf logs.tgz logs && rm -r logs)
