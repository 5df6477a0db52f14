"""Backend selection and the HIP path, with torch's CUDA/ROCm surface mocked (no GPU here)."""

import types

import pytest
import torch

from gpubench import backends
from gpubench.backends import gpu
from gpubench.errors import UsageError


def fake_torch_gpu(monkeypatch, *, hip: str | None, cuda: str | None, count: int = 2, arch: str = "gfx942"):
    monkeypatch.setattr(torch.version, "hip", hip, raising=False)
    monkeypatch.setattr(torch.version, "cuda", cuda, raising=False)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: count > 0)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: count)
    monkeypatch.setattr(torch.cuda, "set_device", lambda i: None)
    props = types.SimpleNamespace(name="AMD Instinct MI300X" if hip else "NVIDIA H100 80GB HBM3",
                                  L2_cache_size=4 << 20 if hip else 50 << 20, total_memory=192 << 30,
                                  major=9, minor=4, multi_processor_count=304, gcnArchName=arch,
                                  uuid="1234", pci_bus_id=0x1B, pci_domain_id=0, pci_device_id=0)
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda i: props)
    return props


def test_auto_picks_hip_on_a_rocm_torch(monkeypatch):
    fake_torch_gpu(monkeypatch, hip="6.4.1", cuda=None)
    assert backends.resolve_name("auto") == "hip"


def test_auto_picks_cuda_on_a_cuda_torch(monkeypatch):
    fake_torch_gpu(monkeypatch, hip=None, cuda="13.0")
    assert backends.resolve_name("auto") == "cuda"


def test_auto_falls_back_to_cpu_without_a_gpu(monkeypatch):
    fake_torch_gpu(monkeypatch, hip=None, cuda="13.0", count=0)
    assert backends.resolve_name("auto") == "cpu"


def test_cuda_backend_refused_on_a_rocm_torch_with_the_reason(monkeypatch):
    fake_torch_gpu(monkeypatch, hip="6.4.1", cuda=None)
    with pytest.raises(UsageError, match="is a ROCm build; install torch for CUDA"):
        backends.open_backend("cuda")


def test_hip_backend_identity_and_infinity_cache(monkeypatch):
    fake_torch_gpu(monkeypatch, hip="6.4.1", cuda=None)
    be = backends.open_backend("hip", 1)
    assert isinstance(be, gpu.HipBackend) and be.torch_device == "cuda:1"
    ident = be.identity()
    assert ident["runtime"] == "hip" and ident["runtime_version"] == "6.4.1" and ident["gpu_count"] == 2
    # MI300-class: rotation must span the 256 MB Infinity Cache behind L2, which torch does not report
    assert be.cache_bytes() == (4 << 20) + (256 << 20)
    assert be.pci_bus_id() == "00000000:1b:00.0"


def test_hip_backend_without_infinity_cache(monkeypatch):
    fake_torch_gpu(monkeypatch, hip="6.4.1", cuda=None, arch="gfx90a")
    assert backends.open_backend("hip").cache_bytes() == 4 << 20


def test_hip_telemetry_goes_through_amdsmi(monkeypatch):
    fake_torch_gpu(monkeypatch, hip="6.4.1", cuda=None)
    seen = {}

    def fake_open(backend, index, uuid=None, pci_bus_id=None):
        seen.update(backend=backend, index=index, uuid=uuid, pci=pci_bus_id)
        return "telemetry"

    monkeypatch.setattr("gpubench.backends.gpu.open_telemetry", fake_open)
    assert backends.open_backend("hip", 1).telemetry() == "telemetry"
    assert seen == {"backend": "hip", "index": 1, "uuid": "1234", "pci": "00000000:1b:00.0"}


def test_device_index_out_of_range(monkeypatch):
    fake_torch_gpu(monkeypatch, hip=None, cuda="13.0", count=1)
    with pytest.raises(UsageError, match="device 1 does not exist: backend 'cuda' has 1 device"):
        backends.open_backend("cuda", 1)


def test_unknown_backend_name():
    with pytest.raises(UsageError, match="unknown backend 'tpu'"):
        backends.open_backend("tpu")


def test_cpu_backend_reads_the_last_level_cache():
    from gpubench.backends.cpu import CpuBackend

    be = CpuBackend()
    assert be.cache_bytes() >= 1 << 20 and be.memory_bytes() > 1 << 30
    assert be.identity()["gpu_count"] == 0


def test_the_fake_device_charges_each_kernel_a_call_launches():
    # A graph replay of 1000 kernels is 1000 kernels' time, not one call's: else the engine batches hundreds of
    # replays into one sample, and each runs its 1000 operations on the CPU for real (minutes for launch --quick).
    from types import SimpleNamespace

    from gpubench.backends.fake import default_model

    def work(**extra):
        return SimpleNamespace(bytes=0, flops=0, extra=extra)

    assert default_model(work(), 0) == pytest.approx(5e-6)
    assert default_model(work(kernels_per_call=1000), 0) == pytest.approx(5e-3)
