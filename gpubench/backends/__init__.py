"""The devices a run measures on: CUDA, HIP, the CPU and the fake device of the tests, behind one
:class:`~gpubench.backends.base.Backend`; ``auto`` takes the GPU runtime torch was built for, else the CPU.

It may import the machine (telemetry, the host's pace, memory) and gpubench's floor modules only.
"""

from __future__ import annotations

from gpubench.backends.base import Backend, HostTimer, Timer
from gpubench.errors import UsageError

NAMES = ("auto", "cuda", "hip", "cpu", "fake")


def backend_class(name: str) -> type[Backend]:
    # The cpu and GPU backends' modules import torch: only the one asked for is loaded (compare, report, --help: none).
    if name == "cpu":
        from gpubench.backends.cpu import CpuBackend

        return CpuBackend
    if name == "fake":
        from gpubench.backends.fake import FakeBackend

        return FakeBackend
    if name in ("cuda", "hip"):
        from gpubench.backends.gpu import CudaBackend, HipBackend

        return CudaBackend if name == "cuda" else HipBackend
    raise UsageError(f"unknown backend {name!r}: choose one of {', '.join(NAMES)}")


def resolve_name(name: str) -> str:
    """``auto`` → hip on a ROCm torch with a GPU, cuda on a CUDA torch with a GPU, else cpu."""
    if name != "auto":
        backend_class(name)  # validates the name
        return name
    import torch

    if torch.cuda.is_available() and torch.cuda.device_count() > 0:
        return "hip" if getattr(torch.version, "hip", None) else "cuda"
    return "cpu"


def open_backend(name: str = "auto", device: int = 0) -> Backend:
    """The backend for ``name`` on device ``device``; a UsageError says why it cannot be had."""
    resolved = resolve_name(name)
    cls = backend_class(resolved)
    ok, why = cls.available()
    if not ok:
        raise UsageError(f"backend {resolved!r} is not available: {why}")
    count = cls.device_count()
    if device < 0 or device >= count:
        raise UsageError(
            f"device {device} does not exist: backend {resolved!r} has {count} device(s), indices 0..{count - 1}"
        )
    return cls(device)


__all__ = ["Backend", "HostTimer", "Timer", "NAMES", "backend_class", "open_backend", "resolve_name"]
