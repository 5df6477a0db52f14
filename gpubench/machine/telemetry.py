"""Device state (clocks, power, temperature, throttling) during a measurement.

A benchmark number is only comparable to another if the GPU ran at similar
clocks and was not throttling, so every measurement can be paired with a
summary of what the device was doing while it ran.

Sources:
  * NVIDIA: NVML through nvidia-ml-py (module ``pynvml``).
  * AMD: ROCm's ``amdsmi`` Python package. This path was written from the
    amdsmi Python interface source and API docs (ROCm 6.x) and has only been
    exercised against a fake module; it has NOT run on AMD hardware yet.

Both libraries are imported lazily so that this module imports on machines
that have neither. Nothing here raises on a missing or broken library:
``open_telemetry`` falls back to the null ``Telemetry`` and says why.
"""

from __future__ import annotations

import importlib
import statistics
import threading

READ_KEYS = ("sm_clock_mhz", "mem_clock_mhz", "power_w", "temp_c", "throttle")
STATIC_KEYS = ("driver_version", "max_sm_clock_mhz", "max_mem_clock_mhz",
               "power_limit_w", "uuid", "pci_bus_id")

# NVML clock-event (formerly "throttle") reason bits, documented values. The
# pynvml module's own constants win where present, in case NVML renumbers.
_NVML_REASONS = (
    ("GpuIdle", 0x1),
    ("ApplicationsClocksSetting", 0x2),
    ("SwPowerCap", 0x4),
    ("HwSlowdown", 0x8),
    ("SyncBoost", 0x10),
    ("SwThermalSlowdown", 0x20),
    ("HwThermalSlowdown", 0x40),
    ("HwPowerBrakeSlowdown", 0x80),
    ("DisplayClockSetting", 0x100),
)


class TelemetryUnavailable(Exception):
    """Raised by a vendor Telemetry constructor; the message becomes `.why`."""


def read_or_none(fn):
    """``fn()``, or None where it raises: one unreadable sensor (unsupported on this SKU, permission, MIG) must
    not cost the others, so every field is read on its own. Shared with gpubench.check's health facts readers."""
    try:
        return fn()
    except Exception:
        return None


def _num(x):
    # Vendor libraries signal "unsupported" with strings such as "N/A";
    # bool is excluded because amdsmi uses it for flags, not quantities.
    if isinstance(x, bool) or not isinstance(x, (int, float)):
        return None
    return float(x)


def _str(x):
    if x is None:
        return None
    return x.decode(errors="replace") if isinstance(x, bytes) else str(x)


def _bdf_parts(bus_id):
    """(domain, bus, device, function) from any common PCI bus id spelling."""
    s = _str(bus_id).strip().lower()
    head, _, func = s.partition(".")
    parts = head.split(":")
    if len(parts) == 2:
        parts.insert(0, "0")
    if len(parts) != 3:
        raise ValueError(f"not a PCI bus id: {bus_id!r}")
    return tuple(int(p, 16) for p in parts) + (int(func or "0", 16),)


def normalize_pci_bus_id(bus_id):
    """Canonical lower-case 'dddd:bb:dd.f' form; NVML pads the domain to 8
    digits and upper-cases, sysfs/amdsmi/torch do not. Unparsable ids are
    returned as given (decoded), None stays None."""
    if bus_id is None:
        return None
    try:
        d, b, dev, f = _bdf_parts(bus_id)
    except ValueError:
        return _str(bus_id)
    return f"{d:04x}:{b:02x}:{dev:02x}.{f:x}"


def _uuid_key(u):
    # torch prints CUDA UUIDs without NVML's "GPU-" prefix; compare bare.
    s = _str(u).strip().lower()
    return s[4:] if s.startswith("gpu-") else s


