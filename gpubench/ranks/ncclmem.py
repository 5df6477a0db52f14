"""Collective buffers from NCCL's (RCCL's) own allocator, optionally registered with the communicator: what
nccl-tests does (it allocates with ``ncclMemAlloc`` whenever NCCL is 2.19 or newer, and ``-R 1`` registers each
buffer with ``ncclCommRegister``), for the comm suite's buffers on GPUs (its default) and ``--register``.

torch has a route of its own (``ProcessGroupNCCL.mem_allocator`` in a ``torch.cuda.MemPool``), but a build may
lack it (the one tried raised "NCCL mem allocator is not supported in this NCCL version": docs/measurements.md,
'comm'). So the calls go through ctypes into the NCCL library torch has already loaded, the one its
communicators live in: the same four C calls nccl-tests makes. A buffer is a uint8 tensor over its part of an
allocation (``__cuda_array_interface__``, no copy), viewed as the case's dtype; the run's pool keeps what it allocated
for the next case, never freeing it while the run lasts (why: above ``Pool``).

NCCL's rule (its user guide, "User Buffer Registration"): when one rank passes registered buffers to a call,
every rank must. Every rank of a comm case makes the same buffers in the same order, so they all do.
"""

from __future__ import annotations

import ctypes
import ctypes.util
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gpubench.errors import UsageError

if TYPE_CHECKING:
    import torch
    from torch.distributed import ProcessGroup

_NAMES = ("libnccl", "librccl")
_SUCCESS = 0


def _loaded(maps: str = "/proc/self/maps") -> list[str]:
    """Paths of the NCCL/RCCL libraries mapped into this process (torch loads its own with the first
    communicator); the first is the one its communicators were made by."""
    try:
        lines = Path(maps).read_text().splitlines()
    except OSError:
        return []
    found = []
    for line in lines:
        path = line.split()[-1] if line.split() else ""
        if any(Path(path).name.startswith(n + ".so") for n in _NAMES) and path not in found:
            found.append(path)
    return found


def library(maps: str = "/proc/self/maps") -> ctypes.CDLL:
    """The NCCL library of this process's communicators, its four calls typed."""
    paths = _loaded(maps) or [p for p in (ctypes.util.find_library(n[3:]) for n in _NAMES) if p]
    if not paths:
        raise UsageError("--alloc nccl found no NCCL/RCCL library in this process: it needs torch's nccl backend "
                         "on a GPU (drop --alloc/--register)")
    lib = ctypes.CDLL(paths[0])
    missing = [f for f in ("ncclMemAlloc", "ncclMemFree", "ncclCommRegister", "ncclCommDeregister")
               if not hasattr(lib, f)]
    if missing:
        raise UsageError(f"{paths[0]} has no {', '.join(missing)} (NCCL 2.19 or newer has them): drop "
                         "--alloc nccl/--register")
    vp = ctypes.c_void_p
    lib.ncclMemAlloc.argtypes = [ctypes.POINTER(vp), ctypes.c_size_t]
    lib.ncclMemFree.argtypes = [vp]
    lib.ncclCommRegister.argtypes = [vp, vp, ctypes.c_size_t, ctypes.POINTER(vp)]
    lib.ncclCommDeregister.argtypes = [vp, vp]
    lib.ncclGetErrorString.restype = ctypes.c_char_p
    return lib


def comm_of(process_group: ProcessGroup, device: str | torch.device) -> int:
    """The ``ncclComm_t`` behind ``process_group`` on ``device``, as an address (torch's ``_comm_ptr``)."""
    import torch

    backend = process_group._get_backend(torch.device(device))  # the backends' device is a string ("cuda:0")
    if not hasattr(backend, "_comm_ptr"):
        raise UsageError(f"--register needs torch's NCCL backend to expose its communicator; "
                         f"{type(backend).__name__} does not (drop --register)")
    return int(backend._comm_ptr())


def tensor_at(address: int, nbytes: int, device: str | torch.device) -> torch.Tensor:
    """A uint8 tensor over ``nbytes`` at ``address`` on ``device``, owning nothing (the pool frees it)."""
    import torch

    if torch.device(device).type == "cpu":  # the tests' stand-in library hands out host memory
        return torch.frombuffer((ctypes.c_uint8 * nbytes).from_address(address), dtype=torch.uint8)

    class _View:
        __cuda_array_interface__ = {"shape": (nbytes,), "typestr": "|u1", "data": (address, False),
                                    "version": 3, "strides": None}

    return torch.as_tensor(_View(), device=device)


