"""Where torch.distributed's point-to-point call loses to nccl-tests' sendrecv below 16 MiB (issue 45).

Run under torchrun, one process per GPU (every process with NVLink multicast off, tests/gpu/setup.sh):

    torchrun --nproc-per-node N tests/gpu/p2p_isolate.py [--sizes 1M,4M,16M,256M] [--alloc torch]
        [--collective sendrecv|alltoall] [--out FILE.tsv]

Each rank sends to rank + 1 and receives from rank - 1 (nccl-tests' sendrecv), the same bytes, four ways (with
``--collective alltoall``: a chunk to and from every rank, torch's ``all_to_all_single`` against NCCL's own sends
and receives to each peer in one group, which is what NCCL 2.28 makes of ``ncclAlltoAll``):

- ``torch-graph``: ``dist.batch_isend_irecv`` and ``work.wait()`` captured in a CUDA graph of 20 calls, as the comm
  suite times it;
- ``nccl-graph``: NCCL's own ``ncclGroupStart; ncclSend; ncclRecv; ncclGroupEnd`` (through CuPy's bindings, on a
  communicator of its own built from the same library torch loaded) on the same torch buffers, captured on the
  capturing stream itself: no side stream, no events, no torch bookkeeping;
- ``torch-eager`` and ``nccl-eager``: the same calls, 20 at a time, not captured.

If nccl-graph reads what nccl-tests reads and torch-graph does not, the cost is torch.distributed's own (its
stream hand-offs and bookkeeping around the NCCL calls); if nccl-graph reads as torch-graph, it is in the buffers or
the communicator. ``--alloc`` says where the two buffers come from: ``torch`` (its caching allocator), ``nccl``
(each its own ``ncclMemAlloc``, as nccl-tests allocates) or ``nccl-shared`` (both in one chunk of the comm suite's
pool, gpubench/ranks/ncclmem.py, as a case's buffers share one); with NCCL's buffers the ranks stalled in their
teardown after the last size was written in 4 runs of 4 (4 x H100, 2026-11-28): on a GPU a run that wrote every size
now leaves without it (not yet run there), and run_p2p.sh bounds each run.
Each figure: per-call µs, the median over samples of the slowest rank's time (a sample: the ranks lined up by a
barrier, then 20 calls between two events). ``--device cpu`` runs the torch ways eagerly over gloo, to
try this script's plumbing on a machine without GPUs.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

import torch
import torch.distributed as dist

from gpubench.suites.comm.table import busbw_factor  # nccl-tests' factors, as the suite reads them

CALLS = 20
SAMPLES = 30
WARMUP = 5


def _size(text: str) -> int:
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    text = text.strip().upper().removesuffix("IB").removesuffix("B")
    return int(float(text[:-1]) * units[text[-1]]) if text and text[-1] in units else int(text)


def torch_call(send, recv, rank, world):
    ops = [dist.P2POp(dist.isend, send, (rank + 1) % world), dist.P2POp(dist.irecv, recv, (rank - 1) % world)]
    for work in dist.batch_isend_irecv(ops):
        work.wait()


def torch_alltoall(send, recv, rank, world):
    dist.all_to_all_single(recv, send)


# Per collective: torch's call, and the (peer, byte offset of the chunk, chunk bytes) pairs NCCL's own calls send to
# and receive from — what NCCL 2.28 splits ncclAlltoAll into (per-peer P2P tasks), and sendrecv's one pair.
TORCH = {"sendrecv": torch_call, "alltoall": torch_alltoall}


def peers(collective, nbytes, rank, world):
    """[(send to, recv from, offset, bytes)] of one call."""
    if collective == "sendrecv":
        return [((rank + 1) % world, (rank - 1) % world, 0, nbytes)]
    chunk = nbytes // world
    return [(p, p, p * chunk, chunk) for p in range(world)]


def nccl_comm(rank, world):
    """A communicator of NCCL's own (through CuPy), one for the whole script: a second one made after the first
    was destroyed, with graphs of the first still alive, hung on 4 x H100 (2026-11-27)."""
    from cupy.cuda import nccl

    uid = [nccl.get_unique_id() if rank == 0 else None]
    dist.broadcast_object_list(uid, src=0)
    return nccl.NcclCommunicator(world, uid[0], rank)


def nccl_caller(comm, send, recv, rank, world, collective="sendrecv"):
    """NCCL's own sends and receives of ``collective`` in one group on ``comm``, on whatever stream is current."""
    from cupy.cuda import nccl

    pairs = peers(collective, send.numel() * send.element_size(), rank, world)

    def call(*_):
        stream = torch.cuda.current_stream().cuda_stream
        nccl.groupStart()
        for to, source, offset, count in pairs:
            comm.send(send.data_ptr() + offset, count, nccl.NCCL_INT8, to, stream)
            comm.recv(recv.data_ptr() + offset, count, nccl.NCCL_INT8, source, stream)
        nccl.groupEnd()

    return call


def buffers(alloc: str, n: int, device: str):
    """(send, recv) of ``n`` fp32 each: send random, recv zeros, from ``alloc``."""
    if alloc == "torch" or device != "cuda":
        return torch.rand(n, device=device), torch.zeros(n, device=device)
    from gpubench.ranks import ncclmem

    lib = ncclmem.library()
    shared = ncclmem.Pool(lib, None)
    pools = [shared, shared] if alloc == "nccl-shared" else [ncclmem.Pool(lib, None), ncclmem.Pool(lib, None)]
    send, recv = (pool.empty(n, torch.float32, device) for pool in pools)
    send.copy_(torch.rand(n, device=device))
    recv.zero_()
    return send, recv


