"""What every chart shares: the Agg backend, a colour per run, error bars from the stored spread, byte axes,
and the rule that a chart with nothing to show becomes a note instead."""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from gpubench.report.chartfit import thin_ticks
from gpubench.errors import UsageError

# A run keeps its colour across every chart of the page, so a reader can follow one run down the page.
RUN_COLORS = ("tab:blue", "tab:orange", "tab:green", "tab:red", "tab:purple", "tab:brown", "tab:pink", "tab:gray",
              "tab:olive", "tab:cyan")
STYLES = ("-", "--", ":", "-.")
MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*")
DPI = 110


@dataclass
class Chart:
    suite: str
    title: str
    file: str | None = None  # PNG name inside the output folder; None: nothing to draw, see note
    note: str = ""  # shown under the chart, or instead of it
    caption: str = ""


def pyplot():
    try:
        import matplotlib
    except ImportError as e:
        raise UsageError(f"gpubench report needs matplotlib ({e}): pip install matplotlib") from e
    matplotlib.use("Agg")  # files only: report runs on cluster nodes and CI runners without a display
    import matplotlib.pyplot as plt

    return plt


def color(i: int) -> str:
    return RUN_COLORS[i % len(RUN_COLORS)]


def note(suite: str, title: str, why: str) -> Chart:
    return Chart(suite, title, None, why)


def save(fig, out: Path, name: str) -> str:
    out.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    thin_ticks(fig)  # no tick labels overlap, whatever the panel holds
    fig.savefig(out / name, dpi=DPI)
    pyplot().close(fig)
    return name


def spread(rows: pd.DataFrame) -> np.ndarray:
    """Error bar lengths (2×N, below and above the median) from the interquartile range of the samples.

    Quartiles rather than min/max: one preempted sample would otherwise draw a bar across the whole chart.
    A figure with one sample (an imported nccl-tests line) gets no bar rather than a made-up one.
    """
    lo, hi = [], []
    # The two columns alone: a result table is ~80 columns wide, and itertuples builds every one of them per call.
    samples = rows["samples"] if "samples" in rows else [None] * len(rows)
    for value, raw in zip(rows["value"], samples):
        v = float(value)
        s = [x for x in (raw if raw is not None else []) if x is not None and math.isfinite(x)]
        if len(s) >= 2:
            q1, q3 = np.percentile(s, [25, 75])
        else:
            q1 = q3 = v
        lo.append(max(0.0, v - min(q1, v)))
        hi.append(max(0.0, max(q3, v) - v))
    return np.array([lo, hi]) if lo else np.zeros((2, 0))


def fmt_bytes(x: float) -> str:
    for unit, size in (("G", 1 << 30), ("M", 1 << 20), ("K", 1 << 10)):
        if x >= size:
            v = x / size
            return f"{v:.0f}{unit}" if v == int(v) else f"{v:.3g}{unit}"
    return f"{x:.0f}B"


def bytes_axis(ax, values) -> None:
    """Log2 x axis ticked at the sizes measured, labelled 4K, 1M, 1G."""
    from matplotlib.ticker import FixedLocator, FuncFormatter, NullLocator

    ax.set_xscale("log", base=2)
    ticks = sorted({float(v) for v in values if v and math.isfinite(float(v))})
    if len(ticks) > 12:  # keep labels readable: every other size
        ticks = ticks[::math.ceil(len(ticks) / 12)]
    ax.xaxis.set_major_locator(FixedLocator(ticks))
    ax.xaxis.set_minor_locator(NullLocator())
    ax.xaxis.set_major_formatter(FuncFormatter(lambda x, _: fmt_bytes(x)))


def grid(n: int, cols: int = 3, w: float = 5.2, h: float = 3.9):
    plt = pyplot()
    cols = max(1, min(cols, n))
    rows = math.ceil(n / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(w * cols, h * rows), squeeze=False)
    for ax in list(axes.flat)[n:]:
        ax.axis("off")
    return fig, list(axes.flat)[:n]


def legend(ax, **kw) -> None:
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=7, **kw)


__all__ = ["Chart", "pyplot", "color", "note", "save", "spread", "fmt_bytes", "bytes_axis", "grid", "legend",
           "STYLES", "MARKERS"]
