"""Thresholds from the noise of one machine: several runs of the same build on it (A = A) show how far run
medians wander when nothing changed.

For each (suite, metric): the largest, over its cases, relative spread of the run medians,
(max − min) / median, times a safety factor (default 2), and at least a floor (default 1 %). Gates are then
tight where the hardware is quiet and loose where it is not; ``gpubench compare --thresholds FILE`` reads the
file :func:`write` makes.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from gpubench.compare import cross
from gpubench.compare.load import KEY, Side, is_run_dir, resolve, run_candidates
from gpubench.compare.thresholds import DEFAULT_THRESHOLD, Thresholds, dumps
from gpubench.errors import UsageError

DEFAULT_SAFETY = 2.0
DEFAULT_FLOOR = 0.01


@dataclass
class Calibration:
    thresholds: Thresholds
    detail: pd.DataFrame  # per (suite, metric): threshold, spread, the case that set it, figures, runs
    runs: list[Side]
    safety: float
    floor: float


def expand(paths: Sequence[str | os.PathLike]) -> list[Side]:
    """Each path a run directory or table, or a directory of runs (all its complete runs)."""
    sides = []
    for path in paths:
        p = Path(path)
        if p.is_dir() and not is_run_dir(p):
            found = run_candidates(p)
            if not found:
                raise UsageError(f"{p} holds no complete run directory")
            sides += [resolve(c[1]) for c in found]
        else:
            sides.append(resolve(p))
    return sides


def _run_medians(side: Side) -> pd.Series:
    """Median of each ok figure of one run (rows of several devices pooled)."""
    pooled = side.pooled()
    ok = pooled[pooled["status"] == "ok"]
    values = pd.to_numeric(ok["value"], errors="coerce")
    keep = np.isfinite(values.to_numpy(dtype=float))
    return pd.Series(values[keep].to_numpy(dtype=float), index=pd.MultiIndex.from_frame(ok.loc[keep, list(KEY)]))


def calibrate(sides: Sequence[Side], *, safety: float = DEFAULT_SAFETY, floor: float = DEFAULT_FLOOR,
              default: float = DEFAULT_THRESHOLD) -> Calibration:
    if len(sides) < 2:
        raise UsageError("calibrate needs 2 or more runs of the same build on one machine (more is better: 5 "
                         "shows the noise far better than 2)")
    if not 0 < floor < 1:
        raise UsageError(f"--floor {floor}: give a fraction between 0 and 1, such as 0.01 for 1%")
    if not safety >= 1:
        raise UsageError(f"--safety {safety}: give a factor of 1 or more")
    systems = [cross.system_of(s) for s in sides]
    for side, system in zip(sides[1:], systems[1:]):
        diff = cross.differences(systems[0], system)
        if diff:
            raise UsageError(f"{sides[0].label} and {side.label} ran on different systems ({'; '.join(diff)}): "
                             "calibrate from runs of one machine")
    medians = pd.concat([_run_medians(s) for s in sides], axis=1, keys=range(len(sides)))
    counts = medians.notna().sum(axis=1)
    medians = medians[counts >= 2]
    if medians.empty:
        raise UsageError("the runs share no figure measured ok in 2 or more of them: calibrate from runs of the "
                         "same suites and options")
    arr = medians.to_numpy(dtype=float)
    center = np.nanmedian(arr, axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        spread = (np.nanmax(arr, axis=1) - np.nanmin(arr, axis=1)) / np.abs(center)
    table = pd.DataFrame({"suite": medians.index.get_level_values("suite"),
                          "case": medians.index.get_level_values("case"),
                          "metric": medians.index.get_level_values("metric"),
                          "spread": spread, "runs": medians.notna().sum(axis=1).to_numpy()})
    table = table[np.isfinite(table["spread"])]
    th = Thresholds(default=default)
    detail = []
    for (suite, metric), g in table.groupby(["suite", "metric"], sort=True):
        worst = g.loc[g["spread"].idxmax()]
        value = max(floor, float(worst["spread"]) * safety)
        value = min(value, 0.99)  # a threshold file holds fractions below 1
        th.suites.setdefault(str(suite), {})[str(metric)] = round(value, 4)
        detail.append({"suite": suite, "metric": metric, "threshold": round(value, 4),
                       "spread": float(worst["spread"]), "case": worst["case"], "figures": len(g),
                       "runs": int(g["runs"].max())})
    return Calibration(th, pd.DataFrame(detail), list(sides), safety, floor)


def write(cal: Calibration, out: str | os.PathLike) -> Path:
    out = Path(out)
    if not out.parent.is_dir():
        raise UsageError(f"{out.parent} does not exist: give --out a file in an existing directory")
    ids = [i for s in cal.runs for i in s.run_ids]
    header = (f"gpubench compare thresholds, written by gpubench calibrate from {len(cal.runs)} runs "
              f"({ids[0] if ids else '?'} … {ids[-1] if ids else '?'}).\n"
              f"Each: max over cases of the relative spread of run medians × {cal.safety:g}, at least {cal.floor:g}.\n"
              "Use: gpubench compare BASELINE CURRENT --thresholds THIS_FILE")
    notes = {(d["suite"], d["metric"]): f"spread {100 * d['spread']:.2f}% at {d['case']}"
             for d in cal.detail.to_dict("records")}
    out.write_text(dumps(cal.thresholds, header, notes))
    return out


__all__ = ["Calibration", "calibrate", "expand", "write", "DEFAULT_SAFETY", "DEFAULT_FLOOR"]
