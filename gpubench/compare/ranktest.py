"""The Mann-Whitney U rank test, in numpy (scipy is not a dependency of gpubench).

compare asks it whether two sets of samples differ by more than their noise. A rank test needs no
assumption about the shape of the distributions, which matters for timings: they are skewed, with a long tail
of slow samples.

The p-value follows ``scipy.stats.mannwhitneyu(x, y, alternative="two-sided", method="auto")``:
- exact (the distribution of U counted over every arrangement of the ranks) when either sample has at most
  8 values and no value occurs twice; unlike scipy, only while the other has at most 400 (counting costs
  grow with the product of the sizes, and the approximation is close by then);
- otherwise the normal approximation, with the tie correction of the variance and a continuity correction.

Small samples have a floor on the p-value they can reach: 5 against 5 samples reach 0.008 at best (two-sided,
exact), 3 against 3 only 0.1.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence

import numpy as np

EXACT_MAX_N = 8  # scipy's "auto" takes the exact distribution when either sample is this small and untied
EXACT_MAX_OTHER = 400  # ...and we only while the other is no larger than this


def ranks(values: np.ndarray) -> np.ndarray:
    """1-based ranks, ties given the mean of the ranks they span."""
    order = np.argsort(values, kind="mergesort")
    sorted_values = values[order]
    # Start of each run of equal values, and the mean rank of the run.
    starts = np.flatnonzero(np.r_[True, sorted_values[1:] != sorted_values[:-1]])
    ends = np.r_[starts[1:], len(values)]
    mean_rank = (starts + 1 + ends) / 2.0  # mean of ranks starts+1 .. ends
    out = np.empty(len(values))
    out[order] = np.repeat(mean_rank, ends - starts)
    return out


def u_statistic(x: Sequence[float], y: Sequence[float]) -> float:
    """U of ``x``: how many (x_i, y_j) pairs have x_i > y_j, ties counting one half."""
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    r = ranks(np.concatenate([x, y]))
    return float(r[: len(x)].sum() - len(x) * (len(x) + 1) / 2.0)


@functools.lru_cache(maxsize=32)  # rows of one comparison mostly share their sample counts
def _exact_counts(m: int, n: int) -> np.ndarray:
    """counts[u] = arrangements of m x's among n y's with U = u (recurrence of Mann and Whitney, 1947)."""
    # f[j] holds the counts for (i, j) as i grows; f(i, j) = f(i-1, j) shifted by j + f(i, j-1).
    prev = [np.ones(1) for _ in range(n + 1)]  # i = 0: one arrangement, U = 0
    for i in range(1, m + 1):
        cur = [np.ones(1)]  # j = 0: U = 0
        for j in range(1, n + 1):
            a = np.zeros(i * j + 1)
            shifted = prev[j]
            a[j : j + len(shifted)] += shifted  # the largest value is an x: it beats all j y's
            a[: len(cur[j - 1])] += cur[j - 1]  # the largest value is a y
            cur.append(a)
        prev = cur
    counts = prev[n]
    counts.flags.writeable = False  # cached: shared by every caller
    return counts


def _normal_sf(z: float) -> float:
    return 0.5 * math.erfc(z / math.sqrt(2.0))


def mann_whitney(x: Sequence[float], y: Sequence[float]) -> tuple[float, float]:
    """(U of ``x``, two-sided p-value) for "x and y come from the same distribution".

    NaN p-value when either sample is empty.
    """
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    m, n = len(x), len(y)
    if m == 0 or n == 0:
        return math.nan, math.nan
    both = np.concatenate([x, y])
    u = u_statistic(x, y)
    u_big = max(u, m * n - u)
    tied = len(np.unique(both)) < len(both)
    if min(m, n) <= EXACT_MAX_N and max(m, n) <= EXACT_MAX_OTHER and not tied:
        counts = _exact_counts(min(m, n), max(m, n))
        # P(U >= u_big); U is symmetric, so the two-sided p is twice that.
        p = counts[int(round(u_big)) :].sum() / counts.sum()
        return u, min(1.0, 2.0 * float(p))
    _, t = np.unique(both, return_counts=True)
    big_n = m + n
    tie_term = float((t**3 - t).sum()) / (big_n * (big_n - 1))
    var = m * n / 12.0 * ((big_n + 1) - tie_term)
    if var <= 0:  # every value the same: nothing tells the samples apart
        return u, 1.0
    z = (u_big - m * n / 2.0 - 0.5) / math.sqrt(var)
    return u, min(1.0, max(0.0, 2.0 * _normal_sf(z)))


__all__ = ["mann_whitney", "u_statistic", "ranks"]
