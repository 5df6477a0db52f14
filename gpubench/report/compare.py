"""The page's compare tables: the first run as the baseline of each later run (gpubench.compare), across
clusters where the systems differ. Runs of different suites have nothing to compare: a later run is judged
against the first earlier run that shares a suite with it, and gets a note if none does."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from gpubench.errors import UsageError
from gpubench.report.runs import Run


@dataclass
class CompareTable:
    baseline: Run
    current: Run
    report: Any = None  # gpubench.compare.report.Report, or None with a note saying why not
    note: str = ""


def _suites(run: Run) -> set[str]:
    return set(run.df["suite"].dropna().astype(str)) if "suite" in run.df.columns else set()


def tables(runs: list[Run]) -> list[CompareTable]:
    from gpubench.compare import cross
    from gpubench.compare.load import resolve
    from gpubench.compare.report import build

    out = []
    for k, cur in enumerate(runs[1:], start=1):
        base = next((b for b in runs[:k] if _suites(b) & _suites(cur)), None)
        if base is None:
            out.append(CompareTable(runs[0], cur, note=f"no earlier run in the report has its suites "
                                                       f"({', '.join(sorted(_suites(cur))) or 'no rows'})"))
            continue
        try:
            differ = bool(cross.differences(cross.system_of(resolve(base.path)), cross.system_of(resolve(cur.path))))
            rep = build(base.path, cur.path, cross_cluster=differ)
            out.append(CompareTable(base, cur, rep))
        except UsageError as e:  # not comparable (e.g. only failed rows shared): say so on the page
            out.append(CompareTable(base, cur, note=str(e)))
    return out


__all__ = ["CompareTable", "tables"]
