"""The elementwise suite on CPU: grid sizing, byte accounting, correctness checks that can fail."""

import importlib
import math
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from gpubench.timing import engine
from gpubench.run import runner
from gpubench.backends.cpu import CpuBackend
from gpubench.backends.fake import FakeBackend
from gpubench.errors import UsageError
from gpubench.suite import Case, GridContext

E = importlib.import_module("gpubench.suites.elementwise")
SMALL = engine.EngineConfig(min_samples=3, budget_s=0.05, min_warmup_s=0.0, max_warmup_s=0.05, min_sample_s=1e-4)


def ctx(**kw):
    base = dict(backend="cuda", quick=False, cache_bytes=50 << 20, memory_bytes=80 << 30)
    return GridContext(**{**base, **kw})


def test_sizes_follow_the_cache_never_a_constant():
    # 4x and 16x a 50 MiB L2, rounded up to powers of two
    sizes = sorted({c["array_bytes"] for c in E.Elementwise().cases(ctx())})
    assert sizes == [256 << 20, 1 << 30]
    sizes = sorted({c["array_bytes"] for c in E.Elementwise().cases(ctx(cache_bytes=60 << 20, quick=True))})
    assert sizes == [256 << 20]
    sizes = sorted({c["array_bytes"] for c in E.Elementwise().cases(ctx(cache_bytes=32 << 20, quick=True))})
    assert sizes == [128 << 20]


def test_full_grid_on_gpu_is_every_op_dtype_size_and_both_impls():
    cases = [c for c in E.Elementwise().cases(ctx()) if not c["op"].startswith("fma")]
    assert len(cases) == 6 * 4 * 2 * 2
    assert {c["impl"] for c in cases} == {"torch", "triton"}
    cpu = list(E.Elementwise().cases(ctx(backend="cpu", quick=True)))
    assert {c["impl"] for c in cpu} == {"torch"} and {c["dtype"] for c in cpu} == {"fp32", "bf16"}


def test_unknown_dtype_and_odd_size_are_usage_errors():
    with pytest.raises(UsageError, match="no dtype int4"):
        list(E.Elementwise().cases(ctx(dtypes=("int4",))))
    with pytest.raises(UsageError, match="not a whole number of fp64 elements"):
        list(E.Elementwise().cases(ctx(sizes=(12,), dtypes=("fp64",))))


@pytest.mark.parametrize("op,arrays,flops_per_elem", [
    ("copy", 2, 0), ("mul", 2, 1), ("add", 3, 1), ("triad", 3, 2), ("dot", 2, 2), ("fill", 1, 0)])
def test_bytes_are_counted_as_babelstream_counts_them(op, arrays, flops_per_elem):
    w = E.Elementwise().prepare(Case.of(op=op, dtype="fp32", array_bytes=4096, impl="torch"), CpuBackend())
    assert w.bytes == arrays * 4096
    assert w.flops == flops_per_elem * 1024
    assert w.extra == {"elements": 1024, "impl_config": "", "fma_steps": 0, "roof": "memory"}


def test_intensity_sweep_on_gpus_only_at_one_size_in_fp32_and_half_types():
    fma = [c for c in E.Elementwise().cases(ctx()) if c["op"].startswith("fma")]
    assert [c["op"] for c in fma if c["dtype"] == "fp32"] == [f"fma{k}" for k in E.FMA_STEPS]
    assert {c["dtype"] for c in fma} == {"fp32", "bf16", "fp16"} and {c["impl"] for c in fma} == {"triton"}
    assert {c["array_bytes"] for c in fma} == {256 << 20}
    assert max(E.FMA_STEPS) >= 256 and min(E.FMA_STEPS) == 0  # memory roof to the arithmetic roof
    quick = [c for c in E.Elementwise().cases(ctx(quick=True, dtypes=("fp32",))) if c["op"].startswith("fma")]
    assert [c["op"] for c in quick] == [f"fma{k}" for k in E.FMA_STEPS_QUICK]
    assert not [c for c in E.Elementwise().cases(ctx(backend="cpu")) if c["op"].startswith("fma")]
    assert not [c for c in E.Elementwise().cases(ctx(dtypes=("fp64",))) if c["op"].startswith("fma")]


@pytest.mark.parametrize("k", [0, 1, 64])
def test_fma_work_and_reference(k):
    spec = E._op(f"fma{k}")
    assert spec.arrays == 2 and spec.flops_per_element == 2 * k  # one read, one write, k multiply-adds
    x = {"a": torch.tensor([0.25, -1.0, 3.0], dtype=torch.float64)}
    ref = E._reference(f"fma{k}", x)
    expect = x["a"].clone()
    for _ in range(k):
        expect = 0.5 * expect + 0.5
    assert torch.equal(ref, expect)
    with pytest.raises(E.Skip, match="fused"):
        E.Elementwise().prepare(Case.of(op=f"fma{k}", dtype="fp32", array_bytes=4096, impl="torch"), CpuBackend())


