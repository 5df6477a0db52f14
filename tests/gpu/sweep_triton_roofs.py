"""Device probe for the Triton roofs: every elementwise op (fp32, bf16, 256 MiB) through torch and through
Triton launch shapes (vector bytes per thread × warps), and bf16/fp8 GEMM (NT) at 4096³ and 8192³ through
torch/cuBLAS and the persistent-TMA kernel's configurations, each checked against a higher-precision
reference first. Timing: CUDA events over back-to-back calls, torch and Triton interleaved, the median of
several samples; GEMMs after a warm-up past the power limit. A probe to pick what the suites then measure.
Usage: python tests/gpu/sweep_triton_roofs.py [elementwise] [gemm]"""

import math
import statistics
import sys
import time

import torch

from gpubench.kernels import matmul_triton as mt
from gpubench.kernels import stream_triton as ks
from gpubench.suites import elementwise as E
from gpubench.suites import gemm as G

dev = "cuda"
print(torch.cuda.get_device_name(), torch.__version__, __import__("triton").__version__, flush=True)


def time_calls(fn, calls, samples=5):
    out = []
    for _ in range(samples):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        for _ in range(calls):
            fn()
        e.record()
        e.synchronize()
        out.append(s.elapsed_time(e) / 1e3 / calls)
    return statistics.median(out)


def elementwise():
    size = 256 << 20
    shapes = [(16, 4), (16, 8), (32, 4), (32, 8), (64, 4), (64, 8), (128, 4)]
    for dtype in ("fp32", "bf16"):
        td = E.DTYPES[dtype]
        n = size // td.itemsize
        for op, spec in E.OPS.items():
            x = {k: torch.empty(n, dtype=td, device=dev).uniform_(-1, 1) for k in spec.reads}
            if spec.write:
                x[spec.write] = torch.full((n,), math.nan, dtype=td, device=dev)
            nbytes = spec.arrays * size
            tfn = E._torch_run(op)
            cands = {}
            if op == "dot":
                for block, w in ((8192, 8), (4096, 4), (16384, 8), (8192, 4), (16384, 16)):
                    cands[f"block{block}_w{w}"] = (lambda x, b=block, w=w: ks.dot(x["a"], x["b"], block=b, num_warps=w))
            else:
                fn = {"copy": lambda x, w, v: ks.copy(x["a"], x["c"], warps=w, vector_bytes=v),
                      "mul": lambda x, w, v: ks.mul(x["c"], x["b"], E.SCALAR, warps=w, vector_bytes=v),
                      "add": lambda x, w, v: ks.add(x["a"], x["b"], x["c"], warps=w, vector_bytes=v),
                      "triad": lambda x, w, v: ks.triad(x["b"], x["c"], x["a"], E.SCALAR, warps=w, vector_bytes=v),
                      "fill": lambda x, w, v: ks.fill(x["a"], E.SCALAR, warps=w, vector_bytes=v)}[op]
                for v, w in shapes:
                    cands[f"v{v}_w{w}"] = (lambda x, fn=fn, w=w, v=v: fn(x, w, v))
            for name, fn in cands.items():  # correctness first
                out = fn(x)
                chk = E._checker(op, dtype)(x, out)
                if not chk.ok:
                    print("CHECK FAIL", op, dtype, name, chk)
            torch.cuda.synchronize()
            calls = 40
            res = {}
            for rep in range(2):  # interleaved twice
                res.setdefault("torch", []).append(time_calls(lambda: tfn(x), calls))
                for name, fn in cands.items():
                    res.setdefault(name, []).append(time_calls(lambda: fn(x), calls))
            gbs = {k: nbytes / min(v) / 1e9 for k, v in res.items()}
            t = gbs.pop("torch")
            line = " ".join(f"{k}={v / t:.3f}" for k, v in sorted(gbs.items(), key=lambda kv: -kv[1]))
            print(f"EW {dtype} {op} torch={t:.0f}GB/s {line}", flush=True)
            del x
            torch.cuda.empty_cache()


def gemm_inputs(dtype, s):
    fp8 = dtype == "fp8"
    operand = torch.float8_e4m3fn if fp8 else torch.bfloat16
    x = G.Operands(G._uniform((s, s), operand, dev, fp8), G._uniform((s, s), operand, dev, fp8).t(),
                   torch.full((s, s), math.nan, dtype=torch.bfloat16, device=dev))
    if fp8:
        x.scale_a = torch.full((), G.FP8_SCALE, device=dev)
        x.scale_b = torch.full((), G.FP8_SCALE, device=dev)
    return x


