"""GEMM: TF/s against problem size, one panel per dtype, one line per implementation and run, with the spec
peak and a % of peak axis where the device's peak is known (gpubench/machine/spec_peaks.py, the ``peak_tflops`` column)."""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd

from gpubench.toolkit.charts import MARKERS, STYLES, Chart, Run, color, grid, join, legend, names, note, save, spread


def _count(x: float) -> str:
    return f"{x / 1024:.3g}K" if x >= 1024 else f"{x:.0f}"


def _best_per_size(rows: pd.DataFrame) -> pd.DataFrame:
    """One point per size: the best shape/layout there (a --search run measures many shapes per size)."""
    rows = rows.copy()
    mnk = rows["M"].astype(float) * rows["N"].astype(float) * rows["K"].astype(float)
    rows["size"] = (mnk ** (1 / 3)).round()
    best = rows.sort_values("value", ascending=False).drop_duplicates("size")
    return best.sort_values("size")


def gemm(runs: list[Run], out: Path) -> list[Chart]:
    from matplotlib.ticker import FixedLocator, FuncFormatter, NullLocator

    title = "gemm: TFLOP/s vs size"
    have = [(i, r, r.ok("gemm", "throughput")) for i, r in enumerate(runs)]
    have = [(i, r, rows) for i, r, rows in have if len(rows)]
    if not have:
        return [note("gemm", title, "no ok gemm throughput rows")] if any(r.has("gemm") for r in runs) else []
    dtypes = sorted({str(d) for *_, rows in have for d in rows["dtype"]})
    name = names([r for _, r, _ in have])
    fig, axes = grid(len(dtypes), cols=min(3, len(dtypes)), w=6.0, h=4.2)
    for ax, dtype in zip(axes, dtypes):
        sizes, peaks_seen = set(), set()
        for i, r, rows in have:
            rows = rows[rows["dtype"].astype(str) == dtype]
            for k, impl in enumerate(sorted(rows["impl"].astype(str).unique())):
                best = _best_per_size(rows[rows["impl"].astype(str) == impl])
                sizes.update(best["size"])
                ax.errorbar(best["size"], best["value"], yerr=spread(best), capsize=2, color=color(i),
                            ls=STYLES[k % len(STYLES)], marker=MARKERS[k % len(MARKERS)], ms=4,
                            label=join(name[id(r)], impl))
                if "peak_tflops" in rows.columns:
                    peaks_seen.update(float(p) for p in rows["peak_tflops"].dropna() if p and math.isfinite(p))
        ax.set_xscale("log", base=2)
        ax.xaxis.set_major_locator(FixedLocator(sorted(sizes)))
        ax.xaxis.set_minor_locator(NullLocator())
        ax.xaxis.set_major_formatter(FuncFormatter(lambda x, _: _count(x)))
        ax.set_xlabel("size: cube root of M·N·K (best shape and layout per size)")
        ax.set_ylabel("TFLOP/s")
        for p in sorted(peaks_seen):
            ax.axhline(p, color="black", ls="--", lw=1, label=f"spec peak {p:.0f} TF/s")
        ax.set_ylim(0, max([ax.get_ylim()[1], *(p * 1.05 for p in peaks_seen)]))
        if len(peaks_seen) == 1:  # a % axis only means something against one peak
            peak = peaks_seen.pop()
            sec = ax.secondary_yaxis("right", functions=(lambda y, p=peak: 100 * y / p, lambda q, p=peak: q * p / 100))
            sec.set_ylabel("% of spec peak")
        ax.set_title(dtype)
        ax.grid(True, which="both", alpha=0.3)
        legend(ax, loc="lower right")
    fig.suptitle(title + " per dtype and implementation (error bars: interquartile range)")
    return [Chart("gemm", title, save(fig, out, "gemm.png"))]


__all__ = ["gemm"]
