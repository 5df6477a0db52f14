"""Running nccl-tests / rccl-tests binaries: find ``<collective>_perf``, build its command line, run it with a
timeout and a stall detector that end the whole process group.

The output of :func:`run_binary` is read with :func:`gpubench.nccltests.parse_text` (or, when the binary
wrote ``-J`` JSON, :func:`gpubench.nccltests.parse_json` on the file :func:`json_written_to` names).
"""

from __future__ import annotations

import functools
import os
import re
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

from gpubench.toolkit import UsageError
from gpubench.toolkit.nccl import NCCL_TYPES
from gpubench.suites.comm.table import TO_NCCL_TYPE

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
    try:
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
    finally:
        # Also when this process is interrupted: the binary runs in a session of its own, where neither a
        # terminal's Ctrl-C nor a signal to this process reaches it, and left alone it went on holding the GPUs.
        _end_group(proc)
        for c in (out, err):
            c.thread.join(timeout=5.0)
    elapsed = time.monotonic() - start
    if failure:
        failure.stdout, failure.stderr, failure.elapsed = out.text(), err.text(), elapsed
        raise failure
    return out.text(), err.text(), proc.returncode, elapsed


__all__ = ["BinaryError", "BinaryStalled", "BinaryTimeout", "build_command", "find_binary", "json_written_to",
           "run_binary", "supports_graph", "supports_json"]
