"""gemm's implementations (the ``impl`` column: torch, torch_fast_accum, triton, cupy) and the operands they
run on: each implementation skips, with the reason, where the device or the library cannot run a case."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

from gpubench.toolkit import Backend, Case, Check, Skip
from gpubench.toolkit.workloads import fills
from gpubench.suites.gemm.dtypes import DTYPES

FP8_SCALE = 2.0**-8  # operands are stored ×256 so that [-1, 1] uses e4m3's normal range; exact in binary


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


def fp8_operand_type(backend: Backend) -> torch.dtype:
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


def inputs(case: Case, operand: torch.dtype, output: torch.dtype, device: Any) -> Callable[[], Operands]:
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


def _cupy_views(x: Operands) -> None:
    import cupy

    # Made once per input set: converting is not the product.
    x.views = {"a": cupy.asarray(x.a), "b": cupy.asarray(x.b), "c": cupy.asarray(x.c)}


# --- the implementations -----------------------------------------------------------------------------------
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


def torch_run(dtype: str, layout: str, backend: Backend, m: int, fp8_type: torch.dtype, fast_accum: bool = False):
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


def triton_run(dtype: str, backend: Backend):
    if dtype == "fp64":
        raise Skip("the Triton kernel has no fp64 path (tl.dot of fp64 is outside its scope)")
    if dtype == "fp8" and backend.name == "cuda":
        cc = torch.cuda.get_device_capability(backend.device_index)
        if cc < (8, 9):
            raise Skip(f"Triton fp8 dot needs compute capability >= 8.9; this GPU is {cc[0]}.{cc[1]}")
    try:
        from gpubench.toolkit.kernels import matmul_triton as k
    except ImportError as e:
        raise Skip(f"triton is not installed ({e}); pip install triton") from e
    precision = "tf32" if dtype == "tf32" else "ieee"
    return lambda x: k.matmul(x.a, x.b, x.c, precision=precision, scale_a=x.scale_a, scale_b=x.scale_b)


def cupy_run(dtype: str, backend: Backend):
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


def recording_config(check, extra: dict[str, Any]):
    """The check runs right after the first call, so the autotuner's choice is known: record it per row."""
    from gpubench.toolkit.kernels import matmul_triton as k  # imports Triton: reached only for the Triton impl

    def checked(x: Operands, out: Any) -> Check:
        extra["impl_config"] = k.best_config(x.a, x.b)
        return check(x, out)

    return checked
