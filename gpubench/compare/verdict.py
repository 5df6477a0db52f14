"""The verdict on one figure, and on every figure two sides share.

Runs are the unit of evidence. One process's samples share its level (clocks, placement, the host's state), so
samples of two runs differ by the runs' levels as well as by any change; a rank test on them calls a 30 %
between-run shift "p = 1e-50". A figure is WORSE (or BETTER) only when
1. its median moved, in the direction its ``better`` column calls a regression (or an improvement), by at
   least its threshold (:mod:`gpubench.compare.thresholds`; default 5 %; a case calibrated as "not gated" is
   never WORSE);
2. where the baseline is a window of runs (a directory of runs; :data:`MIN_RUNS` or more with the figure):
   the move is beyond the spread *between* their run medians (:func:`gpubench.timing.stats.run_spread` × a factor,
   :func:`gpubench.compare.margin.spread_factor`, which grows as the window shrinks; for a figure whose level is
   set by the host, also beyond the spread of the directory's longer history of it, since such figures drift; for
   one moved to the host's pace in runs of 6 or more processes, the range of the runs' own medians may set a
   smaller margin: :func:`gpubench.compare.margin.window_margin`), and
3. the raw samples say the move is beyond noise: the two-sided Mann-Whitney U test
   (:func:`gpubench.timing.stats.mann_whitney`) gives p ≤ alpha (default 0.01). Where a run has too few samples for
   the test to ever reach alpha (``--quick`` CPU rows, n = 3) and the window is large enough, the run medians
   alone decide (basis ``run-medians``).

A move of at least the threshold without that evidence is UNKNOWN; a smaller move is SAME. Figures whose level
is known to move between processes (:func:`moves_between_runs`, gpubench.results.host_set: host-timed, host-bound, copies
to and from host memory) are UNKNOWN, never WORSE, until the baseline has :data:`MIN_RUNS` runs of them, or
processes (a run measures them in ``--processes`` processes, each process's median one more piece of
evidence); so is every figure of a window that holds fewer than :data:`MIN_RUNS` runs of it (a nightly
history's first nights): one or two runs say nothing about how far a figure moves between processes, and
GPU-timed figures move too (a graph replay's launch cost). Between two single runs a GPU-timed figure is
judged as before, on its samples; where either side has fewer than two samples and no window (imported logs)
the threshold alone decides (basis ``threshold-only``).

What the run metadata knows (a shared GPU, a busy host, a rerun, the directory's memory) revises these
verdicts afterwards, in one place: :mod:`gpubench.compare.passes`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from gpubench.compare import sensitivity
from gpubench.compare.cross import pct_of_peak, spec_peak
from gpubench.compare.defaults import DEFAULT_ALPHA
from gpubench.compare.load import KEY
from gpubench.compare.margin import MIN_RUNS, POOLED_MOVES, spread_factor, window_margin
from gpubench.compare.pace import AT_PACE
from gpubench.compare.thresholds import Thresholds
from gpubench.console import p_text
from gpubench.results.host_set import disturbed_by_load, set_by_host
from gpubench.timing.stats import best_p, finite, mann_whitney, number, run_spread

WORSE, BETTER, SAME, UNKNOWN = "WORSE", "BETTER", "SAME", "UNKNOWN"
INCOMPARABLE = "incomparable"
# status: whether a figure was compared, and if not, why
COMPARED, ONLY_BASELINE, ONLY_CURRENT, NOT_OK = "compared", "only-baseline", "only-current", "not-ok"
# A case skipped on a side (a GPU case on the CPU backend, an implementation not installed) where neither side has a
# number of it: nothing to compare, and no news a reader must see figure by figure (the human views count them).
SKIPPED = "skipped"
# Changes are compared with thresholds at this precision, so that a 5 % shift meets a 5 % threshold despite
# binary rounding (0.95 × x / x − 1 is not exactly −0.05).
_PRECISION = 9

COLUMNS = (
    "verdict", "status", "suite", "case", "metric", "unit", "better", "baseline", "current", "change", "ratio",
    "threshold", "p_value", "basis", "n_baseline", "n_current", "cv_baseline", "cv_current",
    "suite_version_baseline", "suite_version_current", "baseline_pct_peak", "current_pct_peak", "note",
    # added with runs as the unit of evidence (older readers ignore them):
    "runs_baseline", "run_spread", "judged_on",
    # added with the gate's memory: why the host sets the figure ("" it does not), each side's host load during
    # the case, and for a regression the run it has been WORSE since and for how many nights
    "set_by_host", "host_load_baseline", "host_load_current", "since", "nights",
    # added with the sensitivity: the smallest change this comparison would call WORSE (inf: none, blind) and what
    # sets it (gpubench.compare.sensitivity)
    "catches", "catches_limit",
)
# Worst first: regressions, then what could not be decided or compared, then the rest.
_ORDER = {WORSE: 0, UNKNOWN: 1, NOT_OK: 2, INCOMPARABLE: 3, ONLY_BASELINE: 4, ONLY_CURRENT: 5, SAME: 6, BETTER: 7,
          SKIPPED: 8}


# Why a row's level moves between processes ("" when nothing says so): gpubench.results.host_set says which figures.
moves_between_runs = set_by_host


def judge(
    baseline: Sequence[float], current: Sequence[float], better: str, threshold: float,
    alpha: float = DEFAULT_ALPHA, *, baseline_value: float | None = None, current_value: float | None = None,
    baseline_runs: Sequence[float] = (), per_run_n: int | None = None, moves: str = "", window: bool = False,
    history_runs: Sequence[float] = (), run_count: int | None = None, current_processes: int = 1,
    history_count: int | None = None, run_medians: Sequence[float] = (), history_medians: Sequence[float] = (),
) -> dict[str, Any]:
    """Verdict, change, p_value, basis and note for one figure.

    ``baseline``/``current`` are the raw samples (a window's runs pooled); ``*_value`` the figure where there
    are no samples. ``baseline_runs``: each baseline run's median (empty or one: no window). ``per_run_n``:
    the fewest samples a baseline run has (default: all of ``baseline``). ``moves``: why the figure's level
    moves between processes (:func:`moves_between_runs`), "" if nothing says it does. ``window``: the baseline
    came from a directory of runs, so fewer than MIN_RUNS runs of the figure is a history still filling.
    ``history_runs``: run medians of the directory's longer history (the window's included); with ``moves``,
    a change must also clear that history's spread × its factor. ``run_count``: how many runs
    ``baseline_runs`` come from, where a run gave one value per process (gpubench.run.per_process); for the notes.
    ``current_processes``: how many processes the current run's samples come from, for a figure judged at the
    host's pace (the caller's to say; 1 otherwise); for a host-timed or host-bound figure (``moves``) measured so in
    every window run, the factor is the pooled one (:func:`spread_factor`), and in every run of the history
    (``history_count`` runs), the history's too. ``run_medians``/``history_medians``: one median per window (and
    history) run, for the rule on them (:func:`window_margin`).
    """
    runs = [float(v) for v in baseline_runs if finite(v)]
    k = len(runs)
    if k >= 2:
        b = float(np.median(runs))
    else:
        b = float(np.median(baseline)) if len(baseline) else number(baseline_value)
    c = float(np.median(current)) if len(current) else number(current_value)
    spread = run_spread(runs) if k >= 2 else math.nan
    out: dict[str, Any] = {"baseline": b, "current": c, "change": math.nan, "ratio": math.nan,
                           "p_value": math.nan, "basis": "samples", "note": "", "runs_baseline": k,
                           "run_spread": spread}
    n_base_run = len(baseline) if per_run_n is None else per_run_n
    if len(baseline) < 2 or len(current) < 2:
        out["basis"] = "threshold-only"
    # Runs, not processes, decide whether there is evidence enough: a run's few processes can all land in one mode
    # of a figure of two levels (docs/measurements.md, 'compare'); past that, each process is one more value.
    n_runs = run_count if run_count is not None and 0 < run_count <= k else k
    pooled = max(1, current_processes) if moves in POOLED_MOVES else 1
    out["catches"], out["catches_limit"] = catches(
        threshold, alpha, runs=runs, n_runs=n_runs, moves=moves, window=window, history_runs=history_runs,
        basis=out["basis"], baseline=baseline, n_current=len(current), n_base_run=n_base_run, pooled=pooled,
        history_count=history_count, run_medians=run_medians, history_medians=history_medians)
    if not (math.isfinite(b) and math.isfinite(c)) or b == 0:
        return {**out, "verdict": UNKNOWN, "note": "no figure to compare" if b != 0 else "baseline is 0",
                "catches": math.inf, "catches_limit": "no figure"}
    out["ratio"] = c / b
    out["change"] = change = c / b - 1.0
    if better not in ("higher", "lower"):
        return {**out, "verdict": UNKNOWN, "note": f"direction unknown (better={better!r})", "catches": math.inf,
                "catches_limit": "no direction"}
    if out["basis"] == "samples":
        out["p_value"] = mann_whitney(current, baseline)[1]
    worse_by = -change if better == "higher" else change  # > 0: a regression
    if change == 0 or round(abs(change), _PRECISION) < threshold:
        note = "significant, but within the threshold" if out["p_value"] <= alpha else ""
        return {**out, "verdict": SAME, "note": note}
    direction = WORSE if worse_by > 0 else BETTER
    n_text = f"n={len(baseline)} vs {len(current)}"
    if k >= MIN_RUNS and n_runs >= MIN_RUNS:
        return _on_runs(out, direction, alpha, runs=runs, n_runs=n_runs, pooled=pooled, moves=moves,
                        history_runs=history_runs, history_count=history_count, n_current=len(current),
                        n_base_run=n_base_run, n_text=n_text, run_medians=run_medians,
                        history_medians=history_medians)
    return _short_of_runs(out, direction, alpha, k=k, runs=n_runs, moves=moves, window=window, n_text=n_text)


def catches(threshold: float, alpha: float, *, runs: Sequence[float], n_runs: int, moves: str, window: bool,
            history_runs: Sequence[float], basis: str, baseline: Sequence[float], n_current: int,
            n_base_run: int, pooled: int = 1, history_count: int | None = None, run_medians: Sequence[float] = (),
            history_medians: Sequence[float] = ()) -> tuple[float, str]:
    """The smallest change :func:`judge` would call WORSE with this evidence, and what sets it
    (gpubench.compare.sensitivity): the rule of :func:`_on_runs` and :func:`_short_of_runs`, read backwards."""
    if not math.isfinite(threshold):
        return sensitivity.blind("not judged")
    k = len(runs)
    if k >= MIN_RUNS and n_runs >= MIN_RUNS:
        margin = window_margin(runs, n_runs=n_runs, pooled=pooled, moves=moves, history_runs=history_runs,
                               history_count=history_count, run_medians=run_medians,
                               history_medians=history_medians)
        margins = [(margin.value, margin.limit)]
        if not (basis != "samples" or min(n_current, n_base_run) < 2 or best_p(n_current, max(1, n_base_run)) > alpha):
            margins.append((sensitivity.sample_mde(baseline, n_current, alpha), sensitivity.SAMPLES))
        return sensitivity.smallest(threshold, margins)
    if window:
        return sensitivity.blind(f"window still filling ({max(n_runs, 1)} of {MIN_RUNS} runs)")
    if moves:
        return sensitivity.blind(f"set by the host, too few runs ({max(n_runs, 1)} of {MIN_RUNS})")
    if basis == "threshold-only":
        return threshold, sensitivity.THRESHOLD
    if best_p(n_current, len(baseline)) > alpha:
        return sensitivity.blind(f"too few samples (p ≥ {best_p(n_current, len(baseline)):.2g})")
    return sensitivity.smallest(threshold, [(sensitivity.sample_mde(baseline, n_current, alpha), sensitivity.SAMPLES)])


def _on_runs(out: dict[str, Any], direction: str, alpha: float, *, runs: Sequence[float], n_runs: int, pooled: int,
             moves: str, history_runs: Sequence[float], history_count: int | None, n_current: int, n_base_run: int,
             n_text: str, run_medians: Sequence[float], history_medians: Sequence[float]) -> dict[str, Any]:
    """The verdict on a move of the threshold or more where the baseline has runs enough (``runs``: their medians,
    or their processes') to know how far the figure moves between runs: beyond :func:`window_margin`, and beyond
    noise."""
    change = out["change"]
    margin = window_margin(runs, n_runs=n_runs, pooled=pooled,
                           moves=moves, history_runs=history_runs, history_count=history_count,
                           run_medians=run_medians, history_medians=history_medians)
    spread, factor, over = margin.spread, margin.factor, margin.over
    out["run_spread"] = spread
    if not abs(change) > margin.value:
        return {**out, "verdict": UNKNOWN,
                "note": f"{direction.lower()} by the threshold or more, but within the run-to-run spread "
                        f"({100 * spread:.1f}% over {over} × {factor:g})"}
    few = out["basis"] != "samples" or min(n_current, n_base_run) < 2 or \
        best_p(n_current, max(1, n_base_run)) > alpha
    if few:
        return {**out, "verdict": direction, "basis": "run-medians",
                "note": f"beyond the run-to-run spread ({100 * spread:.1f}% over {over} × {factor:g}); "
                        f"{n_text}: too few samples per run for the rank test, the run medians decide"}
    if out["p_value"] <= alpha:
        return {**out, "verdict": direction,
                "note": f"beyond the run-to-run spread ({100 * spread:.1f}% over {over} × {factor:g})"}
    return {**out, "verdict": UNKNOWN,
            "note": f"{direction.lower()} by the threshold or more, beyond the run-to-run spread, but within "
                    f"noise (p={p_text(out['p_value'])} > {alpha:g}; {n_text})"}


def _short_of_runs(out: dict[str, Any], direction: str, alpha: float, *, k: int, runs: int, moves: str,
                   window: bool, n_text: str) -> dict[str, Any]:
    """The verdict on a move of the threshold or more where the baseline has fewer than MIN_RUNS runs of the
    figure: a window still filling and a figure whose level moves between processes stay UNKNOWN; between
    two single runs the samples (or, without samples, the threshold) decide."""
    if window:
        return {**out, "verdict": UNKNOWN,
                "note": f"{direction.lower()} by the threshold or more; the baseline window holds {max(runs, 1)} "
                        f"run(s) of this figure, and changes are judged from {MIN_RUNS} on (keep the runs in the "
                        "directory)"}
    if moves:
        measured = f", in {k} processes" if k > 1 else ""
        return {**out, "verdict": UNKNOWN,
                "note": f"{moves}: its level moves between processes; judging it needs {MIN_RUNS} or more "
                        f"baseline runs (has {max(runs, 1)}{measured}): compare against a directory of runs"}
    if out["basis"] == "threshold-only":
        return {**out, "verdict": direction, "note": f"{n_text}: no spread to test; the threshold alone decides"}
    if out["p_value"] <= alpha:
        return {**out, "verdict": direction}
    return {**out, "verdict": UNKNOWN,
            "note": f"{direction.lower()} by the threshold or more, but within noise "
                    f"(p={p_text(out['p_value'])} > {alpha:g}; {n_text})"}



def _samples(row: dict[str, Any]) -> list[float]:
    s = row.get("samples")
    return [float(v) for v in s] if s is not None else []


def _has_figure(row: dict[str, Any] | None) -> bool:
    return row is not None and (any(math.isfinite(v) for v in _samples(row)) or math.isfinite(number(row.get("value"))))


def _differing_settings(b: dict[str, Any], c: dict[str, Any]) -> list[str]:
    """Row columns that make two rows of one key different figures (a graph replay against eager calls)."""
    out = []
    for col in FIGURE_SETTINGS:
        bv, cv = b.get(col), c.get(col)
        if _given(bv) and _given(cv) and bv != cv:
            out.append(f"{col}: {bv} → {cv}")
    return out


def _given(x: object) -> bool:
    return x is not None and not (isinstance(x, float) and math.isnan(x))


# Columns outside the case id that change what a row measures: rows that differ in one are not one figure.
FIGURE_SETTINGS = ("graph",)


def _efficiency(b: dict[str, Any], c: dict[str, Any]) -> tuple[float, float] | None:
    """Each side's spec peak, where both rows have one (the cross-cluster verdict is then on % of peak)."""
    pb, pc = spec_peak(b), spec_peak(c)
    return (pb, pc) if pb and pc else None


def compare_frames(base: pd.DataFrame, cur: pd.DataFrame, thresholds: Thresholds,
                   alpha: float = DEFAULT_ALPHA, *, cross_cluster: bool = False, window: bool = False) -> pd.DataFrame:
    """One row per (suite, case, metric) of either pooled side (:func:`gpubench.compare.load.pool`), worst
    first, with the columns in COLUMNS. Figures neither side has a number for (a copy's TFLOP/s) are left out.

    ``cross_cluster``: the sides are different hardware. A figure with a spec peak on both sides is judged on
    each side's fraction of its own peak (efficiency, ``judged_on`` = "% of peak"); any other figure has its
    ratio reported and is not judged (UNKNOWN). ``window``: ``base`` pools a window of a directory of runs
    (see :func:`judge`).
    """
    b_rows = {tuple(r[k] for k in KEY): r for r in base.to_dict("records")}
    c_rows = {tuple(r[k] for k in KEY): r for r in cur.to_dict("records")}
    keys = list(dict.fromkeys([*b_rows, *c_rows]))
    out = []
    for key in keys:
        b, c = b_rows.get(key), c_rows.get(key)
        if not (_has_figure(b) or _has_figure(c)) and all(r is None or r.get("status") == "ok" for r in (b, c)):
            continue
        ref = c if c is not None else b
        suite, case, metric = (str(x) for x in key)
        row: dict[str, Any] = {col: None for col in COLUMNS}
        row.update(suite=key[0], case=key[1], metric=key[2], unit=ref.get("unit"), better=ref.get("better"),
                   threshold=thresholds.for_row(suite, metric, case),
                   suite_version_baseline=b.get("suite_version") if b else None,
                   suite_version_current=c.get("suite_version") if c else None, note="", judged_on="figure",
                   set_by_host=disturbed_by_load(ref), host_load_baseline=number(b.get("host_load")) if b else None,
                   host_load_current=number(c.get("host_load")) if c else None)
        for name, r in (("baseline", b), ("current", c)):
            if r is not None:
                row[name] = number(r.get("value"))
                row[f"n_{name}"] = int(number(r.get("n"))) if math.isfinite(number(r.get("n"))) else 0
                row[f"cv_{name}"] = number(r.get("cv"))
        if not (_has_figure(b) or _has_figure(c)) and all(r is None or r.get("status") in ("ok", SKIPPED)
                                                          for r in (b, c)):
            row.update(status=SKIPPED, note=_not_ok_note(b, c))
        elif b is None or c is None:
            row.update(status=ONLY_CURRENT if b is None else ONLY_BASELINE, note=_not_ok_note(b, c))
        elif b.get("suite_version") != c.get("suite_version"):
            row.update(status=INCOMPARABLE, verdict=INCOMPARABLE,
                       note=f"suite version {b.get('suite_version')} → {c.get('suite_version')}: "
                            "what the suite measures changed; promote a new baseline")
        elif b.get("status") != "ok" or c.get("status") != "ok":
            row.update(status=NOT_OK, note=_not_ok_note(b, c))
        else:
            row["status"] = COMPARED
            row.update(_judge_pair(b, c, str(ref.get("better")), row["threshold"], alpha, cross_cluster, window))
            differ = _differing_settings(b, c)
            not_gated = thresholds.not_gated(suite, metric, case)
            if differ:
                row.update(verdict=UNKNOWN, note=f"not one figure ({'; '.join(differ)}): not judged",
                           catches=math.inf, catches_limit="not one figure")
            elif not_gated:
                row.update(catches=math.inf, catches_limit="not gated")
                if row["verdict"] in (WORSE, BETTER):
                    row.update(verdict=UNKNOWN, note=f"not gated ({not_gated})")
        if b is not None and row["baseline"] is not None:
            row["baseline_pct_peak"] = pct_of_peak(b, row["baseline"])
        if c is not None and row["current"] is not None:
            row["current_pct_peak"] = pct_of_peak(c, row["current"])
        out.append(row)
    return worst_first(pd.DataFrame(out, columns=list(COLUMNS)))


def _not_ok_note(b: dict[str, Any] | None, c: dict[str, Any] | None) -> str:
    """``current skipped: needs a GPU``: each side's row that is not ok, with its message (once, where both sides
    say the same)."""
    if b is not None and c is not None and (b.get("status"), b.get("message")) == (c.get("status"), c.get("message")) \
            and b.get("status") != "ok":
        return f"baseline and current {b.get('status')}: {b.get('message') or ''}".rstrip(": ")
    return "; ".join(f"{name} {r.get('status')}: {r.get('message') or ''}".rstrip(": ")
                     for name, r in (("baseline", b), ("current", c)) if r is not None and r.get("status") != "ok")


def worst_first(rows: pd.DataFrame) -> pd.DataFrame:
    """Verdict rows sorted: WORSE first (largest regression first), then what could not be decided, then the rest."""
    if rows.empty:
        return rows
    group = [(_ORDER.get(v, 9) if s == COMPARED else _ORDER.get(s, 9)) for v, s in zip(rows["verdict"], rows["status"])]
    worse_by = [_worse_by(ch, bt) for ch, bt in zip(rows["change"], rows["better"])]
    return rows.assign(_g=group, _w=worse_by).sort_values(["_g", "_w"], ascending=[True, False], kind="mergesort") \
        .drop(columns=["_g", "_w"]).reset_index(drop=True)


def _judge_pair(b: dict[str, Any], c: dict[str, Any], better: str, threshold: float, alpha: float,
                cross_cluster: bool, window: bool) -> dict[str, Any]:
    bs, cs = _samples(b), _samples(c)
    runs = list(b.get("run_values") or [])
    history = list(b.get("history_values") or [])
    per_run_n = int(b["run_n"]) if finite(b.get("run_n")) else None
    run_count = int(b["run_count"]) if finite(b.get("run_count")) else None
    moves = moves_between_runs(b) or moves_between_runs(c)
    # Tonight's pooled median of its processes, where both sides were moved to the host's pace (gpubench.compare.margin)
    current_processes = (len(c.get("run_values") or []) or 1) if _at_pace(b) and _at_pace(c) else 1
    history_count = int(b["history_count"]) if finite(b.get("history_count")) else None
    if not cross_cluster:
        return judge(bs, cs, better, threshold, alpha, baseline_value=b.get("value"), current_value=c.get("value"),
                     baseline_runs=runs, per_run_n=per_run_n, moves=moves, window=window, history_runs=history,
                     run_count=run_count, current_processes=current_processes, history_count=history_count,
                     run_medians=list(b.get("run_medians") or []),
                     history_medians=list(b.get("history_medians") or []))
    peaks = _efficiency(b, c)
    if peaks is None:
        r = judge(bs, cs, better, math.inf, alpha, baseline_value=b.get("value"), current_value=c.get("value"))
        return {**r, "verdict": UNKNOWN, "judged_on": "not judged",
                "note": "different hardware and no spec peak for this figure: the ratio is shown, not judged"}
    pb, pc = peaks
    # Efficiency: each side's figure as a fraction of its own hardware's peak, then the usual rule.
    r = judge([v / pb for v in bs], [v / pc for v in cs], better, threshold, alpha,
              baseline_value=number(b.get("value")) / pb, current_value=number(c.get("value")) / pc,
              baseline_runs=[v / pb for v in runs], per_run_n=per_run_n, moves=moves, window=window,
              history_runs=[v / pb for v in history], run_count=run_count)
    # The figures themselves stay in baseline/current (and their ratio); change is the efficiency's.
    r.update(baseline=r["baseline"] * pb, current=r["current"] * pc, ratio=(r["current"] * pc) / (r["baseline"] * pb)
             if r["baseline"] else math.nan, judged_on="% of peak")
    r["note"] = "; ".join(x for x in ("on % of each side's spec peak", r["note"]) if x)
    return r


def _at_pace(row: dict[str, Any]) -> bool:
    flag = row.get(AT_PACE)
    return isinstance(flag, (bool, np.bool_)) and bool(flag)


def _worse_by(change: object, better: str) -> float:
    ch = number(change)
    if not math.isfinite(ch):
        return -math.inf
    return -ch if better == "higher" else ch


__all__ = ["judge", "catches", "compare_frames", "moves_between_runs", "spread_factor",
           "MIN_RUNS", "worst_first", "COLUMNS", "WORSE", "BETTER", "SAME", "UNKNOWN", "INCOMPARABLE",
           "COMPARED", "ONLY_BASELINE", "ONLY_CURRENT", "NOT_OK", "SKIPPED", "DEFAULT_ALPHA"]