def timed(run, device: str, world: int) -> float:
    """Per-call µs: the median over samples of the slowest rank's time for CALLS calls (``run`` makes them)."""
    gpu = device == "cuda"
    per_call = []
    for i in range(WARMUP + SAMPLES):
        dist.barrier()
        if gpu:
            torch.cuda.synchronize()
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            run()
            end.record()
            end.synchronize()
            seconds = start.elapsed_time(end) / 1e3
        else:
            t0 = time.perf_counter()
            run()
            seconds = time.perf_counter() - t0
        slowest = torch.tensor([seconds], dtype=torch.float64, device=device if gpu else "cpu")
        dist.all_reduce(slowest, op=dist.ReduceOp.MAX)
        if i >= WARMUP:
            per_call.append(float(slowest) / CALLS * 1e6)
    return statistics.median(per_call)


def graphed(call):
    """``call`` CALLS times in one CUDA graph: a function that replays it."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # NCCL's lazy set-up outside the capture
        for _ in range(3):
            call()
    torch.cuda.current_stream().wait_stream(side)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(CALLS):
            call()
    torch.cuda.synchronize()
    return graph.replay


def eager(call):
    def run():
        for _ in range(CALLS):
            call()
    return run


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="1M,4M,16M,256M", help="bytes each rank sends (default 1M,4M,16M,256M)")
    ap.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    ap.add_argument("--alloc", choices=("torch", "nccl", "nccl-shared"), default="torch",
                    help="where the buffers come from (default torch)")
    ap.add_argument("--collective", choices=sorted(TORCH), default="sendrecv",
                    help="sendrecv (to rank + 1, from rank - 1; the default) or alltoall")
    ap.add_argument("--out", default=None, help="also write the table here (TSV), from rank 0")
    args = ap.parse_args(argv)
    rank, world, local = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"]), int(os.environ["LOCAL_RANK"])
    gpu = args.device == "cuda"
    if gpu:
        torch.cuda.set_device(local)
        dist.init_process_group("nccl", device_id=torch.device("cuda", local))
    else:
        dist.init_process_group("gloo")
    lines = ["bytes\tway\tus_per_call\tbusbw_GBps"]
    comm = nccl_comm(rank, world) if gpu else None
    alloc = args.alloc if gpu else "torch"  # gloo's buffers are the host's
    try:
        for size in [_size(s) for s in args.sizes.split(",")]:
            n = size // 4
            send, recv = buffers(alloc, n, args.device)
            call_torch = TORCH[args.collective]
            ways = {"torch-eager": eager(lambda: call_torch(send, recv, rank, world))}
            if gpu:
                ways["torch-graph"] = graphed(lambda: call_torch(send, recv, rank, world))
                call = nccl_caller(comm, send, recv, rank, world, args.collective)
                ways["nccl-eager"] = eager(call)
                ways["nccl-graph"] = graphed(call)
            for way, run in ways.items():
                recv.zero_()
                us = timed(run, args.device, world)
                # The check: what arrived is what the peers sent (each rank's send is its own random draw), each
                # chunk fetched from its sender by one point-to-point pair per peer, eagerly.
                want = torch.empty_like(send)
                ops = []
                for to, source, offset, count in peers(args.collective, n * 4, rank, world):
                    part = slice(offset // 4, (offset + count) // 4)
                    if to == rank:  # its own chunk stays (gloo sends nothing to itself)
                        want[part] = send[part]
                        continue
                    ops += [dist.P2POp(dist.isend, send[part], to), dist.P2POp(dist.irecv, want[part], source)]
                for work in dist.batch_isend_irecv(ops) if ops else []:
                    work.wait()
                if not torch.equal(recv, want):
                    raise SystemExit(f"rank {rank}: {way} at {size} bytes received other bytes than its peers sent")
                busbw = size / us / 1e3 * busbw_factor(args.collective, world)
                lines.append(f"{size}\t{alloc}:{args.collective}:{way}\t{us:.2f}\t{busbw:.1f}")
                if rank == 0:
                    print(lines[-1], flush=True)
                    if args.out:  # as it comes: on 4 x H100 (2026-11-27) the teardown below stalled once
                        with open(args.out, "w") as f:
                            f.write("\n".join(lines) + "\n")
            ways.clear()  # this size's graphs go before the next size's are captured
            if gpu:
                torch.cuda.synchronize()
    except BaseException:
        teardown(comm)
        raise
    if gpu:
        # Every size written: out without the teardown, which stalled in 4 runs of 4 with NCCL's buffers (4 x H100,
        # 2026-11-28); the ranks line up first, so that none leaves while a peer still sends to it.
        dist.barrier()
        torch.cuda.synchronize()
        sys.stdout.flush()
        os._exit(0)
    teardown(comm)
    return 0


def teardown(comm):
    if comm is not None:
        torch.cuda.synchronize()
        comm.destroy()
    dist.destroy_process_group()


if __name__ == "__main__":
    sys.exit(main())
