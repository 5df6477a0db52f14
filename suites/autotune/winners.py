"""The best configuration per (collective, size, dtype, op, placement), held against the environment's own.

"Beyond noise" is compare's test: the winner's busbw samples and the default's differ by a Mann-Whitney rank test
at ``alpha``, and neither row is flagged ``noisy`` (CV over the engine's target). A rank test on noisy samples is
no evidence: on 2 × H200 (2026-11-23) eager 1-4 MiB rows had CVs of 20-36 % and a rerun of the same
configuration read 0.76-1.61 × the sweep's figure, while the rank test called several of those "wins" significant.
A winner that is not beyond noise is reported as such, and the exports keep NCCL's own choice there (a tie is no
reason to pin a setting).
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from gpubench.suites.comm import table as commtable
from gpubench.suites.autotune.knobs import DEFAULT
from gpubench.stats import mann_whitney

METRIC = "busbw"
ALPHA = 0.01
KEY = ("collective", "bytes", "dtype", "op", "inplace")
COLUMNS = (*KEY, "default_busbw", "winner", "winner_busbw", "speedup", "p_value", "noisy", "beyond_noise", "configs")


def _usable(df: pd.DataFrame) -> pd.DataFrame:
    ok = df[(df["metric"] == METRIC) & (df["status"] == "ok")]
    if "valid" in ok.columns:
        ok = ok[ok["valid"].fillna(True).astype(bool)]  # a config that corrupts data never wins
    return ok


def table(df: pd.DataFrame, alpha: float = ALPHA) -> pd.DataFrame:
    """One row per case measured under the default configuration, in the table's order."""
    rows = []
    ok = _usable(df)
    for key, group in ok.groupby(list(KEY), sort=False, dropna=False):
        base = group[group["config"] == DEFAULT]
        if base.empty:
            continue  # nothing to hold a winner against
        base_row = base.iloc[0]
        best = group.loc[group["value"].astype(float).idxmax()]
        speedup = float(best["value"]) / float(base_row["value"]) if base_row["value"] else math.nan
        if best["config"] == DEFAULT:
            p = math.nan
        else:
            _, p = mann_whitney(list(best["samples"]), list(base_row["samples"]))
        noisy = _noisy(best) or _noisy(base_row)
        rows.append({
            **dict(zip(KEY, key)),
            "default_busbw": float(base_row["value"]),
            "winner": best["config"],
            "winner_busbw": float(best["value"]),
            "speedup": speedup,
            "p_value": p,
            "noisy": noisy,
            "beyond_noise": bool(best["config"] != DEFAULT and speedup > 1 and p < alpha and not noisy),
            "configs": int(group["config"].nunique()),
        })
    return pd.DataFrame(rows, columns=list(COLUMNS))


def _noisy(row: pd.Series) -> bool:
    """The engine's flag (CV over its target); a table from before the flag existed counts as quiet."""
    flag = row.get("noisy", False)
    return False if pd.isna(flag) else bool(flag)


def best_single(df: pd.DataFrame) -> tuple[str, float] | None:
    """The one configuration to run everything with: valid on every case the default ran, with the highest
    geometric mean of busbw relative to the default over the cases where the default's figure is not noisy (all
    cases if every one is). (name, that mean); None without a default."""
    ok = _usable(df)
    base_rows = ok[ok["config"] == DEFAULT].set_index(list(KEY))
    if base_rows.empty:
        return None
    base = base_rows["value"].astype(float)
    quiet = base_rows.index[[not _noisy(r) for _, r in base_rows.iterrows()]]
    judged = quiet if len(quiet) else base.index
    scores = {}
    for name, rows in ok.groupby("config", sort=False):
        mine = rows.set_index(list(KEY))["value"].astype(float)
        if len(base.index.intersection(mine.index)) < len(base):
            continue  # failed or corrupted somewhere the default ran: not a config to apply everywhere
        scores[name] = float(np.exp(np.mean(np.log(mine[judged] / base[judged]))))
    name = max(scores, key=scores.get)
    return name, scores[name]


def tuner_collective(name: str) -> str | None:
    """The example tuner's collective word (allreduce, allgather, ...); None for those it cannot tune."""
    return {"all_reduce": "allreduce", "all_gather": "allgather", "reduce_scatter": "reducescatter",
            "broadcast": "broadcast", "reduce": "reduce"}.get(name)


assert set(KEY) <= set(commtable.PARAMS)
__all__ = ["table", "best_single", "tuner_collective", "COLUMNS", "ALPHA"]
