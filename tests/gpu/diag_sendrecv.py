"""Where does the comm suite's sendrecv lose ~3 % to nccl-tests at 64 MiB on 2×H200 (docs/measurements.md,
2026-11-23: 263 against 272 GB/s in three rounds of four)? Times sendrecv several ways with device events,
the variants taking turns in rounds so that a drift of the machine falls on all of them:

    torchrun --standalone --nproc-per-node 2 tests/gpu/diag_sendrecv.py   # one process per GPU
    python3 tests/gpu/diag_sendrecv.py --single                           # one process driving both GPUs

The candidates it separates:
- The process layout. nccl-tests built without MPI runs as one process driving every GPU (``-g 2``); the comm
  suite, torchrun and training jobs run one process per GPU. NCCL's documentation of NCCL_P2P_DIRECT_DISABLE
  says that within one process NCCL accesses the peers' user buffers directly through P2P. So the same NCCL
  calls (CuPy's binding, no torch in between) are timed in one process and in two; run_diag_sendrecv.sh also
  runs the one-process form and nccl-tests with NCCL_P2P_DIRECT_DISABLE=1.
- torch's path: batch_isend_irecv against those NCCL calls made straight.
- The suite's method: two rotating buffer sets against one (nccl-tests reuses one), 78 calls per sample (the
  suite's count at 64 MiB) against 20 (nccl-tests -n 20), the default stream against a non-blocking one.
An all_gather of the same size is the control: the suite matched nccl-tests on it (0.99-1.03).

Prints one line per variant and size: the median and best µs per call over all samples (the slowest GPU's time
of each sample), and bytes / time in GB/s (algbw; for sendrecv also its busbw, factor 1). DIAG_SIZES (default 64M,256M), DIAG_ROUNDS
(default 3) and DIAG_SAMPLES (per variant per round, default 5) shape the run; DIAG_TAG labels the lines.
"""
import os
import statistics
import sys

SUITE_CALLS = 78  # the comm suite's calls per sample for sendrecv at 64 MiB on 2×H200 (its run's `inner`)
NT_CALLS = 20  # nccl-tests -n 20
MAX_SETS = 2  # the suite rotates two sets at 64 MiB on an H200 (its run's `sets`)


def parse_size(s: str) -> int:
    mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    return int(s[:-1]) * mult[s[-1].upper()] if s[-1].upper() in mult else int(s)


def cupy_nccl():
    import cupy as cp
    from cupy.cuda import nccl
    return cp, nccl


def cupy_values(cp, seed: int, n: int):
    return cp.random.default_rng(seed).standard_normal(n, dtype=cp.float32)  # never zeros


class CupyRank:
    """One GPU's side of the straight NCCL calls: its communicator, stream and buffer sets."""

    def __init__(self, cp, nccl, comm, device: int, rank: int, world: int):
        self.cp, self.nccl, self.comm, self.device, self.rank, self.world = cp, nccl, comm, device, rank, world
        with cp.cuda.Device(device):
            self.stream = cp.cuda.Stream(non_blocking=True)  # nccl-tests' streams are non-blocking
            self.token = cp.ones(1, dtype=cp.float32)
        self.sets = {}

    def buffers(self, n: int, nsets: int):
        """The first ``nsets`` of this size's MAX_SETS sets (made once per size, so variants don't reallocate)."""
        cp = self.cp
        if n not in self.sets:
            self.sets.clear()
            with cp.cuda.Device(self.device):
                cp.get_default_memory_pool().free_all_blocks()
                self.sets[n] = [(cupy_values(cp, 1000 * s + self.rank, n), cp.empty(n, dtype=cp.float32))
                                for s in range(MAX_SETS)]
        return self.sets[n][:nsets]

    def sendrecv(self, send, recv):
        nccl = self.nccl
        peer_to, peer_from = (self.rank + 1) % self.world, (self.rank - 1) % self.world
        self.comm.send(send.data.ptr, send.size, nccl.NCCL_FLOAT32, peer_to, self.stream.ptr)
        self.comm.recv(recv.data.ptr, recv.size, nccl.NCCL_FLOAT32, peer_from, self.stream.ptr)

    def all_gather(self, send, recv):
        n = send.size // self.world
        self.comm.allGather(send.data.ptr, recv.data.ptr, n, self.nccl.NCCL_FLOAT32, self.stream.ptr)

    def line_up(self):
        self.comm.allReduce(self.token.data.ptr, self.token.data.ptr, 1, self.nccl.NCCL_FLOAT32,
                            self.nccl.NCCL_SUM, self.stream.ptr)

    def check(self, send_set: int, recv, n: int) -> bool:
        cp = self.cp
        with cp.cuda.Device(self.device):
            self.stream.synchronize()
            want = cupy_values(cp, 1000 * send_set + (self.rank - 1) % self.world, n)
            return bool(cp.array_equal(recv, want))