class Telemetry:
    """Null telemetry: every reading is None. Vendor classes override."""

    source = "none"

    def __init__(self, why=None):
        self.why = why      # why this is the null source, if it is
        self.match = None   # "uuid" | "pci" | "index" for vendor sources

    def read(self) -> dict:
        """Volatile state now: clocks (MHz), power (W), temperature (C) and
        the sorted list of active throttle reasons ([] none, None unknown)."""
        return dict.fromkeys(READ_KEYS)

    def static(self) -> dict:
        """Facts that do not change during a run (None where unreadable)."""
        return dict.fromkeys(STATIC_KEYS)

    def processes(self) -> list[int] | None:
        """Pids of every process holding a context on the device, ours included (None: unknown). What
        :mod:`gpubench.machine.contention` reads to name a co-tenant."""
        return None

    def utilization(self) -> float | None:
        """Percent of the last sampling period in which the device ran anything, anyone's (None: unknown)."""
        return None

    def close(self) -> None:
        """Release the vendor library; safe to call more than once."""


class _VendorTelemetry(Telemetry):
    """Opening sequence shared by the vendor sources: import (or take) the library, init it, find the
    device, and shut the library down again if the device cannot be found."""

    _module: str  # import name of the vendor library
    _init: str  # its init function
    _shutdown: str
    _label: str  # how messages name it

    def __init__(self, device_index, uuid=None, pci_bus_id=None, lib=None):
        super().__init__()
        if lib is None:
            try:
                lib = importlib.import_module(self._module)
            except ImportError:
                raise TelemetryUnavailable(f"{self._module} not installed") from None
        self._lib = lib
        try:
            getattr(lib, self._init)()
        except Exception as e:
            raise TelemetryUnavailable(f"{self._init} failed: {e!r}") from None
        self._open = True
        try:
            self._h, self.match = self._find(device_index, uuid, pci_bus_id)
        except Exception as e:
            self.close()
            raise TelemetryUnavailable(
                f"no {self._label} device for index={device_index} uuid={uuid} "
                f"pci={pci_bus_id}: {e!r}") from None

    def _find(self, index, uuid, pci_bus_id):
        raise NotImplementedError

    @property
    def handle(self):
        """The vendor library's handle of this device (NVML's or amdsmi's), for readers of fields telemetry does
        not read (gpubench.check's health facts)."""
        return self._h

    def close(self) -> None:
        if getattr(self, "_open", False):
            self._open = False
            read_or_none(getattr(self._lib, self._shutdown))


