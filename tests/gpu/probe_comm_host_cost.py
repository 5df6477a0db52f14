"""What one eager collective call costs the host, through torch.distributed and beside it (one GPU, NCCL).

In a world of one NCCL does next to nothing for an in-place all_reduce (nccl-tests times it at ~1 µs), so
back-to-back calls between CUDA events time the host's cost of issuing one. Where that cost exceeds the GPU's
time per call, an eager figure is the host's rate, not the bus's. Three ways of issuing the same call:
``dist.all_reduce`` (the comm suite's), the process group's own method (``pg.allreduce``, no Python wrapper),
and ``async_op=True`` (no wait on the returned work). Also all_gather 1 MiB out of place (a real copy).

    torchrun --nproc-per-node 1 tests/gpu/probe_comm_host_cost.py --out host-cost.json
"""

from __future__ import annotations

import argparse
import json
import os
import statistics

import torch
import torch.distributed as dist

N = 200
REPEATS = 15


def per_call_us(fn, n: int = N, sets: list | None = None) -> float:
    """Median over REPEATS batches of ``n`` back-to-back calls, ``fn(set)`` cycling through ``sets``."""
    sets = sets if sets is not None else [None]
    for i in range(20):
        fn(sets[i % len(sets)])
    torch.cuda.synchronize()
    times = []
    turn = 0
    for _ in range(REPEATS):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        for i in range(turn, turn + n):
            fn(sets[i % len(sets)])
        turn += n
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b) * 1e3 / n)
    return statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", 0)))
    dist.init_process_group("nccl", device_id=torch.device("cuda", torch.cuda.current_device()))
    pg = dist.group.WORLD
    x = torch.randn(16 << 20, device="cuda")  # 64 MiB
    small = torch.randn(256 << 10, device="cuda")  # 1 MiB
    gathered = torch.empty(small.numel() * dist.get_world_size(), device="cuda")
    opts = dist.AllreduceOptions()
    opts.reduceOp = dist.ReduceOp.SUM
    dist.all_reduce(x)  # NCCL connects lazily
    ag = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor
    import sys

    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", ".."))
    from suites import comm  # the suite's own call, as its timed loop makes it

    ring = [torch.randn(256 << 10, device="cuda") for _ in range(64)]  # 64 sets of 1 MiB, as the suite rotates
    out = {
        "world_size": dist.get_world_size(),
        "torch": torch.__version__,
        "nccl": ".".join(map(str, torch.cuda.nccl.version())),
        "device": torch.cuda.get_device_name(),
        "all_reduce_64MiB_inplace_us": {
            "dist.all_reduce": per_call_us(lambda _: dist.all_reduce(x)),
            "dist.all_reduce(async_op=True)": per_call_us(lambda _: dist.all_reduce(x, async_op=True)),
            "pg.allreduce": per_call_us(lambda _: pg.allreduce([x], opts)),
            "suite _all_reduce": per_call_us(lambda _: comm._all_reduce(dist, x, x, "sum", pg, 0, 1)),
            "dist.all_reduce, batches of 700": per_call_us(lambda _: dist.all_reduce(x), n=700),
        },
        "all_reduce_1MiB_inplace_us": {
            "dist.all_reduce, one buffer": per_call_us(lambda _: dist.all_reduce(small)),
            "dist.all_reduce, 64 buffers in turn": per_call_us(lambda t: dist.all_reduce(t), sets=ring),
            "suite _all_reduce, 64 buffers, batches of 700": per_call_us(
                lambda t: comm._all_reduce(dist, t, t, "sum", pg, 0, 1), n=700, sets=ring),
        },
        "all_gather_1MiB_out_of_place_us": {
            "dist.all_gather_into_tensor": per_call_us(lambda _: ag(gathered, small)),
            "pg._allgather_base": per_call_us(lambda _: pg._allgather_base(gathered, small)),
        },
    }
    if dist.get_rank() == 0:
        print(json.dumps(out, indent=1))
        with open(args.out, "w") as f:
            json.dump(out, f, indent=1)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
