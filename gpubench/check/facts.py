"""Health facts of each GPU for ``gpubench check``: what the driver says (read, not measured), judged PASS, WARN,
FAIL or SKIP, the way DCGM's diagnostic and the cloud node health checks (Azure's azurehpc-health-checks) judge a
node before it takes work.

Facts, per GPU (found by uuid, then PCI bus id, then index: the lookup is :mod:`gpubench.telemetry`'s, so CUDA's
renumbering under CUDA_VISIBLE_DEVICES never points a fact at the wrong GPU):

* Static, read once (:meth:`FactsReader.static`): the highest PCIe generation and width possible with this device
  and this system (NVML's ``nvmlDeviceGetMaxPcieLinkGeneration``/``Width`` take the slot into account), whether
  ECC is on, uncorrected ECC errors since the driver loaded (volatile) and over the GPU's life (aggregate), row
  remapping (Ampere and later: rows remapped for correctable and uncorrectable errors, a remap pending, a remap
  failure), retired pages pending (before Ampere; NOT_SUPPORTED on newer GPUs is normal), and the NVLink links.
* Polled while the check loads the GPUs (:meth:`FactsReader.poll`, through :class:`FactsWatch`): the current PCIe
  link generation and width (an idle GPU drops its link to Gen1 to save power, so only the highest value seen under
  load means anything), the clock-event ("throttle") reasons, and the processes holding the GPU.

Rules (:func:`judge`), one verdict per check; SKIP is never a pass, and missing data never PASSes:

* ``pcie_link``: the highest width or generation seen below the maximum FAILs ("PCIe x8 of x16").
* ``ecc``: uncorrected errors since the driver loaded FAIL; only in the GPU's lifetime WARN; ECC off or absent SKIPs.
* ``row_remap``: a remap failure FAILs (NVIDIA's memory error management guide: the GPU needs service); a remap
  pending, pages pending retirement, or rows remapped for uncorrectable errors WARN (a reset applies a pending
  remap).
* ``nvlink``: a link down FAILs; a GPU without links SKIPs. A GPU whose links are all down SKIPs too: PCIe cards
  without an NVLink bridge list their links as inactive, and a fabric that is down shows in the P2P checks.
* ``throttle``: hardware slowdown (HwSlowdown, HwThermalSlowdown, HwPowerBrakeSlowdown) FAILs, software thermal
  slowdown WARNs; the power cap, idle, application clocks, sync boost and display clocks PASS with a note: a GPU
  under a full GEMM load is expected to reach its power cap (GPU Boost runs up to it). DCGM's power health watch
  warned on any power violation and its users reported that as a false positive (NVIDIA/DCGM issue #285);
  azurehpc's node health check leaves sw_power_cap out of its throttle warning (Azure/azurehpc PR #595).
  A reason this module does not know WARNs: it is never passed unseen.
* ``processes``: a process that is not ours on the GPU WARNs ("GPU shared with pid 4321 (python3)").

Sources: NVML API reference (nvmlDeviceGetMaxPcieLinkGeneration, nvmlDeviceGetTotalEccErrors,
nvmlDeviceGetRemappedRows, nvmlDeviceGetRetiredPagesPendingStatus, nvmlDeviceGetNvLinkState, clock event reasons);
NVIDIA's GPU memory error management guide (row remapping); DCGM diagnostics; ROCm amdsmi Python API (README of
ROCm/amdsmi py-interface and its amdsmi_interface.py).

The AMD path (:class:`AmdSmiFacts`) was written from the amdsmi docs and Python interface source and has only run
against a mocked module, never on AMD hardware. Where amdsmi differs from NVML: its maximum PCIe link is the GPU's
own (sysfs max_link_speed/width), not the slot's; its ECC count (``amdsmi_get_gpu_total_ecc_count``) is read as
one count whose lifetime the docs do not state, so no "since the driver loaded" claim is made for it; it has no
row remapping but retires bad pages (``amdsmi_get_gpu_bad_page_info``: a page pending retirement WARNs, a page
that could not be retired FAILs, as a remap failure does); its XGMI links come from
``amdsmi_get_gpu_xgmi_link_status`` (ROCm 6.4 and later); its throttle names are telemetry's
(``amdsmi_get_violation_status``: ppt_pwr is the power cap, prochot_thrm hardware thermal, the other *_thrm
firmware thermal limits).

Nothing here raises for a missing library or an unreadable field: :func:`open_facts` returns a reader whose facts
are unknown and says why ("nvidia-ml-py is not installed: pip install nvidia-ml-py").
"""

from __future__ import annotations

import importlib
import json
import os
import threading
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from gpubench.check.model import State, Verdict, worst
from gpubench.contention import PROC, _cpu_times, _descendants, process_name
from gpubench.telemetry import AmdSmiTelemetry, NvmlTelemetry, _try

Gpu = tuple[int, str | None, str | None]  # (CUDA/HIP index, uuid, PCI bus id)

CHECKS = ("pcie_link", "ecc", "row_remap", "nvlink", "throttle", "processes")
TITLES = {"pcie_link": "PCIe link", "ecc": "ECC errors", "row_remap": "row remapping", "nvlink": "NVLink",
          "throttle": "throttling", "processes": "other processes"}

