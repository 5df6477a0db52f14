"""compare's outputs: a terminal table, Markdown (a CI job summary), JUnit XML (one testcase per compared
figure, a failure for each WORSE) and JSON (everything, for tools). docs/compare.md describes each.

The terminal and Markdown views are for people: they lead with one line of counts, list only the figures that
are not SAME, worst first, and shorten case ids (the parameters every listed row shares are said once under
the table). ``--all`` lists every figure; JUnit and JSON always hold them all."""

from __future__ import annotations

import json
import math
import re
import xml.etree.ElementTree as ET
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from rich import box
from rich.console import Group
from rich.table import Table
from rich.text import Text

from gpubench.compare.defaults import FORMATS, SUFFIXES
from gpubench.compare.verdict import COMPARED, SAME, WORSE
from gpubench.console import fmt_value, p_text, param_text, unit_text

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
    return f"{100 * v:+.1f}%" if signed else f"{fmt_value(100 * v)}%"


def _value(x: Any, unit: Any) -> str:
    v = _num(x)
    return "—" if not math.isfinite(v) else f"{fmt_value(v)} {unit_text(unit) if unit else ''}".strip()


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
    cells += [pct(r["threshold"]), p_text(p) if math.isfinite(p) else "—", _basis(r), str(r["note"] or "")]
    return cells


def headers(cross_cluster: bool) -> list[str]:
    h = ["verdict", "suite", "case", "metric", "baseline", "current", "change"]
    if cross_cluster:
        h += ["ratio", "baseline % peak", "current % peak"]
    return h + ["threshold", "p", "basis", "note"]


def context_lines(report: Any) -> list[str]:
    """What a reader needs beside the verdicts: notes on the inputs, what the directory's memory knows of the
    regressions, and the settings that differ."""
    lines = [f"note: {n}" for n in report.notes]
    lines += [f"regression: {r.line()}" for r in getattr(report, "regressions", None) or []]
    if report.setting_differences:
        lines.append("settings differ: " + "; ".join(report.setting_differences))
    return lines


def headline(report: Any) -> str:
    """The first line of the human views: the counts, and a shared GPU when there was one."""
    shared = list(getattr(report, "contended", None) or [])
    return " — ".join([report.summary(), *shared])


# Worst first in the human views (the rows' order may have changed in post-passes over the verdicts).
_RANK = {"WORSE": 0, "UNKNOWN": 1, "not-ok": 2, "incomparable": 3, "only-baseline": 4, "only-current": 5,
         "BETTER": 6, "SAME": 7}


def _worse_by(r: dict) -> float:
    ch = _num(r["change"])
    if not math.isfinite(ch):
        return -math.inf
    return -ch if r["better"] == "higher" else ch


def shown_rows(report: Any, all_rows: bool = False) -> list[dict]:
    """The rows the human views list: every row with ``all_rows``, else those that are not SAME; worst first."""
    rows = report.rows.to_dict("records")
    if not all_rows:
        rows = [r for r in rows if not (r["status"] == COMPARED and r["verdict"] == SAME)]
    return sorted(rows, key=lambda r: (_RANK.get(_verdict(r), 9), -_worse_by(r)))


def human_case(case: str) -> str:
    """A case id with its values as every screen shows them (``array_bytes=4 MiB``)."""
    pairs = [tuple(p.split("=", 1)) if "=" in p else (p, "") for p in str(case).split(",")]
    return ",".join(f"{k}={param_text(k, v)}" if v else k for k, v in pairs)


def short_cases(cases: Sequence[str]) -> tuple[list[str], list[str]]:
    """(each case id without the parameters all of them share, those shared parameters). Ids are
    ``key=value`` lists; values read as every screen shows them (``array_bytes=4 MiB``, ``dtype=fp32``:
    :func:`gpubench.console.param_text`). A lone case keeps all of its parameters."""
    parsed = [[tuple(p.split("=", 1)) if "=" in p else (p, "") for p in str(c).split(",")] for c in cases]
    shared: dict[str, str] = {}
    if len(set(map(str, cases))) > 1:  # one case (several metrics) keeps its whole id
        first = dict(parsed[0])
        shared = {k: v for k, v in first.items() if all(dict(p).get(k, None) == v for p in parsed[1:])}

    def text(pairs):
        return ",".join(f"{k}={param_text(k, v)}" if v else k for k, v in pairs)

    short = [text([(k, v) for k, v in p if k not in shared]) or text(p) for p in parsed]
    return short, [text([kv]) for kv in shared.items()]


# UNKNOWN rows sharing one reason (every host-timed figure of a young baseline; the figures that moved as far
# as they usually do between runs, on any quiet night) are said in one line when there are this many: the
# reason is the news, not each figure.
_COLLAPSE = 3


