"""``gemm``: dense matrix products C = A·B, what a GPU's math units deliver, per dtype, shape and library.

Work is counted as everyone counts it: ``flops = 2·M·N·K`` (one multiply and one add per term, nothing for
scaling), and ``bytes`` = every operand touched once, ``size(A)·(M·K + K·N) + size(C)·M·N`` — the least
traffic a GEMM can have, so ``intensity = flops / bytes`` (an extra column, FLOP per byte) places a case on
the roofline. fp8's two scale scalars are not counted.

dtypes: fp64, fp32 (TF32 off), tf32 (fp32 operands, TF32 tensor cores), fp16, bf16, and fp8 (e4m3 operands,
bf16 output, per-tensor scales, through ``torch._scaled_mm``). Layouts: ``NN`` (B stored K×N) and ``NT``
(B stored N×K and used transposed, as an ``nn.Linear`` weight; ``_scaled_mm`` wants this). Implementations
(``impl``): ``torch`` (torch.matmul → cuBLAS/hipBLASLt), ``torch_fast_accum`` (fp8 only: ``_scaled_mm`` with
``use_fast_accum=True``, see FAST_ACCUM), ``triton`` (gpubench/kernels/matmul_triton.py: persistent TMA on
Hopper with the launch configuration the autotune-kernels sweep exported, a tiled fallback elsewhere; column
``impl_config`` names the variant and configuration each row ran) and ``cupy``
(cupy.matmul on views of the same memory). Shape families (``shape``):

- ``square``: M=N=K from 1024 to 16384;
- ``transformer``: M = 4096 or 8192 tokens against Llama-3 8B and 70B projections (N, K from 4096, 8192,
  14336, 28672);
- ``skinny``: decode-like M = 1, 16, 64 against an 8192×8192 weight (memory-bound: read B once);
- ``search`` (``--search``): a sweep of M, N, K — mamf-finder's question, the best TF/s any shape gets —
  summarized per dtype/impl as derived rows: the best shape, p10/median/p90 and the geometric mean. On GPUs
  it is timed mamf-finder's way (one product per sample, the cache flushed before each; column ``method``),
  not back to back like the rest of the grid; batches of such samples are queued behind a stream hold.

``--sizes 4K,8K`` runs square shapes of those sides instead (with ``--search``: the values M, N, K sweep).
On the CPU (and the fake backend) the grid shrinks to sides ≤ 512 and only fp32/fp64 through torch run.

Each row's TF/s comes from the engine (flops / time). ``pct_peak`` is that over the vendor's dense peak for
the device and dtype (gpubench/machine/spec_peaks.py; extra columns ``peak_tflops`` and ``peak_source``); where the peak
is unknown, pct_peak is NaN and peak_source is "unknown".

On GPUs a small GEMM (≤ HOLD_MAX_FLOPS) runs behind a stream hold until a whole batch is enqueued
(``Workload.hold``), so that it is timed back to back on the GPU, not at the rate Python can issue it (the
launch suite measures that); larger ones keep the queue full by themselves and run under continuous load,
after a warm-up long enough for the power limit to settle the clock (GPU_MIN_WARMUP_S), in samples that each
last a whole period of the power controller (GPU_POWER_PERIOD_S), whose swings they then average out.

Correctness: every case is checked once on fresh inputs against an fp64 product of the *same* operands (fp8
upcast after quantisation, so only accumulation and output rounding are judged), on a stratified sample of
rows so that the check stays cheap at 16384³; every element of C is checked to be finite (C starts as NaN).
See ``tolerance`` for the bounds and why.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from gpubench.timing import engine, fills
from gpubench.backends.base import Backend
from gpubench.machine.memory_budget import too_big
from gpubench.machine.spec_peaks import peak_tflops
from gpubench.timing.stats import propagate
from gpubench.suites.gemm import charts as charts_gemm
from gpubench.suite import THROUGHPUT, TIME, Case, Check, Derived, GridContext, Method, Metric, Skip, Suite, Workload

PCT_PEAK = Metric("pct_peak", "%", "higher")


@dataclass(frozen=True)
class DType:
    operand: torch.dtype | None  # None: fp8, whose torch type depends on the device
    output: torch.dtype
    fp32_precision: str | None = None  # torch.set_float32_matmul_precision for this dtype's runs
    # Relative Frobenius error allowed for rounding of the output (and of TF32's operands); see tolerance().
    rounding_tol: float = 0.0
    acc_roundoff: float = 2.0**-24  # unit roundoff of the accumulator (fp32 for all but fp64 and fp8)


DTYPES = {
    # Two fp64 products of the same operands differ by their summation order alone (H100: 1.5e-15 at 2048³,
    # 4.3e-15 at 16384³).
    "fp64": DType(torch.float64, torch.float64, rounding_tol=1e-12, acc_roundoff=2.0**-53),
    # Output rounding is 2**-24 (6e-8); the floor leaves room for a BLAS's blocked summation. TF32 gives
    # ~3e-4 and fails.
    "fp32": DType(torch.float32, torch.float32, "highest", rounding_tol=1e-5),
    # TF32 keeps 10 mantissa bits of each operand: measured on H100 at 2048³, 2.6e-4 through cuBLAS (rounds to
    # nearest) and 6.9e-4 through Triton (whose conversion truncates: a bias, so it does not shrink with K).
    "tf32": DType(torch.float32, torch.float32, "high", rounding_tol=2e-3),
    # fp16 output rounding: 2**-11 = 4.9e-4 at most, ~3e-4 RMS; reduced-precision split-K reductions (torch's
    # default) add a few roundings. 5e-3 is ten unit roundoffs.
    "fp16": DType(torch.float16, torch.float16, rounding_tol=5e-3),
    # bf16 output rounding: 2**-8 = 3.9e-3 at most, ~2e-3 RMS.
    "bf16": DType(torch.bfloat16, torch.bfloat16, rounding_tol=1e-2),
    # The reference uses the quantised fp8 operands, so only accumulation and the bf16 output rounding remain.
    # Hopper's fp8 tensor cores accumulate in fewer bits than fp32 unless the kernel promotes partial sums to
    # fp32 (cuBLAS does: 1.7e-3 flat on H100; Triton's kernel measured 2.0e-3 at K=4096, 4.5e-3 at K=28672).
    "fp8": DType(None, torch.bfloat16, rounding_tol=1e-2, acc_roundoff=2.0**-16),
}
# fast accumulation sums in the tensor cores' own accumulator: about 14 bits kept on Hopper, as the DeepSeek-V3
# report (arXiv:2412.19437, section 3.3.2) measured on H800. H100, 2026-11-23 (search, 125 shapes): 1.72e-3 at
# K=1024 growing to 3.36e-3 at K=16384, against the default mode's flat 1.66e-3 (bound here: 1.4e-2 / 2.6e-2).
FAST_ACCUM_ROUNDOFF = 2.0**-14
LAYOUTS = ("NN", "NT")
# fp8 has two accumulation modes in cuBLASLt, and fp8 training uses both: by default the kernel promotes the
# tensor cores' partial sums to fp32 every few steps (what mamf-finder times, and what backward passes use);
# with fast accumulation it keeps them in the tensor cores' shorter accumulator, which is faster (forward
# passes in Transformer Engine and torchao run this way). Both are measured, under separate impl names, so
# that neither passes for the other. fp8 in layout NT only, as _scaled_mm wants.
FAST_ACCUM = "torch_fast_accum"
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

SAMPLE_ROWS = 128  # rows of C the reference recomputes (stratified: one per M/128 band)
FP8_SCALE = 2.0**-8  # operands are stored ×256 so that [-1, 1] uses e4m3's normal range; exact in binary

GPU_BACKENDS = ("cuda", "hip")
# H200, 2026-11-21: 8192³ bf16 read 788-805 TF/s at 1980 MHz when every 2-call batch sat behind a 5 ms hold
# (the GPU idled a good part of the time), while a hand loop under continuous load ran at 1500-1545 MHz
# (663-686 TF/s): the power limit takes hold over about a second of continuous load. So GEMMs warm up at least
# this long on GPUs, and only small ones are held.
GPU_MIN_WARMUP_S = 1.5
HOLD_MAX_FLOPS = 2 * 2048**3  # ~17 GFLOP: tens of µs at Hopper rates, where launch gaps would show
# Under the power limit the clock swings with the power controller's period: H100, 2026-11-23
# (a hand trace, 2026-11-23), bf16 8192³ back to back dipped from 718 to ~570-620 TF/s about once a second;
# the mean rate over whole 1 s windows moved 0.2 % (SD) where medians of per-call times over 2 s windows moved
# 1.6 %. Large GEMMs are therefore timed in samples of whole periods (Workload.period_s).
GPU_POWER_PERIOD_S = 1.0


def tolerance(dtype: str, k: int, fast_accum: bool = False) -> float:
    """Relative Frobenius error a correct GEMM of ``dtype`` may show against the fp64 reference.

    Rounding of the output (and of TF32 operands) is a fixed floor per dtype; summing K terms adds a random
    walk of roundings in the accumulator (unit roundoff u: fp64's for fp64, fp32's for the rest, fewer bits for
    fp8, see DTYPES), about 0.7·u·sqrt(K) relative to C for random operands, allowed 2·u·sqrt(K) here (fp32 at
    K=16384: 1.5e-5 on top of its 1e-5 floor; measured on H100: 2.3e-6).
    """
    spec = DTYPES[dtype]
    roundoff = FAST_ACCUM_ROUNDOFF if fast_accum else spec.acc_roundoff
    return spec.rounding_tol + 2.0 * roundoff * math.sqrt(k)


def flops(m: int, n: int, k: int) -> int:
    return 2 * m * n * k


def gemm_bytes(m: int, n: int, k: int, operand_size: int, output_size: int) -> int:
    """Each operand touched once: A and B at the operand size, C at the output size."""
    return operand_size * (m * k + k * n) + output_size * m * n


# --- the grid ----------------------------------------------------------------------------------------------


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
        # A smoke run under 30 s on an H100: each large product takes ~5 s (warm-up past the power limit, three
        # 1 s samples); Triton once (its autotune compiles eight kernels per dtype).
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


# --- operands, implementations, reference --------------------------------------------------------------


@dataclass
class Operands:
    """One input set. ``b`` is B as the product uses it, (K, N): for NT a transposed view of an (N, K)
    tensor. ``c`` starts as NaN so that an element nobody wrote fails the check."""

    a: torch.Tensor
    b: torch.Tensor
    c: torch.Tensor
    scale_a: torch.Tensor | None = None
    scale_b: torch.Tensor | None = None
    views: dict[str, Any] = field(default_factory=dict)  # CuPy views of a, b, c


def _fp8_type(backend: Backend) -> torch.dtype:
    """e4m3 as the device implements it: OCP e4m3fn on NVIDIA (and MI350), e4m3fnuz on MI300 (gfx94x)."""
    if backend.name == "hip":
        arch = getattr(torch.cuda.get_device_properties(backend.device_index), "gcnArchName", "") or ""
        if arch.startswith("gfx94"):
            return torch.float8_e4m3fnuz
    return torch.float8_e4m3fn


def _uniform(shape: tuple[int, int], dtype: torch.dtype, device: str, fp8: bool) -> torch.Tensor:
    """Uniform in [-1, 1] — fp8 stored ×256 (FP8_SCALE undoes it) — freshly drawn, never zeros."""
    if fp8:
        return fills.uniform(shape, torch.float32, device).mul_(1 / FP8_SCALE).to(dtype)
    return fills.uniform(shape, dtype, device)


def _fp32_precision(precision: str, fn):
    """Run fn with torch's fp32 matmul precision set for this case only, restored after every call, so that
    TF32 neither leaks into other cases nor is inherited from the user's settings."""

    def run(x: Operands):
        before = torch.get_float32_matmul_precision()
        torch.set_float32_matmul_precision(precision)
        try:
            return fn(x)
        finally:
            torch.set_float32_matmul_precision(before)

    return run


