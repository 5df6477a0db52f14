"""One rank's part of a node pair's exchange: GPU g of one node sends to and receives from GPU g of the other at
once (``batch_isend_irecv``), checked on fresh random data, then timed a fixed count of times
(:func:`gpubench.timing.fixed.fixed_count`). A partner that sends nothing within the timeout makes it raise
:class:`Silent`, never wait on."""

from __future__ import annotations

import datetime as dt
import threading
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from gpubench.errors import first_line
from gpubench.suite import Workload
from gpubench.timing.fixed import fixed_count

if TYPE_CHECKING:
    from gpubench.backends.base import Backend

# A pair's samples: a short warm-up (NCCL opens a pair's connection on its first exchange), then nccl-tests'
# default count of timed iterations.
WARMUP, ITERS = 3, 20
LATENCY_BYTES = 8  # the latency exchange: one float64 each way
ABANDONED: list[Any] = []
_GLOO_FOREVER = dt.timedelta(days=1)  # exchanges a silent partner left pending, with their buffers


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

    def make() -> tuple[Any, Any]:
        return _fill(n, _seed(leg.tag, me), device), _fill(n, 0, device).fill_(float("nan"))

    def run(bufs: tuple[Any, Any]) -> Any:
        out, into = bufs
        try:
            works = dist.batch_isend_irecv([dist.P2POp(dist.isend, out, leg.peer, tag=leg.tag),
                                            dist.P2POp(dist.irecv, into, leg.peer, tag=leg.tag)])
        except RuntimeError as e:  # the connection is gone: the partner's process ended
            raise Silent(f"rank {leg.peer} cannot be reached ({first_line(e)})") from None
        if not _done(works, timeout_s):
            ABANDONED.append((works, bufs))  # a late message lands in buffers still held, never in freed memory
            raise Silent(f"nothing from rank {leg.peer} within {timeout_s:g} s")
        return into

    return Workload(run=run, make_inputs=make, bytes=n * 4, extra={"fabric_path": (leg.ends, leg.rail)})


def _done(works: list[Any], timeout_s: float) -> bool:
    """Whether ``works`` completed within ``timeout_s``. Never a timed wait: gloo's closes every connection of the
    process once it times out (the next exchange, with a healthy partner, fails) and NCCL's aborts the communicator.
    NCCL's works say when their GPU work is done; gloo's say so only to a wait, made on a thread of its own that a
    silent partner leaves waiting (a day: never the group's timeout, whose end would close the connections)."""
    import torch.distributed as dist

    if dist.get_backend() == "nccl":
        end = time.monotonic() + timeout_s
        while not all(w.is_completed() for w in works):
            if time.monotonic() > end:
                return False
            time.sleep(0)
        return True
    done = threading.Event()

    def wait() -> None:
        try:
            for w in works:
                w.wait(_GLOO_FOREVER)
            done.set()
        except Exception:  # noqa: BLE001 — the partner's process ended: its silence is already said
            pass

    threading.Thread(target=wait, name="gpubench-exchange", daemon=True).start()
    return done.wait(timeout_s)


def _seed(tag: int, rank: int) -> int:
    return (tag * 1_000_003 + rank) & 0x7FFFFFFF


def measure(backend: Backend, leg: Leg, nbytes: int, timeout_s: float, me: int) -> dict[str, Any]:
    """This rank's samples of the exchange (seconds per iteration) at ``nbytes`` and at the latency size, after one
    checked exchange; raises :class:`Silent` where the partner never answered, ValueError where what arrived is not
    what the partner sent."""
    import torch

    if backend.link_factor(leg.ends, leg.rail) == 0 and _silent_side(backend, leg):
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


def _silent_side(backend: Backend, leg: Leg) -> bool:
    """Whether this rank is the side of a silent made-up path that sends nothing: the one on the node (or rail) named
    silent, or of a silent link the end that sorts first. The other side sends and waits out the timeout for real."""
    me, other = leg.ends
    if backend.link_factor((me, me), leg.rail) == 0:
        return True
    return backend.link_factor((other, other), leg.rail) != 0 and me < other


def busbw_samples(a: dict[str, Any], b: dict[str, Any]) -> list[float]:
    """A rail's GB/s per iteration from its two sides' answers: the bytes each sent over the slower side's time (the
    exchange is done when both are; nccl-tests' sendrecv reads the same, bytes over time)."""
    return [a["bytes"] / max(ta, tb) / 1e9 for ta, tb in zip(a["samples"], b["samples"])]


__all__ = ["busbw_samples", "Leg", "Silent", "measure", "WARMUP", "ITERS"]
