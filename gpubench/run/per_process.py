"""Figures whose level is set per process, measured in several processes of one run.

A host-timed launch, a host-bound chain of kernels, a copy to or from host memory: each process of one build
measures its own level of these (where its host buffers landed, how its threads were placed), tight within the
process and tens of percent apart between processes (gpubench.results.host_set). One process's samples cannot say how far
such a figure moves, so compare could only judge it against a window of runs. As pyperf does with its worker
processes and asv with its rounds, the run measures these cases in ``--processes`` processes: its own, then
fresh workers one after the other, each measuring every such case once with 1/N of the sampling budget. The
rows pool every process's samples, labelled by process (``sample_process``), so one run knows the figure's
spread between processes.

The workers (``python -m gpubench.run.worker``) are started with the run (as it begins, where gpubench.run.prestart says)
and lay out the same cases once told to; the run measures nothing until their start-up (a device context) is
over, since a context opening on the same GPU slows what it is timing then. They then wait, idle, for their turn.
A worker that fails or stalls costs the run its samples, not the run: the rows keep the processes that finished,
and a note says which did not.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import pickle
import shutil
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gpubench.child import Gone
from gpubench.errors import UsageError
from gpubench.run import prestart
from gpubench.run.request import DEFAULT_PROCESSES, RunRequest  # noqa: F401 — --help reads it here without numpy

if TYPE_CHECKING:
    from gpubench.timing.engine import EngineConfig

READY_TIMEOUT_S = 300.0  # a worker's start-up: imports and a device context (seconds on a cold file cache)
CASE_TIMEOUT_S = 120.0  # a worker's allowance per case, on top of a minute: a stalled device ends it
# How long a worker whose output has ended may take to exit before it is killed: its interpreter's teardown on a
# loaded 2-core host took more than 5 s (the wait then raised through the run instead of costing its samples).
_EXIT_WAIT_S = 30.0
READY, DONE = "ready", "done"


@dataclass
class Spec:
    """What a worker is given (pickled): the run's request itself, the device the run resolved it to, the engine's
    configuration, and the cases to measure in its turn."""

    request: RunRequest
    backend: str  # the backend's name the run measures on (the request may say auto)
    device: int
    config: EngineConfig  # the run's
    cases: dict[str, list[str]]  # suite -> case ids to measure


class WorkerError(Exception):
    """A worker ended or stalled before it gave its rows."""


class Workers:
    """The run's worker processes 1..N-1, started at once and measured one at a time."""

    def __init__(self, count: int, *, stop: Callable[[], bool] = lambda: False, pinning: Pinning | None = None,
                 started: prestart.Started | None = None):
        """``count`` workers: ``started`` (gpubench.run.prestart, as the run began) where given, else started now."""
        self.stop = stop
        self.pinning = pinning or NOT_PINNED  # where each worker measures (its start-up runs anywhere)
        started = started if started is not None else prestart.spawn(count, _threads_env(self.pinning))
        self.dir = started.dir
        self.procs, self.logs, self.failed = started.take()
        self.ready: set[int] = set()

    def start(self, spec: Spec) -> None:
        """Each worker reads ``spec`` and lays out the same cases, opening its device (then says it is ready)."""
        self.spec = spec
        (self.dir / "spec.pkl").write_bytes(pickle.dumps(spec))
        for k, proc in self.procs.items():
            try:
                proc.send(prestart.START)
            except Gone:
                self.failed[k] = f"could not be told to start: it {proc.ended(0)}"

    @property
    def pids(self) -> set[int]:
        return {p.pid for p in self.procs.values()}

    def _line(self, k: int, timeout: float) -> str:
        """The next protocol line of worker k; WorkerError when it ended, stalled or the run is stopping."""
        proc = self.procs[k]
        try:
            line = proc.line(timeout, stop=self.stop)
        except Gone:
            if proc.reap(_EXIT_WAIT_S, term_s=None):
                raise WorkerError(f"closed its output and did not end within {_EXIT_WAIT_S:g} s: killed"
                                  f"{self._tail(k)}") from None
            raise WorkerError(f"{proc.ended(0)}{self._tail(k)}") from None
        if line is None:
            raise WorkerError("stopped (Ctrl-C)" if self.stop() else f"gave no answer in {timeout:.0f} s")
        return line.strip()

    def _tail(self, k: int) -> str:
        with contextlib.suppress(OSError):
            self.logs[k].flush()
            lines = [x for x in (self.dir / f"stderr-{k}.txt").read_text(errors="replace").splitlines() if x.strip()]
            if lines:
                return f": {lines[-1][:300]}"
        return ""

    def wait_ready(self) -> None:
        """Until every worker has laid out its cases (or failed to)."""
        for k in sorted(self.procs):
            if k in self.ready or k in self.failed:
                continue
            try:
                line = self._line(k, READY_TIMEOUT_S)
            except WorkerError as e:
                self.failed[k] = str(e)
                continue
            if line == READY:
                self.ready.add(k)
            else:
                self.failed[k] = f"said {line[:200]!r} instead of {READY!r}"

    def measure(self, k: int, own_pids: Sequence[int], cases: dict[str, list[str]]) -> list[dict[str, Any]]:
        """Worker k measures ``cases`` (suite -> case ids, of those its spec names); its rows. WorkerError when
        it could not."""
        self.wait_ready()
        if k in self.failed:
            raise WorkerError(self.failed[k])
        proc = self.procs[k]
        if self.pinning.cpus:  # every thread it has, and those it starts, on the measuring CPUs
            pin_threads(proc.pid, self.pinning.cpus)
        try:
            proc.send(json.dumps({"own": sorted(own_pids), "cases": cases}))
        except Gone:
            raise WorkerError(f"could not be told to start: it {proc.ended(0)}") from None
        n = sum(len(c) for c in cases.values())
        try:
            line = self._line(k, 60.0 + CASE_TIMEOUT_S * n)
        except WorkerError:
            self._end(k)
            raise
        if line != DONE:
            self._end(k)
            raise WorkerError(f"said {line[:200]!r} instead of {DONE!r}")
        rows = pickle.loads((self.dir / f"rows-{k}.pkl").read_bytes())
        self._end(k)
        return rows

    def _end(self, k: int) -> None:
        proc = self.procs.get(k)
        if proc is not None:
            proc.reap(10.0, term_s=None)  # end of input: it leaves; one that does not is killed

    def close(self) -> None:
        """End every worker still running (an idle one reads end-of-input and leaves) and remove the folder."""
        for proc in self.procs.values():
            proc.hang_up()
        end = time.monotonic() + 5.0
        for proc in self.procs.values():
            proc.reap(max(0.1, end - time.monotonic()), term_s=None)
        for log in self.logs.values():
            log.close()
        shutil.rmtree(self.dir, ignore_errors=True)


