"""The check's side of its stations (:mod:`gpubench.check.station`): start one per GPU, hand them jobs, read their
answers, form their groups.

A station is a world of its own: its environment is built through :func:`gpubench.ranks.env.standalone`, so that
a check started under srun does not make it a rank of the step that started the check, and it runs in a session of
its own, so that a Ctrl-C reaches the check alone, which ends its stations. Every wait is bounded: a station that
ends, fails a job or says nothing for the allowed time raises :class:`StationError` naming its GPU and why.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import tempfile
import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from gpubench.child import Child, Gone, command
from gpubench.ranks.env import standalone

READY_TIMEOUT_S = 300.0  # start-up: Python, torch, a device context (seconds on a cold file cache)
GROUP_TIMEOUT_S = 300.0  # a group's rendezvous and its library's communicator
RUN_TIMEOUT_S = 900.0  # one measurement of every figure a job asks
WATCHDOG_S = 120.0  # a group's ranks end when none of them moved for this long (gpubench.ranks.group)
_POLL_S = 0.05


class StationError(Exception):
    """A station ended, failed a job or fell silent; ``usage``: the job's input was at fault (exit 2)."""

    def __init__(self, why: str, usage: bool = False):
        super().__init__(why)
        self.why, self.usage = why, usage


class Station:
    """One measuring process on one GPU, as the check sees it: its answers are JSON lines."""

    def __init__(self, backend: str, gpu: int, stations: int, env: dict[str, str] | None = None):
        self.gpu = gpu
        self.info: dict[str, Any] = {}  # its "ready" answer: the GPU's identity, the binding, the pid
        self.child = Child(command("gpubench.check.station", backend, str(gpu), str(stations)),
                           env={**standalone(os.environ), **(env or {})}, pipes=True, session=True)
        self.proc = self.child.proc

    def send(self, **job: Any) -> None:
        try:
            self.child.send(json.dumps(job))
        except Gone:
            raise StationError(self.gone()) from None

    def gone(self) -> str:
        return f"the measuring process on GPU {self.gpu} (pid {self.child.pid}) {self.child.ended()}"

    def poll(self, timeout: float) -> dict[str, Any] | None:
        """Its next answer within ``timeout`` (None if none came); a failure or its end raises."""
        end = time.monotonic() + timeout
        while True:
            try:
                line = self.child.line(max(0.0, end - time.monotonic()))
            except Gone:
                raise StationError(self.gone()) from None
            if line is None:
                return None
            try:
                event = json.loads(line)
            except ValueError:
                continue  # not the protocol's: a library's print that reached its standard output
            if not isinstance(event, dict):
                continue
            if event.get("event") == "failed":
                raise StationError(f"GPU {self.gpu}: {event.get('why') or 'failed'}", bool(event.get("usage")))
            return event

    @property
    def alive(self) -> bool:
        return self.child.alive

    def hang_up(self) -> None:
        """End of input: it leaves once its job is done."""
        self.child.hang_up()

    def close(self, grace_s: float = 5.0) -> None:
        """End it: end of input first (it leaves between jobs), then SIGTERM, then SIGKILL."""
        self.child.reap(grace_s)


def wait_all(stations: Sequence[Station], event: str, timeout: float) -> dict[int, dict[str, Any]]:
    """Each station's next ``event`` answer (by GPU), within ``timeout`` for them all; the first failure raises."""
    got: dict[int, dict[str, Any]] = {}
    end = time.monotonic() + timeout
    while len(got) < len(stations):
        for s in stations:
            if s.gpu in got:
                continue
            answer = s.poll(_POLL_S)
            if answer is not None and answer.get("event") == event:
                got[s.gpu] = answer
        if len(got) < len(stations) and time.monotonic() > end:
            late = ", ".join(str(s.gpu) for s in stations if s.gpu not in got)
            raise StationError(f"GPU {late}: no {event!r} within {timeout:.0f} s")
    return got