def _reason(note: str) -> str:
    """A note without its figures: the parenthesised numbers dropped, worse/better said as "moved"."""
    text = re.sub(r"\s*\([^()]*\)", "", note).strip()
    return re.sub(r"^(worse|better) by ", "moved by ", text)


def _collapse(rows: list[dict]) -> tuple[list[dict], list[str]]:
    notes: dict[str, list[str]] = {}  # reason -> the notes saying it
    for r in rows:
        if _verdict(r) == "UNKNOWN" and r["note"]:
            notes.setdefault(_reason(str(r["note"])), []).append(str(r["note"]))
    common = {n for n, said in notes.items() if len(said) >= _COLLAPSE}
    kept = [r for r in rows if not (_verdict(r) == "UNKNOWN" and r["note"] and _reason(str(r["note"])) in common)]
    # one note said by all of them is said whole; notes differing in their figures are said by their reason
    return kept, [f"{len(notes[n])} UNKNOWN figure(s) not listed: {notes[n][0] if len(set(notes[n])) == 1 else n}"
                  for n in sorted(common, key=lambda n: -len(notes[n]))]


def _listing(report: Any, all_rows: bool) -> tuple[list[dict], list[str], list[str]]:
    """(rows to list, their short case ids, the lines under the table: shared parameters, what is hidden)."""
    rows = shown_rows(report, all_rows)
    said: list[str] = []
    if not all_rows:
        rows, said = _collapse(rows)
    short, shared = short_cases([r["case"] for r in rows])
    foot = list(said)
    if shared:
        foot.append(f"every case listed has {', '.join(shared)}")
    same = sum(1 for r in report.rows.to_dict("records") if r["status"] == COMPARED and r["verdict"] == SAME)
    if same and not all_rows:
        foot.append(f"{same} SAME figure(s) not listed")
    if not all_rows and (same or said):
        foot.append("--all lists every figure; the JSON and JUnit outputs hold them all")
    return rows, short, foot


# The terminal leaves out what is in the Markdown and JSON: the threshold and the test's basis.
_TERMINAL = ("verdict", "suite", "case", "metric", "baseline", "current", "change", "ratio", "p", "note")


def terminal_table(report: Any, all_rows: bool = False) -> Group:
    rows, short, foot = _listing(report, all_rows)
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


def _md_cell(text: str) -> str:
    return text.replace("\\", "\\\\").replace("|", "\\|").replace("\n", " ")


def markdown_table(head: Sequence[str], rows: Iterable[Sequence[str]]) -> list[str]:
    lines = ["| " + " | ".join(_md_cell(h) for h in head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(_md_cell(c) for c in row) + " |" for row in rows]
    return lines


def to_markdown(report: Any, all_rows: bool = False) -> str:
    worse = report.counts().get(WORSE, 0)
    lines = [f"### {'❌' if worse else '✅'} gpubench compare: {_md_cell(headline(report))}", "",
             f"- baseline: {_md_cell(report.baseline_text)}",
             f"- current: {_md_cell(report.current_text)}",
             f"- WORSE needs a change of at least the threshold, beyond the spread of the baseline's run medians "
             f"(with a window of runs), and a Mann-Whitney p ≤ {report.alpha:g}"]
    lines += [f"- {_md_cell(line)}" for line in context_lines(report)]
    if report.system_differences:
        lines.append(f"- different systems: {_md_cell('; '.join(report.system_differences))}")
    lines.append("")
    rows, short, foot = _listing(report, all_rows)
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
    lines += [f"_{_md_cell(f)}_" for f in foot]
    return "\n".join(lines).rstrip("\n") + "\n"


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
    props = {"title": report.title(), "summary": headline(report), "alpha": f"{report.alpha:g}"}
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
        "contention": list(getattr(report, "contended", None) or []),
        "setting_differences": report.setting_differences,
        "regressions": [{"since": r.since, "nights": r.nights, "last_good": r.last_good, "figures": len(r.figures),
                         "differences": r.differences} for r in getattr(report, "regressions", None) or []],
        "window": report.baseline.window_line(),
        "recorded": getattr(report, "recorded", None),
        "rows": report.rows.to_dict("records"),
    }
    return json.dumps(jsonable(doc), indent=2) + "\n"


def render(report: Any, fmt: str, all_rows: bool = False) -> str:
    if fmt == "markdown":
        return to_markdown(report, all_rows)
    return {"junit": to_junit, "json": to_json}[fmt](report)


__all__ = ["FORMATS", "SUFFIXES", "terminal_table", "headline", "shown_rows", "short_cases", "to_markdown", "to_junit", "to_json", "render", "jsonable",
           "markdown_table", "junit_xml", "JunitCase"]
