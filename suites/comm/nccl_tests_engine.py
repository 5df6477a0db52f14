"""``gpubench run --suite comm --engine nccl-tests``: the suite's sweep run by the nccl-tests (or rccl-tests)
binaries (:mod:`gpubench.suites.comm.binaries` finds and runs them), their logs imported into the comm table.

One binary run per (collective, dtype, op), ``-n 20 -w 5 -c 1``, ``-G 10`` in graphs (not with --eager), ``-R 1`` with
--register; each run's output and exact command are kept in the run directory. The ranks are laid out one per GPU as
the torch engine lays out its own: one process of N threads (``-t N -g 1``), or N processes of one GPU under
``--nccl-tests-launcher 'mpirun -np N'`` (an MPI build; every log's world size is checked against --nproc), or one
thread driving every GPU (``-g N``) with ``--nccl-tests-layout one-thread``. gpubench itself is never under that
launcher: started by one, it refuses (docs/comm.md, docs/nccl-tests.md)."""

from __future__ import annotations

import contextlib
import os
import shlex
import shutil
import signal
import sys
import tempfile
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpubench.toolkit import RunRequest, UsageError, results
from gpubench.toolkit.console import out_console, summary_tables
from gpubench.toolkit.nccl import BINARIES as NCCL_BINARIES, ParseError, scrub
from gpubench.toolkit.ranks import ENDING, detect
from gpubench.toolkit.results import ensure_writable, utc_now
from gpubench.suites.comm import table as commtable
from gpubench.suites.comm.binaries import BinaryError, build_command, find_binary, run_binary, supports_graph
from gpubench.suites.comm.importer import import_logs, read
from gpubench.suites.comm.table import COLLECTIVES, DTYPES, GPU_QUICK, GPU_SIZES, canonical_dtype

ITERS, WARMUP = 20, 5  # nccl-tests' usual -n and -w
# Graph launches per timing (-G): one left the launch's host cost in small sizes (docs/comm.md; docs/measurements.md,
# comm).
GRAPH_LAUNCHES = 10
LAYOUTS = ("threads", "one-thread")
# nccl-tests warms up at every size of its sweep, then times from the smallest, right after its heaviest calls: a
# sweep crossing this size runs as two binary runs (docs/comm.md; results/reference/h100x4/sweep-max-20261127/).
SPLIT_BYTES = 16 << 20


