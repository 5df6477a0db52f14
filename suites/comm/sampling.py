"""How comm samples a case, nccl-tests' way: calls per captured graph, the length of a sample, and a short
warm-up and few samples for every case after the run's first."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from gpubench.suite import Graph

# Samples last at least this long: what is left of the ranks' start skew is then a small part of each.
MIN_SAMPLE_S = 0.02
# Calls per captured graph: nccl-tests -G captures its -n iterations (default 20) in one graph. The length
# matters: on 2×H200 a 1 MiB all_reduce took 14.0 µs per call in graphs of 4, 17.8 in graphs of 20 and 27.0 in
# graphs of 64 (2026-11-21, docs/measurements.md; 11.8-12.0 at any length with NCCL_GRAPH_MIXING_SUPPORT=0). A call
# of a millisecond or more, where launch cost no longer matters, gets a shorter graph (a graph of 20 calls of
# 10 ms, 4 GiB on 2×H200, would make each sample last 0.2 s): enough calls to last _GRAPH_SPAN_S. The line is
# far from the small sizes on purpose: the eager call that estimates a call's time is host-timed (tens of µs
# of sync around it), and a 1 KiB case got 16-20 calls from a finer rule (one H100, 2026-11-25). The rows say
# how many (graph_calls).
_GRAPH_CALLS = 20
_LONG_CALL_S = 1e-3
_GRAPH_SPAN_S = 4e-3
# Samples of a graph's replays: the ranks' streams are lined up before each batch, so a few ms suffice.
GRAPH_SAMPLE_S = 5e-3
# How a case after the run's first is sampled (EngineConfig fields): a batch or two of warm-up, as nccl-tests'
# -w (the device is warm from the cases before), and a few samples, as its -n, extended up to the budget only
# while their spread stays above the target. The run's first case warms up as the engine does (clocks ramp),
# then samples the same way. On one H100 (2026-11-25) 12 all_gather cases took 1.5 s this way, graphs by
# default, where the engine's own sampling took 28.1 s eager and 10.4 s with --graph (docs/comm.md).
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
