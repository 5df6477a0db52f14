"""How a run gets the processes that measure it, decided once, from its request (:func:`layout_of`): this process
alone; the ranks of a collective suite (comm), one per GPU; or each device of ``--devices`` in a rank of its own.
Ranks are joined where a launcher started them (torchrun, srun, mpirun: gpubench.ranks.env), else started here by
gpubench's own spawner (gpubench.run.spawn), which gives each the request again; either way the grid is checked
before any process starts, so bad input fails once.

:func:`open_run` returns the :class:`Session` this process measures in (its device, its group, its layout and plan),
or, where it only started the ranks, their exit code.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from gpubench.backends import backend_class, open_backend, resolve_name
from gpubench.backends.base import Backend
from gpubench.errors import UsageError
from gpubench.ranks import apart, ending
from gpubench.run import spawn as spawner
from gpubench.ranks.env import RankEnv, detect, share_host_cores
from gpubench.ranks.group import Group
from gpubench.results.rundir import ensure_writable
from gpubench.run.layouts import LAYOUTS, Alone
from gpubench.run.plan import Plan, plan_for
from gpubench.run.request import RunRequest
from gpubench.run.devices import check_devices, devices_of, plan_probe

ALONE, RANKS, DEVICES = "alone", "ranks", "devices"


def layout_of(request: RunRequest) -> str:
    """The kind of run ``request`` asks for: the one place it is decided."""
    suites = request.what.suites
    if request.where.fleet:
        return DEVICES
    if any(s.multiprocess for s in suites):
        if len(suites) > 1:
            raise UsageError(f"{', '.join(s.name for s in suites if s.multiprocess)} runs one process per rank: "
                             "run it on its own (--suite comm), the other suites in a second command")
        return RANKS
    return ALONE


@dataclass
class Session:
    """What this process measures with: its device, its group (None alone), its layout and the plan."""

    request: RunRequest
    backend: Backend
    layout: Alone
    plan: Plan
    group: Group | None = None

    @property
    def root(self) -> bool:
        """Whether this process writes the run (alone, or rank 0)."""
        return self.group is None or self.group.rank == 0


def open_run(request: RunRequest) -> Session | int:
    """This process's session of the run, or the ranks' exit code where it started them and measured nothing."""
    kind = layout_of(request)
    if kind == ALONE:
        ending.install()  # SIGTERM and SIGHUP (a launcher's time limit or cancel) close the run: interrupted
        backend = open_backend(request.where.backend, request.where.device)
        if request.where.backend == "auto":  # say what auto chose before anything is measured on it
            print(f"backend: {backend.name}, device {backend.device_index} ({backend.device_name()}) "
                  "(--backend auto)", file=sys.stderr, flush=True)
        session = Session(request, backend, Alone(), plan_for(request, backend))
    else:
        renv = detect()
        if renv is None:  # nobody started the ranks: check the grid here, then start them
            return _spawn(request, kind)
        ending.install()
        backend, group, shared = (_join_ranks if kind == RANKS else _join_devices)(request, renv)
        p = plan_for(request, backend, group=group if kind == RANKS else None)
        if shared:  # ranks that share a device where they may (gloo's on the host): said before the first case
            p.notes.append(shared)
        session = Session(request, backend, LAYOUTS[kind](group), p, group)
    if session.root:
        ensure_writable(request.how.out, request.how.cluster)
    return session


@contextmanager
def measuring(session: Session) -> Iterator[Session]:
    """The session, its group left at the end."""
    try:
        yield session
    finally:
        if session.group is not None:
            session.group.close()


class _GridOnly:
    """Enough of a backend to lay out the grid in the parent without touching a GPU (the ranks will)."""

    device_index = 0

    def __init__(self, name: str, count: int):
        self.name = name
        self._count = count

    def cache_bytes(self) -> int:
        return 0

    def memory_bytes(self) -> int:
        return 0

    def device_count(self) -> int:
        return self._count


def _spawn(request: RunRequest, kind: str) -> int:
    """Check the grid as the ranks will lay it out, then run one process per rank on this machine, each given the
    request."""
    name = resolve_name(request.where.backend)
    if kind == DEVICES:
        name, devices = check_devices(request.where, request.what.suites)
        probe: Any = plan_probe(name, devices[0])
        world, nproc = 1, len(devices)
    else:
        ok, why = backend_class(name).available()
        if not ok:
            raise UsageError(f"backend {name!r} is not available: {why}")
        nproc = request.where.nproc or spawner.default_nproc(name)
        if name in ("cuda", "hip") and nproc > spawner.default_nproc(name):
            raise UsageError(f"--nproc {nproc} needs {nproc} GPUs, this machine has "
                             f"{spawner.default_nproc(name)}: one rank per GPU (use a launcher across nodes)")
        probe, world = _GridOnly(name, nproc), nproc
    plan_for(request, probe, world_size=world)  # bad input fails here, once, before any process starts
    ensure_writable(request.how.out, request.how.cluster)
    return spawner.run(request, nproc)


def _join_ranks(request: RunRequest, renv: RankEnv) -> tuple[Backend, Group, str | None]:
    """This process is one rank: its device (the local rank's GPU), the group of all ranks, and the line that says
    where ranks share a device (the host's, under gloo)."""
    where = request.where
    name = resolve_name(where.backend)
    gpu = name in ("cuda", "hip")
    count = backend_class(name).device_count() if gpu else 1
    if gpu and 1 < count < renv.local_world_size:
        raise UsageError(f"{renv.local_world_size} ranks on this node for its {count} GPUs: NCCL/RCCL takes one GPU "
                         f"per rank: start {count} per node ({apart.per_node(count)})")
    share_host_cores(name, renv.local_world_size)
    # Each rank its own GPU (--device is not used). A GPU seen alone by several ranks is one bound to each by the
    # launcher, or one for them all: the ranks compare theirs before NCCL, which would refuse a shared one with a
    # traceback, starts its communicator (at its first collective, not in the group's start).
    backend = open_backend(name, renv.local_rank if gpu and count > 1 else 0)
    eager = gpu and count >= renv.local_world_size
    group = Group(renv, "nccl" if gpu else "gloo", where.timeout, device=backend.torch_device if eager else None)
    shared = apart.one_each(group, backend, alone=gpu, why="NCCL/RCCL takes one GPU per rank")
    return backend, group, shared


def _join_devices(request: RunRequest, renv: RankEnv) -> tuple[Backend, Group, str | None]:
    """This process is one rank of a ``--devices`` run: its device and the group of all ranks."""
    where = request.where
    name, devices = devices_of(where, request.what.suites, renv)
    share_host_cores(name, renv.local_world_size)
    backend = open_backend(name, devices[renv.local_rank])
    group = Group(renv, "gloo", where.timeout)  # the control plane only: the ranks exchange rows
    apart.one_each(group, backend, alone=True, why=f"--devices measures each device on its own, under "
                                                    f"{renv.launcher} one process per device")
    return backend, group, None


__all__ = ["ALONE", "RANKS", "DEVICES", "layout_of", "Session", "open_run", "measuring"]