def _torch_run(dtype: str, layout: str, backend: Backend, m: int, fp8_type: torch.dtype, fast_accum: bool = False):
    if fast_accum and dtype != "fp8":
        raise Skip(f"fast accumulation is an fp8 mode of torch._scaled_mm; {dtype} has none")
    if dtype != "fp8":
        fn = lambda x: torch.matmul(x.a, x.b, out=x.c)  # noqa: E731
        precision = DTYPES[dtype].fp32_precision
        return _fp32_precision(precision, fn) if precision else fn
    if layout != "NT":
        raise Skip("torch._scaled_mm needs B column-major: fp8 runs in layout NT")
    _probe_scaled_mm(backend, m, fp8_type)
    return lambda x: torch._scaled_mm(x.a, x.b, x.scale_a, x.scale_b, out_dtype=torch.bfloat16, out=x.c,
                                      use_fast_accum=fast_accum)


def _probe_scaled_mm(backend: Backend, m: int, fp8_type: torch.dtype) -> None:
    """Skip, with the reason, where torch cannot run this fp8 product (old GPU, old torch, odd M)."""
    if not hasattr(torch, "_scaled_mm"):
        raise Skip(f"torch {torch.__version__} has no _scaled_mm (fp8 needs torch >= 2.1)")
    if backend.name == "cuda":
        cc = torch.cuda.get_device_capability(backend.device_index)
        if cc < (8, 9):
            raise Skip(f"fp8 tensor cores need compute capability >= 8.9 (Ada, Hopper); this GPU is {cc[0]}.{cc[1]}")
    device = backend.torch_device
    a = torch.ones((m, 32), device=device).to(fp8_type)
    b = torch.ones((32, 32), device=device).to(fp8_type).t()  # column-major, as NT gives it
    c = torch.empty((m, 32), dtype=torch.bfloat16, device=device)
    one = torch.ones((), device=device)
    try:
        torch._scaled_mm(a, b, one, one, out_dtype=torch.bfloat16, out=c)
        backend.synchronize()
    except Exception as e:  # noqa: BLE001 — whatever the library says is the reason
        text = f"{type(e).__name__}: {e}".strip().splitlines()[0][:300]
        raise Skip(f"torch._scaled_mm cannot run {fp8_type} with M={m} here: {text}") from e


