"""The measurement engine: the only code in gpubench that reads a clock (with its own modules below).

For one workload it
1. checks correctness on a fresh random input set (untimed); a failing case is never timed;
2. builds enough input sets that cycling through them spans ``rotate_factor`` × the device's last-level cache
   (so repeats don't read operands the previous call left in L2), or flushes the cache before each sample;
3. warms up until the per-call time stops moving (clocks ramped, caches of compiled code filled);
4. takes samples — each a batch of back-to-back calls timed as one region, long enough that the timer's own
   resolution and launch gaps don't dominate (with a flushed cache: one call, timed alone, many such samples
   queued back to back per batch) — until the relative spread (CV) is under target, or the time budget or the
   sample cap is reached;
5. records the device state (clocks, power, temperature, throttle reasons) sampled while it measured;
6. where the device runs the batch while the host is still issuing it (no hold, device-timed), times the host
   issuing the first calls of each sample: a call that takes the device no longer than the host takes to
   issue it is timed at the host's rate, and the row says so (``host_bound``).

Device events time GPU backends and ``perf_counter_ns`` times the CPU, through ``Backend.timer``. A workload
may ask instead for the host's clock around the enqueue alone (``timing="host"``), or for a stream held until
its whole batch is enqueued (``hold=True``); docs/method.md says how each is done.

``measure`` only orchestrates these steps; the pieces are their own modules: the batch strategies a workload's
:class:`~gpubench.suite.Method` picks (:mod:`gpubench.timing.batches`), the stop rule (:mod:`gpubench.timing.stop_rule`) and
the ranks' agreement on a failed step (:mod:`gpubench.ranks.agree`).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from gpubench.timing import fills, graphs
from gpubench.backends.base import Backend
# FLUSH_HOLD_S and FLUSH_MAX_BATCH: the flushed samples' hold and batch, named here too for the engine's callers.
from gpubench.timing.batches import FLUSH_HOLD_S, FLUSH_MAX_BATCH, Batches, inner_for, shape_for
from gpubench.ranks import agree
from gpubench.timing.stop_rule import StopRule
from gpubench.suite import BANDWIDTH, THROUGHPUT, TIME, TIME_SCALE, Check, Metric, Workload
from gpubench.machine.telemetry import Sampler

if TYPE_CHECKING:
    from gpubench.machine.telemetry import Telemetry
    from gpubench.ranks.rank_group import RankGroup


# When issuing one call takes the host HOST_BOUND or more of the call's device time, the device was waiting between
# calls (the issue is timed by the host-issue probe, gpubench/timing/batches.py).
HOST_BOUND = 0.8


class Interrupted(Exception):
    """The measurement was abandoned at a check of ``measure``'s ``interrupted`` (a Ctrl-C): nothing measured."""


@dataclass(frozen=True)
class EngineConfig:
    target_cv: float = 0.01  # stop once the samples' CV is at or under this; rows above it are flagged noisy
    min_samples: int = 10
    max_samples: int = 500
    budget_s: float = 2.0  # wall time for sampling, warm-up not included
    min_warmup_s: float = 0.25  # H100/H200 SM clocks ramp from idle (~345 MHz) within this
    max_warmup_s: float = 3.0
    settle_window: int = 3  # warm-up ends when this many consecutive batches agree...
    settle_tol: float = 0.02  # ...within this relative range
    min_sample_s: float = 2e-3  # a sample batches calls until it lasts this long (event resolution ~µs)
    max_inner: int = 100_000
    # CUDA blocks a launch once about a thousand are pending; behind a held stream, a batch larger than that
    # could never finish enqueueing while the hold lasts.
    max_held_inner: int = 256
    rotate_factor: float = 4.0
    max_sets: int = 64


FULL = EngineConfig()
# --quick: fewer and shorter samples; the stop rule and the flags are the same.
QUICK = EngineConfig(min_samples=5, budget_s=0.25, min_warmup_s=0.05, max_warmup_s=0.5, min_sample_s=1e-3)


