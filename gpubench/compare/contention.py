"""A shared GPU is named, not blamed: the post-pass over compare's verdict rows for contended runs.

A run records the other processes it saw on its GPU (:mod:`gpubench.contention`: the rows' ``contended``
column, run.json's ``contention``). A figure measured while someone else ran on the device says nothing about
the code, so a WORSE on a side whose row was contended becomes UNKNOWN, with a note naming the co-tenant; the
report's first line says the GPU was shared. A loaded host (load average above half the CPUs) does not judge
rows (host-side figures are the ones it moves, and the machine is one's own) but is listed among the settings
that differ when one side was loaded and the other was not, so that a reader sees it beside the verdicts.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from gpubench.compare.load import KEY
from gpubench.compare.verdict import COMPARED, UNKNOWN, WORSE
from gpubench.contention import host_line

SIDES = ("baseline", "current")


def row_notes(raw: pd.DataFrame) -> dict[tuple, str]:
    """{(suite, case, metric): co-tenants} of a side's rows that were contended (any run of a pooled window)."""
    if raw is None or raw.empty or "contended" not in raw.columns:
        return {}
    out: dict[tuple, list[str]] = {}
    for r in raw[raw["contended"].fillna("").astype(str) != ""].to_dict("records"):
        names = out.setdefault(tuple(r[k] for k in KEY), [])
        names += [n for n in str(r["contended"]).split(", ") if n not in names]
    return {k: ", ".join(v) for k, v in out.items()}


def run_lines(side: Any) -> list[str]:
    """Co-tenants run.json names for a side's runs, once each."""
    names: list[str] = []
    for meta in side.runs:
        text = ((meta.get("contention") or {}).get("contended")) or ""
        names += [n for n in text.split(", ") if n and n not in names]
    return names


def host_loads(side: Any) -> str | None:
    lines = [line for m in side.runs if (line := host_line((m.get("contention") or {}).get("host")))]
    return "; ".join(dict.fromkeys(lines)) or None


def apply(report: Any, rerun: Any = None) -> list[str]:
    """Turn contended WORSE rows of ``report`` into UNKNOWN, add a loaded host to its setting differences, and
    return the lines that lead its summary (``GPU shared during the current run: pid 4321 (python3)``).

    ``rerun`` is the side that confirmed the WORSE rows (:mod:`gpubench.compare.confirm`): a figure it measured
    is judged by whether the rerun was contended, since the rerun's verdict is the one that kept it WORSE."""
    lines = []
    per_side = {}
    for name in SIDES:
        side = getattr(report, name)
        per_side[name] = row_notes(side.raw)
        others = run_lines(side) or sorted({n for v in per_side[name].values() for n in v.split(", ")})
        if others:
            lines.append(f"GPU shared during the {name} run: {', '.join(others)}")
    if rerun is not None and rerun.raw is not None and not rerun.raw.empty:
        measured = {tuple(r[k] for k in KEY) for r in rerun.raw[list(KEY)].to_dict("records")}
        again = row_notes(rerun.raw)
        per_side["current"] = {k: v for k, v in per_side["current"].items() if k not in measured} | again
        others = run_lines(rerun) or sorted({n for v in again.values() for n in v.split(", ")})
        if others:
            lines.append(f"GPU shared during the confirmation rerun: {', '.join(others)}")
    rows = report.rows
    changed = 0
    for i, r in rows.iterrows():
        if r["status"] != COMPARED or r["verdict"] != WORSE:
            continue
        key = tuple(r[k] for k in KEY)
        who = [f"{name} run shared the GPU with {per_side[name][key]}" for name in SIDES if key in per_side[name]]
        if who:
            note = "; ".join(who) + ": not blamed on the code"
            rows.at[i, "verdict"] = UNKNOWN
            rows.at[i, "note"] = "; ".join(x for x in (str(r["note"] or ""), note) if x)
            changed += 1
    if changed:
        lines.append(f"{changed} WORSE figure(s) measured on a shared GPU are UNKNOWN")
    b, c = host_loads(report.baseline), host_loads(report.current)
    if bool(b) != bool(c):  # loaded on one side only: two loaded sides differ in no way a reader can act on
        report.setting_differences.append(f"host load: {b or 'not loaded'} → {c or 'not loaded'}")
    report.contended = lines
    return lines


__all__ = ["apply", "row_notes", "run_lines"]