def _triton_run(dtype: str, backend: Backend):
    if dtype == "fp64":
        raise Skip("the Triton kernel has no fp64 path (tl.dot of fp64 is outside its scope)")
    if dtype == "fp8" and backend.name == "cuda":
        cc = torch.cuda.get_device_capability(backend.device_index)
        if cc < (8, 9):
            raise Skip(f"Triton fp8 dot needs compute capability >= 8.9; this GPU is {cc[0]}.{cc[1]}")
    try:
        from gpubench.kernels import matmul_triton as k
    except ImportError as e:
        raise Skip(f"triton is not installed ({e}); pip install triton") from e
    precision = "tf32" if dtype == "tf32" else "ieee"
    return lambda x: k.matmul(x.a, x.b, x.c, precision=precision, scale_a=x.scale_a, scale_b=x.scale_b)


def _cupy_run(dtype: str, backend: Backend):
    if dtype in ("bf16", "fp8"):
        raise Skip(f"cupy has no {dtype} dtype (NumPy's type system has neither)")
    if dtype == "tf32":
        raise Skip("cupy takes TF32 only from CUPY_TF32=1 set before it is imported; not switched per case")
    try:
        import cupy
    except ImportError as e:
        raise Skip(f"cupy is not installed ({e}); pip install cupy-cuda12x (or the build for your CUDA)") from e
    # Same device and stream as torch, so that the engine's events (and the stream hold) frame cupy's kernels.
    gpu = cupy.cuda.Device(backend.device_index)
    stream = cupy.cuda.ExternalStream(torch.cuda.current_stream().cuda_stream)

    def run(x: Operands):
        with gpu, stream:
            cupy.matmul(x.views["a"], x.views["b"], out=x.views["c"])
        return x.c

    return run