# What static() returns besides "interconnect" and "why"; None is "unknown" throughout.
STATIC_KEYS = ("pcie_max_gen", "pcie_max_width", "ecc_enabled", "ecc_uncorrected", "ecc_uncorrected_aggregate",
               "remap_corrected_rows", "remap_uncorrected_rows", "remap_pending", "remap_failure",
               "retired_pages_pending", "retired_pages", "nvlink")
POLL_KEYS = ("pcie_gen", "pcie_width", "throttle", "pids")

NVML_HINT = "nvidia-ml-py is not installed: pip install nvidia-ml-py"
AMDSMI_HINT = "amdsmi is not installed: it ships with ROCm (python3 -m pip install /opt/rocm/share/amd_smi)"
NOT_ON_ROCM = "not read on ROCm yet"

# Clock-event reasons by what they mean for a node (NVML's names; amdsmi's violation names from telemetry).
THROTTLE_FAIL = frozenset({"HwSlowdown", "HwThermalSlowdown", "HwPowerBrakeSlowdown", "prochot_thrm"})
THROTTLE_WARN = frozenset({"SwThermalSlowdown", "socket_thrm", "vr_thrm", "hbm_thrm"})
THROTTLE_BENIGN = frozenset({"SwPowerCap", "GpuIdle", "ApplicationsClocksSetting", "SyncBoost",
                             "DisplayClockSetting", "ppt_pwr"})
POWER_CAP_NOTE = ("reaching the power cap under a full GEMM load is normal (GPU Boost runs up to it); DCGM warned "
                  "on it and its users reported a false positive: NVIDIA/DCGM issue #285")

# PCIe transfer rate (GT/s) of each generation, for amdsmi, which gives rates rather than generations.
_GEN_OF_GTS = {2.5: 1, 5.0: 2, 8.0: 3, 16.0: 4, 32.0: 5, 64.0: 6}


def _int(x: Any) -> int | None:
    # amdsmi says "N/A" for an unsupported field; bool is a flag, not a count.
    if isinstance(x, bool) or not isinstance(x, (int, float)):
        return None
    return int(x)


def _flag(x: Any) -> bool | None:
    if isinstance(x, bool):
        return x
    return bool(x) if isinstance(x, int) else None


def _unknown_static(why: str | None, interconnect: str = "NVLink") -> dict[str, Any]:
    return {**dict.fromkeys(STATIC_KEYS), "interconnect": interconnect,
            "why": dict.fromkeys(CHECKS, why) if why else {}}


def _unknown_poll() -> dict[str, Any]:
    return dict.fromkeys(POLL_KEYS)


class FactsUnavailable(Exception):
    """Raised by a reader's constructor when its library cannot be used; :func:`open_facts` turns it into a
    :class:`NullFacts` with the message as the reason."""


class FactsReader:
    """What every reader offers. ``static(gpu)`` and ``poll(gpu)`` take the CUDA/HIP index and never raise."""

    source = "none"

    def __init__(self, gpus: Iterable[Gpu]):
        self.gpus = [tuple(g) for g in gpus]
        self.why: str | None = None  # why every fact is unknown, where one reason covers them all

    def static(self, gpu: int) -> dict[str, Any]:
        return _unknown_static(self.why)

    def poll(self, gpu: int) -> dict[str, Any]:
        return _unknown_poll()

    def close(self) -> None:
        """Release the vendor library; safe to call more than once."""

    def __enter__(self) -> FactsReader:
        return self

    def __exit__(self, *exc: Any) -> bool:
        self.close()
        return False


class NullFacts(FactsReader):
    """The CPU backend's, or a missing library's: every fact unknown, with the reason."""

    def __init__(self, gpus: Iterable[Gpu], why: str):
        super().__init__(gpus)
        self.why = why


class _VendorFacts(FactsReader):
    """One telemetry source per GPU: it holds the library open, found the device and decodes what telemetry
    already decodes (throttle reasons, processes). A GPU that cannot be opened has its reason instead."""

    _telemetry: Callable[..., Any]  # (index, uuid, pci bus id, library) -> an open telemetry source
    _interconnect = "NVLink"
    _module: str  # the vendor library's Python module, imported where no stand-in is given
    _hint: str  # what to install when it is missing

    def __init__(self, gpus: Iterable[Gpu], lib: Any = None):
        if lib is None:
            try:
                lib = importlib.import_module(self._module)
            except ImportError:
                raise FactsUnavailable(self._hint) from None
        super().__init__(gpus)
        self._lib = lib
        self._dev: dict[int, Any] = {}
        self._why: dict[int, str] = {}
        for index, uuid, pci in self.gpus:
            try:
                self._dev[index] = self._telemetry(index, uuid, pci, lib)
            except Exception as e:  # TelemetryUnavailable, or a library that breaks in a new way
                self._why[index] = str(e) or repr(e)

    def _open(self, gpu: int) -> Any:
        return self._dev.get(gpu)

    def _missing(self, gpu: int) -> str:
        return self._why.get(gpu, f"GPU {gpu} was not among the GPUs this reader opened")

    def static(self, gpu: int) -> dict[str, Any]:
        t = self._open(gpu)
        if t is None:
            return _unknown_static(self._missing(gpu), self._interconnect)
        try:
            return self._static(t)
        except Exception as e:  # each field is guarded; this is the last line
            return _unknown_static(f"{self.source} failed: {e!r}", self._interconnect)

    def poll(self, gpu: int) -> dict[str, Any]:
        t = self._open(gpu)
        if t is None:
            return _unknown_poll()
        try:
            return self._poll(t)
        except Exception:
            return _unknown_poll()

    def _static(self, t: Any) -> dict[str, Any]:
        raise NotImplementedError

    def _poll(self, t: Any) -> dict[str, Any]:
        raise NotImplementedError

    def close(self) -> None:
        for t in self._dev.values():
            _try(t.close)


