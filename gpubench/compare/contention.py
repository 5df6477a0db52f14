"""A shared GPU is named, not blamed: the post-pass over compare's verdict rows for contended runs.

A run records the other processes it saw on its GPU (:mod:`gpubench.contention`): run.json's ``contention``
names them (``contended``) and lists the cases measured while they were there (``cases``, by suite), and the
rows carry the same in their ``contended`` column. A figure measured while someone else ran on the device says
nothing about the code, so :func:`post_pass` (one of compare's post-passes, ``verdict.POST_PASSES``) turns a
WORSE on a side whose case was contended into UNKNOWN, with a note naming the co-tenant, and :func:`describe`
gives the lines that lead the report's summary.

A loaded host (load average above half the CPUs) does not judge rows (host-side figures are the ones it moves,
and the machine is one's own) but is listed among the settings that differ when one side was loaded and the
other was not, so that a reader sees it beside the verdicts.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pandas as pd

from gpubench.contention import host_line

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


def post_pass(rows: pd.DataFrame, baseline_runs: Sequence[dict[str, Any]],
              current_runs: Sequence[dict[str, Any]]) -> pd.DataFrame:
    """``rows`` with each WORSE figure of a case measured on a shared GPU (either side) made UNKNOWN."""
    # Imported here: verdict.py registers this function in its POST_PASSES, so it imports this module first.
    from gpubench.compare.verdict import COMPARED, UNKNOWN, WORSE

    shared = {"baseline": _cases(baseline_runs), "current": _cases(current_runs)}
    if not any(shared.values()) or rows.empty:
        return rows
    rows = rows.copy()
    for i, r in rows.iterrows():
        if r["status"] != COMPARED or r["verdict"] != WORSE:
            continue
        key = (str(r["suite"]), str(r["case"]))
        who = [f"{side} run shared the GPU with {shared[side][key]}" for side in SIDES if key in shared[side]]
        if who:
            rows.at[i, "verdict"] = UNKNOWN
            rows.at[i, "note"] = "; ".join(x for x in (str(r["note"] or ""), "; ".join(who) + ": not blamed on "
                                                       "the code") if x)
    return rows


def _host(runs: Sequence[dict[str, Any]]) -> str | None:
    lines = [line for m in runs if (line := host_line((m.get("contention") or {}).get("host")))]
    return "; ".join(dict.fromkeys(lines)) or None


def describe(report: Any) -> list[str]:
    """The lines that lead ``report``'s summary (``GPU shared during the current run: pid 4321 (python3)``),
    kept as ``report.contended``; a host loaded on one side only goes into its setting differences."""
    lines = []
    for side in SIDES:
        names = _names(getattr(report, side).runs)
        if names:
            lines.append(f"GPU shared during the {side} run: {', '.join(names)}")
    b, c = _host(report.baseline.runs), _host(report.current.runs)
    if bool(b) != bool(c):  # loaded on one side only: two loaded sides differ in no way a reader can act on
        report.setting_differences.append(f"host load: {b or 'not loaded'} → {c or 'not loaded'}")
    report.contended = lines
    return lines


__all__ = ["post_pass", "describe"]
