"""JUnit XML: one testcase per compared figure, a failure for each WORSE, and what was not compared in one property
(the fleet view: one testcase per device, a failure for each flagged one)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from gpubench.compare.outputs.common import (JunitCase, compared_lines, fleet_z, headers, headline, junit_xml, pct,
                                      row_cells)
from gpubench.compare.verdict import COMPARED, WORSE

if TYPE_CHECKING:
    from gpubench.compare.fleet import FleetReport
    from gpubench.compare.comparison import Report

ORDER = 2
SUFFIXES = (".xml",)


def compare(report: Report, all_rows: bool = False) -> str:
    cases = []
    for r in report.rows.to_dict("records"):
        if r["status"] != COMPARED:
            continue
        cells = dict(zip(headers(report.cross_cluster), row_cells(r, report.cross_cluster)))
        detail = (f"{r['verdict']}: {cells['baseline']} → {cells['current']} ({cells['change']}), threshold "
                  f"{cells['threshold']}, p {cells['p']}, {cells['basis']}" + (f"; {r['note']}" if r["note"] else ""))
        failure = (f"{r['metric']} {cells['change']} (threshold {cells['threshold']}, p {cells['p']})"
                   if r["verdict"] == WORSE else None)
        cases.append(JunitCase(f"gpubench.{r['suite']}", f"{r['case']} {r['metric']}", failure, detail))
    props = {"title": report.title(), "summary": headline(report), "alpha": f"{report.alpha:g}"}
    if report.setting_differences:
        props["setting_differences"] = "; ".join(report.setting_differences)
    # what was not compared, by suite and reason: as testcases, cases skipped on a CPU would outnumber the figures
    if not_said := compared_lines(report)[1:]:
        props["not_compared"] = "; ".join(not_said)
    return junit_xml("gpubench compare", cases, props)


def fleet(report: FleetReport) -> str:
    """One testcase per device; a device with flagged figures fails."""
    cases = []
    for d in report.devices.to_dict("records"):
        failure = (f"{d['flagged']} figure(s) beyond {report.k:g} robust z; worst {d['worst_figure']} "
                   f"{pct(d['worst_deviation'], signed=True)} from the fleet median") if d["flagged"] else None
        detail = f"median gap {pct(d['median_worse_by'], signed=True)} (+ worse); worst z {fleet_z(d['worst_z'])}"
        cases.append(JunitCase(f"gpubench.fleet.{d['host']}", f"device {d['device_index']} ({d['device']})", failure,
                               detail))
    return junit_xml("gpubench fleet", cases, {"title": report.title(), "summary": report.summary()})