def _nvml_telemetry(index: int, uuid: str | None, pci: str | None, nv: Any) -> NvmlTelemetry:
    return NvmlTelemetry(index, uuid=uuid, pci_bus_id=pci, nvml=nv)


def _amdsmi_telemetry(index: int, uuid: str | None, pci: str | None, smi: Any) -> AmdSmiTelemetry:
    return AmdSmiTelemetry(index, uuid=uuid, pci_bus_id=pci, amdsmi=smi)


class NvmlFacts(_VendorFacts):
    """Facts through NVML (nvidia-ml-py's ``pynvml``; ``nvml=`` takes a stand-in for tests)."""

    source = "nvml"
    _telemetry = staticmethod(_nvml_telemetry)
    _module, _hint = "pynvml", NVML_HINT

    def __init__(self, gpus: Iterable[Gpu], nvml: Any = None):
        super().__init__(gpus, nvml)

    def _static(self, t: NvmlTelemetry) -> dict[str, Any]:
        nv, h = self._lib, t._h
        unc = getattr(nv, "NVML_MEMORY_ERROR_TYPE_UNCORRECTED", 1)
        volatile, aggregate = getattr(nv, "NVML_VOLATILE_ECC", 0), getattr(nv, "NVML_AGGREGATE_ECC", 1)
        enabled = getattr(nv, "NVML_FEATURE_ENABLED", 1)
        remap = _try(lambda: tuple(nv.nvmlDeviceGetRemappedRows(h))) or (None,) * 4
        return {
            "pcie_max_gen": _try(lambda: _int(nv.nvmlDeviceGetMaxPcieLinkGeneration(h))),
            "pcie_max_width": _try(lambda: _int(nv.nvmlDeviceGetMaxPcieLinkWidth(h))),
            "ecc_enabled": _try(lambda: nv.nvmlDeviceGetEccMode(h)[0] == enabled),
            "ecc_uncorrected": _try(lambda: _int(nv.nvmlDeviceGetTotalEccErrors(h, unc, volatile))),
            "ecc_uncorrected_aggregate": _try(lambda: _int(nv.nvmlDeviceGetTotalEccErrors(h, unc, aggregate))),
            "remap_corrected_rows": _int(remap[0]),
            "remap_uncorrected_rows": _int(remap[1]),
            "remap_pending": _flag(remap[2]),
            "remap_failure": _flag(remap[3]),
            # Before Ampere; NOT_SUPPORTED (None) on Ampere and later, which remap rows instead.
            "retired_pages_pending": _try(lambda: nv.nvmlDeviceGetRetiredPagesPendingStatus(h) == enabled),
            "retired_pages": None,
            "nvlink": self._nvlink(nv, h),
            "interconnect": "NVLink",
            "why": {},
        }

    @staticmethod
    def _nvlink(nv: Any, h: Any) -> list[int | None] | None:
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

    def _poll(self, t: NvmlTelemetry) -> dict[str, Any]:
        nv, h = self._lib, t._h
        # Renamed "clocks event reasons" in NVML 12.2; the old name is deprecated (as telemetry reads it).
        reasons = (getattr(nv, "nvmlDeviceGetCurrentClocksEventReasons", None)
                   or nv.nvmlDeviceGetCurrentClocksThrottleReasons)
        return {
            "pcie_gen": _try(lambda: _int(nv.nvmlDeviceGetCurrPcieLinkGeneration(h))),
            "pcie_width": _try(lambda: _int(nv.nvmlDeviceGetCurrPcieLinkWidth(h))),
            "throttle": _try(lambda: t._decode(int(reasons(h)))),
            "pids": t.processes(),
        }


def _gen_of_rate(rate: Any) -> int | None:
    """PCIe generation of an amdsmi transfer rate: MT/s in ROCm 6 (sysfs GT/s times 1000, amd_smi.cc), GT/s in the
    ROCm 7 docs; a rate of no known generation is unknown."""
    r = _int(rate)
    if not r:
        return None
    gts = r / 1000 if r >= 1000 else float(r)
    return _GEN_OF_GTS.get(round(gts, 1))


