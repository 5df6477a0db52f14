"""``elementwise``: BabelStream's memory-bandwidth kernels — copy, mul, add, triad, dot — plus fill.

Bytes are counted as BabelStream counts them: every array read or written once per element, no
write-allocate traffic. copy and mul move 2 arrays, add and triad 3, dot 2 (two reads), fill 1 (one write).
Arrays are sized from the device's last-level cache (4× and 16× its size, rounded up to a power of two),
never a fixed 256 MB, so every call streams from device memory; where memory available now is short, they
are halved until a case fits (the run says so). Each op runs through torch and, on GPUs,
through a Triton kernel (``impl`` column): the faster is what a user can get.

On GPUs the suite also sweeps arithmetic intensity (ops ``fma0`` … ``fma512``, Triton only, see FMA_STEPS):
the points ``gpubench roofline`` draws between the memory roof and the vector-arithmetic roof.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import torch

from gpubench.toolkit import (BANDWIDTH, THROUGHPUT, TIME, Backend, Case, Check, GridContext, Method, Option, Skip,
                              Suite, UsageError, Workload, format_bytes)
from gpubench.toolkit.charts import (Chart, Run, color, fmt_bytes, grid, join, legend, memory_levels, names, note, save,
                                     spread)
from gpubench.toolkit.console import fmt_value
from gpubench.toolkit.workloads import FULL, HEADROOM, fills, sets_spanning, spec_peaks as peaks, too_big

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

# The intensity sweep (mixbench/ERT): c = f^k(a), f(x) = 0.5·x + 0.5 (exact, bounded), 2k flops an element, k from 0
# (a copy) to hundreds; past k ≈ 30 all is 1.0, so the check sees the writes, runtime A, B keep every step timed.
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
        from gpubench.toolkit.kernels import stream_triton as k
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
    from gpubench.toolkit.kernels import stream_triton as k  # imports Triton: reached only for the Triton impl

    if op == "dot":
        return f"block={k.DOT_BLOCK},warps={warps or k.DOT_WARPS}"
    if op in FMA_OPS:
        return f"vector_bytes={k.VECTOR_BYTES},warps={warps or k.NUM_WARPS},unrolled"
    if op == "fill":
        return f"vector_bytes={k.FILL_VECTOR_BYTES},warps={warps or k.FILL_WARPS}"
    return f"vector_bytes={k.VECTOR_BYTES},warps={warps or k.NUM_WARPS}"


def _reference(op: str, x: dict[str, torch.Tensor]) -> torch.Tensor:
    """The exact result in fp64 of ``x``'s elements (a chunk of the arrays: see _checker)."""
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


# No full-size fp64 copies (2-4× a case's buffers): the error over an odd-strided sample (every position of a
# power-of-two tile), finiteness over the whole output; dot's reference summed in fp64 by chunks, under CHECK_SCRATCH.
CHECK_CHUNK = 1 << 22
CHECK_SAMPLE = 1 << 18
CHECK_SCRATCH = 2 * 8 * CHECK_CHUNK + 6 * 8 * CHECK_SAMPLE


