"""gemm's dtypes: the torch types of operands and output, and the error a correct product of each may show."""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class DType:
    operand: torch.dtype | None  # None: fp8, whose torch type depends on the device
    output: torch.dtype
    fp32_precision: str | None = None  # torch.set_float32_matmul_precision for this dtype's runs
    # Relative Frobenius error allowed for rounding of the output (and of TF32's operands); see tolerance().
    rounding_tol: float = 0.0
    acc_roundoff: float = 2.0**-24  # unit roundoff of the accumulator (fp32 for all but fp64 and fp8)


DTYPES = {
    # Two fp64 products of the same operands differ by their summation order alone (docs/measurements.md, gemm).
    "fp64": DType(torch.float64, torch.float64, rounding_tol=1e-12, acc_roundoff=2.0**-53),
    # Output rounding is 2**-24 (6e-8); the floor leaves room for a BLAS's blocked summation. TF32 gives
    # ~3e-4 and fails.
    "fp32": DType(torch.float32, torch.float32, "highest", rounding_tol=1e-5),
    # TF32 keeps 10 mantissa bits of each operand; Triton's conversion truncates, a bias that does not shrink with K
    # (cuBLAS rounds to nearest; the errors: docs/measurements.md, gemm).
    "tf32": DType(torch.float32, torch.float32, "high", rounding_tol=2e-3),
    # fp16 output rounding: 2**-11 = 4.9e-4 at most, ~3e-4 RMS; reduced-precision split-K reductions (torch's
    # default) add a few roundings. 5e-3 is ten unit roundoffs.
    "fp16": DType(torch.float16, torch.float16, rounding_tol=5e-3),
    # bf16 output rounding: 2**-8 = 3.9e-3 at most, ~2e-3 RMS.
    "bf16": DType(torch.bfloat16, torch.bfloat16, rounding_tol=1e-2),
    # The reference takes the quantised operands: only accumulation and bf16 output rounding remain, and Hopper's fp8
    # tensor cores keep fewer bits than fp32 unless the kernel promotes (cuBLAS does; docs/measurements.md, gemm).
    "fp8": DType(None, torch.bfloat16, rounding_tol=1e-2, acc_roundoff=2.0**-16),
}
# Fast accumulation sums in the tensor cores' own accumulator, about 14 bits on Hopper (the DeepSeek-V3 report,
# arXiv:2412.19437, section 3.3.2); its error grows with K where the default's stays flat (docs/measurements.md, gemm).
FAST_ACCUM_ROUNDOFF = 2.0**-14


def tolerance(dtype: str, k: int, fast_accum: bool = False) -> float:
    """Relative Frobenius error a correct GEMM of ``dtype`` may show against the fp64 reference.

    Rounding of the output (and of TF32 operands) is a fixed floor per dtype; summing K terms adds a random
    walk of roundings in the accumulator (unit roundoff u: fp64's for fp64, fp32's for the rest, fewer bits for
    fp8, see DTYPES), about 0.7·u·sqrt(K) relative to C for random operands, allowed 2·u·sqrt(K) here (fp32 at
    K=16384: 1.5e-5 on top of its 1e-5 floor; the errors measured: docs/measurements.md, gemm).
    """
    spec = DTYPES[dtype]
    roundoff = FAST_ACCUM_ROUNDOFF if fast_accum else spec.acc_roundoff
    return spec.rounding_tol + 2.0 * roundoff * math.sqrt(k)
