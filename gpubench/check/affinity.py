"""Where ``gpubench check``'s measuring process for a GPU runs: on the CPUs near that GPU, and what it was bound to.

A copy to or from host memory runs at full speed from memory on the GPU's own NUMA node, and the host's share of
every figure it sets (the driver's calls, a host-timed launch) is paid on whichever CPU the thread runs: nvbandwidth
sets its process's CPU affinity through NVML (``nvmlDeviceSetCpuAffinity``) before it allocates pinned memory, and
DCGM groups GPUs by memory affinity. A station (:mod:`gpubench.check.station`) binds every thread of its process to
its GPU's CPUs before it measures anything; the threads it starts later inherit the set.

The GPU's CPUs: the kernel's list for its PCI device (sysfs ``local_cpulist``), else NVML's
``nvmlDeviceGetCpuAffinity``; of those, the ones this process may use (a cgroup's, or Slurm's ``--cpu-bind``). Not
bound, with the reason, where that is every CPU the process may use anyway (one NUMA node: most VMs), where it is
none of them, or where neither source says. The binding is recorded in check.json and in each run's run.json.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from gpubench.machine.telemetry import normalize_pci_bus_id
from gpubench.machine.topology import SYSFS, parse_cpulist, pci_numa_node, with_nvml

PROC_SELF = Path("/proc/self")


def cpulist(cpus: set[int] | list[int]) -> str:
    """{0,1,2,3,8,10,11} → ``0-3,8,10-11`` (the kernel's cpulist format)."""
    out, run = [], []
    for c in sorted(set(cpus)):
        if run and c == run[-1] + 1:
            run.append(c)
            continue
        if run:
            out.append(f"{run[0]}-{run[-1]}" if len(run) > 1 else str(run[0]))
        run = [c]
    if run:
        out.append(f"{run[0]}-{run[-1]}" if len(run) > 1 else str(run[0]))
    return ",".join(out)


def _sysfs_cpus(pci_bus_id: str, sysfs: Path) -> set[int] | None:
    try:
        text = (sysfs / "bus/pci/devices" / normalize_pci_bus_id(pci_bus_id) / "local_cpulist").read_text().strip()
    except OSError:
        return None
    return parse_cpulist(text) if text else None


def _nvml_cpus(pci_bus_id: str, nvml: Any = None) -> set[int] | None:
    """The CPUs NVML says are ideal for the GPU (a bit mask in 64-bit words); None where NVML cannot say."""
    def read(nv: Any) -> set[int]:
        handle = nv.nvmlDeviceGetHandleByPciBusId(normalize_pci_bus_id(pci_bus_id))
        words = nv.nvmlDeviceGetCpuAffinity(handle, max(1, -(-(os.cpu_count() or 1) // 64)))
        return {64 * i + b for i, w in enumerate(words) for b in range(64) if int(w) >> b & 1}

    return with_nvml(read, nvml)  # not installed, no driver: the other source or none


def gpu_cpus(pci_bus_id: str | None, sysfs: Path = SYSFS, nvml: Any = None) -> tuple[set[int] | None, str]:
    """(the CPUs near the GPU, where that came from); (None, why) where no source says."""
    if not pci_bus_id:
        return None, "the GPU has no PCI address (the fake backend's GPUs are made up)"
    cpus = _sysfs_cpus(pci_bus_id, sysfs)
    if cpus:
        return cpus, "sysfs local_cpulist"
    cpus = _nvml_cpus(pci_bus_id, nvml)
    if cpus:
        return cpus, "NVML nvmlDeviceGetCpuAffinity"
    return None, "neither sysfs nor NVML names the CPUs near the GPU"


def _threads(proc_self: Path) -> list[int]:
    try:
        return [int(t) for t in os.listdir(proc_self / "task")]
    except OSError:
        return [0]  # this thread alone


def bind(pci_bus_id: str | None, sysfs: Path = SYSFS, nvml: Any = None, proc_self: Path = PROC_SELF) -> dict[str, Any]:
    """Bind every thread of this process to the CPUs near the GPU at ``pci_bus_id``; what was done, for the record:
    ``bound``, ``cpus`` (a cpulist), ``numa_node``, ``source``, and ``why`` where it was not bound."""
    record: dict[str, Any] = {"bound": False, "cpus": None, "numa_node": pci_numa_node(pci_bus_id, sysfs),
                              "source": None, "why": ""}
    near, source = gpu_cpus(pci_bus_id, sysfs, nvml)
    if near is None:
        return {**record, "why": source}
    if not hasattr(os, "sched_setaffinity"):
        return {**record, "why": "this platform cannot set a process's CPU affinity"}
    allowed = os.sched_getaffinity(0)
    cpus = near & allowed
    record.update(source=source, cpus=cpulist(cpus or near))
    if not cpus:
        return {**record, "why": f"none of the CPUs near the GPU ({cpulist(near)}) is one this process may use "
                                 f"({cpulist(allowed)})"}
    if cpus == allowed:
        return {**record, "why": "the CPUs near the GPU are every CPU this process may use"}
    for tid in _threads(proc_self):
        try:
            os.sched_setaffinity(tid, cpus)
        except OSError:
            continue  # a thread that ended meanwhile
    return {**record, "bound": os.sched_getaffinity(0) == cpus}


def describe(binding: dict[str, Any] | None) -> str:
    """``CPUs 0-55 (NUMA node 0)``, or why not bound, in words."""
    if not binding:
        return "binding unknown"
    if binding.get("bound"):
        node = binding.get("numa_node")
        return f"CPUs {binding.get('cpus')}" + (f" (NUMA node {node})" if node is not None else "")
    return f"not bound: {binding.get('why') or 'unknown'}"


__all__ = ["bind", "gpu_cpus", "cpulist", "describe"]
