"""BabelStream's kernels in Triton: copy, mul, add, triad, dot, fill; and ``fma``, k multiply-adds per element
for the arithmetic-intensity (roofline) sweep.

One program handles one block of elements (a flat grid, no grid-stride loop): for streaming kernels this
keeps every load independent and lets the compiler issue 16-byte vector accesses. Offsets are 64-bit
because arrays past 2**31 elements are in the grid. Half types compute in fp32 and round once on store,
as torch does; fp64 stays fp64.

Block shape: one 16-byte access per thread per array, 128 threads a program (2 KiB, the shape of PyTorch's own
elementwise kernel), fixed here: the best shape on H200 and H100 or next to it, where triton.autotune per device did
worse and grid-stride loops and streaming cache hints gained nothing (docs/measurements.md, 'elementwise'). The
tuning suite sweeps shapes.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

VECTOR_BYTES = 16
NUM_WARPS = 4  # 128 threads per program
# fill only writes: a 2 KiB program is done once its stores are issued, and the rate at which a multiprocessor starts
# programs, not memory, sets the pace. Fill's programs write 8 KiB (docs/measurements.md, 'elementwise').
FILL_VECTOR_BYTES = 32
FILL_WARPS = 8
DOT_BLOCK = 8192
DOT_WARPS = 8


@triton.jit
def _offsets(n, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    return offs, offs < n


@triton.jit
def _copy_kernel(src, dst, n, ELEMS: tl.constexpr, W: tl.constexpr):
    offs, mask = _offsets(n, ELEMS * 32 * W)
    tl.store(dst + offs, tl.load(src + offs, mask=mask), mask=mask)


@triton.jit
def _mul_kernel(src, dst, s, n, IS64: tl.constexpr, ELEMS: tl.constexpr, W: tl.constexpr):
    offs, mask = _offsets(n, ELEMS * 32 * W)
    x = tl.load(src + offs, mask=mask)
    x = x.to(tl.float64) if IS64 else x.to(tl.float32)
    tl.store(dst + offs, (s * x).to(dst.dtype.element_ty), mask=mask)


@triton.jit
def _add_kernel(a, b, dst, n, IS64: tl.constexpr, ELEMS: tl.constexpr, W: tl.constexpr):
    offs, mask = _offsets(n, ELEMS * 32 * W)
    x = tl.load(a + offs, mask=mask)
    y = tl.load(b + offs, mask=mask)
    if IS64:
        r = x.to(tl.float64) + y.to(tl.float64)
    else:
        r = x.to(tl.float32) + y.to(tl.float32)
    tl.store(dst + offs, r.to(dst.dtype.element_ty), mask=mask)


@triton.jit
def _triad_kernel(b, c, dst, s, n, IS64: tl.constexpr, ELEMS: tl.constexpr, W: tl.constexpr):
    offs, mask = _offsets(n, ELEMS * 32 * W)
    x = tl.load(b + offs, mask=mask)
    y = tl.load(c + offs, mask=mask)
    if IS64:
        r = x.to(tl.float64) + s * y.to(tl.float64)
    else:
        r = x.to(tl.float32) + s * y.to(tl.float32)
    tl.store(dst + offs, r.to(dst.dtype.element_ty), mask=mask)


@triton.jit
def _fill_kernel(dst, s, n, ELEMS: tl.constexpr, W: tl.constexpr):
    offs, mask = _offsets(n, ELEMS * 32 * W)
    v = tl.full((ELEMS * 32 * W,), s, dtype=tl.float32).to(dst.dtype.element_ty)
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


@triton.jit
def _fma_kernel(src, dst, coef, n, K: tl.constexpr, ELEMS: tl.constexpr, W: tl.constexpr):
    offs, mask = _offsets(n, ELEMS * 32 * W)
    # In the array's own dtype, half types included (unlike the kernels above), so that each dtype's own
    # vector-arithmetic roof shows. a and b come from memory: values the compiler cannot fold.
    x = tl.load(src + offs, mask=mask)
    a = tl.load(coef)
    b = tl.load(coef + 1)
    for _ in tl.static_range(K):  # unrolled: no loop counter between the multiply-adds
        x = x * a + b
    tl.store(dst + offs, x.to(dst.dtype.element_ty), mask=mask)


def _launch(kernel, n: int, t: torch.Tensor, *args, warps: int | None = None, vector_bytes: int | None = None,
            **kw) -> None:
    """Launch an elementwise kernel over n elements of t's dtype, one 16-byte vector per thread (or
    ``vector_bytes``: the kernel-config sweep tries others)."""
    elems = max(1, (vector_bytes or VECTOR_BYTES) // t.element_size())
    warps = warps or NUM_WARPS
    kernel[(triton.cdiv(n, elems * 32 * warps),)](*args, n, **kw, ELEMS=elems, W=warps, num_warps=warps)


def copy(a: torch.Tensor, c: torch.Tensor, warps: int | None = None, vector_bytes: int | None = None) -> torch.Tensor:
    _launch(_copy_kernel, a.numel(), a, a, c, warps=warps, vector_bytes=vector_bytes)
    return c


def mul(c: torch.Tensor, b: torch.Tensor, s: float, warps: int | None = None,
        vector_bytes: int | None = None) -> torch.Tensor:
    _launch(_mul_kernel, c.numel(), c, c, b, s, warps=warps, vector_bytes=vector_bytes, IS64=c.dtype == torch.float64)
    return b


def add(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor, warps: int | None = None,
        vector_bytes: int | None = None) -> torch.Tensor:
    _launch(_add_kernel, a.numel(), a, a, b, c, warps=warps, vector_bytes=vector_bytes, IS64=a.dtype == torch.float64)
    return c


def triad(b: torch.Tensor, c: torch.Tensor, a: torch.Tensor, s: float, warps: int | None = None,
          vector_bytes: int | None = None) -> torch.Tensor:
    _launch(_triad_kernel, b.numel(), b, b, c, a, s, warps=warps, vector_bytes=vector_bytes,
            IS64=b.dtype == torch.float64)
    return a


def fill(a: torch.Tensor, s: float, warps: int | None = None, vector_bytes: int | None = None) -> torch.Tensor:
    _launch(_fill_kernel, a.numel(), a, a, s, warps=warps or FILL_WARPS, vector_bytes=vector_bytes or FILL_VECTOR_BYTES)
    return a


def fma(src: torch.Tensor, dst: torch.Tensor, k: int, a: float, b: float, warps: int | None = None) -> torch.Tensor:
    """dst = f^k(src) with f(x) = a·x + b: one read, one write and k multiply-adds per element, in the
    array's own dtype. a and b are read from device memory, so the compiler cannot fold the chain."""
    key = (src.dtype, src.device, a, b)
    coef = _COEFS.get(key)
    if coef is None:  # made once: a host-to-device copy per call would be timed with the kernel
        coef = _COEFS[key] = torch.tensor([a, b], dtype=src.dtype, device=src.device)
    _launch(_fma_kernel, src.numel(), src, src, dst, coef, warps=warps, K=k)
    return dst


_COEFS: dict = {}


def dot(a: torch.Tensor, b: torch.Tensor, block: int = DOT_BLOCK, num_warps: int = DOT_WARPS) -> torch.Tensor:
    """Per-block partial sums in fp32 (fp64 for fp64), then one small torch sum over the partials."""
    n = a.numel()
    acc = torch.float64 if a.dtype == torch.float64 else torch.float32
    partial = torch.empty(triton.cdiv(n, block), dtype=acc, device=a.device)
    _dot_kernel[(triton.cdiv(n, block),)](a, b, partial, n, BLOCK=block, IS64=a.dtype == torch.float64,
                                          num_warps=num_warps)
    return partial.sum()
