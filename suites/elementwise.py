"""``elementwise``: BabelStream's memory-bandwidth kernels — copy, mul, add, triad, dot — plus fill.

Bytes are counted as BabelStream counts them: every array read or written once per element, no
write-allocate traffic. copy and mul move 2 arrays, add and triad 3, dot 2 (two reads), fill 1 (one write).
Arrays are sized from the device's last-level cache (4× and 16× its size, rounded up to a power of two),
never a fixed 256 MB, so every call streams from device memory. Each op runs through torch and, on GPUs,
through a Triton kernel (``impl`` column): the faster is what a user can get.

On GPUs the suite also sweeps arithmetic intensity (ops ``fma0`` … ``fma512``, Triton only, see FMA_STEPS):
the points ``gpubench roofline`` draws between the memory roof and the vector-arithmetic roof.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import torch

from gpubench.errors import UsageError
from gpubench.suite import BANDWIDTH, THROUGHPUT, TIME, Case, Check, GridContext, Skip, Suite, Workload

DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16, "fp64": torch.float64}
# Exact in every dtype above (BabelStream's 0.4 is not; a Triton float argument arrives as fp32, and the
# fp64 check would then fail on the scalar alone).
SCALAR = 0.375
GPU_MIN_SAMPLE_S = 0.02


@dataclass(frozen=True)
class Op:
    reads: tuple[str, ...]
    write: str | None  # None: the op returns a scalar (dot)
    flops_per_element: int

    @property
    def arrays(self) -> int:
        return len(self.reads) + (1 if self.write else 0)


# Which arrays each op reads and writes follows BabelStream: c=a, b=s*c, c=a+b, a=b+s*c, sum(a*b).
OPS = {
    "copy": Op(("a",), "c", 0),
    "mul": Op(("c",), "b", 1),
    "add": Op(("a", "b"), "c", 1),
    "triad": Op(("b", "c"), "a", 2),
    "dot": Op(("a", "b"), None, 2),
    "fill": Op((), "a", 0),
}

# The arithmetic-intensity sweep (mixbench/ERT style): c = f^k(a) with f(x) = A·x + B, one read, one write
# and k multiply-adds (2k flops) per element, in the array's own dtype; k from 0 (a copy) to a few hundred
# traces the memory roof, the knee and the vector-arithmetic roof. A = B = 0.5 keep values bounded and are
# exact in every dtype; f is contractive, so past k ≈ 30 every element lands on 1.0 whatever its input and
# the check then confirms that each element was written with the right value, not that each step ran — the
# timing still does all k steps, since A and B are runtime arguments the compiler cannot fold.
FMA_STEPS = (0, 1, 2, 4, 8, 16, 32, 64, 128, 256, 512)
FMA_STEPS_QUICK = (0, 16, 128)
FMA_DTYPES = ("fp32", "bf16", "fp16")
FMA_A = FMA_B = 0.5
FMA_OPS = {f"fma{k}": Op(("a",), "c", 2 * k) for k in FMA_STEPS}

# Unit roundoff of each dtype: a correctly rounded result is within one of these of the exact one.
_UNIT_ROUNDOFF = {"fp64": 2.0**-53, "fp32": 2.0**-24, "fp16": 2.0**-11, "bf16": 2.0**-8}
# Elementwise results are one or two roundings from exact; dot adds fp32/fp64 accumulation over blocks.
# fma rounds up to twice per step in the array's dtype; f halves old errors, so they stay under 2·2u.
_TOL_FACTOR = {"elementwise": 4.0, "dot": 16.0, "fma": 8.0}


def _fma_steps(op: str) -> int:
    return int(op.removeprefix("fma"))


def _torch_run(op: str):
    if op in FMA_OPS:
        raise Skip("the fma sweep needs one fused kernel (Triton); torch would run k separate passes")
    if op == "copy":
        return lambda x: x["c"].copy_(x["a"])
    if op == "mul":
        return lambda x: torch.mul(x["c"], SCALAR, out=x["b"])
    if op == "add":
        return lambda x: torch.add(x["a"], x["b"], out=x["c"])
    if op == "triad":
        return lambda x: torch.add(x["b"], x["c"], alpha=SCALAR, out=x["a"])
    if op == "dot":
        return lambda x: torch.dot(x["a"], x["b"])
    return lambda x: x["a"].fill_(SCALAR)


def _triton_run(op: str, warps: int | None = None):
    try:
        from gpubench.kernels import stream_triton as k
    except ImportError as e:
        raise Skip(f"triton is not installed ({e}); pip install triton") from e
    if op in FMA_OPS:
        steps = _fma_steps(op)
        return lambda x: k.fma(x["a"], x["c"], steps, FMA_A, FMA_B, warps=warps)
    return {
        "copy": lambda x: k.copy(x["a"], x["c"], warps=warps),
        "mul": lambda x: k.mul(x["c"], x["b"], SCALAR, warps=warps),
        "add": lambda x: k.add(x["a"], x["b"], x["c"], warps=warps),
        "triad": lambda x: k.triad(x["b"], x["c"], x["a"], SCALAR, warps=warps),
        "dot": lambda x: k.dot(x["a"], x["b"], num_warps=warps or k.DOT_WARPS),
        "fill": lambda x: k.fill(x["a"], SCALAR, warps=warps),
    }[op]


def _op(name: str) -> Op:
    return FMA_OPS.get(name) or OPS[name]


def _triton_config(op: str, warps: int | None = None) -> str:
    """The launch shape, recorded per row so that runs with other shapes are told apart."""
    from gpubench.kernels import stream_triton as k

    if op == "dot":
        return f"block={k.DOT_BLOCK},warps={warps or k.DOT_WARPS}"
    if op in FMA_OPS:
        return f"vector_bytes={k.VECTOR_BYTES},warps={warps or k.NUM_WARPS},unrolled"
    if op == "fill":
        return f"vector_bytes={k.FILL_VECTOR_BYTES},warps={warps or k.FILL_WARPS}"
    return f"vector_bytes={k.VECTOR_BYTES},warps={warps or k.NUM_WARPS}"


def _reference(op: str, x: dict[str, torch.Tensor]) -> torch.Tensor:
    d = {k: v.double() for k, v in x.items() if k in _op(op).reads}
    if op in FMA_OPS:
        y = d["a"]
        for _ in range(_fma_steps(op)):
            y = FMA_A * y + FMA_B
        return y
    if op == "copy":
        return d["a"]
    if op == "mul":
        return SCALAR * d["c"]
    if op == "add":
        return d["a"] + d["b"]
    if op == "triad":
        return d["b"] + SCALAR * d["c"]
    if op == "dot":
        return (d["a"] * d["b"]).sum()
    return torch.full_like(x["a"], SCALAR, dtype=torch.float64)


def _checker(op: str, dtype: str):
    u = _UNIT_ROUNDOFF[dtype]

    def check(x: dict[str, torch.Tensor], out: torch.Tensor) -> Check:
        ref = _reference(op, x)
        got = out.double()
        if op == "dot":
            # Relative to sum|a·b|, not to the dot itself: a random dot can be near zero by cancellation.
            scale = (x["a"].double() * x["b"].double()).abs().sum().item()
            err = abs(got.item() - ref.item()) / scale if scale else abs(got.item())
            tol = _TOL_FACTOR["dot"] * u
        else:
            if not torch.isfinite(got).all():
                bad = int((~torch.isfinite(got)).sum())
                return Check(False, math.inf, 0.0, f"{bad} elements not finite: unwritten output or overflow")
            err = (torch.linalg.vector_norm(got - ref) / torch.linalg.vector_norm(ref)).item()
            tol = _TOL_FACTOR["fma" if op in FMA_OPS else "elementwise"] * u
        ok = math.isfinite(err) and err <= tol
        return Check(ok, err, tol, "" if ok else f"relative error {err:.3g} > {tol:.3g} against fp64 reference")

    return check


def _array_sizes(ctx: GridContext) -> list[int]:
    if ctx.sizes:
        return list(ctx.sizes)
    mults = (4,) if ctx.quick else (4, 16)
    return [1 << math.ceil(math.log2(m * ctx.cache_bytes)) for m in mults]


class Elementwise(Suite):
    name = "elementwise"
    version = 1
    backends = frozenset({"cuda", "hip", "cpu", "fake"})
    metrics = (BANDWIDTH, TIME, THROUGHPUT)
    description = "BabelStream copy/mul/add/triad/dot + fill; memory bandwidth past the last-level cache"
    params = ("op", "dtype", "array_bytes", "impl")

    warps: int | None = None  # --triton-warps: a forced launch shape (default: the measured best per kernel)

    def cases(self, ctx: GridContext):
        self.warps = dict(ctx.options).get("triton_warps")
        dtypes = ctx.pick_dtypes("elementwise", DTYPES, ["fp32", "bf16"] if ctx.quick else DTYPES)
        # Triton compiles for GPUs only; the fake backend runs torch on CPU tensors.
        impls = ["torch", "triton"] if ctx.backend in ("cuda", "hip") else ["torch"]
        for size in _array_sizes(ctx):
            for dtype in dtypes:
                if size % DTYPES[dtype].itemsize:
                    raise UsageError(f"size {size} is not a whole number of {dtype} elements")
                for op in OPS:
                    for impl in impls:
                        yield Case.of(op=op, dtype=dtype, array_bytes=size, impl=impl)
        # The intensity sweep at the first size only: one size is enough to place the roofs.
        if "triton" in impls:
            steps = FMA_STEPS_QUICK if ctx.quick else FMA_STEPS
            for dtype in (d for d in FMA_DTYPES if d in dtypes):
                for k in steps:
                    yield Case.of(op=f"fma{k}", dtype=dtype, array_bytes=_array_sizes(ctx)[0], impl="triton")

    def prepare(self, case: Case, backend: Any) -> Workload:
        op, dtype, size, impl = case["op"], case["dtype"], case["array_bytes"], case["impl"]
        spec, tdtype, device = _op(op), DTYPES[dtype], backend.torch_device
        n = size // tdtype.itemsize
        # The check set, one timing set, and the fp64 reference (2-3 arrays of n doubles) must fit.
        need = 2 * spec.arrays * size + 3 * n * 8
        if need > 0.9 * backend.memory_bytes():
            raise Skip(f"needs ~{need / 2**30:.1f} GiB, device has {backend.memory_bytes() / 2**30:.1f} GiB")
        run = _triton_run(op, self.warps) if impl == "triton" else _torch_run(op)
        config = _triton_config(op, self.warps) if impl == "triton" else ""

        def make_inputs() -> dict[str, torch.Tensor]:
            x = {}
            for name in spec.reads:
                x[name] = torch.empty(n, dtype=tdtype, device=device).uniform_(-1.0, 1.0)
            if spec.write:
                # Poisoned, so that an element the kernel never wrote fails the check.
                x[spec.write] = torch.full((n,), math.nan, dtype=tdtype, device=device)
            return x

        return Workload(
            run=run,
            make_inputs=make_inputs,
            bytes=spec.arrays * size,
            flops=spec.flops_per_element * n,
            check=_checker(op, dtype),
            footprint=spec.arrays * size,
            extra={"elements": n, "impl_config": config, "fma_steps": _fma_steps(op) if op in FMA_OPS else 0},
            # On GPUs, samples of 20 ms: H100, 2026-11-23, ten --quick runs (five 1 ms samples each) read the
            # same Triton kernel up to 3-5 % apart now and then, each run's own samples within 1 %: a few ms
            # can fall inside a slow spell that a run's next cases do not see.
            min_sample_s=GPU_MIN_SAMPLE_S if backend.name in ("cuda", "hip") else 0.0,
        )