class NvmlTelemetry(_VendorTelemetry):
    """NVIDIA telemetry through NVML (nvidia-ml-py). NVML reference-counts init/shutdown, so closing does
    not disturb other NVML users in the process."""

    source = "nvml"
    _module, _init, _shutdown, _label = "pynvml", "nvmlInit", "nvmlShutdown", "NVML"

    def __init__(self, device_index, uuid=None, pci_bus_id=None, nvml=None):
        super().__init__(device_index, uuid, pci_bus_id, lib=nvml)
        self._reasons = [
            (name, getattr(self._nv, "nvmlClocksEventReason" + name,
                           getattr(self._nv, "nvmlClocksThrottleReason" + name, bit)))
            for name, bit in _NVML_REASONS]

    @property
    def _nv(self):
        return self._lib

    def _find(self, index, uuid, pci_bus_id):
        # NVML numbers all GPUs on the host while CUDA numbers only the
        # visible ones (and may reorder them), so identity beats index.
        nv = self._nv
        if uuid:
            u = _str(uuid).strip()
            forms = [u] if u[:4].upper() in ("GPU-", "MIG-") else ["GPU-" + u, u]
            for form in forms:
                try:
                    return nv.nvmlDeviceGetHandleByUUID(form), "uuid"
                except Exception:
                    pass
        if pci_bus_id:
            try:
                d, b, dev, f = _bdf_parts(pci_bus_id)
                return nv.nvmlDeviceGetHandleByPciBusId(
                    f"{d:08X}:{b:02X}:{dev:02X}.{f:X}"), "pci"
            except Exception:
                pass
        if uuid or pci_bus_id:
            # An identity that matches nothing means the index would name another GPU: read none.
            raise LookupError("neither uuid nor pci bus id matches an NVML device")
        return nv.nvmlDeviceGetHandleByIndex(index), "index"

    def decode_reasons(self, mask):
        """NVML clock-event reason bits as sorted names (unknown bits as Unknown0x...); shared with check's facts."""
        names, known = [], 0
        for name, bit in self._reasons:
            known |= bit
            if mask & bit:
                names.append(name)
        rest, bit = mask & ~known, 1
        # Bits newer than our table are still reported, never dropped.
        while rest:
            if rest & bit:
                names.append(f"Unknown0x{bit:x}")
                rest &= ~bit
            bit <<= 1
        return sorted(names)

    def read(self) -> dict:
        """See Telemetry.read."""
        nv, h = self._nv, self._h
        sm = getattr(nv, "NVML_CLOCK_SM", 1)
        mem = getattr(nv, "NVML_CLOCK_MEM", 2)
        gpu_temp = getattr(nv, "NVML_TEMPERATURE_GPU", 0)
        # Renamed "clocks event reasons" in NVML 12.2; the old name is deprecated.
        reasons = (getattr(nv, "nvmlDeviceGetCurrentClocksEventReasons", None)
                   or nv.nvmlDeviceGetCurrentClocksThrottleReasons)
        return {
            "sm_clock_mhz": read_or_none(lambda: _num(nv.nvmlDeviceGetClockInfo(h, sm))),
            "mem_clock_mhz": read_or_none(lambda: _num(nv.nvmlDeviceGetClockInfo(h, mem))),
            "power_w": read_or_none(lambda: _num(nv.nvmlDeviceGetPowerUsage(h)) / 1000.0),
            "temp_c": read_or_none(lambda: _num(nv.nvmlDeviceGetTemperature(h, gpu_temp))),
            "throttle": read_or_none(lambda: self.decode_reasons(int(reasons(h)))),
        }

    def processes(self) -> list[int] | None:
        """See Telemetry.processes: compute and graphics contexts (a process may hold both)."""
        nv, h, pids, known = self._nv, self._h, [], False
        for name in ("nvmlDeviceGetComputeRunningProcesses", "nvmlDeviceGetGraphicsRunningProcesses"):
            got = read_or_none(lambda: getattr(nv, name)(h))
            if got is not None:
                known = True
                pids += [int(p.pid) for p in got]
        return sorted(set(pids)) if known else None

    def utilization(self) -> float | None:
        """See Telemetry.utilization."""
        return read_or_none(lambda: _num(self._nv.nvmlDeviceGetUtilizationRates(self._h).gpu))

    def static(self) -> dict:
        """See Telemetry.static."""
        nv, h = self._nv, self._h
        sm = getattr(nv, "NVML_CLOCK_SM", 1)
        mem = getattr(nv, "NVML_CLOCK_MEM", 2)
        return {
            "driver_version": read_or_none(lambda: _str(nv.nvmlSystemGetDriverVersion())),
            "max_sm_clock_mhz": read_or_none(lambda: _num(nv.nvmlDeviceGetMaxClockInfo(h, sm))),
            "max_mem_clock_mhz": read_or_none(lambda: _num(nv.nvmlDeviceGetMaxClockInfo(h, mem))),
            "power_limit_w": read_or_none(
                lambda: _num(nv.nvmlDeviceGetEnforcedPowerLimit(h)) / 1000.0),
            "uuid": read_or_none(lambda: _str(nv.nvmlDeviceGetUUID(h))),
            "pci_bus_id": read_or_none(
                lambda: normalize_pci_bus_id(nv.nvmlDeviceGetPciInfo(h).busId)),
        }


