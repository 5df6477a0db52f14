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
See ``dtypes.tolerance`` for the bounds and why; ``correctness.py`` holds the check, ``grid.py`` the shapes,
``impls.py`` the implementations and their operands.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch

from gpubench.toolkit import (THROUGHPUT, TIME, Backend, Case, Derived, GridContext, Method, Metric, Skip, Suite,
                              Workload)
from gpubench.toolkit.workloads import FULL, peak_tflops, propagate, sets_spanning, too_big
from gpubench.suites.gemm import charts as charts_gemm
from gpubench.suites.gemm import grid, impls
from gpubench.suites.gemm.correctness import SAMPLE_ROWS, checker, chunk_columns
from gpubench.suites.gemm.dtypes import DTYPES
from gpubench.suites.gemm.grid import FAST_ACCUM

PCT_PEAK = Metric("pct_peak", "%", "higher")
GPU_BACKENDS = ("cuda", "hip")
# The power limit takes hold over about a second of continuous load (held batches read boost-clock rates:
# docs/measurements.md, gemm): GEMMs warm up at least this long on GPUs, and only small ones are held.
GPU_MIN_WARMUP_S = 1.5
HOLD_MAX_FLOPS = 2 * 2048**3  # ~17 GFLOP: tens of µs at Hopper rates, where launch gaps would show
# Under the power limit the clock swings with the power controller's period, about a second: large GEMMs are
# timed in samples of whole periods (Workload.period_s), which average the swings out (docs/measurements.md, gemm).
GPU_POWER_PERIOD_S = 1.0


def flops(m: int, n: int, k: int) -> int:
    return 2 * m * n * k


def gemm_bytes(m: int, n: int, k: int, operand_size: int, output_size: int) -> int:
    """Each operand touched once: A and B at the operand size, C at the output size."""
    return operand_size * (m * k + k * n) + output_size * m * n


def _memory_need(footprint: int, cache_bytes: int, m: int, n: int, k: int, fp8: bool) -> int:
    """Peak bytes one case holds: the engine's rotating sets, the check's set, fp8's fp32 staging and the
    check's fp64 reference (sampled rows of A and C, one chunk of B: see reference_rows)."""
    sets = sets_spanning(footprint, cache_bytes, FULL)
    staging = 4 * max(m * k, k * n) if fp8 else 0
    reference = 8 * (min(m, SAMPLE_ROWS) * (k + 2 * n) + k * min(n, chunk_columns(k)))
    return (sets + 1) * footprint + staging + reference


# --- the suite ---------------------------------------------------------------------------------------------


class Gemm(Suite):
    name = "gemm"
    # 2: search samples queued behind a stream hold, fp8's fast accumulation its own impl; 3: the Triton impl runs
    # the persistent-TMA kernel with the exported configurations (impl_config). compare matches versions whole.
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
        return grid.cases(ctx, ctx.backend in GPU_BACKENDS)

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
        operand = impls.fp8_operand_type(backend) if fp8 else spec.operand
        osize, csize = operand.itemsize, spec.output.itemsize
        nbytes = gemm_bytes(m, n, k, osize, csize)
        need = _memory_need(nbytes, backend.cache_bytes(), m, n, k, fp8)
        message = too_big(need, backend)
        if message:
            raise Skip(message)

        if impl in ("torch", FAST_ACCUM):
            run = impls.torch_run(dtype, layout, backend, m, operand, fast_accum=impl == FAST_ACCUM)
        elif impl == "triton":
            run = impls.triton_run(dtype, backend)
        else:
            run = impls.cupy_run(dtype, backend)

        work = flops(m, n, k)
        peak = peak_tflops(backend.device_name(), dtype)
        extra = {
            "intensity": work / nbytes,
            "operand_dtype": str(operand).removeprefix("torch."),
            "peak_tflops": peak[0] if peak else math.nan,
            "peak_source": peak[1] if peak else "unknown",
            "impl_config": "",  # Triton: the tile shape autotune chose, known once the check has run
        }
        check = checker(dtype, m, k, fast_accum=impl == FAST_ACCUM)
        if impl == "triton":
            check = impls.recording_config(check, extra)

        def derive(seconds: float) -> dict[str, float]:
            # NaN where the peak is unknown: the engine needs the metric on every row of the case.
            return {PCT_PEAK.name: 100.0 * work / seconds / 1e12 / peak[0] if peak else math.nan}

        # The search times mamf-finder's way: one product per sample, the cache flushed before each (it zeroes 256 MiB);
        # the rest of the grid runs products back to back under continuous load, as training does.
        search = on_gpu and case["shape"] == "search"
        extra["method"] = "flush, one call per sample, queued in batches" if search else "back to back"
        extra["roof"] = self.roof(case.as_dict())
        # Only large GEMMs meet the power limit: a small one runs held, idling before every batch.
        large = on_gpu and work > HOLD_MAX_FLOPS
        # A search warms up once per dtype, as mamf-finder does (30 s once, then 50 calls per shape): its shapes follow
        # each other with no idle time, so the power limit the first shape's warm-up settled still holds.
        warm = large and not (search and dtype in self._searched)
        if search and large:
            self._searched.add(dtype)
        return Workload(run=run, make_inputs=impls.inputs(case, operand, spec.output, device), bytes=nbytes, flops=work,
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


def _method(on_gpu: bool, search: bool, large: bool, warm: bool) -> Method:
    return Method(
        cache="flush" if search else "rotate",
        # Small GEMMs and search samples run held, a batch queued before the GPU reaches it: else the host's time to
        # issue a product is timed as the product's (docs/measurements.md, gemm). A large one keeps the queue full.
        hold=on_gpu and (search or not large) and hasattr(torch.cuda, "_sleep"),
        min_warmup_s=GPU_MIN_WARMUP_S if warm else 0.0,
        period_s=GPU_POWER_PERIOD_S if large and not search else 0.0,
    )