def run_timed(fn, flop, warm_s=0.6, dur_s=0.8):
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < warm_s:
        fn()
        torch.cuda.synchronize()
    one = time_calls(fn, 3, 1)
    calls = max(3, int(dur_s / 3 / one))
    return flop / time_calls(fn, calls, 3) / 1e12


def gemm():
    configs = {
        "bf16": [(128, 256, 64, 3, 8, 0, 0), (128, 256, 64, 4, 8, 1, 0), (128, 256, 64, 3, 8, 0, 1),
                 (128, 256, 64, 4, 8, 1, 1), (128, 128, 64, 4, 4, 0, 0), (128, 128, 64, 4, 8, 0, 1),
                 (256, 128, 64, 3, 8, 0, 0), (128, 256, 64, 4, 8, 1, 1)],
        "fp8": [(128, 256, 128, 3, 8, 0, 0), (128, 256, 128, 4, 8, 1, 0), (128, 256, 128, 3, 8, 0, 1),
                (128, 256, 128, 4, 8, 1, 1), (128, 128, 128, 4, 4, 0, 0), (128, 128, 128, 4, 8, 0, 1),
                (256, 128, 128, 3, 8, 0, 0), (128, 256, 64, 4, 8, 0, 0)],
    }
    for dtype in ("bf16", "fp8"):
        for s in (4096, 8192):
            x = gemm_inputs(dtype, s)
            flop = 2 * s**3
            if dtype == "fp8":
                tfn = lambda: torch._scaled_mm(x.a, x.b, x.scale_a, x.scale_b, out_dtype=torch.bfloat16, out=x.c)
            else:
                tfn = lambda: torch.matmul(x.a, x.b, out=x.c)
            chk = G._checker(dtype, s, s)
            tfn(); print("torch check", dtype, s, chk(x, x.c).ok, flush=True)
            res = {"torch": run_timed(tfn, flop, warm_s=1.5)}
            for bm, bn, bk, st, w, split, ws in configs[dtype]:
                cfg = {"variant": "persistent-tma", "BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk, "GROUP_M": 8,
                       "num_stages": st, "num_warps": w, "EPILOGUE_SPLIT": split, "WARP_SPECIALIZE": ws}
                name = f"ptma_bm{bm}_bn{bn}_bk{bk}_s{st}_w{w}_es{split}_ws{ws}"
                fn = lambda cfg=cfg: mt.matmul(x.a, x.b, x.c, scale_a=x.scale_a, scale_b=x.scale_b, config=cfg)
                try:
                    x.c.fill_(math.nan)
                    fn()
                    torch.cuda.synchronize()
                    c = chk(x, x.c)
                    if not c.ok:
                        print("CHECK FAIL", dtype, s, name, c, flush=True)
                        continue
                    res[name] = run_timed(fn, flop)
                except Exception as e:  # noqa: BLE001
                    print("ERR", dtype, s, name, type(e).__name__, str(e).splitlines()[0][:200] if str(e) else "", flush=True)
            if dtype == "bf16":
                try:
                    grid = lambda m: (triton_cdiv(s, m["BLOCK_M"]) * triton_cdiv(s, m["BLOCK_N"]),)
                    tiled = lambda: mt._autotuned[grid](x.a, x.b, x.c, x.c, x.c, s, s, s, x.a.stride(0), x.a.stride(1),
                                                        x.b.stride(0), x.b.stride(1), x.c.stride(0), x.c.stride(1),
                                                        PRECISION="ieee", HAS_SCALE=False)
                    res["tiled_autotune"] = run_timed(tiled, flop)
                except Exception as e:  # noqa: BLE001
                    print("ERR tiled", type(e).__name__, str(e)[:200])
            res["torch_end"] = run_timed(tfn, flop, warm_s=0.3)
            t = res["torch"]
            print(f"GEMM {dtype} {s} torch={t:.0f}TF/s torch_end={res.pop('torch_end'):.0f} " +
                  " ".join(f"{k}={v:.0f}({v / t:.3f})" for k, v in sorted(res.items(), key=lambda kv: -kv[1]) if k != "torch"),
                  flush=True)
            del x
            torch.cuda.empty_cache()


def triton_cdiv(a, b):
    return -(-a // b)


what = sys.argv[1:] or ["elementwise", "gemm"]
if "elementwise" in what:
    elementwise()
if "gemm" in what:
    gemm()
