"""How a power-limited GEMM's speed moves while it runs: the trace behind gemm's GPU_MIN_WARMUP_S and
GPU_MIN_SPAN_S (docs/measurements.md). Independent of gpubench's engine.

For each size, back-to-back bf16 products (random uniform operands, two rotating sets) for SECONDS, one CUDA
event after every call, NVML's SM clock and power read every 10 ms in a thread. Prints, after the first
WARM seconds, the spread of the medians of consecutive windows of W seconds: how long a run's samples must
span for its median to agree with the next run's.

    python tests/gpu/diag_power_swing.py --out trace.json [--sizes 8192,4096] [--seconds 8] [--warm 1.5]
    python tests/gpu/diag_power_swing.py --analyze trace.json      (here, no GPU: sliding windows, below)

``--analyze`` slides windows of S seconds (step 50 ms) along a saved trace, after WARM seconds, and prints how
much two statistics of a window move along the trace: the median of per-call rates (what short samples give)
and the mean rate, total flops over total time (what a sample lasting the whole window gives).
"""

from __future__ import annotations

import argparse
import json
import statistics
import threading
import time

WINDOWS = (0.005, 0.02, 0.05, 0.1, 0.25, 0.5, 1.0, 2.0)


def analyze(path: str, warm: float) -> None:
    import numpy as np

    with open(path) as f:
        res = json.load(f)
    for run in res["runs"]:
        n, ms = run["n"], np.array(run["call_ms"])
        t, flop = np.cumsum(ms) / 1e3, 2 * run["n"] ** 3
        print(f"{res['device']}, bf16 {n}^3, {t[-1]:.1f} s of calls")
        for span in (0.25, 0.5, 1.0, 1.5, 2.0, 3.0):
            med, mean = [], []
            for start in np.arange(warm, t[-1] - span, 0.05):
                w = ms[np.searchsorted(t, start):np.searchsorted(t, start + span)]
                med.append(flop / (np.median(w) * 1e-3) / 1e12)
                mean.append(flop * len(w) / (w.sum() * 1e-3) / 1e12)
            sd = lambda v: 100 * np.std(v) / np.mean(v)  # noqa: E731
            print(f"  windows of {span} s: median of per-call rates moves {sd(med):.2f} % (SD), "
                  f"mean rate {sd(mean):.2f} % (mean {np.mean(mean):.1f} TF/s)")


def nvml_trace(stop: threading.Event, out: list, t0: float) -> None:
    try:
        import pynvml
        import torch

        pynvml.nvmlInit()
        h = pynvml.nvmlDeviceGetHandleByIndex(torch.cuda.current_device())
    except Exception:  # noqa: BLE001 — the clock trace is information only
        return
    while not stop.is_set():
        out.append((time.perf_counter() - t0, pynvml.nvmlDeviceGetClockInfo(h, pynvml.NVML_CLOCK_SM),
                    pynvml.nvmlDeviceGetPowerUsage(h) / 1000.0))
        time.sleep(0.01)


def trace(n: int, seconds: float) -> dict:
    import torch

    sets = [[(torch.rand(n, n, device="cuda") * 2 - 1).bfloat16() for _ in range(2)] for _ in range(2)]
    c = torch.empty(n, n, device="cuda", dtype=torch.bfloat16)
    per_call = max(1, int(seconds * 800e12 / (2 * n**3)))  # enough calls for `seconds` at ~800 TF/s
    events = [torch.cuda.Event(enable_timing=True) for _ in range(per_call + 1)]
    clocks: list = []
    stop = threading.Event()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    th = threading.Thread(target=nvml_trace, args=(stop, clocks, t0), daemon=True)
    th.start()
    events[0].record()
    for i in range(per_call):
        a, b = sets[i % 2]
        torch.matmul(a, b.t(), out=c)
        events[i + 1].record()
    torch.cuda.synchronize()
    stop.set()
    th.join()
    ms = [events[i].elapsed_time(events[i + 1]) for i in range(per_call)]
    return {"n": n, "call_ms": ms, "clock_trace": clocks}


def windows(ms: list[float], n: int, warm: float) -> list[dict]:
    """Spread of consecutive window medians (TF/s), after ``warm`` seconds of load."""
    t, start = 0.0, 0
    for i, m in enumerate(ms):
        t += m / 1e3
        if t >= warm:
            start = i + 1
            break
    calls = ms[start:]
    out = []
    for w in WINDOWS:
        meds, cur, acc = [], [], 0.0
        for m in calls:
            cur.append(m)
            acc += m / 1e3
            if acc >= w:
                meds.append(2 * n**3 / (statistics.median(cur) * 1e-3) / 1e12)
                cur, acc = [], 0.0
        if len(meds) >= 2:
            mid = statistics.median(meds)
            out.append({"window_s": w, "windows": len(meds), "median_tflops": mid,
                        "range_pct": 100 * (max(meds) - min(meds)) / mid,
                        "stdev_pct": 100 * statistics.stdev(meds) / statistics.mean(meds)})
    return out


def main() -> None:
    import torch  # noqa: F401 — imported here so that --analyze runs without a GPU build

    ap = argparse.ArgumentParser()
    ap.add_argument("--out")
    ap.add_argument("--sizes", default="8192,4096")
    ap.add_argument("--seconds", type=float, default=8.0)
    ap.add_argument("--warm", type=float, default=1.5)
    ap.add_argument("--analyze", metavar="TRACE_JSON")
    args = ap.parse_args()
    if args.analyze:
        analyze(args.analyze, args.warm)
        return
    res = {"device": torch.cuda.get_device_name(), "runs": []}
    for n in (int(s) for s in args.sizes.split(",")):
        time.sleep(3.0)  # each size starts from an idle GPU, as a run's first case does
        r = trace(n, args.seconds)
        r["windows"] = windows(r["call_ms"], n, args.warm)
        # the first seconds, 100 ms at a time: how long the clock takes to settle
        ramp, acc, cur = [], 0.0, []
        for m in r["call_ms"]:
            cur.append(m)
            acc += m / 1e3
            if acc >= 0.1 * (len(ramp) + 1):
                ramp.append(round(2 * n**3 / (statistics.median(cur) * 1e-3) / 1e12, 1))
                cur = []
            if len(ramp) >= 40:
                break
        r["ramp_tflops_per_100ms"] = ramp
        res["runs"].append(r)
        clocks = [c for _, c, _ in r["clock_trace"]]
        print(f"bf16 {n}^3: {len(r['call_ms'])} calls; SM clock {min(clocks, default=0)}-{max(clocks, default=0)} MHz")
        print(f"  TF/s per 100 ms from the start: {ramp}")
        for w in r["windows"]:
            print(f"  windows of {w['window_s']:>5} s after {args.warm} s: {w['windows']:>4} windows, median "
                  f"{w['median_tflops']:.1f} TF/s, range {w['range_pct']:.2f} %, stdev {w['stdev_pct']:.2f} %")
    with open(args.out, "w") as f:
        json.dump(res, f)


if __name__ == "__main__":
    main()
