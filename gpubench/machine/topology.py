"""Where host memory and GPUs sit: NUMA nodes, CPU sets, the link between two GPUs.

A host↔device copy runs at full speed only from memory on the GPU's own NUMA node (a remote node costs a
socket hop; research notes in the copy suite's docstring), and a GPU↔GPU copy's speed is its link's. The
copy suite records all of this beside each figure so that a slow row explains itself.

Linux only (``/sys``); elsewhere every answer is None, never an exception. NVML (``pynvml``) names NVIDIA
links; ``amdsmi`` names AMD ones (written from the amdsmi Python API docs, tested with a fake module, not
yet run on AMD hardware).
"""

from __future__ import annotations

import ctypes
import os
import platform
from pathlib import Path

from gpubench.machine.telemetry import normalize_pci_bus_id

SYSFS = Path("/sys")


def _read(path: Path) -> str | None:
    try:
        return path.read_text().strip()
    except OSError:
        return None


def parse_cpulist(text: str) -> set[int]:
    """``0-3,8,10-11`` → {0,1,2,3,8,10,11} (the kernel's cpulist format)."""
    cpus: set[int] = set()
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        lo, _, hi = part.partition("-")
        cpus.update(range(int(lo), int(hi or lo) + 1))
    return cpus


def numa_nodes(sysfs: Path = SYSFS) -> list[int]:
    """NUMA nodes that have CPUs, ascending; [] where unknown."""
    text = _read(sysfs / "devices/system/node/has_cpu") or _read(sysfs / "devices/system/node/online")
    return sorted(parse_cpulist(text)) if text else []


def node_cpus(node: int, sysfs: Path = SYSFS) -> set[int]:
    text = _read(sysfs / f"devices/system/node/node{node}/cpulist")
    return parse_cpulist(text) if text else set()


def pci_numa_node(pci_bus_id: str | None, sysfs: Path = SYSFS) -> int | None:
    """NUMA node of a PCI device; None where the platform does not say (the kernel writes -1)."""
    if not pci_bus_id:
        return None
    bdf = normalize_pci_bus_id(pci_bus_id)  # 0000:19:00.0, as sysfs spells it
    text = _read(sysfs / "bus/pci/devices" / bdf / "numa_node")
    if text is None:
        return None
    node = int(text)
    return node if node >= 0 else None


# move_pages(2) with nodes=NULL only *reports* where each page is; Python has no binding for it.
_MOVE_PAGES = {"x86_64": 279, "aarch64": 239, "ppc64le": 301}


