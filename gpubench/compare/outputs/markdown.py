"""Markdown (a CI job summary): a heading with the counts, both sides, the notes and the settings that differ,
and one table row per listed figure."""

from __future__ import annotations

from typing import TYPE_CHECKING

from gpubench.compare.outputs.common import (FLEET_DEVICE_HEADERS, FLEET_ROW_HEADERS, context_lines, fleet_device_cells,
                                      fleet_row_cells, headers, headline, listing, markdown_table, md_cell, row_cells)
from gpubench.compare.verdict import WORSE

if TYPE_CHECKING:
    from gpubench.compare.fleet import FleetReport
    from gpubench.compare.comparison import Report

ORDER = 1
SUFFIXES = (".md", ".markdown")


def compare(report: Report, all_rows: bool = False) -> str:
    worse = report.counts().get(WORSE, 0)
    lines = [f"### {'❌' if worse else '✅'} gpubench compare: {md_cell(headline(report))}", "",
             f"- baseline: {md_cell(report.baseline_text)}",
             f"- current: {md_cell(report.current_text)}",
             f"- WORSE needs a change of at least the threshold, beyond the spread of the baseline's run medians "
             f"(with a window of runs), and a Mann-Whitney p ≤ {report.alpha:g}"]
    lines += [f"- {md_cell(line)}" for line in context_lines(report)]
    if report.system_differences:
        lines.append(f"- different systems: {md_cell('; '.join(report.system_differences))}")
    lines.append("")
    rows, short, foot = listing(report, all_rows)
    if rows:
        cells = []
        for r, case in zip(rows, short):
            c = row_cells(r, report.cross_cluster)
            c[2] = case
            cells.append(c)
        lines += markdown_table(headers(report.cross_cluster), cells)
        lines.append("")
    else:
        lines += ["No figure moved by its threshold or more.", ""]
    lines += [f"_{md_cell(f)}_" for f in foot]
    return "\n".join(lines).rstrip("\n") + "\n"


def fleet(report: FleetReport) -> str:
    flagged = report.rows[report.rows["flagged"]]
    lines = [f"### {'❌' if len(flagged) else '✅'} {report.title()}", "", report.summary(), ""]
    lines += markdown_table(FLEET_DEVICE_HEADERS, (fleet_device_cells(d) for d in report.devices.to_dict("records")))
    if len(flagged):
        lines += ["", "#### flagged figures", ""]
        lines += markdown_table(FLEET_ROW_HEADERS, (fleet_row_cells(r) for r in flagged.to_dict("records")))
    return "\n".join(lines) + "\n"