@pytest.mark.parametrize("dtype", list(E.DTYPES))
@pytest.mark.parametrize("op", list(E.OPS))
def test_every_torch_op_passes_its_check_on_fresh_random_inputs(op, dtype):
    w = E.Elementwise().prepare(Case.of(op=op, dtype=dtype, array_bytes=1 << 16, impl="torch"), CpuBackend())
    x = w.make_inputs()
    for name in E.OPS[op].reads:  # random, not zeros
        assert x[name].abs().max() > 0 and x[name].unique().numel() > 100
    chk = w.check(x, w.run(x))
    assert chk.ok, chk


@pytest.mark.parametrize("op", ["copy", "triad", "dot", "fill"])
def test_a_wrong_result_fails_the_check(op, monkeypatch):
    w = E.Elementwise().prepare(Case.of(op=op, dtype="fp32", array_bytes=1 << 16, impl="torch"), CpuBackend())
    x = w.make_inputs()
    out = w.run(x)
    if op == "dot":
        bad = out + 1e-3 * x["a"].double().abs().sum().item()
    else:
        bad = out.clone()
        bad[::97] += 1e-2  # a few elements off by a little
    chk = w.check(x, bad)
    assert not chk.ok and chk.error > chk.tolerance


def test_an_unwritten_element_fails_the_check():
    w = E.Elementwise().prepare(Case.of(op="triad", dtype="bf16", array_bytes=1 << 16, impl="torch"), CpuBackend())
    x = w.make_inputs()
    out = w.run(x)
    out[-1] = math.nan  # as the poisoned output looks where a kernel skipped the tail
    chk = w.check(x, out)
    assert not chk.ok and "not finite" in chk.detail


def test_a_broken_implementation_is_recorded_invalid_not_fast(monkeypatch):
    monkeypatch.setattr(E, "_torch_run", lambda op: (lambda x: torch.add(x["a"], x["a"], out=x["c"])))
    suite = E.Elementwise()
    be = FakeBackend()
    p = runner.plan([suite], be, quick=True, sizes=[1 << 14], dtypes=["fp32"], case_filter="op=add")
    rows = runner.run_case(suite, p.cases["elementwise"][0], be, {}, SMALL, None)
    assert {r["status"] for r in rows} == {"invalid"}
    assert all(r["n"] == 0 and math.isnan(r["value"]) for r in rows)


def test_cpu_backend_measures_every_op_and_dtype():
    suite = E.Elementwise()
    be = CpuBackend()
    p = runner.plan([suite], be, quick=True, sizes=[1 << 18], dtypes=list(E.DTYPES))
    for case in p.cases["elementwise"]:
        rows = runner.run_case(suite, case, be, {}, SMALL, None)
        bw, t = (next(r for r in rows if r["metric"] == m) for m in ("bandwidth", "time"))
        assert bw["status"] == "ok", bw["message"]
        assert bw["n"] == t["n"] >= 3 and bw["value"] > 0
        # the same samples seen two ways (no speed assumed: the machine may be loaded)
        assert bw["max"] == pytest.approx(bw["work_bytes"] / (t["min"] * 1e-6) / 1e9, rel=1e-12)
        assert bw["check_error"] <= bw["check_tolerance"]


def test_triton_kernels_are_correct_in_the_interpreter(tmp_path):
    pytest.importorskip("triton")
    script = Path(__file__).with_name("triton_interpret_check.py")
    env = {**__import__("os").environ, "TRITON_INTERPRET": "1"}
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=240)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    # BabelStream ops × dtypes, fma × (fp32, fp16), and the ops again with one warp per program
    assert proc.stdout.count("ok") == 6 * 4 + 3 * 2 + 6


def test_triton_warps_option_reaches_the_cases_and_is_recorded():
    pytest.importorskip("triton")
    s, c = E.Elementwise(), ctx(options=(("triton_warps", 1),))
    list(s.cases(c))
    w = s.prepare(Case.of(op="copy", dtype="fp32", array_bytes=4096, impl="triton"), CpuBackend(), c)
    assert w.extra["impl_config"] == "vector_bytes=16,warps=1"
    assert E._triton_config("copy", 1) == "vector_bytes=16,warps=1"
    assert E._triton_config("dot", 2) == "block=8192,warps=2"
    assert E._triton_config("copy") == "vector_bytes=16,warps=4"


def test_bad_triton_warps_is_a_usage_error(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "gpubench", "run", "--suite", "elementwise", "--backend", "cpu",
                           "--triton-warps", "3", "--out", str(tmp_path)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and "--triton-warps 3" in proc.stderr
    assert not any(tmp_path.iterdir())


def test_gpu_samples_last_20_ms_and_cpu_samples_keep_the_engines_length():
    be = FakeBackend(memory_bytes=1 << 30)
    be.name = "cuda"  # the fake device under a GPU's name: the declaration only, nothing is timed here
    c = Case.of(op="copy", dtype="fp32", array_bytes=1 << 20, impl="torch")
    assert E.Elementwise().prepare(c, be).method.min_sample_s == E.GPU_MIN_SAMPLE_S == 0.02
    assert E.Elementwise().prepare(c, CpuBackend()).method.min_sample_s == 0.0
