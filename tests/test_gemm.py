"""The gemm suite without a GPU: grid, work accounting, the correctness check and its tolerances, the spec
peak table, the search summary, the CPU run through the CLI, and the Triton kernel in Triton's interpreter."""

import importlib
import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from packaging.version import Version

from gpubench import cli, results
from gpubench.timing import engine
from gpubench.machine import spec_peaks as peaks
from gpubench.run import runner
from gpubench.backends.cpu import CpuBackend
from gpubench.backends.fake import FakeBackend
from gpubench.errors import UsageError
from gpubench.run.rows import derived_rows
from gpubench.suite import Case, GridContext, Skip
from gpubench.suites.gemm import correctness, dtypes, impls
from gpubench.units import format_bytes

G = importlib.import_module("gpubench.suites.gemm")
# Short, and one call per sample on the fake clock: the tests check plumbing, not speed.
SMALL = engine.EngineConfig(min_samples=3, budget_s=0.02, min_warmup_s=0.0, max_warmup_s=0.02, min_sample_s=1e-9)


def ctx(**kw):
    base = dict(backend="cuda", quick=False, cache_bytes=50 << 20, memory_bytes=80 << 30)
    return GridContext(**{**base, **kw})


def grid(**kw):
    return list(G.Gemm().cases(ctx(**kw)))


def case(shape="square", dtype="fp32", layout="NT", m=64, n=64, k=64, impl="torch"):
    return Case.of(shape=shape, dtype=dtype, layout=layout, M=m, N=n, K=k, impl=impl)


# --- grid --------------------------------------------------------------------------------------------------


def test_full_gpu_grid_is_square_transformer_and_skinny():
    cases = grid()
    by_shape = {s: [c for c in cases if c["shape"] == s] for s in ("square", "transformer", "skinny")}
    assert len(cases) == sum(map(len, by_shape.values())) == 290
    # square: 5 sides x 6 dtypes x 2 layouts x 3 impls, and fp8's fast accumulation in NT
    assert len(by_shape["square"]) == 5 * 6 * 2 * 3 + 5
    assert sorted({c["M"] for c in by_shape["square"]}) == [1024, 2048, 4096, 8192, 16384]
    assert all(c["M"] == c["N"] == c["K"] for c in by_shape["square"])
    # transformer: 2 token counts x 6 projections, bf16 and fp8, NT (nn.Linear's layout)
    assert len(by_shape["transformer"]) == 12 * 2 * 3 + 12
    assert {(c["N"], c["K"]) for c in by_shape["transformer"]} >= {(14336, 4096), (8192, 28672)}
    assert {c["layout"] for c in by_shape["transformer"] + by_shape["skinny"]} == {"NT"}
    assert sorted({c["M"] for c in by_shape["skinny"]}) == [1, 16, 64]
    assert {c["impl"] for c in cases} == {"torch", "torch_fast_accum", "triton", "cupy"}
    fast = [c for c in cases if c["impl"] == "torch_fast_accum"]
    assert {(c["dtype"], c["layout"]) for c in fast} == {("fp8", "NT")} and len(fast) == 5 + 12 + 3
    assert len({c.id for c in cases}) == len(cases)


def test_quick_gpu_grid_is_a_few_cases():
    cases = grid(quick=True)
    got = {(c["shape"], c["dtype"], c["M"], c["N"], c["K"], c["impl"]) for c in cases}
    assert got == {
        ("square", "bf16", 4096, 4096, 4096, "torch"), ("square", "fp8", 4096, 4096, 4096, "torch"),
        ("square", "bf16", 4096, 4096, 4096, "triton"), ("skinny", "bf16", 16, 8192, 8192, "torch"),
    }
    assert len(cases) == len(got)


def test_search_grid_is_a_bounded_cube_of_shapes():
    full, quick = grid(search=True), grid(search=True, quick=True)
    assert len(full) == 7**3 and len(quick) == 3**3
    assert {c["shape"] for c in full} == {"search"} and {c["dtype"] for c in full} == {"bf16"}
    assert min(c["M"] for c in full) == 1024 and max(c["K"] for c in full) == 20480
    # fp8 searches both accumulation modes
    both = grid(search=True, dtypes=("bf16", "fp8"))
    assert len(both) == 3 * 7**3
    assert {c["impl"] for c in both if c["dtype"] == "fp8"} == {"torch", "torch_fast_accum"}
    # --sizes gives the values M, N, K sweep
    assert {(c["M"], c["N"], c["K"]) for c in grid(search=True, sizes=(1024, 3072))} == {
        (m, n, k) for m in (1024, 3072) for n in (1024, 3072) for k in (1024, 3072)}
    cpu = grid(backend="cpu", search=True)
    assert {c["dtype"] for c in cpu} == {"fp32"} and max(c["M"] for c in cpu) <= 512


