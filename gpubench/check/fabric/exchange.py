"""One rank's part of a node pair's exchange: GPU g of one node sends to and receives from GPU g of the other at
once (``batch_isend_irecv``), checked on fresh random data, then timed a fixed count of times
(:func:`gpubench.timing.fixed.fixed_count`). A partner that sends nothing within the timeout makes it raise
:class:`Silent`, never wait on."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from gpubench.suite import Workload
from gpubench.timing.fixed import fixed_count

if TYPE_CHECKING:
    from gpubench.backends.base import Backend

# A pair's samples: a short warm-up (NCCL opens a pair's connection on its first exchange), then nccl-tests'
# default count of timed iterations.
WARMUP, ITERS = 3, 20
LATENCY_BYTES = 8  # the latency exchange: one float64 each way


class Silent(Exception):
    """The partner sent nothing within the timeout."""


@dataclass(frozen=True)
class Leg:
    """This rank's part of one exchange: with ``peer`` (a rank) on ``rail``, between nodes ``ends``."""

    peer: int
    rail: int
    ends: tuple[str, str]
    tag: int  # the round's number: a late message of an earlier round never matches this one's receive


def _fill(n: int, seed: int, device: str) -> Any:
    import torch

    g = torch.Generator().manual_seed(seed)
    return torch.randn(n, generator=g, dtype=torch.float32).to(device)


def _workload(leg: Leg, nbytes: int, timeout_s: float, device: str, me: int) -> Workload:
    import torch.distributed as dist

    n = max(1, nbytes // 4)
    wait = dt.timedelta(seconds=timeout_s)

    def make() -> tuple[Any, Any]:
        return _fill(n, _seed(leg.tag, me), device), _fill(n, 0, device).fill_(float("nan"))

    def run(bufs: tuple[Any, Any]) -> Any:
        out, into = bufs
        works = dist.batch_isend_irecv([dist.P2POp(dist.isend, out, leg.peer, tag=leg.tag),
                                        dist.P2POp(dist.irecv, into, leg.peer, tag=leg.tag)])
        try:
            for w in works:
                w.wait(wait)
        except Exception as e:  # noqa: BLE001 — gloo's and NCCL's timeouts differ in type: either is silence here
            raise Silent(f"nothing from rank {leg.peer} within {timeout_s:g} s") from e
        return into

    return Workload(run=run, make_inputs=make, bytes=n * 4, extra={"link": (leg.ends, leg.rail)})


def _seed(tag: int, rank: int) -> int:
    return (tag * 1_000_003 + rank) & 0x7FFFFFFF


def measure(backend: Backend, leg: Leg, nbytes: int, timeout_s: float, me: int) -> dict[str, Any]:
    """This rank's samples of the exchange (seconds per iteration) at ``nbytes`` and at the latency size, after one
    checked exchange; raises :class:`Silent` where the partner never answered, ValueError where what arrived is not
    what the partner sent."""
    import torch

    if backend.link_factor(leg.ends, leg.rail) == 0:  # the fake fabric's silent path: nothing is sent
        raise Silent(f"the made-up fabric is silent on rail {leg.rail} of {'-'.join(leg.ends)}")
    device = str(backend.torch_device)
    big = _workload(leg, nbytes, timeout_s, device, me)
    bufs = big.make_inputs()
    got = backend.call(big, bufs)
    backend.synchronize()
    want = _fill(big.bytes // 4, _seed(leg.tag, leg.peer), device)
    if not torch.equal(got, want):
        raise ValueError(f"the data from rank {leg.peer} is not what it sent (rail {leg.rail})")
    samples = fixed_count(backend, big, bufs, warmup=WARMUP, iters=ITERS)
    small = _workload(leg, LATENCY_BYTES, timeout_s, device, me)
    latency = fixed_count(backend, small, small.make_inputs(), warmup=WARMUP, iters=ITERS)
    return {"bytes": big.bytes, "samples": samples, "latency": latency}


def busbw_samples(a: dict[str, Any], b: dict[str, Any]) -> list[float]:
    """A rail's GB/s per iteration from its two sides' answers: the bytes each sent over the slower side's time (the
    exchange is done when both are; nccl-tests' sendrecv reads the same, bytes over time)."""
    return [a["bytes"] / max(ta, tb) / 1e9 for ta, tb in zip(a["samples"], b["samples"])]


__all__ = ["busbw_samples", "Leg", "Silent", "measure", "WARMUP", "ITERS"]