class AmdSmiFacts(_VendorFacts):
    """Facts through ROCm's amdsmi (``amdsmi=`` takes a stand-in for tests).

    Written from the amdsmi docs (ROCm/amdsmi py-interface README and amdsmi_interface.py, ROCm 6.x and 7.x); it has
    only run against a mocked module, never on AMD hardware. See the module docstring for how it differs from NVML.
    """

    source = "amdsmi"
    _telemetry = staticmethod(_amdsmi_telemetry)
    _interconnect = "XGMI"

    _module, _hint = "amdsmi", AMDSMI_HINT

    def __init__(self, gpus: Iterable[Gpu], amdsmi: Any = None):
        super().__init__(gpus, amdsmi)

    def _pcie_max(self, h: Any) -> tuple[int | None, int | None]:
        st = self._lib.amdsmi_get_pcie_info(h)["pcie_static"]
        # ROCm 7 names the highest generation; ROCm 6 gives the highest rate, and its interface version is the
        # generation of that rate (amd_smi.cc), so it is the last resort.
        gen = (_int(st.get("max_pcie_interface_version")) or _gen_of_rate(st.get("max_pcie_speed"))
               or _int(st.get("pcie_interface_version")) or None)
        return gen, _int(st.get("max_pcie_width")) or None

    def _bad_pages(self, h: Any) -> tuple[int, bool, bool]:
        """(pages retired, any pending, any that could not be retired) from the bad page list."""
        smi = self._lib
        status = getattr(smi, "AmdSmiMemoryPageStatus", None)
        pending = int(getattr(status, "PENDING", 1))  # amdsmi.h: RESERVED 0, PENDING 1, UNRESERVABLE 2
        unreservable = int(getattr(status, "UNRESERVABLE", 2))
        pages = list(smi.amdsmi_get_gpu_bad_page_info(h) or [])
        codes = [_int(p.get("status")) for p in pages if isinstance(p, dict)]
        return len(pages), pending in codes, unreservable in codes

    def _xgmi(self, h: Any) -> tuple[list[int | None] | None, str | None]:
        fn = getattr(self._lib, "amdsmi_get_gpu_xgmi_link_status", None)
        if fn is None:
            return None, f"{NOT_ON_ROCM}: this amdsmi has no amdsmi_get_gpu_xgmi_link_status (ROCm 6.4 and later)"
        got = _try(lambda: fn(h))
        if not isinstance(got, dict):
            return None, None
        # "U" up, "D" down, "X" disabled (not a link in use), "N/A" unknown: only U and D are links.
        return [{"U": 1, "D": 0}.get(s) for s in got.get("status") or []], None

    def _static(self, t: AmdSmiTelemetry) -> dict[str, Any]:
        smi, h = self._lib, t._h
        gen, width = _try(lambda: self._pcie_max(h)) or (None, None)
        pages, pending, failed = _try(lambda: self._bad_pages(h)) or (None, None, None)
        links, links_why = self._xgmi(h)
        return {
            "pcie_max_gen": gen, "pcie_max_width": width,
            "ecc_enabled": _try(lambda: bool(smi.amdsmi_get_gpu_ecc_enabled(h))),  # a bit mask of blocks
            "ecc_uncorrected": _try(lambda: _int(smi.amdsmi_get_gpu_total_ecc_count(h)["uncorrectable_count"])),
            "ecc_uncorrected_aggregate": None,
            "remap_corrected_rows": None, "remap_uncorrected_rows": None, "remap_pending": None,
            "remap_failure": failed,
            "retired_pages_pending": pending,
            "retired_pages": pages,
            "nvlink": links,
            "interconnect": "XGMI",
            "why": {"nvlink": links_why} if links_why else {},
        }

    def _poll(self, t: AmdSmiTelemetry) -> dict[str, Any]:
        smi, h = self._lib, t._h
        metric = _try(lambda: smi.amdsmi_get_pcie_info(h)["pcie_metric"]) or {}
        return {
            "pcie_gen": _gen_of_rate(metric.get("pcie_speed")),  # MT/s
            "pcie_width": _int(metric.get("pcie_width")) or None,
            "throttle": _try(t._throttle),
            "pids": t.processes(),
        }


FAKE_ENV = "GPUBENCH_FAKE_FACTS"
FAKE_STATIC: dict[str, Any] = {
    "pcie_max_gen": 5, "pcie_max_width": 16, "ecc_enabled": True, "ecc_uncorrected": 0,
    "ecc_uncorrected_aggregate": 0, "remap_corrected_rows": 0, "remap_uncorrected_rows": 0, "remap_pending": False,
    "remap_failure": False, "retired_pages_pending": None, "retired_pages": None, "nvlink": [1] * 18,
}
FAKE_POLL: dict[str, Any] = {"pcie_gen": 5, "pcie_width": 16, "throttle": [], "pids": []}


