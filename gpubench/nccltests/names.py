"""Names nccl-tests prints (binaries, data types, reduction ops) and which collective a table can belong to.

Logs since 2.16.7 name the binary (``# Collective test starting: all_reduce_perf``) and ``-J`` JSON files carry
it in ``args``. Older logs do not: there the table's shape narrows it down (src/*.cu of each tag):

- before 2.13 every binary printed its own header: ``redop`` only for the reducing ones and alltoall, ``root``
  only for the rooted ones, both for reduce;
- from 2.13 one header with both columns: ``redop`` is ``none`` for non-reducing collectives and ``root`` is
  ``-1`` for non-rooted ones;
- ``size`` is ``count × itemsize`` for all_reduce, broadcast, reduce and sendrecv, and ``count × itemsize ×
  ranks`` for all_gather, reduce_scatter, alltoall, gather, scatter and hypercube (``*GetCollByteCount``).

What is left ambiguous (all_gather or alltoall, gather or scatter, ...) the user settles with ``--collective``.
"""

from __future__ import annotations

import re

from gpubench.commtable import NCCL_TYPES

# Binaries nccl-tests and rccl-tests build (src/Makefile), without the `_perf` suffix.
BINARIES = ("all_reduce", "all_gather", "reduce_scatter", "alltoall", "alltoallv", "broadcast", "reduce",
            "sendrecv", "gather", "scatter", "hypercube", "all_reduce_bias")

# Type names beyond commtable.NCCL_TYPES: NCCL 1 builds printed char/int; rccl-tests prints fp8_e4m3/fp8_e5m2
# (and uses AMD's FNUZ fp8 on gfx942, where it prints "using FNUZ FP8 types").
TYPE_ALIASES = {"char": "int8", "int": "int32", "fp8_e4m3": "float8_e4m3", "fp8_e5m2": "float8_e5m2"}
FNUZ = {"float8_e4m3": "float8_e4m3fnuz", "float8_e5m2": "float8_e5m2fnuz"}
ITEMSIZE = {"int8": 1, "uint8": 1, "int32": 4, "uint32": 4, "int64": 8, "uint64": 8, "float16": 2,
            "float32": 4, "float64": 8, "bfloat16": 2, "float8_e4m3": 1, "float8_e5m2": 1}
REDOPS = ("sum", "prod", "max", "min", "avg", "mulsum", "none")

_BINARY = re.compile(r"^(?:.*/)?([a-z][a-z0-9_]*?)_perf(?:_[A-Za-z0-9]+)*$")


def collective_of_binary(name: str) -> str | None:
    """``all_reduce_perf`` / ``./build/all_reduce_perf_mpi`` → ``all_reduce``; None for anything else."""
    m = _BINARY.match(name.strip())
    return m.group(1) if m and m.group(1) in BINARIES else None


def nccl_version(code: int) -> str:
    """NCCL_VERSION_CODE → "2.28.9" (codes below 10000 are NCCL before 2.9: major*1000 + minor*100 + patch)."""
    if code >= 10000:
        return f"{code // 10000}.{code % 10000 // 100}.{code % 100}"
    return f"{code // 1000}.{code % 1000 // 100}.{code % 100}"


def dtype_of(type_name: str, *, fnuz: bool = False) -> str | None:
    """nccl-tests' type name → gpubench's dtype (commtable.NCCL_TYPES, plus older/rccl spellings)."""
    dtype = NCCL_TYPES.get(type_name) or TYPE_ALIASES.get(type_name)
    if dtype and fnuz:
        dtype = FNUZ.get(dtype, dtype)
    return dtype


def itemsize(type_name: str) -> int | None:
    dtype = dtype_of(type_name)
    return ITEMSIZE.get(dtype) if dtype else None


def _ratio(rows, world_size: int | None) -> str | None:
    """"one" when size = count × itemsize on every row, "ranks" when size = count × itemsize × ranks, else
    None (no rows with elements, a single rank, or no consistent relation)."""
    kinds = set()
    for r in rows:
        size = itemsize(r.type)
        if not size or r.count <= 0:
            continue
        k = r.size / (r.count * size)
        kinds.add("one" if k == 1 else "ranks" if world_size and k == world_size else "other")
    if world_size == 1 or len(kinds) != 1:
        return None
    kind = kinds.pop()
    return None if kind == "other" else kind


def candidates(columns: tuple[str, ...], rows, world_size: int | None, generation: str | None) -> set[str] | None:
    """The collectives whose output this table could be; None when rows are needed and there are none."""
    if not rows:
        return None
    if generation == "pre-2.13":
        reducing, rooted = "redop" in columns, "root" in columns
    else:
        reducing = any(r.redop not in (None, "none") for r in rows)
        rooted = any(r.root not in (None, -1) for r in rows)
    by_ratio = {
        (True, True): ({"reduce"}, {"reduce"}),
        # Before 2.13 alltoall printed a redop column too.
        (True, False): ({"all_reduce"}, {"reduce_scatter", "alltoall"} if generation == "pre-2.13"
                        else {"reduce_scatter"}),
        (False, True): ({"broadcast"}, {"gather", "scatter"}),
        (False, False): ({"sendrecv"}, {"all_gather", "hypercube"} if generation == "pre-2.13"
                         else {"all_gather", "alltoall", "hypercube"}),
    }[(reducing, rooted)]
    kind = _ratio(rows, world_size)
    if kind == "one":
        return set(by_ratio[0])
    if kind == "ranks":
        return set(by_ratio[1])
    return by_ratio[0] | by_ratio[1]


def hinted(text: str) -> set[str]:
    """Collectives named by ``<name>_perf`` words in a line (a command line a job script echoed)."""
    found = set()
    for word in re.findall(r"[A-Za-z0-9_./-]*_perf[A-Za-z0-9_]*", text):
        name = collective_of_binary(word)
        if name:
            found.add(name)
    return found
