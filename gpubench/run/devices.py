"""`gpubench run --devices all|LIST`: single-GPU suites on many GPUs at once, into one run directory.

One process per GPU, as for comm: gpubench starts them on one machine, or joins the ranks torchrun, srun or
mpirun started (one per GPU on every node). Each rank measures its own GPU on its own (no agreement on
timing: the GPUs are independent), and the ranks go case by case in step, so that every GPU runs the same
case at the same time (the load a training job puts on a box) and a case's rows from every GPU reach rank 0
together, which writes them. The heartbeat and watchdog of :mod:`gpubench.ranks.group` still end a rank that
stalls, naming it.

Running at once means the GPUs share what a box shares: host links, CPU, power. Copy figures measured this
way are per-GPU figures under that load; run ``--device N`` one at a time for each GPU alone.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from gpubench.backends import backend_class, open_backend, resolve_name
from gpubench.errors import UsageError
from gpubench.ranks import apart
from gpubench.ranks.env import RankEnv
from gpubench.run.request import Placement
from gpubench.suite import Suite


def parse_devices(text: str, count: int) -> list[int]:
    """``all`` or a comma-separated list of device indices, each existing and named once."""
    if text.strip() == "all":
        if count < 1:
            raise UsageError("--devices all: this backend sees no device")
        return list(range(count))
    try:
        devices = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise UsageError(f"bad --devices {text!r}: use 'all' or device indices like 0,1,3") from None
    if not devices:
        raise UsageError(f"bad --devices {text!r}: use 'all' or device indices like 0,1,3")
    bad = [d for d in devices if d < 0 or d >= count]
    if bad:
        raise UsageError(f"--devices {text}: no device {bad[0]} (this backend has {count}, indices 0..{count - 1})")
    if len(set(devices)) != len(devices):
        raise UsageError(f"--devices {text} names a device twice: one process per device")
    return devices


class _PlanProbe:
    """What the grid needs of a device, read without creating a GPU context in the parent process (the ranks
    create theirs)."""

    def __init__(self, name: str, index: int, count: int):
        import torch  # only where the backend is a GPU's: torch is heavy, and optional for the fake backend

        props = torch.cuda.get_device_properties(index)
        self.name, self.device_index, self._count = name, index, count
        self._cache = int(getattr(props, "L2_cache_size", 0)) or (50 << 20)
        self._memory = int(props.total_memory)

    def cache_bytes(self) -> int:
        return self._cache

    def memory_bytes(self) -> int:
        return self._memory

    def device_count(self) -> int:
        return self._count


def check_devices(where: Placement, suites: Sequence[Suite]) -> tuple[str, list[int]]:
    """The backend's name and the devices ``--devices`` names, checked."""
    if any(s.multiprocess for s in suites):
        raise UsageError("--devices runs single-GPU suites on each GPU; comm spreads over the GPUs itself "
                         "(use --nproc)")
    name = resolve_name(where.backend)
    cls = backend_class(name)
    ok, why = cls.available()
    if not ok:
        raise UsageError(f"backend {name!r} is not available: {why}")
    return name, parse_devices(where.devices or "", cls.device_count())


def plan_probe(name: str, index: int) -> Any:
    """Device ``index`` as far as a plan needs it: without a GPU context in the parent (the ranks make theirs)."""
    count = backend_class(name).device_count()
    return _PlanProbe(name, index, count) if name in ("cuda", "hip") else open_backend(name, index)


def devices_of(where: Placement, suites: Sequence[Suite], renv: RankEnv) -> tuple[str, list[int]]:
    """Under a launcher: the devices of this node, one per local rank, checked against the processes it started."""
    name, devices = check_devices(where, suites)
    every = (where.devices or "").strip() == "all"
    if every and len(devices) == 1 < renv.local_world_size:
        devices = devices * renv.local_world_size  # one GPU bound to each task, or one for all (one_each tells)
    elif every and renv.local_world_size < len(devices):
        raise UsageError(f"--devices all under {renv.launcher}: {renv.local_world_size} process(es) on this node "
                         f"for its {len(devices)} GPUs would leave {len(devices) - renv.local_world_size} unmeasured: "
                         f"start one per GPU ({apart.per_node(len(devices))}), or run it without a launcher on each "
                         "node")
    if not every and renv.local_world_size != len(devices):
        raise UsageError(f"--devices {where.devices} lists {len(devices)} devices but the launcher started "
                         f"{renv.local_world_size} processes on this node: start one per listed device")
    if renv.local_rank >= len(devices):
        raise UsageError(f"local rank {renv.local_rank} has no device: this node has {len(devices)} "
                         "(start one process per device)")
    return name, devices


__all__ = ["parse_devices", "check_devices", "plan_probe", "devices_of"]
