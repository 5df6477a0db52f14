"""NCCL (RCCL) called straight from Python through CuPy's binding, for comm's ``--graph`` mode.

Why: captured in a CUDA graph of 20 calls, a 1 MiB all_reduce on 2×H200 took 17.5-18.8 µs per call through
torch.distributed and 12.8-12.9 µs through CuPy's NCCL binding, on the same NCCL 2.28.9
(tests/gpu/diag_comm_graph.py, docs/measurements.md): ProcessGroupNCCL's per-call work lands in the graph,
nccl-tests' -G has none of it. The graph mode exists to time the collective without launch costs, so it
captures NCCL's own calls wherever every rank has CuPy with NCCL; elsewhere it captures torch's and says so
(``graph_via``). Eager mode stays on torch.distributed: that is what a training job calls.

The communicator is a second one beside torch's, on the same ranks; its unique id travels over the group's
control plane. Buffers stay torch tensors, passed by address, so the check reads them as in eager mode. The
enum values below are NCCL's ABI (nccl.h), which RCCL shares.
"""

from __future__ import annotations

from typing import Any

# ncclDataType_t and ncclRedOp_t values (nccl.h; stable across NCCL 2.x and RCCL).
DTYPES = {"int32": 2, "float16": 6, "float32": 7, "float64": 8, "bfloat16": 9}
OPS = {"sum": 0, "prod": 1, "max": 2, "min": 3, "avg": 4}


def _module() -> Any:
    """CuPy's NCCL module when it can run here, else None."""
    try:
        from cupy.cuda import nccl
    except Exception:  # noqa: BLE001 — no CuPy, or a CuPy built without NCCL
        return None
    return nccl if getattr(nccl, "available", True) else None


class Direct:
    """One NCCL communicator over the group's ranks and the calls of comm's collectives on it."""

    def __init__(self, nccl: Any, comm: Any, rank: int, world: int):
        self.nccl, self.comm, self.rank, self.world = nccl, comm, rank, world

    @classmethod
    def open(cls, group: Any, device_index: int) -> Direct | None:
        """A communicator on every rank, or None on every rank when any of them lacks CuPy's NCCL (all ranks
        must take the same path, or the collectives would never meet)."""
        nccl = _module()
        everyone = group.gather_objects(nccl is not None)
        if not all(everyone):
            return None
        uid = group.gather_objects(nccl.get_unique_id() if group.rank == 0 else None)[0]
        import cupy

        with cupy.cuda.Device(device_index):
            comm = nccl.NcclCommunicator(group.world_size, uid, group.rank)
        return cls(nccl, comm, group.rank, group.world_size)

    def call(self, name: str, send: Any, recv: Any, op: str, stream: int) -> None:
        """``name`` on torch tensors ``send``/``recv`` (laid out as comm's buffers), enqueued on ``stream``."""
        c, dt = self.comm, DTYPES[str(send.dtype).replace("torch.", "")]
        s, r, n = send.data_ptr(), recv.data_ptr(), send.numel()
        if name == "all_reduce":
            c.allReduce(s, r, n, dt, OPS[op], stream)
        elif name == "all_gather":
            c.allGather(s, r, n, dt, stream)  # n: each rank's part
        elif name == "reduce_scatter":
            c.reduceScatter(s, r, recv.numel(), dt, OPS[op], stream)
        elif name == "broadcast":
            c.broadcast(s, r, n, dt, 0, stream)
        elif name == "reduce":
            c.reduce(s, r, n, dt, OPS[op], 0, stream)
        elif name == "alltoall":
            # As NCCL's documentation and nccl-tests build it: one grouped send and receive per peer.
            part, size = n // self.world, send.element_size()
            self.nccl.groupStart()
            for peer in range(self.world):
                c.send(s + peer * part * size, part, dt, peer, stream)
                c.recv(r + peer * part * size, part, dt, peer, stream)
            self.nccl.groupEnd()
        elif name == "sendrecv":
            self.nccl.groupStart()
            c.send(s, n, dt, (self.rank + 1) % self.world, stream)
            c.recv(r, n, dt, (self.rank - 1) % self.world, stream)
            self.nccl.groupEnd()
        else:
            raise ValueError(f"no direct NCCL call for {name!r}")

    def close(self) -> None:
        try:
            self.comm.destroy()
        except Exception:  # noqa: BLE001 — a communicator that cannot be torn down dies with the process
            pass


__all__ = ["Direct", "DTYPES", "OPS"]
