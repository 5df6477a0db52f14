"""Why does the comm suite's --graph mode read ~30 µs per 1 MiB all_reduce on 2×H200 when nccl-tests -G reads
~17? Times captured all_reduce loops in several shapes, outside gpubench, with device events:

    torchrun --standalone --nproc-per-node 2 tests/gpu/diag_comm_graph.py [OUT_DIR]

Variants: the same buffer every call (nccl-tests' -G) or one buffer per call (the suite's), K calls per graph
(DIAG_K, comma-separated; default 20,64), capture on a side stream, through async_op=True, and straight
through NCCL with CuPy's binding (no torch between), and an eager loop for reference. With OUT_DIR it also dumps a 2-call graph as DOT
to show which nodes a captured ProcessGroupNCCL call adds.
"""
import os
import sys

import torch
import torch.distributed as dist

NBYTES = 1 << 20


def time_replays(g, calls, reps=50, stream=None):
    if stream is not None:  # the same replays, launched into a non-blocking stream instead of the default one
        with torch.cuda.stream(stream):
            return time_replays(g, calls, reps)
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


def capture_async(x, k):
    """The same K calls through async_op=True and an explicit wait (another stream hand-off in torch)."""
    dist.all_reduce(x)
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for _ in range(k):
            dist.all_reduce(x, async_op=True).wait()
    torch.cuda.synchronize()
    return g


def nccl_direct(n, k, rank, world, local_rank):
    """K all_reduces captured straight through NCCL (CuPy's binding, no torch in between), as nccl-tests
    does: what torch's ProcessGroupNCCL adds per captured call is the difference. None without CuPy NCCL."""
    try:
        import cupy as cp
        from cupy.cuda import nccl
    except Exception:  # noqa: BLE001
        return None
    if not getattr(nccl, "available", True):
        return None
    uid = [nccl.get_unique_id() if rank == 0 else None]
    dist.broadcast_object_list(uid, src=0)
    with cp.cuda.Device(local_rank):
        comm = nccl.NcclCommunicator(world, uid[0], rank)
        x = cp.random.rand(n, dtype=cp.float32)
        s = cp.cuda.Stream(non_blocking=True)

        def call():
            comm.allReduce(x.data.ptr, x.data.ptr, n, nccl.NCCL_FLOAT32, nccl.NCCL_SUM, s.ptr)

        call()
        s.synchronize()
        s.begin_capture()
        for _ in range(k):
            call()
        g = s.end_capture()
        for _ in range(5):
            g.launch(s)
        s.synchronize()
        dist.barrier()
        a, b = cp.cuda.Event(), cp.cuda.Event()
        a.record(s)
        for _ in range(50):
            g.launch(s)
        b.record(s)
        b.synchronize()
        return cp.cuda.get_elapsed_time(a, b) * 1e3 / (50 * k)


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
            if same:
                rows.append((f"graph K={k} same buffer, side stream", k, time_replays(g, k, stream=torch.cuda.Stream())))
            del g
    for k in ks:
        x = torch.randn(n, device="cuda")
        rows.append((f"graph K={k} async_op+wait", k, time_replays(capture_async(x, k), k)))
        us = nccl_direct(n, k, rank, int(os.environ["WORLD_SIZE"]), int(os.environ["LOCAL_RANK"]))
        if us is not None:
            rows.append((f"graph K={k} NCCL direct (CuPy)", k, us))
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
