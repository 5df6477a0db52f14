"""What the engine needs from a device: a timer, a way to sync, its cache size, and its identity."""

from __future__ import annotations

import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any, ClassVar, Protocol

from gpubench.machine import host_pace as pace
from gpubench.machine.telemetry import Telemetry


class Timer:
    """Times one region. ``elapsed_s`` may block until the device has finished the region."""

    def start(self) -> None:
        raise NotImplementedError

    def stop(self) -> None:
        raise NotImplementedError

    def elapsed_s(self) -> float:
        raise NotImplementedError


class HostTimer(Timer):
    """perf_counter_ns around the region: right for work that is finished when the call returns."""

    def start(self) -> None:
        self._t0 = time.perf_counter_ns()

    def stop(self) -> None:
        self._t1 = time.perf_counter_ns()

    def elapsed_s(self) -> float:
        return (self._t1 - self._t0) * 1e-9


class Hold:
    """A stream stalled so that work enqueued behind it starts all at once."""

    def held(self) -> bool:
        """Was the stream still stalled now, i.e. did the whole batch get enqueued in time?"""
        return True


class RunnableMethod(Protocol):
    """What a backend reads of a workload's method (:class:`gpubench.suite.Method`)."""

    @property
    def timing(self) -> str: ...
    @property
    def calls(self) -> int: ...


class Runnable(Protocol):
    """What a backend reads of the workload it calls: :class:`gpubench.suite.Workload`, a floor above, satisfies it
    (and the fake device's duration models read its work)."""

    bytes: int
    flops: int
    extra: dict[str, Any]

    @property
    def run(self) -> Callable[[Any], Any]:
        """One call on one input set (whatever the suite's ``make_inputs`` returns)."""

    @property
    def method(self) -> RunnableMethod: ...


class GraphCapture(Protocol):
    """What captures a sequence of calls as one replayable graph (:meth:`Backend.graphs`)."""

    def capture(self, fn: Callable[[], object]) -> Callable[[], object]:
        """The replay of ``fn``'s calls; raises where they cannot be captured."""

    def stream(self) -> AbstractContextManager[object]:
        """The replays' own stream, for the block's length."""


class Backend:
    """One device as seen by the engine and the suites.

    Suites allocate with torch on ``torch_device``; the engine times through :meth:`timer` and
    :meth:`call`, and never looks at which backend it has.
    """

    name: ClassVar[str]
    is_gpu: ClassVar[bool] = False
    shares_machine: ClassVar[bool] = True  # other gpubench runs of the machine may use it too (gpubench.machine.other_runs)

    def __init__(self, device_index: int = 0):
        self.device_index = device_index

    # --- discovery -------------------------------------------------------------------------------
    @classmethod
    def available(cls) -> tuple[bool, str]:
        """(usable here, why not) — the reason is shown to the user as is."""
        raise NotImplementedError

    @classmethod
    def device_count(cls) -> int:
        return 1

    # --- description -----------------------------------------------------------------------------
    @property
    def torch_device(self) -> str:
        raise NotImplementedError

    def device_name(self) -> str:
        raise NotImplementedError

    def cache_bytes(self) -> int:
        """Size of the last-level cache the data passes through (GPU L2, CPU L3)."""
        raise NotImplementedError

    def memory_bytes(self) -> int:
        raise NotImplementedError

    def available_bytes(self) -> int:
        """Memory a new allocation can get now (what buffers are sized from: gpubench.machine.memory_budget.budget)."""
        return self.memory_bytes()

    def identity(self) -> dict[str, Any]:
        """Stable facts for the fingerprint (model, count, runtime); no clocks or temperatures."""
        raise NotImplementedError

    def pci_bus_id(self, index: int | None = None) -> str | None:
        """PCI address of device ``index`` (default: this one), for NUMA and link lookups; None if unknown."""
        return None

    def device_key(self) -> str | None:
        """This device among its machine's, in words, whatever index this process sees it at: two processes of one
        machine with the same key measure one device (gpubench.ranks.apart). None where unknown."""
        return None

    def telemetry(self):
        """Device-state reader (clocks, power, throttle reasons); the null one where nothing is readable."""
        return Telemetry()

    # --- timing ----------------------------------------------------------------------------------
    def timer(self) -> Timer:
        return HostTimer()

    def host_timer(self) -> Timer:
        """The host's clock, for what the CPU spends (the fake backend substitutes its own)."""
        return HostTimer()

    def hold(self, seconds: float) -> Hold | None:
        """Stall the device's stream for about ``seconds`` (None: this backend cannot)."""
        return None

    def synchronize(self) -> None:
        pass

    def now(self) -> float:
        """Wall clock for the engine's budgets (the fake backend substitutes its own)."""
        return time.perf_counter()

    def host_now(self) -> float:
        """The host's clock around issuing calls, to tell a host-bound figure (the fake substitutes its own)."""
        return time.perf_counter()

    def host_pace(self) -> float:
        """The host's pace now: seconds a fixed piece of CPU work takes (gpubench.machine.host_pace; the fake has its own)."""
        return pace.probe_s()

    def call(self, workload: Runnable, inputs: object) -> Any:
        """Run the workload once on one input set; the fake backend also advances its clock here."""
        return workload.run(inputs)

    def call_batch(self, workload: Runnable, sets: list, turn: int, inner: int) -> None:
        """``inner`` calls back to back, cycling through ``sets`` from ``turn``. A tight loop: its own
        overhead lands in host-timed samples, so it does no more per call than the call itself."""
        run, count = workload.run, len(sets)
        if count == 1:
            x = sets[0]
            for _ in range(inner):
                run(x)
        else:
            for i in range(turn, turn + inner):
                run(sets[i % count])

    def link_factor(self, ends: tuple[str, str], rail: int) -> float:
        """The share of its rate the fabric between two nodes gives on ``rail`` (0: silent): 1 on hardware, whose
        speed is what the fabric check measures; the fake backend's is set from GPUBENCH_FAKE_FABRIC."""
        return 1.0

    def begin_case(self, case_id: str) -> None:
        """The runner names each case before preparing it (the fake backend's slow-case knob reads it)."""

    def flush_cache(self) -> None:
        """Evict the workload's data from the last-level cache (used when inputs cannot rotate)."""

    def graphs(self) -> GraphCapture | None:
        """What captures a sequence of calls as one replayable graph (CUDA/HIP graphs), or None where this
        backend cannot: an object with ``capture(fn) -> replay`` (raises when capture fails) and
        ``stream()``, a context manager for the replays' own stream."""
        return None

    def release(self) -> None:
        """Give memory back between cases so that one case's buffers don't crowd the next."""
