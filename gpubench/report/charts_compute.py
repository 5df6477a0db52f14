"""Charts of the elementwise suite: bandwidth per op against the memory roofs, and the roofline of each run
(drawn by gpubench/roofline.py, which ``gpubench roofline`` uses too)."""

from __future__ import annotations

from pathlib import Path

from gpubench import peaks, roofline
from gpubench.console import fmt_value
from gpubench.report.plotting import Chart, color, fmt_bytes, grid, legend, note, save, spread
from gpubench.report.runs import Run, join, names

_IMPL_HATCH = ("", "//", "..", "xx", "\\\\")


def _device(run: Run, suite: str) -> str | None:
    d = run.ok(suite)["device"].dropna() if "device" in run.df.columns else []
    return str(d.iloc[0]) if len(d) else run.identity.get("gpu_model")


def elementwise(runs: list[Run], out: Path) -> list[Chart]:
    title = "elementwise: memory bandwidth by op and dtype"
    have = [(i, r, r.ok("elementwise", "bandwidth")) for i, r in enumerate(runs)]
    have = [(i, r, rows[rows["array_bytes"] == rows["array_bytes"].max()]) for i, r, rows in have if len(rows)]
    if not have:
        return [note("elementwise", title, "no ok elementwise bandwidth rows")] if any(r.has("elementwise") for r in runs) else []
    dtypes = sorted({d for _, _, rows in have for d in rows["dtype"].astype(str)})
    name = names([r for _, r, _ in have])
    fig, axes = grid(len(dtypes), cols=min(3, len(dtypes)), w=6.2, h=4.2)
    for ax, dtype in zip(axes, dtypes):
        series = [(i, r, impl, rows[(rows["dtype"].astype(str) == dtype) & (rows["impl"] == impl)])
                  for i, r, rows in have for impl in sorted(rows["impl"].astype(str).unique())]
        series = [s for s in series if len(s[3])]
        ops = list(dict.fromkeys(op for *_, rows in series for op in rows["op"].astype(str)))
        width = 0.8 / max(1, len(series))
        impls = sorted({s[2] for s in series})
        for k, (i, r, impl, rows) in enumerate(series):
            rows = rows.set_index(rows["op"].astype(str))
            rows = rows[~rows.index.duplicated()]
            xs = [j + (k - (len(series) - 1) / 2) * width for j, op in enumerate(ops) if op in rows.index]
            sel = rows.loc[[op for op in ops if op in rows.index]]
            ax.bar(xs, sel["value"], width, yerr=spread(sel), capsize=2, color=color(i), alpha=0.85,
                   hatch=_IMPL_HATCH[impls.index(impl) % len(_IMPL_HATCH)], edgecolor="white",
                   label=join(name[id(r)], impl))
        for i, r, rows in have:
            # the best bandwidth the run sustained, whichever op gave it (the roofline's memory roof too)
            best = r.ok("elementwise", "bandwidth")["value"].max()
            ax.axhline(best, color=color(i), lw=1.2, label=f"measured roof {fmt_value(best)} GB/s (best op)"
                       + (f" ({name[id(r)]})" if name[id(r)] else ""))
        for dev in sorted({d for _, r, _ in have if (d := _device(r, "elementwise"))}):
            spec = peaks.lookup(dev)
            if spec and spec.memory_gbps:
                ax.axhline(spec.memory_gbps, color="black", ls="--", lw=1.2,
                           label=f"spec {spec.memory_gbps:.0f} GB/s ({spec.gpu})")
        ax.set_xticks(range(len(ops)), ops, rotation=30, ha="right", fontsize=8)
        ax.set_ylabel("bandwidth (GB/s)")
        ax.set_ylim(0, ax.get_ylim()[1] * 1.3)  # room for the legend above the bars
        size = sorted({int(v) for *_, rows in series for v in rows["array_bytes"]})
        ax.set_title(f"{dtype}, arrays of {', '.join(_size(s) for s in size)}")
        ax.grid(True, axis="y", alpha=0.3)
        legend(ax, loc="upper center", ncols=2)
    fig.suptitle(title + " (bars: median, error bars: interquartile range)")
    return [Chart("elementwise", title, save(fig, out, "elementwise.png"))]


def _size(b: int) -> str:
    return fmt_bytes(b) + ("" if b < 1024 else "iB")


def roofline_charts(runs: list[Run], out: Path) -> list[Chart]:
    """One roofline per cluster: the runs of one system pooled, so a gemm run and an elementwise run of the
    same machine share a chart (its memory roof from the one, its compute points from the other)."""
    import pandas as pd

    charts = []
    clusters = list(dict.fromkeys(r.cluster for r in runs if r.has("elementwise") or r.has("gemm")))
    for k, cluster in enumerate(clusters):
        mine = [r for r in runs if r.cluster == cluster and (r.has("elementwise") or r.has("gemm"))]
        title = f"roofline: {cluster}" + (f" ({len(mine)} runs pooled)" if len(mine) > 1 else "")
        device, roofs = roofline.analyze(pd.concat([r.df for r in mine], ignore_index=True))
        if not any(ro.points for ro in roofs):
            charts.append(note("roofline", title, "no ok throughput rows with flops (elementwise fma/triad, gemm)"))
            continue
        name = f"roofline-{k + 1}.png"
        out.mkdir(parents=True, exist_ok=True)
        bad = roofline.violations(roofs)
        roofline.plot(device, roofs, out / name, bad)
        msg = f"{len(bad)} point(s) above the spec roof: a measurement error" if bad else ""
        charts.append(Chart("roofline", title, name, msg))
    return charts


__all__ = ["elementwise", "roofline_charts"]
