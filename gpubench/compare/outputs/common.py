"""What every output of compare shows: a row's cells and the headers over them, which rows the human views list
and how, and the pieces the formats share (JSON values, Markdown tables, JUnit XML). The formats themselves are
one module each in :mod:`gpubench.compare.outputs`; docs/compare.md describes each.

The terminal and Markdown views are for people: they lead with one line of counts, list the figures compared
that are not SAME, worst first, and shorten case ids (the parameters every listed row shares are said once under
the table). What was not compared (a figure of one side only, a case skipped with no number on either side) is
counted by suite and reason in a line each, not listed row by row. ``--all`` lists every figure; JUnit holds
every figure compared, JSON every row."""

from __future__ import annotations

import math
import re
import xml.etree.ElementTree as ET
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from gpubench.compare import sensitivity
from gpubench.compare.verdict import COMPARED, ONLY_BASELINE, ONLY_CURRENT, SAME, SKIPPED
from gpubench.console import fmt_value, p_text, param_text, unit_text
from gpubench.timing.stats import number

if TYPE_CHECKING:
    from gpubench.compare.comparison import Report


def jsonable(x: object) -> Any:
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


def pct(x: object, signed: bool = False) -> str:
    v = number(x)
    if not math.isfinite(v):
        return "—"
    return f"{100 * v:+.1f}%" if signed else f"{fmt_value(100 * v)}%"


def _value(x: object, unit: object) -> str:
    v = number(x)
    return "—" if not math.isfinite(v) else f"{fmt_value(v)} {unit_text(unit) if unit else ''}".strip()


def _peak(x: object) -> str:
    v = number(x)
    return "—" if not math.isfinite(v) else f"{v:.1f}%"


def _basis(r: dict) -> str:
    if r["status"] != COMPARED:
        return ""
    n = f"n={_int(r['n_baseline'])}/{_int(r['n_current'])}"
    return f"{r['basis'] or 'samples'} {n}"  # samples, run-medians or threshold-only


def _int(x: object) -> str:
    v = number(x)
    return str(int(v)) if math.isfinite(v) else "0"


def _verdict(r: dict) -> str:
    return str(r["verdict"] if r["status"] in (COMPARED, "incomparable") else r["status"])


def row_cells(r: dict, cross_cluster: bool) -> list[str]:
    """The cells every human-readable format shows for a row, in HEADERS order."""
    p = number(r["p_value"])
    cells = [_verdict(r), str(r["suite"]), str(r["case"]), str(r["metric"]), _value(r["baseline"], r["unit"]),
             _value(r["current"], r["unit"]), pct(r["change"], signed=True)]
    if cross_cluster:
        ratio = number(r["ratio"])
        cells += [f"{ratio:.3f}×" if math.isfinite(ratio) else "—", _peak(r["baseline_pct_peak"]),
                  _peak(r["current_pct_peak"])]
    cells += [pct(r["threshold"]), sensitivity.text(r.get("catches")), p_text(p) if math.isfinite(p) else "—",
              _basis(r), str(r["note"] or "")]
    return cells


def headers(cross_cluster: bool) -> list[str]:
    h = ["verdict", "suite", "case", "metric", "baseline", "current", "change"]
    if cross_cluster:
        h += ["ratio", "baseline % peak", "current % peak"]
    return h + ["threshold", "catches", "p", "basis", "note"]


# What was not compared, by status: each is said in one line (by suite and reason) rather than row by row.
_NOT_COMPARED = {ONLY_BASELINE: "only in the baseline, not compared", ONLY_CURRENT: "only in the current run, not "
                 "compared", SKIPPED: "skipped, no figure on either side"}


def not_compared(report: Report) -> list[dict[str, Any]]:
    """The rows compare did not judge for want of a figure on a side, counted by status, suite and reason (the
    row's note: ``current skipped: needs a GPU``; "" for a figure measured on its one side)."""
    groups: Counter = Counter()
    for r in report.rows.to_dict("records"):
        if r["status"] in _NOT_COMPARED:
            groups[(r["status"], str(r["suite"]), str(r["note"] or ""))] += 1
    order = list(_NOT_COMPARED)
    return [{"status": st, "suite": suite, "reason": why, "figures": n} for (st, suite, why), n in
            sorted(groups.items(), key=lambda g: (order.index(g[0][0]), -g[1], g[0][1], g[0][2]))]


