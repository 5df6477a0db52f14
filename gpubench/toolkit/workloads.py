"""For a suite's ``cases``, ``prepare`` and ``summarize``: size a grid against the device's memory and cache, fill
inputs, place host buffers (NUMA, links), the spec peaks a figure is held against, and samples of a figure
derived from others (so that it carries their noise)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from gpubench.toolkit import loaded_on_use

if TYPE_CHECKING:
    from gpubench.machine import spec_peaks, topology
    from gpubench.machine.memory_budget import HEADROOM, too_big
    from gpubench.machine.spec_peaks import peak_tflops
    from gpubench.timing import fills
    from gpubench.timing.engine import FULL, sets_spanning
    from gpubench.timing.stats import paired_draws, propagate

# Each loads when a suite names it (the engine's modules, the topology's, numpy for the stats): no suite loads
# what another one needs.
_LAZY = {
    "FULL": "gpubench.timing.engine:FULL", "sets_spanning": "gpubench.timing.engine:sets_spanning",
    "fills": "gpubench.timing.fills",
    "HEADROOM": "gpubench.machine.memory_budget:HEADROOM", "too_big": "gpubench.machine.memory_budget:too_big",
    "spec_peaks": "gpubench.machine.spec_peaks", "peak_tflops": "gpubench.machine.spec_peaks:peak_tflops",
    "topology": "gpubench.machine.topology",
    "paired_draws": "gpubench.timing.stats:paired_draws", "propagate": "gpubench.timing.stats:propagate",
}
__getattr__ = loaded_on_use(__name__, _LAZY)

__all__ = sorted(_LAZY)
