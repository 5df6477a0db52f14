"""How the engine times one batch of calls: the strategies a workload's :class:`~gpubench.suite.Method` picks.

A batch is timed by one of two shapes, chosen once per measurement:

* :class:`Region`: ``inner`` back-to-back calls between two timer reads, one per-call time per batch. Where the
  device starts on a batch while the host is still issuing it (device-timed, not held), the host's clock also
  times issuing the first :data:`HOST_PROBE_CALLS` calls (the host-issue probe);
* :class:`Flushed`: ``inner`` single-call samples, each after its own cache flush and between its own timer
  reads, all queued before any is read, so that the GPU runs them back to back under load as a training step
  would, not one per host round trip.

and, around either, by a clock (device events, or the host's clock around the enqueue alone with the queue
drained before and after) and, where asked, a hold: the stream is stalled until the whole batch is queued, so
that a start event queued behind an idle GPU does not fire at once and time the host's issue as the call's.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from gpubench.backends.base import Backend, Hold, Timer
from gpubench.suite import Method, Skip, Workload

# Host-bound samples: each times the host issuing its first HOST_PROBE_CALLS calls, few enough that the launch queue
# (~a thousand entries) cannot fill and block the host. An eager collective through torch.distributed costs the host
# tens of µs (docs/measurements.md, 'comm'), so a small one is timed at that rate.
HOST_PROBE_CALLS = 16

MAX_HOLD_TRIES = 8
# Flushed samples: the host takes tens of µs to queue a flush, two events and a call (docs/measurements.md, 'launch'),
# so a hold allows 0.1 ms a sample (doubled when it ran out); a batch keeps the GPU loaded 0.1 s, at most 64 samples
# (each ~4 launches: CUDA blocks at ~1000 pending, which a hold would turn into a stall).
FLUSH_HOLD_S = 1e-4
FLUSH_BATCH_S = 0.1
FLUSH_MAX_BATCH = 64
MAX_HOLD_S = 2.0


class Limits(Protocol):
    """What a batch strategy reads of the engine's configuration (:class:`gpubench.timing.engine.EngineConfig`,
    which imports this module)."""

    @property
    def min_sample_s(self) -> float: ...
    @property
    def max_inner(self) -> int: ...
    @property
    def max_held_inner(self) -> int: ...
    @property
    def max_samples(self) -> int: ...


def inner_for(per_call_s: float, config: Limits, min_sample_s: float = 0.0) -> int:
    """Calls that make a batch last the config's sample length (or ``min_sample_s``, where longer)."""
    if per_call_s <= 0:
        return config.max_inner
    return max(1, min(config.max_inner, math.ceil(max(config.min_sample_s, min_sample_s) / per_call_s)))


class Region:
    """``inner`` back-to-back calls between one pair of timer reads; with ``probe``, the host's issue is timed."""

    flushed = False

    def __init__(self, probe: bool):
        self.probe = probe

    def issue(self, b: Batches, inner: int) -> list[Timer]:
        timer = b.clock()
        timer.start()
        if self.probe:
            first = min(inner, HOST_PROBE_CALLS)
            h0 = b.backend.host_now()
            b.backend.call_batch(b.workload, b.inputs, b.turn, first)
            b.issued.append((b.backend.host_now() - h0) / (first * b.workload.method.calls))
            if inner > first:
                b.backend.call_batch(b.workload, b.inputs, b.turn + first, inner - first)
        else:
            b.backend.call_batch(b.workload, b.inputs, b.turn, inner)
        timer.stop()
        return [timer]

    def calls(self, inner: int) -> int:
        return inner

    def hold_s(self, config: Limits, inner: int) -> float:
        return max(2 * config.min_sample_s, 0.005)  # a held batch of calls waits ≥ 5 ms

    def next_inner(self, per_call_s: float, config: Limits, method: Method) -> int:
        inner = inner_for(per_call_s * method.calls, config, method.min_sample_s)
        return min(inner, config.max_held_inner) if method.hold else inner


