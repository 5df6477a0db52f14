"""A hand-written matmul probe, independent of gpubench's engine: torch matmul of random uniform [-1, 1]
operands, NN layout; fp8 e4m3 through torch._scaled_mm (B column-major, bf16 output), with and without fast
accumulation. Two timings per dtype, both with CUDA events around back-to-back calls:

- ``short`` (the shared anchors' method): 1 s of warm-up, then the median of 7 batches of 20 calls;
- ``sustained``: then 1 s more of load, and the median of 5 windows of at least 1 s each.

Why both: under the power limit the clock swings about once a second (H100, 2026-11-23; docs/measurements.md), so
7 batches of ~30 ms land anywhere in a swing — on H100 the short figure for bf16 8192³ read 4 % under gpubench
in one run and 2 % over in the next — while whole-second windows average over it, as a training job does.
NVML's SM clock is read after each timing.

    python tests/gpu/hand_gemm_probe.py --out hand-gemm.json [--size 8192]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import torch
from hand_probe import batch_seconds  # tests/gpu/ is the script's own directory

CALLS, REPS = 20, 7  # short: the anchors' method
WINDOW_S, WINDOWS = 1.0, 5  # sustained


def _load(fn, seconds: float) -> None:
    t_end = time.perf_counter() + seconds
    while time.perf_counter() < t_end:
        fn()
        torch.cuda.synchronize()


def tflops(fn, n: int) -> tuple[float, float, int]:
    """(short TF/s, sustained TF/s, calls per sustained window)."""
    flop = 2 * n**3
    _load(fn, 1.0)
    short = statistics.median(flop * CALLS / batch_seconds(fn, CALLS) / 1e12 for _ in range(REPS))
    _load(fn, 1.0)
    calls = max(CALLS, int(WINDOW_S * short * 1e12 / flop) + 1)
    sustained = statistics.median(flop * calls / batch_seconds(fn, calls) / 1e12 for _ in range(WINDOWS))
    return short, sustained, calls


def record(res: dict, name: str, fn, n: int) -> None:
    short, sustained, calls = tflops(fn, n)
    res[f"{name}_short_tflops"], res[f"{name}_tflops"] = short, sustained
    res[f"{name}_calls_per_window"] = calls
    res[f"{name}_sm_clock_mhz"] = sm_clock()


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
        record(res, name, lambda: torch.matmul(a, b), n)
        del a, b
    torch.backends.cuda.matmul.allow_tf32 = False
    if torch.cuda.get_device_capability() >= (8, 9):
        a = rand(torch.float8_e4m3fn)
        b = rand(torch.float8_e4m3fn).t().contiguous().t()  # column-major, as _scaled_mm requires
        one = torch.tensor(1.0, device="cuda")
        for name, fast in (("fp8", False), ("fp8_fast_accum", True)):
            record(res, name, lambda: torch._scaled_mm(a, b, scale_a=one, scale_b=one, out_dtype=torch.bfloat16,
                                                       use_fast_accum=fast), n)
    for k, v in res.items():
        print(f"hand {k}: {v:.2f}" if isinstance(v, float) else f"hand {k}: {v}")
    with open(args.out, "w") as f:
        json.dump(res, f, indent=2)


if __name__ == "__main__":
    main()