# ncclMemAlloc rounds up to cuMem's granularity (megabytes for a few KiB: docs/measurements.md, 'comm') and each
# registered buffer is one more handle NCCL exchanges: a small case's 64 input sets are carved from chunks of at least
# CHUNK_BYTES; a buffer of CHUNK_BYTES or more has its own chunk and starts at its head, as nccl-tests' buffer does.
#
# The chunks are kept and lent case after case, never freed before the run ends: NCCL caches the registrations it
# makes in a graph (NCCL_GRAPH_REGISTER) by address, and a chunk freed and returned at the same address left the
# peers' part of outputs unwritten (wrong answers: docs/comm.md). nccl-tests allocates its buffers once.
CHUNK_BYTES = 64 << 20
_ALIGN = 4096  # where each buffer starts within a chunk


class _Chunk:
    def __init__(self, address: int, nbytes: int, handle: int | None):
        self.address, self.nbytes, self.handle = address, nbytes, handle
        self.used = 0  # bytes lent to the current case, from the chunk's head


class Pool:
    """NCCL memory for a run: chunks that ``ncclMemAlloc`` returned, each registered with ``comm`` when one is
    given, lent to one case at a time. ``release`` ends a case (after ``sync``: calls may still be queued on its
    buffers) and keeps the chunks for the next. They live as long as the process, which ends with the run: NCCL
    drops its registrations when torch destroys the communicator, and the memory goes with the process (a
    deregistration at exit could come after the communicator is gone). Every rank makes the same buffers in the
    same order, so a buffer has the same offset from its chunk's head on every rank."""

    def __init__(self, lib: ctypes.CDLL, comm: int | None, sync: Callable[[], None] = lambda: None):
        self.lib, self.comm, self.sync = lib, comm, sync
        self.chunks: list[_Chunk] = []

    def _ok(self, result: int, call: str) -> None:
        if result != _SUCCESS:
            text = self.lib.ncclGetErrorString(result)
            text = text.decode() if isinstance(text, bytes) else str(text)
            raise RuntimeError(f"{call} failed: {text} (NCCL error {result})")

    def _chunk(self, nbytes: int) -> _Chunk:
        ptr = ctypes.c_void_p()
        self._ok(self.lib.ncclMemAlloc(ctypes.byref(ptr), nbytes), f"ncclMemAlloc({nbytes})")
        handle = None
        if self.comm is not None:
            h = ctypes.c_void_p()
            result = self.lib.ncclCommRegister(ctypes.c_void_p(self.comm), ptr, nbytes, ctypes.byref(h))
            if result != _SUCCESS:
                self.lib.ncclMemFree(ptr)
                self._ok(result, f"ncclCommRegister({nbytes})")
            handle = h.value
        self.chunks.append(_Chunk(ptr.value, nbytes, handle))
        return self.chunks[-1]

    def _place(self, span: int) -> _Chunk:
        """The chunk a buffer of ``span`` bytes goes in: a large one in the smallest idle chunk that holds it, a
        small one beside others in a chunk of CHUNK_BYTES; a new chunk where none will do."""
        if span >= CHUNK_BYTES:
            idle = [c for c in self.chunks if c.used == 0 and c.nbytes >= span]
            return min(idle, key=lambda c: c.nbytes) if idle else self._chunk(span)
        room = [c for c in self.chunks if c.nbytes == CHUNK_BYTES and c.nbytes - c.used >= span]
        return room[0] if room else self._chunk(CHUNK_BYTES)

    def empty(self, numel: int, dtype: torch.dtype, device: str | torch.device) -> torch.Tensor:
        """An uninitialized 1-D tensor of ``numel`` elements of ``dtype``, in NCCL's memory, lent to this case."""
        nbytes = numel * dtype.itemsize
        span = -(-nbytes // _ALIGN) * _ALIGN
        chunk = self._place(span)
        address = chunk.address + chunk.used
        chunk.used += span
        return tensor_at(address, nbytes, device).view(dtype)

    def release(self) -> None:
        """The case is over: its buffers go back to the pool, kept for the next case."""
        if any(c.used for c in self.chunks):
            self.sync()
        for c in self.chunks:
            c.used = 0

    def lent(self) -> Any:
        """A context for one case: its buffers are released when it ends."""
        return _Lent(self)


class _Lent:
    def __init__(self, pool: Pool):
        self.pool = pool

    def __enter__(self) -> Pool:
        return self.pool

    def __exit__(self, *exc: Any) -> bool:
        self.pool.release()
        return False


__all__ = ["Pool", "library", "comm_of", "tensor_at"]
