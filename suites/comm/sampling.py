"""How comm samples a case, nccl-tests' way: calls per captured graph, the length of a sample, and a short
warm-up and few samples for every case after the run's first."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from gpubench.toolkit import Graph

# Samples last at least this long: what is left of the ranks' start skew is then a small part of each.
MIN_SAMPLE_S = 0.02
# Calls per captured graph, as nccl-tests -G captures its -n 20: a call's time grows with the graph's length
# (docs/measurements.md, comm, "graph length"). The rows say how many (graph_calls).
_GRAPH_CALLS = 20
# From a call this long, launch cost no longer matters and 20 calls would stretch a sample: enough to last
# _GRAPH_SPAN_S. Far above the small sizes, whose host-timed estimate is tens of µs off (same place).
_LONG_CALL_S = 1e-3
_GRAPH_SPAN_S = 4e-3
# Samples of a graph's replays: the ranks' streams are lined up before each batch, so a few ms suffice.
GRAPH_SAMPLE_S = 5e-3
# After the run's first case (EngineConfig fields): a batch or two of warm-up and a few samples, as nccl-tests' -w
# and -n, extended only while their spread stays high: a sweep costs what nccl-tests' does (docs/comm.md).
SAMPLING = {"min_samples": 5, "budget_s": 0.2, "min_warmup_s": 0.0, "max_warmup_s": 0.05, "settle_window": 2,
            "settle_tol": 0.05}
QUICK_SAMPLING = dict(SAMPLING, budget_s=0.1, max_warmup_s=0.02)
_WARMUP = ("min_warmup_s", "max_warmup_s", "settle_window", "settle_tol")


def graph(refill: Callable[[Any], Any], reread: bool) -> Graph:
    """A case's captured graph: _GRAPH_CALLS calls, fewer where a call lasts _LONG_CALL_S or more."""
    return Graph(calls=_GRAPH_CALLS, long_call_s=_LONG_CALL_S, span_s=_GRAPH_SPAN_S, sample_s=GRAPH_SAMPLE_S,
                 refill=refill, reread=reread)


def case_sampling(state: Any, quick: bool) -> dict[str, Any]:
    """A case's changes to the engine's sampling: nccl-tests' short warm-up and few samples, but for the run's
    first case, which warms the device up as the engine does (clocks ramp). ``state.warm``: the run's first case
    has run."""
    sampling = dict(QUICK_SAMPLING if quick else SAMPLING)
    if not state.warm:
        sampling = {k: v for k, v in sampling.items() if k not in _WARMUP}
    state.warm = True
    return sampling
