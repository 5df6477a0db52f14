"""How much of a host-timed figure's movement the host's pace explains: a line of log figure on log pace.

Points are (pace, figure) pairs, each a process's or a run's medians: a baseline's processes (gpubench.compare.pace)
or the healthy check runs an envelope is made from (gpubench.check.envelope). The slope is the median of the
pairwise slopes (Theil–Sen), which a stray point does not tilt. A line is drawn only where it can say something:
enough points, spread in pace, a plausible slope, and most of the figures' spread explained. Moving a figure along
the line to another pace is the covariate adjustment of controlled experiments (a quantity measured beside the
outcome that explains part of its noise).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

MIN_POINTS = 6  # points a line needs before it is drawn
MIN_PACE_SPREAD = 0.03  # the points' paces must spread at least this much (sd of their logs), or nothing to explain
MAX_SLOPE = 3.0  # a figure moves at most this power of the pace: beyond it the line is noise, and is not used
# The line must explain part of the spread: what is left around it at most this share of the spread before (sd of
# the logs). A figure the pace does not move keeps its samples: moving them would only add noise.
MAX_LEFT = 0.9


@dataclass(frozen=True)
class Line:
    slope: float  # d log(figure) / d log(pace)
    pace: float  # the points' median pace (µs): the pace figures are moved to
    lo: float | None = None  # the points' slowest and fastest paces: where the line was measured
    hi: float | None = None

    def factor(self, pace: float, clip: bool = False) -> float:
        """What a figure taken at ``pace`` is multiplied by to read at the line's pace; ``clip``: no further than
        the paces the line was drawn from (beyond them it is a guess)."""
        if not (pace > 0 and math.isfinite(pace)):
            return 1.0
        if clip and self.lo is not None and self.hi is not None:
            pace = min(max(pace, self.lo), self.hi)
        return float((self.pace / pace) ** self.slope)


def theil_sen(x: np.ndarray, y: np.ndarray) -> float:
    """The median of the slopes between every two points with different x."""
    i, j = np.triu_indices(len(x), k=1)
    dx = x[j] - x[i]
    keep = dx != 0
    return float(np.median((y[j] - y[i])[keep] / dx[keep])) if keep.any() else 0.0


def median_pace(samples, paces) -> float | None:
    """The median pace of figures that each carry one (a row's samples and its ``host_pace``); None where they do
    not all carry one."""
    if not (hasattr(samples, "__len__") and hasattr(paces, "__len__") and len(samples) == len(paces) > 0):
        return None
    p = np.asarray(paces, dtype=float)
    return float(np.median(p)) if np.all(p > 0) else None


def fit(paces, values) -> Line | None:
    """The line through the points (positive paces and figures), or None where it would say nothing."""
    p, v = np.asarray(paces, dtype=float), np.asarray(values, dtype=float)
    good = (p > 0) & (v > 0) & np.isfinite(p) & np.isfinite(v)
    p, v = p[good], v[good]
    if len(p) < MIN_POINTS:
        return None
    x, y = np.log(p), np.log(v)
    if np.std(x) < MIN_PACE_SPREAD:
        return None
    slope = theil_sen(x, y)
    if not (math.isfinite(slope) and abs(slope) <= MAX_SLOPE):
        return None
    if np.std(y - slope * x) > MAX_LEFT * np.std(y):
        return None
    return Line(slope, float(np.exp(np.median(x))), float(p.min()), float(p.max()))


__all__ = ["Line", "fit", "median_pace", "theil_sen", "MIN_POINTS", "MIN_PACE_SPREAD", "MAX_SLOPE", "MAX_LEFT"]
