"""Telemetry tests. No GPU or vendor library is needed: pynvml and amdsmi are
replaced by small fake modules that behave like the real ones' Python API."""

import enum
import sys
import threading
import time
import types

import pytest

from gpubench.machine import telemetry as tm
from gpubench.machine.telemetry import (AmdSmiTelemetry, NvmlTelemetry, Sampler,
                                Telemetry, normalize_pci_bus_id, open_telemetry)

NULL_READ = {"sm_clock_mhz": None, "mem_clock_mhz": None, "power_w": None,
             "temp_c": None, "throttle": None}


# --------------------------------------------------------------------- NVML

class NVMLError(Exception):
    pass


class Dev:
    def __init__(self, uuid, bus, sm=1410, mem=1593, mw=250_000, temp=40,
                 reasons=0, limit_mw=400_000, max_sm=1980, max_mem=2619):
        self.uuid, self.bus = uuid, bus
        self.sm, self.mem, self.mw, self.temp = sm, mem, mw, temp
        self.reasons, self.limit_mw = reasons, limit_mw
        self.max_sm, self.max_mem = max_sm, max_mem
        self.broken = set()   # names of calls that raise for this device

    def check(self, name):
        if name in self.broken:
            raise NVMLError(f"{name}: Not Supported")


def fake_nvml(devices, event_api=True, init_error=None):
    """A pynvml stand-in. Strings come back as bytes, as old pynvml did."""
    nv = types.ModuleType("pynvml")
    nv.calls = []
    nv.NVML_CLOCK_SM, nv.NVML_CLOCK_MEM, nv.NVML_TEMPERATURE_GPU = 1, 2, 0
    nv.NVMLError = NVMLError

    def init():
        nv.calls.append("init")
        if init_error:
            raise init_error
    nv.nvmlInit = init
    nv.nvmlShutdown = lambda: nv.calls.append("shutdown")
    nv.nvmlSystemGetDriverVersion = lambda: b"550.54.15"

    def by_index(i):
        nv.calls.append(("index", i))
        if not 0 <= i < len(devices):
            raise NVMLError("Invalid Argument")
        return devices[i]

    def by_uuid(u):
        nv.calls.append(("uuid", u))
        for d in devices:
            if d.uuid == u:
                return d
        raise NVMLError("Not Found")

    def by_pci(b):
        nv.calls.append(("pci", b))
        for d in devices:
            if d.bus == b:   # exact spelling, like a strict NVML would
                return d
        raise NVMLError("Not Found")

    nv.nvmlDeviceGetHandleByIndex = by_index
    nv.nvmlDeviceGetHandleByUUID = by_uuid
    nv.nvmlDeviceGetHandleByPciBusId = by_pci

    def clock(h, kind):
        h.check("clock")
        return {1: h.sm, 2: h.mem}[kind]

    def max_clock(h, kind):
        h.check("max_clock")
        return {1: h.max_sm, 2: h.max_mem}[kind]

    def power(h):
        h.check("power")
        return h.mw

    def temp(h, sensor):
        assert sensor == 0
        h.check("temp")
        return h.temp

    def reasons(h):
        h.check("reasons")
        return h.reasons

    def limit(h):
        h.check("limit")
        return h.limit_mw

    nv.nvmlDeviceGetClockInfo = clock
    nv.nvmlDeviceGetMaxClockInfo = max_clock
    nv.nvmlDeviceGetPowerUsage = power
    nv.nvmlDeviceGetTemperature = temp
    nv.nvmlDeviceGetEnforcedPowerLimit = limit
    nv.nvmlDeviceGetUUID = lambda h: h.uuid.encode()
    nv.nvmlDeviceGetPciInfo = lambda h: types.SimpleNamespace(busId=h.bus.encode())
    nv.nvmlDeviceGetCurrentClocksThrottleReasons = reasons
    if event_api:
        nv.nvmlDeviceGetCurrentClocksEventReasons = reasons
    return nv