def test_cpu_grid_stays_small():
    for quick in (True, False):
        for search in (True, False):
            cases = grid(backend="cpu", quick=quick, search=search)
            assert cases and max(max(c["M"], c["N"], c["K"]) for c in cases) <= 512
    quick = grid(backend="cpu", quick=True)
    runs = [c for c in quick if c["dtype"] in ("fp32", "fp64") and c["impl"] == "torch"]
    assert len(runs) == 6  # 512^3 NN and NT, and one skinny, for fp32 and fp64
    assert {c["dtype"] for c in quick} == set(G.DTYPES)  # the others are there to say why they skip


def test_dtype_and_sizes_filters():
    cases = grid(dtypes=("fp32",))
    assert {c["dtype"] for c in cases} == {"fp32"}
    assert {c["shape"] for c in cases} == {"square", "transformer", "skinny"}
    cases = grid(quick=True, dtypes=("fp16", "tf32"))
    assert {c["dtype"] for c in cases} == {"fp16", "tf32"}
    cases = grid(sizes=(3072,))
    assert {(c["shape"], c["M"], c["N"], c["K"]) for c in cases} == {("square", 3072, 3072, 3072)}
    with pytest.raises(UsageError, match="no dtype int8"):
        grid(dtypes=("bf16", "int8"))


def test_search_flag_reaches_the_grid_and_other_suites_ignore_it():
    be = CpuBackend()
    p = runner.plan([G.Gemm()], be, quick=True, search=True)
    assert {c["shape"] for c in p.cases["gemm"]} == {"search"}
    ew = importlib.import_module("gpubench.suites.elementwise").Elementwise()
    with_flag = runner.plan([ew], be, quick=True, search=True).cases["elementwise"]
    assert with_flag == runner.plan([ew], be, quick=True).cases["elementwise"]


# --- work accounting ---------------------------------------------------------------------------------------


def test_flops_bytes_and_intensity():
    assert G.flops(4096, 8192, 1024) == 2 * 4096 * 8192 * 1024
    # fp8: A and B one byte each, C in bf16
    assert G.gemm_bytes(16, 8192, 8192, 1, 2) == (16 * 8192 + 8192 * 8192) + 2 * 16 * 8192
    w = G.Gemm().prepare(case(dtype="fp32", m=256, n=128, k=64), CpuBackend())
    assert w.flops == 2 * 256 * 128 * 64
    assert w.bytes == w.footprint == 4 * (256 * 64 + 64 * 128 + 256 * 128)
    assert w.extra["intensity"] == pytest.approx(w.flops / w.bytes)
    assert w.method.cache == "rotate" and w.derive is not None
    w64 = G.Gemm().prepare(case(dtype="fp64", m=512, n=512, k=512), CpuBackend())
    assert w64.bytes == 8 * 3 * 512 * 512 and w64.extra["intensity"] == pytest.approx(2 * 512 / (3 * 8))


@pytest.mark.parametrize("layout", ["NN", "NT"])
def test_layouts_store_b_as_named(layout):
    w = G.Gemm().prepare(case(dtype="fp32", layout=layout, m=32, n=48, k=16), CpuBackend())
    x = w.make_inputs()
    assert x.a.shape == (32, 16) and x.b.shape == (16, 48) and x.c.shape == (32, 48)
    if layout == "NT":  # B stored (N, K), row-major, used transposed: nn.Linear's weight
        assert x.b.t().is_contiguous() and x.b.stride() == (1, 16)
    else:
        assert x.b.is_contiguous()
    assert torch.isnan(x.c).all()  # poisoned until written
    for t in (x.a, x.b):  # random in [-1, 1], never zeros
        assert t.abs().max() <= 1 and t.unique().numel() > 100 and (t != 0).all()
    assert not torch.equal(w.make_inputs().a, x.a)  # fresh per set


# --- correctness check and tolerances ----------------------------------------------------------------------


