"""Thresholds from the noise of one machine: several runs of the same build on it (A = A) show how far run
medians wander when nothing changed.

For each case and metric its own threshold: the relative spread of its run medians, (max − min) / median
(:func:`gpubench.timing.stats.run_spread`), times a safety factor (default 2), and at least a floor (default 1 %).
A case whose threshold would exceed ``max_threshold`` (default 25 %) is too noisy to gate at a useful level: it
is written as "not gated (run-to-run spread 40%)" and compare never calls it WORSE, instead of one noisy case
widening its whole suite (a per-suite maximum let one noisy case blind every other case of its suite).
The figures the host times are first moved to the runs' common host pace, where the runs draw a line of them on
it (gpubench.compare.pace), as compare judges them: their spread is then what compare sees, not the host's
moments (``host_pace=False``: as measured).
``gpubench compare --thresholds FILE`` reads the file :func:`write` makes.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from gpubench.results import destination as outputs
from gpubench.compare import cross, pace
from gpubench.compare.defaults import DEFAULT_FLOOR, DEFAULT_MAX_THRESHOLD, DEFAULT_SAFETY
from gpubench.compare.load import KEY, Side, is_run_dir, resolve, run_candidates
from gpubench.compare.thresholds import DEFAULT_THRESHOLD, NOT_GATED, Thresholds, dumps
from gpubench.errors import UsageError
from gpubench.timing.stats import run_spread



@dataclass
class Calibration:
    thresholds: Thresholds
    # per (suite, case, metric): threshold (NaN where not gated), spread, runs, gated
    detail: pd.DataFrame
    runs: list[Side]
    safety: float
    floor: float
    max_threshold: float = DEFAULT_MAX_THRESHOLD
    paced: int = 0  # host-timed figures whose spread was taken at the runs' common host pace


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


def _at_one_pace(sides: Sequence[Side]) -> int:
    """Every run's host-timed samples moved to the runs' common pace along each figure's line (its processes over
    all the runs); how many figures have a line."""
    found = pace.lines([s.raw for s in sides])
    for side in sides:
        side.raw = pace.apply(side.raw, found)
    return len(found)


def calibrate(sides: Sequence[Side], *, safety: float = DEFAULT_SAFETY, floor: float = DEFAULT_FLOOR,
              default: float = DEFAULT_THRESHOLD, max_threshold: float = DEFAULT_MAX_THRESHOLD,
              host_pace: bool = True) -> Calibration:
    if len(sides) < 2:
        raise UsageError("calibrate needs 2 or more runs of the same build on one machine (more is better: 5 "
                         "shows the noise far better than 2)")
    if not 0 < floor < 1:
        raise UsageError(f"--floor {floor}: give a fraction between 0 and 1, such as 0.01 for 1%")
    if not floor <= max_threshold < 1:
        raise UsageError(f"--max-threshold {max_threshold}: give a fraction between --floor ({floor:g}) and 1")
    if not safety >= 1:
        raise UsageError(f"--safety {safety}: give a factor of 1 or more")
    systems = [cross.system_of(s) for s in sides]
    for side, system in zip(sides[1:], systems[1:]):
        diff = cross.differences(systems[0], system)
        if diff:
            raise UsageError(f"{sides[0].label} and {side.label} ran on different systems ({'; '.join(diff)}): "
                             "calibrate from runs of one machine")
    paced = _at_one_pace(sides) if host_pace else 0
    medians = pd.concat([_run_medians(s) for s in sides], axis=1, keys=range(len(sides)))
    counts = medians.notna().sum(axis=1)
    medians = medians[counts >= 2]
    if medians.empty:
        raise UsageError("the runs share no figure measured ok in 2 or more of them: calibrate from runs of the "
                         "same suites and options")
    th = Thresholds(default=default)
    detail = []
    for key, row in medians.iterrows():
        suite, case, metric = (str(x) for x in key)
        spread = run_spread(row.dropna().to_list())
        if not np.isfinite(spread):
            continue
        value = round(max(floor, spread * safety), 4)
        gated = value <= max_threshold
        if gated:
            th.cases.setdefault((suite, case), {})[metric] = value
        else:
            th.ungated.setdefault((suite, case), {})[metric] = f"{NOT_GATED}: run-to-run spread {100 * spread:.0f}%"
        detail.append({"suite": suite, "case": case, "metric": metric, "threshold": value if gated else np.nan,
                       "spread": spread, "runs": int(row.notna().sum()), "gated": gated})
    return Calibration(th, pd.DataFrame(detail, columns=["suite", "case", "metric", "threshold", "spread", "runs",
                                                         "gated"]), list(sides), safety, floor, max_threshold,
                       paced)


def write(cal: Calibration, out: str | os.PathLike) -> Path:
    out = outputs.file(out)
    ids = [i for s in cal.runs for i in s.run_ids]
    header = (f"gpubench compare thresholds, written by gpubench calibrate from {len(cal.runs)} runs "
              f"({ids[0] if ids else '?'} … {ids[-1] if ids else '?'}).\n"
              f"Each case: the relative spread of its run medians × {cal.safety:g}, at least {cal.floor:g}; "
              f"above {cal.max_threshold:g}, not gated.\n"
              "Use: gpubench compare BASELINE CURRENT --thresholds THIS_FILE")
    notes = {(d["suite"], d["case"], d["metric"]): f"spread {100 * d['spread']:.2f}% over {d['runs']} runs"
             for d in cal.detail.to_dict("records") if d["gated"]}
    return outputs.write_text(out, dumps(cal.thresholds, header, notes))


__all__ = ["Calibration", "calibrate", "expand", "write", "DEFAULT_SAFETY", "DEFAULT_FLOOR", "DEFAULT_MAX_THRESHOLD"]
