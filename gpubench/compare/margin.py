"""How far from a window of runs a figure must move before it is more than run-to-run noise.

compare judges a figure against a window of runs (gpubench.compare.verdict): a move is a change only beyond the
window's spread (the range of its run medians, or of its processes' medians where runs measured a figure in several
processes) times a factor that says how far one more draw lies from such a window when nothing changed. This
module owns those factors and the rule that picks the spread (:func:`window_margin`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from gpubench.compare import sensitivity
from gpubench.timing.stats import finite, run_spread

MIN_RUNS = 3  # baseline runs of a figure before its run-to-run spread is known at all
# The simulated 99th percentile of |new − median| / range over k run medians (tests/test_compare_verdict.py;
# docs/measurements.md, 'compare'): an unchanged figure is WORSE about 0.5 % of the time. A count between two takes
# the smaller one's (larger) factor.
_SPREAD_FACTOR = {3: 7.0, 4: 3.5, 5: 2.5, 6: 2.0, 7: 1.8, 8: 1.6, 9: 1.5, 10: 1.4, 12: 1.25, 15: 1.15, 20: 1.0,
                  30: 0.85, 45: 0.75, 60: 0.65}
# For R window runs of m processes against a run's median of m (gpubench.run.per_process): the same percentile, a run's
# processes sharing a quarter of their variance. Only figures at the host's pace take it; the others share, or draw, a
# level per process (docs/compare.md, 'The verdict'; docs/measurements.md, 'compare').
POOLED_MOVES = ("host-timed", "host-bound")  # the figures whose samples carry the host's pace (gpubench.machine.host_pace)
_POOLED_FACTOR = {
    2: {3: 1.96, 4: 1.49, 5: 1.29, 6: 1.15, 7: 1.02, 8: 0.96, 10: 0.87, 12: 0.79, 15: 0.72, 20: 0.63},
    3: {3: 1.20, 4: 0.97, 5: 0.84, 6: 0.77, 7: 0.71, 8: 0.66, 10: 0.59, 12: 0.55, 15: 0.50, 20: 0.47},
    4: {3: 0.93, 4: 0.78, 5: 0.69, 6: 0.63, 7: 0.57, 8: 0.55, 10: 0.50, 12: 0.46, 15: 0.43, 20: 0.40},
    5: {3: 0.81, 4: 0.69, 5: 0.61, 6: 0.56, 7: 0.52, 8: 0.49, 10: 0.45, 12: 0.43, 15: 0.40, 20: 0.38},
    # 6 (`--processes 6`): a count above the table's takes its largest count's
    6: {3: 0.72, 4: 0.62, 5: 0.55, 6: 0.50, 7: 0.47, 8: 0.45, 10: 0.41, 12: 0.39, 15: 0.37, 20: 0.35},
}

# The range of the window's *run* medians × the single-draw factor, for paced figures measured in this many processes a
# run or more: the processes' range is set by the window's most distant process. Serving runs of 3, it called too many
# unchanged figures WORSE (results/reference/h200/nights6-20261201/, processes-20261129/, run-medians-20261130/).
RUN_MEDIANS_FROM = 6
# ... and only where the directory holds this many run medians of the figure (the window's included): 5 that happen to
# agree are no guard against the host's level drifting (false alarms: results/reference/h200/run-medians-20261130/).
RUN_MEDIANS_HISTORY = 10


def spread_factor(runs: int, *, window_runs: int | None = None, current_processes: int = 1) -> float:
    """The multiple of the window's run spread a change must exceed (see _SPREAD_FACTOR); inf below MIN_RUNS.
    ``runs`` values from ``window_runs`` runs, each of ``current_processes`` processes as the current run is, take
    the pooled factor (_POOLED_FACTOR; the caller asks only for figures judged at the host's pace)."""
    if runs < MIN_RUNS:
        return math.inf
    m = _pooled(runs, window_runs, current_processes)
    if m > 1:
        table = _POOLED_FACTOR[min(m, max(_POOLED_FACTOR))]
        return table[max(r for r in table if r <= window_runs)]
    return _SPREAD_FACTOR[max(k for k in _SPREAD_FACTOR if k <= runs)]


def _pooled(runs: int, window_runs: int | None, current_processes: int) -> int:
    """The current run's processes where the pooled factor applies (``runs`` values are ``window_runs`` runs of as
    many processes each), else 1."""
    m = current_processes
    pooled = m >= 2 and window_runs is not None and window_runs >= MIN_RUNS and runs == window_runs * m
    return m if pooled else 1


@dataclass(frozen=True)
class Margin:
    """How far from the window's median a figure must move before it is more than run-to-run noise: ``factor`` ×
    ``spread`` (a range over medians, relative), what the spread is ``over`` (for the notes) and what sets it
    (``limit``, gpubench.compare.sensitivity's name)."""

    spread: float
    factor: float
    over: str
    limit: str

    @property
    def value(self) -> float:
        return self.factor * self.spread


def window_margin(runs: Sequence[float], *, n_runs: int, pooled: int, moves: str, history_runs: Sequence[float],
                  history_count: int | None, run_medians: Sequence[float] = (),
                  history_medians: Sequence[float] = ()) -> Margin:
    """The rule of a window of ``n_runs`` runs (``runs``: their medians, or their processes' medians): beyond the
    range of those values × :func:`spread_factor`; for a figure the host sets (``moves``), also beyond its longer
    history's. Where every run, tonight's too, pooled :data:`RUN_MEDIANS_FROM` or more processes at the host's pace,
    and the directory holds :data:`RUN_MEDIANS_HISTORY` or more runs of the figure, the range of the *run* medians
    (``run_medians``, one a run, and ``history_medians``, the window's and the history's) × the single-draw factor
    may set a smaller margin, and then does."""
    k = len(runs)
    m = _pooled(k, n_runs, pooled)
    best = Margin(run_spread(runs), spread_factor(k, window_runs=n_runs, current_processes=pooled),
                  _units(k, n_runs, m), sensitivity.SPREAD)
    history = [float(v) for v in history_runs if finite(v)]
    if moves and len(history) > k:
        # a host-set figure drifts: the longer history's range says more than a quiet stretch of the window
        h = Margin(run_spread(history), spread_factor(len(history), window_runs=history_count,
                                                      current_processes=pooled),
                   _units(len(history), history_count, _pooled(len(history), history_count, pooled)),
                   sensitivity.HISTORY)
        best = h if h.value > best.value else best
    medians = [float(v) for v in run_medians if finite(v)]
    longer = [float(v) for v in history_medians if finite(v)]
    if m < RUN_MEDIANS_FROM or len(medians) != n_runs or len(longer) < RUN_MEDIANS_HISTORY:
        return best
    on_runs = Margin(run_spread(medians), spread_factor(len(medians)),
                     f"the medians of {len(medians)} runs of {m} processes", sensitivity.RUN_MEDIANS)
    if len(longer) > len(medians):
        h = Margin(run_spread(longer), spread_factor(len(longer)), f"the medians of the directory's {len(longer)} runs",
                   sensitivity.RUN_MEDIANS)
        on_runs = h if h.value > on_runs.value else on_runs
    return on_runs if on_runs.value < best.value else best


def _units(k: int, runs: int | None, pooled: int = 1) -> str:
    """``5 runs``, or ``15 processes of 5 runs`` where runs gave one value per process (``… against this run's
    3`` where the pooled factor applies)."""
    if runs is not None and 0 < runs < k:
        return f"{k} processes of {runs} run{'s' if runs > 1 else ''}" + (
            f" against this run's {pooled}" if pooled > 1 else "")
    return f"{k} runs"



__all__ = ["MIN_RUNS", "POOLED_MOVES", "RUN_MEDIANS_FROM", "RUN_MEDIANS_HISTORY", "Margin", "spread_factor",
           "window_margin"]
