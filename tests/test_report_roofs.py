"""The report's measured roofs against the points of their own chart (issue 73, item 6): a run on a loaded CPU
whose one steady op (dot) reads far under its noisy ones drew "measured roof 1.065 GB/s (best op)" under every
other bar. A roof is never drawn under a point of its chart; where the steady ops read under a noisy one, the page
says so in words, as a real browser lays it out."""

from __future__ import annotations

import html
import json
import math
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pandas as pd
from test_report import _BROWSER_FLAGS, TINY, _chromium, _saved, quiet

from gpubench.timing import engine
from gpubench import results

# What a browser shows under each chart: the text of the note after its image, where it is laid out at all.
_SAID = """<script>
var said = {};
document.querySelectorAll("img[data-file]").forEach(function (img) {
  var p = img.parentElement.nextElementSibling;
  var shown = p && p.classList.contains("warn") && p.offsetHeight > 0;
  said[img.getAttribute("data-file")] = shown ? p.innerText : "";
});
document.body.setAttribute("data-said", JSON.stringify(said));
</script>"""


def _cpu_run(out: Path, monkeypatch) -> Path:
    """A real CPU run of the ops the finding named: copy and fill (no flops: bars only), triad and dot (points)."""
    monkeypatch.setattr(engine, "QUICK", TINY)
    code, log = quiet("run", "--suite", "elementwise", "--backend", "cpu", "--quick", "--dtype", "fp32", "--sizes",
                      "4M", "--filter", "op=(copy|triad|dot|fill)", "--out", out, "--cluster", "c-busy")
    assert code == 0, log[-2000:]
    (run,) = (out / "c-busy").iterdir()
    return run


def _reading(run: Path, dest: Path, ops: dict[str, tuple[float, float]], cluster: str | None = None) -> Path:
    """A copy of ``run`` whose ops read ``ops[op] = (GB/s, cv)``: the op's bandwidth and throughput rows, samples
    and statistics alike, scaled to that bandwidth; ``cluster``: the copy's cluster."""
    shutil.copytree(run, dest)
    for table in dest.glob("*.parquet"):
        df = results.load_table(table)
        factor = pd.Series(1.0, index=df.index)
        for op, (gbps, cv) in ops.items():
            mine = (df["op"] == op) & df["metric"].isin(["bandwidth", "throughput"])
            factor[mine] = gbps / float(df.loc[mine & (df["metric"] == "bandwidth"), "value"].iloc[0])
            df.loc[mine, "cv"] = cv
        df["samples"] = [[x * k for x in s] for s, k in zip(df["samples"], factor)]
        for col in ("value", "mean", "min", "max", "stdev", "iqr"):
            df[col] = df[col] * factor
        results.save(df, table)
    if cluster:
        meta = json.loads((dest / "run.json").read_text())
        (dest / "run.json").write_text(json.dumps({**meta, "cluster": cluster}))
    return dest


def _said(page: Path, tmp_path: Path) -> dict[str, str]:
    probe = page.with_name("probe.html")
    probe.write_text(page.read_text(encoding="utf-8").replace("</body>", _SAID + "</body>"), encoding="utf-8")
    argv = [_chromium(), *_BROWSER_FLAGS, f"--user-data-dir={tmp_path / 'browser'}", "--dump-dom", probe.as_uri()]
    dom = subprocess.run(argv, capture_output=True, text=True, timeout=120).stdout
    found = re.search(r'data-said="([^"]*)"', dom)
    assert found, dom[-2000:]
    return json.loads(html.unescape(found.group(1)))


def _rgb(c) -> tuple[float, ...]:
    from matplotlib.colors import to_rgb

    return tuple(round(x, 3) for x in to_rgb(c))


def _roofs(ax) -> list:
    return [ln for ln in ax.get_lines() if ln.get_label().startswith("measured")]


def _above_a_roof(ax) -> list[tuple[float, float, str]]:
    """The points of a roofline panel above a measured roof drawn at their intensity (log-log: the line between its
    drawn vertices is straight in logs)."""
    out = []
    for line in _roofs(ax):
        xs, ys = np.log(line.get_xdata()), np.log(line.get_ydata())
        for coll in ax.collections:
            for x, y in coll.get_offsets():
                if xs[0] <= math.log(x) <= xs[-1] and y > math.exp(np.interp(math.log(x), xs, ys)) * (1 + 1e-9):
                    out.append((x, y, line.get_label()))
    return out


def test_a_roof_is_never_drawn_under_a_point_of_its_chart_and_the_page_says_why(tmp_path, monkeypatch):
    base = _cpu_run(tmp_path / "runs", monkeypatch)
    # The finding: dot steady at 1.065 GB/s, copy, triad and fill noisy at 8-11; beside it a steady run of another
    # cluster, whose roof is its own best op.
    busy = _reading(base, tmp_path / "busy", {"dot": (1.065, 0.01), "copy": (11.0, 0.3), "triad": (8.2, 0.2),
                                              "fill": (9.0, 0.25)})
    calm = _reading(base, tmp_path / "calm", {"dot": (30.0, 0.01), "copy": (33.0, 0.01), "triad": (36.0, 0.01),
                                              "fill": (20.0, 0.01)}, cluster="c-calm")
    saved = _saved(monkeypatch)
    code, log = quiet("report", busy, calm, "--out", tmp_path / "page")
    assert code == 0, log
    charts = dict(saved)

    # elementwise: each run's roof in its colour, over every bar of that run; the busy run draws none
    (ax,) = [a for a in charts["elementwise.png"].axes if a.get_title()]
    bars: dict[tuple, float] = {}
    for bar in ax.patches:
        bars[_rgb(bar.get_facecolor())] = max(bars.get(_rgb(bar.get_facecolor()), 0.0), bar.get_height())
    roofs = {_rgb(ln.get_color()): max(ln.get_ydata()) for ln in _roofs(ax)}
    assert all(y >= bars[c] for c, y in roofs.items()), (bars, roofs)
    assert len(bars) == 2 and len(roofs) == 1, (bars, roofs)
    assert [t.get_text() for t in ax.get_legend().get_texts() if t.get_text().startswith("no measured roof")]

    # the roofline of each cluster: no point above a measured roof drawn at its intensity
    lines = {}
    for name in ("roofline-1.png", "roofline-2.png"):
        panels = [a for a in charts[name].axes if a.get_title()]
        assert panels and not [p for a in panels for p in _above_a_roof(a)], name
        lines[name] = [ln for a in panels for ln in _roofs(a)]
    assert not lines["roofline-1.png"] and lines["roofline-2.png"]  # the busy cluster's first

    # the page, as a browser lays it out: why the busy run has no roof, under each chart; nothing for the calm one
    said = _said(tmp_path / "page" / "index.html", tmp_path)
    why = "the steady figures read at most 1.065 GB/s (elementwise dot), under 11 GB/s of elementwise copy"
    assert "no measured roof" in said["elementwise.png"] and why in said["elementwise.png"], said
    assert said["roofline-1.png"].startswith("fp32: no measured memory roof: " + why), said
    assert said["roofline-2.png"] == "", said
