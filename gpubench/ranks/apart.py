"""One device per rank: the ranks of a run say which device each holds, and two of one machine on one device are
refused before anything is measured where the device cannot be shared, or said in one line where it can.

A launcher starts as many ranks per node as it is told, whatever the node holds: ``torchrun --nproc-per-node 2`` on a
node of one GPU, or ``--devices all`` under a launcher on the CPU backend, had both ranks measure the same device at
once, and the run listed it twice. Refused (exit 2, one line on every rank, naming what to set):

- a GPU under NCCL/RCCL, which allows one rank per GPU (it refuses a shared one itself, with a traceback);
- any device of a ``--devices`` run, whose point is each device measured on its own.

Said in one line (the run's notes): gloo's ranks on the host (the cpu and fake backends), which share its cores.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from gpubench.backends.base import Backend
from gpubench.errors import UsageError
from gpubench.machine.procfs import machine

if TYPE_CHECKING:
    from gpubench.ranks.rank_group import RankGroup


def per_node(n: int) -> str:
    """How each launcher is told to start ``n`` processes per node."""
    return f"srun --ntasks-per-node={n}, torchrun --nproc-per-node={n}, mpirun --npernode {n}"


def _node() -> str:
    # The machine (boot id, pid namespace); with the node SLURM names, so that the nodes the stand-in srun of the
    # tests simulates on one machine are nodes of their own (on a real allocation they are other machines anyway).
    return f"{machine()}/{os.environ.get('SLURMD_NODENAME', '')}"


def _ranks(ranks: list[int]) -> str:
    if len(ranks) == 2:
        return f"ranks {ranks[0]} and {ranks[1]}"
    if ranks == list(range(ranks[0], ranks[-1] + 1)):
        return f"ranks {ranks[0]}-{ranks[-1]}"
    return "ranks " + ", ".join(map(str, ranks[:-1])) + f" and {ranks[-1]}"


def one_each(group: RankGroup, backend: Backend, *, alone: bool, why: str) -> str | None:
    """Every rank's device, gathered (every rank calls this, before anything is measured). Where two ranks of one
    machine hold one device: ``alone`` (the device cannot be shared; ``why``: what says so), a UsageError on every rank
    naming what to set; else the line that says they share it. None where each has its own (or none can tell)."""
    me = {"node": _node(), "key": backend.device_key(), "host": os.uname().nodename, "cpus": os.cpu_count() or 1}
    everyone = group.gather_objects(me)
    held: dict[tuple[str, str], list[int]] = {}
    for rank, r in enumerate(everyone):
        if r["key"] is not None:
            held.setdefault((r["node"], r["key"]), []).append(rank)
    shared = [ranks for ranks in held.values() if len(ranks) > 1]
    if not shared:
        return None
    ranks = shared[0]
    first = everyone[ranks[0]]
    where = f"{first['key']} of {first['host']}"
    if not alone:
        cpus = int(first["cpus"])
        return (f"{_ranks(ranks)} share {where} (gloo's ranks may): each computes on {max(1, cpus // len(ranks))} of "
                f"its {cpus} CPU cores")
    devices = len({key for node, key in held if node == first["node"]})
    procs = sum(len(r) for (node, _), r in held.items() if node == first["node"])
    own = ", or give each task a GPU of its own (srun --gpus-per-task=1)" if backend.is_gpu else ""
    raise UsageError(f"{_ranks(ranks)} {'both' if len(ranks) == 2 else 'all'} measure {where}: {why}; this node has "
                     f"{devices} device{'s' if devices > 1 else ''} for its {procs} processes: start {devices} per "
                     f"node ({per_node(devices)}){own}")


__all__ = ["one_each", "per_node"]
