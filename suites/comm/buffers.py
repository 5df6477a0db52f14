"""One case's buffers on a rank: reproducible random inputs, their layout in place or out of place, the refill
between replays, and the check that counts the wrong elements of the output."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from gpubench.suites.comm.collectives import Collective

_CHUNK = 1 << 24  # elements generated per (seed, rank, chunk): bounds the memory of the check


def _values(torch, seed: int, rank: int, start: int, length: int, total: int, dtype, device) -> Any:
    """Elements [start, start+length) of ``rank``'s input of ``total`` elements for ``seed``: values in
    {-2, -1, 1, 2}, generated in chunks whose size depends on ``total`` alone (so any slice is reproducible)."""
    chunk = max(1, min(_CHUNK, total))
    parts = []
    first, last = start // chunk, (start + length - 1) // chunk if length else start // chunk - 1
    for c in range(first, last + 1):
        g = torch.Generator(device=device)
        g.manual_seed((seed * 1_000_003 + rank) * 4099 + c)
        lo, hi = c * chunk, (c + 1) * chunk
        t = torch.randint(0, 4, (chunk,), generator=g, device=device, dtype=torch.int8)
        t = t - 2 + (t >= 2).to(torch.int8)
        parts.append(t[max(start, lo) - lo : min(start + length, hi) - lo])
    out = torch.cat(parts) if parts else torch.empty(0, dtype=torch.int8, device=device)
    return out.to(dtype)


@dataclass
class Buffers:
    seed: int
    send: Any
    recv: Any


@dataclass
class Layout:
    """One case's buffers on this rank: how they are laid out, (re)filled and checked."""

    torch: Any
    coll: Collective
    dtype: Any
    device: Any
    rank: int
    world: int
    send_n: int
    recv_n: int
    inplace: bool
    op: str
    count: int
    pool: Any  # the run's ncclmem.Pool, or None: torch's caching allocator
    seeds: Iterator[int]

    def empty(self, n: int) -> Any:
        if self.pool:
            return self.pool.empty(n, self.dtype, self.device)
        return self.torch.empty(n, dtype=self.dtype, device=self.device)

    def fill(self, b: Buffers) -> Buffers:
        """(Re)write ``b``'s input from its seed and poison the rest of the output: 7 is never an answer."""
        if not self.inplace or self.coll.inplace_layout == "gathered":
            b.recv.fill_(7)
        b.send.copy_(_values(self.torch, b.seed, self.rank, 0, self.send_n, self.send_n, self.dtype, self.device))
        return b

    def buffers(self) -> Buffers:
        send_n, recv_n, rank = self.send_n, self.recv_n, self.rank
        if self.inplace:
            whole = self.empty(max(send_n, recv_n))
            # The input sits where NCCL expects it in place: this rank's block of a gathered output, or
            # the whole of a scattered input whose result lands in this rank's block.
            if self.coll.inplace_layout == "gathered":
                send, recv = whole.narrow(0, rank * send_n, send_n), whole
            elif self.coll.inplace_layout == "scattered":
                send, recv = whole, whole.narrow(0, rank * recv_n, recv_n)
            else:
                send = recv = whole
        else:
            send, recv = self.empty(send_n), self.empty(recv_n)
        return self.fill(Buffers(next(self.seeds), send, recv))

    def wrong(self, b: Buffers, out: Any) -> int:
        """Elements of this rank's output ``out`` that differ from what the collective must leave there."""
        torch = self.torch

        def values(r, start, length):
            return _values(torch, b.seed, r, start, length, self.send_n, self.dtype, self.device)

        wrong = 0
        n_out = out.numel()
        for start in range(0, n_out, _CHUNK):
            length = min(_CHUNK, n_out - start)
            want = self.coll.expect(values, torch, self.rank, self.world, self.op, self.count, start, length)
            if want is None:
                continue
            got = out.narrow(0, start, length).to(torch.float64)
            tol = _tolerance(torch, self.dtype, self.op, want)
            wrong += int(((got - want).abs() > tol).sum().item())
        return wrong


def _tolerance(torch, dtype, op: str, want) -> Any:
    # Sums, products, minima and maxima of {-2,-1,1,2} are exact; avg divides, which rounds.
    if op != "avg":
        return 0.0
    if not dtype.is_floating_point:
        return 1.0
    return torch.finfo(dtype).eps * want.abs().clamp(min=1.0) * 2
