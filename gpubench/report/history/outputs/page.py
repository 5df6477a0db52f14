"""The history page (``gpubench report DIR``, ``gpubench compare --history``): one HTML file holding its data (the
document of gpubench.report.history.document, as JSON), its style and the script that draws every figure from that
data (page.js, page.css beside this module). Nothing
is fetched, so the file alone is the page: attach it to a CI job, mail it, open it offline.

What is written here, in HTML, is what a reader needs before the drawing: which nights and figures the page holds,
the regressions still open, what each mark means, and per figure its name and latest event.
"""

from __future__ import annotations

import json
from html import escape
from importlib import resources
from typing import Any

from gpubench.compare.outputs.common import short_cases
from gpubench.console import fmt_value, unit_text

PAGE = "index.html"


def _asset(name: str) -> str:
    return resources.files(__package__).joinpath(name).read_text(encoding="utf-8")


def day(run_id_or_time: str | None) -> str:
    """YYYY-MM-DD from a run_id (it begins with its UTC start) or an ISO time; the text itself otherwise."""
    text = str(run_id_or_time or "")
    if len(text) >= 8 and text[:8].isdigit():
        return f"{text[:4]}-{text[4:6]}-{text[6:8]}"
    return text[:10]


def _pct(change: float | None) -> str:
    return "" if change is None else f", {100 * change:+.1f}%".replace("-", "−")


def worse_text(mark: dict[str, Any]) -> str:
    n = mark.get("nights") or 1
    return f"WORSE since {day(mark.get('since'))} ({n} night{'s' * (n != 1)}{_pct(mark.get('change'))})"


def _caption(fig: dict[str, Any], nights: list[dict[str, Any]]) -> tuple[str, str]:
    """(css class, text): the figure's latest event (on one night an acceptance, made after the verdict, before a
    recovery, before the WORSE), or its latest night against its window."""
    rank = {"accepted": 2, "recovered": 1, "worse": 0}
    events = [(m["night"], "worse", worse_text(m)) for m in fig["worse"]]
    events += [(m["night"], "recovered", f"{day(nights[m['night']]['time'])}: {m['text']}") for m in fig["recovered"]]
    events += [(m["night"], "accepted", f"accepted {day(m.get('at'))} by {m.get('by')}: {m.get('reason')}")
               for m in fig["accepted"]]
    if events:
        _, cls, text = max(events, key=lambda e: (e[0], rank[e[1]]))
        return cls, text
    last = [v for v in fig["median"] if v is not None]
    if not last:
        return "", ""
    score = fig["score"] or 0.0
    against = f", {abs(score):.1%} {'worse' if score > 0 else 'better'} than its window" if abs(score) >= 5e-4 else ""
    beyond = f", {fig['beyond']:.1%} beyond its band" if (fig.get("beyond") or 0) >= 5e-4 else ""
    return "", f"latest {fmt_value(last[-1])} {unit_text(fig['unit'])}{against}{beyond}"


def _wrapping(label: str) -> str:
    """A card's title, escaped, that wraps between its parameters rather than being cut at the card's edge,
    where the in-place and out-of-place all_gather of one size would read alike (``inplace`` comes last)."""
    return escape(label).replace(",", ",<wbr>")


def _card(i: int, fig: dict[str, Any], label: str, nights: list[dict[str, Any]]) -> str:
    cls, caption = _caption(fig, nights)
    # what the filter box reads: the figure as compare and accept's --filter name it, and as the page shows it
    name = f"{fig['suite']} {fig['case']} {fig['metric']} | {fig['label']}"
    return (f'<div class="fig{" open" if fig["open"] else ""}" id="f{i}" data-i="{i}" data-name="{escape(name)}" '
            f'tabindex="0"><div class="title" title="{escape(fig["label"])}">{_wrapping(label)}</div>'
            f'<div class="metric">{escape(fig["metric"])} ({escape(unit_text(fig["unit"]))}, '
            f'{escape(fig["better"] or "?")} is better)</div><svg class="plot" width="320" height="136"></svg>'
            f'<div class="caption {cls}" title="{escape(caption)}">{escape(caption)}</div></div>')


def _sections(doc: dict[str, Any]) -> str:
    """Per suite, its figures in the document's order (worst recent change first), the suite holding the worst
    first; a figure named by the parameters its suite's figures do not all share (those said once, above)."""
    suites: dict[str, list[int]] = {}
    for i, fig in enumerate(doc["figures"]):
        suites.setdefault(fig["suite"], []).append(i)
    out = []
    for suite, members in suites.items():
        labels, shared = short_cases([doc["figures"][i]["case"] for i in members])
        cards = "".join(_card(i, doc["figures"][i], label, doc["nights"]) for i, label in zip(members, labels))
        common = f'<p class="note">every figure here: {escape(", ".join(shared))}</p>' if shared else ""
        out.append(f'<section class="suite" data-suite="{escape(suite)}"><h2>{escape(suite)}</h2>{common}'
                   f'<div class="grid">{cards}</div></section>')
    return "\n".join(out)


