"""A hand-written torch bandwidth probe, independent of gpubench's engine: the yardstick for acceptance.

CUDA events around a batch of back-to-back calls after warm-up, median of repeats, random inputs, arrays
far past L2 — the method of the reference figures in docs/measurements.md. Run it in the same command as
``gpubench run --suite elementwise`` and compare with ``compare_hand.py``.

    python tests/gpu/hand_probe.py --sizes 256M,1G --out hand.json
"""

from __future__ import annotations

import argparse
import json
import statistics

import torch

SCALAR = 0.375


def batch_seconds(fn, calls: int) -> float:
    """Seconds for ``calls`` back-to-back calls of ``fn``, between two CUDA events (hand_gemm_probe.py too)."""
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    s.record()
    for _ in range(calls):
        fn()
    e.record()
    e.synchronize()
    return s.elapsed_time(e) * 1e-3


def probe(array_bytes: int, dtype: torch.dtype, batch: int = 20, repeats: int = 9, warmup: int = 50) -> dict:
    n = array_bytes // dtype.itemsize
    a, b, c = (torch.empty(n, dtype=dtype, device="cuda").uniform_(-1, 1) for _ in range(3))
    ops = {
        "copy": (lambda: c.copy_(a), 2),  # read a, write c
        "triad": (lambda: torch.add(b, c, alpha=SCALAR, out=a), 3),  # read b, c; write a
    }
    out = {}
    for name, (fn, arrays) in ops.items():
        for _ in range(warmup):
            fn()
        torch.cuda.synchronize()
        times = [batch_seconds(fn, batch) / batch for _ in range(repeats)]
        t = statistics.median(times)
        out[name] = {"seconds": t, "GBps": arrays * array_bytes / t / 1e9, "times": times}
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="256M,1G")
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    from gpubench.units import parse_size_list

    res = {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "probe": {}}
    for size in parse_size_list(args.sizes):
        res["probe"][str(size)] = probe(size, torch.float32)
        for op, r in res["probe"][str(size)].items():
            print(f"hand {op:6s} fp32 {size >> 20:6d} MiB/array: {r['GBps']:8.1f} GB/s")
    with open(args.out, "w") as f:
        json.dump(res, f, indent=2)


if __name__ == "__main__":
    main()
