"""What the gate knew of each figure over the nights: the band of the baseline window it judged each night against,
and its marks (WORSE since …, recovered, accepted), read from the records compare keeps beside each run
(gpubench.compare.gate_memory), never judged again here.

The band of a night is the range of the run medians of the nights that night's window held, chosen as compare
chooses them from a directory (gpubench.compare.load): the latest ``window`` nights before it that measured the
figure, of the same system where its suite has such nights (nightlies of several suites may share a directory:
each suite is judged against its own runs), not on a shared GPU or a busy host, not themselves WORSE
on that figure unless someone accepted it, and not older than its accepted level. Acceptances count from when
they were made: the band of a night judged before an acceptance is the band that night was judged against. A
night whose window holds fewer than 3 nights has no band (the gate judges from 3 on). Compare counts each
process of a figure measured in several processes as a run, and widens a host-set figure's margin by a longer
history; the band shows the nights' medians only.
"""

from __future__ import annotations

import bisect
import math
import warnings
from typing import Any

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from gpubench.compare import gate_memory as memory
from gpubench.compare.load import MAX_SCAN
from gpubench.report.history.nights import Night

JUDGED_FROM = 3  # the fewest nights a window judges with (docs/compare.md: a window still filling)
Key = tuple[str, str, str]


class Context:
    """What every figure's band and marks read of the nights, worked out once: the gate's memory as it stood when
    each night was judged, the figures each night's record names WORSE, what each night accepted, and which
    nights a window may take (compare keeps a window to the current run's system where the suite has runs of it
    there: :meth:`alike`)."""

    def __init__(self, nights: list[Night]):
        self.nights = nights
        self.ledgers = _ledgers(nights)
        self.worse = [n.entry.worse for n in nights]
        self.judged = [n.judged for n in nights]
        self.hollow = np.array([n.hollow is not None for n in nights], dtype=bool)
        self.accepted: dict[Key, dict[int, dict[str, Any]]] = {}
        for i, n in enumerate(nights):
            for a in n.entry.acceptances:
                for f in a.get("figures") or []:
                    self.accepted.setdefault(memory.key_of(f), {})[i] = {
                        "reason": a.get("reason"), "by": a.get("by"), "at": a.get("at"), "from": f.get("from")}
        self.remembered = {k for w in self.worse for k in w} | {k for ledger in self.ledgers for k in ledger.accepted}
        systems: dict[tuple, int] = {}
        self.system = np.array([systems.setdefault(n.system, len(systems)) for n in nights])
        self._alike: dict[str, np.ndarray] = {}

    def alike(self, suite: str) -> np.ndarray:
        """Per night: whether an earlier night of its system ran ``suite`` (its window is then kept to its system)."""
        if suite not in self._alike:
            first_of: dict[int, int] = {}
            for k, (s, n) in enumerate(zip(self.system.tolist(), self.nights)):
                if suite in n.suites:
                    first_of.setdefault(s, k)
            self._alike[suite] = np.array([first_of.get(s, k) < k for k, s in enumerate(self.system.tolist())],
                                          dtype=bool)
        return self._alike[suite]


def _ledgers(nights: list[Night]) -> list[memory.Ledger]:
    """For each night, the directory's memory holding the acceptances made before the night was judged (all of
    them for a night never judged)."""
    entries = [n.entry for n in nights]
    found = sorted(((str(a.get("at") or ""), id(a)) for e in entries for a in e.acceptances))
    times, order = [t for t, _ in found], [i for _, i in found]
    cache: dict[int, memory.Ledger] = {}
    out = []
    for n in nights:
        k = bisect.bisect_left(times, str((n.entry.record or {}).get("judged_at") or "\uffff"))
        if k not in cache:
            made = set(order[:k])
            cache[k] = memory.Ledger(memory.Entry(e.run_id, e.path, e.meta, e.record,
                                                  [a for a in e.acceptances if id(a) in made]) for e in entries)
        out.append(cache[k])
    return out