def time_cupy(ranks, what: str, n: int, nsets: int, calls: int, inplace=False):
    """Per-call µs of one sample over ``ranks`` (all of this process's GPUs): the slowest GPU's time."""
    cp, nccl = ranks[0].cp, ranks[0].nccl
    sets = [r.buffers(n, nsets) for r in ranks]
    events = []
    nccl.groupStart()  # one process driving several GPUs must group their calls (nccl-tests does the same)
    for r in ranks:
        with cp.cuda.Device(r.device):
            r.line_up()
    nccl.groupEnd()
    for r in ranks:
        with cp.cuda.Device(r.device):
            a, b = cp.cuda.Event(), cp.cuda.Event()
            a.record(r.stream)
            events.append((a, b))
    for i in range(calls):
        nccl.groupStart()
        for r, s in zip(ranks, sets):
            send, recv = s[i % nsets]
            with cp.cuda.Device(r.device):  # as nccl-tests sets each GPU before its calls
                if what == "sendrecv":
                    r.sendrecv(recv if inplace else send, recv)
                else:
                    r.all_gather(send, recv)
        nccl.groupEnd()
    for r, (a, b) in zip(ranks, events):
        with cp.cuda.Device(r.device):
            b.record(r.stream)
    times = []
    for r, (a, b) in zip(ranks, events):
        with cp.cuda.Device(r.device):
            b.synchronize()
            times.append(cp.cuda.get_elapsed_time(a, b) * 1e3 / calls)
    return max(times)


def cupy_variants(ranks):
    """(name, fn(n) -> µs per call of one sample) for the straight NCCL calls."""
    return [
        ("nccl straight, 1 set, 20 calls", lambda n: time_cupy(ranks, "sendrecv", n, 1, NT_CALLS)),
        ("nccl straight, 1 set, 78 calls", lambda n: time_cupy(ranks, "sendrecv", n, 1, SUITE_CALLS)),
        ("nccl straight, 2 sets, 78 calls", lambda n: time_cupy(ranks, "sendrecv", n, 2, SUITE_CALLS)),
        ("nccl straight, in place, 20 calls", lambda n: time_cupy(ranks, "sendrecv", n, 1, NT_CALLS, True)),
        ("control: nccl all_gather, 1 set, 20", lambda n: time_cupy(ranks, "all_gather", n, 1, NT_CALLS)),
    ]


def check_cupy(ranks, n: int) -> bool:
    ok = True
    time_cupy(ranks, "sendrecv", n, 1, 1)
    for r in ranks:
        ok &= r.check(0, r.buffers(n, 1)[0][1], n)
    return ok


def run_rounds(variants, sizes, rounds, samples, reduce_max=None):
    """{(variant, size): [µs per call of each sample]}, the variants taking turns within each round."""
    out = {}
    for n_bytes in sizes:
        n = n_bytes // 4
        for name, fn in variants:  # one untimed sample each: NCCL connects lazily, buffers get made
            fn(n)
        for _ in range(rounds):
            for name, fn in variants:
                for _ in range(samples):
                    us = fn(n)
                    out.setdefault((name, n_bytes), []).append(reduce_max(us) if reduce_max else us)
    return out


def report(out, tag):
    for (name, n_bytes), xs in out.items():
        med, best = statistics.median(xs), min(xs)
        print(f"{tag:14s} {name:40s} {n_bytes / 2**20:6g} MiB  median {med:9.2f} us ({n_bytes / med / 1e3:6.1f} GB/s)"
              f"  best {best:9.2f} us ({n_bytes / best / 1e3:6.1f} GB/s)  n={len(xs)}", flush=True)


def clocks():
    try:
        import pynvml
        pynvml.nvmlInit()
        parts = []
        for i in range(pynvml.nvmlDeviceGetCount()):
            h = pynvml.nvmlDeviceGetHandleByIndex(i)
            parts.append(f"gpu{i} {pynvml.nvmlDeviceGetClockInfo(h, pynvml.NVML_CLOCK_SM)} MHz "
                         f"{pynvml.nvmlDeviceGetPowerUsage(h) / 1e3:.0f} W")
        return "; ".join(parts)
    except Exception as e:  # noqa: BLE001 — clocks are context, not the measurement
        return f"(no NVML: {e})"


def loaded_nccl() -> str:
    """Which libnccl this process mapped: torch's wheel and CuPy must time the same library."""
    try:
        with open("/proc/self/maps") as f:
            return ",".join(sorted({line.split()[-1] for line in f if "libnccl" in line})) or "none"
    except OSError:
        return "unknown"


def settings():
    sizes = [parse_size(s) for s in os.environ.get("DIAG_SIZES", "64M,256M").split(",")]
    return sizes, int(os.environ.get("DIAG_ROUNDS", "3")), int(os.environ.get("DIAG_SAMPLES", "5"))


