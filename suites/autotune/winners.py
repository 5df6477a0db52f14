"""The best configuration per (collective, size, dtype, op, placement), held against the environment's own.

The sweep runs the default configuration :data:`~gpubench.suites.autotune.knobs.DEFAULT_RUNS` times, spread through
it: how far those runs disagree is the noise the sweep measured. A winner is "beyond noise" where compare would
call its run BETTER against that window of default runs (:func:`gpubench.compare.verdict.judge`): a gain of at least
compare's threshold, beyond the default runs' spread times compare's factor for so few runs, and beyond noise by the
rank test on the samples; and neither side is flagged ``noisy`` (CV over the engine's target). A rank test between
one run of each is no evidence alone: runs differ by their processes' levels (on the fake device, a slow first run
of the default made a configuration that changes nothing read 1.25x at p = 0.004). A winner that is not beyond noise
is reported as such, and the exports keep NCCL's own choice there (a draw is no reason to pin a setting).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from gpubench.toolkit.results import BETTER, DEFAULT_ALPHA, DEFAULT_THRESHOLD, MIN_RUNS, SAME, judge, set_by_host
from gpubench.suites.autotune.knobs import DEFAULT
from gpubench.suites.comm import table as commtable

METRIC = "busbw"
ALPHA = DEFAULT_ALPHA
THRESHOLD = DEFAULT_THRESHOLD
KEY = ("collective", "bytes", "dtype", "op", "inplace")
COLUMNS = (*KEY, "default_busbw", "default_runs", "winner", "winner_busbw", "speedup", "p_value", "noisy",
           "beyond_noise", "note", "configs")


def _usable(df: pd.DataFrame) -> pd.DataFrame:
    ok = df[(df["metric"] == METRIC) & (df["status"] == "ok")]
    if "valid" in ok.columns:
        ok = ok[ok["valid"].fillna(True).astype(bool)]  # a config that corrupts data never wins
    return ok


def table(df: pd.DataFrame, alpha: float = ALPHA, threshold: float = THRESHOLD) -> pd.DataFrame:
    """One row per case measured under the default configuration, in the table's order."""
    rows = []
    for key, group in _usable(df).groupby(list(KEY), sort=False, dropna=False):
        base = group[group["config"] == DEFAULT]
        if base.empty:
            continue  # nothing to hold a winner against
        rows.append({**dict(zip(KEY, key)), **_winner(base, group[group["config"] != DEFAULT], alpha, threshold),
                     "configs": int(group["config"].nunique())})
    return pd.DataFrame(rows, columns=list(COLUMNS))


def _winner(base: pd.DataFrame, others: pd.DataFrame, alpha: float, threshold: float) -> dict[str, Any]:
    """The fastest other configuration against the default's runs (``base``, one row per run) of one case."""
    default = float(np.median(base["value"].astype(float)))
    out = {"default_busbw": default, "default_runs": len(base), "winner": DEFAULT, "winner_busbw": default,
           "speedup": 1.0, "p_value": math.nan, "noisy": any(_noisy(r) for _, r in base.iterrows()),
           "beyond_noise": False, "note": ""}
    best = others.loc[others["value"].astype(float).idxmax()] if len(others) else None
    if best is None or not float(best["value"]) > default:
        return out
    verdict = _judge(base, best, alpha, threshold)
    noisy = out["noisy"] or _noisy(best)
    note = verdict["note"]
    if verdict["verdict"] == SAME:
        note = f"under compare's {100 * threshold:g}% threshold"
    elif verdict["verdict"] == BETTER and noisy:
        note = "a noisy row (CV over the engine's target) is no evidence"
    out.update(winner=best["config"], winner_busbw=float(best["value"]), speedup=float(best["value"]) / default
               if default else math.nan, p_value=verdict["p_value"], noisy=noisy,
               beyond_noise=verdict["verdict"] == BETTER and not noisy, note=note)
    return out