def test_tolerances_grow_with_k_and_follow_precision():
    assert dtypes.tolerance("fp64", 16384) < 1e-11
    assert 1e-5 < dtypes.tolerance("fp32", 16384) < 3e-5 and dtypes.tolerance("fp32", 64) < 1.1e-5
    assert dtypes.tolerance("fp32", 20480) > dtypes.tolerance("fp32", 1024)
    tol = dtypes.tolerance
    assert tol("fp32", 16384) < tol("tf32", 1) <= tol("fp16", 1) <= tol("bf16", 1)
    # both judge a bf16 output; fp8 also allows for the tensor cores' shorter accumulator
    assert dtypes.tolerance("bf16", 8192) < dtypes.tolerance("fp8", 8192) < 2 * dtypes.tolerance("bf16", 8192)
    # fast accumulation keeps ~14 bits: its allowance grows with K four times as fast as fp8's default mode
    fast = [dtypes.tolerance("fp8", k, fast_accum=True) - G.DTYPES["fp8"].rounding_tol for k in (1024, 16384)]
    slow = [dtypes.tolerance("fp8", k) - G.DTYPES["fp8"].rounding_tol for k in (1024, 16384)]
    assert fast == pytest.approx([4 * x for x in slow]) and fast[1] == pytest.approx(4 * fast[0])


@pytest.mark.parametrize("dtype", ["fp32", "fp64"])
@pytest.mark.parametrize("shape,m,n,k", [("square", 256, 256, 256), ("skinny", 1, 512, 512), ("odd", 300, 70, 130)])
def test_torch_passes_its_check_on_the_cpu(dtype, shape, m, n, k):
    w = G.Gemm().prepare(case(shape=shape, dtype=dtype, m=m, n=n, k=k), CpuBackend())
    x = w.make_inputs()
    chk = w.check(x, w.run(x))
    assert chk.ok, chk
    # fp64 too is compared with a different summation (blocked over K), not with itself
    assert 0 < chk.error < chk.tolerance


def _tf32(t: torch.Tensor) -> torch.Tensor:
    """fp32 with its mantissa cut to TF32's 10 bits, as tensor cores read it."""
    return (t.view(torch.int32) & ~0x1FFF).view(torch.float32)


def test_tf32_rounding_fails_fp32_and_passes_tf32():
    w = G.Gemm().prepare(case(dtype="fp32", m=128, n=128, k=512), CpuBackend())
    x = w.make_inputs()
    x.c.copy_(_tf32(x.a) @ _tf32(x.b))
    fp32, tf32 = correctness.checker("fp32", 128, 512)(x, x.c), correctness.checker("tf32", 128, 512)(x, x.c)
    assert not fp32.ok and 1e-4 < fp32.error < 1e-3
    assert tf32.ok and tf32.error == fp32.error


def test_bf16_output_rounding_passes_bf16_and_fails_fp32():
    w = G.Gemm().prepare(case(dtype="fp32", m=128, n=128, k=256), CpuBackend())
    x = w.make_inputs()
    x.c.copy_((x.a @ x.b).bfloat16().float())
    assert correctness.checker("bf16", 128, 256)(x, x.c).ok
    assert not correctness.checker("fp32", 128, 256)(x, x.c).ok


def test_an_unwritten_element_fails_the_check():
    w = G.Gemm().prepare(case(dtype="fp32", m=256, n=64, k=64), CpuBackend())
    x = w.make_inputs()
    w.run(x)
    x.c[200, 3] = math.nan
    chk = w.check(x, x.c)
    assert not chk.ok and "1 elements of C not finite" in chk.detail


def test_a_wrong_tile_anywhere_is_seen_by_the_row_sample():
    m = 4096
    rows = correctness._sample_rows(m)
    assert len(rows) == correctness.SAMPLE_ROWS == len(set(rows.tolist()))
    bands = correctness.SAMPLE_ROWS
    assert ((rows // (m // bands)) == torch.arange(bands)).all()  # one row in every band
    assert correctness._sample_rows(100).tolist() == list(range(100))
    w = G.Gemm().prepare(case(dtype="fp32", m=m, n=32, k=32), CpuBackend())
    for start in (0, 1024, m - 128):  # one 128-row tile off by 1%: seen wherever it is
        x = w.make_inputs()
        w.run(x)
        x.c[start : start + 128] *= 1.01
        assert not w.check(x, x.c).ok


def test_a_noisy_implementation_is_recorded_invalid_not_fast(monkeypatch):
    def noisy(dtype, layout, backend, m, fp8_type, fast_accum=False):
        def run(x):
            torch.matmul(x.a, x.b, out=x.c)
            return x.c.add_(1e-3 * torch.randn_like(x.c))

        return run

    monkeypatch.setattr(impls, "torch_run", noisy)
    suite, be = G.Gemm(), FakeBackend()
    rows = runner.run_case(suite, case(dtype="fp32", m=128, n=128, k=128), be, {}, SMALL, None)
    assert {r["status"] for r in rows} == {"invalid"}
    assert all(r["n"] == 0 and math.isnan(r["value"]) for r in rows)
    assert rows[0]["check_error"] > rows[0]["check_tolerance"] and "fp64 reference" in rows[0]["message"]


def test_tf32_precision_is_set_for_the_call_only():
    seen = []
    before = torch.get_float32_matmul_precision()
    impls._fp32_precision("high", lambda x: seen.append(torch.get_float32_matmul_precision()))(None)
    assert seen == ["high"] and torch.get_float32_matmul_precision() == before

    def boom(x):
        raise RuntimeError("x")

    with pytest.raises(RuntimeError):
        impls._fp32_precision("high", boom)(None)
    assert torch.get_float32_matmul_precision() == before


# --- skips -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype,impl", [
    ("bf16", "torch"), ("fp8", "torch"), ("tf32", "torch"), ("fp32", "triton"), ("fp64", "cupy")])