class Flushed:
    """``inner`` samples of one call each, every one after a cache flush and between its own timer reads."""

    flushed = True

    def issue(self, b: Batches, inner: int) -> list[Timer]:
        timers = []
        for _ in range(inner):
            b.backend.flush_cache()
            timer = b.clock()
            timer.start()
            b.backend.call_batch(b.workload, b.inputs, b.turn, 1)
            timer.stop()
            timers.append(timer)
        return timers

    def calls(self, inner: int) -> int:
        return 1

    def hold_s(self, config: Limits, inner: int) -> float:
        return FLUSH_HOLD_S * inner

    def next_inner(self, per_call_s: float, config: Limits, method: Method) -> int:
        # Samples per batch: enough to keep the GPU loaded for FLUSH_BATCH_S between host round trips.
        return max(1, min(FLUSH_MAX_BATCH, config.max_samples, math.ceil(FLUSH_BATCH_S / max(per_call_s, 1e-9))))


@dataclass
class Batches:
    """The batches of one measurement: the shape, clock and hold chosen once from the workload's method, and
    what they have counted (the calls issued so far, held batches thrown away, the host's issue times)."""

    workload: Workload
    backend: Backend
    inputs: list
    config: Limits  # the engine's EngineConfig
    shape: Region | Flushed
    after: Callable[[], None]  # called after every batch: progress for a watchdog, a check for a Ctrl-C
    turn: int = 0
    hold_scale: float = 1.0  # doubled each time a hold ran out before its batch was queued
    unheld: int = 0  # held batches thrown away because the hold ran out before the batch was enqueued
    issued: list[float] = field(default_factory=list)  # the host's seconds per call, a value per batch
    pace_s: float | None = None  # the host's pace (gpubench.machine.host_pace) just before the last host-timed or paced batch

    @property
    def host(self) -> bool:
        return self.workload.method.timing == "host"

    def clock(self) -> Timer:
        return self.backend.host_timer() if self.host else self.backend.timer()

    def run(self, inner: int) -> list[float]:
        """Per-call times of a batch of ``inner`` (one per flushed sample); a held batch whose hold ran out
        before it was queued is thrown away and retried behind a hold twice as long."""
        method = self.workload.method
        for _ in range(MAX_HOLD_TRIES):
            if self.host:
                self.backend.synchronize()  # an empty queue: the enqueue cost alone, no back-pressure
            if self.host or method.paced:
                self.pace_s = self.backend.host_pace()  # the host's speed in the moment this batch is timed
            if method.before_batch is not None:
                method.before_batch()
            wait = min(self.hold_scale * self.shape.hold_s(self.config, inner), MAX_HOLD_S)
            guard = _hold(self.backend, wait) if method.hold else None
            timers = self.shape.issue(self, inner)
            self.turn += inner
            held = guard is None or guard.held()
            elapsed = [t.elapsed_s() for t in timers]
            self.after()
            if self.host:
                self.backend.synchronize()
            if held:
                calls = method.calls * self.shape.calls(inner)
                return [e / calls for e in elapsed]
            # The GPU started before the host had enqueued the batch: launch gaps are in this sample.
            self.unheld += 1
            self.hold_scale *= 2
        raise RuntimeError(f"the stream hold ran out before {inner} calls were enqueued, {MAX_HOLD_TRIES} times")


def shape_for(workload: Workload, backend: Backend) -> Region | Flushed:
    """The batch shape of ``workload``'s method on ``backend``."""
    method = workload.method
    if method.cache == "flush":
        return Flushed()
    # Only where the device starts on a batch before the host has issued it all can the host hold it back.
    return Region(probe=backend.is_gpu and method.timing != "host" and not method.hold)


def _hold(backend: Backend, seconds: float) -> Hold:
    guard = backend.hold(seconds)
    if guard is None:
        raise Skip(f"backend {backend.name!r} cannot hold a stream, which this measurement needs")
    return guard


__all__ = ["Batches", "Region", "Flushed", "shape_for", "inner_for", "HOST_PROBE_CALLS", "FLUSH_HOLD_S",
           "FLUSH_BATCH_S", "FLUSH_MAX_BATCH"]