def _cupy_views(x: Operands) -> None:
    import cupy

    # Made once per input set: converting is not the product.
    x.views = {"a": cupy.asarray(x.a), "b": cupy.asarray(x.b), "c": cupy.asarray(x.c)}


def _recording_config(check, extra: dict[str, Any]):
    """The check runs right after the first call, so the autotuner's choice is known: record it per row."""
    from gpubench.kernels import matmul_triton as k  # imports Triton: reached only for the Triton impl

    def checked(x: Operands, out: Any) -> Check:
        extra["impl_config"] = k.best_config(x.a, x.b)
        return check(x, out)

    return checked


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


def _chunk_columns(k: int) -> int:
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
    step = _chunk_columns(k)
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


def _checker(dtype: str, m: int, k: int, fast_accum: bool = False):
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


def _memory_need(footprint: int, cache_bytes: int, m: int, n: int, k: int, fp8: bool) -> int:
    """Peak bytes one case holds: the engine's rotating sets, the check's set, fp8's fp32 staging and the
    check's fp64 reference (sampled rows of A and C, one chunk of B: see reference_rows)."""
    sets = engine.sets_spanning(footprint, cache_bytes, engine.FULL)
    staging = 4 * max(m * k, k * n) if fp8 else 0
    reference = 8 * (min(m, SAMPLE_ROWS) * (k + 2 * n) + k * min(n, _chunk_columns(k)))
    return (sets + 1) * footprint + staging + reference


