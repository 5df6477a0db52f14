"""The one place a result row is built, beside the schema (:mod:`gpubench.results`) it fills.

A row is one figure: a suite's case and metric, the stats of its samples, and what the engine knew of how it was
measured. Its ``status`` and ``message`` are set last, by :func:`finish` alone: a column noted on the way (the
graph fallback's "timed eager: ...") never replaces why a case failed or was skipped.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from gpubench.errors import MAX_LINE
from gpubench.timing import engine
from gpubench.run import per_process as proc
from gpubench.results import STATS
from gpubench.timing.stats import finite, summarize
from gpubench.suite import Case, Derived, Metric, Suite

# Messages in tables are for people; keep them to what fits a table cell and a log line.
MAX_MESSAGE = MAX_LINE



def figure(base: Mapping[str, Any], suite: str, version: int, case: Case, metric: Metric, samples: list[float],
           value: float | None = None) -> dict[str, Any]:
    """The columns of one figure: who measured it (``base``), which case and metric, its samples and their
    stats (``value`` their median unless given: a derived figure's own)."""
    st = summarize(samples)
    return {
        **base,
        "suite": suite,
        "suite_version": version,
        "case": case.id,
        **case.as_dict(),
        "metric": metric.name,
        "unit": metric.unit,
        "better": metric.better,
        "value": st["median"] if value is None else float(value),
        **{k: st[k] for k in STATS},
        "n": st["n"],
        "samples": samples,
    }


def joined(*messages: Any) -> str:
    """Messages of one row, in order, the empty ones left out (no leading or doubled "; "), cut to a cell."""
    return "; ".join(str(m) for m in messages if m)[:MAX_MESSAGE]


def finish(row: dict[str, Any], status: str, message: str) -> dict[str, Any]:
    """The row's status and message, set last: the case's own message (why it failed or skipped) first, then what
    the workload noted in its extra columns (the graph fallback's "timed eager: ..."), which must not replace it."""
    row["status"] = status
    row["message"] = joined(message, row.get("message"))
    return row


def case_rows(
    suite: Suite,
    case: Case,
    base: dict[str, Any],
    *,
    status: str,
    message: str = "",
    workload: Any = None,
    meas: engine.Measurement | None = None,
    config: engine.EngineConfig = engine.FULL,
    case_s: float | None = None,
) -> list[dict[str, Any]]:
    """One row per declared metric of ``suite`` for ``case``; ``case_s``: the seconds the case took."""
    per_metric: dict[str, list[float]] = {}
    if status == "ok" and meas is not None and workload is not None:
        per_metric = engine.metric_samples(workload, suite.metrics, meas.samples_s)
    rows = []
    for m in suite.metrics:
        row = figure(base, suite.name, suite.version, case, m, [float(s) for s in per_metric.get(m.name, [])])
        row.update({"processes": 1, "sample_process": [], "host_pace": _paces(meas, row["samples"]),
                    "noisy": bool(not math.isnan(row["cv"]) and row["cv"] > config.target_cv),
                    **_how(workload, meas), "case_s": case_s})
        if workload is not None:
            row.update(workload.extra)
        if meas is not None:
            row.update(meas.columns)
        rows.append(finish(row, status, message))
    return rows


def _paces(meas: engine.Measurement | None, samples: list[float]) -> list[float]:
    """The host's pace (µs) before each of a row's samples, where the engine took one for every sample."""
    paces = meas.host_pace_s if meas is not None else []
    return [p * 1e6 for p in paces] if samples and len(paces) == len(samples) else []


def _how(workload: Any, meas: engine.Measurement | None) -> dict[str, Any]:
    """What the engine knew of how a case was measured: its work, batching, warm-up, check and the device's state."""
    state = meas.state if meas else {}
    chk = meas.check if meas else None
    return {
        "work_bytes": int(workload.bytes) if workload is not None else None,
        "work_flops": int(workload.flops) if workload is not None else None,
        "inner": meas.inner if meas else None,
        "sets": meas.sets if meas else None,
        "host_us": meas.host_issue_s * 1e6 if meas and meas.host_issue_s is not None else None,
        "host_bound": meas.host_bound if meas else None,
        "warmup_s": meas.warmup_s if meas else None,
        "settled": meas.settled if meas else None,
        "stop": meas.stop if meas else None,
        "check_error": chk.error if chk else None,
        "check_tolerance": chk.tolerance if chk else None,
        **{k: state.get(k) for k in ("sm_clock_mhz", "mem_clock_mhz", "power_w", "temp_c", "throttle")},
    }


def derived_rows(suite: Suite, derived: Sequence[Derived], base: dict[str, Any],
                 samples_of: Sequence[tuple[list[float], list[int]]] | None = None) -> list[dict[str, Any]]:
    """Rows for figures a suite derives across its cases (a fit, a ratio): its value, and the samples it
    propagated from its parents' (:func:`gpubench.timing.stats.propagate`) for their spread. ``samples_of``: each
    figure's samples and their processes instead, where its parents were measured in several processes
    (:func:`gpubench.run.per_process.derive`)."""
    rows = []
    for i, d in enumerate(derived):
        own, lab = samples_of[i] if samples_of is not None else (list(d.samples), [])
        keep = [k for k, v in enumerate(own) if math.isfinite(v)]
        lab = [lab[k] for k in keep] if lab else []
        row = figure(base, suite.name, suite.version, d.case, d.metric, [float(own[k]) for k in keep], d.value)
        row.update({"processes": len(set(lab)) if lab else 1, "sample_process": lab, "host_pace": [], "noisy": False,
                    "stop": "derived", **dict(d.extra)})
        rows.append(finish(row, "ok" if math.isfinite(d.value) else "error", d.message))
    return rows


def derive(suite: Suite, rows: list[dict[str, Any]], base: dict[str, Any]) -> list[dict[str, Any]]:
    """The suite's derived rows over its measured ``rows`` (of one process or pooled from several), marked with
    the co-tenants and the host load of the cases they come from."""
    parents = [r for r in rows if r.get("stop") != "derived"]
    made = proc.derive(suite.summarize, parents)
    out = derived_rows(suite, [d for d, _, _ in made], base, [(s, lab) for _, s, lab in made])
    for d, row in zip((d for d, _, _ in made), out):
        row["host_pace"] = proc.derived_paces(parents, d.parents, row["samples"], row["sample_process"])
    loads = [float(r["host_load"]) for r in parents if finite(r.get("host_load"))]
    for r in out:
        r["contended"] = suite_contended(parents)
        r["host_load"] = max(loads) if loads else None
    return out


def mark_rows(rows: list[dict[str, Any]], contended: str | None, host_load: float | None) -> None:
    """Who else used the machine while a case ran, on each of its rows (gpubench.machine.contention.Watch.end)."""
    for r in rows:
        r["contended"], r["host_load"] = contended, host_load


def suite_contended(rows: list[dict[str, Any]]) -> str | None:
    """A derived row's ``contended``: every co-tenant of the cases it is computed from."""
    seen = [r.get("contended") for r in rows]
    named = sorted({n for s in seen if s for n in s.split(", ")})
    if named:
        return ", ".join(named)
    return "" if any(s == "" for s in seen) else None


__all__ = ["MAX_MESSAGE", "figure", "finish", "case_rows", "derived_rows", "derive", "mark_rows",
           "suite_contended"]