def address_numa_node(address: int, length: int) -> int | None:
    """NUMA node holding the pages of [address, address + length): sampled at the first, middle and last
    page. None where unknown (not Linux, pages not yet touched) and -1 when they span nodes."""
    number = _MOVE_PAGES.get(platform.machine())
    if number is None or length <= 0:
        return None
    page = os.sysconf("SC_PAGE_SIZE")
    first = address - address % page
    pages = sorted({first, first + (length // 2) // page * page, (address + length - 1) // page * page})
    ptrs = (ctypes.c_void_p * len(pages))(*pages)
    status = (ctypes.c_int * len(pages))()
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        rc = libc.syscall(ctypes.c_long(number), 0, ctypes.c_ulong(len(pages)), ptrs, None, status, 0)
    except (OSError, AttributeError):
        return None
    if rc != 0:
        return None
    nodes = {s for s in status}
    if any(s < 0 for s in nodes):  # -ENOENT: not faulted in; -EFAULT: not mapped
        return None
    return nodes.pop() if len(nodes) == 1 else -1


class bind_to_node:
    """Context manager: run this thread on the CPUs of one NUMA node, then restore its affinity.

    Memory the thread first touches (pageable buffers) or pins (``cudaHostAlloc``) then lands on that node,
    as nvbandwidth arranges with ``nvmlDeviceSetCpuAffinity``. A no-op where the node is unknown, the host
    has a single node, or affinity cannot be set; ``bound`` says which.
    """

    def __init__(self, node: int | None, sysfs: Path = SYSFS):
        self.node, self.sysfs, self.bound, self._old = node, sysfs, False, None

    def __enter__(self):
        if self.node is None or len(numa_nodes(self.sysfs)) < 2 or not hasattr(os, "sched_setaffinity"):
            return self
        cpus = node_cpus(self.node, self.sysfs) & os.sched_getaffinity(0)
        if cpus:
            self._old = os.sched_getaffinity(0)
            os.sched_setaffinity(0, cpus)
            self.bound = True
        return self

    def __exit__(self, *exc):
        if self._old is not None:
            os.sched_setaffinity(0, self._old)
        return False


def gpu_link(backend: str, src_pci: str | None, dst_pci: str | None, *, nvml=None, amdsmi=None) -> str | None:
    """The link between two GPUs, in words (``NVLink``, ``PCIe (through a host bridge)``, ``XGMI``…);
    None where the vendor library cannot tell."""
    if not src_pci or not dst_pci:
        return None
    try:
        if backend == "cuda":
            return _nvml_link(src_pci, dst_pci, nvml)
        if backend == "hip":
            return _amdsmi_link(src_pci, dst_pci, amdsmi)
    except Exception:  # noqa: BLE001 — a missing library or an unsupported query only loses this column
        return None
    return None


def with_nvml(fn, nvml=None):
    """``fn(nvml)`` between nvmlInit and nvmlShutdown, or None where NVML is not installed, will not start, or
    ``fn`` raises (``nvml=`` takes a stand-in for tests). For one reading outside telemetry's own session."""
    try:
        if nvml is None:
            import pynvml as nvml
        nvml.nvmlInit()
    except Exception:  # noqa: BLE001 — not installed, no driver
        return None
    try:
        return fn(nvml)
    except Exception:  # noqa: BLE001 — the caller has another source or none
        return None
    finally:
        try:
            nvml.nvmlShutdown()
        except Exception:  # noqa: BLE001
            pass


# nvmlGpuTopologyLevel_t, as `nvidia-smi topo -m` names them.
_NVML_LEVELS = {0: "same board", 10: "PCIe, one switch (PIX)", 20: "PCIe, several switches (PXB)",
                30: "PCIe, through the host bridge (PHB)", 40: "PCIe, same NUMA node (NODE)",
                50: "PCIe, across sockets (SYS)"}


def _nvml_link(src_pci: str, dst_pci: str, nvml=None) -> str | None:
    if nvml is None:
        import pynvml as nvml
    nvml.nvmlInit()
    try:
        a = nvml.nvmlDeviceGetHandleByPciBusId(normalize_pci_bus_id(src_pci))
        b = nvml.nvmlDeviceGetHandleByPciBusId(normalize_pci_bus_id(dst_pci))
        nvlink = getattr(nvml, "NVML_P2P_CAPS_INDEX_NVLINK", 1)
        if nvml.nvmlDeviceGetP2PStatus(a, b, nvlink) == getattr(nvml, "NVML_P2P_STATUS_OK", 0):
            return f"NVLink ({_active_nvlinks(nvml, a)} links active on the source)"
        level = nvml.nvmlDeviceGetTopologyCommonAncestor(a, b)
        return _NVML_LEVELS.get(int(level), f"PCIe (topology level {int(level)})")
    finally:
        nvml.nvmlShutdown()


def _active_nvlinks(nvml, handle) -> int:
    count = 0
    for link in range(getattr(nvml, "NVML_NVLINK_MAX_LINKS", 18)):
        try:
            count += int(nvml.nvmlDeviceGetNvLinkState(handle, link) == 1)
        except Exception:  # noqa: BLE001 — links past the device's count raise
            break
    return count


def _amdsmi_link(src_pci: str, dst_pci: str, amdsmi=None) -> str | None:
    if amdsmi is None:
        import amdsmi
    amdsmi.amdsmi_init()
    try:
        a = amdsmi.amdsmi_get_processor_handle_from_bdf(normalize_pci_bus_id(src_pci))
        b = amdsmi.amdsmi_get_processor_handle_from_bdf(normalize_pci_bus_id(dst_pci))
        info = amdsmi.amdsmi_topo_get_link_type(a, b)
        kind, hops = info.get("type"), info.get("hops")
        name = getattr(kind, "name", str(kind)).replace("AMDSMI_LINK_TYPE_", "") if kind is not None else "unknown"
        return f"{name} ({hops} hop{'s' if hops != 1 else ''})" if hops is not None else name
    finally:
        amdsmi.amdsmi_shut_down()
