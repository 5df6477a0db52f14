"""The check set (gpubench/check/checks.toml) read into :class:`Figure` s, and the rows of a run that are each
figure's evidence.

The set is data: which suite measures a figure, which of its cases and metric, on which target (a GPU, a GPU pair,
the node). Nothing here names a suite; what a figure is held against (device memory, tensor cores, a host or peer
link) comes from the rows' ``roof`` column, which the suites fill.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from gpubench import files
from gpubench.errors import UsageError
from gpubench.timing.pace_line import median_pace
from gpubench.units import parse_size

CHECKS_FILE = Path(__file__).with_name("checks.toml")
RUNS = ("devices", "turns", "node", "pairs")
GPU_BACKENDS = ("cuda", "hip")
COMBINE = (None, "sum")
TARGETS = ("gpu", "pair", "node")


@dataclass(frozen=True)
class Figure:
    key: str
    title: str
    suite: str
    case: str  # a regex a case id must match whole
    metric: str
    run: str = "devices"
    target: str = "gpu"
    largest: str | None = None
    needs: int = 1
    combine: str | None = None  # "sum": a node figure made of every GPU's rows of a devices run, added up
    at: str | None = None  # on GPUs, only the case whose `largest` parameter is this size ("1G")

    @property
    def pattern(self) -> re.Pattern:
        return re.compile(self.case)

    def case_on(self, backend: str) -> str:
        """The regex of the cases to measure on ``backend``: on a GPU, where the figure says ``at``, the one size it
        is judged at, not every size of the quick grid (whose largest it would be judged at anyway)."""
        if not (self.at and self.largest and backend in GPU_BACKENDS):
            return self.case
        return self.case.replace(f"{self.largest}=\\d+", f"{self.largest}={parse_size(self.at)}")


def load(path: str | Path = CHECKS_FILE) -> list[Figure]:
    doc = files.read(path, "the check set")
    figures = []
    for i, entry in enumerate(doc.get("figure", [])):
        try:
            f = Figure(**entry)
            f.pattern  # noqa: B018 — a bad regex fails here, with its entry named
        except (TypeError, re.error) as e:
            raise UsageError(f"{path}: figure {i + 1} ({entry.get('key', '?')}): {e}") from e
        if f.run not in RUNS or f.target not in TARGETS:
            raise UsageError(f"{path}: figure {f.key}: run must be one of {RUNS} and target one of {TARGETS}")
        if f.at is not None and (not f.largest or f"{f.largest}=\\d+" not in f.case):
            raise UsageError(f"{path}: figure {f.key}: at = \"{f.at}\" picks a size of its largest parameter: give "
                             "largest, and a case regex with <largest>=\\d+ in it")
        if f.at is not None:
            parse_size(f.at)  # a bad size fails here, with the file named by the UsageError
        if f.combine not in COMBINE or (f.combine and (f.run != "devices" or f.target != "node")):
            raise UsageError(f"{path}: figure {f.key}: combine = \"sum\" adds up a devices run's GPUs into a node "
                             "figure (run = \"devices\", target = \"node\")")
        figures.append(f)
    if len({f.key for f in figures}) != len(figures):
        raise UsageError(f"{path}: two figures share a key")
    return figures


def selection(figures: list[Figure], backend: str | None = None) -> tuple[list[str], str]:
    """The suites that measure ``figures``, and the --filter that selects their cases (on ``backend``)."""
    suites = list(dict.fromkeys(f.suite for f in figures))
    return suites, "^(" + "|".join(f.case_on(backend or "") for f in figures) + ")$"


def devices_filter(figures: list[Figure]) -> tuple[list[str], str]:
    """The suites of the figures measured on every GPU at once, and the --filter that selects their cases."""
    return selection([f for f in figures if f.run == "devices"])


@dataclass
class Evidence:
    """The row a figure is judged on, for one target; ``row`` None where nothing was measured (then ``why``)."""

    figure: Figure
    target: str
    gpu: int | None
    pair: tuple[int, int] | None
    row: dict[str, Any] | None
    why: str = ""
    run_dir: str | None = None

    @property
    def value(self) -> float:
        return float(self.row["value"]) if self.row is not None else math.nan

    @property
    def samples(self) -> list[float]:
        s = self.row.get("samples") if self.row is not None else None
        return [float(x) for x in (s if s is not None else []) if math.isfinite(float(x))]

    @property
    def pace(self) -> float | None:
        """The host's pace (µs) while the figure was measured: its samples' median, where each carries one."""
        return median_pace(self.row.get("samples"), self.row.get("host_pace")) if self.row is not None else None


def _pair_of(row: dict[str, Any]) -> tuple[int, int] | None:
    ends = [str(row.get(k, "")) for k in ("src", "dst")]
    if all(e.startswith("gpu") for e in ends):
        a, b = (int(e[3:]) for e in ends)
        return (min(a, b), max(a, b))
    return None


def _best_rows(rows: pd.DataFrame, figure: Figure) -> pd.DataFrame:
    """The ok rows at the figure's largest measured size (all rows when none is ok)."""
    ok = rows[rows["status"] == "ok"]
    if ok.empty or not figure.largest or figure.largest not in ok:
        return ok if not ok.empty else rows
    size = pd.to_numeric(ok[figure.largest], errors="coerce")
    return ok[size == size.max()]


