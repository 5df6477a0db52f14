"""A parsed run → rows of gpubench's ``comm`` table (:func:`gpubench.commtable.imported_rows`).

Figures are copied as printed, never recomputed. Each row is checked against nccl-tests' own arithmetic,
``busbw = algbw × busbw_factor(collective, ranks)``, within the rounding of the two printed figures: a row that
fails means the world size or the collective is wrong, and the import stops rather than store mislabelled
figures. The one known exception: before 2020-06 (NVIDIA/nccl-tests ec1b5e2) all_gather and reduce_scatter
printed busbw = algbw (algbw then counted size × (n-1)/n); such rows are kept with a note in ``message``.

Validation columns:
- ``#wrong`` (2.13+): the count of wrong elements → ``wrong``; ``valid`` = wrong == 0; ``N/A`` → None.
- ``error`` (before 2.13): the largest absolute deviation from the expected result, not a count. ``wrong`` is
  None; ``valid`` is whether the printed error is within the tool's own bound, DeltaMaxValue(type) × (ranks-1)
  (1e-2 for half/bfloat16, 1e-5 for float, 1e-12 for double, exact for integers); a NaN error or one rccl-tests
  marked with ``*`` is invalid. The printed error has one significant digit, so a row within a rounding step of
  the bound may be judged otherwise than the tool judged it; the footer's "Out of bounds values" count is in
  run.json for that case. ``check_error``/``check_tolerance`` hold the printed error and the bound.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from gpubench import commtable
from gpubench.nccltests import names
from gpubench.nccltests.model import ParseError, Row, Run

# nccl-tests' DeltaMaxValue (src/common.cu before 2.13): the per-rank error bound by type; integers must match.
ERROR_BOUND = {"half": 1e-2, "bfloat16": 1e-2, "float": 1e-5, "double": 1e-12}
EXACT = 1e-200


def error_bound(type_name: str, world_size: int) -> float:
    return ERROR_BOUND.get(type_name, EXACT) * (world_size - 1)


def consistent(row: Row, factor: float) -> bool:
    """busbw = algbw × factor within the print rounding of both figures (non-finite figures pass)."""
    if not all(math.isfinite(v) for v in (row.algbw, row.busbw, row.algbw_tol, row.busbw_tol)):
        return True
    slack = row.busbw_tol + factor * row.algbw_tol
    return abs(row.busbw - row.algbw * factor) <= slack * (1 + 1e-9) + 1e-12


def comm_rows(run: Run, base: Mapping[str, Any] | None = None) -> list[dict[str, Any]]:
    """Rows of the comm table (three per placement: time, algbw, busbw) for ``run``."""
    if not run.rows:
        return []
    coll = run.collective
    if coll not in commtable.COLLECTIVES:
        raise ParseError(run.source, run.line, f"{coll} results have no place in gpubench's comm table (it holds "
                                               f"{', '.join(commtable.COLLECTIVES)})")
    n = run.world_size
    if not n:
        raise ParseError(run.source, run.line, "the log lists no devices: the world size is unknown")
    factor = commtable.busbw_factor(coll, n)
    fnuz = bool(run.config.get("fp8_fnuz"))
    engine = run.tool
    known = method(run)
    out = []
    for row in run.rows:
        note = ""
        if not consistent(row, factor):
            if coll in ("all_gather", "reduce_scatter") and run.generation == "pre-2.13" and consistent(row, 1.0):
                note = ("busbw = algbw as nccl-tests printed it before 2020-06 (algbw then counted size×(n-1)/n); "
                        "not comparable with later logs")
            else:
                raise ParseError(run.source, row.line,
                                 f"busbw {row.busbw:g} is not algbw {row.algbw:g} × {factor:.4g} ({coll}, {n} "
                                 "ranks) within print rounding: the world size or the collective is wrong "
                                 "(pass --collective, or check the device lines)")
        dtype = names.dtype_of(row.type, fnuz=fnuz)
        rows = commtable.imported_rows(
            collective=coll, nbytes=row.size, count=row.count, dtype=dtype,
            op=row.redop if coll in commtable.REDUCING and row.redop else "none",
            inplace=row.placement == "in", time_us=row.time_us, algbw=row.algbw, busbw=row.busbw,
            wrong=row.wrong, world_size=n, nnodes=run.nnodes, engine=engine,
            root=row.root if row.root is not None else -1, base=base)
        if row.error is not None or row.flagged:
            _judge_error(rows, row, n, engine)
        if note:
            for r in rows:
                r["message"] = "; ".join(m for m in (r["message"], note) if m)
        if run.config.get("cputime"):
            for r in rows:
                r["message"] = "; ".join(m for m in (r["message"], "time is CPU time (-C 1)") if m)
        for r in rows:
            r["source"] = f"{run.source}:{row.line}"
            r.update(known)
        out.extend(rows)
    return out


# NCCL_VERSION(2,19,0): from these headers on, nccl-tests takes its buffers from ncclMemAlloc (AllocateBuffs in
# src/common.cu), before them from cudaMalloc.
MEM_ALLOC_HEADERS = 21900


def method(run: Run) -> dict[str, Any]:
    """The comm table's method columns (``graph``, ``alloc``, ``register``; see :mod:`gpubench.compare.settings`)
    that the log tells. A column it does not tell is left out, so that a comparison counts it as unknown.

    ``graph`` comes from the header's (or the JSON config's) ``graph:``. ``alloc`` from the ``nccl-headers=`` of
    nccl-tests' version line (2.17.4+); rccl-tests allocates otherwise and is not told. ``register`` from ``-R``
    in the JSON file's argv (a text log does not print it; gpubench's own engine knows it from its command);
    ``-R 2``, symmetric registration, has no counterpart in gpubench and is left unknown."""
    out: dict[str, Any] = {}
    if isinstance(run.config.get("graph"), (bool, int)):
        out["graph"] = bool(run.config["graph"])
    headers = run.config.get("nccl_headers")
    if run.tool == "nccl-tests" and isinstance(headers, int):
        out["alloc"] = "nccl" if headers >= MEM_ALLOC_HEADERS else "cudaMalloc"
    args = run.config.get("args")
    if isinstance(args, list):
        level = _register_level([str(a) for a in args[1:]])
        if level in (0, 1):
            out["register"] = bool(level)
    return out


def _register_level(args: list[str]) -> int | None:
    """The value of ``-R``/``--local_register`` in nccl-tests' argv (0 when absent, None when unreadable)."""
    level: int | None = 0
    for i, a in enumerate(args):
        value = None
        if a in ("-R", "--local_register"):
            value = args[i + 1] if i + 1 < len(args) else ""
        elif a.startswith("--local_register="):
            value = a.split("=", 1)[1]
        elif a.startswith("-R"):
            value = a[2:]
        if value is not None:
            try:
                level = int(value, 0)
            except ValueError:
                level = None
    return level


def _judge_error(rows: list[dict[str, Any]], row: Row, n: int, engine: str) -> None:
    """Pre-2.13 `error` column: valid when the printed deviation is within the tool's bound."""
    bound = error_bound(row.type, n)
    error = row.error
    valid = not row.flagged and error is not None and not math.isnan(error) and error <= bound
    for r in rows:
        r["valid"] = valid
        r["wrong"] = None
        r["check_error"] = error
        r["check_tolerance"] = bound
        if not valid:
            r["status"] = "invalid"
            r["message"] = (f"max abs error {error:.0e} above {engine}' bound {bound:.0e} ({row.type}, {n} ranks)"
                            if error is not None and not row.flagged else
                            f"{engine} marked the error {error:.0e} as above its threshold")
