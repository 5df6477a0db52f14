"""The `comm` table: what both collective engines (gpubench's own torch.distributed loop and nccl-tests /
rccl-tests, run or imported) write, so that one compare covers both engines, clusters and years of logs.

Conventions, the same as nccl-tests' (its doc/PERFORMANCE.md and each test's ``GetBw``):
- ``bytes`` is the size nccl-tests prints: the larger of the send and receive buffers of one rank. For
  all_gather that is the gathered output (per-rank count × ranks), for reduce_scatter the input, for alltoall
  the whole buffer (per-peer count × ranks); for the others the one buffer.
- ``count`` is the element count passed to the library call (per rank for all_gather/reduce_scatter, per peer
  for alltoall).
- ``algbw = bytes / time`` in GB/s (1 GB = 1e9 B); ``busbw = algbw × factor`` with the factors below, so that
  busbw reads as the bandwidth each link would need under a flat point-to-point model.
- ``time`` is per operation in µs; gpubench's engine takes the slowest rank's time (a collective is done when its
  last rank is), nccl-tests averages over ranks by default.

The case id (the join key of compare) is ``collective, bytes, dtype, op, inplace``; the engine, world size and
node count are columns beside it, so runs of different engines or world sizes still line up by case.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from gpubench.toolkit import Case, Metric
from gpubench.toolkit.console import fmt_value
from gpubench.toolkit.nccl import NCCL_TYPES  # nccl-tests' own names: its parsers read them too
from gpubench.toolkit.results import figure, finish

SUITE = "comm"
SUITE_VERSION = 1

COLLECTIVES = ("all_reduce", "all_gather", "reduce_scatter", "alltoall", "broadcast", "reduce", "sendrecv", "gather",
               "scatter", "hypercube", "alltoallv", "bisection")
REDUCING = frozenset({"all_reduce", "reduce_scatter", "reduce"})
ROOTED = frozenset({"broadcast", "reduce", "gather", "scatter"})
# Each rank's call holds one block per rank (nccl-tests' count is per rank or per peer): bytes = that count × ranks.
PER_RANK = frozenset({"all_gather", "reduce_scatter", "alltoall", "gather", "scatter", "hypercube", "alltoallv"})

PARAMS = ("collective", "bytes", "dtype", "op", "inplace")
SHOWN = ("algbw", "busbw")  # the metrics a run's summary shows beside time
BLOCKS = ("collective",)  # a run's summary is one table per collective
DTYPES = ("float32", "bfloat16", "float16", "float64", "int32")
ALIASES = {"fp32": "float32", "bf16": "bfloat16", "fp16": "float16", "fp64": "float64", "float": "float32",
           "half": "float16", "double": "float64"}
# Default sweeps on GPUs (bytes), from latency-bound to bandwidth-bound sizes.
GPU_SIZES = tuple(1 << e for e in range(10, 33, 2))  # 1 KiB, 4 KiB, ... 4 GiB
GPU_QUICK = (1 << 20, 64 << 20, 256 << 20)
# Columns beside the case parameters that every comm row carries.
EXTRAS = ("count", "world_size", "nnodes", "valid", "wrong", "engine", "root")

TIME = Metric("time", "us", "lower")
ALGBW = Metric("algbw", "GB/s", "higher")
BUSBW = Metric("busbw", "GB/s", "higher")
METRICS = (TIME, ALGBW, BUSBW)

TO_NCCL_TYPE = {v: k for k, v in NCCL_TYPES.items()}
REDUCE_OPS = ("sum", "prod", "min", "max", "avg")



def canonical_dtype(name: str) -> str:
    """``fp32`` → ``float32``: the table's dtype names are torch's."""
    return ALIASES.get(name, name)

def layout_name(threads_per_process: int, gpus_per_thread: int) -> str:
    """How a run's ranks were laid out on a machine, in the rows' ``layout`` column: one process per GPU (the torch
    engine, torchrun, an MPI build of nccl-tests), one thread per GPU (nccl-tests ``-t N -g 1``), or one thread
    driving several GPUs (nccl-tests ``-g N``, which issues every GPU's call from one thread in turn)."""
    if gpus_per_thread > 1:
        return f"thread per {gpus_per_thread} GPUs"
    return "thread per GPU" if threads_per_process > 1 else "process per GPU"


def busbw_factor(collective: str, world_size: int) -> float:
    """nccl-tests' bus-bandwidth factor for ``collective`` among ``world_size`` ranks (each test's ``GetBw``)."""
    n = world_size
    if collective == "all_reduce":
        return 2 * (n - 1) / n
    if collective in ("all_gather", "reduce_scatter", "alltoall", "gather", "scatter", "alltoallv"):
        return (n - 1) / n
    if collective in ("broadcast", "reduce", "sendrecv", "hypercube", "bisection"):
        return 1.0
    raise ValueError(f"unknown collective {collective!r}: one of {', '.join(COLLECTIVES)}")


def algbw_factor(collective: str, world_size: int) -> float:
    """algbw = bytes / time × this: 1 but for hypercube, whose algbw nccl-tests counts over the blocks a rank
    receives from the others (bytes × (n-1)/n), its busbw then equal to it."""
    return (world_size - 1) / world_size if collective == "hypercube" else 1.0


def element_count(collective: str, nbytes: int, itemsize: int, world_size: int) -> int:
    """The count passed to the library for a row of ``nbytes`` (see the module docstring)."""
    if collective in PER_RANK:
        return nbytes // (itemsize * world_size)
    return nbytes // itemsize


def case(collective: str, nbytes: int, dtype: str, op: str, inplace: bool) -> Case:
    """The case of one row; ``op`` is ``none`` for collectives that do not reduce."""
    return Case.of(collective=collective, bytes=int(nbytes), dtype=dtype, op=op, inplace=bool(inplace))


def imported_rows(
    *,
    collective: str,
    nbytes: int,
    count: int,
    dtype: str,
    op: str,
    inplace: bool,
    time_us: float,
    algbw: float,
    busbw: float,
    wrong: int | float | None,
    world_size: int,
    nnodes: int | None,
    engine: str,
    root: int = -1,
    base: Mapping[str, Any] | None = None,
) -> list[dict[str, Any]]:
    """Rows for one figure another tool printed (one value per metric, no spread): a log holds no samples.

    ``wrong`` is None when the tool did not validate; a positive count makes the row ``invalid``.
    """
    c = case(collective, nbytes, dtype, op, inplace)
    valid = None if wrong is None else wrong == 0
    status = "invalid" if valid is False else "ok"
    # A float is a count the tool printed with %g's exponent: six digits, said as about that many.
    said = f"about {fmt_value(wrong)}" if isinstance(wrong, float) else f"{wrong}"
    message = f"{said} wrong elements reported by {engine}" if valid is False else ""
    rows = []
    for m, v in ((TIME, time_us), (ALGBW, algbw), (BUSBW, busbw)):
        row = figure(base or {}, SUITE, SUITE_VERSION, c, m, [float(v)] if v is not None and math.isfinite(v) else [])
        row.update({"noisy": False, "work_bytes": int(nbytes), "count": int(count), "world_size": int(world_size),
                    "nnodes": nnodes, "valid": valid, "wrong": wrong, "engine": engine, "root": int(root)})
        rows.append(finish(row, status, message))
    return rows


__all__ = [
    "SUITE", "SUITE_VERSION", "COLLECTIVES", "PARAMS", "EXTRAS", "METRICS", "NCCL_TYPES", "TO_NCCL_TYPE",
    "busbw_factor", "algbw_factor", "element_count", "case", "imported_rows", "PER_RANK",
]
