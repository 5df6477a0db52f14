"""The sensitivity table: for every figure compared, the smallest change this comparison would call WORSE and
what sets it (gpubench.compare.sensitivity), least sensitive first, in Markdown. ``gpubench compare DIR DIR
--format sensitivity`` is how sensitive the gate of a directory of nights is today, figure by figure."""

from __future__ import annotations

from typing import TYPE_CHECKING

from gpubench.compare import sensitivity
from gpubench.compare.outputs.common import markdown_table, md_cell, pct, short_cases
from gpubench.compare.verdict import COMPARED
from gpubench.timing.stats import number

if TYPE_CHECKING:
    from gpubench.compare.comparison import Report

ORDER = 4
HEADERS = ["suite", "case", "metric", "set by", "baseline runs", "run spread", "threshold", "catches", "limited by"]


def _key(r: dict) -> tuple:
    c = number(r.get("catches"))
    return (-c if c == c else 0.0, str(r["suite"]), str(r["case"]), str(r["metric"]))


def compare(report: Report, all_rows: bool = False) -> str:
    rows = sorted((r for r in report.rows.to_dict("records") if r["status"] == COMPARED), key=_key)
    short, shared = short_cases([r["case"] for r in rows])
    lines = [f"### gpubench compare: sensitivity, {len(rows)} figure(s)", "",
             f"- baseline: {md_cell(report.baseline_text)}", f"- current: {md_cell(report.current_text)}"]
    lines += [f"- {md_cell(line)}" for line in filter(None, [sensitivity.line(rows), report.baseline.window_line()])]
    lines.append("")
    cells = [[str(r["suite"]), case, str(r["metric"]), str(r.get("set_by_host") or "the GPU"),
              str(r.get("runs_baseline") or 0), pct(r.get("run_spread")), pct(r.get("threshold")),
              sensitivity.text(r.get("catches")), str(r.get("catches_limit") or "")] for r, case in zip(rows, short)]
    lines += markdown_table(HEADERS, cells)
    if shared:
        lines += ["", f"_every case listed has {md_cell(', '.join(shared))}_"]
    return "\n".join(lines) + "\n"
