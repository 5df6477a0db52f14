"""Running nccl-tests / rccl-tests binaries: find ``<collective>_perf``, build its command line, run it with a
timeout and a stall detector that end the whole process group.

The output of :func:`run_binary` is read with :func:`gpubench.nccltests.parse_text` (or, when the binary
wrote ``-J`` JSON, :func:`gpubench.nccltests.parse_json` on the file :func:`json_written_to` names).
"""

from __future__ import annotations

import functools
import os
import re
import shlex
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpubench import results
from gpubench.console import out_console, summary_tables
from gpubench.errors import UsageError
from gpubench.nccltests.envscrub import scrub
from gpubench.nccltests.model import NCCL_TYPES, ParseError
from gpubench.ranks.env import detect
from gpubench.request import RunRequest
from gpubench.rundir import ensure_writable, utc_now
from gpubench.suites.comm import table as commtable
from gpubench.suites.comm.importer import import_logs, read
from gpubench.suites.comm.table import COLLECTIVES, DTYPES, GPU_QUICK, GPU_SIZES, TO_NCCL_TYPE, canonical_dtype

ENV_DIRS = ("NCCL_TESTS_DIR", "RCCL_TESTS_DIR")
HOW_TO_BUILD = ("build nccl-tests (git clone https://github.com/NVIDIA/nccl-tests && make -C nccl-tests MPI=1; "
                "rccl-tests for ROCm) and pass --nccl-tests-dir DIR or set NCCL_TESTS_DIR=DIR")


class BinaryError(RuntimeError):
    """The binary did not finish on its own; ``stdout``/``stderr`` hold what it printed until it was ended."""

    def __init__(self, message: str, stdout: str = "", stderr: str = "", elapsed: float = 0.0):
        super().__init__(message)
        self.stdout, self.stderr, self.elapsed = stdout, stderr, elapsed


class BinaryTimeout(BinaryError):
    pass


class BinaryStalled(BinaryError):
    pass


def _executable(path: Path) -> bool:
    return path.is_file() and os.access(path, os.X_OK)


def find_binary(collective: str, dirs: Sequence[str | os.PathLike] | None = None) -> Path:
    """``<collective>_perf`` (or ``_perf_mpi``, a ``NAME_SUFFIX=_mpi`` build): in ``dirs`` (each and its
    ``build/``), then ``$NCCL_TESTS_DIR`` and ``$RCCL_TESTS_DIR`` (likewise), then PATH."""
    names = (f"{collective}_perf", f"{collective}_perf_mpi")
    looked: list[str] = []
    places: list[Path] = []
    for d in dirs or ():
        places += [Path(d), Path(d) / "build"]
    for var in ENV_DIRS:
        value = os.environ.get(var)
        if value:
            places += [Path(value), Path(value) / "build"]
        else:
            looked.append(f"${var} (unset)")
    for place in places:
        for name in names:
            if _executable(place / name):
                return place / name
        looked.append(str(place))
    for name in names:
        found = shutil.which(name)
        if found:
            return Path(found)
    looked.append("PATH")
    raise UsageError(f"no {names[0]} found (looked in {', '.join(looked)}): {HOW_TO_BUILD}")


@functools.lru_cache(maxsize=32)
def _help_text(binary: str, mtime: float, timeout_s: float) -> str:
    try:
        out = subprocess.run([binary, "-h"], capture_output=True, text=True, timeout=timeout_s,
                             stdin=subprocess.DEVNULL, start_new_session=True)
    except (OSError, subprocess.SubprocessError):
        return ""
    return out.stdout + out.stderr


def _help(binary: str | os.PathLike, timeout_s: float) -> str:
    """``binary -h``, asked once per binary file."""
    path = Path(binary)
    try:
        mtime = path.stat().st_mtime
    except OSError:
        return ""
    return _help_text(str(path.resolve()), mtime, timeout_s)


def supports_json(binary: str | os.PathLike, timeout_s: float = 10.0) -> bool:
    """Whether the binary takes ``-J FILE``: nccl-tests 2.17.3+ lists "[-J,--output_file <file> ...]". rccl-tests
    has --output_file too, as -x, writing its own CSV/JSON reports: only -J means nccl-tests' JSON."""
    return re.search(r"-J,\s*--output_file\b", _help(binary, timeout_s)) is not None


