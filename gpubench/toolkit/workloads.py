"""For a suite's ``cases``, ``prepare`` and ``summarize``: size a grid against the device's memory and cache, fill
inputs, place host buffers (NUMA, links), the spec peaks a figure is held against, and samples of a figure
derived from others (so that it carries their noise)."""

from gpubench.machine import spec_peaks, topology
from gpubench.machine.memory_budget import HEADROOM, too_big
from gpubench.machine.spec_peaks import peak_tflops
from gpubench.timing import fills
from gpubench.timing.engine import FULL, sets_spanning
from gpubench.timing.stats import paired_draws, propagate

__all__ = ["FULL", "HEADROOM", "fills", "paired_draws", "peak_tflops", "propagate", "sets_spanning",
           "spec_peaks", "too_big", "topology"]
