"""A shared GPU and a busy host are named, not blamed: two of compare's passes over its verdict rows, and the
lines that lead its summary.

A run records the other processes it saw on its GPU (:mod:`gpubench.machine.contention`): run.json's ``contention``
names them (``contended``) and lists the cases measured while they were there (``cases``, by suite), and the
rows carry the same in their ``contended`` column. A figure measured while someone else ran on the device says
nothing about the code, so :func:`shared_gpu` turns a WORSE on a side whose case was contended into UNKNOWN,
with a note naming the co-tenant.

A run also records how busy the host was: the share of its CPU time other processes used, over the run
(``contention.host``) and during each case (the ``host_load`` column). Figures the host sets (gpubench.results.host_set:
host-timed, host-bound, host buffers, and every figure of the CPU backend) measured on a busy host say as
little about the code: :func:`busy_host` turns their WORSE or BETTER into UNKNOWN, naming the load.
:func:`describe` gives the lines that lead the summary (the report's ``contended``).
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import Any

import pandas as pd

from gpubench.compare.verdict import BETTER, COMPARED, UNKNOWN, WORSE
from gpubench.machine.contention import LOADED_HOST, host_line, host_text
from gpubench.timing.stats import finite

SIDES = ("baseline", "current")


def _names(runs: Sequence[dict[str, Any]]) -> list[str]:
    """Co-tenants run.json names for a side's runs, once each."""
    names: list[str] = []
    for meta in runs:
        text = ((meta.get("contention") or {}).get("contended")) or ""
        names += [n for n in text.split(", ") if n and n not in names]
    return names


def _cases(runs: Sequence[dict[str, Any]]) -> dict[tuple[str, str], str]:
    """{(suite, case): co-tenants} of the cases a side's runs measured while the GPU was shared."""
    out: dict[tuple[str, str], str] = {}
    for meta in runs:
        c = meta.get("contention") or {}
        for suite, cases in (c.get("cases") or {}).items():
            for case in cases:
                out[(str(suite), str(case))] = c.get("contended") or "another process"
    return out


def _add(note: object, text: str) -> str:
    return "; ".join(x for x in (str(note or ""), text) if x)


def _blind(rows: pd.DataFrame, i: Hashable, why: str) -> None:
    """Row ``i`` catches nothing tonight, for ``why``, unless it was blind already (the first reason stands)."""
    if not math.isinf(float(rows.at[i, "catches"]) if rows.at[i, "catches"] is not None else math.nan):
        rows.at[i, "catches"], rows.at[i, "catches_limit"] = math.inf, why


def shared_gpu(rows: pd.DataFrame, baseline_runs: Sequence[dict[str, Any]],
               current_runs: Sequence[dict[str, Any]]) -> pd.DataFrame:
    """``rows`` with each WORSE figure of a case measured on a shared GPU (either side) made UNKNOWN."""
    shared = {"baseline": _cases(baseline_runs), "current": _cases(current_runs)}
    if not any(shared.values()) or rows.empty:
        return rows
    rows = rows.copy()
    for i, r in rows.iterrows():
        key = (str(r["suite"]), str(r["case"]))
        if r["status"] != COMPARED or not any(key in shared[side] for side in SIDES):
            continue
        _blind(rows, i, "GPU shared")  # nothing is WORSE tonight
        if r["verdict"] == WORSE:
            who = [f"{side} run shared the GPU with {shared[side][key]}" for side in SIDES if key in shared[side]]
            rows.at[i, "verdict"] = UNKNOWN
            rows.at[i, "note"] = _add(r["note"], "; ".join(who) + ": not blamed on the code")
    return rows


def _host(runs: Sequence[dict[str, Any]]) -> str | None:
    lines = [line for m in runs if (line := host_line((m.get("contention") or {}).get("host")))]
    return "; ".join(dict.fromkeys(lines)) or None


def _cpus(runs: Sequence[dict[str, Any]]) -> int:
    for m in runs:
        n = ((m.get("contention") or {}).get("host") or {}).get("cpus")
        if n:
            return int(n)
    return 0


def busy_host(rows: pd.DataFrame, baseline_runs: Sequence[dict[str, Any]],
              current_runs: Sequence[dict[str, Any]]) -> pd.DataFrame:
    """``rows`` with each WORSE or BETTER figure the host sets made UNKNOWN where a side's run was loaded or its
    case ran on a busy host."""
    if rows.empty:
        return rows
    runs = {"baseline": baseline_runs, "current": current_runs}
    loaded = {side: _host(runs[side]) for side in SIDES}
    rows = rows.copy()
    for i, r in rows.iterrows():
        if r["status"] != COMPARED or not r.get("set_by_host"):
            continue
        why = []
        for side in SIDES:
            share = r.get(f"host_load_{side}")
            if loaded[side]:
                why.append(f"the {side} run's host was busy ({loaded[side]})")
            elif finite(share) and float(share) >= LOADED_HOST:
                why.append(f"the {side} case ran on a busy host ({host_text(float(share), _cpus(runs[side]) or 1)})")
        if not why:
            continue
        _blind(rows, i, "host busy")  # nothing is WORSE tonight
        if r["verdict"] in (WORSE, BETTER):
            rows.at[i, "verdict"] = UNKNOWN
            rows.at[i, "note"] = _add(r["note"], "; ".join(why) + f": {r['set_by_host']}, not judged")
    return rows


@dataclass(frozen=True)
class Described:
    """What a comparison says of the machines' state: the lines that lead its summary, and the host load where
    it differs between the sides (one of the setting differences)."""

    lines: list[str]
    host_difference: str | None


def describe(baseline_runs: Sequence[dict[str, Any]], current_runs: Sequence[dict[str, Any]]) -> Described:
    """The lines that lead a comparison's summary (``GPU shared during the current run: pid 4321 (python3)``,
    ``host busy during the current run: ...``), and ``host load: a → b`` where the host was loaded on one side
    only (two loaded sides differ in no way a reader can act on)."""
    lines = []
    for side, runs in (("baseline", baseline_runs), ("current", current_runs)):
        names = _names(runs)
        if names:
            lines.append(f"GPU shared during the {side} run: {', '.join(names)}")
    b, c = _host(baseline_runs), _host(current_runs)
    for side, text in (("baseline", b), ("current", c)):
        if text:
            lines.append(f"host busy during the {side} run: {text}")
    differ = f"host load: {b or 'not loaded'} → {c or 'not loaded'}" if bool(b) != bool(c) else None
    return Described(lines, differ)


__all__ = ["shared_gpu", "busy_host", "describe", "Described"]