def segments(lo: int, hi: int, factor: int) -> list[tuple[int, int]]:
    """The (min, max) of each binary run of the sweep lo..hi by ``factor``: split before the first size at or
    over :data:`SPLIT_BYTES` where the sweep has sizes on both sides of it, else the sweep whole."""
    size = lo
    while size < SPLIT_BYTES and size * factor <= hi:
        size *= factor
    if size < SPLIT_BYTES or size == lo:  # no size at or over the split, or none under it
        return [(lo, hi)]
    return [(lo, size // factor), (size, hi)]


def _sweep(quick: bool, options: Mapping[str, Any]) -> tuple[int, int, int]:
    """(min, max, factor): the options, or the native engine's default sweep (powers of 4)."""
    if options.get("min_bytes") or options.get("max_bytes"):
        lo = options.get("min_bytes") or options["max_bytes"]
        hi = options.get("max_bytes") or lo
        if lo > hi:
            raise UsageError(f"--min-bytes {lo} is above --max-bytes {hi}: swap them")
        return lo, hi, options.get("step_factor") or 2
    sizes = GPU_QUICK if quick else GPU_SIZES
    return min(sizes), max(sizes), 4


@dataclass
class _SweepPlan:
    """What one --engine nccl-tests run will start: every binary, dtype and op, and how."""

    binaries: dict[str, Path]
    dtypes: list[str]
    ops: list[str]
    sizes: tuple[int, int, int]  # min, max, factor
    nproc: int
    prefix: list[str]
    timeout: float  # --timeout: a binary silent this long is stalled
    one_thread: bool = False  # -g N: one thread drives every GPU (--nccl-tests-layout one-thread)
    skipped: list[str] = field(default_factory=list)  # one line per collective asked for and not run, and why

    def layout(self) -> tuple[int, int]:
        """(threads per process, GPUs per thread) of each binary run: one rank per GPU unless asked otherwise."""
        if self.prefix:
            return 1, 1  # the launcher starts a process per GPU
        return (1, self.nproc) if self.one_thread else (self.nproc, 1)

    def commands(self):
        for name, binary in self.binaries.items():
            for dtype in self.dtypes:
                for op in (self.ops if name in commtable.REDUCING else ["none"]):
                    yield name, binary, dtype, op


def _plan_sweep(request: RunRequest, options: Mapping[str, Any], dtypes: list[str] | None) -> _SweepPlan:
    """The sweep's plan, every input checked (a missing binary fails before anything runs)."""
    if detect() is not None:
        raise UsageError("--engine nccl-tests runs the binaries on this machine (-t N -g 1); under a launcher, run "
                         "an MPI build of nccl-tests with it and `gpubench import nccl-tests` its output")
    if request.what.sizes is not None:
        raise UsageError("--engine nccl-tests sweeps geometrically: give --min-bytes/--max-bytes/--step-factor")
    if options.get("alloc") == "torch":
        raise UsageError("nccl-tests takes its buffers from ncclMemAlloc: --alloc torch is the torch engine's "
                         "(leave --alloc out)")
    if options.get("eager") and options.get("graph"):
        raise UsageError("--graph and --eager ask for opposite timings: give one (graphs are the default)")
    named = options.get("collectives") or []
    unknown = [c for c in named if c not in COLLECTIVES]
    if unknown:
        raise UsageError(f"unknown collective {', '.join(unknown)}: choose from {', '.join(COLLECTIVES)}")
    kinds = [canonical_dtype(d) for d in (dtypes or ["float32"])]
    bad = [d for d in kinds if d not in DTYPES]
    if bad:
        raise UsageError(f"comm has no dtype {', '.join(bad)}: choose from {', '.join(DTYPES)}")
    dirs = [options["nccl_tests_dir"]] if options.get("nccl_tests_dir") else None
    binaries, skipped = _binaries(named, dirs)
    nproc = request.where.nproc or _gpus()
    if nproc < 1:
        raise UsageError("nccl-tests needs GPUs and this machine shows none")
    layout = options.get("nccl_tests_layout") or "threads"
    if options.get("nccl_tests_launcher") and layout == "one-thread":
        raise UsageError("--nccl-tests-layout one-thread runs one process (-g N): leave --nccl-tests-launcher out, "
                         "or the layout (the launcher's processes each drive one GPU)")
    return _SweepPlan(binaries, kinds, options.get("op") or ["sum"], _sweep(request.how.quick, options), nproc,
                      _launcher(options.get("nccl_tests_launcher")), request.where.timeout,
                      one_thread=layout == "one-thread", skipped=skipped)


def _binaries(named: list[str], dirs: list[str] | None) -> tuple[dict[str, Path], list[str]]:
    """The binary of each collective asked for (``named``, else each one nccl-tests has a test of), and one line for
    each not run: a collective nccl-tests has no test of (asked for by name), or one this build lacks (a build older
    than its test, e.g. alltoallv_perf). No binary at all is find_binary's error: where it looked, how to build."""
    names = named or [c for c in COLLECTIVES if c in NCCL_BINARIES]
    untested = [c for c in names if c not in NCCL_BINARIES]
    if untested and len(untested) == len(names):
        raise UsageError(f"nccl-tests has no test of {', '.join(untested)}: the torch engine alone measures it "
                         "(--engine torch)")
    found: dict[str, Path] = {}
    lacking: list[tuple[str, UsageError]] = []
    for c in names:
        if c in NCCL_BINARIES:
            try:
                found[c] = find_binary(c, dirs)
            except UsageError as e:
                lacking.append((c, e))
    if not found:
        raise lacking[0][1]
    where = next(iter(found.values())).parent
    skipped = [f"{c}: nccl-tests has no {c}_perf (the torch engine alone measures it): not run" for c in untested]
    return found, skipped + [f"{c}: the nccl-tests build at {where} has no {c}_perf: not run" for c, _ in lacking]


def _run_one(plan: _SweepPlan, options: Mapping[str, Any], name: str, binary: Path, dtype: str, op: str, staging: Path,
             say, part: tuple[int, int], stem: str) -> tuple[dict[str, Any], str | None, str | None]:
    """One binary run of the sizes ``part`` (min, max): (its record for run.json, its log to import or None, why
    it failed or None)."""
    # Graphs by default, as the torch engine times (nccl-tests -G); --eager, or a binary older than -G, times the
    # calls issued one by one. The rows' graph column says which.
    graph = not options.get("eager") and supports_graph(binary)
    (lo, hi), factor = part, plan.sizes[2]
    threads, gpus = plan.layout()
    cmd = build_command(binary, min_bytes=lo, max_bytes=hi, step_factor=factor, dtype=dtype, op=op, iters=ITERS,
                        warmup=WARMUP, check=True, graph=GRAPH_LAUNCHES if graph else False, ngpus=gpus,
                        nthreads=threads, launcher_prefix=plan.prefix, register=options.get("register"))
    say(f"nccl-tests: {' '.join(cmd)}")
    try:
        out, err, rc, elapsed = run_binary(cmd, timeout_s=max(600.0, 10 * plan.timeout), stall_s=plan.timeout)
    except BinaryError as e:
        out, err, rc, elapsed = getattr(e, "stdout", ""), f"{e}\n{getattr(e, 'stderr', '')}", -1, None
    (staging / f"{stem}.log").write_text(out)
    (staging / f"{stem}.stderr").write_text(err)
    record = {"command": cmd, "returncode": rc, "elapsed_s": elapsed, "log": f"{stem}.log", "stderr": f"{stem}.stderr",
              "graph": graph}
    wrong_world = _wrong_world(staging / f"{stem}.log", plan.nproc) if rc == 0 else None
    if wrong_world:
        return record, None, f"{stem} ({wrong_world})"
    if rc != 0:
        return record, None, f"{stem} (exit {rc}: {err.strip().splitlines()[-1] if err.strip() else 'no stderr'})"
    return record, str(staging / f"{stem}.log"), None


class _Stopped(BaseException):
    """SIGTERM or SIGHUP while the binaries run (a launcher's time limit, a closed terminal): ends the sweep as
    Ctrl-C does, keeping what finished."""

    def __init__(self, signum: int):
        super().__init__(signum)
        self.signum = signum


@contextlib.contextmanager
def _stopping():
    """SIGTERM and SIGHUP raise :class:`_Stopped` in the main thread while the binaries run (otherwise they would
    end this process on the spot, the finished runs' logs with it)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def stop(signum, _frame):
        raise _Stopped(signum)

    old = {sig: signal.signal(sig, stop) for sig in ENDING}
    try:
        yield
    finally:
        for sig, handler in old.items():
            signal.signal(sig, handler)


def _binary_runs(plan: _SweepPlan, options: Mapping[str, Any], staging: Path, say) -> tuple[list, list, list, Any]:
    """Every binary run of the sweep: (logs to import, records for run.json, why runs failed, how the sweep was
    stopped: None, or (reason, exit code) after a Ctrl-C or a SIGTERM/SIGHUP, the runs finished before kept)."""
    logs: list[str] = []
    runs: list[dict[str, Any]] = []
    failed: list[str] = []
    parts = segments(*plan.sizes)
    try:
        with _stopping():
            for name, binary, dtype, op in plan.commands():
                for k, part in enumerate(parts):
                    stem = f"{name}-{dtype}-{op}" + (f"-{k + 1}" if len(parts) > 1 else "")
                    record, log, why = _run_one(plan, options, name, binary, dtype, op, staging, say, part, stem)
                    runs.append(record)
                    logs += [log] if log else []
                    failed += [why] if why else []
    except KeyboardInterrupt:
        return logs, runs, failed, ("interrupted (SIGINT)", 130)
    except _Stopped as e:
        name = signal.Signals(e.signum).name
        return logs, runs, failed, (f"stopped by {name}", 128 + e.signum)
    return logs, runs, failed, None


def sweep(request: RunRequest) -> int:
    """``--engine nccl-tests``: run the binaries over comm's sweep and import their logs as a run of its table."""
    options = request.what.options[commtable.SUITE]
    plan = _plan_sweep(request, options, list(request.what.dtypes) if request.what.dtypes else None)
    out, cluster = request.how.out, request.how.cluster
    ensure_writable(out, cluster)
    console = out_console()
    staging = Path(tempfile.mkdtemp(prefix="gpubench-nccl-tests-"))
    # The run directory is made by the import, after the binaries: its start is when they began, not when the
    # import did (docs/measurements.md, comm).
    started = utc_now()
    for line in plan.skipped:
        console.print(f"nccl-tests: {line}", markup=False, highlight=False)
    try:
        logs, runs, failed, stopped = _binary_runs(plan, options, staging,
                                                   lambda line: console.print(line, markup=False, highlight=False))
        if not logs:
            if stopped:
                print(f"gpubench: {stopped[0]} before any nccl-tests run finished: nothing to keep", file=sys.stderr)
                return stopped[1]
            raise UsageError(f"every nccl-tests run failed: {'; '.join(failed)}")
        # The binaries inherited this process's environment: its NCCL_*/RCCL_* settings are the ones in force,
        # recorded as a measured run records its own (a setting such as NCCL_P2P_DIRECT_DISABLE changes figures).
        env = scrub(f"{k}={v}" for k, v in os.environ.items())
        layout = commtable.layout_name(*plan.layout())
        done = import_logs(logs, tool="nccl-tests", out=out, cluster=cluster, collective=None,
                           argv=list(request.argv), env=env,
                           method={"register": bool(options.get("register")), "layout": layout})
        rd = done.run_dir
        for item in runs:
            for key in ("log", "stderr"):
                shutil.copy2(staging / item[key], rd.path / item[key])
        rd.meta["engine"] = {"name": "nccl-tests", "iters": ITERS, "warmup": WARMUP,
                             "graph": all(r["graph"] for r in runs), "graph_launches": GRAPH_LAUNCHES,
                             "register": bool(options.get("register")), "launcher": plan.prefix,
                             "layout": layout, "threads": plan.layout()[0], "gpus_per_thread": plan.layout()[1],
                             "split_bytes": SPLIT_BYTES, "runs": runs, "failed": failed,
                             "not_run": plan.skipped}
        rd.meta["start_time"] = started
        if stopped:
            rd.meta.update(status="interrupted", error=f"{stopped[0]}: the {len(logs)} nccl-tests run(s) that "
                                                       "finished are kept")
        rd.flush()
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return _report(rd.path, done.warnings, failed, stopped, console)


def _report(path: Path, warnings: list[str], failed: list[str], stopped: Any, console) -> int:
    """The run's tables, warnings and directory on the terminal; its exit code."""
    df = results.load(path)
    for table in summary_tables(df, {commtable.SUITE: commtable.PARAMS}, {commtable.SUITE: commtable.SHOWN},
                                {commtable.SUITE: commtable.BLOCKS}):
        console.print(table)
    for line in warnings:
        console.print(f"warning: {line}", markup=False, highlight=False)
    console.print(f"run directory: {path}", markup=False, highlight=False)
    if stopped:
        print(f"gpubench: {stopped[0]}; the nccl-tests runs that finished are kept: {path}", file=sys.stderr)
        return stopped[1]
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
    try:
        worlds = sorted({r.world_size for r in read(log) if r.rows})
    except (ParseError, UsageError) as e:
        return f"its output could not be read: {e}"
    if worlds and worlds != [nproc]:
        return (f"world size {', '.join(map(str, worlds))}, expected {nproc}: under --nccl-tests-launcher the "
                "binaries must be an MPI build (make MPI=1) started as --nproc ranks")
    return None


def _gpus() -> int:
    import torch  # heavy, and only this path of the nccl-tests engine needs it

    return torch.cuda.device_count() if torch.cuda.is_available() else 0


__all__ = ["segments", "SPLIT_BYTES", "sweep"]
