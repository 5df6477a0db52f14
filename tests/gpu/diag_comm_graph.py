"""Why does the comm suite's --graph mode read ~30 µs per 1 MiB all_reduce on 2×H200 when nccl-tests -G reads
~17? Times captured all_reduce loops in several shapes, outside gpubench, with device events:

    torchrun --standalone --nproc-per-node 2 tests/gpu/diag_comm_graph.py [OUT_DIR]

Variants: the same buffer every call (nccl-tests' -G) or one buffer per call (the suite's), K calls per graph
(DIAG_K, comma-separated; default 20,64), capture on a side stream, and an eager loop for reference. With OUT_DIR it also dumps a 2-call graph as DOT
to show which nodes a captured ProcessGroupNCCL call adds.
"""
import os
import sys

import torch
import torch.distributed as dist

NBYTES = 1 << 20


def time_replays(g, calls, reps=50):
    for _ in range(5):
        g.replay()
    torch.cuda.synchronize()
    dist.barrier()
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    a.record()
    for _ in range(reps):
        g.replay()
    b.record()
    b.synchronize()
    return a.elapsed_time(b) * 1e3 / (reps * calls)


def capture(bufs, k, same, debug=None):
    for x in bufs:
        dist.all_reduce(x)
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    if debug:
        g.enable_debug_mode()
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        with torch.cuda.graph(g, stream=side):
            for i in range(k):
                dist.all_reduce(bufs[0] if same else bufs[i])
    torch.cuda.current_stream().wait_stream(side)
    torch.cuda.synchronize()
    if debug:
        g.debug_dump(debug)
    return g


def eager(x, calls=640):
    for _ in range(20):
        dist.all_reduce(x)
    torch.cuda.synchronize()
    dist.barrier()
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    a.record()
    for _ in range(calls):
        dist.all_reduce(x)
    b.record()
    b.synchronize()
    return a.elapsed_time(b) * 1e3 / calls


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else None
    rank = int(os.environ["RANK"])
    torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
    dist.init_process_group("nccl", device_id=torch.device("cuda", int(os.environ["LOCAL_RANK"])))
    n = NBYTES // 4
    rows = []
    x = torch.randn(n, device="cuda")
    rows.append(("eager same buffer", 640, eager(x)))
    ks = [int(k) for k in os.environ.get("DIAG_K", "20,64").split(",")]
    for k in ks:
        for same in (True, False):
            bufs = [torch.randn(n, device="cuda") for _ in range(1 if same else k)]
            g = capture(bufs, k, same)
            rows.append((f"graph K={k} {'same buffer' if same else 'buffer per call'}", k, time_replays(g, k)))
            del g
    if out:
        bufs = [torch.randn(n, device="cuda") for _ in range(2)]
        capture(bufs, 2, False, debug=os.path.join(out, f"graph2-rank{rank}.dot"))
    if rank == 0:
        tag = os.environ.get("DIAG_TAG", "")
        for name, k, us in rows:
            print(f"{tag:24s} {name:32s} {us:8.2f} us/call", flush=True)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
