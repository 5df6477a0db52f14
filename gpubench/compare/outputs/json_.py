"""JSON: everything, for tools (docs/compare.md lists the fields)."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from gpubench.compare import sensitivity
from gpubench.compare.outputs.common import jsonable, not_compared

if TYPE_CHECKING:
    from gpubench.compare.fleet import FleetReport
    from gpubench.compare.load import Side
    from gpubench.compare.comparison import Report

ORDER = 3
SUFFIXES = (".json",)
JSON_FORMAT = "gpubench-compare"
JSON_VERSION = 1


def _side(side: Side, system: dict[str, Any], text: str) -> dict[str, Any]:
    return {"label": side.label, "paths": [str(p) for p in side.paths], "run_ids": side.run_ids,
            "system": system, "description": text}


def compare(report: Report, all_rows: bool = False) -> str:
    doc = {
        "format": JSON_FORMAT,
        "version": JSON_VERSION,
        "title": report.title(),
        "cross_cluster": report.cross_cluster,
        "system_differences": report.system_differences,
        "baseline": _side(report.baseline, report.baseline_system, report.baseline_text),
        "current": _side(report.current, report.current_system, report.current_text),
        "alpha": report.alpha,
        "thresholds": report.thresholds.as_dict(),
        "summary": report.counts(),
        "not_compared": not_compared(report),
        "sensitivity": sensitivity.summary(report.rows.to_dict("records")),
        "exit_code": report.exit_code,
        "notes": report.notes,
        "contention": report.contended,
        "setting_differences": report.setting_differences,
        "regressions": [{"since": r.since, "nights": r.nights, "last_good": r.last_good, "figures": len(r.figures),
                         "differences": r.differences} for r in report.regressions],
        "window": report.baseline.window_line(),
        "recorded": report.recorded,
        "rows": report.rows.to_dict("records"),
    }
    return json.dumps(jsonable(doc), indent=2) + "\n"


def fleet(report: FleetReport) -> str:
    doc = {"format": "gpubench-fleet", "version": 1, "title": report.title(), "k": report.k,
           "sources": [s.label for s in report.sides], "exit_code": report.exit_code,
           "devices": report.devices.to_dict("records"), "rows": report.rows.to_dict("records")}
    return json.dumps(jsonable(doc), indent=2) + "\n"
