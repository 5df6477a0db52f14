"""A hand-written matmul probe, independent of gpubench's engine (the reference figures' method): torch
matmul of random uniform [-1, 1] operands, NN layout, 20 back-to-back calls between CUDA events after a
1-second warm-up, median of 7 repeats; fp8 e4m3 through torch._scaled_mm (B column-major, bf16 output), with
and without fast accumulation.
NVML's SM clock is read after each dtype.

    python tests/gpu/hand_gemm_probe.py --out hand-gemm.json [--size 8192]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import torch

CALLS, REPS = 20, 7


def tflops(fn, n: int) -> float:
    t_end = time.perf_counter() + 1.0
    while time.perf_counter() < t_end:
        fn()
        torch.cuda.synchronize()
    out = []
    for _ in range(REPS):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        for _ in range(CALLS):
            fn()
        e.record()
        e.synchronize()
        out.append(2 * n**3 * CALLS / (s.elapsed_time(e) * 1e-3) / 1e12)
    return statistics.median(out)


def sm_clock() -> float | None:
    try:
        import pynvml

        pynvml.nvmlInit()
        return float(pynvml.nvmlDeviceGetClockInfo(pynvml.nvmlDeviceGetHandleByIndex(0), pynvml.NVML_CLOCK_SM))
    except Exception:  # noqa: BLE001 — the clock is information only
        return None


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--size", type=int, default=8192)
    args = ap.parse_args()
    n = args.size
    res = {"device": torch.cuda.get_device_name(), "size": n}

    def rand(dtype):
        return (torch.rand(n, n, device="cuda", dtype=torch.float32) * 2 - 1).to(dtype)

    for name, dtype, tf32 in (("bf16", torch.bfloat16, False), ("fp16", torch.float16, False),
                              ("tf32", torch.float32, True), ("fp32", torch.float32, False)):
        torch.backends.cuda.matmul.allow_tf32 = tf32
        a, b = rand(dtype), rand(dtype)
        res[f"{name}_tflops"] = tflops(lambda: torch.matmul(a, b), n)
        res[f"{name}_sm_clock_mhz"] = sm_clock()
        del a, b
    torch.backends.cuda.matmul.allow_tf32 = False
    if torch.cuda.get_device_capability() >= (8, 9):
        a = rand(torch.float8_e4m3fn)
        b = rand(torch.float8_e4m3fn).t().contiguous().t()  # column-major, as _scaled_mm requires
        one = torch.tensor(1.0, device="cuda")
        res["fp8_tflops"] = tflops(lambda: torch._scaled_mm(a, b, scale_a=one, scale_b=one, out_dtype=torch.bfloat16), n)
        res["fp8_sm_clock_mhz"] = sm_clock()
        res["fp8_fast_accum_tflops"] = tflops(lambda: torch._scaled_mm(a, b, scale_a=one, scale_b=one, out_dtype=torch.bfloat16,
                                                                       use_fast_accum=True), n)
        res["fp8_fast_accum_sm_clock_mhz"] = sm_clock()
    for k, v in res.items():
        print(f"hand {k}: {v:.2f}" if isinstance(v, float) else f"hand {k}: {v}")
    with open(args.out, "w") as f:
        json.dump(res, f, indent=2)


if __name__ == "__main__":
    main()
