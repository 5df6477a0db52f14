"""The check counts its GPUs without importing torch (gpubench.check.visible), as CUDA numbers them."""

import pytest

from gpubench.check import node, visible


class Nvml:
    def __init__(self, count=4, fail=False):
        self.count, self.fail, self.shut = count, fail, 0

    def nvmlInit(self):
        if self.fail:
            raise RuntimeError("NVML Shared Library Not Found")

    def nvmlDeviceGetCount(self):
        return self.count

    def nvmlShutdown(self):
        self.shut += 1


@pytest.mark.parametrize("mask, count", [
    (None, 4), ("0,1,2,3", 4), ("1,3", 2), ("2", 1),
    ("0,7,1", 1),  # CUDA stops at the first entry that names no device
    ("1,1", 1), ("-1", None), ("", None), ("GPU-8a1b2c3d", None), ("MIG-1d2e", None), ("0,GPU-8a1b", None),
])
def test_the_count_follows_cuda_visible_devices(mask, count):
    nv = Nvml()
    env = {} if mask is None else {"CUDA_VISIBLE_DEVICES": mask}
    assert visible.cuda_count(env, nv) == count
    assert nv.shut == 1


def test_without_nvml_or_gpus_torch_is_asked():
    assert visible.cuda_count({}, Nvml(fail=True)) is None
    assert visible.cuda_count({}, Nvml(count=0)) is None


def test_the_check_starts_without_the_torch_backend_where_nvml_counts(monkeypatch):
    monkeypatch.setattr(visible, "cuda_count", lambda: 2)

    def no_torch(name):
        raise AssertionError(f"backend {name} loaded (torch imported) before the stations start")

    monkeypatch.setattr(node, "backend_class", no_torch)
    monkeypatch.setattr(node, "resolve_name", no_torch)
    assert node._resolve(node.Request(devices="all")) == ("cuda", [0, 1])
    assert node._resolve(node.Request(backend="cuda", devices="1")) == ("cuda", [1])
    with pytest.raises(AssertionError):  # hip, fake and cpu go the old way
        node._resolve(node.Request(backend="hip"))
