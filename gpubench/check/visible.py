"""How many NVIDIA GPUs this process would see, read from NVML and CUDA_VISIBLE_DEVICES without importing torch.

The check's parent only starts its stations and reads facts; each station imports torch itself, all at once. Asking
torch for the device count first made every check wait for one more torch import before its stations started
(docs/measurements.md, 'check'). Where NVML cannot settle the count (no NVIDIA driver or
nvidia-ml-py, a ROCm host, CUDA_VISIBLE_DEVICES naming UUIDs or MIG instances) the answer is None and torch is asked
as before; a torch without CUDA is then refused by the stations, each in one line."""

from __future__ import annotations

import os
from typing import Any

from gpubench.machine.topology import with_nvml


def cuda_count(env: dict[str, str] | None = None, nvml: Any = None) -> int | None:
    """The GPUs CUDA would number 0..N-1 here, or None where NVML cannot tell (``nvml=`` takes a stand-in)."""
    env = os.environ if env is None else env
    present = with_nvml(lambda nv: int(nv.nvmlDeviceGetCount()), nvml)
    if not present:
        return None
    mask = env.get("CUDA_VISIBLE_DEVICES")
    if mask is None:
        return present
    seen: list[int] = []
    for entry in mask.split(","):  # CUDA reads the list up to its first entry that names no device
        entry = entry.strip()
        if not entry.lstrip("-").isdigit():
            if entry.startswith(("GPU-", "MIG-")):
                return None  # a UUID or a MIG instance: torch's count
            break
        index = int(entry)
        if index < 0 or index >= present or index in seen:
            break
        seen.append(index)
    return len(seen) or None


__all__ = ["cuda_count"]