def three_gpus():
    return [Dev("GPU-aaaa-0000", "00000000:1B:00.0", sm=1000),
            Dev("GPU-bbbb-1111", "00000000:2C:00.0", sm=1100),
            Dev("GPU-cccc-2222", "00000000:3D:00.0", sm=1200, mw=312_456,
                temp=67, mem=2619, reasons=0x1 | 0x4 | 0x20)]


@pytest.fixture
def nvml(monkeypatch):
    nv = fake_nvml(three_gpus())
    monkeypatch.setitem(sys.modules, "pynvml", nv)
    return nv


def test_nvml_read_converts_units_and_decodes_reasons(nvml):
    t = open_telemetry("cuda", 2)
    assert (t.source, t.match, t.why) == ("nvml", "index", None)
    assert t.read() == {"sm_clock_mhz": 1200.0, "mem_clock_mhz": 2619.0,
                        "power_w": 312.456, "temp_c": 67.0,
                        "throttle": ["GpuIdle", "SwPowerCap", "SwThermalSlowdown"]}


def test_nvml_static_decodes_bytes_and_normalises_bus_id(nvml):
    s = open_telemetry("cuda", 2).static()
    assert s == {"driver_version": "550.54.15", "max_sm_clock_mhz": 1980.0,
                 "max_mem_clock_mhz": 2619.0, "power_limit_w": 400.0,
                 "uuid": "GPU-cccc-2222", "pci_bus_id": "0000:3d:00.0"}


def test_nvml_every_documented_reason_bit():
    nv = fake_nvml([Dev("GPU-x", "00000000:01:00.0", reasons=0x1FF)])
    names = NvmlTelemetry(0, nvml=nv).read()["throttle"]
    assert names == sorted(["GpuIdle", "ApplicationsClocksSetting", "SwPowerCap",
                            "HwSlowdown", "SyncBoost", "SwThermalSlowdown",
                            "HwThermalSlowdown", "HwPowerBrakeSlowdown",
                            "DisplayClockSetting"])


def test_nvml_no_reasons_is_empty_list():
    nv = fake_nvml([Dev("GPU-x", "00000000:01:00.0", reasons=0)])
    assert NvmlTelemetry(0, nvml=nv).read()["throttle"] == []


def test_nvml_reason_bits_come_from_module_constants_and_unknown_bits_kept():
    nv = fake_nvml([Dev("GPU-x", "00000000:01:00.0", reasons=0x4 | 0x1000 | 0x200)])
    # A module that (hypothetically) renumbers a reason must win over the table.
    nv.nvmlClocksEventReasonSwPowerCap = 0x1000
    assert NvmlTelemetry(0, nvml=nv).read()["throttle"] == [
        "SwPowerCap", "Unknown0x200", "Unknown0x4"]


def test_nvml_throttle_falls_back_to_old_api():
    dev = Dev("GPU-x", "00000000:01:00.0", reasons=0x8)
    nv = fake_nvml([dev], event_api=False)
    nv.nvmlClocksThrottleReasonHwSlowdown = 0x8
    assert not hasattr(nv, "nvmlDeviceGetCurrentClocksEventReasons")
    assert NvmlTelemetry(0, nvml=nv).read()["throttle"] == ["HwSlowdown"]


def test_nvml_matches_torch_style_uuid_before_pci_and_index(nvml):
    # torch prints the UUID without "GPU-"; index 0 would be the wrong GPU.
    t = open_telemetry("cuda", 0, uuid="cccc-2222", pci_bus_id="0000:2c:00.0")
    assert t.match == "uuid"
    assert t.read()["sm_clock_mhz"] == 1200.0
    assert ("uuid", "GPU-cccc-2222") in nvml.calls
    assert not any(c[0] in ("pci", "index") for c in nvml.calls if isinstance(c, tuple))


def test_nvml_accepts_prefixed_uuid(nvml):
    t = open_telemetry("cuda", 0, uuid="GPU-bbbb-1111")
    assert (t.match, t.read()["sm_clock_mhz"]) == ("uuid", 1100.0)


