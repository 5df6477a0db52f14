"""A hand-written copy probe, independent of gpubench's engine (the reference figures' method): torch
``copy_`` of 1 GiB between a host buffer and the GPU, 10 back-to-back copies between CUDA events after 3
warm-up copies, median of 7 repeats; pinned (``pin_memory=True``) and pageable (plain) host memory. With
two GPUs also the peer copy 0→1 through torch.

    python tests/gpu/hand_copy_probe.py --out hand-copy.json
"""

from __future__ import annotations

import argparse
import json
import statistics

import torch

SIZE = 1 << 30
REPS, CALLS = 7, 10


def gbps(dst: torch.Tensor, src: torch.Tensor, calls: int = CALLS) -> float:
    for _ in range(3):
        dst.copy_(src, non_blocking=True)
    torch.cuda.synchronize()
    out = []
    for _ in range(REPS):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        for _ in range(calls):
            dst.copy_(src, non_blocking=True)
        e.record()
        e.synchronize()
        out.append(SIZE * calls / (s.elapsed_time(e) * 1e-3) / 1e9)
    return statistics.median(out)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    dev = torch.randint(0, 256, (SIZE,), dtype=torch.uint8, device="cuda")
    res = {"device": torch.cuda.get_device_name(), "size": SIZE}
    for kind, pin in (("pinned", True), ("pageable", False)):
        host = torch.randint(0, 256, (SIZE,), dtype=torch.uint8).pin_memory() if pin else \
            torch.randint(0, 256, (SIZE,), dtype=torch.uint8)
        res[f"h2d_{kind}_gbps"] = gbps(dev, host, CALLS if pin else 3)
        res[f"d2h_{kind}_gbps"] = gbps(host, dev, CALLS if pin else 3)
        del host
    if torch.cuda.device_count() > 1:
        other = torch.empty(SIZE, dtype=torch.uint8, device="cuda:1")
        res["peer_0to1_torch_gbps"] = gbps(other, dev)
    for k, v in res.items():
        print(f"{k}: {v:.2f}" if isinstance(v, float) else f"{k}: {v}")
    with open(args.out, "w") as f:
        json.dump(res, f, indent=2)


if __name__ == "__main__":
    main()
