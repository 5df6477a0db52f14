"""The terminal view (the default): the counts, what was compared, the figures that are not SAME, worst first,
and what a reader needs beside them. Printed on the terminal, never written to a file.

The figures are a table where it fits the terminal; on a narrower one (80 columns) each figure takes a line of
its numbers and, beneath, its case and its note: a table squeezed below its columns' widths would drop the
numbers, the one thing a reader came for."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rich import box
from rich.console import Console, ConsoleOptions, Group, RenderResult
from rich.measure import Measurement
from rich.padding import Padding
from rich.table import Table
from rich.text import Text

from gpubench.compare.outputs.common import (FLEET_DEVICE_HEADERS, FLEET_FLAGGED_SHOWN, FLEET_ROW_HEADERS, context_lines,
                                      fleet_device_cells, fleet_row_cells, headers, headline, listing, row_cells)

if TYPE_CHECKING:
    from gpubench.compare.fleet import FleetReport
    from gpubench.compare.comparison import Report

CONSOLE = True
_STYLE = {"WORSE": "bold red", "BETTER": "green", "SAME": "", "UNKNOWN": "yellow"}
# The terminal leaves out what is in the Markdown and JSON: the threshold and the test's basis.
_TERMINAL = ("verdict", "suite", "case", "metric", "baseline", "current", "change", "ratio", "p", "note")
# A note this short (a shared note's mark, ``[1]``) stays on its figure's line in the narrow layout.
_MARK = 4
_UNBOUNDED = 10_000
_NOTE_MIN, _NOTE_MAX = 24, 60  # the note column's width: the least a table is drawn with, and the most


class _Figures:
    """The listed figures, laid out for the console's width when it is printed."""

    def __init__(self, head: list[str], cells: list[list[str]]):
        self.head, self.cells = head, cells  # cells: each row's, its case shortened

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        # Where every column but the note fits whole beside a note of a few words a line, the table; rich then wraps
        # the note. Squeezed further it would fold numbers and drop the last columns.
        wide = options.update_width(_UNBOUNDED)  # measured within the console's width, a table always "fits"
        if Measurement.get(console, wide, self._table(_NOTE_MIN)).maximum <= options.max_width:
            yield self._table(_NOTE_MAX)
            return
        yield Text("verdict, suite, metric, baseline → current, change, p; beneath: case, note", style="dim")
        for c in self.cells:
            yield from self._figure(dict(zip(self.head, c)))

    def _table(self, note_width: int) -> Table:
        keep = [i for i, h in enumerate(self.head) if h in _TERMINAL or h.endswith("% peak")]
        table = Table(box=box.SIMPLE_HEAD, title_justify="left", show_edge=False, pad_edge=False)
        width = max([len(c[2]) for c in self.cells] + [4])
        for i in keep:
            h = self.head[i]
            justify = "right" if h in ("baseline", "current", "change", "ratio", "p") else "left"
            # A case id is never cut (it would name another case); shortened, it fits on a line or two.
            table.add_column(h, justify=justify, overflow="fold", min_width=min(width, 64) if h == "case" else None,
                             max_width=note_width if h == "note" else None)
        for c in self.cells:
            table.add_row(*(c[i] for i in keep), style=_STYLE.get(c[0], "dim") or None)
        return table

    @staticmethod
    def _figure(f: dict[str, str]) -> RenderResult:
        numbers = [f["verdict"], f["suite"], f["metric"], f"{f['baseline']} → {f['current']}", f["change"]]
        if "ratio" in f:
            numbers.append(f"ratio {f['ratio']}")
            peaks = (f["baseline % peak"], f["current % peak"])
            numbers += [f"% of peak {peaks[0]} → {peaks[1]}"] if peaks != ("—", "—") else []
        numbers += [f"p {f['p']}"] if f["p"] != "—" else []
        note = f["note"]
        numbers += [note] if note and len(note) <= _MARK else []
        yield Text("  ".join(numbers), style=_STYLE.get(f["verdict"], "dim") or "")
        beneath = [f["case"]] + ([note] if note and len(note) > _MARK else [])
        yield Padding(Text("\n".join(beneath)), (0, 0, 0, 2), expand=False)


def compare(report: Report, all_rows: bool = False) -> Group:
    rows, short, foot = listing(report, all_rows)
    cells = []
    for r, case in zip(rows, short):
        cells.append(row_cells(r, report.cross_cluster))
        cells[-1][2] = case
    # Text, not markup: a "[" in a value is no markup.
    parts: list[Any] = [Text(headline(report), style="bold"),
                        Text(report.title())]  # what was compared (and, across clusters, what differs)
    parts.append(_Figures(headers(report.cross_cluster), cells) if rows else Text("no figure to list"))
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
