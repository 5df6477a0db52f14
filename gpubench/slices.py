"""A figure the host sets, sampled across a process's whole measuring time rather than in one stretch.

On one H100 (2026-11-27, results/reference/h100/host-levels-20261127/) the host-set figures have two levels and
the level belongs to the moment, not to the process: one process reads both (an event round trip 18.7 and 29.6
µs, a launch 8.3 and 11.6 µs), a level lasts some 0.1-0.7 s, and blocks 25 ms apart are near independent. A case
that a process measures in one stretch of 0.1-0.3 s (``--quick``) draws one level: three processes draw three,
and the run's figure lands on either level, run to run (24-45 % apart on the nights of one H100). So each
process measures such a case in slices spread over its measuring time, as asv measures its benchmarks in
rounds: the first slice as before (checked, warmed up, its share of the budget), then :data:`LATER` more,
round-robin over the process's sliced cases, each a short slice of its own. The run's samples of the figure
then come from some fifteen moments, and compare judges it on the level the host reached
(gpubench.compare.pool: a low quantile), not on the median of a mixture of two levels.

A case whose first slice cost more than :data:`SLICE_COST_S` (a 1 GiB copy, the graph of 1000 nodes) is not
sliced: its input sets and warm-up cost more than the slices would gain (its samples last 20-100 ms each).
Which cases are sliced is decided once, by the run's own process, so that every process slices the same cases.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Iterable
from typing import Any

from gpubench import processes as proc

LATER = 4  # slices after the first, per process
SLICE_COST_S = 0.5  # a case whose first slice cost more (case_s) is measured in that slice only
LATER_MIN_SAMPLES = 3


def later_config(config: Any, processes: int) -> Any:
    """The engine configuration of a later slice: its share of the budget; no check (this process checked the
    same workload in its first slice); one warm-up batch, which sizes the samples (the device and the process
    are warm: they have been measuring all along)."""
    return dataclasses.replace(
        config, budget_s=config.budget_s / (max(1, processes) * (LATER + 1)),
        min_samples=min(config.min_samples, LATER_MIN_SAMPLES), check=False,
        min_warmup_s=0.0, max_warmup_s=max(config.min_sample_s, 1e-3), settle_window=1)


def chosen(rows: Iterable[dict[str, Any]], cases: dict[str, list[str]]) -> dict[str, list[str]]:
    """Of ``cases`` (suite -> ids measured per process), those whose first slice was ok and cost at most
    :data:`SLICE_COST_S` (``rows``: the run's rows of its first slices)."""
    cost: dict[tuple[str, str], float] = {}
    ok: set[tuple[str, str]] = set()
    for r in rows:
        key = (str(r.get("suite")), str(r.get("case")))
        if r.get("stop") == "derived":
            continue
        spent = r.get("case_s")
        if isinstance(spent, (int, float)) and math.isfinite(spent):
            cost[key] = max(cost.get(key, 0.0), float(spent))
        if r.get("status") == "ok":
            ok.add(key)
    out = {suite: [c for c in ids if (suite, c) in ok and cost.get((suite, c), math.inf) <= SLICE_COST_S]
           for suite, ids in cases.items()}
    return {s: ids for s, ids in out.items() if ids}


def measure_later(cases: list[tuple[Any, Any]], measure: Callable[[Any, Any], list[dict[str, Any]]],
                  target_cv: float, stop: Callable[[], bool] = lambda: False) -> list[dict[str, Any]]:
    """:data:`LATER` rounds over ``cases`` ((suite, case) pairs), each case measured once per round by
    ``measure``; one row per case and metric with every round's samples (labelled process 0: the caller's
    process; noisy over ``target_cv``), or none for a case no round measured ok."""
    merged: dict[tuple[str, str, str], dict[str, Any]] = {}
    for _ in range(LATER):
        for suite, case in cases:
            if stop():
                return list(merged.values())
            for r in measure(suite, case):
                key = (r["suite"], r["case"], r["metric"])
                if key not in merged:
                    if r.get("status") == "ok":
                        merged[key] = {**r, "sample_process": [0] * len(r.get("samples") or [])}
                    continue
                merged[key] = proc.pool(merged[key], r, 0, target_cv)
    return list(merged.values())


def joined(rows: list[dict[str, Any]], later: list[dict[str, Any]], target_cv: float) -> list[dict[str, Any]]:
    """``rows`` (first slices), each with the samples of its case's later slices (one process's: labelled 0)."""
    by_key = {(r["suite"], r["case"], r["metric"]): r for r in later}
    out = []
    for r in rows:
        more = by_key.get((r["suite"], r["case"], r["metric"]))
        out.append(proc.pool(r, more, 0, target_cv) if more is not None else r)
    return out


__all__ = ["LATER", "SLICE_COST_S", "later_config", "chosen", "measure_later", "joined"]
