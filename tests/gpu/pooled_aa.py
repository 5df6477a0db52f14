"""How often compare's window rule calls an unchanged figure measured in several processes WORSE, with the factor for
one process's draw and with the factor for a run that pools its processes (gpubench.compare.verdict):

    python tests/gpu/pooled_aa.py RUNS_DIR [RUNS_DIR ...] [--draws N] [--history H] [--per-figure]
                                  [--processes M] [--rule-from P] [--spreads]

Each RUNS_DIR: a series of runs of one command on one machine with nothing changed (A=A quick nights, a launch,copy
series). Runs on a CPU: nothing is measured.

For every time figure measured in 3 or more processes a run, N times: 5 runs of a series drawn as the window, a
sixth as tonight; the figures whose samples carry the host's pace are moved along the window's line first
(gpubench.timing.pace_line, as compare does), and only those with a line take the pooled factor, as in compare; tonight is
WORSE where its median is above the window's median of process medians by more than the threshold (5 %) and the
factor times the range of those process medians. It prints, for the figures moved to the pace and for the others,
how many draws were WORSE with either factor. The Mann-Whitney test compare also asks of the samples is left out:
these counts are the rule's alone, an upper bound.

It also counts, on the same draws, the rule on the window's five run medians alone ("runs": each run's samples
pooled, at the pace where there is a line; beyond the threshold and the single-draw factor for 5 values times their
range), and compare's rule as it stands ("compare": gpubench.compare.margin.window_margin, which takes the smaller
of the two where the runs pooled RUN_MEDIANS_FROM or more processes at the pace and the directory holds
RUN_MEDIANS_HISTORY runs or more), and that rule with one more run of the series as the nightly's rerun, WORSE only
where both are ("rerun too"). ``--history H``: each draw takes H runs (the window the last 5 of them) as the
directory's history, over which the line is fitted and whose spread compare's rule also reads, as compare does
with a directory's older runs; without it, the window alone (compare's rule is then the processes' rule).
``--per-figure`` prints, per figure, the median over its draws of the threshold the processes' rule, the runs'
rule and compare's set. ``--spreads`` prints instead, per figure, how far its run medians spread over the whole
series (max − min over the median), at a pace line fitted over all its runs where it has one, and as measured.
``--processes M`` keeps each run's first M processes, as if the runs had measured in M (each process with the
larger run's share of the sampling budget, so an approximation), and ``--rule-from P`` draws with the rule on run
medians serving runs of P processes or more (gpubench.compare.margin.RUN_MEDIANS_FROM), to see what that rule would
do for runs of fewer processes than it serves.
"""

import argparse
from pathlib import Path

import numpy as np

from gpubench.timing import pace_line as paceline
from gpubench.run import rows
from gpubench import results
from gpubench.compare import margin as margins
from gpubench.compare.margin import spread_factor, window_margin

WINDOW, THRESHOLD = 5, 0.05


def series(root: Path, keep: int = 0) -> dict[str, list[tuple]]:
    """Each figure's runs: (samples, process labels, paces or None); with ``keep``, each run's first ``keep``
    processes only."""
    out: dict[str, list[tuple]] = {}
    for run in sorted(p.parent for p in root.rglob("run.json")):
        df = results.load(run)
        df = df[(df["metric"] == "time") & (df["status"] == "ok")]
        for _, row in df.iterrows():
            s, lab = np.asarray(row["samples"], float), np.asarray(rows.labels(row))
            hp = row.get("host_pace")
            pace = np.asarray(hp, float) if hasattr(hp, "__len__") and len(hp) == len(s) else None
            if keep:
                kept = np.isin(lab, sorted(set(lab.tolist()))[:keep])
                s, lab, pace = s[kept], lab[kept], (pace[kept] if pace is not None else None)
            if len(set(lab.tolist())) < 3 or (s <= 0).any():
                continue
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


def pace_line(runs: list[tuple]):
    """The line of the figure's process medians over their processes' host pace in ``runs``, as compare fits it over
    a window (gpubench.timing.pace_line); None where its samples carry no pace."""
    if runs[0][2] is None:
        return None
    pts = [(float(np.median(p[lab == q])), float(np.median(s[lab == q])))
           for s, lab, p in runs for q in sorted(set(lab.tolist()))]
    return paceline.fit([a for a, _ in pts], [b for _, b in pts])


def spreads(root: Path, keep: int) -> None:
    """Each figure's range of run medians over the series, at the pace (one line over all runs) and as measured."""
    rows = []
    for name, runs in series(root, keep).items():
        line = pace_line(runs)
        at, raw = ([medians(*r, ln)[1] for r in runs] for ln in (line, None))
        rows.append(tuple((max(v) - min(v)) / float(np.median(v)) for v in (at, raw)) +
                    (line is not None, len(runs), name))
    print(f"{root}: range of the run medians, at the pace / as measured, runs")
    for at, raw, paced, n, name in sorted(rows):
        print(f"  {100 * at:6.1f} % {100 * raw:6.1f} %  {'paced' if paced else '     '} {n:3d}  {name}")


