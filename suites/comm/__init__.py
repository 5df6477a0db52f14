"""comm: collective bandwidth through torch.distributed (NCCL/RCCL on GPUs, gloo on CPUs), nccl-tests' way.

Each collective is declared like a ``struct testColl`` of nccl-tests (``collectives.py``): how its buffers are
sized from the byte count, how it is called, and what every rank must hold afterwards. The engine times it on every
rank (events around back-to-back calls) with the ranks agreeing on each decision; a sample is the slowest rank's
time. ``table.py`` owns the table's conventions (bytes, count, algbw, busbw factors), ``buffers.py`` a case's
buffers and their check, ``sampling.py`` how a case is sampled, ``caveats.py`` what a row says of a known gap.

Inputs are random integers from {-2, -1, 1, 2}, generated in chunks from (seed, rank, chunk) so that every
rank can regenerate any rank's input: sums, products, minima and maxima of such values are exact in every
dtype, so the check counts wrong elements exactly (avg, a division, gets a tolerance of a few ulps).

torch.distributed has in-place and out-of-place forms of all_gather and reduce_scatter; all_reduce, broadcast
and reduce are in-place only in its API, alltoall and sendrecv out-of-place only. Where the backend can capture
graphs (CUDA, HIP) the timed calls are captured in one (nccl-tests' ``-G``), taking Python and launch cost out
of small sizes; ``--eager`` times the host issuing torch.distributed calls instead, and a case whose capture
fails is timed eager with the reason in its row. A sweep costs about what nccl-tests' does: after the run's
first case, a case warms up for a batch or two (nccl-tests' ``-w``) and takes a few samples (its ``-n``), the
stop rule extending only rows whose spread stays high.
On GPUs the buffers come from ``ncclMemAlloc``, as nccl-tests allocates them (gpubench/ranks/ncclmem.py): in a
captured graph NCCL registers such memory by itself and sends zero-copy, which torch's caching allocator's memory
(``cudaMalloc``) cannot do, so point-to-point collectives read what nccl-tests reads. ``--alloc torch`` takes them
from torch's caching allocator instead: what a training job that does not register its buffers gets. ``--register``
also registers them with the communicator (nccl-tests ``-R 1``).
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from gpubench.toolkit import (Backend, Case, Check, Engine, GridContext, Importer, Method, Option, Skip, Suite,
                              UsageError, Workload, names, parse_size)
from gpubench.toolkit.nccl import TOOLS, collective_of_binary
from gpubench.toolkit.ranks import ncclmem
from gpubench.toolkit.workloads import too_big
from gpubench.suites.comm import caveats, nccl_tests_engine, sampling
from gpubench.suites.comm import charts as charts_comm
from gpubench.suites.comm import table as commtable
from gpubench.suites.comm.buffers import Buffers, Layout
from gpubench.suites.comm.collectives import COLLECTIVES, Collective, itemsize
from gpubench.suites.comm.importer import import_logs as read_logs
from gpubench.suites.comm.table import algbw_factor, busbw_factor

# The dtypes and the GPU sweeps are the table's (table.py): nccl-tests runs use them too.
DTYPES, ALIASES, canonical_dtype = commtable.DTYPES, commtable.ALIASES, commtable.canonical_dtype
OPS = commtable.REDUCE_OPS
GPU_SIZES, GPU_QUICK = commtable.GPU_SIZES, commtable.GPU_QUICK
# CPUs (gloo) stop earlier.
CPU_SIZES = (1 << 10, 16 << 10, 256 << 10, 1 << 20, 4 << 20, 16 << 20)
CPU_QUICK = (1 << 10, 64 << 10, 1 << 20)
# What --quick measures unless --collectives names others: the seven it always has. The others (gather, scatter,
# hypercube, alltoallv, bisection) join the full sweep or come when named.
QUICK_COLLECTIVES = commtable.COLLECTIVES[:7]
# In place, a call repeated on its own output gives the same output: a graph's replays leave what one call leaves.
REREAD_IN_PLACE = frozenset({"broadcast", "all_gather", "gather", "scatter", "hypercube"})
# What a world of one measures by default: the library's local copy (a collective of one rank moves no data
# over a bus; in place it moves none at all).
WORLD_OF_ONE = ("all_gather", (False,))
_LIBRARY = {"cuda": "NCCL", "hip": "RCCL", "cpu": "gloo", "fake": "the fake device"}


def _size_sweep(lo: int, hi: int, factor: int) -> list[int]:
    out, n = [], lo
    while n <= hi:
        out.append(n)
        n *= factor
    return out


def _step_factor(value: int, _: object) -> str | None:
    return None if value >= 2 else f"--step-factor {value} must be an integer ≥ 2"


def _register_alloc(value: bool, options: Any) -> str | None:
    if value and options.alloc == "torch":
        return "--register registers NCCL's own buffers: use it with --alloc nccl (or without --alloc)"
    return None


# Engines besides gpubench's own loop, each writing this suite's table (gpubench.suite): --engine nccl-tests runs
# the binaries with the same sweep (nccl_tests_engine.py); its layout options are its own.
ENGINES = (Engine("nccl-tests", nccl_tests_engine.sweep, own_options=("nccl_tests_launcher", "nccl_tests_layout")),)

OPTIONS = (
    Option("min-bytes", "smallest size, e.g. 8, 1M (as nccl-tests -b)", parse_size, metavar="SIZE"),
    Option("max-bytes", "largest size, e.g. 8G (as nccl-tests -e)", parse_size, metavar="SIZE"),
    Option("step-factor", "multiply the size by F from --min-bytes to --max-bytes (default 2; as nccl-tests -f)",
           int, metavar="F", check=_step_factor),
    Option("op", "reduction ops: sum,prod,min,max,avg (default sum)", names, metavar="LIST"),
    Option("collectives", "all_reduce,all_gather,reduce_scatter,alltoall,broadcast,reduce,sendrecv,gather,scatter,"
                          "hypercube,alltoallv,bisection (default all; --quick: the first seven)", names, metavar="LIST"),
    Option("graph", "capture the timed calls in a CUDA/HIP graph (nccl-tests -G): the default on GPUs, kept as a "
                    "name for it (refused on CPUs)", switch=True),
    Option("eager", "time torch.distributed calls issued one by one from Python instead of a captured graph (what "
                    "a training loop's host gets; host-bound below tens of MiB)", switch=True),
    Option("alloc", "where the buffers come from: NCCL/RCCL's ncclMemAlloc (the default on GPUs, as nccl-tests "
                    "allocates them; NCCL sends from it zero-copy in graphs) or torch's caching allocator (what a "
                    "training job that does not register its buffers gets)", choices=("torch", "nccl")),
    Option("register", "register every buffer with the communicator (ncclCommRegister, nccl-tests -R 1): "
                       "zero-copy transfers where NCCL supports them; implies --alloc nccl", switch=True,
           check=_register_alloc),
    Option("engine", "torch: gpubench's own loop over torch.distributed (default); nccl-tests: run the "
                     "nccl-tests/rccl-tests binaries with the same sweep into the same table",
           default="torch", choices=("torch", *(e.name for e in ENGINES))),
    Option("nccl-tests-dir", "where the *_perf binaries are (default: $NCCL_TESTS_DIR, $RCCL_TESTS_DIR, PATH)",
           metavar="DIR"),
    Option("nccl-tests-launcher", "run each binary under this launcher, one process per GPU (-g 1), as an MPI "
                                  "build of nccl-tests runs, e.g. 'mpirun -np 2'; --nproc is then the ranks it starts "
                                  "(default: one process, one thread per GPU, -t N -g 1)", metavar="CMD"),
    Option("nccl-tests-layout", "threads: one thread per GPU (-t N -g 1), one rank per GPU as the torch engine lays "
                                "them out (default); one-thread: one thread drives every GPU (-g N)",
           choices=("threads", "one-thread")),
)


def _read_logs(paths: list[str], *, tool: str, **how: Any) -> Any:
    """``gpubench import nccl-tests|rccl-tests``: their logs as a run of this suite's table (importer.py)."""
    return read_logs(paths, tool=tool, **{**how, "collective": _collective(how.get("collective"))})


