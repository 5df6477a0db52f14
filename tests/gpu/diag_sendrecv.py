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
- Placement: across the 2026-11-23 runs (results/reference/h200x2/comm-20261123*) both tools read one of two
  speeds per process: the suite 254.5-255.4 µs in four runs of six, 247.7 in one and 250.2 (between the two:
  it alternates two buffer sets) in one; nccl-tests out of place 245.4-247.0 in five of six, 254.3 in one. As if
  where the buffers (or NCCL's own) landed decided, and nccl-tests' buffers landed well more often. Draws within
  one process: fresh buffer pairs (each new memory), the front of a 4 GiB pair (nccl-tests allocates its
  largest size and uses the front), fresh communicators; one median per draw, sorted: two speeds show as two
  clusters.
An all_gather of the same size is the control: the suite matched nccl-tests on it (0.99-1.03).

Prints one line per variant and size: the median and best µs per call over all samples (the slowest GPU's time
of each sample), and bytes / time in GB/s (algbw; for sendrecv also its busbw, factor 1); then the draws.
DIAG_SIZES (default 64M,256M; the draws use the first), DIAG_ROUNDS (default 3), DIAG_SAMPLES (per variant per
round and per draw, default 5) and DIAG_BIG (bytes of the big pair, default 4 GiB) shape the run; DIAG_TAG labels
the lines.
"""
import os
import statistics
import sys

from gpubench.units import format_bytes, parse_size, parse_size_list

SUITE_CALLS = 78  # the comm suite's calls per sample for sendrecv at 64 MiB on 2×H200 (its run's `inner`)
NT_CALLS = 20  # nccl-tests -n 20
MAX_SETS = 2  # the suite rotates two sets at 64 MiB on an H200 (its run's `sets`)
# Draws of fresh buffers and communicators within one process: does placement decide the speed?
DRAWS, COMM_DRAWS = 12, 4
BIG = parse_size(os.environ.get("DIAG_BIG", "4G"))  # nccl-tests -e 4G allocates its buffers at the largest size


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


def time_cupy(ranks, what: str, n: int, nsets: int, calls: int, inplace=False, sets=None):
    """Per-call µs of one sample over ``ranks`` (all of this process's GPUs): the slowest GPU's time. ``sets``,
    one list of (send, recv) per rank, replaces the ranks' own buffer sets."""
    cp, nccl = ranks[0].cp, ranks[0].nccl
    sets = sets or [r.buffers(n, nsets) for r in ranks]
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


def draw_medians(time_one, draws: int, reduce) -> list:
    """For each of ``draws`` fresh draws (``time_one(i)`` prepares draw i and returns a sample function and a
    label, e.g. its buffers' addresses): one untimed sample, then (median of DIAG_SAMPLES samples, each the
    slowest rank's through ``reduce``; label)."""
    samples = settings()[2]
    out = []
    for i in range(draws):
        sample, label = time_one(i)
        sample()
        out.append((statistics.median(reduce(sample()) for _ in range(samples)), label))
    return out


def addresses(pairs) -> str:
    """send/recv addresses of this process's first GPU, in MiB modulo 1 GiB: enough to see an alignment pattern."""
    return "/".join(f"{(p % (1 << 30)) >> 20}" for p in pairs)


def cupy_draws(ranks, n: int, new_comms, reduce) -> dict:
    """Does a placement decide the speed? Medians over fresh buffer pairs (kept alive, so each is new memory),
    over the first n elements of a 4 GiB pair (nccl-tests allocates its largest size and uses the front), and
    over fresh communicators on one buffer pair."""
    cp, nccl = ranks[0].cp, ranks[0].nccl
    kept, out = [], {}

    def fresh_pair(i, total=n):
        pairs = []
        for r in ranks:
            with cp.cuda.Device(r.device):
                pairs.append([(cupy_values(cp, 5000 + 10 * i + r.rank, total)[:n],
                               cp.empty(total, dtype=cp.float32)[:n])])
        kept.append(pairs)
        label = addresses((pairs[0][0][0].data.ptr, pairs[0][0][1].data.ptr))
        return (lambda: time_cupy(ranks, "sendrecv", n, 1, NT_CALLS, sets=pairs)), label

    out["nccl straight, fresh buffer pair"] = draw_medians(fresh_pair, DRAWS, reduce)
    out["nccl straight, front of a 4 GiB pair"] = draw_medians(lambda i: fresh_pair(100 + i, BIG // 4), 2, reduce)
    kept.clear()
    for r in ranks:
        with cp.cuda.Device(r.device):
            cp.get_default_memory_pool().free_all_blocks()
    comms = []

    def fresh_comm(i):
        tmp = [CupyRank(cp, nccl, c, r.device, r.rank, r.world) for c, r in zip(new_comms(), ranks)]
        comms.extend(t.comm for t in tmp)
        sets = [r.buffers(n, 1) for r in ranks]
        return (lambda: time_cupy(tmp, "sendrecv", n, 1, NT_CALLS, sets=sets)), f"comm{i}"

    out["nccl straight, fresh communicator"] = draw_medians(fresh_comm, COMM_DRAWS, reduce)
    for c in comms:
        c.destroy()
    return out


def report_draws(out: dict, n_bytes: int, tag: str):
    for name, draws in out.items():
        meds = [us for us, _ in draws]
        shown = " ".join(f"{us:.1f}@{label}" for us, label in sorted(draws, key=lambda d: d[0]))
        print(f"{tag:14s} {name:40s} {format_bytes(n_bytes):>9s}  GB/s {n_bytes / max(meds) / 1e3:.1f}-"
              f"{n_bytes / min(meds) / 1e3:.1f}; per draw, µs@send/recv MiB mod 1 GiB, sorted: {shown}",
              flush=True)


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
        print(f"{tag:14s} {name:40s} {format_bytes(n_bytes):>9s}  median {med:9.2f} us "
              f"({n_bytes / med / 1e3:6.1f} GB/s)  best {best:9.2f} us ({n_bytes / best / 1e3:6.1f} GB/s)  "
              f"n={len(xs)}", flush=True)


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
    sizes = parse_size_list(os.environ.get("DIAG_SIZES", "64M,256M"))
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
    draws = cupy_draws(ranks, sizes[0] // 4, lambda: nccl.NcclCommunicator.initAll(devices), lambda us: us)
    print(f"{tag}: clocks after the runs: {clocks()}", flush=True)
    report(out, tag)
    report_draws(draws, sizes[0], tag)


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

    def torch_sendrecv(send, recv, group=None):  # the comm suite's call (suites/comm.py _sendrecv)
        ops = [dist.P2POp(dist.isend, send, (rank + 1) % world, group=group),
               dist.P2POp(dist.irecv, recv, (rank - 1) % world, group=group)]
        for w in dist.batch_isend_irecv(ops):
            w.wait()

    def torch_sample(send, recv, group=None):
        def sample():
            dist.all_reduce(token, group=group)
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record()
            for _ in range(NT_CALLS):
                torch_sendrecv(send, recv, group)
            b.record()
            b.synchronize()
            return a.elapsed_time(b) * 1e3 / NT_CALLS
        return sample

    def torch_draws(n):
        """The placement draws of cupy_draws, through torch: fresh tensor pairs, the front of a 4 GiB pair,
        fresh process groups (each its own NCCL communicator)."""
        kept, out = [], {}

        def fresh_pair(i, total=n):
            g = torch.Generator(device=device)
            g.manual_seed(7000 + 10 * i + rank)
            pair = (torch.randn(total, generator=g, device=device)[:n], torch.empty(total, device=device)[:n])
            kept.append(pair)
            return torch_sample(*pair), addresses((pair[0].data_ptr(), pair[1].data_ptr()))

        out["torch batch, fresh tensor pair"] = draw_medians(fresh_pair, DRAWS, slowest)
        out["torch batch, front of a 4 GiB pair"] = draw_medians(lambda i: fresh_pair(100 + i, BIG // 4), 2,
                                                                 slowest)
        kept.clear()
        torch.cuda.empty_cache()
        send, recv = torch_sets(n, 1)[0]
        out["torch batch, fresh process group"] = draw_medians(
            lambda i: (torch_sample(send, recv, dist.new_group(list(range(world)))), f"group{i}"), COMM_DRAWS,
            slowest)
        return out

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
                (getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor)(recv, send[: n // world])
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
    cupy_ok, ranks = None, None

    def new_comms():  # every rank in step: rank 0's id through torch's group
        uid = [nccl.get_unique_id() if rank == 0 else None]
        dist.broadcast_object_list(uid, src=0)
        with cp.cuda.Device(local):
            return [nccl.NcclCommunicator(world, uid[0], rank)]

    try:
        cp, nccl = cupy_nccl()
        ranks = [CupyRank(cp, nccl, new_comms()[0], local, rank, world)]
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
    draws = torch_draws(sizes[0] // 4)
    if ranks is not None:
        draws.update(cupy_draws(ranks, sizes[0] // 4, new_comms, slowest))
    if rank == 0:
        tag = os.environ.get("DIAG_TAG", "per process")
        print(f"{tag}: torch NCCL {torch.cuda.nccl.version()}, CuPy NCCL {nccl_version}, {world} processes; "
              f"check torch {torch_ok} nccl {cupy_ok}; {loaded_nccl()}; clocks after the runs: {clocks()}", flush=True)
        report(out, tag)
        report_draws(draws, sizes[0], tag)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    single() if "--single" in sys.argv[1:] else per_process()
