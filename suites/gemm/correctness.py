"""gemm's check: every case's product against an fp64 product of the same operands, on a stratified sample of
rows, within the dtype's tolerance (dtypes.py); every element of C must be finite."""

from __future__ import annotations

import math
from typing import Any

import torch

from gpubench.toolkit import Check
from gpubench.suites.gemm.dtypes import tolerance
from gpubench.suites.gemm.impls import Operands

SAMPLE_ROWS = 128  # rows of C the reference recomputes (stratified: one per M/128 band)


def _sample_rows(m: int) -> torch.Tensor:
    """All rows up to SAMPLE_ROWS; beyond, one random row in each of SAMPLE_ROWS equal bands of C. A tile of a
    kernel at least a band tall (M/128 rows: 128 at M=16384) then always has a row in the sample."""
    if m <= SAMPLE_ROWS:
        return torch.arange(m)
    edges = torch.linspace(0, m, SAMPLE_ROWS + 1).long()
    widths = (edges[1:] - edges[:-1]).clamp(min=1)
    return edges[:-1] + (torch.rand(SAMPLE_ROWS) * widths).long()


REFERENCE_CHUNK_BYTES = 256 << 20
REFERENCE_K_BLOCK = 64


def chunk_columns(k: int) -> int:
    return max(1, REFERENCE_CHUNK_BYTES // (8 * k))


def _fp64(t: torch.Tensor) -> torch.Tensor:
    # fp8 goes through fp32, the conversion every device has; the others convert directly (exactly).
    return t.float().double() if t.element_size() == 1 else t.double()


def reference_rows(x: Operands, rows: torch.Tensor) -> torch.Tensor:
    """fp64 rows of A·B (scaled for fp8), computed on the operands' device in column chunks of B so that the
    upcast copy of B stays under REFERENCE_CHUNK_BYTES. K is summed in blocks of REFERENCE_K_BLOCK: for fp64
    operands this makes the reference a different summation than the library's single product, so the check
    compares two computations, not one with itself."""
    rows = rows.to(x.a.device)
    a = _fp64(x.a.index_select(0, rows))
    k, n = x.b.shape
    step = chunk_columns(k)
    parts = []
    for j in range(0, n, step):
        b = _fp64(x.b[:, j : j + step])
        part = torch.zeros((a.shape[0], b.shape[1]), dtype=torch.float64, device=a.device)
        for i in range(0, k, REFERENCE_K_BLOCK):
            part += a[:, i : i + REFERENCE_K_BLOCK] @ b[i : i + REFERENCE_K_BLOCK]
        parts.append(part)
    ref = torch.cat(parts, dim=1)
    if x.scale_a is not None:
        ref = ref * (float(x.scale_a) * float(x.scale_b))
    return ref


def checker(dtype: str, m: int, k: int, fast_accum: bool = False):
    tol = tolerance(dtype, k, fast_accum)

    def check(x: Operands, _out: Any) -> Check:
        finite = torch.isfinite(x.c)
        if not bool(finite.all()):
            bad = int((~finite).sum())
            return Check(False, math.inf, tol, f"{bad} elements of C not finite: unwritten output or overflow")
        rows = _sample_rows(m)
        ref = reference_rows(x, rows)
        got = x.c.index_select(0, rows.to(x.c.device)).double()
        err = (torch.linalg.vector_norm(got - ref) / torch.linalg.vector_norm(ref)).item()
        ok = math.isfinite(err) and err <= tol
        detail = "" if ok else f"relative error {err:.3g} > {tol:.3g} against the fp64 reference ({len(rows)} rows)"
        return Check(ok, err, tol, detail)

    return check
