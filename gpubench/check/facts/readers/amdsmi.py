"""Facts through ROCm's amdsmi. Written from the amdsmi docs (ROCm/amdsmi py-interface README and
amdsmi_interface.py, ROCm 6.x and 7.x); it has only run against a mocked module, never on AMD hardware.

Where amdsmi differs from NVML: its maximum PCIe link is the GPU's own (sysfs max_link_speed/width), not the
slot's; its ECC count (``amdsmi_get_gpu_total_ecc_count``) is read as one count whose lifetime the docs do not
state, so no "since the driver loaded" claim is made for it; it has no row remapping but retires bad pages
(``amdsmi_get_gpu_bad_page_info``: a page pending retirement WARNs, a page that could not be retired FAILs, as a
remap failure does); its XGMI links come from ``amdsmi_get_gpu_xgmi_link_status`` (ROCm 6.4 and later); its
throttle names are telemetry's (``amdsmi_get_violation_status``: ppt_pwr is the power cap, prochot_thrm hardware
thermal, the other *_thrm firmware thermal limits)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from gpubench.check.facts.fields import Gpu, as_int
from gpubench.check.facts.readers.base import VendorFacts
from gpubench.machine.telemetry import AmdSmiTelemetry, read_or_none

AMDSMI_HINT = "amdsmi is not installed: it ships with ROCm (python3 -m pip install /opt/rocm/share/amd_smi)"
NOT_ON_ROCM = "not read on ROCm yet"

# PCIe transfer rate (GT/s) of each generation, for amdsmi, which gives rates rather than generations.
_GEN_OF_GTS = {2.5: 1, 5.0: 2, 8.0: 3, 16.0: 4, 32.0: 5, 64.0: 6}


def gen_of_rate(rate: Any) -> int | None:
    """PCIe generation of an amdsmi transfer rate: MT/s in ROCm 6 (sysfs GT/s times 1000, amd_smi.cc), GT/s in the
    ROCm 7 docs; a rate of no known generation is unknown."""
    r = as_int(rate)
    if not r:
        return None
    gts = r / 1000 if r >= 1000 else float(r)
    return _GEN_OF_GTS.get(round(gts, 1))


def _telemetry(index: int, uuid: str | None, pci: str | None, smi: Any) -> AmdSmiTelemetry:
    return AmdSmiTelemetry(index, uuid=uuid, pci_bus_id=pci, amdsmi=smi)


class AmdSmiFacts(VendorFacts):
    """Facts through amdsmi (``amdsmi=`` takes a stand-in for tests)."""

    source = "amdsmi"
    telemetry = staticmethod(_telemetry)
    interconnect = "XGMI"
    module, hint = "amdsmi", AMDSMI_HINT

    def __init__(self, gpus: Iterable[Gpu], amdsmi: Any = None):
        super().__init__(gpus, amdsmi)

    def _pcie_max(self, h: Any) -> tuple[int | None, int | None]:
        st = self.lib.amdsmi_get_pcie_info(h)["pcie_static"]
        # ROCm 7 names the highest generation; ROCm 6 gives the highest rate, and its interface version is the
        # generation of that rate (amd_smi.cc), so it is the last resort.
        gen = (as_int(st.get("max_pcie_interface_version")) or gen_of_rate(st.get("max_pcie_speed"))
               or as_int(st.get("pcie_interface_version")) or None)
        return gen, as_int(st.get("max_pcie_width")) or None

    def _bad_pages(self, h: Any) -> tuple[int, bool, bool]:
        """(pages retired, any pending, any that could not be retired) from the bad page list."""
        smi = self.lib
        status = getattr(smi, "AmdSmiMemoryPageStatus", None)
        pending = int(getattr(status, "PENDING", 1))  # amdsmi.h: RESERVED 0, PENDING 1, UNRESERVABLE 2
        unreservable = int(getattr(status, "UNRESERVABLE", 2))
        pages = list(smi.amdsmi_get_gpu_bad_page_info(h) or [])
        codes = [as_int(p.get("status")) for p in pages if isinstance(p, dict)]
        return len(pages), pending in codes, unreservable in codes

    def _xgmi(self, h: Any) -> tuple[list[int | None] | None, str | None]:
        fn = getattr(self.lib, "amdsmi_get_gpu_xgmi_link_status", None)
        if fn is None:
            return None, f"{NOT_ON_ROCM}: this amdsmi has no amdsmi_get_gpu_xgmi_link_status (ROCm 6.4 and later)"
        got = read_or_none(lambda: fn(h))
        if not isinstance(got, dict):
            return None, None
        # "U" up, "D" down, "X" disabled (not a link in use), "N/A" unknown: only U and D are links.
        return [{"U": 1, "D": 0}.get(s) for s in got.get("status") or []], None

    def read_static(self, t: AmdSmiTelemetry) -> dict[str, Any]:
        smi, h = self.lib, t.handle
        gen, width = read_or_none(lambda: self._pcie_max(h)) or (None, None)
        pages, pending, failed = read_or_none(lambda: self._bad_pages(h)) or (None, None, None)
        links, links_why = self._xgmi(h)
        return {
            "pcie_max_gen": gen, "pcie_max_width": width,
            "ecc_enabled": read_or_none(lambda: bool(smi.amdsmi_get_gpu_ecc_enabled(h))),  # a bit mask of blocks
            "ecc_uncorrected": read_or_none(
                lambda: as_int(smi.amdsmi_get_gpu_total_ecc_count(h)["uncorrectable_count"])),
            "ecc_uncorrected_aggregate": None,
            "remap_corrected_rows": None, "remap_uncorrected_rows": None, "remap_pending": None,
            "remap_failure": failed,
            "retired_pages_pending": pending,
            "retired_pages": pages,
            "nvlink": links,
            "interconnect": "XGMI",
            "why": {"nvlink": links_why} if links_why else {},
        }

    def read_poll(self, t: AmdSmiTelemetry) -> dict[str, Any]:
        smi, h = self.lib, t.handle
        metric = read_or_none(lambda: smi.amdsmi_get_pcie_info(h)["pcie_metric"]) or {}
        return {
            "pcie_gen": gen_of_rate(metric.get("pcie_speed")),  # MT/s
            "pcie_width": as_int(metric.get("pcie_width")) or None,
            "throttle": read_or_none(t.throttle_reasons),
            "pids": t.processes(),
        }