def _collective(text: str | None) -> str | None:
    """``gpubench import --collective``: a collective's name or its binary's (all_reduce_perf)."""
    if text is None:
        return None
    name = collective_of_binary(text) or text.strip()
    if name not in commtable.COLLECTIVES:
        raise UsageError(f"unknown --collective {text!r}: one of {', '.join(commtable.COLLECTIVES)}")
    return name


def _alloc(options: Any, backend: str) -> str:
    """Where the buffers come from as asked: --register implies NCCL's allocator; without --alloc, NCCL's on GPUs
    (nccl-tests' allocation), torch's on CPUs (gloo has no other)."""
    if options.get("register"):
        return "nccl"
    return options.get("alloc") or ("nccl" if backend in ("cuda", "hip") else "torch")


def _alloc_for_run(ctx: GridContext) -> tuple[str, str | None]:
    """(where this run's buffers come from, a note or None). NCCL's allocator, asked for by name, must exist; as the
    default on a GPU whose NCCL/RCCL lacks it (older than 2.19), the run falls back to torch's and says so once."""
    opts = ctx.options
    alloc = _alloc(opts, ctx.backend)
    if alloc != "nccl":
        return alloc, None
    explicit = bool(opts.get("alloc") or opts.get("register"))
    if explicit and ctx.backend not in ("cuda", "hip"):
        raise UsageError("--alloc nccl and --register use NCCL/RCCL's allocator: they need a GPU backend "
                         "(cuda or hip)")
    try:
        ncclmem.library()  # an NCCL without ncclMemAlloc is named once here, not in every row
    except UsageError as e:
        if explicit:
            raise
        return "torch", f"buffers from torch's caching allocator: {e}"
    return "nccl", None


