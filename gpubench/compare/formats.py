"""compare's outputs: a terminal table, Markdown (a CI job summary), JUnit XML (one testcase per compared
figure, a failure for each WORSE) and JSON (everything, for tools). docs/compare.md describes each."""

from __future__ import annotations

import json
import math
import xml.etree.ElementTree as ET
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from rich.table import Table
from rich.text import Text

from gpubench.compare.verdict import COMPARED, WORSE
from gpubench.console import fmt_value

FORMATS = ("terminal", "markdown", "junit", "json")
SUFFIXES = {".md": "markdown", ".markdown": "markdown", ".xml": "junit", ".json": "json"}
JSON_FORMAT = "gpubench-compare"
JSON_VERSION = 1
_STYLE = {"WORSE": "bold red", "BETTER": "green", "SAME": "", "UNKNOWN": "yellow"}


def jsonable(x: Any) -> Any:
    """NaN and numpy scalars → what JSON can hold (null, plain numbers)."""
    if isinstance(x, dict):
        return {str(k): jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [jsonable(v) for v in x]
    if hasattr(x, "item") and not isinstance(x, (str, bytes)):
        x = x.item()
    if isinstance(x, float) and not math.isfinite(x):
        return None
    return x


def _num(x: Any) -> float:
    try:
        return float(x)
    except (TypeError, ValueError):
        return math.nan


def pct(x: Any, signed: bool = False) -> str:
    v = _num(x)
    if not math.isfinite(v):
        return "—"
    return f"{100 * v:+.1f}%" if signed else f"{100 * v:.3g}%"


def _value(x: Any, unit: Any) -> str:
    v = _num(x)
    return "—" if not math.isfinite(v) else f"{fmt_value(v)} {unit or ''}".strip()


def _peak(x: Any) -> str:
    v = _num(x)
    return "—" if not math.isfinite(v) else f"{v:.1f}%"


def _basis(r: dict) -> str:
    if r["status"] != COMPARED:
        return ""
    n = f"n={_int(r['n_baseline'])}/{_int(r['n_current'])}"
    return f"{r['basis'] or 'samples'} {n}"  # samples, run-medians or threshold-only


def _int(x: Any) -> str:
    v = _num(x)
    return str(int(v)) if math.isfinite(v) else "0"


def _verdict(r: dict) -> str:
    return str(r["verdict"] if r["status"] in (COMPARED, "incomparable") else r["status"])


def row_cells(r: dict, cross_cluster: bool) -> list[str]:
    """The cells every human-readable format shows for a row, in HEADERS order."""
    p = _num(r["p_value"])
    cells = [_verdict(r), str(r["suite"]), str(r["case"]), str(r["metric"]), _value(r["baseline"], r["unit"]),
             _value(r["current"], r["unit"]), pct(r["change"], signed=True)]
    if cross_cluster:
        ratio = _num(r["ratio"])
        cells += [f"{ratio:.3f}×" if math.isfinite(ratio) else "—", _peak(r["baseline_pct_peak"]),
                  _peak(r["current_pct_peak"])]
    cells += [pct(r["threshold"]), f"{p:.2g}" if math.isfinite(p) else "—", _basis(r), str(r["note"] or "")]
    return cells


def headers(cross_cluster: bool) -> list[str]:
    h = ["verdict", "suite", "case", "metric", "baseline", "current", "change"]
    if cross_cluster:
        h += ["ratio", "baseline % peak", "current % peak"]
    return h + ["threshold", "p", "basis", "note"]


def context_lines(report: Any) -> list[str]:
    """What a reader needs beside the verdicts: notes on the inputs, and the settings that differ."""
    lines = [f"note: {n}" for n in report.notes]
    if report.setting_differences:
        lines.append("settings differ: " + "; ".join(report.setting_differences))
    return lines


def terminal_table(report: Any) -> Table:
    caption = Text("\n".join([report.summary(), *context_lines(report)]))  # Text: a "[" in a value is no markup
    table = Table(title=report.title(), title_justify="left", caption=caption, caption_justify="left")
    for h in headers(report.cross_cluster):
        table.add_column(h, justify="right" if h in ("baseline", "current", "change", "ratio", "p") else "left",
                         overflow="fold")  # a case id cut short would name another case
    for r in report.rows.to_dict("records"):
        cells = row_cells(r, report.cross_cluster)
        style = _STYLE.get(cells[0], "dim")
        table.add_row(*cells, style=style or None)
    return table


def _md_cell(text: str) -> str:
    return text.replace("\\", "\\\\").replace("|", "\\|").replace("\n", " ")


def markdown_table(head: Sequence[str], rows: Iterable[Sequence[str]]) -> list[str]:
    lines = ["| " + " | ".join(_md_cell(h) for h in head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(_md_cell(c) for c in row) + " |" for row in rows]
    return lines


def to_markdown(report: Any) -> str:
    worse = report.counts().get(WORSE, 0)
    lines = [f"### {'❌' if worse else '✅'} gpubench compare: {report.summary()}", "",
             f"- baseline: {_md_cell(report.baseline_text)}",
             f"- current: {_md_cell(report.current_text)}",
             f"- WORSE needs a change of at least the threshold, beyond the spread of the baseline's run medians "
             f"(with a window of runs), and a Mann-Whitney p ≤ {report.alpha:g}"]
    lines += [f"- {_md_cell(line)}" for line in context_lines(report)]
    if report.system_differences:
        lines.append(f"- different systems: {_md_cell('; '.join(report.system_differences))}")
    lines.append("")
    lines += markdown_table(headers(report.cross_cluster),
                            (row_cells(r, report.cross_cluster) for r in report.rows.to_dict("records")))
    return "\n".join(lines) + "\n"


@dataclass
class JunitCase:
    classname: str
    name: str
    failure: str | None = None  # the failure message; None passes
    detail: str = ""


def junit_xml(suite_name: str, cases: Sequence[JunitCase], properties: dict[str, str]) -> str:
    failures = sum(c.failure is not None for c in cases)
    root = ET.Element("testsuites", name=suite_name, tests=str(len(cases)), failures=str(failures), errors="0")
    suite = ET.SubElement(root, "testsuite", name=suite_name, tests=str(len(cases)), failures=str(failures),
                          errors="0", skipped="0", time="0")
    props = ET.SubElement(suite, "properties")
    for k, v in properties.items():
        ET.SubElement(props, "property", name=k, value=v)
    for c in cases:
        tc = ET.SubElement(suite, "testcase", classname=c.classname, name=c.name, time="0")
        if c.failure is not None:
            ET.SubElement(tc, "failure", message=c.failure, type="WORSE").text = c.detail
        elif c.detail:
            ET.SubElement(tc, "system-out").text = c.detail
    ET.indent(root)
    return '<?xml version="1.0" encoding="utf-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"


def to_junit(report: Any) -> str:
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
    props = {"title": report.title(), "summary": report.summary(), "alpha": f"{report.alpha:g}"}
    if report.setting_differences:
        props["setting_differences"] = "; ".join(report.setting_differences)
    return junit_xml("gpubench compare", cases, props)


def _side(side: Any, system: dict, text: str) -> dict:
    return {"label": side.label, "paths": [str(p) for p in side.paths], "run_ids": side.run_ids,
            "system": system, "description": text}


def to_json(report: Any) -> str:
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
        "exit_code": report.exit_code,
        "notes": report.notes,
        "setting_differences": report.setting_differences,
        "rows": report.rows.to_dict("records"),
    }
    return json.dumps(jsonable(doc), indent=2) + "\n"


def render(report: Any, fmt: str) -> str:
    return {"markdown": to_markdown, "junit": to_junit, "json": to_json}[fmt](report)


__all__ = ["FORMATS", "SUFFIXES", "terminal_table", "to_markdown", "to_junit", "to_json", "render", "jsonable",
           "markdown_table", "junit_xml", "JunitCase"]