def test_nvml_pci_match_when_uuid_unknown(nvml):
    t = open_telemetry("cuda", 0, uuid="dead-beef", pci_bus_id="0000:3d:00.0")
    assert t.match == "pci"
    assert t.read()["sm_clock_mhz"] == 1200.0
    # Domain widened to NVML's 8 digits and upper-cased.
    assert ("pci", "00000000:3D:00.0") in nvml.calls


def test_nvml_index_only_when_no_identity_is_given(nvml):
    t = open_telemetry("cuda", 1)
    assert (t.match, t.read()["sm_clock_mhz"]) == ("index", 1100.0)


def test_nvml_identity_that_matches_nothing_reads_no_gpu(nvml):
    # Falling back to the index here could read another GPU's clocks (CUDA_VISIBLE_DEVICES renumbers).
    t = open_telemetry("cuda", 1, uuid="dead-beef", pci_bus_id="0000:99:00.0")
    assert t.source == "none" and "no NVML device" in t.why


def test_nvml_one_broken_field_is_none_others_intact(nvml):
    dev = nvml.nvmlDeviceGetHandleByIndex(2)
    dev.broken = {"power", "limit"}
    t = open_telemetry("cuda", 2)
    r = t.read()
    assert r["power_w"] is None
    assert r["sm_clock_mhz"] == 1200.0 and r["temp_c"] == 67.0
    assert r["throttle"] == ["GpuIdle", "SwPowerCap", "SwThermalSlowdown"]
    s = t.static()
    assert s["power_limit_w"] is None and s["max_sm_clock_mhz"] == 1980.0


def test_nvml_all_fields_broken_never_raises(nvml):
    dev = nvml.nvmlDeviceGetHandleByIndex(0)
    dev.broken = {"clock", "power", "temp", "reasons", "max_clock", "limit"}
    t = open_telemetry("cuda", 0)
    assert t.read() == NULL_READ
    assert t.static()["max_sm_clock_mhz"] is None


