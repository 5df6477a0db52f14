"""``gpubench run --suite comm --engine nccl-tests``: the same sweep as the native engine, run by the nccl-tests
(or rccl-tests) binaries, and brought into the same comm table through the importer.

One binary run per (collective, dtype, op), single process with ``-g N`` (one thread driving the N local
GPUs), ``-n 20 -w 5 -c 1`` (nccl-tests' usual timing and its validation), ``-G`` with ``--graph``, ``-R 1``
with ``--register``. Each run's stdout, stderr and exact command are kept in the run directory.

``--nccl-tests-launcher 'mpirun -np N'`` runs each binary under that launcher with ``-g 1`` instead: one process
per GPU, the layout of the torch engine and of training jobs, where one process driving every GPU lets NCCL
reach the other GPUs' buffers directly (docs/comm.md). That needs an MPI build (``make MPI=1``); a build
without MPI would start N unrelated worlds of one GPU, so every log's world size is checked against --nproc
before it is imported. gpubench itself is never under that launcher: started by one, it refuses, and the
binaries' own output is for ``gpubench import``.
"""

from __future__ import annotations

import os
import shlex
import shutil
import tempfile
from pathlib import Path
from typing import Any

from gpubench import commtable
from gpubench.errors import UsageError

ITERS, WARMUP = 20, 5


def _sweep(args: Any, options: dict) -> tuple[int, int, int]:
    """(min, max, factor): the options, or the native engine's default sweep (powers of 4)."""
    from gpubench.suites.comm import GPU_QUICK, GPU_SIZES

    if options.get("min_bytes") or options.get("max_bytes"):
        lo = options.get("min_bytes") or options["max_bytes"]
        hi = options.get("max_bytes") or lo
        if lo > hi:
            raise UsageError(f"--min-bytes {lo} is above --max-bytes {hi}: swap them")
        return lo, hi, options.get("step_factor") or 2
    sizes = GPU_QUICK if args.quick else GPU_SIZES
    return min(sizes), max(sizes), 4