@dataclass
class _Run:
    """What a run of comm has learnt, not what it was asked (that is ctx.options); kept in the run's context."""

    # Every rank makes its inputs in the same order: a count shared by all cases lines the seeds up.
    seeds: Iterator[int] = field(default_factory=lambda: itertools.count(1))
    warm: bool = False  # the run's first case has warmed the device up
    plan_notes: list[str] = field(default_factory=list)  # what the grid left out
    alloc: str = "torch"  # where the buffers come from (_alloc_for_run)
    pool: Any = None  # NCCL's memory for the run (ncclmem.Pool), made at its first case


def _run(ctx: GridContext) -> _Run:
    return ctx.state.setdefault("comm", _Run())


# How torch.distributed says a backend lacks an operation ("Backend gloo does not support ...").
_UNSUPPORTED = re.compile(r"does not support|not supported|unsupported|not implemented", re.IGNORECASE)


def _refusal_skips(coll: Collective, lib: str) -> Any:
    """``coll``'s call, where the backend's refusal of the operation skips the case with its words (every rank
    refuses alike, before moving data) rather than failing it."""

    def call(*args: Any) -> None:
        try:
            coll.call(*args)
        except (RuntimeError, NotImplementedError) as e:
            said = (str(e).strip().splitlines() or [type(e).__name__])[0]
            if isinstance(e, NotImplementedError) or _UNSUPPORTED.search(said):
                raise Skip(f"{lib} cannot run {coll.name}: {said}") from e
            raise

    return call