class AmdSmiTelemetry(_VendorTelemetry):
    """AMD telemetry through ROCm's amdsmi (untested on hardware, see module doc)."""

    source = "amdsmi"
    _module, _init, _shutdown, _label = "amdsmi", "amdsmi_init", "amdsmi_shut_down", "amdsmi"

    def __init__(self, device_index, uuid=None, pci_bus_id=None, amdsmi=None):
        super().__init__(device_index, uuid, pci_bus_id, lib=amdsmi)

    @property
    def _smi(self):
        return self._lib

    def _find(self, index, uuid, pci_bus_id):
        # HIP_VISIBLE_DEVICES/ROCR_VISIBLE_DEVICES renumber HIP devices but
        # not amdsmi's handle list, so identity beats index.
        smi = self._smi
        handles = list(smi.amdsmi_get_processor_handles())
        if uuid:
            want = _uuid_key(uuid)
            for h in handles:
                if read_or_none(lambda: _uuid_key(smi.amdsmi_get_gpu_device_uuid(h))) == want:
                    return h, "uuid"
        if pci_bus_id:
            want = normalize_pci_bus_id(pci_bus_id)
            for h in handles:
                got = read_or_none(lambda: normalize_pci_bus_id(smi.amdsmi_get_gpu_device_bdf(h)))
                if got == want:
                    return h, "pci"
        if uuid or pci_bus_id:
            # An identity that matches nothing means the index would name another GPU: read none.
            raise LookupError("neither uuid nor bdf matches an amdsmi device")
        if not 0 <= index < len(handles):
            raise IndexError(f"{len(handles)} amdsmi devices")
        return handles[index], "index"

    def _clock(self, kind, key):
        info = self._smi.amdsmi_get_clock_info(
            self._h, getattr(self._smi.AmdSmiClkType, kind))
        # ROCm < 6.2 called the current clock "cur_clk"; 6.2+ calls it "clk".
        if key == "clk" and "clk" not in info:
            key = "cur_clk"
        return _num(info.get(key))

    def _power(self):
        p = self._smi.amdsmi_get_power_info(self._h)
        # MI300 reports only the current socket power, older parts only the
        # average; the other one is "N/A".
        for key in ("current_socket_power", "average_socket_power"):
            v = _num(p.get(key))
            if v is not None:
                return v
        return None

    def _temp(self):
        smi = self._smi
        tt, metric = smi.AmdSmiTemperatureType, smi.AmdSmiTemperatureMetric.CURRENT
        # HOTSPOT was named JUNCTION before ROCm 6.0; EDGE is absent on MI300.
        for name in ("HOTSPOT", "JUNCTION", "EDGE"):
            sensor = getattr(tt, name, None)
            if sensor is None:
                continue
            v = read_or_none(lambda: _num(smi.amdsmi_get_temp_metric(self._h, sensor, metric)))
            if v is not None:
                return v
        return None

    def throttle_reasons(self):
        """Active throttle (violation) names, or None where unreadable; shared with check's health facts."""
        smi = self._smi
        # amdsmi_get_violation_status exists from ROCm 6.3 and only works on
        # MI300+; elsewhere fall back to the gpu_metrics throttle word.
        violation = getattr(smi, "amdsmi_get_violation_status", None)
        if violation is not None:
            status = read_or_none(lambda: violation(self._h)) or {}
            flags = {k[len("active_"):]: v for k, v in status.items()
                     if k.startswith("active_") and v != "N/A"}
            if flags:
                return sorted(k for k, v in flags.items() if v is True or v == 1)
        ts = smi.amdsmi_get_gpu_metrics_info(self._h)["throttle_status"]
        # ROCm 6.3 collapses the word to a bool; earlier versions give the bits.
        if isinstance(ts, bool):
            return ["throttle_status"] if ts else []
        if not isinstance(ts, int):
            return None
        return [f"throttle_status=0x{ts:x}"] if ts else []

    def read(self) -> dict:
        """See Telemetry.read."""
        return {
            "sm_clock_mhz": read_or_none(lambda: self._clock("GFX", "clk")),
            "mem_clock_mhz": read_or_none(lambda: self._clock("MEM", "clk")),
            "power_w": read_or_none(self._power),
            "temp_c": read_or_none(self._temp),
            "throttle": read_or_none(self.throttle_reasons),
        }

    def processes(self) -> list[int] | None:
        """See Telemetry.processes. ROCm 6 lists dicts with a pid; ROCm 5 listed handles to look up."""
        smi, h = self._smi, self._h
        got = read_or_none(lambda: smi.amdsmi_get_gpu_process_list(h))
        if got is None:
            return None
        pids = []
        for p in got:
            info = p if isinstance(p, dict) else read_or_none(lambda: smi.amdsmi_get_gpu_process_info(h, p)) or {}
            pid = info.get("pid")
            if isinstance(pid, int) and not isinstance(pid, bool):
                pids.append(pid)
        return sorted(set(pids))

    def utilization(self) -> float | None:
        """See Telemetry.utilization (the graphics engine's activity)."""
        return read_or_none(lambda: _num(self._smi.amdsmi_get_gpu_activity(self._h)["gfx_activity"]))

    def static(self) -> dict:
        """See Telemetry.static."""
        smi, h = self._smi, self._h
        return {
            "driver_version": read_or_none(
                lambda: _str(smi.amdsmi_get_gpu_driver_info(h)["driver_version"])),
            "max_sm_clock_mhz": read_or_none(lambda: self._clock("GFX", "max_clk")),
            "max_mem_clock_mhz": read_or_none(lambda: self._clock("MEM", "max_clk")),
            # Microwatts on bare-metal Linux per the amdsmi header.
            "power_limit_w": read_or_none(
                lambda: _num(smi.amdsmi_get_power_cap_info(h)["power_cap"]) / 1e6),
            "uuid": read_or_none(lambda: _str(smi.amdsmi_get_gpu_device_uuid(h))),
            "pci_bus_id": read_or_none(
                lambda: normalize_pci_bus_id(smi.amdsmi_get_gpu_device_bdf(h))),
        }


