"""Facts through NVML (nvidia-ml-py's ``pynvml``). The device is found by :mod:`gpubench.machine.telemetry` (by uuid, then
PCI bus id, then index), so CUDA's renumbering under CUDA_VISIBLE_DEVICES never points a fact at the wrong GPU.

Sources: NVML API reference (nvmlDeviceGetMaxPcieLinkGeneration/Width, which take the slot into account,
nvmlDeviceGetTotalEccErrors, nvmlDeviceGetRemappedRows, nvmlDeviceGetRetiredPagesPendingStatus,
nvmlDeviceGetNvLinkState, clock event reasons)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from gpubench.check.facts.fields import Gpu, as_flag, as_int
from gpubench.check.facts.readers.base import VendorFacts
from gpubench.machine.telemetry import NvmlTelemetry, read_or_none

NVML_HINT = "nvidia-ml-py is not installed: pip install nvidia-ml-py"


def _telemetry(index: int, uuid: str | None, pci: str | None, nv: Any) -> NvmlTelemetry:
    return NvmlTelemetry(index, uuid=uuid, pci_bus_id=pci, nvml=nv)


def nvlink_states(nv: Any, h: Any) -> list[int | None] | None:
    """State of every link NVML can name: 1 active, 0 inactive, None not a link of this GPU (NOT_SUPPORTED or
    invalid argument). Any other error makes the whole answer unknown: a link that cannot be read is not up."""
    not_links = {getattr(nv, "NVML_ERROR_NOT_SUPPORTED", 3), getattr(nv, "NVML_ERROR_INVALID_ARGUMENT", 2)}
    states: list[int | None] = []
    for link in range(int(getattr(nv, "NVML_NVLINK_MAX_LINKS", 18))):
        try:
            states.append(1 if int(nv.nvmlDeviceGetNvLinkState(h, link)) else 0)
        except Exception as e:
            if getattr(e, "value", None) in not_links or any(
                    s in str(e) for s in ("Not Supported", "Invalid Argument")):
                states.append(None)
            else:
                return None
    return states


class NvmlFacts(VendorFacts):
    """Facts through NVML (``nvml=`` takes a stand-in for tests)."""

    source = "nvml"
    telemetry = staticmethod(_telemetry)
    module, hint = "pynvml", NVML_HINT

    def __init__(self, gpus: Iterable[Gpu], nvml: Any = None):
        super().__init__(gpus, nvml)

    def read_static(self, t: NvmlTelemetry) -> dict[str, Any]:
        nv, h = self.lib, t.handle
        unc = getattr(nv, "NVML_MEMORY_ERROR_TYPE_UNCORRECTED", 1)
        volatile, aggregate = getattr(nv, "NVML_VOLATILE_ECC", 0), getattr(nv, "NVML_AGGREGATE_ECC", 1)
        enabled = getattr(nv, "NVML_FEATURE_ENABLED", 1)
        remap = read_or_none(lambda: tuple(nv.nvmlDeviceGetRemappedRows(h))) or (None,) * 4
        return {
            "pcie_max_gen": read_or_none(lambda: as_int(nv.nvmlDeviceGetMaxPcieLinkGeneration(h))),
            "pcie_max_width": read_or_none(lambda: as_int(nv.nvmlDeviceGetMaxPcieLinkWidth(h))),
            "ecc_enabled": read_or_none(lambda: nv.nvmlDeviceGetEccMode(h)[0] == enabled),
            "ecc_uncorrected": read_or_none(lambda: as_int(nv.nvmlDeviceGetTotalEccErrors(h, unc, volatile))),
            "ecc_uncorrected_aggregate": read_or_none(
                lambda: as_int(nv.nvmlDeviceGetTotalEccErrors(h, unc, aggregate))),
            "remap_corrected_rows": as_int(remap[0]),
            "remap_uncorrected_rows": as_int(remap[1]),
            "remap_pending": as_flag(remap[2]),
            "remap_failure": as_flag(remap[3]),
            # Before Ampere; NOT_SUPPORTED (None) on Ampere and later, which remap rows instead.
            "retired_pages_pending": read_or_none(lambda: nv.nvmlDeviceGetRetiredPagesPendingStatus(h) == enabled),
            "retired_pages": None,
            "nvlink": nvlink_states(nv, h),
            "interconnect": "NVLink",
            "why": {},
        }

    def read_poll(self, t: NvmlTelemetry) -> dict[str, Any]:
        nv, h = self.lib, t.handle
        # Renamed "clocks event reasons" in NVML 12.2; the old name is deprecated (as telemetry reads it).
        reasons = (getattr(nv, "nvmlDeviceGetCurrentClocksEventReasons", None)
                   or nv.nvmlDeviceGetCurrentClocksThrottleReasons)
        return {
            "pcie_gen": read_or_none(lambda: as_int(nv.nvmlDeviceGetCurrPcieLinkGeneration(h))),
            "pcie_width": read_or_none(lambda: as_int(nv.nvmlDeviceGetCurrPcieLinkWidth(h))),
            "throttle": read_or_none(lambda: t.decode_reasons(int(reasons(h)))),
            "pids": t.processes(),
        }
