"""How the processes of one run share its work: a run's layout, chosen once from its request
(:func:`gpubench.run.session.layout_of`) and handed to the runner, which asks it at each point where layouts differ.

- :class:`Alone`: this process measures the plan on its device; the figures the host sets are measured again in
  fresh worker processes (gpubench.run.per_process).
- :class:`Ranks`: the ranks of a collective suite (comm) run the plan in step, the engine agreeing on every decision;
  rank 0 alone writes the run directory.
- :class:`Devices`: ``run --devices``: each rank measures its own device alone; the ranks go case by case in step,
  and rank 0 writes every rank's rows of a case once it is done everywhere.

A layout is public: a caller of the runner may pass its own (the check's stations measure host copies one GPU at a
time: gpubench.check.station.Turns), overriding these methods, each of which gets the runner (:class:`Runner`'s
public attributes: its plan, backend, group, base columns, sampler, config).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any, Protocol

from gpubench.errors import UsageError
from gpubench.machine import contention
from gpubench.ranks import describe, ending
from gpubench.ranks.group import Group
from gpubench.results.rundir import RunDir, Unwritten
from gpubench.run import per_process as proc
from gpubench.run.interrupt import StopFlag
from gpubench.backends.base import Backend
from gpubench.run.plan import Plan
from gpubench.run.request import RunRequest
from gpubench.suite import Case, Suite
from gpubench.timing.engine import EngineConfig

_WHO = ("host", "device_index", "device", "gpu_uuid", "pci_bus_id")


class Runner(Protocol):
    """What a layout reads of the run it serves (gpubench.run.runner.Runner)."""

    plan: Plan
    backend: Backend
    request: RunRequest
    pinning: proc.Pinning
    per_process: dict[str, list[str]]
    fingerprint: dict[str, Any]

    def run_case(self, suite: Suite, case: Case, cfg: EngineConfig, *, group: Group | None = None,
                 tick: Callable[[], None] | None = None,
                 interrupted: Callable[[], bool] | None = None) -> list[dict[str, Any]]: ...


class Alone:
    """This process measures the plan on its device."""

    name = "alone"
    abandon = True  # a Ctrl-C abandons the case in progress at any batch (else: after the case)

    def __init__(self, group: Group | None = None):
        self.group = group

    def per_process(self, run: Runner) -> dict[str, list[str]]:
        """The cases measured in several processes: on a device (the CPU backend's own figures are measured in this
        one), by a run of more than one process."""
        if run.request.how.processes <= 1 or not run.backend.is_gpu:
            return {}
        cases = {s.name: [c.id for c in run.plan.cases[s.name] if s.per_process(c)] for s in run.plan.suites}
        return {k: v for k, v in cases.items() if v}

    def processes_asked(self, run: Runner) -> int:
        return run.request.how.processes

    def join(self, run: Runner, meta: dict[str, Any], base: dict[str, Any]) -> None:
        """What the run's record says of the other processes (none here)."""

    def run_dir(self, run: Runner, meta: dict[str, Any]) -> RunDir | Unwritten:
        rd = RunDir.create(run.request.how.out, run.request.how.cluster, meta)
        ending.follow(run_dir=rd.path)  # a SIGTERM closes it (interrupted) with what it kept
        return rd

    def run_id(self, rd: RunDir | Unwritten) -> str | None:
        return rd.run_id

    def own_pids(self) -> set[int]:
        """Processes of this run's that are no co-tenant of its figures."""
        return set()

    def step(self, stop: StopFlag, label: str) -> None:
        """Before each case: nothing to agree on alone."""

    def measure(self, run: Runner, suite: Suite, case: Case, cfg: EngineConfig,
                interrupted: Callable[[], bool] | None) -> list[dict[str, Any]]:
        """This process's rows of one case. A case set per process is measured where every process measures it
        (gpubench.run.per_process: pinning)."""
        with proc.pinned(run.pinning, case.id in run.per_process.get(suite.name, ())):
            return run.run_case(suite, case, cfg, group=self.group, interrupted=interrupted)

    def share(self, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """The rows the run directory gets for ``rows`` of this process."""
        return rows

    def seen(self, contended: str | None) -> str | None:
        """Who else used the device during a case, as the rows say it: what this process's watch saw."""
        return contended


class _Together(Alone):
    """What every layout of several ranks shares: rank 0 writes, every rank knows where, and they agree to stop."""

    group: Group

    def per_process(self, run: Runner) -> dict[str, list[str]]:
        return {}  # a run of several ranks measures in its own processes

    def processes_asked(self, run: Runner) -> int:
        return 1

    def run_dir(self, run: Runner, meta: dict[str, Any]) -> RunDir | Unwritten:
        writer = self.group.rank == 0
        rd = super().run_dir(run, meta) if writer else Unwritten()
        # Every rank knows where the run is: any of them closes it where rank 0 is gone (stopped, killed).
        path = self.group.gather_objects(str(rd.path) if writer else None)[0]
        self.group.publish_run_dir(path)
        if not writer:
            rd.closes = path
        return rd

    def own_pids(self) -> set[int]:
        # Other ranks' processes may hold contexts on this device (peer access): they are ours, not a co-tenant.
        return set(self.group.gather_objects(os.getpid()))

    def step(self, stop: StopFlag, label: str) -> None:
        # A Ctrl-C seen by any rank stops them all after the same case (``asked``: one that came during this
        # agreement is not lost to its answer).
        self.group.step(label)
        stop.set = self.group.any(stop.asked)


class Ranks(_Together):
    """The ranks of a collective suite run the plan in step, the engine agreeing on every decision."""

    name = "ranks"
    abandon = False  # the ranks of a collective, which must call it together, finish the case, then stop

    def join(self, run: Runner, meta: dict[str, Any], base: dict[str, Any]) -> None:
        meta["dist"] = describe.run_meta(self.group, run.backend)

    def seen(self, contended: str | None) -> str | None:
        # Each rank watches its own device, and another process on any of them slows the collective: the row, which
        # rank 0 writes, names everyone's.
        return contention.union(self.group.gather_objects(contended))


class Devices(_Together):
    """``run --devices``: each rank measures its own device alone, the ranks case by case in step."""

    name = "devices"

    def join(self, run: Runner, meta: dict[str, Any], base: dict[str, Any]) -> None:
        _same_plan(run, self.group)
        meta["fleet"] = self.group.gather_objects({"rank": self.group.rank, "pid": os.getpid(),
                                                   **{k: base[k] for k in _WHO},
                                                   "fingerprint": run.fingerprint.get("fingerprint")})

    def run_id(self, rd: RunDir | Unwritten) -> str | None:
        return self.group.gather_objects(rd.run_id)[0]

    def measure(self, run: Runner, suite: Suite, case: Case, cfg: EngineConfig,
                interrupted: Callable[[], bool] | None) -> list[dict[str, Any]]:
        # Each device measures alone: the group only ticks.
        return run.run_case(suite, case, cfg, tick=self.group.step, interrupted=interrupted)

    def share(self, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Every rank's rows for one case, in rank order (rank 0 writes them; the others keep an empty list)."""
        gathered = self.group.gather_objects(rows)
        return [r for part in gathered for r in part] if self.group.rank == 0 else []


def _same_plan(run: Runner, group: Group) -> None:
    """The ranks of a fleet go case by case together: they must lay out the same cases (GPUs of different sizes may
    not), or say so on every rank before anything is written."""
    p = run.plan
    mine = [(s.name, [s.fleet_key(c, p.contexts[s.name]) for c in p.cases[s.name]]) for s in p.suites]
    plans = group.gather_objects(mine)
    for rank, theirs in enumerate(plans):
        if theirs != plans[0]:
            raise UsageError(f"rank {rank}'s device lays out other cases than rank 0's (different GPU models?): "
                             "run each kind of GPU in its own --devices run")


LAYOUTS: dict[str, Any] = {"alone": Alone, "ranks": Ranks, "devices": Devices}

__all__ = ["Alone", "Ranks", "Devices", "LAYOUTS"]