def supports_graph(binary: str | os.PathLike, timeout_s: float = 10.0) -> bool:
    """Whether the binary takes ``-G N`` (CUDA/HIP graph launches: nccl-tests 2.13+ and rccl-tests list
    "[-G,--cudagraph <num graph launches>]")."""
    return re.search(r"-G,\s*--cudagraph\b", _help(binary, timeout_s)) is not None


def build_command(binary: str | os.PathLike, *, min_bytes: int, max_bytes: int, step_factor: int, dtype: str,
                  op: str, iters: int, warmup: int, check: bool = True, graph: bool | int = False,
                  ngpus: int = 1, nthreads: int = 1, json_path: str | os.PathLike | None = None,
                  launcher_prefix: Sequence[str] = (), register: bool = False) -> list[str]:
    """argv for one sweep: ``-b -e -f -d -o -n -w -c -G -t -g``, ``-R 1`` when ``register``, and ``-J`` when
    asked for and supported.

    ``dtype`` is gpubench's name (float32) or nccl-tests' (float); ``op`` "none" leaves ``-o`` out (a
    non-reducing collective); ``graph`` True is one CUDA graph launch per timing (``-G 1``), an int that many;
    ``nthreads`` threads per process (``-t``, left out at 1), each driving ``ngpus`` GPUs (``-g``).
    """
    if not (1 <= min_bytes <= max_bytes):
        raise UsageError(f"sizes must satisfy 1 ≤ min ({min_bytes}) ≤ max ({max_bytes})")
    if step_factor < 2:
        raise UsageError(f"step factor {step_factor} must be an integer ≥ 2 (nccl-tests -f)")
    if iters < 1 or warmup < 0 or ngpus < 1 or nthreads < 1:
        raise UsageError("iters must be ≥ 1, warmup ≥ 0, and nthreads and ngpus ≥ 1")
    nccl_type = TO_NCCL_TYPE.get(dtype, dtype)
    if nccl_type not in NCCL_TYPES:
        raise UsageError(f"dtype {dtype!r} has no nccl-tests type: one of {', '.join(TO_NCCL_TYPE)}")
    argv = [*launcher_prefix, str(binary), "-b", str(min_bytes), "-e", str(max_bytes), "-f", str(step_factor),
            "-d", nccl_type]
    if op != "none":
        argv += ["-o", op]
    argv += ["-n", str(iters), "-w", str(warmup), "-c", "1" if check else "0"]
    argv += ["-t", str(nthreads)] if nthreads > 1 else []
    argv += ["-g", str(ngpus)]
    launches = int(graph)
    if launches:
        argv += ["-G", str(launches)]
    if register:  # ncclCommRegister on its buffers (which nccl-tests takes from ncclMemAlloc in any case)
        argv += ["-R", "1"]
    if json_path is not None and supports_json(binary):
        argv += ["-J", str(json_path)]
    return argv


def json_written_to(stdout: str) -> str | None:
    """The file nccl-tests wrote its JSON to: it appends .0, .1, ... rather than overwrite an existing one."""
    m = re.search(r"^#\s*Writing JSON output to\s+(\S+)", stdout, re.M)
    return m.group(1) if m else None


class _Collector:
    """Reads one pipe in a thread, noting when each complete line arrived."""

    def __init__(self, stream, watch: _Watch):
        self.chunks: list[bytes] = []
        self._stream, self._watch = stream, watch
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self) -> None:
        while True:
            chunk = self._stream.read1(65536)
            if not chunk:
                return
            self.chunks.append(chunk)
            if b"\n" in chunk:
                self._watch.saw(b"".join(self.chunks))

    def text(self) -> str:
        return b"".join(self.chunks).decode(errors="replace")


class _Watch:
    def __init__(self):
        self.lock = threading.Lock()
        self.last = time.monotonic()
        self.last_line = ""

    def saw(self, data: bytes) -> None:
        lines = [x for x in data.decode(errors="replace").splitlines() if x.strip()]
        with self.lock:
            self.last = time.monotonic()
            if lines:
                self.last_line = lines[-1]


