"""Summary statistics derived from raw samples.

Tables keep the raw samples; everything here is recomputed from them, never stored alone.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

STAT_FIELDS = ("median", "mean", "min", "max", "stdev", "iqr", "cv", "n")


def summarize(samples: Sequence[float]) -> dict[str, float]:
    """Median, mean, min, max, sample stdev (n-1), IQR (linear-interpolated quartiles), CV and n.

    CV is stdev / |mean|: the relative spread the stop rule and the ``noisy`` flag use. With fewer than two
    samples stdev, IQR and CV are NaN (unknown, not zero: one sample says nothing about spread).
    """
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


def cv(samples: Sequence[float]) -> float:
    """Coefficient of variation alone (the stop rule asks for it after every sample)."""
    return summarize(samples)["cv"]