def test_cpu_skips_with_the_reason(dtype, impl):
    # One text whatever the dtype and library, so that the run's summary collapses them into one line.
    with pytest.raises(Skip) as e:
        G.Gemm().prepare(case(dtype=dtype, impl=impl), CpuBackend())
    assert str(e.value) == "needs a GPU: backend 'cpu' runs only torch's fp32 and fp64 products"


def test_unsupported_combinations_skip_with_the_reason():
    be = FakeBackend()
    with pytest.raises(Skip, match="column-major"):
        impls.torch_run("fp8", "NN", be, 64, torch.float8_e4m3fn)
    with pytest.raises(Skip, match="fast accumulation is an fp8 mode"):
        impls.torch_run("bf16", "NT", be, 64, torch.float8_e4m3fn, fast_accum=True)
    with pytest.raises(Skip, match="no fp64 path"):
        impls.triton_run("fp64", be)
    for dtype in ("bf16", "fp8"):
        with pytest.raises(Skip, match=f"cupy has no {dtype}"):
            impls.cupy_run(dtype, be)


def test_a_shape_that_does_not_fit_is_skipped_with_its_real_need():
    be = FakeBackend(memory_bytes=80 << 30, available_bytes=8 << 30)
    n = 16384
    need = G._memory_need(G.gemm_bytes(n, n, n, 8, 8), be.cache_bytes(), n, n, n, False)
    assert 6 << 30 < need < 16 << 30  # three 2 GiB fp64 matrices, two sets of them, the sampled reference
    with pytest.raises(Skip, match=rf"needs {format_bytes(need)}, over the 6 GiB a case may take"):
        G.Gemm().prepare(case(dtype="fp64", m=n, n=n, k=n), be)


# --- spec peaks --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name,dtype,tflops", [
    ("NVIDIA H100 80GB HBM3", "bf16", 989.4), ("NVIDIA H100 80GB HBM3", "fp64", 66.9),
    ("NVIDIA H100 80GB HBM3", "tf32", 494.7), ("NVIDIA H100 80GB HBM3", "fp8", 1978.9),
    ("NVIDIA H100 PCIe", "fp16", 756.5), ("NVIDIA H200", "fp8", 1978.9), ("NVIDIA H200", "fp32", 66.9),
    ("NVIDIA A100-SXM4-80GB", "bf16", 312.0), ("NVIDIA A100 80GB PCIe", "tf32", 156.0),
    ("AMD Instinct MI300X", "bf16", 1307.4), ("AMD Instinct MI325X", "fp8", 2614.9),
    ("AMD Instinct MI250X", "fp16", 191.5), ("NVIDIA L40S", "fp8", 733.0)])
def test_known_gpus_have_their_dense_peak(name, dtype, tflops):
    value, source = peaks.peak_tflops(name, dtype)
    assert value == tflops and source


@pytest.mark.parametrize("name,dtype", [
    ("NVIDIA GH200 480GB", "bf16"), ("NVIDIA H100 NVL", "bf16"), ("NVIDIA H200 NVL", "bf16"),
    ("NVIDIA A10", "fp32"), ("AMD Instinct MI250X/MI250", "bf16"), ("Fake GPU", "bf16"), ("", "bf16"),
    (None, "bf16"), ("NVIDIA A100-SXM4-40GB", "fp8"), ("NVIDIA L40S", "fp64"), ("AMD Instinct MI250X", "tf32")])