def _judge(base: pd.DataFrame, best: pd.Series, alpha: float, threshold: float) -> dict[str, Any]:
    """compare's verdict on ``best``'s run against the window of the default's runs."""
    if len(base) < MIN_RUNS:
        return {"verdict": None, "p_value": math.nan,
                "note": f"the default measured {len(base)} time(s) here: its run-to-run noise needs {MIN_RUNS} runs"}
    runs = [[float(v) for v in s] for s in base["samples"]]
    return judge([v for s in runs for v in s], [float(v) for v in best["samples"]], "higher", threshold, alpha,
                 baseline_runs=list(base["value"].astype(float)), per_run_n=min(len(s) for s in runs),
                 moves=set_by_host(best) or set_by_host(base.iloc[0]), window=True)


def _noisy(row: pd.Series) -> bool:
    """The engine's flag (CV over its target); a table from before the flag existed counts as quiet."""
    flag = row.get("noisy", False)
    return False if pd.isna(flag) else bool(flag)


@dataclass(frozen=True)
class Best:
    """The one configuration to run everything with: ``score``, its geometric mean of busbw relative to the
    default; ``beyond_noise``, whether that gain is beyond what the default's own runs disagree by; ``note``, why."""

    name: str
    score: float
    beyond_noise: bool
    note: str


def best_single(df: pd.DataFrame, alpha: float = ALPHA, threshold: float = THRESHOLD) -> Best | None:
    """The configuration valid on every case the default ran with the highest geometric mean of busbw relative to
    the default (the median of its runs), over the cases where no default figure is noisy (all cases if every one
    is), judged as one figure: each default run's own mean is one run of it. None without a default."""
    ok = _usable(df)
    defaults = ok[ok["config"] == DEFAULT]
    runs = _default_runs(defaults)
    if runs.empty:
        return None
    base = runs.median(axis=1)
    noisy = {tuple(r[k] for k in KEY) for _, r in defaults.iterrows() if _noisy(r)}
    quiet = base.index[[k not in noisy for k in base.index]]
    judged = quiet if len(quiet) else base.index
    scores = {}
    for name, rows in ok[ok["config"] != DEFAULT].groupby("config", sort=False):
        mine = rows.set_index(list(KEY))["value"].astype(float)
        if len(base.index.intersection(mine.index)) < len(base):
            continue  # failed or corrupted somewhere the default ran: not a config to apply everywhere
        scores[name] = _geomean(mine[judged] / base[judged])
    name = max(scores, key=scores.get) if scores else DEFAULT
    if name == DEFAULT or scores[name] <= 1.0:
        return Best(DEFAULT, 1.0, False, "no configuration read above the default")
    own = [_geomean(runs[r][judged] / base[judged]) for r in runs.columns if runs[r][judged].notna().all()]
    if len(own) < MIN_RUNS:
        return Best(name, scores[name], False, f"the default measured every case {len(own)} time(s): its "
                                               f"run-to-run noise needs {MIN_RUNS} runs")
    v = judge([], [], "higher", threshold, alpha, baseline_value=1.0, current_value=scores[name], baseline_runs=own,
              window=True)
    why = (f"the default's own {len(own)} runs spread {100 * v['run_spread']:.1f}% on this mean: a gain must pass "
           f"{100 * v['catches']:.1f}% to be more than noise")
    return Best(name, scores[name], v["verdict"] == BETTER, why)


def _default_runs(rows: pd.DataFrame) -> pd.DataFrame:
    """The default's figures, one column per run (its child run's directory; in older tables the order of its rows
    per case), one row per case."""
    run = rows["config_run"] if "config_run" in rows.columns and rows["config_run"].notna().all() else \
        rows.groupby(list(KEY), sort=False, dropna=False).cumcount()
    return rows.assign(_run=run.values).pivot_table(index=list(KEY), columns="_run", values="value", aggfunc="first",
                                                    sort=False).astype(float)


def _geomean(ratios: pd.Series) -> float:
    return float(np.exp(np.mean(np.log(ratios.astype(float)))))


def tuner_collective(name: str) -> str | None:
    """The example tuner's collective word (allreduce, allgather, ...); None for those it cannot tune."""
    return {"all_reduce": "allreduce", "all_gather": "allgather", "reduce_scatter": "reducescatter",
            "broadcast": "broadcast", "reduce": "reduce"}.get(name)


assert set(KEY) <= set(commtable.PARAMS)
__all__ = ["table", "best_single", "Best", "tuner_collective", "COLUMNS", "ALPHA", "THRESHOLD"]