# --- the suite ---------------------------------------------------------------------------------------------


class Gemm(Suite):
    name = "gemm"
    # 1: first release. 2 (2026-11-23): search samples queued in batches behind a stream hold (their figures no
    # longer include the host's time to issue the product: up to 35 % on small shapes); fp8's fast accumulation as
    # its own impl. The rest of the grid is measured as in 1, but compare matches versions whole. 3 (2026-11-25): the
    # Triton impl runs the persistent-TMA kernel on Hopper with the exported launch configurations (impl_config
    # names variant and configuration); torch and cupy rows are measured as in 2.
    version = 3
    backends = frozenset({"cuda", "hip", "cpu", "fake"})
    metrics = (THROUGHPUT, TIME, PCT_PEAK)
    description = "dense GEMM TF/s per dtype (fp64…fp8), layout, shape and library; % of spec peak; --search"
    # Upper-case M, N, K: the result table already has an ``n`` column (the sample count).
    params = ("shape", "dtype", "layout", "M", "N", "K", "impl")

    def __init__(self) -> None:
        self._searched: set[str] = set()  # dtypes whose search has warmed the GPU up (see prepare)

    chart_order = 30

    @classmethod
    def roof(cls, row):
        return "tensor"  # the dtype's matrix-unit peak (gpubench.machine.spec_peaks), as pct_peak is taken

    @classmethod
    def point_label(cls, row):
        return f"{cls.name} {row.get('impl')}"  # one series per library

    @classmethod
    def charts(cls, runs, out):
        return charts_gemm.gemm(runs, out)

    def cases(self, ctx: GridContext):
        on_gpu = ctx.backend in GPU_BACKENDS
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

    def prepare(self, case: Case, backend: Backend, ctx: GridContext | None = None) -> Workload:
        dtype, layout, impl = case["dtype"], case["layout"], case["impl"]
        m, n, k = case["M"], case["N"], case["K"]
        spec, device = DTYPES[dtype], backend.torch_device
        on_gpu = backend.name in GPU_BACKENDS
        if not on_gpu and (dtype not in ("fp32", "fp64") or impl not in ("torch", FAST_ACCUM)):
            # One text for every such case (its dtype and impl are its own columns), so that the summary says it
            # once: "111 cases skipped: needs a GPU ...", not one line per dtype and library.
            raise Skip(f"needs a GPU: backend {backend.name!r} runs only torch's fp32 and fp64 products")
        fp8 = dtype == "fp8"
        operand = _fp8_type(backend) if fp8 else spec.operand
        osize, csize = operand.itemsize, spec.output.itemsize
        nbytes = gemm_bytes(m, n, k, osize, csize)
        need = _memory_need(nbytes, backend.cache_bytes(), m, n, k, fp8)
        message = too_big(need, backend)
        if message:
            raise Skip(message)

        if impl in ("torch", FAST_ACCUM):
            run = _torch_run(dtype, layout, backend, m, operand, fast_accum=impl == FAST_ACCUM)
        elif impl == "triton":
            run = _triton_run(dtype, backend)
        else:
            run = _cupy_run(dtype, backend)

        work = flops(m, n, k)
        peak = peak_tflops(backend.device_name(), dtype)
        extra = {
            "intensity": work / nbytes,
            "operand_dtype": str(operand).removeprefix("torch."),
            "peak_tflops": peak[0] if peak else math.nan,
            "peak_source": peak[1] if peak else "unknown",
            "impl_config": "",  # Triton: the tile shape autotune chose, known once the check has run
        }
        check = _checker(dtype, m, k, fast_accum=impl == FAST_ACCUM)
        if impl == "triton":
            check = _recording_config(check, extra)

        def derive(seconds: float) -> dict[str, float]:
            # NaN where the peak is unknown: the engine needs the metric on every row of the case.
            return {PCT_PEAK.name: 100.0 * work / seconds / 1e12 / peak[0] if peak else math.nan}

        # The search asks mamf-finder's question its way: one product per sample, timed alone with events,
        # the cache flushed before each (mamf-finder zeroes a 256 MiB buffer before every call). The rest of
        # the grid runs products back to back under continuous load, as training does.
        search = on_gpu and case["shape"] == "search"
        extra["method"] = "flush, one call per sample, queued in batches" if search else "back to back"
        extra["roof"] = self.roof(case.as_dict())
        # Only large GEMMs meet the power limit: a small one runs held, idling before every batch.
        large = on_gpu and work > HOLD_MAX_FLOPS
        # A search warms the GPU up once per dtype, as mamf-finder does (30 s once, then 50 calls per shape):
        # its shapes follow each other with no idle time, so the power limit that the first shape's warm-up
        # settled still holds for the next.
        warm = large and not (search and dtype in self._searched)
        if search and large:
            self._searched.add(dtype)
        return Workload(run=run, make_inputs=_inputs(case, operand, spec.output, device), bytes=nbytes, flops=work,
                        check=check, footprint=nbytes, derive=derive, extra=extra,
                        method=_method(on_gpu, search, large, warm))

    def summarize(self, rows: list[dict[str, Any]]) -> list[Derived]:
        """Per (dtype, layout, impl) of a search: the best shape's TF/s (and % of peak), the spread over all
        shapes (p10, median, p90) and the geometric mean, as mamf-finder reports them."""
        ok = [r for r in rows if r.get("shape") == "search" and r["status"] == "ok" and r.get("stop") != "derived"]
        tput = [r for r in ok if r["metric"] == THROUGHPUT.name and math.isfinite(r["value"])]
        pct = {r["case"]: r for r in ok if r["metric"] == PCT_PEAK.name}
        groups: dict[tuple, list[dict[str, Any]]] = {}
        for r in tput:
            groups.setdefault((r["dtype"], r["layout"], r["impl"]), []).append(r)
        out: list[Derived] = []
        for (dtype, layout, impl), group in groups.items():
            values = np.array([r["value"] for r in group], dtype=float)
            best = max(group, key=lambda r: r["value"])
            swept = ",".join(str(v) for v in sorted({r[d] for r in group for d in ("M", "N", "K")}))
            about = f"{len(group)} shapes, M,N,K from {{{swept}}}"
            best_case = Case.of(shape="search_best", dtype=dtype, layout=layout, M=best["M"], N=best["N"],
                                K=best["K"], impl=impl)
            # The best shape's figures are that row's own: its samples too. The spread figures carry the noise
            # of every shape's samples (gpubench.timing.stats.propagate).
            out.append(Derived(best_case, THROUGHPUT, best["value"], f"highest median TF/s of {about}",
                               tuple(best.get("samples") or ())))
            best_pct = pct.get(best["case"])
            if best_pct is not None and math.isfinite(best_pct["value"]):
                out.append(Derived(best_case, PCT_PEAK, best_pct["value"], f"the best shape's % of spec peak, {about}",
                                   tuple(best_pct.get("samples") or ())))
            parents = [r.get("samples") or [] for r in group]
            stats = {
                "search_p10": (lambda v: np.percentile(v, 10), "10th percentile"),
                "search_median": (np.median, "median"),
                "search_p90": (lambda v: np.percentile(v, 90), "90th percentile"),
                "search_geomean": (_geomean, "geometric mean"),
            }
            for shape, (fn, what) in stats.items():
                c = Case.of(shape=shape, dtype=dtype, layout=layout, M=0, N=0, K=0, impl=impl)
                out.append(Derived(c, THROUGHPUT, float(fn(values)), f"{what} of the median TF/s of {about}",
                                   tuple(propagate(lambda *v, fn=fn: fn(np.array(v)), parents))))
        return out