def open_telemetry(backend: str, device_index: int, uuid: str | None = None,
                   pci_bus_id: str | None = None) -> Telemetry:
    """Telemetry for one device of `backend` ("cuda" -> NVML, "hip" ->
    amdsmi, anything else -> null). Never raises: on any failure the null
    Telemetry comes back with `.why` saying what went wrong."""
    cls = {"cuda": NvmlTelemetry, "hip": AmdSmiTelemetry}.get(backend)
    if cls is None:
        return Telemetry(why=f"no telemetry for backend {backend!r}")
    try:
        return cls(device_index, uuid=uuid, pci_bus_id=pci_bus_id)
    except TelemetryUnavailable as e:
        return Telemetry(why=str(e))
    except Exception as e:
        return Telemetry(why=f"{cls.source} telemetry failed: {e!r}")


def _median(values):
    return float(statistics.median(values)) if values else None


class Sampler:
    """Context manager sampling telemetry.read() in a background thread.

    One reading is taken on entry, one every `interval_s` while the block
    runs, and one on exit, so even a block shorter than the interval gets
    two readings.
    """

    def __init__(self, telemetry: Telemetry, interval_s: float = 0.05):
        self.telemetry = telemetry
        self.interval_s = interval_s
        self._readings = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = None

    def _sample(self):
        # A failing sensor must not abort or hang the measurement it observes.
        try:
            r = self.telemetry.read()
        except Exception:
            return
        with self._lock:
            self._readings.append(r)

    def _run(self):
        while not self._stop.wait(self.interval_s):
            self._sample()

    def __enter__(self):
        self._stop.clear()
        self._sample()
        self._thread = threading.Thread(
            target=self._run, name="gpubench-telemetry", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        # Bounded: a read stuck in the driver must not stall the benchmark;
        # the daemon thread is then abandoned.
        self._thread.join(timeout=max(1.0, 4 * self.interval_s))
        self._sample()
        return False

    def summary(self) -> dict:
        """Median clocks and power, max temperature, the union of throttle
        reasons ("" none seen, None never readable) and the reading count."""
        with self._lock:
            rs = list(self._readings)

        def vals(key):
            return [r[key] for r in rs if r.get(key) is not None]

        temps = vals("temp_c")
        throttles = vals("throttle")
        return {
            "sm_clock_mhz": _median(vals("sm_clock_mhz")),
            "mem_clock_mhz": _median(vals("mem_clock_mhz")),
            "power_w": _median(vals("power_w")),
            "temp_c": float(max(temps)) if temps else None,
            "throttle": (",".join(sorted(set().union(*throttles)))
                         if throttles else None),
            "readings": len(rs),
        }
