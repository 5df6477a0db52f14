"""A deterministic backend for tests: the work really runs (on the CPU, through torch, so checks are real),
but time comes from a programmable clock that only moves when a workload is called.

The engine's stop rule, stats and budgets then depend on the durations a test programs, never on the speed
of the machine running the tests (the idea of hyperfine's mock executor).
"""

from __future__ import annotations

import contextlib
import itertools
import os
import re
from collections.abc import Callable, Iterable
from typing import Any

from gpubench.backends.base import Backend, Hold, Runnable, Timer
from gpubench.errors import UsageError
from gpubench.machine.telemetry import Telemetry


class FakeClock:
    def __init__(self, start: float = 0.0):
        self.t = start

    def now(self) -> float:
        return self.t

    def advance(self, seconds: float) -> None:
        self.t += seconds


class FakeTimer(Timer):
    def __init__(self, clock: FakeClock):
        self._clock = clock

    def start(self) -> None:
        self._t0 = self._clock.now()

    def stop(self) -> None:
        self._t1 = self._clock.now()

    def elapsed_s(self) -> float:
        return self._t1 - self._t0


def default_model(workload: Runnable, call_index: int) -> float:
    """A made-up device: 5 µs per kernel (a call that says it launches several, as a graph's replay does, takes
    each its 5 µs), 100 GB/s, 10 TFLOP/s, no noise. Were a replay of 1000 kernels one 5 µs call, the engine would
    batch hundreds of them into a sample, each running its 1000 operations on the CPU for real: minutes for launch's
    quick grid."""
    return 5e-6 * workload.extra.get("kernels_per_call", 1) + workload.bytes / 100e9 + workload.flops / 10e12


FAKE_PACE_S = 100e-6  # the fake host's pace probe at pace 1 (gpubench.machine.host_pace reads 50-140 µs on real hosts)

_SLOW_ONCE_TAKEN = False  # this process consumed GPUBENCH_FAKE_SLOW_ONCE's marker: its slowdown holds here


def _slow_cases() -> tuple[re.Pattern, float] | None:
    """GPUBENCH_FAKE_SLOW_CASES=FACTOR:REGEX makes the cases whose id matches REGEX take FACTOR times as long
    (a regression, for tests of the gate). With GPUBENCH_FAKE_SLOW_ONCE=MARKER as well, only the first process
    that finds the file MARKER is slow, and it deletes the file: a slowdown that does not repeat when a case is
    measured again in a fresh process (the gate's confirmation rerun)."""
    global _SLOW_ONCE_TAKEN
    spec = os.environ.get("GPUBENCH_FAKE_SLOW_CASES", "")
    if not spec:
        return None
    factor, _, pattern = spec.partition(":")
    marker = os.environ.get("GPUBENCH_FAKE_SLOW_ONCE")
    if marker and not _SLOW_ONCE_TAKEN:
        try:
            os.unlink(marker)  # atomic: of several processes, exactly one takes the marker
            _SLOW_ONCE_TAKEN = True
        except FileNotFoundError:
            return None
    return re.compile(pattern), float(factor)


def _knob_factor() -> float:
    """GPUBENCH_FAKE_KNOBS=NAME=VALUE:FACTOR[;...]: every call takes FACTOR times as long in a process whose
    environment sets NAME to VALUE, as a collective library that reads that setting would (for tests of the
    autotune sweep: a configuration that really is faster)."""
    factor = 1.0
    for item in os.environ.get("GPUBENCH_FAKE_KNOBS", "").split(";"):
        setting, _, f = item.rpartition(":")
        name, _, value = setting.partition("=")
        if name and os.environ.get(name.strip()) == value.strip():
            factor *= float(f)
    return factor


def fabric_factor(spec: str, ends: tuple[str, str], rail: int) -> float:
    """GPUBENCH_FAKE_FABRIC=ITEM=FACTOR[,...]: the share of its rate a made-up fabric path gives, the least of the
    items it matches: ``node03=0.4`` (every path of that node), ``node01-node04=0.3`` (that link, either way),
    ``node02:nic1=0`` (that node's rail 1). 0 is silent: nothing arrives. A malformed item is a UsageError."""
    factor = 1.0
    for item in (x.strip() for x in spec.split(",") if x.strip()):
        where, sep, value = item.rpartition("=")
        try:
            f = float(value)
        except ValueError:
            f = -1.0
        if not sep or not where or f < 0:
            raise UsageError(f"GPUBENCH_FAKE_FABRIC item {item!r} is not WHERE=FACTOR (node03=0.4, node01-node04=0.3, "
                             "node02:nic1=0)")
        node, _, nic = where.partition(":nic")
        # names may hold hyphens themselves (gpu-01): a link is matched whole, either way round
        hit = (node in ends and nic == str(rail)) if nic else \
            where in ends or where in (f"{ends[0]}-{ends[1]}", f"{ends[1]}-{ends[0]}")
        factor = min(factor, f) if hit else factor
    return factor