def _end_group(proc: subprocess.Popen, grace_s: float = 2.0) -> None:
    """SIGTERM then SIGKILL to the binary's whole process group (its mpirun, its children)."""
    for sig, wait in ((signal.SIGTERM, grace_s), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=wait)
            if sig == signal.SIGTERM:
                # The leader is gone; leftovers of its group still get the KILL below.
                continue
        except subprocess.TimeoutExpired:
            continue


def run_binary(argv: Sequence[str], timeout_s: float, env: Mapping[str, str] | None = None, *,
               stall_s: float | None = 300.0, poll_s: float = 0.05) -> tuple[str, str, int, float]:
    """Run ``argv`` in its own process group → (stdout, stderr, returncode, elapsed seconds).

    ``env``, when given, is the whole environment (pass ``{**os.environ, "NCCL_ALGO": "Ring"}`` to add to it).

    Past ``timeout_s``, or with no new output line for ``stall_s`` seconds (None: no stall check), the whole
    group is ended and :class:`BinaryTimeout` / :class:`BinaryStalled` raised, carrying what was printed. When
    the binary exits, whatever it left running in its group is ended too (it would hold the pipes open).
    """
    start = time.monotonic()
    try:
        proc = subprocess.Popen(list(argv), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                stdin=subprocess.DEVNULL, env=dict(env) if env is not None else None,
                                start_new_session=True)
    except OSError as e:
        raise UsageError(f"cannot run {argv[0]}: {e.strerror or e}") from e
    watch = _Watch()
    out, err = _Collector(proc.stdout, watch), _Collector(proc.stderr, watch)
    failure: BinaryError | None = None
    name = Path(argv[0]).name if argv else "binary"
    while proc.poll() is None:
        now = time.monotonic()
        with watch.lock:
            quiet, last_line = now - watch.last, watch.last_line
        if now - start > timeout_s:
            failure = BinaryTimeout(f"{name} ran past its {timeout_s:g} s limit and was ended; its last line: "
                                    f"{last_line!r}")
        elif stall_s is not None and quiet > stall_s:
            after = f"after the line {last_line!r}" if last_line else "before printing any line"
            failure = BinaryStalled(f"{name} stalled: no output for {stall_s:g} s {after}; it was ended")
        if failure:
            break
        time.sleep(poll_s)
    _end_group(proc)
    for c in (out, err):
        c.thread.join(timeout=5.0)
    elapsed = time.monotonic() - start
    if failure:
        failure.stdout, failure.stderr, failure.elapsed = out.text(), err.text(), elapsed
        raise failure
    return out.text(), err.text(), proc.returncode, elapsed


# --- the sweep: ``gpubench run --suite comm --engine nccl-tests``: the same sweep as the native engine, run by the
# nccl-tests
# (or rccl-tests) binaries, and brought into the same comm table through the importer.
#
# One binary run per (collective, dtype, op), ``-n 20 -w 5 -c 1`` (nccl-tests' usual timing and its validation),
# ``-G 10`` in graphs (the default; --eager leaves it out), ``-R 1`` with ``--register``. Each run's stdout, stderr
# and exact command are kept in the run directory.
#
# The ranks are laid out as the torch engine lays out its own, one rank per GPU: one process whose N threads each
# drive one GPU (``-t N -g 1``, the default layout "thread per GPU"), or under ``--nccl-tests-launcher 'mpirun -np
# N'`` N processes of one GPU each ("process per GPU"; an MPI build, ``make MPI=1``). ``--nccl-tests-layout
# one-thread`` asks for ``-g N`` instead, one thread driving every GPU: on 4 × H100 that read all_reduce at 1 MiB
# 52.7–57.4 GB/s busbw against 92.4 for ``-t 4 -g 1 -G 10`` and the torch engine (2026-11-26, issue 45), its
# thread issuing every GPU's call in turn. A build without MPI under a launcher would start N unrelated worlds of
# one GPU, so every log's world size is checked against --nproc before it is imported. gpubench itself is never
# under that launcher: started by one, it refuses, and the binaries' own output is for ``gpubench import``.