def _worst(rows: pd.DataFrame, figure: Figure) -> dict[str, Any]:
    """Of a target's rows (a pair's directions, or its two ends' views of one direction), the worst ok one: a
    link is as good as its slowest direction."""
    ok = rows[rows["status"] == "ok"]
    if ok.empty:
        return rows.iloc[0].to_dict()
    values = ok["value"].astype(float)
    better = str(ok["better"].iloc[0])
    return ok.loc[values.idxmin() if better == "higher" else values.idxmax()].to_dict()


def evidence(figure: Figure, df: pd.DataFrame, run_dir: str | None, pair: tuple[int, int] | None = None) -> list[Evidence]:
    """The figure's evidence in one run's rows, one per target. ``pair``: the GPUs a pairs run was given (its own
    device indices count from 0 within the pair)."""
    if df.empty or "suite" not in df:
        return []
    rows = df[(df["suite"] == figure.suite) & (df["metric"] == figure.metric)]
    rows = rows[rows["case"].astype(str).map(lambda c: bool(figure.pattern.fullmatch(c)))]
    if rows.empty:
        return []
    out = []
    if figure.combine == "sum":
        return [_summed(figure, rows, run_dir)]
    if figure.target == "gpu":
        for gpu, g in rows.groupby(pd.to_numeric(rows["device_index"], errors="coerce").fillna(0).astype(int)):
            out.append(_one(figure, f"gpu{gpu}", int(gpu), None, _best_rows(g, figure), run_dir))
    elif figure.target == "pair" and pair is None:
        keyed = rows.assign(_pair=[_pair_of(r) for r in rows.to_dict("records")])
        for p, g in keyed[keyed["_pair"].notna()].groupby("_pair"):
            out.append(_one(figure, f"gpu{p[0]}-gpu{p[1]}", None, tuple(p), _best_rows(g.drop(columns="_pair"), figure),
                            run_dir))
    else:
        target = f"gpu{pair[0]}-gpu{pair[1]}" if pair else "node"
        out.append(_one(figure, target, None, pair, _best_rows(rows, figure), run_dir))
    return out


def _summed(figure: Figure, rows: pd.DataFrame, run_dir: str | None) -> Evidence:
    """Every GPU's figure added up, as one node figure: each GPU's value at the largest size, and as samples the
    sums of the GPUs' k-th samples (taken at about the same time: the GPUs go case by case in step), so that the
    total has its own noise. A GPU whose row is not ok makes the total that row's failure."""
    gpus = pd.to_numeric(rows["device_index"], errors="coerce").fillna(0).astype(int)
    per_gpu = [_best_rows(g, figure) for _, g in rows.groupby(gpus)]
    worst = [r.iloc[0].to_dict() for r in per_gpu if (r["status"] != "ok").any() or r.empty]
    if worst:
        row = worst[0]
        return Evidence(figure, "node", None, None, row, str(row.get("message") or row.get("status")), run_dir)
    picked = [_worst(r, figure) for r in per_gpu]
    samples = [[float(x) for x in (r.get("samples") if r.get("samples") is not None else [])] for r in picked]
    length = min((len(s) for s in samples), default=0)
    contended = sorted({n for r in picked for n in str(r.get("contended") or "").split(", ") if n})
    loads = [float(r["host_load"]) for r in picked if r.get("host_load") is not None and math.isfinite(r["host_load"])]
    row = {**picked[0], "value": float(sum(float(r["value"]) for r in picked)), "device_index": None,
           "samples": [sum(s[k] for s in samples) for k in range(length)], "gpus": len(picked),
           "contended": ", ".join(contended), "host_load": max(loads) if loads else None}
    return Evidence(figure, "node", None, None, row, "", run_dir)


def _one(figure, target, gpu, pair, rows: pd.DataFrame, run_dir) -> Evidence:
    row = _worst(rows, figure)
    why = "" if row.get("status") == "ok" else str(row.get("message") or row.get("status"))
    return Evidence(figure, target, gpu, pair, row, why, run_dir)


__all__ = ["Figure", "Evidence", "load", "selection", "devices_filter", "evidence", "CHECKS_FILE"]