def _stride(n: int) -> int:
    step = max(1, n // CHECK_SAMPLE)
    return step if step % 2 or step == 1 else step + 1


def _not_finite(out: torch.Tensor) -> int:
    """Elements of ``out`` that are NaN or ±inf."""
    # A NaN or an inf anywhere makes the sum non-finite, so a finite sum (one fast pass, no scratch) proves
    # every element finite; only a non-finite sum (or a half-precision sum that overflowed) counts, by chunks.
    if torch.isfinite(out.sum()):
        return 0
    return sum(int((~torch.isfinite(out[i : i + CHECK_CHUNK])).sum()) for i in range(0, out.numel(), CHECK_CHUNK))


def _checker(op: str, dtype: str):
    u = _UNIT_ROUNDOFF[dtype]

    def check(x: dict[str, torch.Tensor], out: torch.Tensor) -> Check:
        reads = _op(op).reads
        n = next(iter(x.values())).numel()
        step = _stride(n)
        if op == "dot":
            ref = sum(float(torch.dot(x["a"][i : i + CHECK_CHUNK].double(), x["b"][i : i + CHECK_CHUNK].double()))
                      for i in range(0, n, CHECK_CHUNK))
            # Relative to sum|a·b| (estimated from the sample), not to the dot itself: a random dot can be near
            # zero by cancellation.
            sample = x["a"][::step].double() * x["b"][::step].double()
            scale = float(sample.abs().mean()) * n
            got = float(out.double())
            err = abs(got - ref) / scale if scale else abs(got)
            tol = _TOL_FACTOR["dot"] * u
        else:
            bad = _not_finite(out)
            if bad:
                return Check(False, math.inf, 0.0, f"{bad} elements not finite: unwritten output or overflow")
            ref = _reference(op, {k: x[k][::step] for k in reads} if reads else {"a": out[::step]})
            got = out[::step].double()
            norm = torch.linalg.vector_norm(ref).item()
            diff = torch.linalg.vector_norm(got - ref).item()
            err = diff / norm if norm else diff
            tol = _TOL_FACTOR["fma" if op in FMA_OPS else "elementwise"] * u
        ok = math.isfinite(err) and err <= tol
        where = "" if op == "dot" or step == 1 else f" (every {step}th element)"
        detail = f"relative error {err:.3g} > {tol:.3g} against fp64 reference{where}"
        return Check(ok, err, tol, "" if ok else detail)

    return check


# The op with the most arrays (add, triad: 3) sets the largest need of a size.
_MAX_ARRAYS = max(o.arrays for o in OPS.values())


def case_bytes(arrays: int, size: int, cache_bytes: int) -> int:
    """Peak bytes one case holds, the one place that says it (the grid's shrinking and the skip message both
    use it): the engine's rotating input sets (one set of ``arrays`` arrays of ``size`` bytes, or more where
    one set does not span the cache), or the check's set plus its fp64 scratch, whichever is larger (the check
    set is freed before the timing sets are made)."""
    footprint = arrays * size
    sets = sets_spanning(footprint, cache_bytes, FULL)
    return max(sets * footprint, footprint + CHECK_SCRATCH)


def array_sizes(ctx: GridContext) -> list[int]:
    """4× and 16× the cache (rounded up to a power of two), each halved until its largest case fits the
    memory budget; a size halved says so in a note. --sizes are taken as given (a case too big skips). Public: the
    kernel sweep (autotune_kernels) sizes its arrays as this suite does."""
    if ctx.sizes:
        return list(ctx.sizes)
    mults = (4,) if ctx.quick else (4, 16)
    sizes = []
    for m in mults:
        want = size = 1 << math.ceil(math.log2(m * ctx.cache_bytes))
        while ctx.budget > 0 and size > 1 << 20 and case_bytes(_MAX_ARRAYS, size, ctx.cache_bytes) > ctx.budget:
            size //= 2
        if size != want:
            ctx.note("elementwise", f"arrays of {format_bytes(size)} instead of {format_bytes(want)} ({m}× the "
                     f"{format_bytes(ctx.cache_bytes)} cache): {format_bytes(ctx.budget)} of memory may be used "
                     f"({int(100 * HEADROOM)} % of what is available)")
        if size not in sizes:
            sizes.append(size)
    return sizes


class Elementwise(Suite):
    name = "elementwise"
    version = 1
    backends = frozenset({"cuda", "hip", "cpu", "fake"})
    metrics = (BANDWIDTH, TIME, THROUGHPUT)
    description = "BabelStream copy/mul/add/triad/dot + fill; memory bandwidth past the last-level cache"
    params = ("op", "dtype", "array_bytes", "impl")

    options = (
        Option("triton-warps", "force N warps per program on its Triton kernels (default: the measured best, 4; dot "
                               "8). A smaller block runs slower: the way to test a regression gate on purpose",
               int, metavar="N", check=lambda v, _: None if v in (1, 2, 4, 8, 16, 32) else
               f"--triton-warps {v} must be a power of two from 1 to 32"),
    )

    chart_order = 10

    @classmethod
    def roof(cls, row):
        # The streaming ops are bound by device memory; the fma sweep climbs toward the vector units.
        return "vector" if row.get("op") in FMA_OPS else "memory"

    @classmethod
    def point_label(cls, row):
        op = row.get("op")
        return f"{cls.name} {'fma' if op in FMA_OPS else op}"  # the sweep is one series

    @classmethod
    def charts(cls, runs, out):
        return _chart(runs, out)

    def cases(self, ctx: GridContext):
        dtypes = ctx.pick_dtypes("elementwise", DTYPES, ["fp32", "bf16"] if ctx.quick else DTYPES)
        # Triton compiles for GPUs only; the fake backend runs torch on CPU tensors.
        impls = ["torch", "triton"] if ctx.backend in ("cuda", "hip") else ["torch"]
        sizes = array_sizes(ctx)  # once: it may halve the grid to fit, and say so
        for size in sizes:
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
                    yield Case.of(op=f"fma{k}", dtype=dtype, array_bytes=sizes[0], impl="triton")

    def prepare(self, case: Case, backend: Backend, ctx: GridContext | None = None) -> Workload:
        warps = ctx.options.get("triton_warps") if ctx else None  # --triton-warps: a forced launch shape
        op, dtype, size, impl = case["op"], case["dtype"], case["array_bytes"], case["impl"]
        spec, tdtype, device = _op(op), DTYPES[dtype], backend.torch_device
        n = size // tdtype.itemsize
        message = too_big(case_bytes(spec.arrays, size, backend.cache_bytes()), backend)
        if message:
            raise Skip(message)
        run = _triton_run(op, warps) if impl == "triton" else _torch_run(op)
        config = _triton_config(op, warps) if impl == "triton" else ""

        def make_inputs() -> dict[str, torch.Tensor]:
            x = {}
            for name in spec.reads:
                x[name] = fills.uniform(n, tdtype, device)
            if spec.write:
                # Poisoned, so that an element the kernel never wrote fails the check.
                x[spec.write] = fills.full(n, math.nan, tdtype, device)
            return x

        return Workload(
            run=run,
            make_inputs=make_inputs,
            bytes=spec.arrays * size,
            flops=spec.flops_per_element * n,
            check=_checker(op, dtype),
            footprint=spec.arrays * size,
            extra={"elements": n, "impl_config": config, "fma_steps": _fma_steps(op) if op in FMA_OPS else 0,
                   # The roof a figure is held against (gpubench check's spec fallback)
                   "roof": self.roof(case.as_dict())},
            # On GPUs, samples of 20 ms: a few ms can fall inside a slow spell that a run's next cases do not see
            # (docs/measurements.md, elementwise).
            method=Method(min_sample_s=GPU_MIN_SAMPLE_S if backend.name in ("cuda", "hip") else 0.0),
        )


# --- the report's charts --------------------------------------------------------------------------------------------
_IMPL_HATCH = ("", "//", "..", "xx", "\\\\")


def _device(run: Run, suite: str) -> str | None:
    d = run.ok(suite)["device"].dropna() if "device" in run.df.columns else []
    return str(d.iloc[0]) if len(d) else run.identity.get("gpu_model")


def _chart(runs: list[Run], out: Path) -> list[Chart]:
    title = "elementwise: memory bandwidth by op and dtype"
    have = [(i, r, r.ok("elementwise", "bandwidth")) for i, r in enumerate(runs)]
    have = [(i, r, rows[rows["array_bytes"] == rows["array_bytes"].max()]) for i, r, rows in have if len(rows)]
    if not have:
        return [note("elementwise", title, "no ok elementwise bandwidth rows")] if any(r.has("elementwise") for r in runs) else []
    dtypes = sorted({d for _, _, rows in have for d in rows["dtype"].astype(str)})
    name = names([r for _, r, _ in have])
    fig, axes = grid(len(dtypes), cols=min(3, len(dtypes)), w=6.2, h=4.2)
    levels, notes = {id(r): memory_levels(r.df) for _, r, _ in have}, []
    for ax, dtype in zip(axes, dtypes):
        series = [(i, r, impl, rows[(rows["dtype"].astype(str) == dtype) & (rows["impl"] == impl)])
                  for i, r, rows in have for impl in sorted(rows["impl"].astype(str).unique())]
        series = [s for s in series if len(s[3])]
        ops = list(dict.fromkeys(op for *_, rows in series for op in rows["op"].astype(str)))
        width = 0.8 / max(1, len(series))
        impls = sorted({s[2] for s in series})
        for k, (i, r, impl, rows) in enumerate(series):
            rows = rows.set_index(rows["op"].astype(str))
            rows = rows[~rows.index.duplicated()]
            xs = [j + (k - (len(series) - 1) / 2) * width for j, op in enumerate(ops) if op in rows.index]
            sel = rows.loc[[op for op in ops if op in rows.index]]
            ax.bar(xs, sel["value"], width, yerr=spread(sel), capsize=2, color=color(i), alpha=0.85,
                   hatch=_IMPL_HATCH[impls.index(impl) % len(_IMPL_HATCH)], edgecolor="white",
                   label=join(name[id(r)], impl))
        notes += _roofs(ax, [(i, r, levels[id(r)].get(dtype)) for i, r, _ in have], dtype, name)
        for dev in sorted({d for _, r, _ in have if (d := _device(r, "elementwise"))}):
            spec = peaks.lookup(dev)
            if spec and spec.memory_gbps:
                ax.axhline(spec.memory_gbps, color="black", ls="--", lw=1.2,
                           label=f"spec {spec.memory_gbps:.0f} GB/s ({spec.gpu})")
        ax.set_xticks(range(len(ops)), ops, rotation=30, ha="right", fontsize=8)
        ax.set_ylabel("bandwidth (GB/s)")
        ax.set_ylim(0, ax.get_ylim()[1] * 1.3)  # room for the legend above the bars
        size = sorted({int(v) for *_, rows in series for v in rows["array_bytes"]})
        ax.set_title(f"{dtype}, arrays of {', '.join(_size(s) for s in size)}")
        ax.grid(True, axis="y", alpha=0.3)
        legend(ax, loc="upper center", ncols=2)
    fig.suptitle(title + " (bars: median, error bars: interquartile range)")
    return [Chart("elementwise", title, save(fig, out, "elementwise.png"), "; ".join(notes))]


def _roofs(ax, levels: list, dtype: str, name: dict[int, str]) -> list[str]:
    """Each run's measured memory roof (the roofline's: its best steady bandwidth of ``dtype``) on ``ax``, in its
    colour; where a noisy op reads above it, none, and what is said of it under the chart instead."""
    notes = []
    for i, r, level in levels:
        run = f" ({name[id(r)]})" if name[id(r)] else ""
        if level is not None and level.roof is not None:
            ax.axhline(level.roof, color=color(i), lw=1.2, label=f"measured roof {fmt_value(level.roof)} GB/s (best op)"
                       + run)
        elif level is not None and (why := level.withheld("GB/s")):
            ax.plot([], [], " ", label=f"no measured roof{run}: steady ops read under a noisy one")
            notes.append(f"{dtype}{run}: no measured roof: {why}")
    return notes


def _size(b: int) -> str:
    return fmt_bytes(b) + ("" if b < 1024 else "iB")
