"""``autotune-kernels``: the autotune issue's kernel-config sweep. Every launch shape of gpubench's Triton GEMM —
the tiled variant in bf16 (BLOCK_M × BLOCK_N × num_warps × num_stages), the persistent-TMA variant in bf16 and
fp8 (tile, stages, warps, split epilogue ``es``, warp specialisation ``ws``; on GPUs without TMA these cases are
skip rows); BLOCK_K spans the kernel's 128-byte rows — and of its triad (warps × bytes per thread) is a case, timed and checked like the gemm and elementwise suites' own cases (their
workloads, with the launch shape forced), beside torch's kernel as the baseline (``config = torch``). After the
last case, one derived row per (kernel, shape) names the best configuration and its speed against torch.
``gpubench export RUN --format tunableop`` (or ``triton-configs``) writes the winners for reuse.

Triton compiles for GPUs only: on CPU every case is skipped with that reason. A shape that does not fit (shared
memory) is an error row; the sweep goes on.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from typing import Any

from gpubench.toolkit import BANDWIDTH, THROUGHPUT, TIME, Backend, Case, Derived, Exporter, GridContext, Skip, Suite
from gpubench.toolkit.kernels import PERSISTENT, TORCH, gemm_kernel_config, parse
from gpubench.suites import elementwise as E
from gpubench.suites import gemm as G
from gpubench.suites.gemm import correctness as gemm_check
from gpubench.suites.autotune import charts as charts_autotune
from gpubench.suites.elementwise import array_sizes

GPU = ("cuda", "hip")
GEMM_DTYPE = "bf16"  # the tiled variant's sweep
GEMM_DTYPES = ("bf16", "fp8")  # the persistent variant's
GEMM_SHAPES = ((4096, 4096, 4096), (8192, 8192, 8192), (16, 8192, 8192))
GEMM_QUICK = ((4096, 4096, 4096),)
# The persistent variant's launch shapes (BLOCK_M, BLOCK_N, num_stages, num_warps, split epilogue), the leaders of a
# probe (docs/measurements.md, gemm); each runs with and without warp specialisation.
PERSISTENT_SHAPES = ((128, 256, 3, 8, 0), (128, 256, 4, 8, 1), (256, 128, 3, 8, 0), (128, 128, 4, 4, 0))
PERSISTENT_QUICK = ((128, 256, 3, 8, 0), (128, 256, 4, 8, 1))
TRIAD_DTYPES = ("fp32", "bf16")
# The tiles of Triton's matmul tutorial and wider: what the autotuner list in matmul_triton.py samples from.
BLOCK_M, BLOCK_N, WARPS, STAGES = (16, 64, 128, 256), (64, 128, 256), (4, 8), (3, 4)
TRIAD_WARPS, TRIAD_VECTOR = (1, 2, 4, 8, 16), (4, 8, 16, 32)


def gemm_configs(m: int, quick: bool) -> list[str]:
    out = []
    for bm, bn, w, s in itertools.product(BLOCK_M, BLOCK_N, WARPS, STAGES):
        if bm * bn > 128 * 256 or (bm == 16) != (m <= 64) or (quick and (bm, bn) not in ((128, 128), (128, 256))):
            continue  # larger tiles overflow shared memory; 16-row tiles only for decode-like M
        out.append(f"bm{bm}_bn{bn}_w{w}_s{s}")
    return out


def persistent_configs(m: int, quick: bool) -> list[str]:
    """``ptma_bm128_bn256_w8_s3_es0_ws1``: none for decode-like M (a 128-row tile would be mostly empty)."""
    if m <= 64:
        return []
    return [f"{PERSISTENT}_bm{bm}_bn{bn}_w{w}_s{s}_es{es}_ws{ws}"
            for bm, bn, s, w, es in (PERSISTENT_QUICK if quick else PERSISTENT_SHAPES) for ws in (0, 1)]


def triad_configs(quick: bool) -> list[str]:
    warps = (2, 4, 8) if quick else TRIAD_WARPS
    return [f"w{w}_v{v}" for w, v in itertools.product(warps, TRIAD_VECTOR)]


def rate_metric(kernel: str):
    """What ranks a kernel's launch shapes: TF/s for the GEMM, GB/s for triad."""
    return THROUGHPUT if kernel == "gemm" else BANDWIDTH


def _winners(form: str, df: Any, meta: dict[str, Any]) -> tuple[str, str]:
    """A sweep's winners written by gpubench.kernels.config_export's ``form`` (it reads pandas: loaded here, not
    when the suite is listed), and how many there are."""
    from gpubench.toolkit.kernels import config_export

    return getattr(config_export, form)(df, meta), f"{len(config_export.winners(df))} winner(s)"


