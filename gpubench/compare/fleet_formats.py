"""Outputs of the fleet view (:mod:`gpubench.compare.fleet`): the same four formats as compare's."""

from __future__ import annotations

import json
import math
from typing import Any

from rich.console import Group
from rich.table import Table

from gpubench.compare.fleet import FleetReport
from gpubench.compare.formats import JunitCase, jsonable, junit_xml, markdown_table, pct
from gpubench.console import fmt_value, unit_text

FLAGGED_SHOWN = 50  # the terminal lists this many flagged figures; the other formats list all of them
DEVICE_HEADERS = ["device", "model", "figures", "flagged", "median gap (+ worse)", "worst deviation", "worst z",
                  "worst figure"]
ROW_HEADERS = ["device", "suite", "case", "metric", "value", "fleet median", "deviation", "z", "direction"]


def _z(x: Any) -> str:
    return f"{x:+.1f}" if math.isfinite(x) else ("+inf" if x > 0 else "-inf")


def device_cells(d: dict) -> list[str]:
    return [d["device_key"], str(d["device"] or "—"), str(d["figures"]), str(d["flagged"]),
            pct(d["median_worse_by"], signed=True), pct(d["worst_deviation"], signed=True), _z(d["worst_z"]),
            d["worst_figure"]]


def row_cells(r: dict) -> list[str]:
    unit = unit_text(r["unit"]) if r["unit"] else ""
    return [r["device_key"], str(r["suite"]), str(r["case"]), str(r["metric"]), f"{fmt_value(r['value'])} {unit}",
            f"{fmt_value(r['fleet_median'])} {unit}", pct(r["deviation"], signed=True), _z(r["z"]), r["direction"]]


def terminal(report: FleetReport) -> Group:
    devices = Table(title=report.title(), title_justify="left", caption=report.summary(), caption_justify="left")
    for h in DEVICE_HEADERS:
        devices.add_column(h)
    for d in report.devices.to_dict("records"):
        devices.add_row(*device_cells(d), style="bold red" if d["flagged"] else None)
    flagged = report.rows[report.rows["flagged"]]
    if flagged.empty:
        return Group(devices)
    shown = f", the first {FLAGGED_SHOWN}" if len(flagged) > FLAGGED_SHOWN else ""
    figures = Table(title=f"flagged figures (worst first{shown})", title_justify="left")
    for h in ROW_HEADERS:
        figures.add_column(h)
    for r in flagged.head(FLAGGED_SHOWN).to_dict("records"):
        figures.add_row(*row_cells(r))
    return Group(devices, figures)


def to_markdown(report: FleetReport) -> str:
    flagged = report.rows[report.rows["flagged"]]
    lines = [f"### {'❌' if len(flagged) else '✅'} {report.title()}", "", report.summary(), ""]
    lines += markdown_table(DEVICE_HEADERS, (device_cells(d) for d in report.devices.to_dict("records")))
    if len(flagged):
        lines += ["", "#### flagged figures", ""]
        lines += markdown_table(ROW_HEADERS, (row_cells(r) for r in flagged.to_dict("records")))
    return "\n".join(lines) + "\n"


def to_junit(report: FleetReport) -> str:
    """One testcase per device; a device with flagged figures fails."""
    cases = []
    for d in report.devices.to_dict("records"):
        failure = (f"{d['flagged']} figure(s) beyond {report.k:g} robust z; worst {d['worst_figure']} "
                   f"{pct(d['worst_deviation'], signed=True)} from the fleet median") if d["flagged"] else None
        detail = f"median gap {pct(d['median_worse_by'], signed=True)} (+ worse); worst z {_z(d['worst_z'])}"
        cases.append(JunitCase(f"gpubench.fleet.{d['host']}", f"device {d['device_index']} ({d['device']})", failure,
                               detail))
    return junit_xml("gpubench fleet", cases, {"title": report.title(), "summary": report.summary()})


def to_json(report: FleetReport) -> str:
    doc = {"format": "gpubench-fleet", "version": 1, "title": report.title(), "k": report.k,
           "sources": [s.label for s in report.sides], "exit_code": report.exit_code,
           "devices": report.devices.to_dict("records"), "rows": report.rows.to_dict("records")}
    return json.dumps(jsonable(doc), indent=2) + "\n"


def render(report: FleetReport, fmt: str) -> str:
    return {"markdown": to_markdown, "junit": to_junit, "json": to_json}[fmt](report)


__all__ = ["terminal", "to_markdown", "to_junit", "to_json", "render"]
