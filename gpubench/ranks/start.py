"""How `gpubench run --suite comm` gets its ranks: join the launcher's (torchrun, srun, mpirun), or start them."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from gpubench.ranks.env import RankEnv
from gpubench.errors import UsageError


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


def spawn(args: Any, argv: list[str], check: Callable[[Any, int], None], cluster: str) -> int:
    """Check the grid as the ranks will lay it out (``check(device, world_size)``: the caller plans it on a
    stand-in device), then run one process per rank on this machine."""
    from gpubench.backends import backend_class, resolve_name
    from gpubench.ranks import spawn as spawner
    from gpubench.rundir import ensure_writable

    name = resolve_name(args.backend)
    ok, why = backend_class(name).available()
    if not ok:
        raise UsageError(f"backend {name!r} is not available: {why}")
    nproc = args.nproc or spawner.default_nproc(name)
    if name in ("cuda", "hip"):
        have = spawner.default_nproc(name)
        if nproc > have:
            raise UsageError(f"--nproc {nproc} needs {nproc} GPUs, this machine has {have}: one rank per GPU "
                             "(use a launcher across nodes)")
    check(_GridOnly(name, nproc), nproc)
    ensure_writable(args.out, cluster)
    return spawner.run(list(argv[1:]), nproc, args.timeout)


def join(args: Any, renv: RankEnv):
    """This process is one rank: its device (the local rank's GPU) and the group of all ranks."""
    from gpubench.backends import open_backend, resolve_name
    from gpubench.ranks.group import Group

    from gpubench.ranks.env import share_host_cores

    name = resolve_name(args.backend)
    gpu = name in ("cuda", "hip")
    share_host_cores(name, renv.local_world_size)
    backend = open_backend(name, renv.local_rank if gpu else 0)  # each rank its own GPU; --device is not used
    group = Group(renv, "nccl" if gpu else "gloo", args.timeout, device=backend.torch_device if gpu else None)
    return backend, group
