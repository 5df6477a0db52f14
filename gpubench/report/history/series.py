"""Each figure over the nights: its median with the interquartile range of its samples, and what the gate knew of
it (the band of its baseline window, its WORSE, recovered and accepted nights: gpubench.report.history.gate).

A figure is a (suite, case, metric), as compare joins them; where a night holds several rows of one figure (a run
over several devices) their samples are pooled, as compare pools them. Only ``ok`` rows with a value are drawn.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from gpubench.compare.load import DEFAULT_WINDOW, KEY
from gpubench.errors import UsageError
from gpubench.report.history import gate
from gpubench.report.history.nights import Night, Nights

Key = tuple[str, str, str]


@dataclass
class Figure:
    key: Key
    unit: str
    better: str
    median: np.ndarray  # per night shown; NaN where the night did not measure it
    q1: np.ndarray
    q3: np.ndarray
    n: np.ndarray  # samples
    low: np.ndarray = field(default_factory=lambda: np.zeros(0))  # the band; NaN where none
    high: np.ndarray = field(default_factory=lambda: np.zeros(0))
    mid: np.ndarray = field(default_factory=lambda: np.zeros(0))  # the window's median
    worse: dict[int, dict[str, Any]] = field(default_factory=dict)  # night -> since, nights, change
    recovered: dict[int, str] = field(default_factory=dict)
    accepted: dict[int, dict[str, Any]] = field(default_factory=dict)  # night -> reason, by, at, from
    versions: dict[int, str] = field(default_factory=dict)  # night -> "suite version 1 → 2"
    score: float = 0.0  # the latest night's change against its window, + is worse
    beyond: float = 0.0  # how far beyond its band the latest night lies (+ worse side), 0 inside it

    @property
    def name(self) -> str:
        return " ".join(self.key)

    @property
    def latest(self) -> int:
        """The last night shown that measured it."""
        points = np.flatnonzero(np.isfinite(self.median))
        return int(points[-1]) if len(points) else -1

    @property
    def open(self) -> bool:
        """WORSE on the latest night that measured it: a regression nobody fixed or accepted yet."""
        points = np.flatnonzero(np.isfinite(self.median))
        return bool(len(points)) and int(points[-1]) in self.worse


def _spread(samples: pa.Array, group: np.ndarray, groups: int) -> tuple[np.ndarray, ...]:
    """(median, q1, q3, n) of each group's finite samples pooled (numpy's linear percentiles, as the report's
    error bars; q1 and q3 NaN below 2 samples, the median NaN with none), in one sort of them all."""
    lengths = pc.list_value_length(samples).fill_null(0).to_numpy()
    flat = pc.list_flatten(samples).cast(pa.float64()).to_numpy(zero_copy_only=False)
    gid = np.repeat(group, lengths)
    keep = np.isfinite(flat)
    flat, gid = flat[keep], gid[keep]
    order = np.lexsort((flat, gid))
    flat = np.append(flat[order], np.nan)  # a last slot for groups without samples to point at
    n = np.bincount(gid, minlength=groups)
    starts = np.concatenate(([0], np.cumsum(n)[:-1]))
    last = np.maximum(n - 1, 0)

    def at(p: float) -> np.ndarray:
        pos = p * last
        lo = np.floor(pos).astype(np.int64)
        i0 = np.where(n > 0, starts + lo, len(flat) - 1)
        i1 = np.where(n > 0, starts + np.minimum(lo + 1, last), len(flat) - 1)
        return flat[i0] + (flat[i1] - flat[i0]) * (pos - lo)

    few = n < 2
    return at(0.5), np.where(few, np.nan, at(0.25)), np.where(few, np.nan, at(0.75)), n


def _ok_rows(nights: list[Night]) -> pa.Table:
    """Every night's ok rows with a finite value, with the night's index."""
    parts = [n.table.append_column("_night", pa.array(np.full(n.table.num_rows, k, dtype=np.int64)))
             for k, n in enumerate(nights) if n.table.num_rows]
    if not parts:
        return pa.table({c: pa.array([], pa.string()) for c in (*KEY, "status")} |
                        {"value": pa.array([], pa.float64()), "samples": pa.array([], pa.list_(pa.float64())),
                         "_night": pa.array([], pa.int64())})
    t = pa.concat_tables(parts, promote_options="permissive")
    value = pc.cast(t.column("value"), pa.float64())
    ok = pc.and_(pc.equal(t.column("status"), "ok"), pc.is_finite(value)).fill_null(False)
    return t.set_column(t.schema.get_field_index("value"), "value", value).filter(ok)


def _frame(nights: list[Night], pattern: re.Pattern | None) -> pd.DataFrame:
    """One row per figure and night: the figure's number (``_fig``), the night's index, the median (pooled where
    a night holds several rows of the figure) and quartiles."""
    t = _ok_rows(nights)
    df = t.drop_columns(["samples"]).to_pandas()
    df["_fig"] = df.groupby(list(KEY), sort=False).ngroup() if len(df) else 0
    if pattern is not None and len(df):
        heads = df.drop_duplicates("_fig").sort_values("_fig")
        keep = np.array([bool(pattern.search(" ".join(map(str, k)))) for k in zip(*(heads[c] for c in KEY))])
        mask = keep[df["_fig"].to_numpy()]
        df, t = df[mask].reset_index(drop=True), t.filter(pa.array(mask))
    if df.empty:
        return df
    group = df.groupby(["_fig", "_night"], sort=False).ngroup().to_numpy()
    groups = int(group.max()) + 1
    median, q1, q3, n = _spread(t.column("samples").combine_chunks(), group, groups)
    rows = np.bincount(group, minlength=groups)
    out = df.assign(_g=group).groupby("_g", sort=True).last()
    if (rows > 1).any():  # pooled: the median of their samples, or of their values where they have none
        values = df.assign(_g=group).groupby("_g", sort=True)["value"].median().to_numpy()
        out["value"] = np.where(rows > 1, np.where(n > 0, median, values), out["value"].to_numpy())
    out["_q1"], out["_q3"], out["_n"] = q1, q3, n
    out["_fig"] = pd.factorize(out["_fig"])[0]
    return out.sort_values("_night", kind="stable").reset_index(drop=True)


def _arrays(df: pd.DataFrame, count: int) -> tuple[dict[str, np.ndarray], list[pd.Series]]:
    """(per-night arrays figure × night, each figure's latest row)."""
    codes, nights = df["_fig"].to_numpy(), df["_night"].to_numpy()
    figures = int(codes.max()) + 1
    out = {}
    for name, col in (("median", "value"), ("q1", "_q1"), ("q3", "_q3"), ("n", "_n")):
        a = np.full((figures, count), np.nan)
        a[codes, nights] = pd.to_numeric(df[col], errors="coerce").to_numpy(dtype=float)
        out[name] = a
    version = np.full((figures, count), None, dtype=object)
    if "suite_version" in df.columns:
        version[codes, nights] = df["suite_version"].astype(str).to_numpy()
    out["version"] = version
    last = pd.Series(np.arange(len(df))).groupby(codes).max().to_numpy()  # df is in night order
    return out, [df.iloc[p] for p in last]


def figures(data: Nights, pattern: str | None = None, window: int = DEFAULT_WINDOW) -> list[Figure]:
    """The figures of ``data``'s nights whose ``suite case metric`` matches ``pattern``, worst recent change
    first: open regressions; then figures still measured before those a suite stopped measuring; then by how
    far beyond its band the latest night lies, then by its change against its window (:func:`gate.score`)."""
    nights = data.nights
    try:
        regex = re.compile(pattern) if pattern else None
    except re.error as e:
        raise UsageError(f"--filter {pattern!r} is not a regular expression ({e})") from e
    df = _frame(nights, regex)
    if df.empty:
        raise UsageError(f"no figure of {data.directory} matches --filter {pattern!r}" if pattern else
                         f"{data.directory}: its runs hold no ok figure to draw")
    arrays, latest = _arrays(df, len(nights))
    first = next(k for k, n in enumerate(nights) if n.shown)
    context = gate.Context(nights)
    out = []
    for f, row in enumerate(latest):
        key = tuple(str(row[k]) for k in KEY)
        median = arrays["median"][f]
        if not np.isfinite(median[first:]).any():  # measured only in the nights read for the first band
            continue
        fig = Figure(key, str(row.get("unit") or ""), str(row.get("better") or ""),
                     *(arrays[a][f, first:] for a in ("median", "q1", "q3", "n")))
        low, high, mid = gate.band(median, key, context, first, window)
        fig.low, fig.high, fig.mid = low, high, mid
        fig.worse, fig.recovered, fig.accepted = gate.marks(key, median, context, first)
        fig.versions = gate.versions(arrays["version"][f], median, first)
        fig.score, fig.beyond = gate.score(fig.median, low, mid, high, fig.better)
        out.append(fig)
    if not out:
        raise UsageError(f"{data.directory}: no figure{' matching --filter' if pattern else ''} was measured in the "
                         "nights asked for: give an earlier --since or a larger --last")
    return sorted(out, key=lambda g: (not g.open, -g.latest, -g.beyond, -g.score, g.key))


__all__ = ["Figure", "figures"]
