"""Summary statistics derived from raw samples.

Tables keep the raw samples; everything here is recomputed from them, never stored alone.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from statistics import NormalDist

import numpy as np

STAT_FIELDS = ("median", "mean", "min", "max", "stdev", "iqr", "cv", "n")


def summarize(samples: Sequence[float]) -> dict[str, float]:
    """Median, mean, min, max, sample stdev (n-1), IQR (linear-interpolated quartiles), CV and n.

    CV is stdev / |mean|: the relative spread the stop rule and the ``noisy`` flag use. With fewer than two
    samples stdev, IQR and CV are NaN (unknown, not zero: one sample says nothing about spread).
    """
    if len(samples) == 1:  # a figure another tool printed: numpy is far slower for one value (docs/measurements.md)
        v = float(next(iter(samples)))  # a Series indexes by label: its first value, whatever its index
        return {"median": v, "mean": v, "min": v, "max": v, "stdev": math.nan, "iqr": math.nan, "cv": math.nan, "n": 1}
    x = np.asarray(samples, dtype=float)
    n = int(x.size)
    if n == 0:
        return {k: (0 if k == "n" else math.nan) for k in STAT_FIELDS}
    mean = float(x.mean())
    if n >= 2:
        stdev = float(x.std(ddof=1))
        q1, q3 = np.percentile(x, [25, 75])
        iqr = float(q3 - q1)
        cv = stdev / abs(mean) if mean != 0 else math.nan
    else:
        stdev = iqr = cv = math.nan
    return {
        "median": float(np.median(x)),
        "mean": mean,
        "min": float(x.min()),
        "max": float(x.max()),
        "stdev": stdev,
        "iqr": iqr,
        "cv": cv,
        "n": n,
    }


def number(x: object) -> float:
    """``x`` as a float; NaN where it is none (None, text)."""
    try:
        return float(x)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return math.nan


def finite(x: object) -> bool:
    """Whether ``x`` is a number other than NaN or infinity (None, text and NaN are not)."""
    try:
        return x is not None and math.isfinite(float(x))  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return False


def cv(samples: Sequence[float]) -> float:
    """Coefficient of variation alone (the stop rule asks for it after every sample)."""
    return summarize(samples)["cv"]


# --- evidence for compare: the rank test, the spread between runs, and samples of derived figures ----------
# compare (gpubench.compare.verdict) asks whether two runs' samples differ (the rank test) and by more than the figure
# moves between processes anyway (the spread of run medians). Both are scipy's; only the choices live here.


def mann_whitney(x: Sequence[float], y: Sequence[float]) -> tuple[float, float]:
    """(U of ``x``, two-sided p-value) of the Mann-Whitney U test: ``scipy.stats.mannwhitneyu``, method "auto"
    (exact for small untied samples, else the normal approximation with tie and continuity corrections).

    NaN p-value when either sample is empty; 1.0 when every value is the same (nothing tells them apart).
    A rank test needs no assumption about the shape of the distributions, which matters for timings (skewed,
    with a long tail of slow samples). Small samples have a floor on the p-value they can reach:
    :func:`best_p`.
    """
    from scipy.stats import mannwhitneyu  # scipy.stats is slow to import (a second or more): on use only

    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    if len(x) == 0 or len(y) == 0:
        return math.nan, math.nan
    both = np.concatenate([x, y])
    if np.all(both == both[0]):
        return float(len(x) * len(y) / 2.0), 1.0
    res = mannwhitneyu(x, y, alternative="two-sided", method="auto")
    return float(res.statistic), float(res.pvalue)


def best_p(m: int, n: int) -> float:
    """The smallest two-sided p the exact rank test can give ``m`` against ``n`` samples: 2 / C(m+n, m).

    3 against 3 samples reach 0.1 at best, 5 against 5 0.008: below alpha, samples this few are no evidence.
    """
    if m < 1 or n < 1:
        return 1.0
    return min(1.0, 2.0 / math.comb(m + n, m))


_LARGE = 30  # from this many samples on each side the large-sample formula is within 3.3 % of the simulation
_CAP = 100  # the larger side simulated as at most this many (5 against 100: 1.738 σ, against 200: 1.679: safe)
_DRAWS = 2000  # the 80th percentile of 2000 draws: within 0.5 % of 4000's


def _p_at(m: int, n: int, u: int) -> float:
    """The p-value :func:`mann_whitney` gives ``m`` untied samples of which ``u`` pairs lie above ``n`` others."""
    above = [min(n, max(0, u - n * i)) for i in range(m)]  # how many of the n each of the m exceeds
    return mann_whitney([a - 0.5 + i * 1e-3 for i, a in enumerate(above)], list(range(n)))[1]


@functools.lru_cache(maxsize=256)
def shift_for_power(m: int, n: int, alpha: float, power: float = 0.8) -> float:
    """The shift, in standard deviations of normal samples, by which ``m`` samples must move against ``n`` for
    :func:`mann_whitney` to reach ``alpha`` with probability ``power``; infinite where it never can.

    Small samples are simulated (a fixed seed): the large-sample formula, (z₁₋α/₂ + z_power) · √(π/3) ·
    √(1/m + 1/n), promises 1.77 σ for 5 samples against 25 at alpha 0.01, which the test reaches about two times
    in three; the 1.95 σ simulated here, four in five. Each draw's smallest shift that lifts its U to the critical
    value is an order statistic of its pairwise differences, so the power's quantile is read off at once."""
    if best_p(m, n) > alpha:
        return math.inf
    if min(m, n) >= _LARGE:
        z = NormalDist().inv_cdf(1 - alpha / 2) + NormalDist().inv_cdf(power)
        return z * math.sqrt(math.pi / 3) * math.sqrt(1 / m + 1 / n)
    m, n = min(m, _CAP), min(n, _CAP)
    lo, hi = 0, m * n  # the smallest U (pairs of current above baseline) the test calls significant
    while lo < hi:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if _p_at(m, n, mid) <= alpha else (mid + 1, hi)
    rng = np.random.default_rng(0)
    need, chunk = [], 250  # draws at a time: at most 250 × 29 × 100 differences in memory
    for _ in range(_DRAWS // chunk):
        x, y = rng.standard_normal((chunk, 1, n)), rng.standard_normal((chunk, m, 1))
        diffs = (x - y).reshape(chunk, -1)  # U(d) = how many of these lie below d
        need.append(np.partition(diffs, lo - 1, axis=1)[:, lo - 1])
    return float(np.quantile(np.concatenate(need), power))


def pair_quantile(values: Sequence[float], q: float, *, most: int = 200_000) -> float:
    """The ``q`` quantile of the differences between two of ``values`` (every ordered pair of distinct samples, or
    ``most`` pairs drawn with a fixed seed where there are more): how far one sample lies above another, which is
    what a rank test compares. NaN for fewer than two values."""
    x = np.asarray([v for v in values if math.isfinite(v)], dtype=float)
    n = len(x)
    if n < 2:
        return math.nan
    if n * (n - 1) <= most:
        d = (x[:, None] - x[None, :])[~np.eye(n, dtype=bool)]
    else:
        rng = np.random.default_rng(0)
        i, j = rng.integers(0, n, most), rng.integers(0, n - 1, most)
        d = x[i] - x[j + (j >= i)]  # j ≠ i
    return float(np.quantile(d, q, method="higher"))


def run_spread(run_medians: Sequence[float]) -> float:
    """How far the level of a figure moves between runs (processes) when nothing changed: the range of the
    run medians, (max − min) / their median. NaN with fewer than two runs.

    The range, not a standard deviation: a window holds a handful of runs, and the question is whether a new
    run falls outside everything the window has seen.
    """
    x = np.asarray([v for v in run_medians if math.isfinite(v)], dtype=float)
    if len(x) < 2:
        return math.nan
    center = float(np.median(x))
    return float((x.max() - x.min()) / abs(center)) if center != 0 else math.nan


def paired_draws(parents: Sequence[Sequence[float]], *, seed: int = 0) -> list[tuple[float, ...]]:
    """Draws for :func:`propagate`: each a tuple of one sample per parent, drawn with replacement (fixed seed);
    as many as the fewest samples any parent has. Empty when a parent has no samples."""
    arrays = [np.asarray([v for v in p if math.isfinite(v)], dtype=float) for p in parents]
    if not arrays or any(len(a) == 0 for a in arrays):
        return []
    n = min(len(a) for a in arrays)
    rng = np.random.default_rng(seed)
    draws = [a[rng.integers(0, len(a), size=n)] for a in arrays]
    return [tuple(float(d[k]) for d in draws) for k in range(n)]


def propagate(fn, parents: Sequence[Sequence[float]], *, seed: int = 0) -> list[float]:
    """Samples of a figure derived from other figures' samples (a ratio, a fit), so that it carries their noise.

    Paired resampling: each derived sample is ``fn(*draw)`` for one draw of :func:`paired_draws` (one sample of
    each parent). As many derived samples as the fewest any parent has: the derived figure has no more
    evidence than its thinnest parent, and its samples spread as the parents' do. Empty when a parent has no
    samples (the figure then truly came from single numbers).
    """
    out = []
    for draw in paired_draws(parents, seed=seed):
        v = float(fn(*draw))
        if math.isfinite(v):
            out.append(v)
    return out