def test_unknown_gpus_and_dtypes_have_no_peak(name, dtype):
    assert peaks.peak_tflops(name, dtype) is None


def test_peak_table_is_dense_and_consistent():
    # A typo guard: on every part listed, fp16 = bf16, TF32 is half of it, fp8 twice (within datasheet rounding)
    for key, p in peaks.PEAKS.items():
        t = p.tflops
        assert t["fp16"] == t["bf16"], key
        if "tf32" in t:
            assert t["tf32"] == pytest.approx(t["bf16"] / 2, rel=0.02), key
        if "fp8" in t:
            assert t["fp8"] == pytest.approx(2 * t["bf16"], rel=0.02), key
        assert p.source and p.gpu


def test_pct_of_peak_follows_the_measured_time():
    # A fake H100 that runs fp32 at exactly half its 66.9 TF/s spec peak.
    be = FakeBackend(model_name="NVIDIA H100 80GB HBM3", durations=lambda w, i: w.flops / 33.45e12)
    c = case(dtype="fp32", m=128, n=128, k=128)
    rows = {r["metric"]: r for r in runner.run_case(G.Gemm(), c, be, {}, SMALL, None)}
    assert rows["throughput"]["value"] == pytest.approx(33.45)
    assert rows["pct_peak"]["value"] == pytest.approx(50.0) and rows["pct_peak"]["unit"] == "%"
    assert rows["pct_peak"]["peak_tflops"] == 66.9 and "H100" in rows["pct_peak"]["peak_source"]
    unknown = {r["metric"]: r for r in runner.run_case(G.Gemm(), case(dtype="fp32"), FakeBackend(), {}, SMALL, None)}
    assert unknown["throughput"]["status"] == "ok" and math.isnan(unknown["pct_peak"]["value"])
    assert unknown["pct_peak"]["peak_source"] == "unknown"


def test_large_gpu_gemms_warm_up_past_the_power_limit_and_sample_whole_periods_of_it(monkeypatch):
    # The fake backend stands in for a GPU (its tensors live on the CPU): what each workload declares.
    monkeypatch.setattr(G, "GPU_BACKENDS", (*G.GPU_BACKENDS, "fake"))
    be, suite = FakeBackend(memory_bytes=8 << 30), G.Gemm()
    large, small = suite.prepare(case(m=2048, n=2048, k=4096), be), suite.prepare(case(m=256, n=256, k=256), be)
    assert large.method.min_warmup_s == G.GPU_MIN_WARMUP_S and large.method.period_s == G.GPU_POWER_PERIOD_S and not large.method.hold
    # A small GEMM is held, idling before every batch: no power limit to wait out or sample across.
    assert small.method.min_warmup_s == small.method.period_s == 0.0 and small.method.hold
    # A search warms up on its first shape of each dtype only: the next shapes follow with no idle time.
    first, second = (suite.prepare(case(shape="search", m=m, n=2048, k=4096), be) for m in (2048, 4096))
    other = suite.prepare(case(shape="search", dtype="fp64", m=2048, n=2048, k=4096), be)
    assert (first.method.min_warmup_s, second.method.min_warmup_s, other.method.min_warmup_s) == (G.GPU_MIN_WARMUP_S, 0.0, G.GPU_MIN_WARMUP_S)
    assert first.method.cache == "flush" and first.method.period_s == 0.0  # mamf-finder's way: one call per sample


def test_cpu_gemms_declare_no_power_limit():
    w = G.Gemm().prepare(case(m=512, n=512, k=512), CpuBackend())
    assert w.method.min_warmup_s == 0.0 and w.method.period_s == 0.0 and not w.method.hold


# --- search summary ----------------------------------------------------------------------------------------


def _row(m, n, k, value, metric="throughput", dtype="bf16", status="ok"):
    c = Case.of(shape="search", dtype=dtype, layout="NT", M=m, N=n, K=k, impl="torch")
    return {"case": c.id, **c.as_dict(), "metric": metric, "value": value, "status": status, "stop": "cv"}


