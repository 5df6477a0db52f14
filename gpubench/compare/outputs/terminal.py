"""The terminal view (the default): the counts, what was compared, the figures that are not SAME, worst first,
and what a reader needs beside them. Printed on the terminal, never written to a file."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rich import box
from rich.console import Group
from rich.table import Table
from rich.text import Text

from gpubench.compare.formats import (FLEET_DEVICE_HEADERS, FLEET_FLAGGED_SHOWN, FLEET_ROW_HEADERS, context_lines,
                                      fleet_device_cells, fleet_row_cells, headers, headline, listing, row_cells)

if TYPE_CHECKING:
    from gpubench.compare.fleet import FleetReport
    from gpubench.compare.report import Report

CONSOLE = True
_STYLE = {"WORSE": "bold red", "BETTER": "green", "SAME": "", "UNKNOWN": "yellow"}
# The terminal leaves out what is in the Markdown and JSON: the threshold and the test's basis.
_TERMINAL = ("verdict", "suite", "case", "metric", "baseline", "current", "change", "ratio", "p", "note")


def compare(report: Report, all_rows: bool = False) -> Group:
    rows, short, foot = listing(report, all_rows)
    head = headers(report.cross_cluster)
    keep = [i for i, h in enumerate(head) if h in _TERMINAL or h.endswith("% peak")]
    table = Table(box=box.SIMPLE_HEAD, title_justify="left", show_edge=False, pad_edge=False)
    width = max([len(c) for c in short] + [4])
    for i in keep:
        h = head[i]
        justify = "right" if h in ("baseline", "current", "change", "ratio", "p") else "left"
        # A case id is never cut (it would name another case); shortened, it fits on a line or two.
        table.add_column(h, justify=justify, overflow="fold", min_width=min(width, 64) if h == "case" else None,
                         max_width=60 if h == "note" else None)
    for r, case in zip(rows, short):
        cells = row_cells(r, report.cross_cluster)
        cells[2] = case
        style = _STYLE.get(cells[0], "dim")
        table.add_row(*(cells[i] for i in keep), style=style or None)
    # Text, not markup: a "[" in a value is no markup.
    parts: list[Any] = [Text(headline(report), style="bold"),
                        Text(report.title())]  # what was compared (and, across clusters, what differs)
    parts.append(table if rows else Text("no figure to list"))
    tail = [*foot, *context_lines(report)]
    if tail:
        parts.append(Text("\n".join(tail)))
    return Group(*parts)


def fleet(report: FleetReport) -> Group:
    devices = Table(title=report.title(), title_justify="left", caption=report.summary(), caption_justify="left")
    for h in FLEET_DEVICE_HEADERS:
        devices.add_column(h)
    for d in report.devices.to_dict("records"):
        devices.add_row(*fleet_device_cells(d), style="bold red" if d["flagged"] else None)
    flagged = report.rows[report.rows["flagged"]]
    if flagged.empty:
        return Group(devices)
    shown = f", the first {FLEET_FLAGGED_SHOWN}" if len(flagged) > FLEET_FLAGGED_SHOWN else ""
    figures = Table(title=f"flagged figures (worst first{shown})", title_justify="left")
    for h in FLEET_ROW_HEADERS:
        figures.add_column(h)
    for r in flagged.head(FLEET_FLAGGED_SHOWN).to_dict("records"):
        figures.add_row(*fleet_row_cells(r))
    return Group(devices, figures)
