"""``gpubench report RUN_DIR... [--out DIR]``: one HTML page with a chart per suite, and the PNGs beside it.

:func:`write` loads the runs, draws what each suite has (each suite's ``charts`` hook, found through the
registry, each suite's drawing code its own; the roofline, drawn from whichever rows are held against its roofs,
is the report's), compares the first run
with each later one (gpubench.compare) and writes ``DIR/index.html`` (images embedded, so the page can be
mailed or attached to a CI job on its own) and ``DIR/*.png``. docs/report.md describes each chart. Its
plotting, run loading and roofline are the suites' too (their charts).

It may import compare (the page's comparisons), the results, the registry, the machine and the console.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from gpubench.compare.comparison import against_earlier
from gpubench.registry import all_suites
from gpubench.report import charts_roofline, page
from gpubench.report.plotting import Chart
from gpubench.report.runs import load_runs


def write(paths: Sequence[str | os.PathLike], out: str | os.PathLike) -> tuple[Path, list[Chart]]:
    """Load ``paths`` (run directories), write the PNGs and the page into ``out``; (page, charts)."""
    runs = load_runs(paths)
    out = Path(out)
    charts: list[Chart] = []
    suites = all_suites()
    for suite in suites.values():
        charts.extend(suite.charts(runs, out))
    # The roofline is drawn from any suite's rows held against its roofs: the report's own chart.
    charts.extend(charts_roofline.roofline_charts(runs, out))
    order = {"roofline": charts_roofline.ORDER, **{name: cls.chart_order for name, cls in suites.items()}}
    tables = against_earlier(runs)
    return page.write(runs, charts, tables, out, order), charts


__all__ = ["write", "Chart"]