def test_summarize_picks_the_best_shape_and_the_spread():
    values = list(range(100, 1100, 100))  # 10 shapes, 100..1000 TF/s
    rows = [_row(1024 * (i + 1), 2048, 4096, v) for i, v in enumerate(values)]
    rows += [_row(1024 * (i + 1), 2048, 4096, v / 10, metric="pct_peak") for i, v in enumerate(values)]
    rows.append(_row(99999, 1, 1, 5000.0, status="invalid"))  # a wrong answer is never the best
    rows.append(_row(1024, 1024, 1024, 50.0, dtype="fp8"))
    out = {(d.case["shape"], d.case["dtype"], d.metric.name): d for d in G.Gemm().summarize(rows)}
    best = out[("search_best", "bf16", "throughput")]
    assert best.value == 1000 and (best.case["M"], best.case["N"], best.case["K"]) == (10240, 2048, 4096)
    assert "10 shapes" in best.message
    assert out[("search_best", "bf16", "pct_peak")].value == 100
    assert out[("search_median", "bf16", "throughput")].value == pytest.approx(550)
    assert out[("search_p10", "bf16", "throughput")].value == pytest.approx(np.percentile(values, 10))
    assert out[("search_p90", "bf16", "throughput")].value == pytest.approx(np.percentile(values, 90))
    assert out[("search_geomean", "bf16", "throughput")].value == pytest.approx(np.exp(np.log(values).mean()))
    assert out[("search_best", "fp8", "throughput")].value == 50.0
    assert ("search_best", "fp8", "pct_peak") not in out  # no peak known: no pct row
    square = [{**r, "shape": "square"} for r in rows]
    assert G.Gemm().summarize(square) == []  # only a search is summarized


def test_search_end_to_end_on_the_fake_backend():
    # A fake device whose TF/s grows with K: the best shape is the one with the largest K.
    be = FakeBackend(durations=lambda w, i: 5e-6 + w.flops / (1e12 * w.extra["k_rate"]))
    suite = G.Gemm()
    prepare = suite.prepare

    def tagged(c, backend):
        w = prepare(c, backend)
        w.extra["k_rate"] = c["K"] / 16
        return w

    suite.prepare = tagged
    p = runner.plan([suite], be, quick=True, search=True)
    rows = [r for c in p.cases["gemm"] for r in runner.run_case(suite, c, be, {}, SMALL, None)]
    assert {r["status"] for r in rows} == {"ok"} and len(p.cases["gemm"]) == 8
    derived = derived_rows(suite, suite.summarize(rows), {})
    best = next(r for r in derived if r["shape"] == "search_best" and r["metric"] == "throughput")
    assert best["K"] == 512 and best["stop"] == "derived" and best["status"] == "ok"
    assert {r["shape"] for r in derived} == {f"search_{s}" for s in ("best", "p10", "median", "p90", "geomean")}
    df = results.frame(rows + derived, suite.params)
    assert list(df.columns[4:11]) == list(suite.params)


# --- the CLI on the CPU ------------------------------------------------------------------------------------


def test_cli_quick_cpu_run_checks_fp32_and_fp64_and_skips_the_rest(tmp_path, capsys):
    rc = cli.main(["run", "--suite", "gemm", "--backend", "cpu", "--quick", "--out", str(tmp_path), "--cluster", "ci"])
    assert rc == 0, capsys.readouterr().err
    df = results.load(next((tmp_path / "ci").iterdir()))
    tput = df[df.metric == "throughput"]
    ok = tput[tput.status == "ok"]
    assert set(ok.dtype) == {"fp32", "fp64"} and set(ok.impl) == {"torch"} and len(ok) == 6
    assert (ok.check_error <= ok.check_tolerance).all() and (ok.value > 0).all()
    skipped = tput[tput.status == "skipped"]
    assert len(skipped) == len(tput) - 6 and skipped.message.str.contains("needs a GPU").all()
    assert set(skipped.dtype) == set(G.DTYPES)
    out = capsys.readouterr().out
    assert f"{len(skipped)} cases skipped: needs a GPU" in out and out.count("cases skipped") == 1, out
    assert set(df.metric) == {"throughput", "time", "pct_peak"}


def test_cli_search_on_the_cpu_adds_the_summary_rows(tmp_path, capsys):
    rc = cli.main(["run", "--suite", "gemm", "--backend", "cpu", "--quick", "--search", "--out", str(tmp_path),
                   "--cluster", "ci"])
    assert rc == 0, capsys.readouterr().err
    df = results.load(next((tmp_path / "ci").iterdir()))
    assert (df[df["shape"] == "search"].status == "ok").all()
    best = df[(df["shape"] == "search_best") & (df.metric == "throughput")]
    measured = df[(df["shape"] == "search") & (df.metric == "throughput")]
    assert len(best) == 1 and best.value.iloc[0] == measured.value.max()


# --- the Triton kernel in the interpreter ------------------------------------------------------------------

