"""How small a change compare would call WORSE today, per figure: its minimum detectable effect.

A gate that cannot see a 30 % slowdown of a figure passes it unseen, night after night, and its green says
nothing; so every comparison states, for each figure, the smallest change it would call WORSE with the evidence it
has (``catches``), and counts the figures it cannot judge at a useful level (blind: more than :data:`BLIND`) and
why. The smallest such change follows compare's own rule (gpubench.compare.verdict):

- at least the figure's threshold;
- with a window of runs, beyond the window's run spread times its factor (for a figure the host sets, also beyond
  its longer history's): ``factor(k) · (max − min) / median`` of k run (or process) medians; for a figure moved to
  the host's pace in runs of 6 or more processes, the same over the runs' own medians where that is smaller;
- where the rank test decides, also the change the samples can show at ``alpha`` with power 0.8
  (:func:`sample_mde`), read from the pooled baseline's samples, which hold the spread between runs as well as
  within them; where the samples are too few for the test ever to reach alpha, nothing is WORSE on them
  (infinite);
- never, where the figure is not judged: a window still filling, a figure the host sets without 3 baseline runs,
  a case not gated, a host busy or a GPU shared during the comparison.

The goals (issue 47) are :data:`GOAL_GPU` for figures the GPU times and :data:`GOAL_HOST` for those the host sets
(gpubench.results.host_set).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Sequence
from statistics import NormalDist
from typing import Any

import numpy as np

from gpubench.timing.stats import number, pair_quantile, shift_for_power

BLIND = 0.25  # a figure that catches only changes larger than this is not judged at a useful level
GOAL_GPU, GOAL_HOST = 0.05, 0.15  # what the quick set should catch: figures the GPU times, those the host sets
POWER = 0.8

# The limits, as the rows' ``catches_limit`` says them
THRESHOLD, SPREAD, HISTORY, SAMPLES = "threshold", "run-to-run spread", "history spread", "samples"
RUN_MEDIANS = "spread of run medians"  # the rule on the window's run medians (runs of several processes)


def sample_mde(baseline: Sequence[float], n_current: int, alpha: float) -> float:
    """The change a rank test of ``n_current`` samples against ``baseline`` shows at ``alpha`` (two-sided) with
    power :data:`POWER`, as a fraction of the baseline's median; infinite where the test never can.

    The test's power follows how often a current sample lies above a baseline one. :func:`shift_for_power` finds,
    by simulating the test on normal samples, the shift it needs (in standard deviations); for normal samples
    that shift makes one sample exceed another with probability Φ(shift / √2); the change that does so for these
    samples is that quantile of the differences between two of them. Read from the samples themselves, it holds
    for any shape: a few slow samples, which inflate a standard deviation tenfold (docs/measurements.md, 'compare'),
    barely move it."""
    x = [float(v) for v in baseline if math.isfinite(float(v))]
    if len(x) < 2 or n_current < 1:
        return math.nan
    shift = shift_for_power(n_current, len(x), alpha, POWER)
    center = float(np.median(x))
    if not math.isfinite(shift) or center == 0:
        return math.inf if center != 0 else math.nan
    return pair_quantile(x, NormalDist().cdf(shift / math.sqrt(2))) / abs(center)


def smallest(threshold: float, margins: Iterable[tuple[float, str]]) -> tuple[float, str]:
    """(the smallest change called WORSE, what limits it): the threshold, or the largest of ``margins`` above it."""
    best, why = threshold, THRESHOLD
    for value, name in margins:
        if math.isfinite(value) and value > best:
            best, why = value, name
        elif not math.isnan(value) and math.isinf(value):
            return math.inf, name
    return best, why


def blind(why: str) -> tuple[float, str]:
    """Nothing is WORSE, whatever the change: ``why``."""
    return math.inf, why


def text(catches: object) -> str:
    """``≥ 4.2%``, ``blind``, or ``—`` where the figure was not compared."""
    try:
        v = float(catches)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return "—"
    if math.isnan(v):
        return "—"
    return "blind" if v > BLIND else f"≥ {100 * v:.1f}%"


def _is_host(row: dict[str, Any]) -> bool:
    return bool(row.get("set_by_host"))


def summary(rows: Iterable[dict[str, Any]]) -> dict[str, Any]:
    """Counts over compared figures: how many meet the goal of their kind (GPU-timed, host-set), the worst of each
    kind, and the blind ones by why."""
    out: dict[str, Any] = {"figures": 0, "blind": 0, "why_blind": {}}
    why: Counter[str] = Counter()
    for kind, goal in (("gpu", GOAL_GPU), ("host", GOAL_HOST)):
        out[kind] = {"figures": 0, "within_goal": 0, "goal": goal, "worst": None}
    for r in rows:
        v = number(r.get("catches"))
        if math.isnan(v):
            continue
        kind = out["host" if _is_host(r) else "gpu"]
        out["figures"] += 1
        kind["figures"] += 1
        kind["within_goal"] += int(v <= kind["goal"] + 1e-12)
        kind["worst"] = v if kind["worst"] is None else max(kind["worst"], v)
        if v > BLIND:
            out["blind"] += 1
            why[_reason(str(r.get("catches_limit") or ""))] += 1
    out["why_blind"] = dict(why.most_common())
    return out


def _reason(limit: str) -> str:
    """A limit without its figures (``window still filling (1 run)`` → ``window still filling``)."""
    return limit.split(" (")[0]


def line(rows: Iterable[dict[str, Any]]) -> str | None:
    """``catches: 120 of 125 GPU-timed figures ≥ 5% or less (worst 7.1%); 10 of 22 host-set ≤ 15% (worst blind);
    blind (> 25%): 9 (7 run-to-run spread, 2 window still filling)``; None where nothing was compared."""
    s = summary(rows)
    if not s["figures"]:
        return None
    parts = []
    for kind, name in (("gpu", "GPU-timed"), ("host", "host-set")):
        k = s[kind]
        if k["figures"]:
            parts.append(f"{k['within_goal']} of {k['figures']} {name} figure(s) to {100 * k['goal']:g}% or less "
                         f"(worst {text(k['worst']).replace('≥ ', '')})")
    head = "catches: " + "; ".join(parts)
    if s["blind"]:
        why = ", ".join(f"{n} {w}" for w, n in s["why_blind"].items())
        head += f"; blind (> {100 * BLIND:g}%): {s['blind']} ({why})"
    return head


__all__ = ["BLIND", "GOAL_GPU", "GOAL_HOST", "sample_mde", "smallest", "blind", "text", "summary", "line",
           "THRESHOLD", "SPREAD", "HISTORY", "SAMPLES", "RUN_MEDIANS"]
