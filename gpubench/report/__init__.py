"""``gpubench report RUN_DIR... [--out DIR]``: one HTML page with a chart per suite, and the PNGs beside it.

:func:`write` loads the runs, draws what each suite has (gpubench/report/charts_*.py), compares the first run
with each later one (gpubench.compare) and writes ``DIR/index.html`` (images embedded, so the page can be
mailed or attached to a CI job on its own) and ``DIR/*.png``. docs/report.md describes each chart.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from gpubench.report.plotting import Chart


def write(paths: Sequence[str | os.PathLike], out: str | os.PathLike) -> tuple[Path, list[Chart]]:
    """Load ``paths`` (run directories), write the PNGs and the page into ``out``; (page, charts)."""
    from gpubench.compare.report import against_earlier
    from gpubench.report import charts_autotune, charts_comm, charts_compute, charts_gemm, charts_system, page
    from gpubench.report.runs import load_runs

    runs = load_runs(paths)
    out = Path(out)
    charts: list[Chart] = []
    for draw in (charts_compute.elementwise, charts_compute.roofline_charts, charts_gemm.gemm, charts_system.launch,
                 charts_system.copy, charts_system.peer, charts_comm.comm, charts_autotune.autotune,
                 charts_autotune.kernels):
        charts.extend(draw(runs, out))
    tables = against_earlier(runs)
    return page.write(runs, charts, tables, out), charts


__all__ = ["write", "Chart"]