def single():
    """One process, both GPUs, as nccl-tests -g 2 runs: straight NCCL calls only (torch needs a process each)."""
    import torch  # noqa: F401 — maps torch's libnccl first, so CuPy's dlopen by soname gets the same library
    cp, nccl = cupy_nccl()
    devices = list(range(cp.cuda.runtime.getDeviceCount()))
    comms = nccl.NcclCommunicator.initAll(devices)
    ranks = [CupyRank(cp, nccl, c, d, d, len(devices)) for c, d in zip(comms, devices)]
    sizes, rounds, samples = settings()
    tag = os.environ.get("DIAG_TAG", "one process")
    print(f"{tag}: NCCL {nccl.get_version()}, {len(devices)} GPUs, P2P_DIRECT_DISABLE="
          f"{os.environ.get('NCCL_P2P_DIRECT_DISABLE', '-')}; check {check_cupy(ranks, sizes[0] // 4)}; "
          f"{loaded_nccl()}", flush=True)
    out = run_rounds(cupy_variants(ranks), sizes, rounds, samples)
    print(f"{tag}: clocks after the runs: {clocks()}", flush=True)
    report(out, tag)


def per_process():
    import torch
    import torch.distributed as dist

    rank, world, local = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"]), int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(local)
    device = torch.device("cuda", local)
    dist.init_process_group("nccl", device_id=device)
    token = torch.ones(1, device=device)
    tsets = {}

    def torch_sets(n, nsets):
        if n not in tsets:
            tsets.clear()
            torch.cuda.empty_cache()
            g = torch.Generator(device=device)
            tsets[n] = []
            for s in range(MAX_SETS):
                g.manual_seed(1000 * s + rank)
                tsets[n].append((torch.randn(n, generator=g, device=device), torch.empty(n, device=device)))
        return tsets[n][:nsets]

    def torch_sendrecv(send, recv):  # the comm suite's call (suites/comm.py _sendrecv)
        ops = [dist.P2POp(dist.isend, send, (rank + 1) % world), dist.P2POp(dist.irecv, recv, (rank - 1) % world)]
        for w in dist.batch_isend_irecv(ops):
            w.wait()

    def time_torch(n, nsets, calls, stream=None, what="sendrecv"):
        if stream is not None:
            with torch.cuda.stream(stream):
                return time_torch(n, nsets, calls, None, what)
        sets = torch_sets(n, nsets)
        dist.all_reduce(token)  # the suite's line-up before each batch
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        for i in range(calls):
            send, recv = sets[i % nsets]
            if what == "sendrecv":
                torch_sendrecv(send, recv)
            else:
                dist.all_gather_into_tensor(recv, send[: n // world])
        b.record()
        b.synchronize()
        return a.elapsed_time(b) * 1e3 / calls

    side = torch.cuda.Stream()
    variants = [
        ("torch batch, 2 sets, 78 calls (suite)", lambda n: time_torch(n, 2, SUITE_CALLS)),
        ("torch batch, 1 set, 78 calls", lambda n: time_torch(n, 1, SUITE_CALLS)),
        ("torch batch, 1 set, 20 calls", lambda n: time_torch(n, 1, NT_CALLS)),
        ("torch batch, 1 set, 78, side stream", lambda n: time_torch(n, 1, SUITE_CALLS, side)),
        ("control: torch all_gather, 1 set, 78", lambda n: time_torch(n, 1, SUITE_CALLS, what="all_gather")),
    ]
    cupy_ok = None
    try:
        cp, nccl = cupy_nccl()
        uid = [nccl.get_unique_id() if rank == 0 else None]
        dist.broadcast_object_list(uid, src=0)
        with cp.cuda.Device(local):
            comm = nccl.NcclCommunicator(world, uid[0], rank)
        ranks = [CupyRank(cp, nccl, comm, local, rank, world)]
        variants += cupy_variants(ranks)
        cupy_ok = check_cupy(ranks, settings()[0][0] // 4)
        nccl_version = nccl.get_version()
    except Exception as e:  # noqa: BLE001 — without CuPy's NCCL the torch variants still answer
        nccl_version = f"none ({e})"
    sizes, rounds, samples = settings()
    # The torch path's own check: rank r receives rank r-1's set 0.
    send, recv = torch_sets(sizes[0] // 4, 1)[0]
    torch_sendrecv(send, recv)
    g = torch.Generator(device=device)
    g.manual_seed((rank - 1) % world)
    torch_ok = bool(torch.equal(recv, torch.randn(recv.numel(), generator=g, device=device)))

    def slowest(us):  # every rank takes every sample; the slowest rank's time is the sample
        t = torch.tensor([us], device=device, dtype=torch.float64)
        dist.all_reduce(t, op=dist.ReduceOp.MAX)
        return float(t.item())

    out = run_rounds(variants, sizes, rounds, samples, reduce_max=slowest)
    if rank == 0:
        tag = os.environ.get("DIAG_TAG", "per process")
        print(f"{tag}: torch NCCL {torch.cuda.nccl.version()}, CuPy NCCL {nccl_version}, {world} processes; "
              f"check torch {torch_ok} nccl {cupy_ok}; {loaded_nccl()}; clocks after the runs: {clocks()}", flush=True)
        report(out, tag)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    single() if "--single" in sys.argv[1:] else per_process()
