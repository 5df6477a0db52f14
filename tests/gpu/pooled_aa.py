"""How often compare's window rule calls an unchanged figure measured in several processes WORSE, with the factor for
one process's draw and with the factor for a run that pools its processes (gpubench.compare.verdict):

    python tests/gpu/pooled_aa.py RUNS_DIR [RUNS_DIR ...] [--draws N]

Each RUNS_DIR: a series of runs of one command on one machine with nothing changed (A=A quick nights, a launch,copy
series). Runs on a CPU: nothing is measured.

For every time figure measured in 3 or more processes a run, N times: 5 runs of a series drawn as the window, a
sixth as tonight; the figures whose samples carry the host's pace are moved along the window's line first
(gpubench.paceline, as compare does), and only those with a line take the pooled factor, as in compare; tonight is
WORSE where its median is above the window's median of process medians by more than the threshold (5 %) and the
factor times the range of those process medians. It prints, for the figures moved to the pace and for the others,
how many draws were WORSE with either factor. The Mann-Whitney test compare also asks of the samples is left out:
these counts are the rule's alone, an upper bound.
"""

import argparse
from pathlib import Path

import numpy as np

from gpubench import paceline, processes, results
from gpubench.compare.verdict import spread_factor

WINDOW, THRESHOLD = 5, 0.05


def series(root: Path) -> dict[str, list[tuple]]:
    """Each figure's runs: (samples, process labels, paces or None)."""
    out: dict[str, list[tuple]] = {}
    for run in sorted(p.parent for p in root.rglob("run.json")):
        df = results.load(run)
        df = df[(df["metric"] == "time") & (df["status"] == "ok")]
        for _, row in df.iterrows():
            s, lab = np.asarray(row["samples"], float), np.asarray(processes.labels(row))
            if len(set(lab.tolist())) < 3 or (s <= 0).any():
                continue
            hp = row.get("host_pace")
            pace = np.asarray(hp, float) if hasattr(hp, "__len__") and len(hp) == len(s) else None
            out.setdefault(f"{row['suite']} {row['case']}", []).append((s, lab, pace))
    return out


def medians(s, lab, pace, line) -> tuple[list[float], float]:
    """A run's process medians and its pooled median, moved along ``line`` where there is one."""
    procs = sorted(set(lab.tolist()))
    if line is not None:
        s = s.copy()
        for q in procs:
            s[lab == q] *= line.factor(float(np.median(pace[lab == q])))
    return [float(np.median(s[lab == q])) for q in procs], float(np.median(s))


def draw(runs: list[tuple], rng) -> tuple[float, float, int, int, bool]:
    """(tonight's change, the window's range, values, tonight's processes, paced) for one random draw."""
    pick = rng.permutation(len(runs))[:WINDOW + 1]
    line = None
    if runs[0][2] is not None:
        pts = [(float(np.median(p[lab == q])), float(np.median(s[lab == q])))
               for s, lab, p in (runs[i] for i in pick[:WINDOW]) for q in sorted(set(lab.tolist()))]
        line = paceline.fit([a for a, _ in pts], [b for _, b in pts])
    values = [v for i in pick[:WINDOW] for v in medians(*runs[i], line)[0]]
    procs, tonight = medians(*runs[pick[WINDOW]], line)
    mid = float(np.median(values))
    return tonight / mid - 1, (max(values) - min(values)) / mid, len(values), len(procs), line is not None


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("dirs", nargs="+", type=Path)
    ap.add_argument("--draws", type=int, default=300)
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    counts = {(paced, rule): [0, 0] for paced in (True, False) for rule in ("one draw", "pooled")}
    for root in args.dirs:
        for runs in series(root).values():
            if len(runs) < WINDOW + 1:
                continue
            for _ in range(args.draws):
                change, spread, k, m, paced = draw(runs, rng)
                pooled = spread_factor(k, window_runs=WINDOW, current_processes=m) if paced else spread_factor(k)
                for rule, factor in (("one draw", spread_factor(k)), ("pooled", pooled)):
                    counts[(paced, rule)][0] += 1
                    counts[(paced, rule)][1] += change > max(THRESHOLD, factor * spread)
    for (paced, rule), (n, worse) in counts.items():
        if n:
            what = "figures moved to the pace" if paced else "the others"
            print(f"{what:28s} {rule:8s}: {worse} WORSE of {n} draws ({100 * worse / n:.2f} %)")


if __name__ == "__main__":
    main()
