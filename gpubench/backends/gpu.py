"""CUDA and HIP GPUs through torch.

torch's ROCm build answers the same ``torch.cuda`` API (HIP events, streams, graphs), so both backends share
this code; only the telemetry library and the runtime name differ. The HIP path is written from the ROCm
documentation and tested with torch mocked: it has not run on AMD hardware yet.
"""

from __future__ import annotations

import torch

from gpubench.backends.base import Backend, Hold, Timer
from gpubench.machine.telemetry import open_telemetry

# torch.cuda._sleep counts GPU cycles; 2 GHz is about the top SM clock of H100/H200/MI300, so a hold is at
# least as long as asked. Whether it was long enough is checked, not assumed (SleepHold.held).
_CYCLES_PER_SECOND = 2.0e9


class EventTimer(Timer):
    """Device events around the region: the time the GPU spent, not the time the host spent enqueueing."""

    def __init__(self):
        self._start = torch.cuda.Event(enable_timing=True)
        self._end = torch.cuda.Event(enable_timing=True)

    def start(self) -> None:
        self._start.record()

    def stop(self) -> None:
        self._end.record()

    def elapsed_s(self) -> float:
        self._end.synchronize()
        return self._start.elapsed_time(self._end) * 1e-3


class SleepHold(Hold):
    def __init__(self, seconds: float):
        torch.cuda._sleep(int(seconds * _CYCLES_PER_SECOND))
        self._done = torch.cuda.Event()
        self._done.record()

    def held(self) -> bool:
        return not self._done.query()


class TorchGraphs:
    """CUDA graphs through torch (HIP graphs on ROCm: the same torch.cuda API)."""

    def capture(self, fn):
        # Captured on a side stream, as torch asks; the caller has made every lazy connection (NCCL's first
        # call on a buffer) before, since set-up work cannot be captured.
        g = torch.cuda.CUDAGraph()
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            with torch.cuda.graph(g, stream=side):
                fn()
        torch.cuda.current_stream().wait_stream(side)
        torch.cuda.synchronize()
        return g.replay

    def stream(self):
        # Replays run on a non-blocking stream of their own, as nccl-tests launches: the legacy default stream
        # made each call slower (docs/measurements.md, 'comm').
        return torch.cuda.stream(torch.cuda.Stream())


class _TorchGpuBackend(Backend):
    is_gpu = True
    runtime: str  # "cuda" | "hip"

    def __init__(self, device_index: int = 0):
        super().__init__(device_index)
        torch.cuda.set_device(device_index)
        self._props = torch.cuda.get_device_properties(device_index)
        self._flush_buf = None

    @classmethod
    def _runtime_version(cls) -> str | None:
        return getattr(torch.version, cls.runtime, None)

    @classmethod
    def available(cls) -> tuple[bool, str]:
        if cls._runtime_version() is None:
            other = "ROCm" if cls.runtime == "cuda" else "CUDA"
            build = "a CPU-only" if torch.version.cuda is None and torch.version.hip is None else f"a {other}"
            return False, f"this torch ({torch.__version__}) is {build} build; install torch for {cls.runtime.upper()}"
        if not torch.cuda.is_available() or torch.cuda.device_count() == 0:
            return False, f"torch sees no {cls.runtime.upper()} device (check the driver and *_VISIBLE_DEVICES)"
        return True, ""

    @classmethod
    def device_count(cls) -> int:
        return torch.cuda.device_count() if cls.available()[0] else 0

    @property
    def torch_device(self) -> str:
        return f"cuda:{self.device_index}"

    def device_name(self) -> str:
        return self._props.name

    def cache_bytes(self) -> int:
        # L2 (NVIDIA) / L2 per XCD (AMD); on MI300 the 256 MB Infinity Cache sits behind it, which torch does
        # not report, so rotation on HIP also spans that (see _INFINITY_CACHE in HipBackend).
        return int(getattr(self._props, "L2_cache_size", 0)) or (50 << 20)

    def memory_bytes(self) -> int:
        return int(self._props.total_memory)

    def available_bytes(self) -> int:
        # Free on the device (other processes' and contexts' memory excluded), plus what torch's own allocator
        # holds cached but unused (release() empties it between cases; this covers the rest).
        free, _ = torch.cuda.mem_get_info(self.device_index)
        cached = torch.cuda.memory_reserved(self.device_index) - torch.cuda.memory_allocated(self.device_index)
        return int(free) + max(0, int(cached))

    def identity(self) -> dict:
        return {
            "backend": self.name,
            "gpu_model": self._props.name,
            "gpu_count": torch.cuda.device_count(),
            "runtime": self.runtime,
            "runtime_version": self._runtime_version(),
            "memory_bytes": int(self._props.total_memory),
            "compute_capability": f"{self._props.major}.{self._props.minor}",
            "multiprocessors": int(self._props.multi_processor_count),
        }

    def _uuid(self) -> str | None:
        uuid = getattr(self._props, "uuid", None)
        return str(uuid) if uuid is not None else None

    def pci_bus_id(self, index: int | None = None) -> str | None:
        try:
            props = self._props if index is None else torch.cuda.get_device_properties(index)
        except Exception:  # noqa: BLE001 — an index this process cannot see: unknown, as the contract says
            return None
        bus = getattr(props, "pci_bus_id", None)
        if bus is None:
            return None
        dom = getattr(props, "pci_domain_id", 0)
        dev = getattr(props, "pci_device_id", 0)
        return f"{dom:08x}:{bus:02x}:{dev:02x}.0"

    def device_key(self) -> str | None:
        # The same GPU under any *_VISIBLE_DEVICES numbering: its UUID, else its PCI address.
        uuid, bus = self._uuid(), self.pci_bus_id()
        return f"GPU {uuid}" if uuid else f"the GPU at PCI {bus}" if bus else None

    def telemetry(self):
        return open_telemetry(self.name, self.device_index, uuid=self._uuid(), pci_bus_id=self.pci_bus_id())

    def timer(self) -> Timer:
        return EventTimer()

    def hold(self, seconds: float) -> Hold | None:
        if not hasattr(torch.cuda, "_sleep"):
            return None
        return SleepHold(seconds)

    def synchronize(self) -> None:
        torch.cuda.synchronize(self.device_index)

    def graphs(self) -> TorchGraphs:
        return TorchGraphs()

    def flush_cache(self) -> None:
        # Writing a buffer twice the cache's size evicts whatever the workload left there.
        if self._flush_buf is None:
            self._flush_buf = torch.empty(2 * self.cache_bytes(), dtype=torch.uint8, device=self.torch_device)
        self._flush_buf.zero_()

    def release(self) -> None:
        torch.cuda.synchronize(self.device_index)
        torch.cuda.empty_cache()
        # Pinned host blocks stay in torch's own cache too; a GiB per copy case would pile up without this.
        empty_host = getattr(torch._C, "_host_emptyCache", None)
        if empty_host is not None:
            empty_host()


class CudaBackend(_TorchGpuBackend):
    name = "cuda"
    runtime = "cuda"


class HipBackend(_TorchGpuBackend):
    name = "hip"
    runtime = "hip"

    # MI300-class parts put a 256 MB Infinity Cache (MALL) behind L2 that torch does not report; rotating
    # only past L2 would time the Infinity Cache. Not yet run on AMD hardware.
    _INFINITY_CACHE = 256 << 20

    def cache_bytes(self) -> int:
        arch = getattr(self._props, "gcnArchName", "") or ""
        l2 = super().cache_bytes()
        return l2 + self._INFINITY_CACHE if arch.startswith("gfx94") or arch.startswith("gfx95") else l2
