"""Whether a figure's level is drawn per process, and what measuring it in more processes would do to the gate:

    python tests/gpu/process_levels.py RUNS_DIR [--bootstrap REGEX] [--draws N]

RUNS_DIR: a directory of runs of one command on one machine (each run a folder of tables), such as a series of
`gpubench run --suite launch,copy --quick`. Runs on a CPU: nothing is measured.

For each figure measured in three or more processes a run, it prints how far its process medians (logs) move
within a run and how far the runs' means of them move: if the processes of a run drew their levels
independently, the runs' means would move by the within-run spread / sqrt(processes) (F near 1, intra-run
correlation near 0); processes that share a state of the machine lasting longer than a run give F well above 1.

With --bootstrap, for each figure measured in one process whose case matches REGEX, it takes each run's samples
as one process's draw and judges, through compare's own rule (gpubench.compare.verdict.judge), a window of 5 runs
against a new run, both made of 1 or of 3 such draws a run: how often an unchanged figure is WORSE, and how often
one 10 % and 15 % slower is. It assumes what F near 1 says of the measured ones: each process draws its level.
"""

import argparse
import re
from pathlib import Path

import numpy as np
import pandas as pd

from gpubench.run import rows
from gpubench import results
from gpubench.compare.verdict import judge


def load(root: Path) -> pd.DataFrame:
    frames = []
    for run in sorted(p.parent for p in root.rglob("run.json")):
        df = results.load(run)
        frames.append(df[(df["metric"] == "time") & (df["status"] == "ok")].assign(run=run.name))
    return pd.concat(frames, ignore_index=True)


def process_medians(row) -> list[float]:
    samples, labels = np.asarray(row["samples"], float), np.asarray(rows.labels(row))
    return [float(np.median(samples[labels == p])) for p in sorted(set(labels.tolist()))]


def levels(df: pd.DataFrame) -> None:
    print(f"{'case':74s} runs  within  run means     F   corr")
    out = []
    for case, g in df.groupby("case"):
        per_run = [m[:3] for m in (process_medians(r) for _, r in g.iterrows()) if len(m) >= 3 and min(m) > 0]
        if len(per_run) < 10:
            continue
        logs = np.log(np.asarray(per_run))
        within = float(np.mean(np.var(logs, axis=1, ddof=1)))
        between = float(np.var(logs.mean(axis=1), ddof=1))
        f = between / (within / 3) if within > 0 else float("nan")
        corr = (between - within / 3) / (between - within / 3 + within) if within > 0 else float("nan")
        out.append((f, f"{case[:74]:74s} {len(logs):4d} {100 * within ** 0.5:6.1f}% {100 * between ** 0.5:8.1f}% "
                       f"{f:6.1f} {corr:6.2f}"))
    for _, line in sorted(out, reverse=True):
        print(line)


def bootstrap(df: pd.DataFrame, pattern: str, draws: int, seed: int = 1) -> None:
    rng = np.random.default_rng(seed)
    print(f"\n{'case':50s} processes  WORSE: unchanged  +10 %  +15 %   ({draws} draws each)")
    for case, g in df.groupby("case"):
        if not re.search(pattern, case) or (g["processes"] > 1).any():
            continue
        pool = [np.asarray(s, float) for s in g["samples"] if len(s)]
        for procs in (1, 3):
            rates = []
            for scale in (1.0, 1.10, 1.15):
                worse = 0
                for _ in range(draws):
                    window = [pool[j] for j in rng.integers(0, len(pool), 5 * procs)]
                    now = [pool[j] * scale for j in rng.integers(0, len(pool), procs)]
                    verdict = judge(np.concatenate(window), np.concatenate(now), "lower", 0.05,
                                    baseline_runs=[float(np.median(w)) for w in window],
                                    per_run_n=min(len(w) for w in window), window=True, run_count=5)["verdict"]
                    worse += verdict == "WORSE"
                rates.append(100 * worse / draws)
            print(f"{case[:50]:50s} {procs:9d}  {rates[0]:15.1f}% {rates[1]:5.0f}% {rates[2]:5.0f}%")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("runs", type=Path)
    ap.add_argument("--bootstrap", metavar="REGEX", help="one-process cases to resample")
    ap.add_argument("--draws", type=int, default=1000)
    args = ap.parse_args()
    df = load(args.runs)
    print(f"{df['run'].nunique()} runs under {args.runs}")
    levels(df)
    if args.bootstrap:
        bootstrap(df, args.bootstrap, args.draws)


if __name__ == "__main__":
    main()