def compared_lines(report: Report) -> list[str]:
    """Which figures were compared, by suite, and the rest by status, suite and reason, one line each
    (``skipped, no figure on either side: 111 figure(s): gemm 111 (current skipped: needs a GPU …)``); nothing
    where every row was compared."""
    groups = not_compared(report)
    if not groups:
        return []
    judged = Counter(str(r["suite"]) for r in report.rows.to_dict("records") if r["status"] == COMPARED)
    by_suite = ", ".join(f"{s} {n}" for s, n in judged.most_common())
    lines = [f"compared: {sum(judged.values())} figure(s)" + (f": {by_suite}" if judged else "")]
    for status, what in _NOT_COMPARED.items():
        mine = [g for g in groups if g["status"] == status]
        if mine:
            parts = [f"{g['suite']} {g['figures']}" + (f" ({g['reason']})" if g["reason"] else "") for g in mine]
            lines.append(f"{what}: {sum(g['figures'] for g in mine)} figure(s): {', '.join(parts)}")
    return lines


def context_lines(report: Report) -> list[str]:
    """What a reader needs beside the verdicts: what was compared and what not, how small a change this comparison
    catches, notes on the inputs, what the directory's memory knows of the regressions, and the settings that
    differ."""
    lines = compared_lines(report)
    lines += [f"note: {n}" for n in report.notes]
    lines += [f"regression: {r.line()}" for r in report.regressions]
    catches = sensitivity.line(report.rows.to_dict("records"))
    lines += [catches] if catches else []
    if report.setting_differences:
        lines.append("settings differ: " + "; ".join(report.setting_differences))
    return lines


def headline(report: Report) -> str:
    """The first line of the human views: the counts, and a shared GPU when there was one."""
    return " — ".join([report.summary(), *report.contended])


# Worst first in the human views (the rows' order may have changed in post-passes over the verdicts).
_RANK = {"WORSE": 0, "UNKNOWN": 1, "not-ok": 2, "incomparable": 3, "only-baseline": 4, "only-current": 5,
         "BETTER": 6, "SAME": 7}


def _worse_by(r: dict) -> float:
    ch = number(r["change"])
    if not math.isfinite(ch):
        return -math.inf
    return -ch if r["better"] == "higher" else ch


def shown_rows(report: Report, all_rows: bool = False) -> list[dict]:
    """The rows the human views list, worst first: the figures compared that are not SAME (with ``all_rows``,
    every figure). A case skipped with no number on either side is never listed (compared_lines counts it)."""
    rows = [r for r in report.rows.to_dict("records") if r["status"] != SKIPPED]
    if not all_rows:
        rows = [r for r in rows if r["status"] not in (ONLY_BASELINE, ONLY_CURRENT)
                and not (r["status"] == COMPARED and r["verdict"] == SAME)]
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


# A note that this many listed rows share (every host-timed figure of a young baseline; the figures that moved as
# far as they usually do between runs, on any quiet night) is said once under the table, each row's note cell
# holding its mark: the reason is the news, and each figure stays listed on one line.
_SHARED = 3


def _reason(note: str) -> str:
    """A note without its figures: the parenthesised numbers dropped, worse/better said as "moved"."""
    text = re.sub(r"\s*\([^()]*\)", "", note).strip()
    return re.sub(r"^(worse|better) by ", "moved by ", text)