class Comm(Suite):
    name = commtable.SUITE
    version = commtable.SUITE_VERSION
    backends = frozenset({"cuda", "hip", "cpu", "fake"})
    metrics = commtable.METRICS
    description = "collective bandwidth (algbw, busbw) through torch.distributed, as nccl-tests defines it"
    params = commtable.PARAMS
    shown = commtable.SHOWN
    blocks = commtable.BLOCKS
    multiprocess = True  # runs as one process per rank: the CLI spawns them or finds a launcher's
    options = OPTIONS
    chart_order = 60
    engines = ENGINES
    importers = tuple(Importer(tool, _read_logs) for tool in TOOLS)  # gpubench import nccl-tests|rccl-tests

    @classmethod
    def charts(cls, runs, out):
        return charts_comm.comm(runs, out)

    # --- the grid ----------------------------------------------------------------------------------------
    def cases(self, ctx: GridContext) -> Iterable[Case]:
        opts = ctx.options
        world = ctx.group.world_size if ctx.group else ctx.world_size
        if opts.get("graph") and opts.get("eager"):
            raise UsageError("--graph and --eager ask for opposite things: give one (graphs are the default on GPUs)")
        if opts.get("graph") and ctx.backend == "cpu":
            # Captured graphs exist only on GPUs; say so once here rather than skip every case.
            raise UsageError("--graph captures CUDA/HIP graphs: it needs a GPU backend (cuda or hip); gloo on CPUs "
                             "is timed eager")
        run = _run(ctx)
        run.plan_notes = []
        dtypes = [canonical_dtype(d) for d in (ctx.dtypes or ("float32",))]
        unknown = [d for d in dtypes if d not in DTYPES]
        if unknown:
            raise UsageError(f"comm has no dtype {', '.join(unknown)}: choose from {', '.join(DTYPES)}")
        ops = list(opts.get("op") or ["sum"])
        bad = [o for o in ops if o not in OPS]
        if bad:
            raise UsageError(f"unknown --op {', '.join(bad)}: choose from {', '.join(OPS)}")
        names = list(opts.get("collectives") or (QUICK_COLLECTIVES if ctx.quick else COLLECTIVES))
        bad = [c for c in names if c not in COLLECTIVES]
        if bad:
            raise UsageError(f"unknown collective {', '.join(bad)}: choose from {', '.join(COLLECTIVES)}")
        sizes = self._sizes(ctx, opts)
        placements = {name: COLLECTIVES[name].placements for name in names}
        if world == 1:
            lib = _LIBRARY.get(ctx.backend, ctx.backend)
            if not opts.get("collectives"):
                name, only = WORLD_OF_ONE
                names, placements = [name], {name: only}
                what = f"{lib}'s local copy ({name}, out of place); name others with --collectives"
            else:
                what = f"{lib}'s local copy (out of place) or a call that moves nothing (in place)"
            run.plan_notes.append(f"world of one: bus bandwidth needs 2 or more ranks (a machine with 2+ GPUs, "
                                    f"--nproc, or a launcher), busbw is 0 here; measured instead: {what}")
        run.alloc, why = _alloc_for_run(ctx)
        if why:
            run.plan_notes.append(why)
        elif run.alloc == "torch" and ctx.backend in ("cuda", "hip"):
            run.plan_notes.append("buffers from torch's caching allocator (--alloc torch): what a training job that "
                                  "does not register its buffers gets; NCCL cannot send from them zero-copy in a "
                                  "graph, as it does from nccl-tests' (the default), so point-to-point collectives "
                                  "(sendrecv, alltoall) and all_gather read lower (docs/comm.md)")
        planned = []
        for name in names:
            coll = COLLECTIVES[name]
            why = coll.refuses(world)
            if why:
                run.plan_notes.append(f"{why}: not run ({len(sizes)} sizes)")
                continue
            small = []  # requests under one element per rank: one line, not a skipped row each
            for dtype in dtypes:
                for op in (ops if coll.reduces else ["none"]):
                    for inplace in placements[name]:
                        for nbytes in sizes:
                            nb = self._bytes(coll, nbytes, dtype, world)
                            if nb == 0:
                                small.append(nbytes)
                                continue
                            planned.append(commtable.case(name, nb, dtype, op, inplace))
            if small:
                run.plan_notes.append(f"{name}: {len(small)} case(s) of {min(small)}-{max(small)} B not run: less "
                                        f"than one element per rank among {world} ranks")
        return planned

    def notes(self, ctx: GridContext | None) -> list[str]:
        """One line each about what the run did not measure, or measured otherwise than asked (the CLI prints
        them under the table; run.json keeps them)."""
        if ctx is None:
            return []
        return list(_run(ctx).plan_notes)  # a failed graph capture the runner says of any suite

    def _sizes(self, ctx: GridContext, opts: Any) -> list[int]:
        gpu = ctx.backend in ("cuda", "hip")
        if ctx.sizes:
            return list(ctx.sizes)
        lo, hi, factor = opts.get("min_bytes"), opts.get("max_bytes"), opts.get("step_factor")
        if lo or hi:
            lo = lo or hi
            hi = hi or lo
            if lo > hi:
                raise UsageError(f"--min-bytes {lo} is above --max-bytes {hi}: swap them")
            factor = factor or 2
            if factor < 2:
                raise UsageError(f"--step-factor {factor} must be an integer ≥ 2")
            return _size_sweep(lo, hi, factor)
        if ctx.quick:
            return list(GPU_QUICK if gpu else CPU_QUICK)
        return list(GPU_SIZES if gpu else CPU_SIZES)

    def _bytes(self, coll: Collective, nbytes: int, dtype: str, world: int) -> int:
        """The bytes nccl-tests would print for a request of ``nbytes``: whole elements, whole per-rank blocks."""
        size = itemsize(dtype)
        send, recv = coll.buffers(max(1, nbytes // size), size, world)
        return max(send, recv) * size

    # --- one case ----------------------------------------------------------------------------------------
    def prepare(self, case: Case, backend: Backend, ctx: GridContext | None = None) -> Workload:
        import torch
        import torch.distributed as dist

        coll = COLLECTIVES[case["collective"]]
        if ctx is None or ctx.group is None:
            raise Skip("comm needs its ranks: run it through `gpubench run --suite comm` (it starts them)")
        ranks, opts, state = ctx.group, ctx.options, _run(ctx)
        world, rank = ranks.world_size, ranks.rank
        graph = ctx.backend != "cpu" and not opts.get("eager")  # where the backend can capture (--eager: never)
        register, alloc = bool(opts.get("register")), state.alloc
        if coll.refuses(world):
            raise Skip(coll.refuses(world))
        dtype = getattr(torch, case["dtype"])
        size = itemsize(case["dtype"])
        nbytes = int(case["bytes"])
        send_n, recv_n = coll.sized(nbytes, size, world)
        if min(send_n, recv_n) == 0:
            raise Skip(f"{nbytes} B is less than one element per rank among {world} ranks")
        count = coll.elements(nbytes, size, world)
        inplace, op = bool(case["inplace"]), case["op"]
        device = backend.torch_device
        footprint = (max(send_n, recv_n) if inplace else send_n + recv_n) * size
        message = too_big(footprint * 3, backend, "(buffers and the check's copies)")
        if message:
            raise Skip(message)  # every rank learns that one skips (gpubench.ranks.agree)
        group = ranks.data
        pool = None
        if alloc == "nccl":  # the run's NCCL memory, lent to this case until its measurement ends
            if state.pool is None:
                comm = ncclmem.comm_of(group, device) if register else None
                state.pool = ncclmem.Pool(ncclmem.library(), comm, backend.synchronize)
            pool = state.pool

        lay = Layout(torch, coll, dtype, device, rank, world, send_n, recv_n, inplace, op, count, pool, state.seeds)

        call = _refusal_skips(coll, _LIBRARY.get(ctx.backend, ctx.backend))

        def run_one(b: Buffers) -> Any:
            call(dist, b.send, b.recv, op, group, rank, world)
            return b.recv

        extra = {"count": count, "world_size": world, "nnodes": ranks.renv.nnodes, "engine": "torch",
                 "layout": commtable.layout_name(1, 1),
                 "message": caveats.graph_note(coll.name, nbytes, graph, backend),
                 "root": 0 if coll.name in commtable.ROOTED else -1, "valid": None, "wrong": None,
                 "graph": graph, "alloc": alloc, "register": register}

        def check(b: Buffers, out: Any) -> Check:
            total = ranks.sum_int(lay.wrong(b, out))
            extra["wrong"], extra["valid"] = total, total == 0
            return Check(total == 0, float(total), 0.0, "" if total == 0 else
                         f"{total} wrong elements over {world} ranks")

        factor, moved = busbw_factor(coll.name, world), algbw_factor(coll.name, world)
        token = torch.ones(1, dtype=torch.float32, device=device)

        def line_up() -> None:
            # A one-element all_reduce on the timed stream: each batch starts when the slowest rank arrives, not
            # with its first call absorbing the ranks' skew (tens of µs after the control plane's agreement).
            dist.all_reduce(token, group=group)

        def derive(per_call_s: float) -> dict[str, float]:
            algbw = nbytes * moved / per_call_s / 1e9
            return {"algbw": algbw, "busbw": algbw * factor}

        # Graphs where the backend can capture (nccl-tests -G), else eager (docs/method.md). A replay repeats the call
        # on its own output: the same result out of place, for broadcast and all_gather; elsewhere the check refills.
        graphed = sampling.graph(lay.fill, reread=not inplace or coll.name in REREAD_IN_PLACE)
        method = Method(
            # CPUs (gloo): one buffer set, as nccl-tests keeps one; rotating sets past an L3 cost the host more time
            # making them than timing (docs/measurements.md, comm).
            cache="warm" if backend.name == "cpu" else "rotate", sampling=sampling.case_sampling(state, ctx.quick),
            min_sample_s=sampling.MIN_SAMPLE_S, before_batch=line_up, graph=graphed if graph else None,
            # NCCL's buffers are lent to the case: back to the run's pool when its measurement ends.
            context=pool.lent if pool is not None else None)
        return Workload(run=run_one, make_inputs=lay.buffers, bytes=nbytes, check=check, footprint=footprint,
                        derive=derive, extra=extra, method=method)


__all__ = ["Comm", "COLLECTIVES", "DTYPES"]
