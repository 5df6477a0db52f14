"""How `gpubench run --suite comm` gets its ranks: join the launcher's (torchrun, srun, mpirun), or start them."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from gpubench.backends import backend_class, open_backend, resolve_name
from gpubench.backends.base import Backend
from gpubench.errors import UsageError
from gpubench.ranks import apart
from gpubench.ranks import spawn as spawner
from gpubench.ranks.env import RankEnv, share_host_cores
from gpubench.ranks.group import Group
from gpubench.run.request import Placement, RunRequest
from gpubench.results.rundir import ensure_writable


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


def spawn(request: RunRequest, check: Callable[[Any, int], None]) -> int:
    """Check the grid as the ranks will lay it out (``check(device, world_size)``: the caller plans it on a
    stand-in device), then run one process per rank on this machine, each given the command line again."""
    name = resolve_name(request.where.backend)
    ok, why = backend_class(name).available()
    if not ok:
        raise UsageError(f"backend {name!r} is not available: {why}")
    nproc = request.where.nproc or spawner.default_nproc(name)
    if name in ("cuda", "hip"):
        have = spawner.default_nproc(name)
        if nproc > have:
            raise UsageError(f"--nproc {nproc} needs {nproc} GPUs, this machine has {have}: one rank per GPU "
                             "(use a launcher across nodes)")
    check(_GridOnly(name, nproc), nproc)
    ensure_writable(request.how.out, request.how.cluster)
    return spawner.run(list(request.argv[1:]), nproc, request.where.timeout)


def join(where: Placement, renv: RankEnv) -> tuple[Backend, Group, str | None]:
    """This process is one rank: its device (the local rank's GPU), the group of all ranks, and the line that says
    where ranks share a device (the host's, under gloo)."""
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
