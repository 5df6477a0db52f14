"""comm's collectives, one small declaration each as nccl-tests' ``struct testColl``: how its buffers are sized
from the byte count, its torch.distributed call, and what every rank must hold afterwards (the data check).
The table's conventions (bytes, count, busbw factors) are ``table.py``'s, shared with the nccl-tests engine."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from gpubench.suites.comm import alltoallv
from gpubench.suites.comm import table as commtable


@dataclass(frozen=True)
class Collective:
    """One collective as nccl-tests' testColl declares it."""

    name: str
    placements: tuple[bool, ...]  # the `inplace` values torch.distributed's API offers
    # (bytes, itemsize, world) -> (send elements, recv elements); in-place shares one buffer of the larger.
    buffers: Callable[[int, int, int], tuple[int, int]]
    # The call on (send, recv, op, group, rank, world).
    call: Callable[..., None]
    # The elements [start, start+length) every rank must hold in its output: (values, rank, world, op, count)
    # -> tensor, or None where the output is undefined (reduce on a non-root rank).
    expect: Callable[..., Any]
    # In place, one buffer holds both: "gathered" (the input is this rank's block of the output), "scattered"
    # (the output is this rank's block of the input) or "same".
    inplace_layout: str = "same"
    # world -> why a world of that size cannot run it, or None.
    refuses: Callable[[int], str | None] = lambda world: None
    # A row's printed bytes -> (send, recv elements), where the request's sizing (buffers) is not a fixed point.
    printed: Callable[[int, int, int], tuple[int, int]] | None = None
    # The count the library is passed for a row's bytes, where table.element_count cannot tell it.
    count: Callable[[int, int, int], int] | None = None

    @property
    def reduces(self) -> bool:
        return self.name in commtable.REDUCING

    def sized(self, nbytes: int, size: int, world: int) -> tuple[int, int]:
        """(send, recv) elements of a row of ``nbytes``, the size nccl-tests prints."""
        return self.printed(nbytes, size, world) if self.printed else self.buffers(nbytes // size, size, world)

    def elements(self, nbytes: int, size: int, world: int) -> int:
        """The count passed to the library for a row of ``nbytes``."""
        return self.count(nbytes, size, world) if self.count else commtable.element_count(self.name, nbytes, size,
                                                                                           world)


def itemsize(dtype: str) -> int:
    return {"float32": 4, "bfloat16": 2, "float16": 2, "float64": 8, "int32": 4}[dtype]


# --- buffer sizes: (elements asked, itemsize, world) -> (send elements, recv elements) ------------------------
def _same(n, size, world):
    return n, n


def _gathered(n, size, world):  # per-rank send, gathered recv
    return n // world, n // world * world


def _scattered(n, size, world):  # whole send, per-rank recv
    return n // world * world, n // world


def _blocks(n, size, world):
    return n // world * world, n // world * world


# --- each collective: its call, then what [start, start+length) of a rank's output holds ----------------------
# expect(values, torch, rank, world, op, count, start, length); values(rank, start, length) is a rank's input.
def _op(dist, op: str):
    return {"sum": dist.ReduceOp.SUM, "prod": dist.ReduceOp.PRODUCT, "min": dist.ReduceOp.MIN,
            "max": dist.ReduceOp.MAX, "avg": dist.ReduceOp.AVG}[op]


def _reduce(torch, op: str, tensors: list) -> Any:
    acc = tensors[0].to(torch.float64)
    for t in tensors[1:]:
        t = t.to(torch.float64)
        if op in ("sum", "avg"):
            acc = acc + t
        elif op == "prod":
            acc = acc * t
        elif op == "min":
            acc = torch.minimum(acc, t)
        elif op == "max":
            acc = torch.maximum(acc, t)
    return acc / len(tensors) if op == "avg" else acc


def _all_reduce(dist, send, recv, op, group, rank, world):
    dist.all_reduce(recv, op=_op(dist, op), group=group)


def _expect_all_reduce(values, torch, rank, world, op, count, start, length):
    return _reduce(torch, op, [values(r, start, length) for r in range(world)])


def _all_gather(dist, send, recv, op, group, rank, world):
    # torch 2.13 renamed all_gather_into_tensor to all_gather_single (same call); older torch has the first.
    (getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor)(recv, send, group=group)


def _expect_all_gather(values, torch, rank, world, op, count, start, length):
    parts = []
    for r in range(world):  # the output is rank 0's input, then rank 1's...
        lo, hi = max(start, r * count), min(start + length, (r + 1) * count)
        if lo < hi:
            parts.append(values(r, lo - r * count, hi - lo))
    return torch.cat(parts).to(torch.float64)


def _reduce_scatter(dist, send, recv, op, group, rank, world):
    (getattr(dist, "reduce_scatter_single", None) or dist.reduce_scatter_tensor)(recv, send, op=_op(dist, op),
                                                                               group=group)


def _expect_reduce_scatter(values, torch, rank, world, op, count, start, length):
    return _reduce(torch, op, [values(r, rank * count + start, length) for r in range(world)])


def _alltoall(dist, send, recv, op, group, rank, world):
    dist.all_to_all_single(recv, send, group=group)


def _expect_alltoall(values, torch, rank, world, op, count, start, length):
    parts = []
    for j in range(world):  # block j of my output is block `rank` of rank j's input
        lo, hi = max(start, j * count), min(start + length, (j + 1) * count)
        if lo < hi:
            parts.append(values(j, rank * count + lo - j * count, hi - lo))
    return torch.cat(parts).to(torch.float64)


def _broadcast(dist, send, recv, op, group, rank, world):
    dist.broadcast(recv, src=0, group=group)


def _expect_broadcast(values, torch, rank, world, op, count, start, length):
    return values(0, start, length).to(torch.float64)


def _reduce_root(dist, send, recv, op, group, rank, world):
    dist.reduce(recv, dst=0, op=_op(dist, op), group=group)


def _expect_reduce(values, torch, rank, world, op, count, start, length):
    return _reduce(torch, op, [values(r, start, length) for r in range(world)]) if rank == 0 else None


def _sendrecv(dist, send, recv, op, group, rank, world):
    ops = [dist.P2POp(dist.isend, send, (rank + 1) % world, group=group),
           dist.P2POp(dist.irecv, recv, (rank - 1) % world, group=group)]
    for work in dist.batch_isend_irecv(ops):
        work.wait()


def _expect_sendrecv(values, torch, rank, world, op, count, start, length):
    return values((rank - 1) % world, start, length).to(torch.float64)


def _gather(dist, send, recv, op, group, rank, world):
    # The root's output in per-rank views: its own block is its input in place (nccl-tests' layout).
    dist.gather(send, list(recv.chunk(world)) if rank == 0 else None, dst=0, group=group)


def _expect_gather(values, torch, rank, world, op, count, start, length):
    # Only the root receives (nccl-tests leaves the others' output as it was).
    return _expect_all_gather(values, torch, rank, world, op, count, start, length) if rank == 0 else None


def _scatter(dist, send, recv, op, group, rank, world):
    dist.scatter(recv, list(send.chunk(world)) if rank == 0 else None, src=0, group=group)


def _expect_scatter(values, torch, rank, world, op, count, start, length):
    return values(0, rank * count + start, length).to(torch.float64)  # block `rank` of the root's input


def _exchange(dist, group, peer, send, recv):
    """One send to and one receive from ``peer``, issued together (an NCCL group)."""
    ops = [dist.P2POp(dist.isend, send, peer, group=group), dist.P2POp(dist.irecv, recv, peer, group=group)]
    for work in dist.batch_isend_irecv(ops):
        work.wait()


def _hypercube(dist, send, recv, op, group, rank, world):
    # nccl-tests' hypercube: an all-gather by recursive doubling, each step swapping with rank ^ mask the blocks
    # gathered so far.
    count = send.numel()
    own = recv.narrow(0, rank * count, count)
    if own.data_ptr() != send.data_ptr():
        own.copy_(send)
    mask = 1
    while mask < world:
        mine, theirs = rank & ~(mask - 1), (rank & ~(mask - 1)) ^ mask
        _exchange(dist, group, rank ^ mask, recv.narrow(0, mine * count, mask * count),
                  recv.narrow(0, theirs * count, mask * count))
        mask <<= 1


def _bisection(dist, send, recv, op, group, rank, world):
    _exchange(dist, group, (rank + world // 2) % world, send, recv)


def _expect_bisection(values, torch, rank, world, op, count, start, length):
    return values((rank + world // 2) % world, start, length).to(torch.float64)


def _refuse_under_two(name: str) -> Callable[[int], str | None]:
    return lambda world: f"{name} needs 2 or more ranks" if world < 2 else None


def _refuse_hypercube(world: int) -> str | None:
    if world < 2 or world & (world - 1):
        return f"hypercube needs a power-of-two world of 2 or more ranks (nccl-tests' too), not {world}"
    return None


def _refuse_bisection(world: int) -> str | None:
    # A world of one would exchange with itself: no bisection to cross.
    return f"bisection needs an even world of 2 or more ranks, not {world}" if world < 2 or world % 2 else None


COLLECTIVES = {
    c.name: c
    for c in (
        Collective("all_reduce", (True,), _same, _all_reduce, _expect_all_reduce),
        Collective("all_gather", (False, True), _gathered, _all_gather, _expect_all_gather, "gathered"),
        Collective("reduce_scatter", (False, True), _scattered, _reduce_scatter, _expect_reduce_scatter,
                   "scattered"),
        Collective("alltoall", (False,), _blocks, _alltoall, _expect_alltoall),
        Collective("broadcast", (True,), _same, _broadcast, _expect_broadcast),
        Collective("reduce", (True,), _same, _reduce_root, _expect_reduce),
        Collective("sendrecv", (False,), _same, _sendrecv, _expect_sendrecv, refuses=_refuse_under_two("sendrecv")),
        Collective("gather", (False, True), _gathered, _gather, _expect_gather, "gathered"),
        Collective("scatter", (False, True), _scattered, _scatter, _expect_scatter, "scattered"),
        Collective("hypercube", (False, True), _gathered, _hypercube, _expect_all_gather, "gathered",
                   refuses=_refuse_hypercube),
        Collective("alltoallv", (False,), alltoallv.buffers, alltoallv.call, alltoallv.expect,
                   printed=alltoallv.printed, count=alltoallv.per_peer),
        Collective("bisection", (False,), _same, _bisection, _expect_bisection, refuses=_refuse_bisection),
    )
}
assert tuple(COLLECTIVES) == commtable.COLLECTIVES