def test_missing_pynvml_gives_null_with_why(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", None)   # import now fails
    t = open_telemetry("cuda", 0)
    assert type(t) is Telemetry and t.source == "none"
    assert t.why == "pynvml not installed"
    assert t.read() == NULL_READ
    assert set(t.static()) == set(tm.STATIC_KEYS)
    assert all(v is None for v in t.static().values())


def test_nvml_init_failure_gives_null_with_why(monkeypatch):
    nv = fake_nvml(three_gpus(), init_error=NVMLError("Driver Not Loaded"))
    monkeypatch.setitem(sys.modules, "pynvml", nv)
    t = open_telemetry("cuda", 0)
    assert t.source == "none"
    assert t.why.startswith("nvmlInit failed") and "Driver Not Loaded" in t.why


def test_nvml_unmatched_device_gives_null_and_shuts_down(nvml):
    t = open_telemetry("cuda", 7)
    assert t.source == "none" and "no NVML device" in t.why
    assert nvml.calls.count("shutdown") == 1


def test_nvml_close_shuts_down_once(nvml):
    t = open_telemetry("cuda", 0)
    t.close()
    t.close()
    assert nvml.calls.count("shutdown") == 1


def test_other_backends_get_null_telemetry():
    t = open_telemetry("cpu", 0)
    assert t.source == "none" and "cpu" in t.why and t.read() == NULL_READ


@pytest.mark.parametrize("raw,want", [
    ("00000000:1B:00.0", "0000:1b:00.0"),
    (b"0000:1b:00.0", "0000:1b:00.0"),
    ("1b:00.0", "0000:1b:00.0"),
    ("0001:C1:00.1", "0001:c1:00.1"),
    ("garbage", "garbage"),
    (None, None),
])
def test_normalize_pci_bus_id(raw, want):
    assert normalize_pci_bus_id(raw) == want


# ------------------------------------------------------------------- amdsmi

class ClkType(enum.IntEnum):
    GFX = 1
    MEM = 5


class TempType(enum.IntEnum):
    EDGE = 0
    HOTSPOT = 1


class TempMetric(enum.IntEnum):
    CURRENT = 0


class AmdDev:
    def __init__(self, bdf, uuid, gfx=2100, mem=1300, **kw):
        self.bdf, self.uuid, self.gfx, self.mem = bdf, uuid, gfx, mem
        self.power = kw.get("power", {"current_socket_power": "N/A",
                                      "average_socket_power": 550})
        self.temps = kw.get("temps", {TempType.HOTSPOT: 71, TempType.EDGE: 48})
        self.violation = kw.get("violation")
        self.throttle_status = kw.get("throttle_status", 0)
        self.clk_key = kw.get("clk_key", "clk")


def fake_amdsmi(devices, with_violation=True):
    smi = types.ModuleType("amdsmi")
    smi.calls = []
    smi.AmdSmiClkType, smi.AmdSmiTemperatureType = ClkType, TempType
    smi.AmdSmiTemperatureMetric = TempMetric
    smi.amdsmi_init = lambda: smi.calls.append("init")
    smi.amdsmi_shut_down = lambda: smi.calls.append("shutdown")
    smi.amdsmi_get_processor_handles = lambda: list(devices)
    smi.amdsmi_get_gpu_device_bdf = lambda h: h.bdf
    smi.amdsmi_get_gpu_device_uuid = lambda h: h.uuid

    def clock_info(h, kind):
        assert isinstance(kind, ClkType)
        cur = h.gfx if kind is ClkType.GFX else h.mem
        return {h.clk_key: cur, "min_clk": 500, "max_clk": cur + 1000,
                "clk_locked": False, "clk_deep_sleep": False}

    def temp_metric(h, sensor, metric):
        assert metric is TempMetric.CURRENT
        if sensor not in h.temps:
            raise RuntimeError("AMDSMI_STATUS_NOT_SUPPORTED")
        return h.temps[sensor]

    def violation(h):
        if h.violation is None:
            raise RuntimeError("AMDSMI_STATUS_NOT_SUPPORTED")
        return h.violation

    smi.amdsmi_get_clock_info = clock_info
    smi.amdsmi_get_power_info = lambda h: dict(h.power)
    smi.amdsmi_get_temp_metric = temp_metric
    smi.amdsmi_get_gpu_metrics_info = lambda h: {"throttle_status": h.throttle_status}
    smi.amdsmi_get_gpu_driver_info = lambda h: {"driver_name": "amdgpu",
                                                "driver_version": "6.8.5"}
    smi.amdsmi_get_power_cap_info = lambda h: {"power_cap": 750_000_000}
    if with_violation:
        smi.amdsmi_get_violation_status = violation
    return smi


MI300_VIOLATION = {"acc_counter": 123, "per_ppt_pwr": 40,
                   "active_prochot_thrm": False, "active_ppt_pwr": True,
                   "active_socket_thrm": True, "active_vr_thrm": False,
                   "active_hbm_thrm": "N/A"}


def two_amd_gpus(**kw):
    return [AmdDev("0000:0c:00.0", "aaaa-0000", gfx=1000),
            AmdDev("0000:c1:00.0", "bbbb-1111", gfx=2100, **kw)]


def test_amdsmi_read(monkeypatch):
    smi = fake_amdsmi(two_amd_gpus(violation=MI300_VIOLATION))
    monkeypatch.setitem(sys.modules, "amdsmi", smi)
    t = open_telemetry("hip", 1)
    assert (t.source, t.match) == ("amdsmi", "index")
    assert t.read() == {"sm_clock_mhz": 2100.0, "mem_clock_mhz": 1300.0,
                        "power_w": 550.0, "temp_c": 71.0,
                        "throttle": ["ppt_pwr", "socket_thrm"]}


def test_amdsmi_current_power_preferred_and_old_clock_key():
    devs = [AmdDev("0000:0c:00.0", "u", gfx=1700, clk_key="cur_clk",
                   power={"current_socket_power": 612, "average_socket_power": 590})]
    r = AmdSmiTelemetry(0, amdsmi=fake_amdsmi(devs)).read()
    assert (r["sm_clock_mhz"], r["power_w"]) == (1700.0, 612.0)


def test_amdsmi_temperature_falls_back_to_edge():
    devs = [AmdDev("0000:0c:00.0", "u", temps={TempType.EDGE: 44})]
    assert AmdSmiTelemetry(0, amdsmi=fake_amdsmi(devs)).read()["temp_c"] == 44.0


def test_amdsmi_no_active_violation_is_empty_list():
    quiet = {k: (False if k.startswith("active_") else v)
             for k, v in MI300_VIOLATION.items()}
    devs = [AmdDev("0000:0c:00.0", "u", violation=quiet, throttle_status=5)]
    assert AmdSmiTelemetry(0, amdsmi=fake_amdsmi(devs)).read()["throttle"] == []


@pytest.mark.parametrize("with_violation", [False, True])
@pytest.mark.parametrize("status,want", [
    (0x24, ["throttle_status=0x24"]),
    (0, []),
    (True, ["throttle_status"]),     # ROCm 6.3 turns the word into a bool
    (False, []),
    ("N/A", None),
])
def test_amdsmi_throttle_status_fallback(with_violation, status, want):
    # Without the violation API, or where it is unsupported (pre-MI300).
    devs = [AmdDev("0000:0c:00.0", "u", violation=None, throttle_status=status)]
    smi = fake_amdsmi(devs, with_violation=with_violation)
    assert AmdSmiTelemetry(0, amdsmi=smi).read()["throttle"] == want


def test_amdsmi_matches_bdf_across_spellings(monkeypatch):
    monkeypatch.setitem(sys.modules, "amdsmi", fake_amdsmi(two_amd_gpus()))
    # HIP_VISIBLE_DEVICES=1 makes the second GPU HIP device 0.
    t = open_telemetry("hip", 0, pci_bus_id="00000000:C1:00.0")
    assert (t.match, t.read()["sm_clock_mhz"]) == ("pci", 2100.0)


def test_amdsmi_matches_uuid_first(monkeypatch):
    monkeypatch.setitem(sys.modules, "amdsmi", fake_amdsmi(two_amd_gpus()))
    t = open_telemetry("hip", 0, uuid="GPU-BBBB-1111", pci_bus_id="0000:0c:00.0")
    assert (t.match, t.read()["sm_clock_mhz"]) == ("uuid", 2100.0)


def test_amdsmi_static():
    t = AmdSmiTelemetry(1, amdsmi=fake_amdsmi(two_amd_gpus()))
    assert t.static() == {"driver_version": "6.8.5", "max_sm_clock_mhz": 3100.0,
                          "max_mem_clock_mhz": 2300.0, "power_limit_w": 750.0,
                          "uuid": "bbbb-1111", "pci_bus_id": "0000:c1:00.0"}


def test_amdsmi_unmatched_index_gives_null_and_shuts_down(monkeypatch):
    smi = fake_amdsmi(two_amd_gpus())
    monkeypatch.setitem(sys.modules, "amdsmi", smi)
    t = open_telemetry("hip", 5)
    assert t.source == "none" and "no amdsmi device" in t.why
    assert smi.calls == ["init", "shutdown"]


def test_missing_amdsmi_gives_null_with_why(monkeypatch):
    monkeypatch.setitem(sys.modules, "amdsmi", None)
    t = open_telemetry("hip", 0)
    assert (t.source, t.why) == ("none", "amdsmi not installed")


def test_amdsmi_init_failure_gives_null_with_why(monkeypatch):
    smi = fake_amdsmi(two_amd_gpus())

    def boom():
        raise RuntimeError("AMDSMI_STATUS_DRIVER_NOT_LOADED")
    smi.amdsmi_init = boom
    monkeypatch.setitem(sys.modules, "amdsmi", smi)
    t = open_telemetry("hip", 0)
    assert t.why.startswith("amdsmi_init failed") and "NOT_LOADED" in t.why


# ------------------------------------------------------------------ Sampler

def reading(sm, mem, w, temp, throttle):
    return {"sm_clock_mhz": sm, "mem_clock_mhz": mem, "power_w": w,
            "temp_c": temp, "throttle": throttle}


class Scripted(Telemetry):
    """Returns the scripted readings in order, then raises forever; `done`
    is set once the script is used up, so tests need not guess timings."""

    def __init__(self, script):
        super().__init__()
        self.script = list(script)
        self.done = threading.Event()
        self.failures = 0

    def read(self):
        if self.script:
            r = self.script.pop(0)
            if not self.script:
                self.done.set()
            return r
        self.failures += 1
        raise RuntimeError("sensor gone")


@pytest.fixture
def no_thread_errors(monkeypatch):
    seen = []
    monkeypatch.setattr(threading, "excepthook", lambda args: seen.append(args))
    return seen


def test_sampler_summary_exact(no_thread_errors):
    tel = Scripted([
        reading(1000, 2000, 100.0, 50, []),
        reading(1400, 2000, 300.0, 70, ["SwPowerCap"]),
        reading(None, None, None, None, None),
        reading(1200, 2600, 200.0, 65, ["SwPowerCap", "HwSlowdown"]),
        reading(1300, 2600, 250.0, 60, []),
    ])
    with Sampler(tel, interval_s=0.005) as s:
        assert tel.done.wait(2.0)
        deadline = time.monotonic() + 2.0
        # Let the thread hit the exception path too before leaving.
        while tel.failures == 0 and time.monotonic() < deadline:
            time.sleep(0.005)
        assert tel.failures > 0
    assert s.summary() == {"sm_clock_mhz": 1250.0, "mem_clock_mhz": 2300.0,
                           "power_w": 225.0, "temp_c": 70.0,
                           "throttle": "HwSlowdown,SwPowerCap", "readings": 5}
    assert not s._thread.is_alive()
    assert no_thread_errors == []


def test_sampler_enter_and_exit_readings_even_for_short_block():
    tel = Scripted([reading(1, 2, 3.0, 4, []), reading(5, 6, 7.0, 8, [])] * 50)
    with Sampler(tel, interval_s=60) as s:
        pass
    assert s.summary()["readings"] == 2


def test_sampler_throttle_empty_vs_unreadable():
    ok = Scripted([reading(1, 1, 1.0, 1, [])] * 100)
    with Sampler(ok, interval_s=60) as s:
        pass
    assert s.summary()["throttle"] == ""
    with Sampler(Telemetry(), interval_s=60) as s:
        pass
    assert s.summary() == {"sm_clock_mhz": None, "mem_clock_mhz": None,
                           "power_w": None, "temp_c": None, "throttle": None,
                           "readings": 2}


def test_sampler_survives_read_that_always_raises(no_thread_errors):
    tel = Scripted([])
    with Sampler(tel, interval_s=0.002) as s:
        deadline = time.monotonic() + 2.0
        while tel.failures < 5 and time.monotonic() < deadline:
            time.sleep(0.002)
    assert tel.failures >= 5
    assert s.summary()["readings"] == 0
    assert not s._thread.is_alive()
    assert no_thread_errors == []


def test_sampler_thread_is_daemon_and_stops_promptly():
    with Sampler(Telemetry(), interval_s=30) as s:
        assert s._thread.daemon and s._thread.is_alive()
        assert s._thread in threading.enumerate()
        t0 = time.monotonic()
    # Event.wait wakes on exit; a sleep(interval) loop would take 30 s here.
    assert time.monotonic() - t0 < 1.0
    assert not s._thread.is_alive()
    assert s._thread not in threading.enumerate()


def test_sampler_does_not_swallow_block_exceptions():
    with pytest.raises(ZeroDivisionError):
        with Sampler(Telemetry(), interval_s=30) as s:
            1 / 0
    assert not s._thread.is_alive()


def test_amdsmi_identity_that_matches_nothing_reads_no_gpu(monkeypatch):
    smi = fake_amdsmi(two_amd_gpus())
    monkeypatch.setitem(sys.modules, "amdsmi", smi)
    t = open_telemetry("hip", 1, uuid="ffff-9999", pci_bus_id="0000:77:00.0")
    assert t.source == "none" and "no amdsmi device" in t.why