class FakeFacts(FactsReader):
    """The fake backend's: a healthy H100-like GPU (PCIe Gen5 x16 of Gen5 x16, no ECC errors, no remaps, 18 of 18
    NVLinks up, no throttling, no other process), overridden per GPU by ``GPUBENCH_FAKE_FACTS``, a JSON object
    ``{"<gpu index>": {field: value}}`` whose fields are those NVML's reader returns (``{"3": {"pcie_width": 8}}``,
    ``{"1": {"throttle": ["HwSlowdown"]}}``, ``{"0": {"pids": [4242]}}``); ``"nvlink_down": [3, 7]`` marks those
    links inactive. The polled pids always include this process, as a real GPU's do while we load it, so ``pids``
    names the others. A malformed variable leaves every fact unknown with the error as the reason: a typo must not
    read as a healthy GPU."""

    source = "fake"

    def __init__(self, gpus: Iterable[Gpu], env: Mapping[str, str] | None = None):
        super().__init__(gpus)
        raw = (os.environ if env is None else env).get(FAKE_ENV, "")
        try:
            self._over = _parse_fake(raw)
        except ValueError as e:
            self._over, self.why = {}, f"{FAKE_ENV}: {e}"

    def static(self, gpu: int) -> dict[str, Any]:
        if self.why:
            return _unknown_static(self.why)
        over = self._over.get(gpu, {})
        out = {**FAKE_STATIC, **{k: v for k, v in over.items() if k in FAKE_STATIC}}
        links = list(out["nvlink"]) if out["nvlink"] is not None else None
        for link in over.get("nvlink_down", []) if links is not None else []:
            if 0 <= link < len(links):
                links[link] = 0
        return {**out, "nvlink": links, "interconnect": "NVLink", "why": {}}

    def poll(self, gpu: int) -> dict[str, Any]:
        if self.why:
            return _unknown_poll()
        over = self._over.get(gpu, {})
        out = {**FAKE_POLL, **{k: v for k, v in over.items() if k in FAKE_POLL}}
        if out["pids"] is not None:
            # A real GPU under our load lists our process too; without it, a lone pid absent from /proc would be
            # read as our own pid seen from another pid namespace (FactsWatch), and never as a stranger.
            out["pids"] = sorted({os.getpid(), *out["pids"]})
        return out


def _parse_fake(raw: str) -> dict[int, dict[str, Any]]:
    if not raw.strip():
        return {}
    try:
        data = json.loads(raw)
    except json.JSONDecodeError as e:
        raise ValueError(f"not JSON ({e})") from None
    if not isinstance(data, dict):
        raise ValueError("not a JSON object of GPU index to fields")
    known = set(FAKE_STATIC) | set(FAKE_POLL) | {"nvlink_down"}
    out: dict[int, dict[str, Any]] = {}
    for key, fields in data.items():
        if not str(key).isdigit() or not isinstance(fields, dict):
            raise ValueError(f"entry {key!r}: want \"<gpu index>\": {{field: value}}")
        unknown = sorted(set(fields) - known)
        if unknown:
            raise ValueError(f"GPU {key}: unknown field {', '.join(unknown)} (known: {', '.join(sorted(known))})")
        out[int(key)] = _check_fake_fields(key, dict(fields))
    return out


def _check_fake_fields(gpu: str, fields: dict[str, Any]) -> dict[str, Any]:
    """The list fields' shapes, so that a wrong one is reported rather than read as something else (a throttle
    string would be folded as its letters)."""
    if isinstance(fields.get("throttle"), str):
        fields["throttle"] = [fields["throttle"]]
    shapes = {"throttle": str, "pids": int, "nvlink_down": int, "nvlink": (int, type(None))}
    for key, kind in shapes.items():
        v = fields.get(key)
        if v is not None and not (isinstance(v, list) and all(isinstance(x, kind) for x in v)):
            raise ValueError(f"GPU {gpu}: {key} must be a list, not {json.dumps(v)}")
    return fields


def open_facts(backend: str, gpus: list[Gpu]) -> FactsReader:
    """The facts reader for ``backend`` ("cuda" → NVML, "hip" → amdsmi, "fake" → :class:`FakeFacts`, anything
    else → :class:`NullFacts`). Never raises: a missing or broken library gives NullFacts with the reason."""
    if backend == "fake":
        return FakeFacts(gpus)
    cls = {"cuda": NvmlFacts, "hip": AmdSmiFacts}.get(backend)
    if cls is None:
        return NullFacts(gpus, f"no GPU health facts on the {backend} backend")
    try:
        return cls(gpus)
    except FactsUnavailable as e:
        return NullFacts(gpus, str(e))
    except Exception as e:
        return NullFacts(gpus, f"{cls.source} facts failed: {e!r}")


def process_tree(root_pid: int, proc: Path = PROC) -> set[int]:
    """``root_pid`` and all its descendants, from /proc's parent links (``proc`` for tests). The root is in the
    answer even where /proc cannot be read."""
    return _descendants({root_pid}, _cpu_times(proc))


def _empty_seen() -> dict[str, Any]:
    return {"pcie_gen": None, "pcie_width": None, "throttle": None, "foreign": None, "hidden_others": 0,
            "hidden_pids": [], "polls": 0}