@dataclass
class Measurement:
    samples_s: list[float]  # per-call seconds, one value per sample (batch time / inner)
    inner: int = 0  # calls per sample
    sets: int = 0  # rotating input sets
    warmup_s: float = 0.0
    settled: bool = False
    stop: str = ""  # "cv" | "budget" | "max_samples" | "check"
    unheld: int = 0  # held batches thrown away because the hold ran out before the batch was enqueued
    state: dict[str, Any] = field(default_factory=dict)
    check: Check | None = None
    # With a group of ranks: ``samples_s`` holds the slowest rank's per-call time of each sample (a collective
    # is done when its last rank is), and this holds each rank's median per-call time, by rank.
    rank_medians_s: list[float] = field(default_factory=list)
    # The host's time to issue one call (median over the samples; with a group, the slowest rank's); None where
    # not measured (a held stream, flushed samples, host timing, a CPU backend).
    host_issue_s: float | None = None
    # Host-timed and paced samples only (Method.paced): the host's pace (gpubench.machine.host_pace) taken before each sample's
    # batch, one per sample.
    host_pace_s: list[float] = field(default_factory=list)
    # What graph mode says of how it was timed (gpubench.timing.graphs.prepare): replays or eager, and why.
    notes: dict[str, Any] = field(default_factory=dict)

    @property
    def host_bound(self) -> bool | None:
        """Whether the device waited for the host: issuing a call took at least HOST_BOUND × its time."""
        if self.host_issue_s is None or not self.samples_s:
            return None
        return self.host_issue_s >= HOST_BOUND * float(np.median(self.samples_s))

    @property
    def valid(self) -> bool:
        return self.check is None or self.check.ok

    @property
    def columns(self) -> dict[str, Any]:
        """The columns a row carries besides the schema's: graph mode's notes, and with a group each rank's own median
        per-call time (the slowest one decides, the others show stragglers) and which rank was slowest."""
        if not self.rank_medians_s:
            return dict(self.notes)
        return {**self.notes, "rank_time_us": [t * 1e6 for t in self.rank_medians_s],
                "slowest_rank": max(range(len(self.rank_medians_s)), key=self.rank_medians_s.__getitem__)}


def check(workload: Workload, backend: Backend, inputs: object = None,
          between: Callable[[], None] | None = None) -> Check | None:
    """Run once on fresh inputs (``inputs``, or a set made here) and compare with the suite's reference.

    ``between`` is called between the steps (the call, the reference), each of which may take seconds on a
    large case, and may raise to abandon the check."""
    if workload.check is None:
        return None
    if inputs is None:
        inputs = workload.make_inputs()
    if between is not None:
        between()
    out = backend.call(workload, inputs)
    backend.synchronize()
    if between is not None:
        between()
    result = workload.check(inputs, out)
    del inputs, out
    return result


def rotation_sets(workload: Workload, cache_bytes: int, config: EngineConfig) -> int:
    """How many input sets cycling spans ``rotate_factor`` × the cache (1 if one set already does)."""
    if workload.method.cache != "rotate":
        return 1
    footprint = workload.footprint if workload.footprint is not None else workload.bytes
    return sets_spanning(footprint, cache_bytes, config)


def sets_spanning(footprint: int, cache_bytes: int, config: EngineConfig) -> int:
    """Input sets of ``footprint`` bytes that span ``rotate_factor`` × the cache, capped at ``max_sets`` (a
    suite sizing its memory needs asks this too)."""
    if footprint <= 0:
        return 1
    need = math.ceil(config.rotate_factor * cache_bytes / footprint)
    return max(1, min(config.max_sets, need))


