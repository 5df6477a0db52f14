"""The host CPU through torch: timed with perf_counter_ns, since CPU ops finish when they return."""

from __future__ import annotations

import os
import platform
from pathlib import Path

import torch

from gpubench.backends.base import Backend
from gpubench.machine.memory_budget import host_available_bytes

_DEFAULT_LLC = 32 << 20  # when sysfs says nothing (non-Linux, containers that hide it)


def _last_level_cache_bytes() -> int:
    """Largest cache listed for cpu0 in sysfs (the L3 on most servers)."""
    best = 0
    for index in Path("/sys/devices/system/cpu/cpu0/cache").glob("index*"):
        try:
            text = (index / "size").read_text().strip().upper()
        except OSError:
            continue
        mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(text[-1:], 1)
        digits = text.rstrip("KMG")
        if digits.isdigit():
            best = max(best, int(digits) * mult)
    return best or _DEFAULT_LLC


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.lower().startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


class CpuBackend(Backend):
    name = "cpu"
    is_gpu = False

    @classmethod
    def available(cls) -> tuple[bool, str]:
        return True, ""

    @property
    def torch_device(self) -> str:
        return "cpu"

    def device_name(self) -> str:
        return cpu_model()

    def cache_bytes(self) -> int:
        return _last_level_cache_bytes()

    def memory_bytes(self) -> int:
        try:
            return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
        except (ValueError, OSError):
            return 8 << 30

    def available_bytes(self) -> int:
        return host_available_bytes() or self.memory_bytes()

    def device_key(self) -> str | None:
        return "the CPU"  # every process of the machine computes on its processors

    def identity(self) -> dict:
        return {
            "backend": self.name,
            "gpu_model": None,
            "gpu_count": 0,
            "runtime": None,
            "runtime_version": None,
            "memory_bytes": self.memory_bytes(),
            "torch_threads": torch.get_num_threads(),
        }
