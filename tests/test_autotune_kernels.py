"""autotune-kernels: the launch-shape grid, each configuration reaching the kernel it times (Triton stood in for
by torch on CPU), the best-per-shape rows, and the exports of the winners."""

from __future__ import annotations

import importlib
import json
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import torch

from gpubench.timing import engine
from gpubench import results
from gpubench.kernels import config_export as kernel_export
from gpubench.backends.fake import FakeBackend
from gpubench.suite import Case, GridContext

K = importlib.import_module("gpubench.suites.autotune_kernels")
ROOT = Path(__file__).resolve().parent.parent


def _ctx(quick):
    return GridContext(backend="cuda", quick=quick, cache_bytes=50 << 20, memory_bytes=140 << 30)


def test_grid_tiles_fit_and_16_row_tiles_are_for_decode_like_m_only():
    full = list(K.AutotuneKernels().cases(_ctx(False)))
    gemm = [c for c in full if c["kernel"] == "gemm"]
    assert {c["shape"] for c in gemm if c["dtype"] == "bf16"} == {"4096x4096x4096", "8192x8192x8192", "16x8192x8192"}
    # fp8 runs the persistent variant only, which has no decode-like tiles
    assert {c["shape"] for c in gemm if c["dtype"] == "fp8"} == {"4096x4096x4096", "8192x8192x8192"}
    for c in gemm:
        if c["config"] == "torch":
            continue
        cfg = K.parse(c["config"])
        assert cfg["BLOCK_M"] * cfg["BLOCK_N"] <= 128 * 256
        assert (cfg["BLOCK_M"] == 16) == c["shape"].startswith("16x")
        assert (cfg.get("variant") == "persistent-tma") == c["config"].startswith("ptma_")
        assert c["dtype"] == "bf16" or "variant" in cfg
    ptma = [c for c in gemm if c["config"].startswith("ptma_")]
    assert {c["dtype"] for c in ptma} == {"bf16", "fp8"} and {K.parse(c["config"])["WARP_SPECIALIZE"] for c in ptma} == {0, 1}
    assert sum(c["config"] == "torch" for c in full) == 3 + 2 + 2  # a baseline per gemm shape and triad dtype
    quick = list(K.AutotuneKernels().cases(_ctx(True)))
    assert len(quick) < len(full) and {c["kernel"] for c in quick} == {"gemm", "triad"}
    assert K.parse("bm128_bn256_w8_s3") == {"BLOCK_M": 128, "BLOCK_N": 256, "num_warps": 8, "num_stages": 3}
    assert K.parse("w2_v32") == {"num_warps": 2, "vector_bytes": 32}
    assert K.gemm_kernel_config("ptma_bm128_bn256_w8_s4_es1_ws1", "fp8") == {
        "variant": "persistent-tma", "BLOCK_M": 128, "BLOCK_N": 256, "num_warps": 8, "num_stages": 4,
        "EPILOGUE_SPLIT": 1, "WARP_SPECIALIZE": 1, "BLOCK_K": 128, "GROUP_M": 8}


class _Cuda(FakeBackend):
    """A backend that says cuda but keeps tensors on the CPU: enough to build the GPU workloads here."""

    name = "cuda"


SMALL = engine.EngineConfig(min_samples=3, budget_s=0.02, min_warmup_s=0.0, max_warmup_s=0.02, min_sample_s=1e-5)


