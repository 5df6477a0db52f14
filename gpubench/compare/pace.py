"""Figures the host times, judged at the baseline's host pace.

A host-timed figure (a launch's host time, an event's round trip, a pageable copy) moves with the host's own speed,
which on a shared host changes by tens of percent over seconds (gpubench.machine.host_pace). Each such sample carries the pace
taken before it (``host_pace``). Over the baseline's runs, each process gives a point: its median pace and its
median figure. Where those points spread in pace, a line through them (log figure against log pace; the median of
the pairwise slopes, which a stray point does not tilt) says how much of the figure's movement the pace explains,
and every run's samples, the current run's too, are moved along it to the baseline's median pace before anything
is pooled or judged. A change the pace does not explain (the driver's launch got slower) moves the figure off the
line and is judged as before; a host that is slower as a whole shows as a pace away from the baseline's, which
the note says.

The line is the baseline's alone: the run being judged never shapes it, so a regression in that run cannot be
fitted away. Without enough baseline points spread in pace (older tables have no pace; a steady host has none to
explain), or where the line leaves most of the baseline's spread unexplained, a figure is judged as measured. This
is the covariate adjustment of controlled experiments (a quantity beside the outcome that explains part of its
noise), here measured before each sample.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from gpubench.compare.pool import flatten
from gpubench.timing.pace_line import MIN_POINTS, Line, fit
from gpubench.timing.stats import summarize

# A column compare adds to a side's rows: True where the figure was moved along a line (its processes then share
# less of their level: gpubench.compare.verdict judges tonight's pooled median of them so).
AT_PACE = "at_host_pace"

KEY = ("suite", "case", "metric")


@dataclass
class Adjusted:
    lines: dict[tuple, Line] = field(default_factory=dict)
    current_pace: float | None = None  # the current run's median pace over the adjusted figures (µs)
    baseline_pace: float | None = None

    def note(self) -> str | None:
        """One line for compare's notes, or None when nothing was adjusted."""
        if not self.lines:
            return None
        text = f"host pace: {len(self.lines)} host-timed figure(s) judged at the baseline's host pace"
        if self.current_pace and self.baseline_pace:
            text += (f" (this run's host ran the pace probe in {self.current_pace:.0f} µs against the baseline's "
                     f"{self.baseline_pace:.0f} µs: {100 * (self.current_pace / self.baseline_pace - 1):+.0f}%)")
        return text + "; --no-host-pace judges them as measured"


@dataclass
class _Flat:
    """The samples of the rows whose every sample carries a pace, flattened (gpubench.compare.pool.flatten): each
    one's row (position in the rows), process, pace and value."""

    row: np.ndarray
    process: np.ndarray
    pace: np.ndarray
    value: np.ndarray


def _flatten(rows: pd.DataFrame | None) -> _Flat | None:
    if rows is None or rows.empty or "host_pace" not in rows.columns:
        return None
    samples, paces = rows["samples"].tolist(), rows["host_pace"].tolist()
    ok = (rows["status"] == "ok").to_numpy()
    keep = np.array([i for i in range(len(rows)) if ok[i] and _aligned(samples[i], paces[i])], dtype=np.int64)
    if not len(keep):
        return None
    flat = flatten(rows.iloc[keep].reset_index(drop=True))
    return _Flat(keep[flat.row], flat.process, np.concatenate([np.asarray(paces[i], dtype=float) for i in keep]),
                 flat.values)


def _points(rows: pd.DataFrame | None, flat: _Flat | None = None) -> pd.DataFrame:
    """Each (row, process) of ok rows whose samples all carry a pace: its key, median pace and median figure
    (``flat``: the rows' samples already flattened)."""
    flat = flat if flat is not None else _flatten(rows)
    if flat is None:
        return pd.DataFrame(columns=[*KEY, "row", "process", "pace", "value"])
    good = (flat.pace > 0) & (flat.value > 0) & np.isfinite(flat.value)
    df = pd.DataFrame({"row": flat.row[good], "process": flat.process[good], "pace": flat.pace[good],
                       "value": flat.value[good]})
    pts = df.groupby(["row", "process"], sort=False)[["pace", "value"]].median().reset_index()
    for k in KEY:
        pts[k] = rows[k].to_numpy()[pts["row"].to_numpy()]
    return pts