def scaled(config: EngineConfig, processes: int) -> EngineConfig:
    """The engine configuration of a per-process case: the sampling budget shared between the processes."""
    if processes <= 1:
        return config
    return dataclasses.replace(config, budget_s=config.budget_s / processes)



# --- pinning: each measuring process on a core near its GPU --------------------------------------------------
#
# Host-timed launches and host<->device copies move tens of percent between runs of one GPU (docs/measurements.md,
# launch): a process's level is set by where its threads and buffers landed. pyperf holds such figures to a
# few percent by pinning its worker processes to CPUs and spreading samples over processes; here the measuring
# processes run, while they measure the figures set per process, on CPUs of the GPU's own NUMA node (its host
# buffers then land there too): ``node`` all of that node's CPUs this process may use, ``core`` one of them, the
# same for every process (they measure one after the other), ``core:N`` CPU N, ``off`` wherever the OS puts them.
# Which works is a measurement (tests/gpu/pinning.sh): GPUBENCH_PIN chooses, DEFAULT_PIN until then.
PIN_ENV, DEFAULT_PIN = prestart.PIN_ENV, prestart.DEFAULT_PIN  # read there too, before numpy is imported
PIN_MODES = ("off", "node", "core")


@dataclass(frozen=True)
class Pinning:
    """Where the processes that measure the figures set per process run (run.json's ``processes.pinning``)."""

    mode: str  # off | node | core (core:N is core, its CPU chosen)
    cpus: tuple[int, ...] = ()  # empty: not pinned
    numa_node: int | None = None  # the GPU's NUMA node, where the host says
    note: str = ""  # why these CPUs, or why none

    def as_dict(self) -> dict[str, Any]:
        return {"mode": self.mode, "cpus": list(self.cpus), "numa_node": self.numa_node, "note": self.note}


NOT_PINNED = Pinning("off", note="not pinned")


