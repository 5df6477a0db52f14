"""A hand-written launch-latency probe, independent of gpubench's engine (the reference figures' method):
a tiny torch op (x.add_(1) on one float) enqueued 1000 times between perf_counter reads after a sync; the
same op captured 1000 times in a CUDA graph, replayed between CUDA events (GPU time per kernel) and between
perf_counter reads (host cost of one replay). Median of 61 (eager, in batches of 1000 and of 400, interleaved) or 9 (graph) repeats after warm-up.

    python tests/gpu/hand_launch_probe.py --out hand-launch.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import torch

N = 1000
# Host enqueue cost moves by ±10 % between runs of one script (CPU frequency, which core): more repeats,
# and the spread is kept.
EAGER_REPEATS = 61
SHORT = 400


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    x = torch.zeros(1, device="cuda")
    eager, graph_gpu, replay_host = [], [], []
    # Warm up for half a second, as gpubench's engine does at least: host clocks and caches settle.
    t_end = time.perf_counter() + 0.5
    while time.perf_counter() < t_end:
        for _ in range(100):
            x.add_(1.0)
        torch.cuda.synchronize()
    # Batches of 1000 (the reference's loop) and of 400 (about what gpubench's 2 ms samples hold), interleaved so
    # that both see the same machine state: whether the per-launch cost depends on the batch length.
    short = []
    for _ in range(EAGER_REPEATS):
        for n, into in ((N, eager), (SHORT, short)):
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            for _ in range(n):
                x.add_(1.0)
            into.append((time.perf_counter() - t0) / n * 1e6)
    torch.cuda.synchronize()

    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        x.add_(1.0)
    torch.cuda.current_stream().wait_stream(side)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for _ in range(N):
            x.add_(1.0)
    for _ in range(5):
        g.replay()
    torch.cuda.synchronize()
    for _ in range(9):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        g.replay()
        e.record()
        e.synchronize()
        graph_gpu.append(s.elapsed_time(e) * 1e3 / N)
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        g.replay()
        replay_host.append((time.perf_counter() - t0) * 1e6)
        torch.cuda.synchronize()
    # The same replays behind a stalled stream (as gpubench times graph_replay): two back to back.
    held = []
    for _ in range(9):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda._sleep(int(20e-3 * 2e9))
        s.record()
        g.replay()
        g.replay()
        e.record()
        e.synchronize()
        held.append(s.elapsed_time(e) * 1e3 / (2 * N))
    res = {
        "device": torch.cuda.get_device_name(),
        "eager_host_us": statistics.median(eager),
        "eager_host_us_min": min(eager),
        "eager_host_us_max": max(eager),
        "eager_host_us_400": statistics.median(short),
        "eager_host_us_400_min": min(short),
        "eager_host_us_400_max": max(short),
        "graph_gpu_per_kernel_us": statistics.median(graph_gpu),
        "graph_replay_host_us_1000": statistics.median(replay_host),
        "graph_gpu_per_kernel_us_held": statistics.median(held),
    }
    for k, v in res.items():
        print(f"hand {k}: {v if isinstance(v, str) else f'{v:.3f}'}")
    with open(args.out, "w") as f:
        json.dump(res, f, indent=2)


if __name__ == "__main__":
    main()