# Shapes with ragged edges (masked K, wrapped M/N) as well as whole tiles; NN and NT strides. bf16 is left
# out: Triton's interpreter multiplies bf16 bit patterns in tl.dot (triton-lang/triton#11584, unsupported).
INTERPRET_CASES = [
    (dtype, layout, mnk)
    for dtype in ("fp32", "tf32", "fp16", "fp8")
    for layout in ("NN", "NT")
    for mnk in ((64, 64, 64), (50, 70, 40), (50, 72, 48))  # the last with 16-byte rows in every dtype (TMA)
]


def _interpret_main() -> int:
    """Run under TRITON_INTERPRET=1 (set before triton is imported, hence a separate process)."""
    import json
    import tempfile

    from gpubench.kernels import matmul_triton as k

    failed = 0
    tiled = {"BLOCK_M": 32, "BLOCK_N": 32, "BLOCK_K": 32, "GROUP_M": 2}
    # Persistent: 16×32 tiles on the interpreter's 3 "multiprocessors", so each program walks several tiles;
    # the split epilogue (two half-width stores) on every other case.
    persistent = {"variant": k.PERSISTENT_TMA, "BLOCK_M": 16, "BLOCK_N": 32, "BLOCK_K": 32, "GROUP_M": 2}

    def operands(dtype, layout, m, n, kk):
        fp8 = dtype == "fp8"
        operand = torch.float8_e4m3fn if fp8 else G.DTYPES[dtype].operand
        a = impls._uniform((m, kk), operand, "cpu", fp8)
        b = impls._uniform((n, kk) if layout == "NT" else (kk, n), operand, "cpu", fp8)
        b = b.t() if layout == "NT" else b
        x = impls.Operands(a, b, torch.full((m, n), math.nan, dtype=G.DTYPES[dtype].output))
        if fp8:
            x.scale_a = torch.full((), impls.FP8_SCALE)
            x.scale_b = torch.full((), impls.FP8_SCALE)
        return x

    def run(x, dtype, config):
        k.matmul(x.a, x.b, x.c, precision="tf32" if dtype == "tf32" else "ieee", scale_a=x.scale_a,
                 scale_b=x.scale_b, config=config)
        return correctness.checker(dtype, x.a.shape[0], x.a.shape[1])(x, x.c)

    persistent_runs = 0
    for i, (dtype, layout, (m, n, kk)) in enumerate(INTERPRET_CASES):
        x = operands(dtype, layout, m, n, kk)
        chk = run(x, dtype, tiled)
        print(dtype, layout, m, n, kk, "tiled", "ok" if chk.ok else f"FAIL {chk}")
        failed += not chk.ok
        if not k.tma_possible(x.a, x.b, x.c):
            x = operands(dtype, layout, m, n, kk)
            chk = run(x, dtype, {**persistent, "EPILOGUE_SPLIT": i % 2})
            print(dtype, layout, m, n, kk, "persistent-tma", "ok" if chk.ok else f"FAIL {chk}")
            failed += not chk.ok
            persistent_runs += 1
    # fp16 NT/NN at 64³ and 50×72×48, fp8 NT at both (fp8 NN and odd rows: tiled only; fp32/tf32: tiled only)
    if persistent_runs != 6:
        print("FAIL: the persistent variant ran", persistent_runs, "cases, expected 6")
        failed += 1
    # An exported configuration (gpubench export --format triton-configs) is found by GPU and dtype and run.
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "export.json"
        cfg = {**persistent, "BLOCK_N": 64, "num_warps": 4, "num_stages": 2, "EPILOGUE_SPLIT": 1,
               "WARP_SPECIALIZE": 0}
        path.write_text(json.dumps({"gpu": "interpreter", "kernels": {"gemm": {"fp16": {"64x64x64": {"config": cfg}}}}}))
        os.environ[k.CONFIG_ENV] = str(path)
        x = operands("fp16", "NT", 48, 72, 40)
        chk = run(x, "fp16", None)
        used = k.best_config(x.a, x.b)
        want = "variant=persistent-tma BLOCK_M=16 BLOCK_N=64 BLOCK_K=32 GROUP_M=2 stages=2 warps=4 ws=0 split=1"
        ok = chk.ok and used == f"{want} source=export.json:64x64x64"
        print("exported config", used, "ok" if ok else f"FAIL {chk}")
        failed += not ok
    return 1 if failed else 0