def choose_pinning(pci_bus_id: str | None, mode: str | None = None, *, sysfs: Path | None = None,
                   allowed: set[int] | None = None) -> Pinning:
    """The CPUs ``mode`` (default: the GPUBENCH_PIN variable, else :data:`DEFAULT_PIN`) asks for, near the GPU at
    ``pci_bus_id``. A mode that cannot be met (no affinity on this OS, a CPU this process may not use) is a
    UsageError: a run that says it was pinned must have been."""
    from gpubench.machine import topology  # Linux's /sys; read only where a run pins

    mode = (mode if mode is not None else os.environ.get(PIN_ENV, DEFAULT_PIN)).strip() or DEFAULT_PIN
    kind, _, number = mode.partition(":")
    if kind not in PIN_MODES or (number and kind != "core") or (number and not number.isdigit()):
        raise UsageError(f"{PIN_ENV}={mode}: give off, node, core or core:N (a CPU number)")
    if kind == "off":
        return Pinning("off", note=f"{PIN_ENV}={mode}" if mode != DEFAULT_PIN else "not pinned")
    if not hasattr(os, "sched_setaffinity"):
        raise UsageError(f"{PIN_ENV}={mode}: this OS cannot pin a process to CPUs; set {PIN_ENV}=off")
    allowed = set(os.sched_getaffinity(0)) if allowed is None else allowed
    where = {} if sysfs is None else {"sysfs": sysfs}
    node = topology.pci_numa_node(pci_bus_id, **where)
    near = topology.node_cpus(node, **where) & allowed if node is not None else set()
    known = bool(near)
    near = near or allowed
    if number:
        cpu = int(number)
        if cpu not in allowed:
            raise UsageError(f"{PIN_ENV}={mode}: CPU {cpu} is not one this process may use ({_cpulist(allowed)})")
        return Pinning("core", (cpu,), node, f"CPU {cpu}, as asked" + ("" if cpu in near else ", off the GPU's node"))
    unknown = "the GPU's NUMA node is unknown here"
    if kind == "node":
        return Pinning("node", tuple(sorted(near)), node, f"the CPUs of NUMA node {node}, the GPU's" if known
                       else f"every CPU this run may use: {unknown}")
    # One core: the highest-numbered near CPU, away from CPU 0, which takes most of the host's interrupts.
    cpu = max(near)
    return Pinning("core", (cpu,), node, f"CPU {cpu}, of NUMA node {node}, the GPU's" if known else f"CPU {cpu}: {unknown}")


def _cpulist(cpus: set[int]) -> str:
    return ",".join(str(c) for c in sorted(cpus))


def pin_threads(pid: int, cpus: Sequence[int]) -> dict[int, set[int]]:
    """Every thread of process ``pid`` onto ``cpus`` (a thread started later inherits its creator's CPUs); the
    affinity each thread had, for :func:`unpin_threads`. Threads that end meanwhile are skipped."""
    before: dict[int, set[int]] = {}
    try:
        tids = [int(t) for t in os.listdir(f"/proc/{pid}/task")]
    except OSError:
        tids = [pid]
    for tid in tids:
        with contextlib.suppress(OSError):
            before[tid] = set(os.sched_getaffinity(tid))
            os.sched_setaffinity(tid, set(cpus))
    return before


def unpin_threads(before: dict[int, set[int]]) -> None:
    for tid, cpus in before.items():
        with contextlib.suppress(OSError):
            os.sched_setaffinity(tid, cpus)


# A process pinned to fewer CPUs than it has compute threads (torch's intra-op OpenMP pool, one per core) spins
# them against each other: on the fake backend (CPU tensors) both workers pinned to one core of the 2-core VM
# gave no answer in 180 s, stuck in a 64 KiB copy's warm-up, where with one compute thread they measured it
# (docs/measurements.md, Faults). So a pinned process computes on no more threads than it has CPUs: workers are started so
# (OMP_NUM_THREADS), the run's own process caps torch's pool while it is pinned.
def _threads_env(pinning: Pinning) -> dict[str, str] | None:
    if not pinning.cpus:
        return None
    asked = os.environ.get("OMP_NUM_THREADS", "")
    n = min(len(pinning.cpus), int(asked)) if asked.isdigit() and int(asked) > 0 else len(pinning.cpus)
    return {**os.environ, "OMP_NUM_THREADS": str(n)}


@contextlib.contextmanager
def pinned(pinning: Pinning, on: bool = True):
    """This process's threads on ``pinning``'s CPUs for the block (where it names any and ``on``), torch's compute
    threads no more than those CPUs, then both back."""
    if not (on and pinning.cpus):
        yield
        return
    torch = sys.modules.get("torch")  # loaded by the backend that measures; nothing to cap without it
    threads = torch.get_num_threads() if torch is not None else 0
    if threads > len(pinning.cpus):
        torch.set_num_threads(len(pinning.cpus))
    before = pin_threads(os.getpid(), pinning.cpus)
    try:
        yield
    finally:
        unpin_threads(before)
        if threads > len(pinning.cpus):
            torch.set_num_threads(threads)


__all__ = ["DEFAULT_PROCESSES", "Spec", "Workers", "WorkerError", "scaled",
           "Pinning", "NOT_PINNED", "choose_pinning", "pinned", "pin_threads", "unpin_threads", "PIN_ENV", "DEFAULT_PIN"]
