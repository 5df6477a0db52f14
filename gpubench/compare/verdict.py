"""The verdict on one figure, and on every figure two sides share.

A figure is WORSE (or BETTER) when both
1. its median moved, in the direction its ``better`` column calls a regression (or an improvement), by at
   least its threshold (:mod:`gpubench.compare.thresholds`; default 5 %), and
2. the raw samples say the move is beyond noise: the two-sided Mann-Whitney U test
   (:mod:`gpubench.compare.ranktest`) gives p ≤ alpha (default 0.01).

A move at least the threshold without that evidence is UNKNOWN; a smaller move is SAME. Where either side has
fewer than two samples (imported logs, derived figures) there is no spread to test: the threshold alone
decides, and the row's ``basis`` says ``threshold-only`` instead of ``samples``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from gpubench.compare.cross import pct_of_peak
from gpubench.compare.load import KEY
from gpubench.compare.ranktest import mann_whitney
from gpubench.compare.thresholds import Thresholds

WORSE, BETTER, SAME, UNKNOWN = "WORSE", "BETTER", "SAME", "UNKNOWN"
INCOMPARABLE = "incomparable"
# status: whether a figure was compared, and if not, why
COMPARED, ONLY_BASELINE, ONLY_CURRENT, NOT_OK = "compared", "only-baseline", "only-current", "not-ok"
DEFAULT_ALPHA = 0.01
# Changes are compared with thresholds at this precision, so that a 5 % shift meets a 5 % threshold despite
# binary rounding (0.95 × x / x − 1 is not exactly −0.05).
_PRECISION = 9

COLUMNS = (
    "verdict", "status", "suite", "case", "metric", "unit", "better", "baseline", "current", "change", "ratio",
    "threshold", "p_value", "basis", "n_baseline", "n_current", "cv_baseline", "cv_current",
    "suite_version_baseline", "suite_version_current", "baseline_pct_peak", "current_pct_peak", "note",
)
# Worst first: regressions, then what could not be decided or compared, then the rest.
_ORDER = {WORSE: 0, UNKNOWN: 1, NOT_OK: 2, INCOMPARABLE: 3, ONLY_BASELINE: 4, ONLY_CURRENT: 5, SAME: 6, BETTER: 7}


def judge(
    baseline: Sequence[float], current: Sequence[float], better: str, threshold: float,
    alpha: float = DEFAULT_ALPHA, *, baseline_value: float | None = None, current_value: float | None = None,
) -> dict[str, Any]:
    """Verdict, change, p_value, basis and note for one figure.

    ``baseline``/``current`` are the raw samples; ``*_value`` the figure where there are no samples (a
    derived row). The figure is the median of the samples otherwise.
    """
    b = float(np.median(baseline)) if len(baseline) else _num(baseline_value)
    c = float(np.median(current)) if len(current) else _num(current_value)
    out: dict[str, Any] = {"baseline": b, "current": c, "change": math.nan, "ratio": math.nan,
                           "p_value": math.nan, "basis": "samples", "note": ""}
    if len(baseline) < 2 or len(current) < 2:
        out["basis"] = "threshold-only"
    if not (math.isfinite(b) and math.isfinite(c)) or b == 0:
        return {**out, "verdict": UNKNOWN, "note": "no figure to compare" if b != 0 else "baseline is 0"}
    out["ratio"] = c / b
    out["change"] = change = c / b - 1.0
    if better not in ("higher", "lower"):
        return {**out, "verdict": UNKNOWN, "note": f"direction unknown (better={better!r})"}
    if out["basis"] == "samples":
        out["p_value"] = mann_whitney(current, baseline)[1]
    worse_by = -change if better == "higher" else change  # > 0: a regression
    if change == 0 or round(abs(change), _PRECISION) < threshold:
        note = "significant, but within the threshold" if out["p_value"] <= alpha else ""
        return {**out, "verdict": SAME, "note": note}
    direction = WORSE if worse_by > 0 else BETTER
    if out["basis"] == "threshold-only":
        n = f"n={len(baseline)} vs {len(current)}"
        return {**out, "verdict": direction, "note": f"{n}: no spread to test; the threshold alone decides"}
    if out["p_value"] <= alpha:
        return {**out, "verdict": direction}
    return {**out, "verdict": UNKNOWN,
            "note": f"{direction.lower()} by the threshold or more, but within noise "
                    f"(p={out['p_value']:.2g} > {alpha:g}; n={len(baseline)} vs {len(current)})"}


def _num(x: Any) -> float:
    try:
        return float(x)
    except (TypeError, ValueError):
        return math.nan


def _samples(row: dict[str, Any]) -> list[float]:
    s = row.get("samples")
    return [float(v) for v in s] if s is not None else []


def _has_figure(row: dict[str, Any] | None) -> bool:
    return row is not None and (any(math.isfinite(v) for v in _samples(row)) or math.isfinite(_num(row.get("value"))))


def compare_frames(base: pd.DataFrame, cur: pd.DataFrame, thresholds: Thresholds,
                   alpha: float = DEFAULT_ALPHA) -> pd.DataFrame:
    """One row per (suite, case, metric) of either pooled side (:func:`gpubench.compare.load.pool`), worst
    first, with the columns in COLUMNS. Figures neither side has a number for (a copy's TFLOP/s) are left out."""
    b_rows = {tuple(r[k] for k in KEY): r for r in base.to_dict("records")}
    c_rows = {tuple(r[k] for k in KEY): r for r in cur.to_dict("records")}
    keys = list(dict.fromkeys([*b_rows, *c_rows]))
    out = []
    for key in keys:
        b, c = b_rows.get(key), c_rows.get(key)
        if not (_has_figure(b) or _has_figure(c)) and all(r is None or r.get("status") == "ok" for r in (b, c)):
            continue
        ref = c if c is not None else b
        row: dict[str, Any] = {col: None for col in COLUMNS}
        row.update(suite=key[0], case=key[1], metric=key[2], unit=ref.get("unit"), better=ref.get("better"),
                   threshold=thresholds.for_row(str(key[0]), str(key[2])),
                   suite_version_baseline=b.get("suite_version") if b else None,
                   suite_version_current=c.get("suite_version") if c else None, note="")
        for name, r in (("baseline", b), ("current", c)):
            if r is not None:
                row[name] = _num(r.get("value"))
                row[f"n_{name}"] = int(_num(r.get("n"))) if math.isfinite(_num(r.get("n"))) else 0
                row[f"cv_{name}"] = _num(r.get("cv"))
        if b is None or c is None:
            row["status"] = ONLY_CURRENT if b is None else ONLY_BASELINE
        elif b.get("suite_version") != c.get("suite_version"):
            row.update(status=INCOMPARABLE, verdict=INCOMPARABLE,
                       note=f"suite version {b.get('suite_version')} → {c.get('suite_version')}: "
                            "what the suite measures changed; promote a new baseline")
        elif b.get("status") != "ok" or c.get("status") != "ok":
            row.update(status=NOT_OK, note="; ".join(
                f"{name} {r.get('status')}: {r.get('message') or ''}".rstrip(": ")
                for name, r in (("baseline", b), ("current", c)) if r.get("status") != "ok"))
        else:
            row.update(judge(_samples(b), _samples(c), str(ref.get("better")), row["threshold"], alpha,
                             baseline_value=b.get("value"), current_value=c.get("value")))
            row["status"] = COMPARED
        if b is not None and row["baseline"] is not None:
            row["baseline_pct_peak"] = pct_of_peak(b, row["baseline"])
        if c is not None and row["current"] is not None:
            row["current_pct_peak"] = pct_of_peak(c, row["current"])
        out.append(row)
    df = pd.DataFrame(out, columns=list(COLUMNS))
    if df.empty:
        return df
    group = [(_ORDER.get(v, 9) if s == COMPARED else _ORDER.get(s, 9)) for v, s in zip(df["verdict"], df["status"])]
    worse_by = [_worse_by(ch, bt) for ch, bt in zip(df["change"], df["better"])]
    df["_g"], df["_w"] = group, worse_by
    return df.sort_values(["_g", "_w"], ascending=[True, False], kind="mergesort").drop(columns=["_g", "_w"]) \
        .reset_index(drop=True)


def _worse_by(change: Any, better: Any) -> float:
    ch = _num(change)
    if not math.isfinite(ch):
        return -math.inf
    return -ch if better == "higher" else ch


__all__ = ["judge", "compare_frames", "COLUMNS", "WORSE", "BETTER", "SAME", "UNKNOWN", "INCOMPARABLE",
           "COMPARED", "ONLY_BASELINE", "ONLY_CURRENT", "NOT_OK", "DEFAULT_ALPHA"]