def draw(runs: list[tuple], rng, history: int = 0) -> dict:
    """One random draw: tonight's change against the window's median of process medians and the range of those
    (``k`` values), tonight's processes ``m``, whether it was moved to the pace, tonight's change against the
    window's run medians and their range, a rerun's change, and the directory's (``history`` runs, at least the
    window) process and run medians."""
    n = max(history, WINDOW)
    pick = rng.permutation(len(runs))[:n + 2]
    line = pace_line([runs[i] for i in pick[:n]])
    older = [medians(*runs[i], line) for i in pick[:n]]
    window = older[-WINDOW:]
    values = [v for procs, _ in window for v in procs]
    procs, tonight = medians(*runs[pick[n]], line)
    rerun = medians(*runs[pick[n + 1]], line)[1]
    pooled = [r for _, r in window]
    mid, run_mid = float(np.median(values)), float(np.median(pooled))
    return {"change": tonight / mid - 1, "spread": (max(values) - min(values)) / mid, "k": len(values),
            "m": len(procs), "paced": line is not None, "run_change": tonight / run_mid - 1,
            "run_spread": (max(pooled) - min(pooled)) / run_mid, "values": values, "medians": pooled,
            "rerun_change": rerun / mid - 1,
            "history_values": [v for p, _ in older for v in p], "history_medians": [r for _, r in older]}


def thresholds(d: dict) -> dict[str, float]:
    """The change each rule needs before it calls this draw WORSE."""
    k, m = d["k"], d["m"]
    pooled = spread_factor(k, window_runs=WINDOW, current_processes=m) if d["paced"] else spread_factor(k)
    # without --history the history is the window itself, which adds nothing to either rule
    margin = window_margin(d["values"], n_runs=WINDOW, pooled=m if d["paced"] else 1, moves="host-timed",
                           history_runs=d["history_values"], history_count=len(d["history_medians"]),
                           run_medians=d["medians"], history_medians=d["history_medians"])
    return {"one draw": max(THRESHOLD, spread_factor(k) * d["spread"]),
            "pooled": max(THRESHOLD, pooled * d["spread"]),
            "runs": max(THRESHOLD, spread_factor(WINDOW) * d["run_spread"]),
            "compare": max(THRESHOLD, margin.value)}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("dirs", nargs="+", type=Path)
    ap.add_argument("--draws", type=int, default=300)
    ap.add_argument("--per-figure", action="store_true")
    ap.add_argument("--history", type=int, default=0)
    ap.add_argument("--spreads", action="store_true")
    ap.add_argument("--processes", type=int, default=0, metavar="M")
    ap.add_argument("--rule-from", type=int, default=margins.RUN_MEDIANS_FROM, metavar="P")
    args = ap.parse_args()
    margins.RUN_MEDIANS_FROM = args.rule_from
    if args.spreads:
        for root in args.dirs:
            spreads(root, args.processes)
        return
    rng = np.random.default_rng(0)
    rules = ("one draw", "pooled", "runs", "compare", "rerun too")
    counts = {(paced, rule): [0, 0] for paced in (True, False) for rule in rules}
    figures: dict[str, dict[str, list[float]]] = {}
    for root in args.dirs:
        for name, runs in series(root, args.processes).items():
            if len(runs) < max(args.history, WINDOW) + 2:
                continue
            for _ in range(args.draws):
                d = draw(runs, rng, args.history)
                limits = thresholds(d)
                worse = {rule: (d["run_change"] if rule == "runs" else d["change"]) > limit
                         for rule, limit in limits.items()}
                # the nightly measures a WORSE case again and keeps it WORSE only if the rerun is too
                worse["rerun too"] = worse["compare"] and d["rerun_change"] > limits["compare"]
                for rule, hit in worse.items():
                    counts[(d["paced"], rule)][0] += 1
                    counts[(d["paced"], rule)][1] += hit
                for rule, limit in limits.items():
                    figures.setdefault(f"{root} {name}", {}).setdefault(rule, []).append(limit)
    for (paced, rule), (n, worse) in counts.items():
        if n:
            what = "figures moved to the pace" if paced else "the others"
            print(f"{what:28s} {rule:9s}: {worse} WORSE of {n} draws ({100 * worse / n:.2f} %)")
    if args.per_figure:
        print("median threshold over the draws, %: the processes' rule (pooled where moved to the pace) / the runs' "
              "rule / compare's")
        for name, limits in figures.items():
            print(f"  {100 * np.median(limits['pooled']):6.1f} / {100 * np.median(limits['runs']):6.1f} / "
                  f"{100 * np.median(limits['compare']):6.1f}  {name}")


if __name__ == "__main__":
    main()
