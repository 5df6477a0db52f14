"""How a process of a run ends when it cannot finish: its record closed, one line said, its exit code.

Every way out that is not the run's own end goes through :func:`end`: the watchdog's (a peer dead, stopped or
silent, the store gone), and SIGTERM or SIGHUP (a launcher's time limit or cancel: srun, mpirun, torchrun's agent,
gpubench's spawner). It marks the run directory ``failed`` or ``interrupted`` with the reason and the cases kept,
unless someone closed it first (the first word stands: rank 0, a peer that saw rank 0 go, the spawner), prints one
``gpubench: error:`` line (rank 0's says where the run is and what it kept) and leaves at once.

The signals are caught on a thread: a Python handler runs only on the main thread, between two bytecodes, and the
main thread of a rank may sit for minutes in a collective (gloo waits on a stopped peer). The C-level handler
writes the signal's number to a pipe (``signal.set_wakeup_fd``), and a thread reading it does the rest.
"""

from __future__ import annotations

import contextlib
import faulthandler
import os
import signal
import sys
import tempfile
import threading
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, Callable, NoReturn

from gpubench.results.rundir import count_kept, kept, mark_ended, saved

if TYPE_CHECKING:
    from gpubench.ranks.rank_group import RankGroup

ENDING = (signal.SIGTERM, signal.SIGHUP)
_SIGNAL_STORE_S = 0.4  # each store call made on a launcher's signal: a SIGKILL may follow within a second or two
_LOCK = threading.Lock()  # taken once, never given back: the process ends while it holds it
_state: dict[str, Any] = {"run": None, "group": None, "installed": False, "stderr": None}


def follow(run_dir: str | os.PathLike | None = None, group: RankGroup | None = None) -> None:
    """What to close and whom to ask when this process must end: its run directory, its ranks' group."""
    if run_dir is not None:
        _state["run"] = str(run_dir)
    if group is not None:
        _state["group"] = group


@contextlib.contextmanager
def mute_stderr(keep: Callable[[str], bool]) -> Iterator[None]:
    """File descriptor 2 into a file for the block's length (a library's C++ log lines); then the lines ``keep``
    accepts are written out. A line :func:`end` says meanwhile still goes out at once."""
    saved = os.dup(2)
    with tempfile.TemporaryFile() as held:
        sys.stderr.flush()
        os.dup2(held.fileno(), 2)
        _state["stderr"] = saved
        try:
            yield
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            _state["stderr"] = None
            os.close(saved)
            held.seek(0)
            text = held.read().decode(errors="replace")
            sys.stderr.write("".join(ln for ln in text.splitlines(True) if keep(ln)))
            sys.stderr.flush()


def forget(group: RankGroup) -> None:
    """``group`` was left: a later ending has no group to ask (a check's station joins one group after another)."""
    if _state["group"] is group:
        _state["group"] = None


def end(status: str, reason: str, code: int, then: Callable[[], None] | None = None) -> NoReturn:
    """Mark the run ``status`` with ``reason`` (if it is still running), say so in one line, do ``then``, exit
    ``code``. A launcher's SIGKILL may cut it short anywhere after its SIGTERM: the record and the line come first,
    what may take a while (``then``, counting the cases kept) after."""
    _LOCK.acquire()  # a second ending (the watchdog and a signal at once) waits here for the process to go
    run, group = _state["run"], _state["group"]
    closed = _close(run, status, reason)
    line, n = reason, None
    if run and (group is None or group.rank == 0):
        try:
            n = kept(run)  # read once: for rank 0's line and for the record
            line = f"{reason}; {saved(run, n)}"
        except Exception:  # noqa: BLE001
            line = f"{reason}; run directory: {run}"
    try:
        sys.stdout.flush()  # what the run printed before (rank 0's table) goes out before the process does
        sys.stderr.flush()
        os.write(_state.get("stderr") or 2, f"gpubench: error: {line}\n".encode())  # past a muted fd 2 (mute_stderr)
        if os.environ.get("GPUBENCH_DEBUG_HANG"):
            faulthandler.dump_traceback(all_threads=True)  # where each thread of this process was
        if then is not None:
            then()
        if closed:
            count_kept(run, reason, n)
        elif run:
            # Closed by this process's main thread (a lost peer, then the launcher's SIGTERM while it counted: torchrun,
            # rank 0 killed) or by a peer: counted here where nobody has yet, as this exit would cut that count short.
            count_kept(run, None, n)
    finally:
        os._exit(code)


def _close(run: str | None, status: str, reason: str) -> bool:
    """Mark ``run`` ``status`` with ``reason`` if it is still running, its cases not yet counted (:func:`end`
    counts them once its line is said); whether it did."""
    try:
        return bool(run) and mark_ended(run, status, reason, count=False)
    except Exception:  # noqa: BLE001 — ending matters more than the record; the reader shows it abandoned
        return False


def _on_signal(signum: int) -> NoReturn:
    name = signal.Signals(signum).name
    group = _state["group"]
    status, reason = "interrupted", f"stopped by {name}"
    if group is not None:
        reason = f"rank {group.rank} {reason}"
        # A peer already lost: the launcher's signal only followed (mpirun and torchrun end the others when one rank
        # dies). One short store call before the record: Open MPI's SIGKILL follows its SIGTERM within a second, and a
        # run closed later stayed "running" (docs/measurements.md, 'Faults').
        words, lost_status, lost = group.account(wait=False, deadline_s=_SIGNAL_STORE_S)
        if lost or group.trouble:
            status, reason = lost_status, f"{group.trouble or 'a peer was lost'}: {words}; then {reason}"
        # The last beat after the record and the line: the peers name this rank and the signal, not a silence.
        end(status, reason, 128 + signum, then=lambda: group.say_ended(name, _SIGNAL_STORE_S))
    end(status, reason, 128 + signum)


def _reader(fd: int) -> None:
    while True:
        try:
            data = os.read(fd, 64)
        except InterruptedError:
            continue
        except OSError:
            return
        for b in data:
            if b in ENDING:
                _on_signal(b)


def _ignore(_signum, _frame) -> None:
    """The main thread's part: nothing (the reader thread ends the process; this only keeps SIGTERM from killing
    it before then)."""


def install() -> None:
    """Catch SIGTERM and SIGHUP for this process (from the main thread; once)."""
    if _state["installed"] or threading.current_thread() is not threading.main_thread():
        return
    r, w = os.pipe()
    os.set_blocking(w, False)
    signal.set_wakeup_fd(w, warn_on_full_buffer=False)
    for sig in ENDING:
        signal.signal(sig, _ignore)
    threading.Thread(target=_reader, args=(r,), name="gpubench-signals", daemon=True).start()
    _state["installed"] = True


__all__ = ["install", "follow", "forget", "end", "mute_stderr", "ENDING"]
