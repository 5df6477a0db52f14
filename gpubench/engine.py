"""The measurement engine: the only code in gpubench that reads a clock.

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
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from gpubench import fills
from gpubench.stats import cv as _cv
from gpubench.suite import BANDWIDTH, THROUGHPUT, TIME, TIME_SCALE, Check, Metric, Workload


# Host-bound samples. Each sample times the host issuing its first HOST_PROBE_CALLS calls (few enough that the
# launch queue, ~a thousand entries, cannot fill and block the host: then issuing would look slow because the
# device is). When issuing one call takes the host HOST_BOUND or more of the call's device time, the device was
# waiting between calls. One eager all_reduce through torch.distributed costs the host 14-35 µs (H100 hosts,
# docs/measurements.md), so on 2 × H200 an eager 1 MiB collective is timed at that rate.
HOST_PROBE_CALLS = 16
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

    @property
    def host_bound(self) -> bool | None:
        """Whether the device waited for the host: issuing a call took at least HOST_BOUND × its time."""
        if self.host_issue_s is None or not self.samples_s:
            return None
        return self.host_issue_s >= HOST_BOUND * float(np.median(self.samples_s))

    @property
    def valid(self) -> bool:
        return self.check is None or self.check.ok


def check(workload: Workload, backend: Any, inputs: Any = None,
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


def _inner_for(per_call_s: float, config: EngineConfig, min_sample_s: float = 0.0) -> int:
    if per_call_s <= 0:
        return config.max_inner
    return max(1, min(config.max_inner, math.ceil(max(config.min_sample_s, min_sample_s) / per_call_s)))


def _settled(per_call: Sequence[float], config: EngineConfig) -> bool:
    if len(per_call) < config.settle_window:
        return False
    last = sorted(per_call[-config.settle_window :])
    mid = last[len(last) // 2]
    return mid > 0 and (last[-1] - last[0]) / mid <= config.settle_tol


def measure(
    workload: Workload,
    backend: Any,
    config: EngineConfig = FULL,
    telemetry: Any = None,
    group: Any = None,
    tick: Callable[[], None] | None = None,
    interrupted: Callable[[], bool] | None = None,
) -> Measurement:
    """Time ``workload`` on ``backend``; see the module docstring for the method.

    ``tick`` is called after every batch: a watchdog that ends a stalled process (the ``--devices`` ranks')
    sees the measurement progress.

    ``interrupted`` is asked between the steps of the check (inputs, call, reference), between input sets and
    after every batch; once it says yes, the measurement is abandoned (:class:`Interrupted`). A Ctrl-C then
    acts within one such step (a single long operation, which Python cannot interrupt, runs to its end), not
    after a whole case; the suites' input fills (:mod:`gpubench.fills`) ask it between pieces too.
    Not with a ``group``: one rank leaving a case would leave the others waiting in its collectives.

    ``group`` (a :class:`gpubench.ranks.group.Group`) makes every rank of a collective take the same path:
    after each batch the ranks agree on the slowest per-call time and the longest elapsed time, and every
    decision (batch length, end of warm-up, stop rule, budget) is taken on those agreed values, so all ranks
    call the collective the same number of times.
    """
    result = Measurement(samples_s=[])
    if workload.method.sampling:
        config = dataclasses.replace(config, **workload.method.sampling)
    if group is not None and workload.method.hold:
        # A rank that retries an unheld batch would call the collective more often than the others.
        raise ValueError("a held stream cannot be combined with a group of ranks")
    if group is not None and interrupted is not None:
        raise ValueError("the ranks of a group cannot abandon a measurement one by one")

    def stop_here() -> None:
        if interrupted is not None and interrupted():
            raise Interrupted("interrupted")

    stop_here()
    with fills.stop_with(stop_here if interrupted is not None else None):  # a fill of GiBs takes seconds
        fresh = _together(group, workload.make_inputs) if workload.check is not None else None
    result.check = check(workload, backend, fresh, between=stop_here)
    del fresh
    if result.check is not None and not result.check.ok:
        result.stop = "check"
        return result
    stop_here()

    flush = workload.method.cache == "flush"
    host = workload.method.timing == "host"
    # Only where the device starts on a batch before the host has issued it all can the host hold it back.
    watch_host = backend.is_gpu and not host and not flush and not workload.method.hold
    issued: list[float] = []  # the host's seconds per call, a value per batch
    result.sets = sets = rotation_sets(workload, backend.cache_bytes(), config)

    def make_sets() -> list:
        made = []
        with fills.stop_with(stop_here if interrupted is not None else None):
            for _ in range(sets):
                stop_here()
                made.append(workload.make_inputs())
        return made

    inputs = _together(group, make_sets)
    turn = 0
    # A held batch of calls waits ≥ 5 ms; flushed samples take ~tens of µs each to enqueue (FLUSH_HOLD_S).
    base_hold_s = max(2 * config.min_sample_s, 0.005)
    hold_scale = 1.0  # doubled each time a hold ran out before its batch was queued

    def batch(inner: int) -> list[float]:
        """Per-call times: one for a batch of ``inner`` back-to-back calls; with a flushed cache, one for each
        of ``inner`` samples (flush, then one call between its own events), all queued before any is read, so
        that the GPU runs them back to back under load as a training step would, not one per host round trip.
        Behind a hold the whole batch is queued before the GPU reaches it: otherwise a start event queued
        behind an idle GPU fires at once, and the host's time to issue the call (µs to tens of µs, whatever
        the host's speed) is timed as the call's."""
        nonlocal turn, hold_scale
        for _ in range(_MAX_HOLD_TRIES):
            if host:
                backend.synchronize()  # an empty queue: the enqueue cost alone, no back-pressure
            if workload.method.before_batch is not None:
                workload.method.before_batch()
            wait = min(hold_scale * (FLUSH_HOLD_S * inner if flush else base_hold_s), _MAX_HOLD_S)
            guard = _hold(backend, wait) if workload.method.hold else None
            timers = []
            for _ in range(inner if flush else 1):
                if flush:
                    backend.flush_cache()
                timer = backend.host_timer() if host else backend.timer()
                timer.start()
                if watch_host:
                    first = min(inner, HOST_PROBE_CALLS)
                    h0 = backend.host_now()
                    backend.call_batch(workload, inputs, turn, first)
                    issued.append((backend.host_now() - h0) / (first * workload.method.calls))
                    if inner > first:
                        backend.call_batch(workload, inputs, turn + first, inner - first)
                else:
                    backend.call_batch(workload, inputs, turn, 1 if flush else inner)
                timer.stop()
                timers.append(timer)
            turn += inner
            held = guard is None or guard.held()
            elapsed = [t.elapsed_s() for t in timers]
            if tick is not None:
                tick()
            stop_here()
            if host:
                backend.synchronize()
            if held:
                calls = workload.method.calls * (1 if flush else inner)
                return [e / calls for e in elapsed]
            # The GPU started before the host had enqueued the batch: launch gaps are in this sample.
            result.unheld += 1
            hold_scale *= 2
        raise RuntimeError(f"the stream hold ran out before {inner} calls were enqueued, {_MAX_HOLD_TRIES} times")

    # Warm-up: batches grow towards a sample's length, and end once their per-call times agree (and the
    # workload's own minimum has passed: power limits take hold later than per-call times settle).
    def agreed(own: float, since: float) -> tuple[float, float]:
        """This sample's per-call time and the time since ``since``: across a group, the slowest rank's."""
        elapsed = backend.now() - since
        if group is None:
            return own, elapsed
        worst, elapsed = group.max([own, elapsed])
        return worst, elapsed

    inner = 1
    per_call: list[float] = []
    # A workload's own minimum holds in every mode (--quick too): it says when its figure starts to mean
    # something (a GEMM before the power limit took hold reads the boost clock's rate), and a short run of a
    # figure that means nothing would only be fast, not quick.
    min_warmup = max(config.min_warmup_s, workload.method.min_warmup_s)
    max_warmup = max(config.max_warmup_s, min_warmup)
    t0 = backend.now()
    while True:
        value, elapsed = agreed(float(np.median(batch(inner))), t0)
        per_call.append(value)
        if flush:
            # Samples per batch: enough to keep the GPU loaded for FLUSH_BATCH_S between host round trips.
            inner = max(1, min(FLUSH_MAX_BATCH, config.max_samples, math.ceil(FLUSH_BATCH_S / max(value, 1e-9))))
        else:
            inner = _inner_for(value * workload.method.calls, config, workload.method.min_sample_s)
            if workload.method.hold:
                inner = min(inner, config.max_held_inner)
        result.settled = _settled(per_call, config)
        if (elapsed >= min_warmup and result.settled) or elapsed >= max_warmup:
            break
    result.warmup_s = backend.now() - t0

    sampler = _sampler(telemetry)
    own: list[float] = []
    min_samples = config.min_samples
    if workload.method.period_s > 0 and not flush and not workload.method.hold:
        # Once warm, each sample is a whole period of the power control loop (its rate swings within one, its
        # average does not); three such samples, each already an average, are enough for the stop rule.
        inner = max(inner, _inner_for(per_call[-1] * workload.method.calls, config, workload.method.period_s))
        min_samples = min(min_samples, 3)
    result.inner = 1 if flush else inner
    issued.clear()  # warm-up's batches issue cold (first calls, compiled code not yet cached)
    t0 = backend.now()
    with sampler:
        while True:
            # Flushed samples come many per batch (and never with a group of ranks), up to the sample cap.
            for t in batch(min(inner, config.max_samples - len(result.samples_s)) if flush else inner):
                own.append(t)
                value, elapsed = agreed(t, t0)
                result.samples_s.append(value)
            n = len(result.samples_s)
            if n >= min_samples and _cv(result.samples_s) <= config.target_cv:
                result.stop = "cv"
                break
            if n >= config.max_samples:
                result.stop = "max_samples"
                break
            if elapsed >= config.budget_s and n >= min(3, min_samples):
                result.stop = "budget"
                break
    result.state = sampler.summary()
    if issued:
        result.host_issue_s = float(np.median(issued))
    if group is not None:
        result.rank_medians_s = group.gather_floats(float(np.median(own)))
        if watch_host:  # every rank measured it (same workload, same kind of backend): the slowest issuer's
            result.host_issue_s = group.max([result.host_issue_s or 0.0])[0]
    inputs.clear()  # let the input sets go before the next case allocates its own
    return result


def _together(group: Any, make: Any) -> Any:
    """``make()`` on every rank; if it raised anywhere (out of memory on one GPU), it raises on every rank, so
    that no rank goes on into a collective the failed one will never join."""
    if group is None:
        return make()
    value, error = None, None
    try:
        value = make()
    except Exception as e:  # noqa: BLE001 — reported to every rank just below
        error = e
    failed = group.failures(error)
    if failed:
        raise RuntimeError("; ".join(failed)) from error
    return value


_MAX_HOLD_TRIES = 8
# Flushed samples: the host takes ~40 µs (H100 machines, Python) to queue a flush, two events and a call, so a
# hold allows 0.1 ms per sample (doubled whenever it ran out); a batch keeps the GPU loaded for 0.1 s, at most
# 64 samples (each ~4 launches: CUDA blocks at ~1000 pending, which a hold would turn into a stall).
FLUSH_HOLD_S = 1e-4
FLUSH_BATCH_S = 0.1
FLUSH_MAX_BATCH = 64
_MAX_HOLD_S = 2.0


def _hold(backend: Any, seconds: float):
    guard = backend.hold(seconds)
    if guard is None:
        from gpubench.suite import Skip

        raise Skip(f"backend {backend.name!r} cannot hold a stream, which this measurement needs")
    return guard


class _NoSampler:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def summary(self) -> dict:
        return {}


def _sampler(telemetry: Any):
    if telemetry is None or getattr(telemetry, "source", "none") == "none":
        return _NoSampler()
    from gpubench.telemetry import Sampler

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


__all__ = ["Interrupted", "EngineConfig", "FULL", "QUICK", "HOST_BOUND", "Measurement", "measure", "check", "metric_samples", "rotation_sets", "sets_spanning"]
