"""The history as data: the document the page embeds and draws, which ``gpubench export DIR --format history-json``
writes (and the page's own download link) and ``--format history-csv`` writes as rows, for Grafana or a notebook
(:mod:`.outputs`).

The document (format ``gpubench-history``, version 2) holds ``nights`` (oldest first: ``run_id``, ``time``,
``hollow`` — ``shared GPU`` or ``busy host`` or null —, ``judged``, ``changes``: by suite, the settings that
differ from the previous night of that suite, worded as compare words them; version 1 held one list, against
whatever run came before) and ``figures`` (worst recent change first: ``suite``, ``case``,
``metric``, ``label``, ``unit``, ``better``, ``open``, ``score`` and ``beyond`` (the latest night's change
against its window, and how far beyond its band, + worse), and arrays aligned with ``nights``: ``median``,
``q1``, ``q3``, ``n``, ``low`` and ``high`` — the band —, null where a night has none; ``worse``, ``recovered``,
``accepted`` and ``versions``: lists of marks, each with the index of its ``night``).

Past :data:`MAX_POINTS` figure-nights, consecutive nights are drawn as one point each (``aggregated`` says how
many): the median of their medians, the lowest q1 and highest q3, the widest band; a point is WORSE when one of
its nights was, and a night entry names its first and last run and counts its nights.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np

from gpubench.compare.outputs.common import human_case
from gpubench.results.rundir import utc_now
from gpubench.report.history.nights import Night, Nights
from gpubench.report.history.series import Figure

FORMAT, VERSION = "gpubench-history", 2
# Figure-nights a page holds at most: 150 000 keeps it near 6 MB. A year of 150 figures is 54 750.
MAX_POINTS = 150_000
DIGITS = 5  # significant digits kept of each number: far below the nights' spread, a third of the bytes
ARRAYS = ("median", "q1", "q3", "n", "low", "high")


def _rounded(values: np.ndarray) -> list[float | None]:
    """DIGITS significant digits, None for NaN. numpy rounds by scaling with an exact power of ten and dividing
    back, which gives the double nearest the rounded decimal, so JSON writes it short (40.791, not
    40.790999999999997)."""
    v = np.asarray(values, dtype=float)
    out = np.where(v == 0, 0.0, np.nan)
    ok = np.isfinite(v) & (v != 0)
    places = np.zeros(v.shape, dtype=int)
    places[ok] = DIGITS - 1 - np.floor(np.log10(np.abs(v[ok]))).astype(int)
    for k in np.unique(places[ok]).tolist():
        at = ok & (places == k)
        out[at] = np.round(v[at], k)
    return [None if x != x else x for x in out.tolist()]


def _buckets(count: int, per: int) -> list[tuple[int, int]]:
    return [(s, min(s + per, count)) for s in range(0, count, per)]


def _reduce(values: np.ndarray, spans: list[tuple[int, int]], how: str) -> np.ndarray:
    if all(e - s == 1 for s, e in spans):
        return values
    per = spans[0][1] - spans[0][0]
    padded = np.concatenate([values, np.full(len(spans) * per - len(values), np.nan)]).reshape(len(spans), per)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # a span where the figure was never measured: NaN
        return getattr(np, how)(padded, axis=1)


def _night(nights: list[Night], s: int, e: int) -> dict[str, Any]:
    first = nights[s]
    if e - s == 1:
        return {"run_id": first.run_id, "time": first.time, "hollow": first.hollow, "judged": first.judged,
                "changes": first.changes}
    span = nights[s:e]
    hollow = {n.hollow for n in span}
    changes: dict[str, list[str]] = {}
    for n in span:
        for suite, said in n.changes.items():
            changes.setdefault(suite, []).extend(f"{n.run_id}: {c}" for c in said)
    return {"run_id": first.run_id, "time": first.time, "last_run_id": span[-1].run_id, "nights": e - s,
            "hollow": hollow.pop() if len(hollow) == 1 else None, "judged": any(n.judged for n in span),
            "changes": changes}


def _marks(marks: dict[int, Any], spans: list[tuple[int, int]], last: bool = False) -> list[dict[str, Any]]:
    """A figure's marks by point: a span's first (its last where ``last``)."""
    per = spans[0][1] - spans[0][0] if spans else 1
    chosen: dict[int, int] = {}
    for i in sorted(marks, reverse=last):
        chosen.setdefault(i // per, i)
    return [{"night": b, **(marks[i] if isinstance(marks[i], dict) else {"text": marks[i]})}
            for b, i in sorted(chosen.items())]


def _figure(fig: Figure, spans: list[tuple[int, int]]) -> dict[str, Any]:
    how = {"median": "nanmedian", "q1": "nanmin", "q3": "nanmax", "n": "nansum", "low": "nanmin",
           "high": "nanmax"}
    arrays = {name: _reduce(getattr(fig, name), spans, how[name]) for name in ARRAYS}
    arrays["n"] = np.where(np.isnan(_reduce(fig.median, spans, "nanmedian")), np.nan, arrays["n"])
    doc = {"suite": fig.key[0], "case": fig.key[1], "metric": fig.key[2], "label": human_case(fig.key[1]),
           "unit": fig.unit, "better": fig.better, "open": fig.open, "score": _rounded(np.array([fig.score]))[0],
           "beyond": _rounded(np.array([fig.beyond]))[0]}
    for name in ARRAYS:
        doc[name] = [None if v is None else int(v) for v in _rounded(arrays[name])] if name == "n" else \
            _rounded(arrays[name])
    doc["worse"] = _marks(fig.worse, spans)
    doc["recovered"] = _marks(fig.recovered, spans, last=True)
    doc["accepted"] = _marks(fig.accepted, spans, last=True)
    doc["versions"] = _marks(fig.versions, spans)
    return doc


def build(data: Nights, figs: Sequence[Figure], *, options: dict[str, Any],
          max_points: int = MAX_POINTS) -> dict[str, Any]:
    """The document of ``figs`` over ``data``'s nights shown; ``options``: what the page was asked for (since,
    last, filter, window), said on it."""
    shown = data.shown
    per = max(1, math.ceil(len(figs) * len(shown) / max_points))
    spans = _buckets(len(shown), per)
    return {
        "format": FORMAT, "version": VERSION, "directory": str(data.directory), "generated": utc_now(),
        "options": options, "notes": list(data.notes),
        "aggregated": None if per == 1 else {"nights_per_point": per, "max_points": max_points,
                                             "why": f"{len(figs)} figures × {len(shown)} nights exceed the "
                                                    f"{max_points:,} points a page holds"},
        "nights": [_night(shown, s, e) for s, e in spans],
        "figures": [_figure(f, spans) for f in figs],
    }


__all__ = ["build", "FORMAT", "VERSION", "MAX_POINTS"]