def test_a_gemm_config_reaches_the_kernel_and_is_checked(monkeypatch):
    pytest.importorskip("triton")
    from gpubench.kernels import matmul_triton as kt

    seen = []

    def matmul(a, b, c, *, config=None, **kw):
        seen.append(config)
        c.copy_((a.float() @ b.float()).to(c.dtype))
        return c

    monkeypatch.setattr(kt, "matmul", matmul)
    suite = K.AutotuneKernels()
    case = Case.of(kernel="gemm", dtype="bf16", shape="64x64x128", config="bm64_bn64_w4_s3")
    w = suite.prepare(case, _Cuda(memory_bytes=1 << 34))
    chk = engine.check(w, FakeBackend())
    assert chk.ok, chk
    assert seen[0] == {"variant": "tiled", "BLOCK_M": 64, "BLOCK_N": 64, "num_warps": 4, "num_stages": 3,
                       "BLOCK_K": 64, "GROUP_M": 8}
    assert w.extra["impl_config"] == "variant=tiled BLOCK_M=64 BLOCK_N=64 BLOCK_K=64 GROUP_M=8 stages=3 warps=4"


def test_a_wrong_config_result_fails_the_check(monkeypatch):
    pytest.importorskip("triton")
    from gpubench.kernels import matmul_triton as kt

    monkeypatch.setattr(kt, "matmul", lambda a, b, c, **kw: c.zero_())
    w = K.AutotuneKernels().prepare(Case.of(kernel="gemm", dtype="bf16", shape="64x64x128", config="bm64_bn64_w4_s3"),
                                    _Cuda(memory_bytes=1 << 34))
    assert not engine.check(w, FakeBackend()).ok


def test_a_persistent_fp8_config_reaches_the_kernel_with_its_scales(monkeypatch):
    pytest.importorskip("triton")
    from gpubench.kernels import matmul_triton as kt

    seen = []

    def matmul(a, b, c, *, config=None, scale_a=None, scale_b=None, **kw):
        seen.append((config, float(scale_a) * float(scale_b)))
        c.copy_((a.double() @ b.double() * float(scale_a) * float(scale_b)).to(c.dtype))
        return c

    monkeypatch.setattr(kt, "matmul", matmul)
    monkeypatch.setattr(kt, "tma_available", lambda device: "")
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda *a: (9, 0))  # fp8: a Hopper stand-in
    case = Case.of(kernel="gemm", dtype="fp8", shape="64x64x128", config="ptma_bm128_bn256_w8_s3_es0_ws1")
    w = K.AutotuneKernels().prepare(case, _Cuda(memory_bytes=1 << 34))
    chk = engine.check(w, FakeBackend())
    assert chk.ok, chk
    assert seen[0][0]["variant"] == "persistent-tma" and seen[0][0]["BLOCK_K"] == 128 and seen[0][1] == 2.0**-16
    assert w.extra["impl_config"].startswith("variant=persistent-tma BLOCK_M=128 BLOCK_N=256 BLOCK_K=128 GROUP_M=8")


def test_a_persistent_config_is_a_skip_row_where_tma_is_missing():
    pytest.importorskip("triton")
    from gpubench.suite import Skip

    case = Case.of(kernel="gemm", dtype="bf16", shape="64x64x128", config="ptma_bm128_bn256_w8_s3_es0_ws0")
    with pytest.raises(Skip, match="persistent-tma variant cannot run here"):
        K.AutotuneKernels().prepare(case, _Cuda(memory_bytes=1 << 34))  # CPU tensors: no TMA


def test_a_triad_config_reaches_the_kernel(monkeypatch):
    pytest.importorskip("triton")
    from gpubench.kernels import stream_triton as ks

    seen = []

    def triad(b, c, a, s, warps=None, vector_bytes=None):
        seen.append((warps, vector_bytes))
        a.copy_(b + s * c)
        return a

    monkeypatch.setattr(ks, "triad", triad)
    w = K.AutotuneKernels().prepare(Case.of(kernel="triad", dtype="fp32", shape=str(1 << 16), config="w2_v32"),
                                    _Cuda(memory_bytes=1 << 34))
    assert engine.check(w, FakeBackend()).ok and seen[0] == (2, 32)


def test_cpu_run_skips_every_case_with_the_reason(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "gpubench", "run", "--suite", "autotune-kernels", "--backend", "cpu",
                           "--quick", "--out", str(tmp_path), "--cluster", "t"], capture_output=True, text=True,
                          timeout=300, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-2000:]
    (run,) = list((tmp_path / "t").iterdir())
    df = results.load(run)
    assert (df["status"] == "skipped").all() and df["message"].str.contains("GPUs only").all()