class AutotuneKernels(Suite):
    name = "autotune-kernels"
    version = 1
    backends = frozenset({"cuda", "hip", "cpu", "fake"})
    metrics = (THROUGHPUT, BANDWIDTH, TIME)
    description = "Triton launch-shape sweep (bf16 GEMM tiles, triad warps/vector) against torch; best per shape"
    params = ("kernel", "dtype", "shape", "config")
    # Its winners, for TunableOp-style tooling and the Triton GEMM: gpubench export --format tunableop|triton-configs.
    exporters = (Exporter("tunableop", lambda df, meta: _winners("tunableop_csv", df, meta)),
                 Exporter("triton-configs", lambda df, meta: _winners("triton_configs", df, meta)))

    @classmethod
    def charts(cls, runs, out):
        return charts_autotune.kernels(runs, out, rate_metric)

    def cases(self, ctx: GridContext):
        for dtype in GEMM_DTYPES:
            for m, n, k in GEMM_QUICK if ctx.quick else GEMM_SHAPES:
                tiled = gemm_configs(m, ctx.quick) if dtype == GEMM_DTYPE else []
                configs = tiled + persistent_configs(m, ctx.quick)
                for config in (TORCH, *configs) if configs else ():
                    yield Case.of(kernel="gemm", dtype=dtype, shape=f"{m}x{n}x{k}", config=config)
        size = array_sizes(ctx)[0]
        for dtype in TRIAD_DTYPES[:1] if ctx.quick else TRIAD_DTYPES:
            for config in (TORCH, *triad_configs(ctx.quick)):
                yield Case.of(kernel="triad", dtype=dtype, shape=str(size), config=config)

    def prepare(self, case: Case, backend: Backend, ctx: GridContext | None = None):
        if backend.name not in GPU:
            raise Skip(f"the sweep compares Triton launch shapes, which compile for GPUs only (backend "
                       f"{backend.name!r})")
        if case["kernel"] == "gemm":
            return self._gemm(case, backend)
        return self._triad(case, backend)

    def _gemm(self, case: Case, backend: Backend):
        m, n, k = (int(x) for x in case["shape"].split("x"))
        impl = TORCH if case["config"] == TORCH else "triton"
        w = G.Gemm().prepare(Case.of(shape="square", dtype=case["dtype"], layout="NT", M=m, N=n, K=k, impl=impl),
                             backend)
        if impl == TORCH:
            return w
        from gpubench.toolkit.kernels import matmul_triton as kt  # imports Triton: only for the Triton impl

        cfg = gemm_kernel_config(case["config"], case["dtype"])
        if cfg["variant"] == kt.PERSISTENT_TMA:
            why_not = kt.tma_available(backend.torch_device)
            if why_not:
                raise Skip(f"the persistent-tma variant cannot run here: {why_not}")

        def run(x):
            return kt.matmul(x.a, x.b, x.c, scale_a=x.scale_a, scale_b=x.scale_b, config=cfg)

        return dataclasses.replace(w, run=run, check=gemm_check.checker(case["dtype"], m, k),
                                   extra={**w.extra, "impl_config": kt.describe(cfg)})

    def _triad(self, case: Case, backend: Backend):
        impl = TORCH if case["config"] == TORCH else "triton"
        w = E.Elementwise().prepare(Case.of(op="triad", dtype=case["dtype"], array_bytes=int(case["shape"]),
                                            impl=impl), backend)
        if impl == TORCH:
            return w
        from gpubench.toolkit.kernels import stream_triton as ks  # imports Triton: only for the Triton impl

        cfg = parse(case["config"])

        def run(x):
            return ks.triad(x["b"], x["c"], x["a"], E.SCALAR, warps=cfg["num_warps"], vector_bytes=cfg["vector_bytes"])

        return dataclasses.replace(w, run=run, extra={**w.extra, "impl_config": case["config"]})

    def summarize(self, rows: list[dict[str, Any]]) -> list[Derived]:
        """Per (kernel, dtype, shape): the best Triton configuration (GEMM by TF/s, triad by GB/s) and its speed
        against torch's kernel on the same shape."""
        out = []
        groups: dict[tuple, dict[str, float]] = {}
        samples: dict[tuple, list[float]] = {}
        for r in rows:
            if r["status"] == "ok" and r["metric"] == rate_metric(r["kernel"]).name and math.isfinite(r["value"]):
                groups.setdefault((r["kernel"], r["dtype"], r["shape"]), {})[r["config"]] = r["value"]
                samples[(r["kernel"], r["dtype"], r["shape"], r["config"])] = list(r.get("samples") or [])
        for (kernel, dtype, shape), values in groups.items():
            tuned = {c: v for c, v in values.items() if c != TORCH}
            if not tuned:
                continue
            best = max(tuned, key=tuned.get)
            metric = rate_metric(kernel)
            base = values.get(TORCH)
            vs = f"{tuned[best] / base:.3f}x torch's {base:.4g}" if base else "torch did not run"
            out.append(Derived(Case.of(kernel=kernel, dtype=dtype, shape=shape, config="best"), metric, tuned[best],
                               f"{best}: {vs} {metric.unit}, best of {len(tuned)} configurations",
                               tuple(samples.get((kernel, dtype, shape, best), ()))))  # the best row's own samples
        return out
