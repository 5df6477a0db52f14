"""Fingerprint tests: only identity facts may move the hash."""

import json
import os
import sys
import types

import pytest

from gpubench.machine import fingerprint as fp
from gpubench.machine.telemetry import Telemetry

DEVICE = {"backend": "cuda", "gpu_model": "NVIDIA H100 80GB HBM3",
          "gpu_count": 8, "runtime": "cuda", "runtime_version": "12.4",
          "memory_bytes": 85_045_870_592}

TUNING_PREFIXES = ("NCCL_", "RCCL_", "TORCH_NCCL_")
TUNING_NAMES = ("CUDA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES",
                "ROCR_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER", "OMP_NUM_THREADS")


class FakeTelemetry(Telemetry):
    source = "nvml"

    def __init__(self, driver="550.54.15", sm=1980.0, temp=45.0, power=120.0,
                 throttle=(), limit=700.0, max_sm=1980.0):
        super().__init__()
        self.match = "uuid"
        self.driver, self.limit, self.max_sm = driver, limit, max_sm
        self.r = {"sm_clock_mhz": sm, "mem_clock_mhz": 2619.0, "power_w": power,
                  "temp_c": temp, "throttle": sorted(throttle)}

    def read(self):
        return dict(self.r)

    def static(self):
        return {"driver_version": self.driver, "max_sm_clock_mhz": self.max_sm,
                "max_mem_clock_mhz": 2619.0, "power_limit_w": self.limit,
                "uuid": "GPU-x", "pci_bus_id": "0000:1b:00.0"}


@pytest.fixture
def clean_env(monkeypatch):
    for k in list(os.environ):
        if k in TUNING_NAMES or k.startswith(TUNING_PREFIXES):
            monkeypatch.delenv(k)
    return monkeypatch


def test_identity_hash_is_sha256_of_sorted_json():
    assert fp.identity_hash({"b": [1, 2], "a": 1}) == "e6f20bdc3757e5e7"


def test_identity_contents(clean_env):
    out = fp.collect(DEVICE, "lab-a", FakeTelemetry())
    ident = out["identity"]
    for k, v in DEVICE.items():
        assert ident[k] == v
    assert ident["cluster"] == "lab-a"
    assert ident["driver_version"] == "550.54.15"
    assert ident["cpu_count"] == os.cpu_count()
    assert ident["python"] == "{}.{}.{}".format(*sys.version_info[:3])
    assert isinstance(ident["hostname"], str) and ident["hostname"]
    assert ident["os"].startswith(__import__("platform").system())
    assert out["fingerprint"] == fp.identity_hash(ident)
    assert len(out["fingerprint"]) == 16
    int(out["fingerprint"], 16)
    assert DEVICE == {"backend": "cuda", "gpu_model": "NVIDIA H100 80GB HBM3",
                      "gpu_count": 8, "runtime": "cuda", "runtime_version": "12.4",
                      "memory_bytes": 85_045_870_592}  # input not mutated


def test_volatile_contents(clean_env):
    clean_env.setenv("NCCL_ALGO", "Ring")
    clean_env.setenv("RCCL_MSCCL_ENABLE", "0")
    clean_env.setenv("TORCH_NCCL_BLOCKING_WAIT", "1")
    clean_env.setenv("OMP_NUM_THREADS", "8")
    clean_env.setenv("CUDA_VISIBLE_DEVICES", "2,3")
    clean_env.setenv("NCCLX", "not a tuning variable")
    clean_env.setenv("MY_NCCL_THING", "nor this")
    clean_env.setenv("NCCL_TESTS_DIR", "/home/me/nccl-tests/build")  # gpubench's own option, not NCCL's
    vol = fp.collect(DEVICE, "lab-a", FakeTelemetry(throttle=["SwPowerCap"]))["volatile"]
    assert vol["env"] == {"CUDA_VISIBLE_DEVICES": "2,3", "NCCL_ALGO": "Ring",
                          "OMP_NUM_THREADS": "8", "RCCL_MSCCL_ENABLE": "0",
                          "TORCH_NCCL_BLOCKING_WAIT": "1"}
    assert {k: vol[k] for k in ("sm_clock_mhz", "mem_clock_mhz", "power_w",
                                "temp_c", "throttle", "power_limit_w",
                                "max_sm_clock_mhz", "max_mem_clock_mhz",
                                "telemetry_source", "telemetry_match")} == {
        "sm_clock_mhz": 1980.0, "mem_clock_mhz": 2619.0, "power_w": 120.0,
        "temp_c": 45.0, "throttle": ["SwPowerCap"], "power_limit_w": 700.0,
        "max_sm_clock_mhz": 1980.0, "max_mem_clock_mhz": 2619.0,
        "telemetry_source": "nvml", "telemetry_match": "uuid"}
    assert len(vol["loadavg"]) == 3