def _aligned(a, b) -> bool:
    return hasattr(a, "__len__") and hasattr(b, "__len__") and len(a) == len(b) > 0


def lines(baseline: list[pd.DataFrame]) -> dict[tuple, Line]:
    """Each figure's line over the baseline's processes, where they are enough and spread in pace."""
    return _fit(pd.concat([_points(f) for f in baseline if f is not None], ignore_index=True))


def _fit(pts: pd.DataFrame) -> dict[tuple, Line]:
    out: dict[tuple, Line] = {}
    for key, g in pts.groupby(list(KEY), sort=False):
        line = fit(g["pace"].to_numpy(float), g["value"].to_numpy(float))
        if line is not None:
            out[tuple(key)] = line
    return out


def apply(rows: pd.DataFrame, found: dict[tuple, Line], read: tuple | None = None) -> pd.DataFrame:
    """``rows`` with the samples of every fitted figure moved to its line's pace (value and stats with them), and
    :data:`AT_PACE` True on those rows. ``read``: the rows' flattened samples and points, where the caller has them."""
    flat, pts = read if read is not None else (_flatten(rows), None)
    pts = (_points(rows, flat) if pts is None else pts.copy()) if found and flat is not None else pd.DataFrame()
    if pts.empty:
        return rows
    lines_of = [found.get(k) for k in zip(*(pts[k] for k in KEY))]
    lined = pts.loc[[ln is not None for ln in lines_of], "row"].unique()
    if not len(lined):
        return rows
    out = rows.copy()
    out[AT_PACE] = False
    out.loc[out.index[lined], AT_PACE] = True
    pts["factor"] = [1.0 if ln is None else ln.factor(p) for ln, p in zip(lines_of, pts["pace"])]
    moved_rows = pts.loc[pts["factor"] != 1.0, "row"].unique()
    factor = pts.set_index(["row", "process"])["factor"]
    at = pd.MultiIndex.from_arrays([flat.row, flat.process])
    moved = flat.value * factor.reindex(at).fillna(1.0).to_numpy()
    bounds = np.searchsorted(flat.row, moved_rows), np.searchsorted(flat.row, moved_rows, side="right")
    cols = [c for c in ("value", "mean", "min", "max", "stdev", "iqr", "cv") if c in out.columns]
    for i, lo, hi in zip(moved_rows, *bounds):
        new = moved[lo:hi].tolist()
        st = summarize(new)
        pos = out.index[i]
        out.at[pos, "samples"] = new
        for c in cols:
            out.at[pos, c] = st["median" if c == "value" else c]
    return out


def adjust(base, cur, others=()) -> Adjusted:
    """Fit the baseline side's lines (its window and its history) and move every side's host-timed samples along
    them, in place of the sides' frames. ``others``: more sides judged against this baseline (a rerun)."""
    read: dict[int, tuple] = {}

    def of(df: pd.DataFrame | None) -> tuple:  # each frame flattened once, whichever step asks first
        if id(df) not in read:
            flat = _flatten(df)
            read[id(df)] = (flat, _points(df, flat))
        return read[id(df)]

    found = _fit(pd.concat([of(f)[1] for f in (base.raw, base.history) if f is not None], ignore_index=True))
    result = Adjusted(found)
    if not found:
        return result
    before = of(cur.raw)[1]
    for side in (base, cur, *others):
        side.raw = apply(side.raw, found, of(side.raw))
        if side.history is not None:
            side.history = apply(side.history, found, of(side.history))
    mine = before[[tuple(k) in found for k in before[list(KEY)].itertuples(index=False)]] if len(before) else before
    if len(mine):
        result.current_pace = float(mine["pace"].median())
        result.baseline_pace = float(np.median([ln.pace for ln in found.values()]))
    return result


# MIN_POINTS and Line are gpubench.timing.pace_line's, named here for the callers of this module
__all__ = ["Line", "Adjusted", "lines", "apply", "adjust", "MIN_POINTS", "AT_PACE"]
