"""The HTML page: a header naming each run's system and device state, the charts (embedded as base64 so the
one file is enough to view the report offline, and linked to the PNGs beside it), and the compare tables."""

from __future__ import annotations

import base64
import math
import re
from collections.abc import Mapping
from html import escape
from pathlib import Path

import pandas as pd

from gpubench.compare.outputs.common import context_lines, headers, human_case, row_cells
from gpubench.compare.comparison import CompareTable
from gpubench.machine.contention import MEASURED_KEYS, closing, measured
from gpubench.suite import Suite
from gpubench.report.plotting import Chart
from gpubench.report.runs import Run
from gpubench.results.rundir import status_of
from gpubench.units import format_bytes

PAGE = "index.html"
# A cell wraps between words (and a case between its parameters: _breakable), never inside one: "anywhere" let a
# crowded table fold UNKNOWN into UNKNOW|N and +272.3% into +272.3|%. Command lines, paths and times too (_unbroken):
# an option or a date is one word. Below 760 px the system table's runs are stacked, each cell under its header.
_CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Helvetica,Arial,sans-serif;margin:24px;color:#222;max-width:1352px}
h1{font-size:22px;margin:0 0 4px} h2{font-size:18px;border-bottom:1px solid #ddd;padding-bottom:4px;margin-top:28px}
h3{font-size:15px;margin:14px 0 6px} table{border-collapse:collapse;font-size:12px;margin:6px 0}
td,th{border:1px solid #ddd;padding:3px 6px;text-align:left;vertical-align:top} th{background:#f4f4f4}
img{max-width:100%;border:1px solid #eee} .note{color:#555;font-style:italic} .warn{color:#b00}
tr.WORSE td{background:#fbd5d5} tr.BETTER td{background:#d6f5d6} tr.UNKNOWN td{background:#fff3c4}
tr.SAME td{background:#fff} tr.other td{color:#888} code{font-size:11px} .nw{white-space:nowrap}
.small{font-size:11px;color:#555} table{max-width:100%} td{overflow-wrap:break-word} .scroll{overflow-x:auto}
@media (max-width:760px){table.stacked,table.stacked tbody,table.stacked tr,table.stacked td{display:block}
  table.stacked tr:first-child{display:none} table.stacked tr{border:1px solid #ddd;margin-bottom:8px}
  table.stacked td{border:0;border-top:1px solid #eee}
  table.stacked td::before{content:attr(data-head);display:block;font-size:11px;color:#555}}
"""


def _fmt(x, unit: str = "", digits: int = 4) -> str:
    if x is None or (isinstance(x, float) and not math.isfinite(x)):
        return "—"
    if isinstance(x, float):
        x = f"{x:.{digits}g}"
    return f"{x}{unit}"


def _median(df: pd.DataFrame, col: str, how: str = "median"):
    if col not in df.columns:
        return None
    v = pd.to_numeric(df[col], errors="coerce").dropna()
    return None if v.empty else float(getattr(v, how)())


def _throttle(df: pd.DataFrame) -> str:
    """The throttle reasons seen while sampling; "not observed" where nothing read them (telemetry off, no NVML),
    which is not the same as none."""
    if "throttle" not in df.columns or not df["throttle"].notna().any():
        return "not observed"
    seen = sorted({t.strip() for v in df["throttle"].dropna() for t in str(v).split(",") if t.strip()})
    return ", ".join(seen) or "none"


def _observed(r: Run) -> bool:
    """Whether device state was read at all for this run (a telemetry source, and not --no-telemetry)."""
    return r.meta.get("telemetry") not in ("off", "none", None) and r.volatile.get("telemetry_source") not in (None,
                                                                                                            "none")


def _system_rows(runs: list[Run]) -> str:
    head = ["run (command below)", "system", "software",
            "at start: SM / mem clock (max), power, temp, throttle (a CPU: its load)",
            "while sampling: median SM / mem clock, power, max temp (a CPU: what others used)",
            "throttle reasons while sampling"]
    rows = []
    for r in runs:
        i = r.identity
        soft = ", ".join(f"{k.replace('_version', '')} {i[k]}" for k in
                         ("driver_version", "runtime", "runtime_version", "torch", "nccl") if i.get(k)) or "—"
        argv = " ".join(str(a) for a in r.meta.get("argv") or [])
        state = _cpu_state(r) if _on_cpu(r) else _gpu_state(r)
        start = _unbroken(str(r.meta.get("start_time", "")))
        rows.append([f"<b>{escape(r.label)}</b> <span class=\"small\">{start}<br><code>{_unbroken(str(r.path))}"
                     f"</code><br><code>{_unbroken(argv)}</code></span>",
                     escape(_system(r)), escape(soft), *(escape(x) for x in state)])
    return _table(head, rows, stacked=True)


def _unbroken(text: str) -> str:
    """``text``, escaped, that wraps only at its spaces and after a path's slashes: never inside an option
    (``-``/``-backend``) or a time (``2026-12-``/``07T…``), which a browser would split at a hyphen."""
    words = []
    for word in text.split(" "):
        parts = re.findall(r"[^/]*/|[^/]+", word) or [word]
        words.append("<wbr>".join(f'<span class="nw">{escape(p)}</span>' for p in parts))
    return " ".join(words)


def _on_cpu(r: Run) -> bool:
    """A run measured on the CPU backend (or on a machine without a GPU): no clocks, power or throttle to read."""
    i = r.identity
    return (r.meta.get("backend") or i.get("backend")) == "cpu" or (not i.get("gpu_model") and not i.get("gpu_count"))


def _system(r: Run) -> str:
    i = r.identity
    fp = (r.meta.get("fingerprint") or {}).get("fingerprint", "—")
    where = f"host {i.get('hostname', '?')}, cluster {r.cluster}, fingerprint {fp}"
    if _on_cpu(r):
        cpus = f", {i['cpu_count']} CPUs" if i.get("cpu_count") else ""
        memory = f", {format_bytes(i['memory_bytes'])}" if i.get("memory_bytes") else ""
        return f"{i.get('cpu_model') or 'CPU'}{cpus}{memory}, {where}"
    count = i.get("gpu_count")
    model = i.get("gpu_model") or i.get("cpu_model") or "unknown"
    return f"{model}{f' ×{count}' if count and count > 1 else ''}, {where}"


def _gpu_state(r: Run) -> list[str]:
    """At start, while sampling, the throttle reasons seen: a GPU's clocks, power, temperature."""
    v, df = r.volatile, r.df
    start = (f"{_fmt(v.get('sm_clock_mhz'))} / {_fmt(v.get('mem_clock_mhz'))} MHz "
             f"({_fmt(v.get('max_sm_clock_mhz'))} / {_fmt(v.get('max_mem_clock_mhz'))}), "
             f"{_fmt(v.get('power_w'), ' W', 3)} of {_fmt(v.get('power_limit_w'), ' W', 3)}, "
             f"{_fmt(v.get('temp_c'), ' °C', 3)}, "
             + (", ".join(v.get("throttle") or []) or "no throttle" if _observed(r) else "throttle not observed")
             if v else "—")
    during = (f"{_fmt(_median(df, 'sm_clock_mhz'))} / {_fmt(_median(df, 'mem_clock_mhz'))} MHz, "
              f"{_fmt(_median(df, 'power_w'), ' W', 3)}, {_fmt(_median(df, 'temp_c', 'max'), ' °C', 3)}")
    return [start, during, _throttle(df) if _observed(r) else "not observed"]


def _cpu_state(r: Run) -> list[str]:
    """What a CPU has instead: the load average at start, the share of its CPUs other processes used while the
    cases ran (their median), and no throttle reasons to read."""
    load = r.volatile.get("loadavg") or []
    cpus = r.identity.get("cpu_count")
    start = f"load average {load[0]:.1f}" + (f" on {cpus} CPUs" if cpus else "") if load else "—"
    share = _median(r.df, "host_load")
    during = f"other processes used {100 * share:.0f}% of its CPUs (median over the cases)" if share is not None \
        else "what other processes used was not read"
    return [start, during, "none read on a CPU"]


def _shared(runs: list[Run]) -> str:
    """A warning at the top of the page for each run measured on a shared GPU or a busy host (its run.json's
    ``contention``): those figures are not the hardware's alone."""
    items = []
    for r in runs:
        c = r.meta.get("contention") or {}
        cases = measured(r.df.reindex(columns=MEASURED_KEYS).to_dict("records"))
        items += [f"<li><b>{escape(r.label)}</b>: {escape(line)}</li>" for line in closing(c, cases)]
        if r.path.is_dir() and status_of(r.path, r.meta) == "abandoned":
            items.append(f"<li><b>{escape(r.label)}</b>: abandoned: its run.json still says running, but its processes "
                         "are gone (killed, or its node lost): its tables hold only the cases measured before</li>")
    return f'<ul class="warn">{"".join(items)}</ul>' if items else ""


def _table(head: list[str], rows: list[list[str]], classes: list[str] | None = None, stacked: bool = False) -> str:
    """A table; ``stacked``: in a narrow window its rows are stacked, each cell under its header (``data-head``)."""
    cells = [f' data-head="{escape(h)}"' if stacked else "" for h in head]
    named = ' class="stacked"' if stacked else ""
    out = [f"<table{named}><tr>" + "".join(f"<th>{escape(h)}</th>" for h in head) + "</tr>"]
    for k, row in enumerate(rows):
        cls = f' class="{classes[k]}"' if classes else ""
        out.append(f"<tr{cls}>" + "".join(f"<td{a}>{c}</td>" for a, c in zip(cells, row)) + "</tr>")
    return "\n".join(out + ["</table>"])


def _chart(c: Chart, out: Path) -> str:
    parts = [f"<h3>{escape(c.title)}</h3>"]
    if c.file:
        data = base64.b64encode((out / c.file).read_bytes()).decode()
        parts.append(f'<a href="{escape(c.file)}"><img src="data:image/png;base64,{data}" '
                     f'alt="{escape(c.title)}" data-file="{escape(c.file)}"></a>')
        if c.note:
            parts.append(f'<p class="warn">{escape(c.note)}</p>')
    else:
        parts.append(f'<p class="note">No chart: {escape(c.note)}.</p>')
    return "\n".join(parts)


def _compare(t: CompareTable) -> str:
    rep = t.report
    cells = [row_cells({**r, "case": human_case(r["case"])}, rep.cross_cluster) for r in rep.rows.to_dict("records")]
    diff = rep.system_differences
    info = (f"<h3>{escape(t.baseline.label)} (baseline) → {escape(t.current.label)}</h3>"
            f"<p><b>{escape(rep.summary())}</b>{' — cross-cluster: ' + escape('; '.join(diff)) if diff else ''}"
            f"<br>baseline: {escape(rep.baseline_text)}<br>current: {escape(rep.current_text)}"
            + "".join(f"<br>{escape(line)}" for line in context_lines(rep)) + "</p>")
    # What changed (WORSE, BETTER, UNKNOWN) is shown; SAME and the uncompared rows wait behind a click, or a
    # long table would push everything after it out of view.
    changed = [c for c in cells if c[0] in ("WORSE", "BETTER", "UNKNOWN")]
    rest = [c for c in cells if c[0] not in ("WORSE", "BETTER", "UNKNOWN")]
    head = headers(rep.cross_cluster)
    case = head.index("case") if "case" in head else -1

    def html_cells(c: list[str]) -> list[str]:
        return [_breakable(x) if k == case else escape(x) for k, x in enumerate(c)]

    # Its many columns do not fit a narrow window: there the table scrolls sideways in its own box, not the page.
    body = ""
    if changed:
        body += _scrolled(_table(head, [html_cells(c) for c in changed], [c[0] for c in changed]))
    if rest:
        classes = ["SAME" if c[0] == "SAME" else "other" for c in rest]
        body += (f"<details><summary>{len(rest)} more rows (SAME, or not compared)</summary>"
                 + _scrolled(_table(head, [html_cells(c) for c in rest], classes)) + "</details>")
    return info + body


def _scrolled(table: str) -> str:
    return f'<div class="scroll">{table}</div>'


def _breakable(case: str) -> str:
    """A case's text, escaped, that may wrap after each comma between its parameters (and at its spaces)."""
    return escape(case).replace(",", ",<wbr>")


def _compares(tables: list[CompareTable]) -> str:
    done = "\n".join(_compare(t) for t in tables if t.report is not None)
    skipped = [f"<li>{escape(t.current.label)}: {_unbroken(t.note)}</li>" for t in tables if t.report is None]
    return done + (f'<h3>not compared</h3><ul class="note">{"".join(skipped)}</ul>' if skipped else "")


def write(runs: list[Run], charts: list[Chart], tables: list[CompareTable], out: Path,
          order: Mapping[str, int] | None = None) -> Path:
    """The page; ``order``: where each suite's charts go (Suite.chart_order; lower first, then by name)."""
    out.mkdir(parents=True, exist_ok=True)
    sections = []
    order = order or {}
    for suite in sorted({c.suite for c in charts}, key=lambda s: (order.get(s, Suite.chart_order), s)):
        sections.append(f"<h2>{escape(suite)}</h2>" + "\n".join(_chart(c, out) for c in charts if c.suite == suite))
    if not charts:
        sections.append('<p class="note">These runs hold no suite this report draws.</p>')
    if tables:
        sections.append("<h2>compare</h2><p>Each later run against the first run that shares a suite with it "
                        "(<code>gpubench compare</code>; verdicts: "
                        '<span style="background:#fbd5d5">WORSE</span> <span style="background:#d6f5d6">BETTER'
                        '</span> SAME <span style="background:#fff3c4">UNKNOWN</span>).</p>'
                        + _compares(tables))
    html = (f"<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>gpubench report</title>"
            f"<style>{_CSS}</style></head><body>\n<h1>gpubench report</h1>\n{_shared(runs)}<p>{len(runs)} run(s). "
            "Charts: medians; error bars: interquartile range of the samples.</p>\n<h2>systems and device state</h2>\n"
            f"{_system_rows(runs)}\n" + "\n".join(sections) + "\n</body></html>\n")
    path = out / PAGE
    path.write_text(html, encoding="utf-8")
    return path


__all__ = ["write", "PAGE"]