def test_hash_stable_when_only_volatile_changes(clean_env):
    a = fp.collect(DEVICE, "lab-a", FakeTelemetry())
    clean_env.setenv("NCCL_ALGO", "Tree")
    clean_env.setenv("CUDA_VISIBLE_DEVICES", "4")
    clean_env.setattr(os, "getloadavg", lambda: (31.0, 20.0, 9.5))
    b = fp.collect(DEVICE, "lab-a", FakeTelemetry(
        sm=1410.0, temp=83.0, power=690.0, throttle=["HwSlowdown"],
        limit=500.0, max_sm=1755.0))
    assert a["volatile"] != b["volatile"]
    assert b["volatile"]["loadavg"] == [31.0, 20.0, 9.5]
    assert a["identity"] == b["identity"]
    assert a["fingerprint"] == b["fingerprint"]


@pytest.mark.parametrize("change", [
    lambda d, c, t: (dict(d, gpu_model="NVIDIA A100-SXM4-80GB"), c, t),
    lambda d, c, t: (dict(d, gpu_count=4), c, t),
    lambda d, c, t: (d, "lab-b", t),
    lambda d, c, t: (d, c, FakeTelemetry(driver="555.42.06")),
])
def test_hash_changes_with_identity(clean_env, change):
    base = (DEVICE, "lab-a", FakeTelemetry())
    a = fp.collect(*base)
    b = fp.collect(*change(*base))
    assert a["fingerprint"] != b["fingerprint"]


def test_json_round_trip(clean_env):
    clean_env.setenv("NCCL_DEBUG", "INFO")
    out = fp.collect(DEVICE, "lab-a", FakeTelemetry(throttle=["GpuIdle"]))
    assert json.loads(json.dumps(out)) == out


def test_without_telemetry(clean_env):
    out = fp.collect(DEVICE, "lab-a", None)
    assert json.loads(json.dumps(out)) == out
    assert out["identity"]["driver_version"] is None
    vol = out["volatile"]
    assert vol["telemetry_source"] == "none"
    assert all(vol[k] is None for k in ("sm_clock_mhz", "power_w", "temp_c",
                                        "throttle", "power_limit_w"))
    # Same machine, same stack: no-telemetry runs group together.
    assert out["fingerprint"] == fp.collect(DEVICE, "lab-a")["fingerprint"]


def test_backend_driver_version_kept_without_telemetry(clean_env):
    out = fp.collect(dict(DEVICE, driver_version="6.8.5"), "lab-a")
    assert out["identity"]["driver_version"] == "6.8.5"


def test_telemetry_that_raises_does_not_break_collect(clean_env):
    class Broken(Telemetry):
        def read(self):
            raise RuntimeError("x")

        def static(self):
            raise RuntimeError("y")
    out = fp.collect(DEVICE, "lab-a", Broken())
    assert out["volatile"]["temp_c"] is None
    assert out["identity"]["driver_version"] is None


def test_torch_not_importable(clean_env):
    clean_env.setitem(sys.modules, "torch", None)
    ident = fp.collect(DEVICE, "lab-a")["identity"]
    assert (ident["torch"], ident["nccl"], ident["collective_lib"]) == (None, None, None)


def fake_torch(cuda=None, hip=None, nccl=(2, 21, 5)):
    def version():
        if isinstance(nccl, Exception):
            raise nccl
        return nccl
    return types.SimpleNamespace(
        __version__="2.5.1",
        version=types.SimpleNamespace(cuda=cuda, hip=hip),
        cuda=types.SimpleNamespace(nccl=types.SimpleNamespace(version=version)))


@pytest.mark.parametrize("torch_kw,want", [
    ({"cuda": "12.4"}, ("2.5.1", "2.21.5", "nccl")),
    ({"hip": "6.2.41133"}, ("2.5.1", "2.21.5", "rccl")),
    ({}, ("2.5.1", None, None)),                                   # CPU build
    ({"cuda": "12.4", "nccl": RuntimeError("no nccl")}, ("2.5.1", None, None)),
])
def test_torch_and_collective_versions(clean_env, torch_kw, want):
    clean_env.setitem(sys.modules, "torch", fake_torch(**torch_kw))
    ident = fp.collect(DEVICE, "lab-a")["identity"]
    assert (ident["torch"], ident["nccl"], ident["collective_lib"]) == want


def test_real_torch_cpu_build(clean_env):
    torch = pytest.importorskip("torch")
    ident = fp.collect(DEVICE, "lab-a")["identity"]
    assert ident["torch"] == str(torch.__version__)
    if not (torch.version.cuda or getattr(torch.version, "hip", None)):
        assert ident["nccl"] is None and ident["collective_lib"] is None


def test_cpu_model_from_proc_cpuinfo(monkeypatch, tmp_path):
    info = tmp_path / "cpuinfo"
    info.write_text("processor\t: 0\nvendor_id\t: AuthenticAMD\n"
                    "model name\t: AMD EPYC 9654 96-Core Processor\n")
    real_open = open
    monkeypatch.setattr("builtins.open", lambda p, *a, **k: real_open(
        info if p == "/proc/cpuinfo" else p, *a, **k))
    assert fp._cpu_model() == "AMD EPYC 9654 96-Core Processor"


def test_cpu_model_fallback_without_proc(monkeypatch):
    def no_proc(*a, **k):
        raise FileNotFoundError("/proc/cpuinfo")
    monkeypatch.setattr("builtins.open", no_proc)
    monkeypatch.setattr(fp.platform, "processor", lambda: "arm")
    assert fp._cpu_model() == "arm"
