"""The one place a result row is built, beside the schema (:mod:`gpubench.results`) it fills, and the one function
through which a built row changes (:func:`amend`).

A row is one figure: a suite's case and metric, the stats of its samples, and what the engine knew of how it was
measured. Its ``status`` and ``message`` are set last, by :func:`finish` alone: a column noted on the way (the
graph fallback's "timed eager: ...") never replaces why a case failed or was skipped. What a reader acts on is a
column, never the message's words: a case a Ctrl-C abandoned has ``stop`` "abandoned".
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from gpubench.errors import MAX_LINE
from gpubench.timing import engine
from gpubench.machine.contention import union
from gpubench.results import COLUMNS, STATS, STATUSES, as_list
from gpubench.results.rundir import ABANDONED_STOP
from gpubench.timing.stats import finite, summarize
from gpubench.suite import Case, Derived, Metric, Suite, Workload

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


def amend(row: Mapping[str, Any], *, note: str = "", **columns: Any) -> dict[str, Any]:
    """``row`` with ``columns`` changed and ``note`` added after its message: the one way a built row changes (its
    samples pooled from other processes, who else used the machine, a run's interruption). A column the row does not
    have and the schema does not know, or a status the schema does not, is a bug here, not a new column."""
    unknown = sorted(k for k in columns if k not in row and k not in COLUMNS)
    if unknown:
        raise KeyError(f"amend: {', '.join(unknown)} is no column of this row")
    if "status" in columns and columns["status"] not in STATUSES:
        raise ValueError(f"amend: status {columns['status']!r} is not one of {STATUSES}")
    out = {**row, **columns}
    if note or "message" in columns:
        out["message"] = joined(out.get("message"), note)
    return out


def abandoned(row: Mapping[str, Any]) -> bool:
    """Whether a Ctrl-C abandoned the row's case before it was measured."""
    return row.get("stop") == ABANDONED_STOP


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
    workload: Workload | None = None,
    meas: engine.Measurement | None = None,
    config: engine.EngineConfig = engine.FULL,
    case_s: float | None = None,
    notes: Mapping[str, Any] | None = None,
    abandoned: bool = False,
) -> list[dict[str, Any]]:
    """One row per declared metric of ``suite`` for ``case``; ``case_s``: the seconds the case took; ``notes``: how
    graph mode timed it (:func:`gpubench.timing.engine.measure`); ``abandoned``: a Ctrl-C stopped it before it was
    measured."""
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
        row.update(notes or {})
        if meas is not None:
            row.update(meas.columns)
        if abandoned:
            row["stop"] = ABANDONED_STOP
        rows.append(finish(row, status, message))
    return rows


def _paces(meas: engine.Measurement | None, samples: list[float]) -> list[float]:
    """The host's pace (µs) before each of a row's samples, where the engine took one for every sample."""
    paces = meas.host_pace_s if meas is not None else []
    return [p * 1e6 for p in paces] if samples and len(paces) == len(samples) else []


def _how(workload: Workload | None, meas: engine.Measurement | None) -> dict[str, Any]:
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
    made = pooled_derive(suite.summarize, parents)
    out = derived_rows(suite, [d for d, _, _ in made], base, [(s, lab) for _, s, lab in made])
    loads = [float(r["host_load"]) for r in parents if finite(r.get("host_load"))]
    return [amend(row, host_pace=derived_paces(parents, d.parents, row["samples"], row["sample_process"]),
                  contended=suite_contended(parents), host_load=max(loads) if loads else None)
            for (d, _, _), row in zip(made, out)]


# --- rows of several processes pooled into one: figures set per process (gpubench.run.per_process) ----------


def labels(row: dict[str, Any]) -> list[int]:
    """The process of each of a row's samples (all 0 where the row names none)."""
    lab = list(row.get("sample_process") or [])
    n = len(row.get("samples") or [])
    return lab if len(lab) == n else [0] * n


def pool(row: dict[str, Any], other: dict[str, Any], process: int, target_cv: float) -> dict[str, Any]:
    """``row`` with the samples of ``other`` (the same case and metric, measured by worker ``process``) added.

    A worker whose check failed makes the row ``invalid`` (the kernel is wrong in some process: no figure
    stands); one that raised or skipped leaves the row as it was (the caller notes it)."""
    if row.get("status") != "ok":
        return row
    if other.get("status") == "invalid":
        why = other.get("message") or "check failed"
        return amend(row, status="invalid", message=f"process {process + 1}: {why}", value=math.nan, samples=[],
                     sample_process=[], n=0, **{k: math.nan for k in STATS})
    if other.get("status") != "ok":
        return row
    samples = list(row.get("samples") or []) + list(other.get("samples") or [])
    lab = labels(row) + [process] * len(other.get("samples") or [])
    st = summarize(samples)
    loads = [v for v in (row.get("host_load"), other.get("host_load")) if finite(v)]
    spent = [v for v in (row.get("case_s"), other.get("case_s")) if finite(v)]  # every process's time on it
    return amend(row, samples=samples, sample_process=lab, processes=len(set(lab)), host_pace=_pooled_paces(row, other),
                 value=st["median"], **{k: st[k] for k in STATS}, n=st["n"],
                 noisy=bool(not math.isnan(st["cv"]) and st["cv"] > target_cv),
                 contended=union((row.get("contended"), other.get("contended"))),
                 host_load=max(loads) if loads else row.get("host_load"),
                 case_s=sum(spent) if spent else row.get("case_s"))