def _marks(rows: list[dict]) -> tuple[list[dict], list[str]]:
    """(the rows, those whose UNKNOWN or not-ok note _SHARED or more share with its mark ``[1]`` for a note, the
    lines saying each shared note once: ``[1] 23 figure(s): moved by the threshold or more, but within noise``)."""
    notes: dict[str, list[str]] = {}  # reason -> the notes saying it
    for r in rows:
        if _verdict(r) in ("UNKNOWN", "not-ok") and r["note"]:
            notes.setdefault(_reason(str(r["note"])), []).append(str(r["note"]))
    common = [n for n in sorted(notes, key=lambda n: -len(notes[n])) if len(notes[n]) >= _SHARED]
    mark = {n: f"[{k}]" for k, n in enumerate(common, start=1)}
    marked = [{**r, "note": mark[_reason(str(r["note"]))]} if _verdict(r) in ("UNKNOWN", "not-ok") and r["note"]
              and _reason(str(r["note"])) in mark else r for r in rows]
    # one note said by all of them is said whole; notes differing in their figures are said by their reason
    return marked, [f"{mark[n]} {len(notes[n])} figure(s): {notes[n][0] if len(set(notes[n])) == 1 else n}"
                    for n in common]


def listing(report: Report, all_rows: bool) -> tuple[list[dict], list[str], list[str]]:
    """(rows to list, their short case ids, the lines under the table: shared notes, shared parameters, what is
    not listed)."""
    rows, foot = _marks(shown_rows(report, all_rows))
    short, shared = short_cases([r["case"] for r in rows])
    if shared:
        foot.append(f"every case listed has {', '.join(shared)}")
    same = sum(1 for r in report.rows.to_dict("records") if r["status"] == COMPARED and r["verdict"] == SAME)
    if same and not all_rows:
        foot.append(f"{same} SAME figure(s) not listed")
    if not all_rows and (same or any(r["status"] in (ONLY_BASELINE, ONLY_CURRENT) for r in
                                     report.rows.to_dict("records"))):
        foot.append("--all lists every figure; the JSON and JUnit outputs hold every figure compared")
    return rows, short, foot


def md_cell(text: str) -> str:
    return text.replace("\\", "\\\\").replace("|", "\\|").replace("\n", " ")


def markdown_table(head: Sequence[str], rows: Iterable[Sequence[str]]) -> list[str]:
    lines = ["| " + " | ".join(md_cell(h) for h in head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(md_cell(c) for c in row) + " |" for row in rows]
    return lines


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


# The fleet view's cells (gpubench.compare.fleet): a device's line and a flagged figure's.
FLEET_FLAGGED_SHOWN = 50  # the terminal lists this many flagged figures; the other formats list all of them
FLEET_DEVICE_HEADERS = ["device", "model", "figures", "flagged", "median gap (+ worse)", "worst deviation", "worst z",
                  "worst figure"]
FLEET_ROW_HEADERS = ["device", "suite", "case", "metric", "value", "fleet median", "deviation", "z", "direction"]


def fleet_z(x: float) -> str:
    return f"{x:+.1f}" if math.isfinite(x) else ("+inf" if x > 0 else "-inf")


def fleet_device_cells(d: dict) -> list[str]:
    return [d["device_key"], str(d["device"] or "—"), str(d["figures"]), str(d["flagged"]),
            pct(d["median_worse_by"], signed=True), pct(d["worst_deviation"], signed=True), fleet_z(d["worst_z"]),
            d["worst_figure"]]


def fleet_row_cells(r: dict) -> list[str]:
    unit = unit_text(r["unit"]) if r["unit"] else ""
    return [r["device_key"], str(r["suite"]), str(r["case"]), str(r["metric"]), f"{fmt_value(r['value'])} {unit}",
            f"{fmt_value(r['fleet_median'])} {unit}", pct(r["deviation"], signed=True), fleet_z(r["z"]), r["direction"]]


__all__ = ["row_cells", "headers", "context_lines", "compared_lines", "not_compared", "headline", "shown_rows",
           "human_case", "short_cases", "listing",
           "jsonable", "pct", "md_cell", "markdown_table", "junit_xml", "JunitCase", "fleet_device_cells",
           "fleet_row_cells", "fleet_z", "FLEET_DEVICE_HEADERS", "FLEET_ROW_HEADERS", "FLEET_FLAGGED_SHOWN"]
