"""A series of runs replayed through compare, each run from the sixth on against the five before it, with compare's
rules as they stand and with the rule on the window's run medians out of reach (gpubench.compare.margin
.RUN_MEDIANS_FROM), to see what that rule changes:

    python tests/gpu/window_rule.py SERIES_DIR [--slow X]

SERIES_DIR: a directory of runs of one command on one machine with nothing changed (``results/<cluster>/`` of
``gpubench run --out``). Per judged run and rule: the verdict counts, how many figures the host sets catch 15 % or
less, how many are blind (> 25 %), and how many the GPU times catch 5 % or less (and, as built, which do not); the
WORSE figures under it (on an A=A series, false alarms before the nightly's rerun). ``--slow X``: each judged run is
first copied with the times of its launch figures the host sets made 1 + X slower (the host's pace left as measured:
the launch itself got slower, not the host), and it prints how many of those figures were WORSE, and how many of
those that said they catch X or less. Runs on a CPU: nothing is measured.
"""

import argparse
import shutil
import tempfile
from collections import Counter
from pathlib import Path

import numpy as np

from gpubench import results
from gpubench.compare import margin, comparison as report, sensitivity, verdict
from gpubench.results.host_set import disturbed_by_load

WINDOW = 5


def slowed(run: Path, x: float, into: Path) -> Path:
    """A copy of ``run`` whose launch figures the host sets read 1 + ``x`` times the time."""
    dst = into / run.name
    shutil.rmtree(dst, ignore_errors=True)
    shutil.copytree(run, dst)
    table = dst / "launch.parquet"
    df = results.load_table(table)
    host = np.array([bool(disturbed_by_load(r)) for r in df.to_dict("records")], dtype=bool)
    sel = (df["metric"] == "time").to_numpy() & host
    df.loc[sel, "samples"] = df.loc[sel, "samples"].apply(lambda s: [v * (1 + x) for v in s])
    df.loc[sel, "value"] = df.loc[sel, "value"] * (1 + x)
    results.save(df, table)
    return dst


def judged(series: Path, run: Path) -> list[dict]:
    rows = report.build(series, run, window=WINDOW).rows
    return [r for r in rows.to_dict("records") if r["status"] == verdict.COMPARED]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("series", type=Path)
    ap.add_argument("--slow", type=float, default=None)
    args = ap.parse_args()
    runs = sorted(p.parent for p in args.series.glob("*/run.json"))
    rule = margin.RUN_MEDIANS_FROM
    totals: dict[str, Counter] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for run in runs[WINDOW:]:
            tonight = slowed(run, args.slow, Path(tmp)) if args.slow is not None else run
            for name, value in (("as built", rule), ("without the run-median rule", 10**6)):
                margin.RUN_MEDIANS_FROM = value
                rows = judged(args.series, tonight)
                host = [r for r in rows if r.get("set_by_host")]
                summary = sensitivity.summary(rows)  # compare's own counts by kind, as its "catches:" line says
                within = summary["host"]["within_goal"]
                blind = sum(not r["catches"] <= sensitivity.BLIND for r in host)
                past = sorted((r for r in rows if not r.get("set_by_host") and
                               not r["catches"] <= sensitivity.GOAL_GPU + 1e-12), key=lambda r: -r["catches"])
                counts = Counter(r["verdict"] for r in rows)
                print(f"{run.name} {name:28s} {dict(counts)}; host-set ≤ 15 %: {within} of {len(host)}, "
                      f"blind {blind}; GPU-timed ≤ 5 %: {summary['gpu']['within_goal']} of "
                      f"{summary['gpu']['figures']}")
                if name == "as built":
                    print("    GPU-timed past 5 %: " + "; ".join(
                        f"{r['case']} {r['metric']} {100 * r['catches']:.1f}" for r in past))
                t = totals.setdefault(name, Counter())
                for r in rows:
                    slow = args.slow is not None and r["suite"] == "launch" and r["metric"] == "time" and \
                        r.get("set_by_host")
                    if slow:
                        t["slowed"] += 1
                        t["slowed WORSE"] += r["verdict"] == verdict.WORSE
                        said = r["catches"] <= args.slow - 0.005
                        t["said they catch it"] += said
                        t["said so and WORSE"] += said and r["verdict"] == verdict.WORSE
                    elif r["verdict"] == verdict.WORSE:
                        t["WORSE"] += 1
                        print(f"    WORSE {r['suite']} {r['case']} {r['metric']} {100 * r['change']:+.1f}%")
                t["runs"] += 1
                t["host-set within 15 %"] += within
                t["host-set"] += len(host)
    margin.RUN_MEDIANS_FROM = rule
    for name, t in totals.items():
        print(f"{name}: {dict(t)}")


if __name__ == "__main__":
    main()
