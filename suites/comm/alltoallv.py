"""alltoallv as nccl-tests generates its traffic (its default pattern, NCCL_TESTS_ALLTOALLV_SPREAD 1.0, no matrix
file): a rank sends a peer at distance d = (peer - rank) mod n the share d / (n(n-1)/2) of a total of
per-peer count × n elements' bytes, each share rounded down to 16 bytes; a world of one sends itself the whole.
Every rank sends and receives the same total (the pattern is symmetric), the size nccl-tests prints."""

from __future__ import annotations

from functools import lru_cache
from typing import Any


def _share(distance: int, world: int, total_bytes: int) -> int:
    """Bytes a rank sends to the peer ``distance`` after it, nccl-tests' way (in doubles, then to 16 bytes)."""
    if world == 1:
        return total_bytes & ~15
    exact = float(distance) * float(total_bytes) / float(world * (world - 1) // 2)
    return int(exact) & ~15


@lru_cache(maxsize=256)
def shares(per_peer: int, size: int, world: int) -> tuple[int, ...]:
    """Elements a rank sends to the peer at distance 0, 1, ... n-1 for a per-peer count of ``per_peer``."""
    total = per_peer * world * size
    return tuple(_share(d, world, total) // size for d in range(world))


def buffers(n: int, size: int, world: int) -> tuple[int, int]:
    """(send, recv) elements of a request of ``n`` elements: the per-peer count is n / ranks (whole elements)."""
    total = sum(shares(n // world, size, world))
    return total, total


def printed(nbytes: int, size: int, world: int) -> tuple[int, int]:
    """(send, recv) elements of a row: its bytes are one rank's total already."""
    return nbytes // size, nbytes // size


@lru_cache(maxsize=256)
def per_peer(nbytes: int, size: int, world: int) -> int:
    """The per-peer count (nccl-tests' printed count) whose pattern totals ``nbytes``: the smallest such. Shares
    only grow with the count, so every count of one total gives the same shares."""
    first = nbytes // (size * world)
    for count in range(first, first + 16 // size + 3):  # each share loses under 16 bytes to the rounding
        if sum(shares(count, size, world)) * size == nbytes:
            return count
    raise ValueError(f"{nbytes} B is no total of alltoallv's pattern among {world} ranks of {size}-byte elements")


def _splits(count: int, size: int, rank: int, world: int) -> tuple[list[int], list[int]]:
    """(elements this rank sends to each peer, elements it receives from each), in rank order."""
    share = shares(count, size, world)
    return [share[(j - rank) % world] for j in range(world)], [share[(rank - j) % world] for j in range(world)]


def call(dist, send, recv, op, group, rank, world) -> None:
    size = send.element_size()
    sends, recvs = _splits(per_peer(send.numel() * size, size, world), size, rank, world)
    dist.all_to_all_single(recv, send, output_split_sizes=recvs, input_split_sizes=sends, group=group)


def expect(values, torch, rank, world, op, count, start, length) -> Any:
    """My output is each rank's segment for me in rank order: rank j's input from what j sends ranks before me."""
    size = values(0, 0, 0).element_size()
    share = shares(count, size, world)
    parts, at = [], 0
    for j in range(world):
        seg = share[(rank - j) % world]
        offset = sum(share[(k - j) % world] for k in range(rank))
        lo, hi = max(start, at), min(start + length, at + seg)
        if lo < hi:
            parts.append(values(j, offset + lo - at, hi - lo))
        at += seg
    return torch.cat(parts).to(torch.float64)