def _rows():
    rows = []
    for config, tflops in (("torch", 600.0), ("bm128_bn128_w4_s3", 550.0), ("bm128_bn256_w8_s3", 660.0)):
        for metric, unit, value in (("throughput", "TFLOP/s", tflops), ("time", "us", 2 * 4096**3 / tflops / 1e6)):
            rows.append({"suite": "autotune-kernels", "kernel": "gemm", "dtype": "bf16", "shape": "4096x4096x4096",
                         "config": config, "metric": metric, "unit": unit, "status": "ok", "value": value})
    for config, gbs in (("torch", 4000.0), ("w4_v16", 4100.0)):
        for metric, unit, value in (("bandwidth", "GB/s", gbs), ("time", "us", 3 * 2**28 / gbs / 1e3)):
            rows.append({"suite": "autotune-kernels", "kernel": "triad", "dtype": "fp32", "shape": str(2**28),
                         "config": config, "metric": metric, "unit": unit, "status": "ok", "value": value})
    return rows


def test_summarize_names_the_best_config_against_torch():
    derived = K.AutotuneKernels().summarize(_rows())
    gemm, triad = derived
    assert gemm.case["config"] == "best" and gemm.value == 660.0 and gemm.metric.name == "throughput"
    assert gemm.message.startswith("bm128_bn256_w8_s3: 1.100x torch's 600")
    assert triad.value == 4100.0 and "w4_v16: 1.025x" in triad.message


def test_exports_of_the_winners():
    df = pd.DataFrame(_rows())
    meta = {"run_id": "r1", "fingerprint": {"identity": {"torch": "2.11.0", "runtime": "cuda", "runtime_version": "13.0",
                                                          "gpu_model": "NVIDIA H200"}}}
    csv = kernel_export.tunableop_csv(df, meta).splitlines()
    assert csv[:4] == ["Validator,PT_VERSION,2.11.0", "Validator,CUDA_VERSION,13.0", "Validator,GPU,NVIDIA H200",
                       "Validator,GPUBENCH_RUN,r1"]
    op, params, solution, ms = csv[4].split(",")
    assert (op, params, solution) == ("TritonGemm_BFloat16_NT", "nt_4096_4096_4096", "Triton_bm128_bn256_w8_s3")
    assert float(ms) == pytest.approx(2 * 4096**3 / 660.0 / 1e6 / 1e3, rel=1e-5)
    assert csv[5].startswith("TritonTriad_Float,bytes_268435456,Triton_w4_v16,")
    doc = json.loads(kernel_export.triton_configs(df, meta))
    g = doc["kernels"]["gemm"]["bf16"]["4096x4096x4096"]
    assert g["config"] == {"variant": "tiled", "BLOCK_M": 128, "BLOCK_N": 256, "num_warps": 8, "num_stages": 3,
                           "BLOCK_K": 64, "GROUP_M": 8}
    assert doc["gpu"] == "NVIDIA H200"
    assert g["speedup_vs_torch"] == pytest.approx(1.1)


def test_export_of_a_run_without_kernel_rows_exits_2(tmp_path):
    subprocess.run([sys.executable, "-m", "gpubench", "run", "--suite", "elementwise", "--backend", "fake", "--quick",
                    "--filter", "op=copy,dtype=fp32", "--out", str(tmp_path), "--cluster", "t"], check=True,
                   capture_output=True, timeout=300, cwd=ROOT)
    (run,) = list((tmp_path / "t").iterdir())
    proc = subprocess.run([sys.executable, "-m", "gpubench", "export", str(run), "--format", "tunableop", "--out",
                           str(tmp_path / "x.csv")], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert proc.returncode == 2 and "autotune-kernels" in proc.stderr and not (tmp_path / "x.csv").exists()
