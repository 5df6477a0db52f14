"""For a suite's ``charts``: the report's figures and runs (matplotlib is loaded by ``pyplot()``, on first use) and
the measured memory roofs a chart draws."""

from gpubench.report.plotting import (MARKERS, STYLES, Chart, bytes_axis, color, fmt_bytes, grid, legend, note, pyplot,
                                      save, spread)
from gpubench.report.roofline import memory_levels
from gpubench.report.runs import Run, join, names

__all__ = ["MARKERS", "STYLES", "Chart", "Run", "bytes_axis", "color", "fmt_bytes", "grid", "join", "legend",
           "memory_levels", "names", "note", "pyplot", "save", "spread"]
