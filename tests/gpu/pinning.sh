#!/usr/bin/env bash
# Which pinning holds the figures the host sets steadiest from run to run (issue 47), on one GPU:
#   bash tests/gpu/pinning.sh OUT [ROUNDS]
# Runs launch and copy --quick, only their cases set per process (host-timed launches, the eager chain, copies to
# and from host memory), once per configuration per round, the configurations interleaved so that a drift of the
# host falls on all of them: CONFIGS (default "off node core") are GPUBENCH_PIN modes, each optionally
# @N for --processes N ("core@5"). Then, per figure and configuration, the run-to-run spread, (max - min) /
# median of the run medians (what compare's window judges against), and the spread of every process's median;
# OUT/spread.tsv holds them, OUT/summary.txt the count of figures within 10 % and the median spread per
# configuration, and OUT/runs.tgz the run directories. ROUNDS (default 3) runs of each; DEADLINE_S (default 420)
# starts no run after that many seconds, so that one device call of 8 minutes holds it. RUN_ARGS: more `gpubench
# run` arguments (SETUP=0 RUN_ARGS="--backend fake" tries the script on a machine without a GPU).
set -u -o pipefail
out=${1:?OUT}; rounds=${2:-3}
configs=${CONFIGS:-off node core}
deadline=${DEADLINE_S:-420}
read -r -a run_args <<< "${RUN_ARGS:-}"
[[ ${SETUP:-1} != 0 ]] && source tests/gpu/setup.sh
nvidia-smi topo -m 2>/dev/null | head -4; lscpu | grep -i -E "numa|^cpu\(s\)|model name"
mkdir -p "$out"
res=$(mktemp -d)
# graph_launch's fits (graph_launch_fixed) and the chain's speedup are derived from these; chain_graph is the
# speedup's other half
cases='measure=(host_launch|graph_launch|sync_roundtrip|event_roundtrip|chain_eager|chain_graph),|memory=(pinned|pageable|registered),'
for i in $(seq "$rounds"); do
  for cfg in $configs; do
    if [[ $SECONDS -ge $deadline ]]; then
      echo "round $i $cfg: not started (past DEADLINE_S=$deadline)"; continue
    fi
    mode=${cfg%@*}; procs=3; [[ $cfg == *@* ]] && procs=${cfg#*@}
    start=$SECONDS
    GPUBENCH_PIN=$mode gpubench run --suite launch,copy --quick --filter "$cases" --processes "$procs" \
      --out "$res/$cfg" --cluster pin "${run_args[@]}" > "$out/run-$cfg-$i.log" 2>&1
    echo "round $i $cfg: rc=$? $((SECONDS - start)) s"
  done
done | tee "$out/runs.txt"

python3 - "$res" "$out" <<'EOF'
import sys
from pathlib import Path

import numpy as np
import pandas as pd

from gpubench import results
from gpubench.results.host_set import set_by_host

res, out = Path(sys.argv[1]), Path(sys.argv[2])
rows = []
for cfg_dir in sorted(res.iterdir()):
    for run in sorted((cfg_dir / "pin").iterdir()):
        df = results.load(run)
        pin = (df.attrs.get("run", {}).get("processes") or {}).get("pinning")
        for r in df[df["status"] == "ok"].to_dict("records"):
            if not set_by_host(r) or not len(r["samples"]):
                continue
            labels = r["sample_process"] if len(r["sample_process"]) == len(r["samples"]) else [0] * len(r["samples"])
            per = pd.Series(r["samples"]).groupby(labels).median()
            rows.append({"config": cfg_dir.name, "pinned": (pin or {}).get("cpus"), "run": run.name,
                         "figure": f"{r['suite']} {r['case']} {r['metric']}", "run_median": float(np.median(r["samples"])),
                         "process_medians": list(per)})
t = pd.DataFrame(rows)
if t.empty:
    sys.exit("no run finished: see the logs")


def spread(v):
    v = np.asarray(v, dtype=float)
    return float((v.max() - v.min()) / np.median(v)) if len(v) > 1 else np.nan


g = t.groupby(["figure", "config"])
table = pd.DataFrame({"runs": g.size(), "run_spread": g["run_median"].apply(spread),
                      "process_spread": g["process_medians"].apply(lambda s: spread([x for v in s for x in v]))})
table.reset_index().to_csv(out / "spread.tsv", sep="\t", index=False, float_format="%.4f")
wide = table["run_spread"].unstack("config")
with open(out / "summary.txt", "w") as f:
    for cfg in wide.columns:
        col = wide[cfg].dropna()
        line = (f"{cfg}: {int((col <= 0.10).sum())} of {len(col)} figures within 10 % run to run; median spread "
                f"{100 * col.median():.1f} %, worst {100 * col.max():.1f} % ({col.idxmax()}); "
                f"pinned to {t.loc[t['config'] == cfg, 'pinned'].iloc[0]}")
        print(line)
        f.write(line + "\n")
print((100 * wide).round(1).to_string())
EOF
(cd "$res" && find . \( -name '*.parquet' -o -name '*.json' \) | tar czf "$out/runs.tgz" -T -)
