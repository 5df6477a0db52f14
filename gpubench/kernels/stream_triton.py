"""BabelStream's kernels in Triton: copy, mul, add, triad, dot, fill.

One program handles one BLOCK of elements (a flat grid, no grid-stride loop): for streaming kernels this
keeps every load independent and lets the compiler issue 16-byte vector accesses. Offsets are 64-bit
because arrays past 2**31 elements are in the grid. Half types compute in fp32 and round once on store,
as torch does; fp64 stays fp64.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

# Defaults chosen by measurement on an H100 (docs/measurements.md, tests/gpu/sweep_stream_variants.py): the
# fastest shapes gave each of 512 threads exactly one 16-byte access per array, i.e. 8 KiB per program;
# persistent grid-stride variants were ~5% slower and streaming cache hints changed nothing measurable.
PROGRAM_BYTES = 8192
NUM_WARPS = 16
DOT_BLOCK = 8192
DOT_WARPS = 8


def block_for(t: torch.Tensor) -> int:
    """Elements per program: PROGRAM_BYTES of this tensor's dtype."""
    return PROGRAM_BYTES // t.element_size()


@triton.jit
def _offsets(n, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    return offs, offs < n


@triton.jit
def _copy_kernel(src, dst, n, BLOCK: tl.constexpr):
    offs, mask = _offsets(n, BLOCK)
    tl.store(dst + offs, tl.load(src + offs, mask=mask), mask=mask)


@triton.jit
def _mul_kernel(src, dst, s, n, BLOCK: tl.constexpr, IS64: tl.constexpr):
    offs, mask = _offsets(n, BLOCK)
    x = tl.load(src + offs, mask=mask)
    x = x.to(tl.float64) if IS64 else x.to(tl.float32)
    tl.store(dst + offs, (s * x).to(dst.dtype.element_ty), mask=mask)


@triton.jit
def _add_kernel(a, b, dst, n, BLOCK: tl.constexpr, IS64: tl.constexpr):
    offs, mask = _offsets(n, BLOCK)
    x = tl.load(a + offs, mask=mask)
    y = tl.load(b + offs, mask=mask)
    if IS64:
        r = x.to(tl.float64) + y.to(tl.float64)
    else:
        r = x.to(tl.float32) + y.to(tl.float32)
    tl.store(dst + offs, r.to(dst.dtype.element_ty), mask=mask)


@triton.jit
def _triad_kernel(b, c, dst, s, n, BLOCK: tl.constexpr, IS64: tl.constexpr):
    offs, mask = _offsets(n, BLOCK)
    x = tl.load(b + offs, mask=mask)
    y = tl.load(c + offs, mask=mask)
    if IS64:
        r = x.to(tl.float64) + s * y.to(tl.float64)
    else:
        r = x.to(tl.float32) + s * y.to(tl.float32)
    tl.store(dst + offs, r.to(dst.dtype.element_ty), mask=mask)


@triton.jit
def _fill_kernel(dst, s, n, BLOCK: tl.constexpr):
    offs, mask = _offsets(n, BLOCK)
    v = tl.full((BLOCK,), s, dtype=tl.float32).to(dst.dtype.element_ty)
    tl.store(dst + offs, v, mask=mask)


@triton.jit
def _dot_kernel(a, b, partial, n, BLOCK: tl.constexpr, IS64: tl.constexpr):
    offs, mask = _offsets(n, BLOCK)
    x = tl.load(a + offs, mask=mask, other=0.0)
    y = tl.load(b + offs, mask=mask, other=0.0)
    if IS64:
        acc = tl.sum(x.to(tl.float64) * y.to(tl.float64), axis=0)
    else:
        acc = tl.sum(x.to(tl.float32) * y.to(tl.float32), axis=0)
    tl.store(partial + tl.program_id(0), acc)


def _grid(n: int, block: int):
    return (triton.cdiv(n, block),)


def copy(a: torch.Tensor, c: torch.Tensor, block: int | None = None, num_warps: int = NUM_WARPS) -> torch.Tensor:
    n, block = a.numel(), block or block_for(a)
    _copy_kernel[_grid(n, block)](a, c, n, BLOCK=block, num_warps=num_warps)
    return c


def mul(c: torch.Tensor, b: torch.Tensor, s: float, block: int | None = None, num_warps: int = NUM_WARPS) -> torch.Tensor:
    n, block = c.numel(), block or block_for(c)
    _mul_kernel[_grid(n, block)](c, b, s, n, BLOCK=block, IS64=c.dtype == torch.float64, num_warps=num_warps)
    return b


def add(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor, block: int | None = None, num_warps: int = NUM_WARPS) -> torch.Tensor:
    n, block = a.numel(), block or block_for(a)
    _add_kernel[_grid(n, block)](a, b, c, n, BLOCK=block, IS64=a.dtype == torch.float64, num_warps=num_warps)
    return c


def triad(b: torch.Tensor, c: torch.Tensor, a: torch.Tensor, s: float, block: int | None = None,
          num_warps: int = NUM_WARPS) -> torch.Tensor:
    n, block = b.numel(), block or block_for(b)
    _triad_kernel[_grid(n, block)](b, c, a, s, n, BLOCK=block, IS64=b.dtype == torch.float64, num_warps=num_warps)
    return a


def fill(a: torch.Tensor, s: float, block: int | None = None, num_warps: int = NUM_WARPS) -> torch.Tensor:
    n, block = a.numel(), block or block_for(a)
    _fill_kernel[_grid(n, block)](a, s, n, BLOCK=block, num_warps=num_warps)
    return a


def dot(a: torch.Tensor, b: torch.Tensor, block: int = DOT_BLOCK, num_warps: int = DOT_WARPS) -> torch.Tensor:
    """Per-block partial sums in fp32 (fp64 for fp64), then one small torch sum over the partials."""
    n = a.numel()
    acc = torch.float64 if a.dtype == torch.float64 else torch.float32
    partial = torch.empty(triton.cdiv(n, block), dtype=acc, device=a.device)
    _dot_kernel[_grid(n, block)](a, b, partial, n, BLOCK=block, IS64=a.dtype == torch.float64, num_warps=num_warps)
    return partial.sum()