def band(median: np.ndarray, key: Key, context: Context, first: int,
         window: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(low, high, mid) of the window of each night from ``first`` on (NaN where it holds fewer than 3)."""
    if key in context.remembered:
        return _masked(_band_read(median, key, context, first, window), median[first:])
    # Nobody's memory touches this figure: a window is the latest nights that measured it, alone, of the
    # night's system where that night has one. Worked out for all nights at once, per system.
    count = len(median) - first
    low, high, mid = (np.full(count, np.nan) for _ in range(3))
    targets = np.arange(first, len(median))
    usable = np.isfinite(median) & ~context.hollow
    alike = context.alike(key[0])[targets]
    for s in np.unique(context.system[first:]):
        mine = (context.system[targets] == s) & alike
        _fill(median, usable & (context.system == s), targets, mine, window, (low, high, mid))
    _fill(median, usable, targets, ~alike, window, (low, high, mid))
    return _masked((low, high, mid), median[first:])


def _masked(bands: tuple[np.ndarray, ...], median: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A band only at the nights that measured the figure (a figure a suite stopped measuring draws none)."""
    gone = ~np.isfinite(median)
    low, high, mid = (np.where(gone, np.nan, b) for b in bands)
    return low, high, mid


def _fill(median: np.ndarray, usable: np.ndarray, targets: np.ndarray, which: np.ndarray, window: int,
          out: tuple[np.ndarray, np.ndarray, np.ndarray]) -> None:
    """Set out[which] to the (min, max, median) of the latest ``window`` usable nights before each target."""
    if not which.any():
        return
    e = np.flatnonzero(usable)
    before = np.searchsorted(e, targets[which])  # usable nights before each target
    padded = np.concatenate([np.full(window - 1, np.nan), median[e]])
    rows = sliding_window_view(padded, window)[np.maximum(before - 1, 0)] if len(e) else \
        np.full((len(before), window), np.nan)
    enough = np.minimum(before, window) >= JUDGED_FROM
    place = np.flatnonzero(which)[enough]
    rows = rows[enough]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        out[0][place], out[1][place] = np.nanmin(rows, axis=1), np.nanmax(rows, axis=1)
        out[2][place] = np.nanmedian(rows, axis=1)


def _band_read(median: np.ndarray, key: Key, context: Context, first: int,
               window: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The band of a figure the memory names (a WORSE night, an acceptance): each night's window read as compare
    reads it, night by night, asking the memory of that night whether each earlier night is evidence."""
    nights = context.nights
    count = len(nights) - first
    low, high, mid = (np.full(count, np.nan) for _ in range(3))
    measured = np.flatnonzero(np.isfinite(median)).tolist()
    values = median.tolist()
    alikes = context.alike(key[0])
    for i in range(first, len(nights)):
        ledger, alike = context.ledgers[i], alikes[i]
        taken: list[float] = []
        start = bisect.bisect_left(measured, i)
        for j in reversed(measured[max(0, start - MAX_SCAN):start]):
            if context.hollow[j] or (alike and context.system[j] != context.system[i]):
                continue
            if ledger.evidence(nights[j].entry, key):
                continue
            taken.append(values[j])
            if len(taken) == window:
                break
        if len(taken) >= JUDGED_FROM:
            low[i - first], high[i - first], mid[i - first] = min(taken), max(taken), float(np.median(taken))
    return low, high, mid


def marks(key: Key, median: np.ndarray, context: Context, first: int) -> tuple[dict, dict, dict]:
    """(worse, recovered, accepted) of ``key`` by night from ``first`` on: its WORSE nights as verdict.json
    names them (since, nights, change), the nights it recovered (judged, not WORSE, alone, after a judged night
    WORSE that nobody accepted), its acceptances (accepted.json: reason, by, at, from)."""
    worse, recovered = {}, {}
    accepted = {i - first: a for i, a in context.accepted.get(key, {}).items() if i >= first}
    if key not in context.remembered:
        return worse, recovered, accepted
    previous = None  # the latest night judged that measured the figure
    for i in np.flatnonzero(np.isfinite(median)).tolist():
        w = context.worse[i].get(key)
        if i >= first and w is not None:
            worse[i - first] = {k: w.get(k) for k in ("since", "nights", "change")}
        elif i >= first and context.judged[i] and not context.hollow[i] and previous is not None:
            was = context.worse[previous].get(key)
            if was is not None and context.ledgers[i].regressed(context.nights[previous].entry, key):
                n = was.get("nights") or 1
                recovered[i - first] = f"recovered: WORSE since {was.get('since')} for {n} night{'s' * (n != 1)}"
        if context.judged[i]:
            previous = i
    return worse, recovered, accepted


def versions(values: np.ndarray, median: np.ndarray, first: int) -> dict[int, str]:
    """The nights from ``first`` on where the figure's suite version differs from the night before it."""
    measured = np.flatnonzero(np.isfinite(median))
    seen = values[measured]
    changed = np.flatnonzero(seen[1:] != seen[:-1]) + 1
    return {int(measured[c]) - first: f"suite version {seen[c - 1]} → {seen[c]}" for c in changed.tolist()
            if measured[c] >= first}


def score(median: np.ndarray, low: np.ndarray, mid: np.ndarray, high: np.ndarray,
          better: str) -> tuple[float, float]:
    """How the latest night moved, both signed so that + is worse: (its change against its window's median —
    the median of the five nights before it where it has no band —, how far beyond its band it lies, as a share
    of that median: 0 inside the band or where there is none). Figures are ordered by the second, then the
    first: a host-timed figure moving 20 % inside a band as wide comes after a GPU-timed one 3 % beyond its band."""
    points = np.flatnonzero(np.isfinite(median))
    if not len(points):
        return 0.0, 0.0
    last = points[-1]
    value, ref = float(median[last]), float(mid[last])
    if not math.isfinite(ref) and len(points) > 1:
        ref = float(np.median(median[points[-6:-1]]))
    if not math.isfinite(ref) or not ref:
        return 0.0, 0.0
    sign = -1.0 if better == "higher" else 1.0
    change = sign * (value / ref - 1) if better in ("higher", "lower") else abs(value / ref - 1)
    edge = high[last] if sign > 0 else low[last]
    beyond = max(0.0, sign * (value - edge) / abs(ref)) if math.isfinite(edge) else 0.0
    return change, beyond


__all__ = ["Context", "band", "marks", "versions", "score", "JUDGED_FROM"]