class FactsWatch:
    """Polls ``reader`` for every GPU in a daemon thread while the check loads the GPUs (a context manager), keeping
    per GPU the highest PCIe generation and width seen, the union of throttle reasons, the processes that were not
    ours and how many polls read anything.

    ``own_pids()`` returns this run's processes (this one and its descendants, :func:`process_tree`, plus any worker
    the runner knows); it is asked only when the GPU lists a pid not yet known as ours, and a pid once ours stays
    ours, so a worker that exits between two polls is never taken for a stranger. Where the GPU lists pids of another
    pid namespace (a container sees the host's, none of them ours or in our /proc), one of them is ours and which
    cannot be told: the others are counted, as :mod:`gpubench.contention` counts them.
    """

    def __init__(self, reader: FactsReader, gpus: Iterable[Gpu | int], own_pids: Callable[[], Iterable[int]],
                 interval_s: float = 0.25, proc: Path = PROC):
        self.reader = reader
        self.gpus = [g if isinstance(g, int) else g[0] for g in gpus]
        self.own_pids = own_pids
        self.interval_s = interval_s
        self.proc = proc
        self._own: set[int] = set()  # pids once ours stay ours
        self._strangers: set[int] = set()  # pids found not ours once: a process never joins our tree later
        self._seen = {g: _empty_seen() for g in self.gpus}
        self._lock = threading.Lock()  # guards _seen, which seen() reads from another thread
        self._polling = threading.Lock()  # one poll at a time: a direct poll_once beside the thread's
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def poll_once(self) -> None:
        """Read every GPU once and fold the readings in; never raises."""
        with self._polling:
            self._poll_all()

    def _poll_all(self) -> None:
        for gpu in self.gpus:
            try:
                r = self.reader.poll(gpu)
                pids = r.get("pids")
                others = self._others(pids) if pids is not None else None
                with self._lock:
                    self._fold(self._seen[gpu], r, others)
            except Exception:  # a poll that fails is a poll that read nothing
                continue

    def _is_own(self, pids: list[int]) -> set[int] | None:
        """Our pids among ``pids`` (None: own_pids failed, so no pid can be judged this poll). own_pids is asked
        after the device was read, so a worker the device lists is alive and in our tree when asked."""
        new = set(pids) - self._own - self._strangers
        if new:
            try:
                self._own |= {int(p) for p in self.own_pids()}
            except Exception:
                return None
            self._strangers |= new - self._own
        return self._own & set(pids)

    def _others(self, pids: list[int]) -> tuple[dict[int, str], list[int]] | None:
        """({foreign pid: name}, host pids of another namespace), or None where ownership is unknown."""
        pids = [int(p) for p in pids]
        own = self._is_own(pids)
        if own is None:
            return None
        if pids and not own and not any((self.proc / str(p)).exists() for p in pids):
            return {}, pids
        return {p: process_name(p, self.proc) for p in pids if p not in own}, []

    @staticmethod
    def _fold(s: dict[str, Any], r: dict[str, Any], others: tuple[dict[int, str], list[int]] | None) -> None:
        read = False
        for key in ("pcie_gen", "pcie_width"):
            v = _int(r.get(key))
            if v is not None:
                s[key], read = max(v, s[key] or 0), True
        if r.get("throttle") is not None:
            s["throttle"], read = sorted(set(s["throttle"] or ()) | set(r["throttle"])), True
        if others is not None:
            named, hidden = others
            # The name from the first sight: the process may be gone by the time the check is judged.
            s["foreign"], read = {**named, **(s["foreign"] or {})}, True
            if len(hidden) - 1 > s["hidden_others"]:
                s["hidden_others"], s["hidden_pids"] = len(hidden) - 1, sorted(hidden)
        s["polls"] += int(read)

    def seen(self, gpu: int) -> dict[str, Any]:
        """What was seen on ``gpu`` so far (a copy); None for a fact no poll could read. ``pcie_gen``,
        ``pcie_width``: the highest seen; ``throttle``: every reason seen, sorted; ``foreign``: {pid: "pid 4321
        (python3)"} of every process not ours, named when first seen; ``hidden_others``, ``hidden_pids``: the most
        other processes seen at once in another pid namespace, and that poll's host pids; ``polls``: how many polls
        read anything."""
        with self._lock:
            s = self._seen.get(gpu) or _empty_seen()
            return {k: (v.copy() if isinstance(v, (list, dict)) else v) for k, v in s.items()}

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            self.poll_once()

    def __enter__(self) -> FactsWatch:
        self._stop.clear()
        self.poll_once()
        self._thread = threading.Thread(target=self._run, name="gpubench-facts", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> bool:
        # No last poll: workers end with the load, and a context torn down late is not a stranger's.
        self._stop.set()
        if self._thread is not None:
            # Bounded: a read stuck in the driver must not stall the check; the daemon thread is then abandoned.
            self._thread.join(timeout=max(1.0, 4 * self.interval_s))
        return False


# ------------------------------------------------------------------------------------------------------ judging

def _verdict(gpu: int, check: str, state: State, text: str, title: str | None = None,
             notes: list[str] | None = None) -> Verdict:
    return Verdict(check=check, target=f"gpu{gpu}", state=state, text=text, kind="fact", gpu=gpu,
                   title=title or TITLES[check], notes=list(notes or ()))


def _skip(gpu: int, check: str, text: str, static: dict[str, Any], title: str | None = None) -> Verdict:
    why = (static.get("why") or {}).get(check)
    return _verdict(gpu, check, "SKIP", f"{text} ({why})" if why else text, title)


def _judge_pcie(gpu: int, static: dict[str, Any], seen: dict[str, Any]) -> Verdict:
    max_gen, max_width = _int(static.get("pcie_max_gen")), _int(static.get("pcie_max_width"))
    gen, width = _int(seen.get("pcie_gen")), _int(seen.get("pcie_width"))
    low_gen = gen is not None and max_gen is not None and gen < max_gen
    low_width = width is not None and max_width is not None and width < max_width
    if low_gen and low_width:
        return _verdict(gpu, "pcie_link", "FAIL", f"PCIe Gen{gen} x{width} of Gen{max_gen} x{max_width} "
                        "(the highest seen while the check ran)")
    if low_width:
        return _verdict(gpu, "pcie_link", "FAIL", f"PCIe x{width} of x{max_width}")
    if low_gen:
        return _verdict(gpu, "pcie_link", "FAIL", f"PCIe Gen{gen} of Gen{max_gen} (the highest seen while the "
                        "check ran)")
    if None in (max_gen, max_width, gen, width):
        return _skip(gpu, "pcie_link", "PCIe link not readable", static)
    return _verdict(gpu, "pcie_link", "PASS", f"PCIe Gen{gen} x{width} (of Gen{max_gen} x{max_width})")


def _errors(n: int) -> str:
    return f"{n} uncorrected ECC error{'s' if n != 1 else ''}"


def _judge_ecc(gpu: int, static: dict[str, Any]) -> Verdict:
    enabled = static.get("ecc_enabled")
    if enabled is None:
        return _skip(gpu, "ecc", "no ECC reporting", static)
    if not enabled:
        return _verdict(gpu, "ecc", "SKIP", "ECC is off")
    vol, agg = _int(static.get("ecc_uncorrected")), _int(static.get("ecc_uncorrected_aggregate"))
    if vol:
        # Only NVML tells the two counts apart; amdsmi's one count makes no claim about when.
        since = " since the driver loaded" if agg is not None else ""
        return _verdict(gpu, "ecc", "FAIL", _errors(vol) + since)
    if agg:
        text = (f"{agg} uncorrected errors in the GPU's lifetime, none since the driver loaded" if vol == 0
                else f"{_errors(agg)} in the GPU's lifetime")
        return _verdict(gpu, "ecc", "WARN", text)
    if vol is None and agg is None:
        return _skip(gpu, "ecc", "ECC error counts not readable", static)
    return _verdict(gpu, "ecc", "PASS", "no uncorrected ECC errors")


def _remap_findings(static: dict[str, Any]) -> list[tuple[State, str]]:
    unc, cor = _int(static.get("remap_uncorrected_rows")), _int(static.get("remap_corrected_rows"))
    found: list[tuple[State, str]] = []
    if static.get("remap_failure"):
        pages = static.get("retired_pages") is not None  # amdsmi's counterpart: a page it could not retire
        found.append(("FAIL", "a bad page could not be retired: the GPU needs service" if pages
                      else "row remapping failed: the GPU needs service"))
    if static.get("remap_pending"):
        found.append(("WARN", "row remap pending: reset the GPU to apply it"))
    if static.get("retired_pages_pending"):
        found.append(("WARN", "retired pages pending: reset the GPU to retire them"))
    if unc:
        found.append(("WARN", f"{unc} rows remapped for uncorrectable errors, {cor or 0} for correctable"))
    return found


def _judge_remap(gpu: int, static: dict[str, Any]) -> Verdict:
    found = _remap_findings(static)
    if found:
        state = worst(s for s, _ in found)
        return _verdict(gpu, "row_remap", state, "; ".join(t for s, t in sorted(found, key=lambda f: f[0] != state)))
    unc, cor = _int(static.get("remap_uncorrected_rows")), _int(static.get("remap_corrected_rows"))
    pending, pages = static.get("retired_pages_pending"), _int(static.get("retired_pages"))
    if unc is not None or cor is not None or static.get("remap_pending") is not None:
        return _verdict(gpu, "row_remap", "PASS", f"no remap pending; rows remapped: {unc or 0} for uncorrectable "
                        f"errors, {cor or 0} for correctable")
    if pending is not None:
        retired = f" ({pages} page{'s' if pages != 1 else ''} retired)" if pages is not None else ""
        return _verdict(gpu, "row_remap", "PASS", "no retired pages pending" + retired)
    return _skip(gpu, "row_remap", "no row remapping or page retirement reporting", static)


def _judge_links(gpu: int, static: dict[str, Any]) -> Verdict:
    name = static.get("interconnect") or "NVLink"
    links = static.get("nvlink")
    if links is None:
        return _skip(gpu, "nvlink", f"{name} state not readable", static, title=name)
    present = [i for i, s in enumerate(links) if s is not None]
    down = [i for i in present if not links[i]]
    if not present:
        return _verdict(gpu, "nvlink", "SKIP", f"no {name} on this GPU", title=name)
    up = len(present) - len(down)
    if not up:
        # PCIe cards without a bridge list their links as inactive; a fabric that is down shows in the P2P checks.
        return _verdict(gpu, "nvlink", "SKIP", f"{name}: 0 of {len(present)} links up (not connected, or all down)",
                        title=name)
    if down:
        which = ", ".join(map(str, down))
        return _verdict(gpu, "nvlink", "FAIL", f"{name}: {up} of {len(present)} links up "
                        f"(link{'s' if len(down) > 1 else ''} {which} down)", title=name)
    return _verdict(gpu, "nvlink", "PASS", f"{up} of {len(present)} {name} links up", title=name)


def _reasons(seen: dict[str, Any], row_throttle: Iterable[str]) -> set[str]:
    # Rows may carry a telemetry summary's comma-joined string ("HwSlowdown,SwPowerCap").
    rows = {part.strip() for r in row_throttle for part in str(r).split(",") if part.strip()}
    return set(seen.get("throttle") or ()) | rows


def _judge_throttle(gpu: int, seen: dict[str, Any], row_throttle: Iterable[str], static: dict[str, Any]) -> Verdict:
    reasons = _reasons(seen, row_throttle)
    if seen.get("throttle") is None and not reasons:
        return _skip(gpu, "throttle", "throttle reasons not readable", static)
    hard = sorted(reasons & THROTTLE_FAIL)
    thermal = sorted(reasons & THROTTLE_WARN)
    unknown = sorted(reasons - THROTTLE_FAIL - THROTTLE_WARN - THROTTLE_BENIGN)
    benign = sorted(reasons & THROTTLE_BENIGN)
    notes = [f"reasons seen: {', '.join(sorted(reasons))}"] if reasons else []
    if {"SwPowerCap", "ppt_pwr"} & reasons:
        notes.append(POWER_CAP_NOTE)
    if hard:
        return _verdict(gpu, "throttle", "FAIL", f"hardware throttling: {', '.join(hard)}", notes=notes)
    warn = ([f"thermal throttling: {', '.join(thermal)}"] if thermal else []) + (
        [f"throttle reason not recognised: {', '.join(unknown)}"] if unknown else [])
    if warn:
        return _verdict(gpu, "throttle", "WARN", "; ".join(warn), notes=notes)
    if benign:
        return _verdict(gpu, "throttle", "PASS", f"{', '.join(benign)} only: not a fault", notes=notes)
    return _verdict(gpu, "throttle", "PASS", "no throttling seen")


def _name(pid: int, row_pids: Mapping[int, str], polled: Mapping[int, str]) -> str:
    given = row_pids.get(pid) or polled.get(pid)
    if not given:
        return process_name(pid)
    return given if given.startswith("pid ") else f"pid {pid} ({given})"


def _judge_processes(gpu: int, seen: dict[str, Any], row_pids: Mapping[int, str] | None,
                     static: dict[str, Any]) -> Verdict:
    polled = seen.get("foreign")
    hidden = int(seen.get("hidden_others") or 0)
    if polled is None and row_pids is None and not hidden:
        return _skip(gpu, "processes", "processes on the GPU not readable", static)
    rows = {int(p): name for p, name in (row_pids or {}).items()}
    pids = sorted(set(polled or ()) | set(rows))
    names = [_name(p, rows, polled or {}) for p in pids]
    parts = []
    if names:
        parts.append(", ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else ""))
    if hidden:
        host = " ".join(map(str, seen.get("hidden_pids") or ()))
        parts.append(f"{hidden} other process{'es' if hidden > 1 else ''} (host pids {host})")
    if parts:
        return _verdict(gpu, "processes", "WARN", "GPU shared with " + "; ".join(parts), notes=names[3:])
    return _verdict(gpu, "processes", "PASS", "no other process on the GPU")


def judge(gpu: int, static: dict[str, Any], seen: dict[str, Any], row_throttle: Iterable[str] = frozenset(),
          row_pids: Mapping[int, str] | None = None) -> list[Verdict]:
    """One fact verdict per check (:data:`CHECKS`) for ``gpu`` from its static facts (:meth:`FactsReader.static`)
    and what :class:`FactsWatch` saw (:meth:`FactsWatch.seen`). ``row_throttle``: throttle reasons the measured rows
    recorded; ``row_pids``: other processes the rows recorded, {pid: name} (None: the rows do not know; {}: they saw
    none). Rules: the module docstring."""
    return [
        _judge_pcie(gpu, static, seen),
        _judge_ecc(gpu, static),
        _judge_remap(gpu, static),
        _judge_links(gpu, static),
        _judge_throttle(gpu, seen, row_throttle, static),
        _judge_processes(gpu, seen, row_pids, static),
    ]


__all__ = [
    "CHECKS", "TITLES", "STATIC_KEYS", "POLL_KEYS", "FAKE_ENV", "FAKE_STATIC", "FAKE_POLL", "NVML_HINT",
    "AMDSMI_HINT", "NOT_ON_ROCM", "THROTTLE_FAIL", "THROTTLE_WARN", "THROTTLE_BENIGN",
    "FactsReader", "FactsUnavailable", "NullFacts", "NvmlFacts", "AmdSmiFacts", "FakeFacts",
    "open_facts", "process_tree", "FactsWatch", "judge", "Gpu",
]