def _scaled(model: Callable[[Any, int], float], factor: float) -> Callable[[Any, int], float]:
    """``model``'s durations times ``factor`` (a function of its own: lambdas in one scope would share ``model``, and
    a second scaling made the first call itself)."""
    return lambda workload, i: factor * model(workload, i)


class FakeGraphs:
    """Graph capture on the fake device (GPUBENCH_FAKE_GRAPHS=1): a replay makes the captured calls again, for
    real, so that whatever reads a replay's output reads the calls' results. With GPUBENCH_FAKE_GRAPHS=fail
    every capture raises, as CUDA's does for a call it cannot capture."""

    def __init__(self, fail: bool):
        self.fail = fail

    def capture(self, fn: Callable[[], Any]) -> Callable[[], Any]:
        if self.fail:
            raise RuntimeError("fake graph capture failed: operation not permitted when stream is capturing")
        return fn

    def stream(self):
        return contextlib.nullcontext()


class FakeBackend(Backend):
    name = "fake"
    is_gpu = True  # behaves like a device: suites take their GPU paths where those run on CPU tensors
    # No machine's device: its co-tenants are the tests' own (GPUBENCH_FAKE_OTHER_PIDS), never the other gpubench runs
    # of the machine (gpubench.machine.other_runs), which would make its runs' rows depend on what else runs there.
    shares_machine = False

    def __init__(
        self,
        device_index: int = 0,
        *,
        durations: Iterable[float] | Callable[[Any, int], float] | None = None,
        cache_bytes: int = 1 << 20,
        memory_bytes: int = 1 << 30,
        available_bytes: int | None = None,
        model_name: str = "Fake GPU",
        device_count: int = 2,
        reading: dict | None = None,
        host_seconds: float | None = None,
    ):
        super().__init__(device_index)
        self.clock = FakeClock()
        # The host's cost of issuing one call, on a clock of its own (GPUBENCH_FAKE_HOST_S for tests through
        # the CLI). A device fed more slowly than it runs waits for the host: a call then takes at least this.
        self.host_clock = FakeClock()
        self.host_seconds = float(host_seconds if host_seconds is not None
                                  else os.environ.get("GPUBENCH_FAKE_HOST_S", 0.0))
        self.calls = 0
        self.flushes = 0
        self.holds: list[float] = []
        floor = os.environ.get("GPUBENCH_FAKE_CALL_S")
        if durations is None and floor:
            # Set by multi-process tests (comm over gloo): there each fake call is a real collective taking
            # about a millisecond, so the engine must not batch hundreds of them as it would 5 µs calls.
            durations = lambda workload, i: float(floor) + workload.bytes / 100e9  # noqa: E731
        if durations is None:
            self._duration = default_model
        elif callable(durations):
            self._duration = durations
        else:
            cycle = itertools.cycle(list(durations))
            self._duration = lambda workload, i: next(cycle)
        slow = dict(x.split(":", 1) for x in os.environ.get("GPUBENCH_FAKE_SLOW", "").split(",") if ":" in x)
        if str(device_index) in slow:
            # Set by fleet tests, as INDEX:FACTOR,...: this device's calls take FACTOR times as long (a slow
            # GPU in a box of good ones).
            self._duration = _scaled(self._duration, float(slow[str(device_index)]))
        levels = [x for x in os.environ.get("GPUBENCH_FAKE_PROCESS_LEVELS", "").split(",") if x.strip()]
        if levels:
            # GPUBENCH_FAKE_PROCESS_LEVELS=F0,F1,...: process k of a run (gpubench.run.per_process) takes Fk times as
            # long per call, as a process whose host buffers landed elsewhere; a word that is no number fails it.
            k = int(os.environ.get("GPUBENCH_WORKER_INDEX", "0"))
            self._duration = _scaled(self._duration, float(levels[k % len(levels)]))
        # GPUBENCH_FAKE_HOST_PACE=H0,H1,...: process k's host runs Hk times slower than a host at pace 1: its pace
        # probe reads Hk x FAKE_PACE_S and its host-timed calls take Hk times as long (a slow moment of a shared
        # host, gpubench.machine.host_pace). For tests of compare judging host-set figures at the baseline's pace.
        paces = [x for x in os.environ.get("GPUBENCH_FAKE_HOST_PACE", "").split(",") if x.strip()]
        k = int(os.environ.get("GPUBENCH_WORKER_INDEX", "0"))
        self.pace_level = float(paces[k % len(paces)]) if paces else 1.0
        self._slow_cases = _slow_cases()
        if _knob_factor() != 1.0:
            self._duration = _scaled(self._duration, _knob_factor())
        self._case_factor = 1.0
        self._cache = cache_bytes
        self._memory = memory_bytes
        self._available = memory_bytes if available_bytes is None else available_bytes
        # GPUBENCH_FAKE_MODEL: the name the device reports (a real model's, for tests of what follows from it: the
        # spec peaks, gpubench check's envelopes); the argument wins where a test gives one.
        self._model = os.environ.get("GPUBENCH_FAKE_MODEL", model_name) if model_name == "Fake GPU" else model_name
        self._count = device_count
        self._reading = reading or {
            "sm_clock_mhz": 1980.0,
            "mem_clock_mhz": 3201.0,
            "power_w": 400.0,
            "temp_c": 50.0,
            "throttle": [],
        }

    @classmethod
    def available(cls) -> tuple[bool, str]:
        return True, ""

    @classmethod
    def device_count(cls) -> int:
        # GPUBENCH_FAKE_DEVICES: a box of more fake GPUs, for fleet tests (2 by default: a peer to copy to).
        return int(os.environ.get("GPUBENCH_FAKE_DEVICES", "2"))

    @property
    def torch_device(self) -> str:
        return "cpu"

    def device_name(self) -> str:
        return self._model

    def cache_bytes(self) -> int:
        return self._cache

    def memory_bytes(self) -> int:
        return self._memory

    def available_bytes(self) -> int:
        return self._available

    def device_key(self) -> str | None:
        # The fake GPU this index is on its node: CUDA_VISIBLE_DEVICES renumbers them as it does real ones (a launcher
        # that gives each task its own: the stand-in srun's --gpus-per-task, tests/fleet/srun).
        visible = [v.strip() for v in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if v.strip()]
        return f"fake GPU {visible[self.device_index] if self.device_index < len(visible) else self.device_index}"

    def identity(self) -> dict:
        return {
            "backend": self.name,
            "gpu_model": self._model,
            "gpu_count": self._count,
            "runtime": "fake",
            "runtime_version": "0",
            "memory_bytes": self._memory,
        }

    def telemetry(self):
        reading, index = self._reading, self.device_index

        class FakeTelemetry(Telemetry):
            source = "fake"

            def read(self) -> dict:
                return dict(reading, throttle=list(reading.get("throttle") or []))

            def processes(self) -> list[int]:
                # GPUBENCH_FAKE_OTHER_PIDS=PID,...: other processes on every device (a co-tenant, for tests);
                # INDEX:PID on device INDEX alone.
                others = [x.strip().rpartition(":") for x in os.environ.get("GPUBENCH_FAKE_OTHER_PIDS", "").split(",")]
                return [os.getpid(), *(int(p) for on, _, p in others if p and on in ("", str(index)))]

            def utilization(self) -> float:
                return float(os.environ.get("GPUBENCH_FAKE_BUSY_PCT", 0.0))

            def host_load(self) -> float:
                # GPUBENCH_FAKE_HOST_BUSY=SHARE: other processes keep this share of the host's CPUs busy; the
                # fake device never reads the real machine's load, so tests do not depend on how busy it is.
                return float(os.environ.get("GPUBENCH_FAKE_HOST_BUSY", 0.0))

            def static(self) -> dict:
                return {
                    "driver_version": "fake-1.0",
                    "max_sm_clock_mhz": 1980.0,
                    "max_mem_clock_mhz": 3201.0,
                    "power_limit_w": 700.0,
                    "uuid": None,
                    "pci_bus_id": None,
                }

        return FakeTelemetry()

    def timer(self) -> Timer:
        return FakeTimer(self.clock)

    def host_timer(self) -> Timer:
        return FakeTimer(self.clock)

    def hold(self, seconds: float) -> Hold | None:
        self.holds.append(seconds)
        return Hold()

    def now(self) -> float:
        return self.clock.now()

    def host_now(self) -> float:
        return self.host_clock.now()

    def host_pace(self) -> float:
        return FAKE_PACE_S * self.pace_level

    def link_factor(self, ends: tuple[str, str], rail: int) -> float:
        return fabric_factor(os.environ.get("GPUBENCH_FAKE_FABRIC", ""), ends, rail)

    def begin_case(self, case_id: str) -> None:
        self._case_factor = self._slow_cases[1] if self._slow_cases and self._slow_cases[0].search(case_id) else 1.0

    def call(self, workload: Runnable, inputs: object) -> Any:
        out = workload.run(inputs)
        seconds = float(self._duration(workload, self.calls)) * self._case_factor
        if "fabric_path" in workload.extra:  # a fabric path's exchange: the made-up fabric's share of its rate
            seconds /= max(self.link_factor(*workload.extra["fabric_path"]), 1e-9)
        if workload.method.timing == "host":
            seconds *= self.pace_level
        if seconds <= 0:
            raise ValueError("fake durations must be positive, or the engine's budgets never run out")
        # A run of ``calls`` operations (a captured graph's replay) takes each its duration; the host issues it once.
        self.host_clock.advance(self.host_seconds)
        self.clock.advance(max(seconds * workload.method.calls, self.host_seconds))
        self.calls += 1
        return out

    def call_batch(self, workload: Runnable, sets: list, turn: int, inner: int) -> None:
        for i in range(turn, turn + inner):
            self.call(workload, sets[i % len(sets)])

    def flush_cache(self) -> None:
        self.flushes += 1

    def graphs(self) -> FakeGraphs | None:
        mode = os.environ.get("GPUBENCH_FAKE_GRAPHS", "")
        return FakeGraphs(fail=mode == "fail") if mode in ("1", "fail") else None
