"""gemm's grid: the shape families, layouts and implementations a run asks for, on GPUs and on CPUs."""

from __future__ import annotations

from collections.abc import Iterator

from gpubench.toolkit import Case, GridContext
from gpubench.suites.gemm.dtypes import DTYPES

LAYOUTS = ("NN", "NT")
# fp8 training uses both of cuBLASLt's accumulation modes: partial sums promoted to fp32 (the default, what mamf-finder
# times, backward passes) and the tensor cores' shorter one (faster: forward passes in Transformer Engine, torchao).
FAST_ACCUM = "torch_fast_accum"  # an impl of its own, so that neither mode passes for the other; layout NT only
IMPLS = ("torch", FAST_ACCUM, "triton", "cupy")

# Shapes. Square sides and the search sweep are powers of two or multiples of 1024/2048 as mamf-finder
# sweeps them; transformer shapes are Llama-3 8B (hidden 4096, MLP 14336) and 70B (8192, 28672) projections.
SQUARE = (1024, 2048, 4096, 8192, 16384)
TOKENS = (4096, 8192)
PROJECTIONS = ((4096, 4096), (14336, 4096), (4096, 14336), (8192, 8192), (28672, 8192), (8192, 28672))
SKINNY_M, SKINNY_NK = (1, 16, 64), 8192
MODEL_DTYPES = ("bf16", "fp8")  # what transformer and skinny shapes run by default (training/inference)
SEARCH = (1024, 2048, 4096, 8192, 12288, 16384, 20480)  # 7**3 = 343 shapes per dtype
SEARCH_QUICK = (2048, 4096, 8192)
# CPU (and fake) grid: small enough for CI on two cores.
CPU_SQUARE, CPU_SQUARE_QUICK = (128, 256, 512), (512,)
CPU_SKINNY_M, CPU_SKINNY_NK = (1, 16, 64), 512
CPU_SEARCH, CPU_SEARCH_QUICK = (128, 256, 384, 512), (256, 512)


def _search_cases(ctx: GridContext, on_gpu: bool):
    if ctx.sizes:
        values = tuple(ctx.sizes)
    elif on_gpu:
        values = SEARCH_QUICK if ctx.quick else SEARCH
    else:
        values = CPU_SEARCH_QUICK if ctx.quick else CPU_SEARCH
    # The vendor library only (both of fp8's accumulation modes): the question is what it gets; Triton would
    # autotune every shape.
    for dtype in ctx.pick_dtypes("gemm", DTYPES, ("bf16",) if on_gpu else ("fp32",)):
        for impl in ("torch", FAST_ACCUM) if dtype == "fp8" else ("torch",):
            for m in values:
                for n in values:
                    for k in values:
                        yield Case.of(shape="search", dtype=dtype, layout="NT", M=m, N=n, K=k, impl=impl)


def _families(ctx: GridContext, on_gpu: bool):
    """(shape family, [(m, n, k)], layouts, default dtypes, impls) for the non-search grid."""
    all_dtypes = tuple(DTYPES)
    if ctx.sizes:
        return [("square", [(s, s, s) for s in ctx.sizes], LAYOUTS, all_dtypes, IMPLS)]
    if not on_gpu:
        square = CPU_SQUARE_QUICK if ctx.quick else CPU_SQUARE
        skinny = (16,) if ctx.quick else CPU_SKINNY_M
        return [
            ("square", [(s, s, s) for s in square], LAYOUTS, all_dtypes, IMPLS),
            ("skinny", [(m, CPU_SKINNY_NK, CPU_SKINNY_NK) for m in skinny], ("NT",), ("fp32", "fp64"), IMPLS),
        ]
    if ctx.quick:
        # A smoke run under 30 s (docs/measurements.md, "Wall time"): each large product takes ~5 s (warm-up past the
        # power limit, three 1 s samples); Triton once (its autotune compiles eight kernels per dtype).
        return [
            ("square", [(4096, 4096, 4096)], ("NT",), MODEL_DTYPES, ("torch",)),
            ("square", [(4096, 4096, 4096)], ("NT",), ("bf16",), ("triton",)),
            ("skinny", [(16, SKINNY_NK, SKINNY_NK)], ("NT",), ("bf16",), ("torch",)),
        ]
    return [
        ("square", [(s, s, s) for s in SQUARE], LAYOUTS, all_dtypes, IMPLS),
        ("transformer", [(t, n, k) for t in TOKENS for n, k in PROJECTIONS], ("NT",), MODEL_DTYPES, IMPLS),
        ("skinny", [(m, SKINNY_NK, SKINNY_NK) for m in SKINNY_M], ("NT",), MODEL_DTYPES, IMPLS),
    ]


def cases(ctx: GridContext, on_gpu: bool) -> Iterator[Case]:
    """A run's cases: the search's, or every shape family's in each dtype, layout and implementation."""
    if ctx.search:
        yield from _search_cases(ctx, on_gpu)
        return
    for shape, mnks, layouts, default_dtypes, impls in _families(ctx, on_gpu):
        for dtype in ctx.pick_dtypes("gemm", DTYPES, default_dtypes):
            for layout in layouts:
                for m, n, k in mnks:
                    for impl in impls:
                        if impl == FAST_ACCUM and (dtype != "fp8" or layout != "NT"):
                            continue  # an fp8 mode; NN fp8 is a skip row already through "torch"
                        yield Case.of(shape=shape, dtype=dtype, layout=layout, M=m, N=n, K=k, impl=impl)