def _settled(per_call: Sequence[float], config: EngineConfig) -> bool:
    if len(per_call) < config.settle_window:
        return False
    last = sorted(per_call[-config.settle_window :])
    mid = last[len(last) // 2]
    return mid > 0 and (last[-1] - last[0]) / mid <= config.settle_tol


def measure(
    workload: Workload,
    backend: Backend,
    config: EngineConfig = FULL,
    telemetry: Telemetry | None = None,
    group: RankGroup | None = None,
    tick: Callable[[], None] | None = None,
    interrupted: Callable[[], bool] | None = None,
    notes: dict[str, Any] | None = None,
) -> Measurement:
    """Time ``workload`` on ``backend``; see the module docstring for the method.

    ``notes`` (the caller's) gets how graph mode timed it (replays or eager, and why), also where the measurement
    then fails: its rows say so (:attr:`Measurement.notes` holds them too).

    ``tick`` is called after every batch: a watchdog that ends a stalled process (the ``--devices`` ranks')
    sees the measurement progress.

    ``interrupted`` is asked between the steps of the check (inputs, call, reference), between input sets and
    after every batch; once it says yes, the measurement is abandoned (:class:`Interrupted`). A Ctrl-C then
    acts within one such step (a single long operation, which Python cannot interrupt, runs to its end), not
    after a whole case; the suites' input fills (:mod:`gpubench.timing.fills`) ask it between pieces too.
    Not with a ``group``: one rank leaving a case would leave the others waiting in its collectives.

    ``group`` (a :class:`gpubench.ranks.group.Group`) makes every rank of a collective take the same path:
    after each batch the ranks agree on the slowest per-call time and the longest elapsed time, and every
    decision (batch length, end of warm-up, stop rule, budget) is taken on those agreed values, so all ranks
    call the collective the same number of times.
    """
    config = _config_for(workload, config, group, interrupted)
    stop = _Stop(interrupted)
    stop()
    replays: AbstractContextManager = nullcontext()
    notes = {} if notes is None else notes
    if workload.method.graph is not None:
        workload, replays, how = graphs.prepare(workload, backend, group)
        notes.update(how)
    with replays:
        result = _measured(workload, backend, config, telemetry, group, tick, stop)
    result.notes = dict(notes)
    return result


def _measured(workload: Workload, backend: Backend, config: EngineConfig, telemetry: Telemetry | None,
              group: RankGroup | None, tick: Callable[[], None] | None, stop: _Stop) -> Measurement:
    """``measure``'s steps, the workload already in the form it is timed in (eager, or replays of graphs)."""
    result = Measurement(samples_s=[])
    with fills.stop_with(stop.hook):  # a fill of GiBs takes seconds
        fresh = agree.together(group, workload.make_inputs) if workload.check is not None else None
    result.check = check(workload, backend, fresh, between=stop)
    del fresh
    if result.check is not None and not result.check.ok:
        result.stop = "check"
        return result
    stop()
    result.sets = rotation_sets(workload, backend.cache_bytes(), config)
    inputs = agree.together(group, lambda: _make_sets(workload, result.sets, stop))
    batches = Batches(workload, backend, inputs, config, shape_for(workload, backend), after=stop.after(tick))
    clock = _Agreed(backend, group)
    warm = _warm_up(batches, clock, config, result)
    own = _sample(batches, clock, config, result, warm, telemetry)
    _host_issue(batches, group, own, result)
    inputs.clear()  # let the input sets go before the next case allocates its own
    return result


def _config_for(workload: Workload, config: EngineConfig, group: RankGroup | None,
                interrupted: Callable[[], bool] | None) -> EngineConfig:
    """The run's configuration with the workload's own changes; refuses what a group of ranks cannot do."""
    if workload.method.sampling:
        config = dataclasses.replace(config, **workload.method.sampling)
    if group is not None and workload.method.hold:
        # A rank that retries an unheld batch would call the collective more often than the others.
        raise ValueError("a held stream cannot be combined with a group of ranks")
    if group is not None and interrupted is not None:
        raise ValueError("the ranks of a group cannot abandon a measurement one by one")
    return config


class _Stop:
    """Asks ``interrupted`` (if any) and abandons the measurement once it says yes."""

    def __init__(self, interrupted: Callable[[], bool] | None):
        self.interrupted = interrupted
        self.hook = self if interrupted is not None else None  # what the input fills ask between pieces

    def __call__(self) -> None:
        if self.interrupted is not None and self.interrupted():
            raise Interrupted("interrupted")

    def after(self, tick: Callable[[], None] | None) -> Callable[[], None]:
        """What to call after every batch: the watchdog's tick, then this check."""

        def after_batch() -> None:
            if tick is not None:
                tick()
            self()

        return after_batch


def _make_sets(workload: Workload, sets: int, stop: _Stop) -> list:
    made = []
    with fills.stop_with(stop.hook):
        for _ in range(sets):
            stop()
            made.append(workload.make_inputs())
    return made


class _Agreed:
    """A value of this rank's and the time since a start: across a group, the slowest rank's of each."""

    def __init__(self, backend: Backend, group: RankGroup | None):
        self.backend, self.group = backend, group

    def __call__(self, own: float, since: float) -> tuple[float, float]:
        elapsed = self.backend.now() - since
        if self.group is None:
            return own, elapsed
        worst, elapsed = self.group.max([own, elapsed])
        return worst, elapsed


def _warm_up(batches: Batches, agreed: _Agreed, config: EngineConfig, result: Measurement) -> tuple[int, float]:
    """Batches that grow towards a sample's length, until their per-call times agree (and the workload's own
    minimum has passed: power limits take hold later than per-call times settle). The next batch's length and
    the last per-call time."""
    method = batches.workload.method
    # A workload's own minimum holds in every mode (--quick too): it says when its figure starts to mean
    # something (a GEMM before the power limit took hold reads the boost clock's rate), and a short run of a
    # figure that means nothing would only be fast, not quick.
    min_warmup = max(config.min_warmup_s, method.min_warmup_s)
    max_warmup = max(config.max_warmup_s, min_warmup)
    inner = 1
    per_call: list[float] = []
    t0 = batches.backend.now()
    while True:
        value, elapsed = agreed(float(np.median(batches.run(inner))), t0)
        per_call.append(value)
        inner = batches.shape.next_inner(value, config, method)
        result.settled = _settled(per_call, config)
        if (elapsed >= min_warmup and result.settled) or elapsed >= max_warmup:
            break
    result.warmup_s = batches.backend.now() - t0
    return inner, per_call[-1]


def _sample(batches: Batches, agreed: _Agreed, config: EngineConfig, result: Measurement, warm: tuple[int, float],
            telemetry: Telemetry | None) -> list[float]:
    """Samples until the stop rule says so, into ``result``; this rank's own per-call times."""
    method, flushed = batches.workload.method, batches.shape.flushed
    inner, last = warm
    rule = StopRule(config.target_cv, config.min_samples, config.max_samples, config.budget_s)
    if method.period_s > 0 and not flushed and not method.hold:
        # Once warm, each sample is a whole period of the power control loop (its rate swings within one, its
        # average does not); three such samples, each already an average, are enough for the stop rule.
        inner = max(inner, inner_for(last * method.calls, config, method.period_s))
        rule.min_samples = min(rule.min_samples, 3)
    result.inner = 1 if flushed else inner
    batches.issued.clear()  # warm-up's batches issue cold (first calls, compiled code not yet cached)
    own: list[float] = []
    sampler = _sampler(telemetry)
    rule.initialize()
    t0 = batches.backend.now()
    with sampler:
        while True:
            # Flushed samples come many per batch (and never with a group of ranks), up to the sample cap.
            for t in batches.run(min(inner, rule.room) if flushed else inner):
                own.append(t)
                if batches.pace_s is not None:
                    result.host_pace_s.append(batches.pace_s)
                value, elapsed = agreed(t, t0)
                rule.add(value)
            if rule.is_finished(elapsed):
                break
    result.samples_s, result.stop, result.unheld = rule.samples, rule.reason, batches.unheld
    result.state = sampler.summary()
    return own


def _host_issue(batches: Batches, group: RankGroup | None, own: list[float], result: Measurement) -> None:
    """The host's time to issue one call (the probe's median; across a group, the slowest issuer's), and each
    rank's median per-call time."""
    if batches.issued:
        result.host_issue_s = float(np.median(batches.issued))
    if group is not None:
        result.rank_medians_s = group.gather_floats(float(np.median(own)))
        if getattr(batches.shape, "probe", False):  # every rank measured it (same workload, same backend kind)
            result.host_issue_s = group.max([result.host_issue_s or 0.0])[0]


class _NoSampler:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def summary(self) -> dict:
        return {}


def _sampler(telemetry: Telemetry | None) -> Sampler | _NoSampler:
    if telemetry is None or getattr(telemetry, "source", "none") == "none":
        return _NoSampler()
    return Sampler(telemetry)


def metric_samples(workload: Workload, metrics: Sequence[Metric], samples_s: Sequence[float]) -> dict[str, list[float]]:
    """Per-sample values of each metric: time in the metric's unit, GB/s from bytes, TFLOP/s from flops,
    and anything else from the workload's ``derive``."""
    out: dict[str, list[float]] = {}
    derived = [dict(workload.derive(s)) for s in samples_s] if workload.derive else None
    for m in metrics:
        if m.name == TIME.name and m.unit in TIME_SCALE:
            out[m.name] = [s * TIME_SCALE[m.unit] for s in samples_s]
        elif m.name == BANDWIDTH.name and not (derived and m.name in derived[0]):
            out[m.name] = [workload.bytes / s / 1e9 if workload.bytes else math.nan for s in samples_s]
        elif m.name == THROUGHPUT.name and not (derived and m.name in derived[0]):
            out[m.name] = [workload.flops / s / 1e12 if workload.flops else math.nan for s in samples_s]
        elif derived is not None and all(m.name in d for d in derived):
            out[m.name] = [float(d[m.name]) for d in derived]
        else:
            raise ValueError(f"metric {m.name!r} is neither engine-derived nor produced by the workload's derive()")
    return out


__all__ = ["Interrupted", "EngineConfig", "FULL", "QUICK", "HOST_BOUND", "FLUSH_HOLD_S", "FLUSH_MAX_BATCH", "Measurement",
           "measure", "check", "metric_samples", "rotation_sets", "sets_spanning"]
