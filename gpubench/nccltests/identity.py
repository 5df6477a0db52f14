"""A fingerprint (the shape of :func:`gpubench.fingerprint.collect`'s) built from what logs say of a system.

A log tells the GPU model, the ranks and their hosts, the tool and the NCCL/RCCL version; the rest of the
identity (CPU, OS, driver, torch) is unknown and left None, so that compare's cross-cluster logic sees two
imported systems apart by what is known. ``gpu_count`` is the GPUs of one node as the log shows them (the most
ranks on one host), the count a measured run records; a node whose other GPUs the log did not use looks
smaller than it is.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

from gpubench.fingerprint import identity_hash
from gpubench.nccltests.model import Run


def _one(values: Sequence[str]) -> str | None:
    values = sorted({v for v in values if v})
    return " + ".join(values) if values else None


def _per_node(run: Run) -> int:
    """The most ranks any one host of the run held (what a node of the system has, as far as the log shows)."""
    hosts = Counter(d.host for d in run.devices)
    return max(hosts.values(), default=0)


def fingerprint(runs: Sequence[Run], cluster: str) -> dict[str, Any]:
    rccl = any(r.tool == "rccl-tests" for r in runs)
    first = min(runs[0].devices, key=lambda d: d.rank) if runs and runs[0].devices else None
    identity = {
        "source": "import",
        "backend": "hip" if rccl else "cuda",
        "gpu_model": _one([d.name for r in runs for d in r.devices]),
        # GPUs of one node, as a measured run's gpu_count counts them (compare's system key); the ranks are below.
        "gpu_count": max((_per_node(r) for r in runs), default=0),
        "world_size": max((r.world_size or 0 for r in runs), default=0),
        "runtime": "hip" if rccl else "cuda",
        "runtime_version": _one([r.config.get("hip_version") for r in runs]),
        "memory_bytes": None,
        "cluster": cluster,
        "hostname": first.host if first else None,
        "hostnames": sorted({d.host for r in runs for d in r.devices}),
        "nnodes": max((r.nnodes or 0 for r in runs), default=0),
        "cpu_model": None,
        "cpu_count": None,
        "os": None,
        "python": None,
        "torch": None,
        "nccl": _one([r.nccl_version for r in runs]),
        "collective_lib": "rccl" if rccl else "nccl",
        "driver_version": None,
        "tool": _one([r.tool for r in runs]),
        "tool_version": _one([r.version for r in runs]),
    }
    env: dict[str, str] = {}
    for r in runs:
        env.update(r.config.get("env") or {})
    volatile = {"telemetry_source": "none", "env": env, "imported": True}
    return {"identity": identity, "volatile": volatile, "fingerprint": identity_hash(identity)}