def _geomean(values: np.ndarray) -> float:
    values = np.asarray(values, dtype=float)
    return float(np.exp(np.log(values[values > 0]).mean())) if (values > 0).any() else math.nan


def _inputs(case: Case, operand: torch.dtype, output: torch.dtype, device: Any) -> Callable[[], Operands]:
    """Fresh random operands for one product of ``case`` (A is M×K; B is N×K transposed for NT, else K×N); C starts
    NaN, so that a product that wrote nothing fails its check."""
    m, n, k, layout, fp8 = case["M"], case["N"], case["K"], case["layout"], case["dtype"] == "fp8"

    def make_inputs() -> Operands:
        a = _uniform((m, k), operand, device, fp8)
        b = _uniform((n, k), operand, device, fp8).t() if layout == "NT" else _uniform((k, n), operand, device, fp8)
        x = Operands(a, b, fills.full((m, n), math.nan, output, device))
        if fp8:
            x.scale_a = torch.full((), FP8_SCALE, dtype=torch.float32, device=device)
            x.scale_b = torch.full((), FP8_SCALE, dtype=torch.float32, device=device)
        if case["impl"] == "cupy":
            _cupy_views(x)
        return x

    return make_inputs


def _method(on_gpu: bool, search: bool, large: bool, warm: bool) -> Method:
    return Method(
        cache="flush" if search else "rotate",
        # Only small GEMMs need the hold: a large one outlasts its own enqueue, so the queue stays full anyway, and
        # the hold's idle gap before every batch would keep the GPU under its power limit. Search samples are held
        # too: a batch of them (flush, product, flush, product, ...) is queued before the GPU reaches it. Read one
        # at a time, on H100 (2026-11-23) the same small shapes read up to 35 % slower on one machine than on
        # another at the same 1965 MHz clock: the host's time to issue the product was timed as the product's.
        hold=on_gpu and (search or not large) and hasattr(torch.cuda, "_sleep"),
        min_warmup_s=GPU_MIN_WARMUP_S if warm else 0.0,
        period_s=GPU_POWER_PERIOD_S if large and not search else 0.0,
    )