ITERS, WARMUP = 20, 5
# Graph launches per timing (-G): nccl-tests captures its -n iterations in one graph and launches it this many
# times. One launch per timing (-G 1) left the launch's host cost in small sizes: 4 × H100, all_reduce 1 MiB read
# 80.6–82.6 GB/s busbw with -t 4 -g 1 -G 1, 92.4–92.7 with -G 10, the torch engine's graphs 92.4–92.6 (2026-11-26).
GRAPH_LAUNCHES = 10
LAYOUTS = ("threads", "one-thread")
# nccl-tests warms up at every size of its sweep, smallest to largest, then times from the smallest: its first
# sizes are timed right after its heaviest calls. On 4 × H100 (2026-11-27, issue 45; results/reference/h100x4/
# sweep-max-20261127/) a sweep to 4 GiB read all_reduce at 2 MiB 104.5–104.7 GB/s busbw and reduce_scatter
# 72.4–85.1, a sweep to 8 MiB 120.3–121.3 and 96.8–97.0 (one machine, the two alternated twice; the torch engine,
# which warms each size up on its own, read 122.0 and 96.6 on two others); from 16 MiB the two engines agreed in
# sweeps to 4 GiB. So a sweep that crosses this size runs as two binary runs: the sizes under it, then the rest.
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
    names = options.get("collectives") or list(COLLECTIVES)
    unknown = [c for c in names if c not in COLLECTIVES]
    if unknown:
        raise UsageError(f"unknown collective {', '.join(unknown)}: choose from {', '.join(COLLECTIVES)}")
    kinds = [canonical_dtype(d) for d in (dtypes or ["float32"])]
    bad = [d for d in kinds if d not in DTYPES]
    if bad:
        raise UsageError(f"comm has no dtype {', '.join(bad)}: choose from {', '.join(DTYPES)}")
    dirs = [options["nccl_tests_dir"]] if options.get("nccl_tests_dir") else None
    binaries = {c: find_binary(c, dirs) for c in names}
    nproc = request.where.nproc or _gpus()
    if nproc < 1:
        raise UsageError("nccl-tests needs GPUs and this machine shows none")
    layout = options.get("nccl_tests_layout") or "threads"
    if options.get("nccl_tests_launcher") and layout == "one-thread":
        raise UsageError("--nccl-tests-layout one-thread runs one process (-g N): leave --nccl-tests-launcher out, "
                         "or the layout (the launcher's processes each drive one GPU)")
    return _SweepPlan(binaries, kinds, options.get("op") or ["sum"], _sweep(request.how.quick, options), nproc,
                      _launcher(options.get("nccl_tests_launcher")), request.where.timeout,
                      one_thread=layout == "one-thread")


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


def sweep(request: RunRequest) -> int:
    """``--engine nccl-tests``: run the binaries over comm's sweep and import their logs as a run of its table."""
    options = request.what.options[commtable.SUITE]
    plan = _plan_sweep(request, options, list(request.what.dtypes) if request.what.dtypes else None)
    out, cluster = request.how.out, request.how.cluster
    ensure_writable(out, cluster)
    console = out_console()
    staging = Path(tempfile.mkdtemp(prefix="gpubench-nccl-tests-"))
    logs, runs, failed = [], [], []
    # The run directory is made by the import, after the binaries: its start is when they began, not when the
    # import did (run.json read start == end for every such run, 4 x H200, 2026-11-28).
    started = utc_now()
    try:
        parts = segments(*plan.sizes)
        for name, binary, dtype, op in plan.commands():
            for k, part in enumerate(parts):
                stem = f"{name}-{dtype}-{op}" + (f"-{k + 1}" if len(parts) > 1 else "")
                record, log, why = _run_one(plan, options, name, binary, dtype, op, staging,
                                            lambda line: console.print(line, markup=False, highlight=False), part, stem)
                runs.append(record)
                logs += [log] if log else []
                failed += [why] if why else []
        if not logs:
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
                             "split_bytes": SPLIT_BYTES, "runs": runs, "failed": failed}
        rd.meta["start_time"] = started
        rd.flush()
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    df = results.load(rd.path)
    for table in summary_tables(df, {commtable.SUITE: commtable.PARAMS}, {commtable.SUITE: commtable.SHOWN},
                                {commtable.SUITE: commtable.BLOCKS}):
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


__all__ = ["BinaryError", "BinaryStalled", "BinaryTimeout", "build_command", "find_binary", "json_written_to",
           "segments", "SPLIT_BYTES",
           "run_binary", "supports_json", "sweep"]