def test_triton_matmul_is_correct_in_the_interpreter():
    triton = pytest.importorskip("triton")
    if Version(triton.__version__) < Version("3.7") and Version(np.__version__) >= Version("2.4"):
        # Its interpreter takes int() of a one-element array for a loop's runtime bound, which NumPy 2.4
        # refuses (triton-lang/triton#9171, fixed in 3.7). torch 2.11 installs Triton 3.6.
        pytest.skip(f"Triton {triton.__version__}'s interpreter cannot run a loop of runtime length under NumPy "
                    f"{np.__version__} (triton-lang/triton#9171); Triton ≥ 3.7 or NumPy < 2.4 runs this check")
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    proc = subprocess.run([sys.executable, __file__], capture_output=True, text=True, env=env, timeout=240,
                          cwd=Path(__file__).resolve().parent.parent)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    # every case tiled, 6 of them persistent too, and the exported configuration's run
    assert proc.stdout.count(" ok") == len(INTERPRET_CASES) + 6 + 1


def test_triton_configs_keep_128_byte_rows():
    k = pytest.importorskip("gpubench.kernels.matmul_triton")
    configs = k._configs()
    for dtype, block_k in ((torch.float16, 64), (torch.float32, 32), (torch.float8_e4m3fn, 128)):
        kept = k._keep_row_bytes(configs, {"a_ptr": torch.empty(1, dtype=dtype)})
        assert len(kept) == len(k._SHAPES) and {c.kwargs["BLOCK_K"] for c in kept} == {block_k}
    with pytest.raises(ValueError, match="do not chain"):
        k.matmul(torch.empty(4, 8), torch.empty(4, 8), torch.empty(4, 8))



def test_exported_configs_are_found_by_gpu_dtype_and_nearest_shape(tmp_path, monkeypatch):
    import json

    k = pytest.importorskip("gpubench.kernels.matmul_triton")
    tiled = {"variant": "tiled", "BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 64, "GROUP_M": 8, "num_warps": 4,
             "num_stages": 3}
    big = {**tiled, "BLOCK_M": 128}
    mine = {"gpu": "cpu", "kernels": {"gemm": {"fp16": {"512x512x512": {"config": tiled},
                                                        "8192x8192x8192": {"config": big}}}}}
    other = {"gpu": "NVIDIA H200", "kernels": {"gemm": {"fp16": {"500x500x500": {"config": {**tiled, "BLOCK_N": 32}}}}}}
    (tmp_path / "mine.json").write_text(json.dumps(mine))
    (tmp_path / "other.json").write_text(json.dumps(other))
    monkeypatch.setenv(k.CONFIG_ENV, f"{tmp_path / 'other.json'}{os.pathsep}{tmp_path / 'mine.json'}")
    assert k.nearest_export("cpu", "fp16", 600, 512, 512)["config"] == tiled
    assert k.nearest_export("cpu", "fp16", 4096, 4096, 4096)["config"] == big
    assert k.nearest_export("cpu", "bf16", 512, 512, 512) is None
    a, b, c = torch.empty(512, 512, dtype=torch.float16), torch.empty(512, 512, dtype=torch.float16), torch.empty(512, 512, dtype=torch.float16)
    assert "not a CUDA device" in k.tma_possible(a, b, c)
    assert k.choose(a, b, c) == (tiled, "mine.json:512x512x512")
    assert k.choose(a.float(), b.float(), c.float()) == (None, "autotune")  # no fp32 export: the autotuner
    monkeypatch.setenv(k.CONFIG_ENV, str(tmp_path / "missing.json"))
    with pytest.raises(ValueError, match="not a triton-configs export"):
        k.choose(a, b, c)



def test_packaged_exports_are_whole_configurations(monkeypatch):
    import json

    k = pytest.importorskip("gpubench.kernels.matmul_triton")
    monkeypatch.delenv(k.CONFIG_ENV, raising=False)
    files = k.config_files()
    assert files, "gpubench/kernels/configs/ holds the H100 export"
    for path in files:
        doc = json.loads(path.read_text())
        for dtype, shapes in doc["kernels"]["gemm"].items():
            for shape, entry in shapes.items():
                cfg = entry["config"]
                assert cfg["variant"] in k.VARIANTS and cfg["BLOCK_K"] * (1 if dtype == "fp8" else 2) == k.ROW_BYTES
                assert k.nearest_export(doc["gpu"], dtype, *map(int, shape.split("x")))["config"] == cfg
    assert k.nearest_export("NVIDIA H100 80GB HBM3", "fp8", 6000, 6000, 6000)["config"]["variant"] == k.PERSISTENT_TMA


if __name__ == "__main__":
    sys.exit(_interpret_main())
