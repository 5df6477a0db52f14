"""Graph mode: a workload's timed calls captured in one graph (CUDA/HIP graphs) and replayed, nccl-tests' ``-G``.

A workload asks for it with ``Method.graph`` (a :class:`gpubench.suite.Graph`); where the backend can capture,
the engine, before anything else:

1. makes the first input set and calls once on it (lazy set-up, e.g. NCCL connecting, cannot be captured), then
   times three more calls with the host's clock around each and a drained queue, and restores the set's input;
2. picks the calls per replay from the quickest of them (with a group of ranks, the slowest rank's quickest):
   ``Graph.calls`` for a short call, fewer for a call long enough that launch cost no longer matters (so that a
   sample of replays lasts a few ms whatever the size);
3. captures that many calls on the set. Where the capture fails on any rank, every rank times the workload eager
   (calls must match across ranks) and its row says why (``message``: "graph capture failed, timed eager: ...").

Captured, the workload is timed as replays: one input set (the first is the check's), each set captured as the
first was, ``calls`` operations per replay, on the replays' own stream. Its rows say ``graph`` (True where
replayed, False where timed eager) and ``graph_calls``.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from typing import TYPE_CHECKING, Any

from gpubench.backends.base import Backend, GraphCapture
from gpubench.errors import first_line
from gpubench.ranks import agree
from gpubench.suite import Check, Graph, Workload

if TYPE_CHECKING:
    from gpubench.ranks.rank_group import RankGroup


# A row timed eager because the capture failed says so, then why ("rank 1: RuntimeError: ...").
FALLBACK = "graph capture failed, timed eager: "


class _Captured:
    """One input set and its graph of ``calls`` calls; ``out`` is the output the replays write."""

    def __init__(self, graphs: GraphCapture, workload: Workload, inputs: object, calls: int):
        self.inputs, self.out = inputs, None

        def calls_on_set() -> None:
            for _ in range(calls):
                self.out = workload.run(inputs)

        self.replay = graphs.capture(calls_on_set)


def prepare(workload: Workload, backend: Backend,
            group: RankGroup | None) -> tuple[Workload, AbstractContextManager, dict[str, Any]]:
    """The workload to time, the context to time it in (its replays on their own stream, or, with no capture here or
    one that failed on some rank, the workload itself, eager), and the columns its rows say that with."""
    graphs = backend.graphs()
    spec = workload.method.graph
    eager = dataclasses.replace(workload, method=dataclasses.replace(workload.method, graph=None))
    if graphs is None:
        return eager, nullcontext(), {"graph": False}
    first, per_call = _first_set(workload, backend, group, spec)
    calls = calls_for(spec, per_call)
    captured, error = None, None
    try:
        captured = _Captured(graphs, workload, first, calls)
    except Exception as e:  # noqa: BLE001 — a workload that cannot be captured is timed eager
        error = e
    failed, _ = agree.outcomes(group, error) if group is not None else (_alone(error), 0.0)
    if failed:
        return eager, nullcontext(), {"graph": False,
                                      "message": f"{FALLBACK}rank {failed[0].rank}: {failed[0].line}"[:200]}
    return _replays(workload, backend, graphs, spec, captured, calls), graphs.stream(), {"graph": True,
                                                                                         "graph_calls": calls}


def calls_for(spec: Graph, per_call_s: float) -> int:
    """Calls per replay: ``spec.calls``, or for a call of ``spec.long_call_s`` or more, enough to last
    ``spec.span_s`` (at least one)."""
    if per_call_s < spec.long_call_s:
        return spec.calls
    return max(1, min(spec.calls, math.ceil(spec.span_s / per_call_s)))


# Calls timed on the host to choose the calls per replay, the quickest counting: one call can hold a late rank or a
# hiccup, and a graph of one call, each replay paying a graph launch, read low
# (results/reference/h100x4/comm-bus-calls-20261127/).
TIMED_CALLS = 3


def _first_set(workload: Workload, backend: Backend, group: RankGroup | None, spec: Graph) -> tuple[Any, float]:
    """The first input set, called once (set-up) and ``TIMED_CALLS`` more times under the host's clock, its input
    restored; with the slowest rank's quickest call. A failure on any rank raises on every rank."""
    inputs, error, per_call = None, None, 0.0
    try:
        inputs = _connected(workload, backend, spec)
        times = []
        for _ in range(TIMED_CALLS):
            t0 = backend.host_now()
            workload.run(inputs)
            backend.synchronize()
            times.append(backend.host_now() - t0)
        per_call = min(times)
        _refill(spec, inputs)  # the calls changed an in-place input: restore it
    except Exception as e:  # noqa: BLE001 — shared with every rank just below
        if group is None:
            raise
        error = e
    if group is not None:
        per_call = agree.shared(group, error, per_call)
    return inputs, per_call


def _connected(workload: Workload, backend: Backend, spec: Graph) -> Any:
    """A fresh input set, called once: lazy set-up (NCCL connects at its first call on a buffer) must not be
    captured."""
    inputs = workload.make_inputs()
    workload.run(inputs)
    backend.synchronize()
    return inputs


def _refill(spec: Graph, inputs: object) -> Any:
    return spec.refill(inputs) if spec.refill is not None else inputs


def _alone(error: BaseException | None) -> list[agree.Failure]:
    return [] if error is None else [agree.Failure(0, False, first_line(error))]


def _replays(workload: Workload, backend: Backend, graphs: GraphCapture, spec: Graph, first: _Captured,
             calls: int) -> Workload:
    """The workload as replays of captured graphs: one set, ``calls`` operations a run."""
    made = [first]

    def make() -> _Captured:
        if made:
            return made.pop()  # the first set: the check's
        inputs = _connected(workload, backend, spec)
        _refill(spec, inputs)  # the set-up call changed an in-place input: restore it
        return _Captured(graphs, workload, inputs, calls)

    def replay(c: _Captured) -> Any:
        c.replay()
        return c.out

    check: Callable[[Any, Any], Check] | None = None
    if workload.check is not None:
        check = _checker(workload.check, workload.run, backend, spec)
    method = dataclasses.replace(workload.method, graph=None, cache="warm", calls=calls,
                                 min_sample_s=spec.sample_s)
    return dataclasses.replace(workload, run=replay, make_inputs=make, check=check, method=method)


def _checker(check: Callable[[Any, Any], Check], run: Callable[[Any], Any], backend: Backend,
             spec: Graph) -> Callable[[_Captured, Any], Check]:
    """The check of a replay: its output as it is where calling again on it gives the same result (``reread``),
    else one call outside the graph on the refilled set."""

    def check_replay(c: _Captured, out: object) -> Check:
        if spec.reread:
            return check(c.inputs, out)
        inputs = _refill(spec, c.inputs)
        out = run(inputs)
        backend.synchronize()
        return check(inputs, out)

    return check_replay


__all__ = ["prepare", "calls_for", "FALLBACK"]