def _pooled_paces(row: dict[str, Any], other: dict[str, Any]) -> list[float]:
    """The pooled samples' host paces, where both processes took one per sample (else none: they would not align)."""
    mine, theirs = as_list(row.get("host_pace")), as_list(other.get("host_pace"))
    whole = len(mine) == len(row.get("samples") or []) and len(theirs) == len(other.get("samples") or [])
    return mine + theirs if whole and mine and theirs else []


def one_process(row: dict[str, Any], process: int) -> dict[str, Any]:
    """``row`` as process ``process`` alone measured it (a row measured in one process only is itself)."""
    lab = labels(row)
    if len(set(lab)) <= 1:
        return row
    samples = [s for s, p in zip(row.get("samples") or [], lab) if p == process]
    if not samples:  # this process has no samples of the row (it failed): the row as the others measured it
        return row
    paces = as_list(row.get("host_pace"))
    mine = [v for v, p in zip(paces, lab) if p == process] if len(paces) == len(lab) else []
    return amend(row, samples=samples, sample_process=[process] * len(samples), processes=1, host_pace=mine,
                 value=float(np.median(samples)))


def derived_paces(rows: list[dict[str, Any]], parents: Sequence[str], samples: Sequence[float],
                  lab: Sequence[int]) -> list[float]:
    """A derived figure's host pace per sample: the median pace of the samples of its ``parents`` (case ids; a
    case's rows of each metric share one pace per sample, so one row a case) in the sample's process (all of them
    where the figure's samples carry no process). Empty where none of those parents carries a pace, or some
    process has none: the figure is then judged as measured."""
    first = {}
    for r in rows:
        if r.get("case") in parents and r.get("status") == "ok":
            first.setdefault(r["case"], r)
    by: dict[int | None, list[float]] = {}
    for r in first.values():
        paces = as_list(r.get("host_pace"))
        if not paces or len(paces) != len(r.get("samples") or []):
            continue
        for p, q in zip(paces, labels(r)):
            by.setdefault(q if lab else None, []).append(float(p))
    keys = list(lab) if lab else [None] * len(samples)
    if not samples or not by or any(k not in by for k in keys):
        return []
    median = {k: float(np.median(v)) for k, v in by.items()}
    return [median[k] for k in keys]


def pooled_derive(summarize_rows: Callable[[list[dict[str, Any]]], list[Any]],
           rows: list[dict[str, Any]]) -> list[tuple[Any, list[float], list[int]]]:
    """A suite's derived figures over rows pooled from several processes: (derived, samples, their processes).

    Each figure is derived from the pooled rows (its value) and from each process's rows alone: where the
    per-process figures differ, its samples are theirs, labelled, so that it too carries the spread between
    processes; where they are all the same (no parent was measured per process) it is the pooled figure's own.
    """
    pooled = summarize_rows(rows)
    present = sorted({p for r in rows if r.get("status") == "ok" for p in labels(r)})
    if len(present) <= 1:
        return [(d, list(d.samples), []) for d in pooled]
    per = {p: {(d.case.id, d.metric.name): d for d in summarize_rows([one_process(r, p) for r in rows])}
           for p in present}
    out = []
    for d in pooled:
        key = (d.case.id, d.metric.name)
        mine = [(p, per[p].get(key)) for p in present]
        if any(m is None for _, m in mine) or all(list(m.samples) == list(mine[0][1].samples) for _, m in mine):
            out.append((d, list(d.samples), []))
            continue
        samples = [float(s) for _, m in mine for s in m.samples]
        out.append((d, samples, [p for p, m in mine for _ in m.samples]))
    return out


def mark_rows(rows: list[dict[str, Any]], contended: str | None, host_load: float | None) -> list[dict[str, Any]]:
    """``rows`` marked with who else used the machine while their case ran (gpubench.machine.contention.Watch.end)."""
    return [amend(r, contended=contended, host_load=host_load) for r in rows]


def suite_contended(rows: list[dict[str, Any]]) -> str | None:
    """A derived row's ``contended``: every co-tenant of the cases it is computed from."""
    seen = [r.get("contended") for r in rows]
    named = sorted({n for s in seen if s for n in s.split(", ")})
    if named:
        return ", ".join(named)
    return "" if any(s == "" for s in seen) else None


__all__ = ["MAX_MESSAGE", "amend", "abandoned", "figure", "finish", "labels", "pool", "one_process",
           "derived_paces", "pooled_derive", "case_rows", "derived_rows", "derive", "mark_rows",
           "suite_contended"]