_LEGEND = (
    ('<path d="M0,9 L8,5 L16,7 L24,3" fill="none" stroke="#1f77b4" stroke-width="1.2"/>', "median of the night"),
    ('<rect x="0" y="2" width="24" height="10" fill="#1f77b4" fill-opacity=".22"/>',
     "interquartile range of its samples"),
    ('<rect x="0" y="2" width="24" height="10" fill="#dcdcdc"/>',
     "band: the run medians of the baseline window the gate judged the night against"),
    ('<circle cx="12" cy="7" r="3.2" fill="#d62728"/>', "WORSE (verdict.json), since the night named"),
    ('<circle cx="12" cy="7" r="5" fill="none" stroke="#2ca02c" stroke-width="1.6"/>', "recovered"),
    ('<path d="M12,2 l5,5 l-5,5 l-5,-5Z" fill="#ff9f1c" stroke="#a65a00" stroke-width=".8"/>',
     "accepted (accepted.json), with its reason"),
    ('<circle cx="12" cy="7" r="2.8" fill="#fff" stroke="#1f77b4" stroke-width="1.2"/>',
     "shared GPU or busy host: no evidence for the gate"),
    ('<line x1="12" x2="12" y1="0" y2="14" stroke="#7b3294" stroke-dasharray="3 2"/>',
     "settings changed (driver, NCCL, torch, Triton, gpubench, run options): hover or click for the diff"),
)


def _legend() -> str:
    return '<div class="legend">' + "".join(
        f'<span><svg width="24" height="14">{svg}</svg>{escape(text)}</span>' for svg, text in _LEGEND) + "</div>"


def _head(doc: dict[str, Any]) -> str:
    nights, figs = doc["nights"], doc["figures"]
    opts = doc.get("options") or {}
    asked = "; ".join(f"--{k} {v}" for k, v in opts.items() if v not in (None, "")) or "every night and figure"
    span = f"{day(nights[0]['time'])} … {day(nights[-1]['time'])}" if nights else "none"
    count = sum(n.get("nights", 1) for n in nights)
    lines = [f"<p><code>{escape(doc['directory'])}</code>: {count} night(s), {span}; {len(figs)} figure(s) "
             f"({escape(asked)}). Figures are ordered worst recent change first: open regressions, then those "
             "measured most recently, then how far the latest night lies beyond its band on the worse side, then "
             "its change against its window. Click a figure for its table.</p>"]
    agg = doc.get("aggregated")
    if agg:
        lines.append(f'<p class="warn">Aggregated: each point is {agg["nights_per_point"]} consecutive nights '
                     f'({escape(agg["why"])}): the median of their medians, the lowest q1 and highest q3, the widest '
                     "band; a point is WORSE when one of its nights was. Use --since or --last for every night."
                     "</p>")
    for note in doc.get("notes") or []:
        lines.append(f'<p class="note">{escape(note)}</p>')
    opened = [(i, f) for i, f in enumerate(figs) if f["open"]]
    if opened:
        items = "".join(f'<li><a href="#f{i}">{escape(f["suite"])} · {escape(f["label"])} · '
                        f'{escape(f["metric"])}</a>: {escape(worse_text(f["worse"][-1]))}</li>' for i, f in opened)
        lines.append(f'<h2>Open regressions ({len(opened)})</h2><ul class="open">{items}</ul>')
    else:
        lines.append("<p>No figure is WORSE on its latest night.</p>")
    return "\n".join(lines)


def history(doc: dict[str, Any]) -> str:
    """The page of ``doc``."""
    data = json.dumps(doc, separators=(",", ":"), ensure_ascii=False).replace("</", "<\\/")
    return (f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>gpubench history: '
            f'{escape(doc["directory"])}</title><style>{_asset("page.css")}</style></head><body>\n'
            f"<h1>gpubench history</h1>\n{_head(doc)}\n{_legend()}\n"
            '<div class="tools"><input id="filter" type="search" placeholder="filter: a regular expression over '
            'suite, case and metric"> <span id="count"></span> <a id="download" download="history.json" href="#">'
            "download the data (JSON)</a></div>\n"
            f"{_sections(doc)}\n"
            f'<script type="application/json" id="history-data">{data}</script>\n'
            f"<script>{_asset('page.js')}</script>\n</body></html>\n")


__all__ = ["history", "PAGE", "day", "worse_text"]