class Pool:
    """The check's stations, one per GPU: started at once; one that was ended (a job failed where it took part)
    is started again when next asked for."""

    def __init__(self, backend: str, gpus: Iterable[int], env: dict[str, str] | None = None):
        self.backend, self.env = backend, env
        self.gpus = list(gpus)
        self.folder = tempfile.mkdtemp(prefix="gpubench-check-")  # its groups' stores (:func:`form`)
        self.stations: dict[int, Station] = {g: Station(backend, g, len(self.gpus), env) for g in self.gpus}
        self.ready: dict[int, dict[str, Any]] = {}
        self.failed: dict[int, StationError] = {}

    def start(self) -> dict[int, dict[str, Any]]:
        """Every station's ``ready`` answer (identity, binding), waited for together; a station that could not
        start is kept in ``failed`` (a refusal of the input raises at once)."""
        for g, s in self.stations.items():
            try:
                self.ready[g] = wait_all([s], "ready", READY_TIMEOUT_S)[g]
            except StationError as e:
                if e.usage:
                    raise
                self.failed[g] = e
                s.close(0)
        return self.ready

    def get(self, gpus: Sequence[int]) -> list[Station]:
        """The live stations of ``gpus``; one that ended is started again (its start-up paid once more), one that
        never started raises why."""
        out = []
        for g in gpus:
            if g in self.failed:
                raise self.failed[g]
            s = self.stations[g]
            if not s.alive:
                s = self.stations[g] = Station(self.backend, g, len(self.gpus), self.env)
                self.ready[g] = wait_all([s], "ready", READY_TIMEOUT_S)[g]
            out.append(s)
        return out

    def pids(self) -> list[int]:
        """Every started station's process: the check's own, wherever on the node they hold a context."""
        return sorted({int(r["pid"]) for r in self.ready.values() if r.get("pid")})

    def discard(self, stations: Iterable[Station]) -> None:
        """End these stations (a job they shared failed: they may be waiting inside a collective)."""
        for s in stations:
            s.close(0)

    def hang_up(self) -> None:
        """End of input to every station: each leaves once its job is done (:meth:`close` waits for them)."""
        for s in self.stations.values():
            s.hang_up()

    def close(self) -> None:
        """End every station: all told at once (end of input), then each waited for; their stores' folder goes."""
        self.hang_up()
        for s in self.stations.values():
            s.close()
        shutil.rmtree(self.folder, ignore_errors=True)

    def __enter__(self) -> Pool:
        return self

    def __exit__(self, kind: type[BaseException] | None, *exc: Any) -> bool:
        if kind is not None and issubclass(kind, KeyboardInterrupt):
            self.interrupt()
        self.close()
        return False

    def interrupt(self) -> None:
        """A Ctrl-C: each station stops its case (its run directory says interrupted, as a run's does) and ends."""
        for s in self.stations.values():
            if s.alive:
                try:
                    s.proc.send_signal(signal.SIGINT)
                except OSError:
                    pass
            s.hang_up()


def form(groups: Sequence[Sequence[Station]], folder: str, watchdog_s: float = WATCHDOG_S) -> None:
    """Each list of stations joins a group of its own (all groups at once), whose store is a new file in ``folder``
    (the pool's: :attr:`Pool.folder`)."""
    for members in groups:
        store = tempfile.mkstemp(prefix="group-", dir=folder)[1]  # a name no earlier group used
        for rank, s in enumerate(members):
            s.send(do="group", rank=rank, world=len(members), store=store, timeout=watchdog_s)
    wait_all([s for members in groups for s in members], "grouped", GROUP_TIMEOUT_S)


def leave(groups: Sequence[Sequence[Station]]) -> None:
    everyone = [s for members in groups for s in members]
    for s in everyone:
        s.send(do="ungroup")
    wait_all(everyone, "ungrouped", GROUP_TIMEOUT_S)


def run(groups: Sequence[Sequence[Station]], job: Callable[[int, int], dict[str, Any]]) -> list[dict[str, Any]]:
    """The job ``job(k, gpu)`` gives the station of ``gpu`` in the k-th group, on every station of every group at
    once; each group's first station's ``done`` answer (it holds the run directory)."""
    for k, members in enumerate(groups):
        for s in members:
            s.send(do="run", **job(k, s.gpu))
    done = wait_all([s for members in groups for s in members], "done", RUN_TIMEOUT_S)
    return [done[members[0].gpu] for members in groups]


__all__ = ["Station", "Pool", "StationError", "wait_all", "form", "leave", "run", "READY_TIMEOUT_S",
           "RUN_TIMEOUT_S", "WATCHDOG_S"]