def run(args: Any, options: dict, dtypes: list[str] | None, cluster: str, argv: list[str]) -> int:
    from gpubench.console import out_console, summary_tables
    from gpubench.dist.env import detect
    from gpubench.nccltests import envscrub
    from gpubench.nccltests.binary import BinaryError, build_command, find_binary, run_binary
    from gpubench.nccltests.importer import import_logs
    from gpubench.rundir import ensure_writable
    from gpubench.suites.comm import COLLECTIVES, DTYPES, Comm, canonical_dtype

    if detect() is not None:
        raise UsageError("--engine nccl-tests runs the binaries on this machine (-g N); under a launcher, run "
                         "an MPI build of nccl-tests with it and `gpubench import nccl-tests` its output")
    if args.sizes:
        raise UsageError("--engine nccl-tests sweeps geometrically: give --min-bytes/--max-bytes/--step-factor")
    if args.alloc == "torch":
        raise UsageError("nccl-tests takes its buffers from ncclMemAlloc: --alloc torch is the torch engine's "
                         "(leave --alloc out)")
    names = options.get("collectives") or list(COLLECTIVES)
    unknown = [c for c in names if c not in COLLECTIVES]
    if unknown:
        raise UsageError(f"unknown collective {', '.join(unknown)}: choose from {', '.join(COLLECTIVES)}")
    kinds = [canonical_dtype(d) for d in (dtypes or ["float32"])]
    bad = [d for d in kinds if d not in DTYPES]
    if bad:
        raise UsageError(f"comm has no dtype {', '.join(bad)}: choose from {', '.join(DTYPES)}")
    ops = options.get("ops") or ["sum"]
    dirs = [args.nccl_tests_dir] if args.nccl_tests_dir else None
    binaries = {c: find_binary(c, dirs) for c in names}  # a missing binary fails before anything runs
    lo, hi, factor = _sweep(args, options)
    nproc = args.nproc or _gpus()
    if nproc < 1:
        raise UsageError("nccl-tests needs GPUs and this machine shows none")
    prefix = _launcher(args.nccl_tests_launcher)
    ensure_writable(args.out, cluster)

    staging = Path(tempfile.mkdtemp(prefix="gpubench-nccl-tests-"))
    logs, runs, failed = [], [], []
    console = out_console()
    try:
        for name in names:
            for dtype in kinds:
                for op in (ops if name in commtable.REDUCING else ["none"]):
                    cmd = build_command(binaries[name], min_bytes=lo, max_bytes=hi, step_factor=factor,
                                        dtype=dtype, op=op, iters=ITERS, warmup=WARMUP, check=True,
                                        graph=args.graph, ngpus=1 if prefix else nproc, launcher_prefix=prefix,
                                        register=args.register)
                    stem = f"{name}-{dtype}-{op}"
                    console.print(f"nccl-tests: {' '.join(cmd)}", markup=False, highlight=False)
                    try:
                        out, err, rc, elapsed = run_binary(cmd, timeout_s=max(600.0, 10 * args.timeout),
                                                           stall_s=args.timeout)
                    except BinaryError as e:
                        out, err, rc, elapsed = getattr(e, "stdout", ""), f"{e}\n{getattr(e, 'stderr', '')}", -1, None
                    (staging / f"{stem}.log").write_text(out)
                    (staging / f"{stem}.stderr").write_text(err)
                    runs.append({"command": cmd, "returncode": rc, "elapsed_s": elapsed, "log": f"{stem}.log",
                                 "stderr": f"{stem}.stderr"})
                    wrong_world = _wrong_world(staging / f"{stem}.log", nproc) if rc == 0 else None
                    if wrong_world:
                        failed.append(f"{stem} ({wrong_world})")
                    elif rc == 0:
                        logs.append(str(staging / f"{stem}.log"))
                    else:
                        failed.append(f"{stem} (exit {rc}: {err.strip().splitlines()[-1] if err.strip() else 'no stderr'})")
        if not logs:
            raise UsageError(f"every nccl-tests run failed: {'; '.join(failed)}")
        # The binaries inherited this process's environment: its NCCL_*/RCCL_* settings are the ones in force,
        # recorded as a measured run records its own (a setting such as NCCL_P2P_DIRECT_DISABLE changes figures).
        env = envscrub.scrub(f"{k}={v}" for k, v in os.environ.items())
        done = import_logs(logs, tool="nccl-tests", out=args.out, cluster=cluster, collective=None, argv=argv,
                           env=env, method={"register": bool(args.register)})
        rd = done.run_dir
        for item in runs:
            for key in ("log", "stderr"):
                shutil.copy2(staging / item[key], rd.path / item[key])
        rd.meta["engine"] = {"name": "nccl-tests", "iters": ITERS, "warmup": WARMUP, "graph": bool(args.graph),
                             "register": bool(args.register), "launcher": prefix, "runs": runs, "failed": failed}
        rd.flush()
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    from gpubench import results

    df = results.load(rd.path)
    for table in summary_tables(df, {commtable.SUITE: Comm.params}, {commtable.SUITE: Comm.shown}):
        console.print(table)
    for line in done.warnings:
        console.print(f"warning: {line}", markup=False, highlight=False)
    console.print(f"run directory: {rd.path}", markup=False, highlight=False)
    if failed:
        console.print(f"{len(failed)} nccl-tests run(s) failed: {'; '.join(failed)}", markup=False)
        return 1
    return 1 if (df["status"] == "invalid").any() else 0


def _launcher(text: str | None) -> list[str]:
    """The launcher's argv (empty: none); its program must exist before anything runs."""
    if not text:
        return []
    try:
        argv = shlex.split(text)
    except ValueError as e:
        raise UsageError(f"--nccl-tests-launcher {text!r}: {e}") from e
    if not argv or shutil.which(argv[0]) is None:
        raise UsageError(f"--nccl-tests-launcher: {argv[0] if argv else text!r} is not on PATH: give the "
                         "launcher that starts the binaries, e.g. 'mpirun -np 2'")
    return argv


def _wrong_world(log: Path, nproc: int) -> str | None:
    """Why a log that exited 0 is not the world asked for, or None: under a launcher, a build without MPI
    prints one table per process, each a world of one GPU."""
    from gpubench.nccltests.importer import read
    from gpubench.nccltests.model import ParseError

    try:
        worlds = sorted({r.world_size for r in read(log) if r.rows})
    except (ParseError, UsageError) as e:
        return f"its output could not be read: {e}"
    if worlds and worlds != [nproc]:
        return (f"world size {', '.join(map(str, worlds))}, expected {nproc}: under --nccl-tests-launcher the "
                "binaries must be an MPI build (make MPI=1) started as --nproc ranks")
    return None


def _gpus() -> int:
    import torch

    return torch.cuda.device_count() if torch.cuda.is_available() else 0

