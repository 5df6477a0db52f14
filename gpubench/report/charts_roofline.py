"""The report's own chart: the roofline of each system (drawn by gpubench/report/roofline.py, which ``gpubench
roofline`` uses too), from the rows of any suite held against its roofs."""

from __future__ import annotations

from pathlib import Path

from gpubench.report import roofline
from gpubench.report.plotting import Chart, note
from gpubench.report.runs import Run

# Where the roofline sits among the suites' charts (Suite.chart_order): after the memory bandwidth it is roofed by.
ORDER = 20

def roofline_charts(runs: list[Run], out: Path) -> list[Chart]:
    """One roofline per cluster: the runs of one system pooled, so a gemm run and an elementwise run of the
    same machine share a chart (its memory roof from the one, its compute points from the other). A run is on it
    where any of its rows is held against a roof the chart draws."""
    import pandas as pd

    charts = []
    on = [r for r in runs if roofline.on_roofline(r.df)]
    clusters = list(dict.fromkeys(r.cluster for r in on))
    for k, cluster in enumerate(clusters):
        mine = [r for r in on if r.cluster == cluster]
        title = f"roofline: {cluster}" + (f" ({len(mine)} runs pooled)" if len(mine) > 1 else "")
        device, roofs = roofline.analyze(pd.concat([r.df for r in mine], ignore_index=True))
        if not any(ro.points for ro in roofs):
            charts.append(note("roofline", title, "no ok throughput rows with flops (elementwise fma/triad, gemm)"))
            continue
        name = f"roofline-{k + 1}.png"
        out.mkdir(parents=True, exist_ok=True)
        bad = roofline.violations(roofs)
        roofline.plot(device, roofs, out / name, bad)
        msg = [f"{len(bad)} point(s) above the spec roof: a measurement error"] if bad else []
        charts.append(Chart("roofline", title, name, "; ".join(msg + [s for ro in roofs for s in ro.notes()])))
    return charts


__all__ = ["roofline_charts", "ORDER"]
