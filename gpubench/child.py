"""A process gpubench starts (a run's worker, a rank its spawner starts, a check's station, an autotune trial): its
command line, its start, the lines it answers on its standard output, its reaping, and how it ended in words.

Its command line runs a gpubench module as ``python -m`` does, without the current folder on the path: ``python -m
gpubench`` puts the current folder first on ``sys.path``, so a folder there named ``gpubench`` (a clone of the
repository) would be imported instead of the installed package and every child would fail on its first import.
Python 3.11's ``-P`` leaves that folder out; on 3.10 the module runs from a ``-c`` that first takes it off the path.
"""

from __future__ import annotations

import queue
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from typing import IO


def command(module: str, *args: str) -> list[str]:
    """``[python, ..., module, *args]``: runs ``module`` as ``python -m`` does, without the current folder on the
    path."""
    if sys.version_info >= (3, 11):
        return [sys.executable, "-P", "-m", module, *args]
    code = ("import sys, runpy; sys.path.pop(0); "  # '' (the current folder), which -c puts first
            f"runpy.run_module({module!r}, run_name='__main__', alter_sys=True)")
    return [sys.executable, "-c", code, *args]


def ended(returncode: int | None) -> str:
    """How a process ended, in words: "was killed by SIGKILL", "was stopped by SIGTERM" (it caught the signal and
    left as asked, exit 128 + N), "ended with exit code N", or "stopped answering" (it has not ended)."""
    if returncode is None:
        return "stopped answering"
    if returncode < 0:
        return f"was killed by {_signal_name(-returncode)}"
    if returncode - 128 in (signal.SIGTERM, signal.SIGHUP):
        return f"was stopped by {_signal_name(returncode - 128)}"
    return f"ended with exit code {returncode}"


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


class Gone(Exception):
    """The child closed its output (it ended, or is ending): :meth:`Child.ended` says how."""


class Child:
    """One started process. With ``pipes`` it reads lines on its standard input and answers lines on its standard
    output, read here by a thread of their own (so that waiting for an answer is bounded by a timeout, whatever the
    child does); without, it writes where this process does (a rank of gpubench's spawner)."""

    def __init__(self, argv: list[str], *, env: dict[str, str] | None = None, pipes: bool = False,
                 stderr: IO[bytes] | None = None, session: bool = False, quiet: bool = False):
        """``session``: a session of its own (signals reach it through this process only); ``quiet``: its standard
        output goes nowhere (a rank but rank 0)."""
        out = subprocess.PIPE if pipes else subprocess.DEVNULL if quiet else None
        self.proc = subprocess.Popen(argv, env=env, stdin=subprocess.PIPE if pipes else None, stdout=out,
                                     stderr=stderr, text=True, bufsize=1, start_new_session=session)
        self._lines: queue.Queue[str | None] = queue.Queue()
        if pipes:
            threading.Thread(target=self._read, name=f"gpubench-child-{self.proc.pid}", daemon=True).start()

    @property
    def pid(self) -> int:
        return self.proc.pid

    @property
    def alive(self) -> bool:
        return self.proc.poll() is None

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self._lines.put(line.rstrip("\n"))
        self._lines.put(None)  # its output closed: it ended

    def send(self, line: str) -> None:
        """One line to its standard input; :class:`Gone` where it can no longer read."""
        try:
            assert self.proc.stdin is not None
            self.proc.stdin.write(line + "\n")
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError, ValueError):
            raise Gone() from None

    def line(self, timeout_s: float, stop: Callable[[], bool] | None = None) -> str | None:
        """Its next line within ``timeout_s`` (None where none came, or ``stop`` turned true meanwhile);
        :class:`Gone` once its output has closed (every later call learns it too)."""
        end = time.monotonic() + timeout_s
        while True:
            try:
                got = self._lines.get(timeout=max(0.0, min(0.05, end - time.monotonic())))
            except queue.Empty:
                if (stop is not None and stop()) or time.monotonic() >= end:
                    return None
                continue
            if got is None:
                self._lines.put(None)
                raise Gone()
            return got

    def ended(self, wait_s: float = 5.0) -> str:
        """How it ended (waiting up to ``wait_s`` for it to): :func:`ended`'s words."""
        try:
            return ended(self.proc.wait(timeout=wait_s))
        except subprocess.TimeoutExpired:
            return ended(None)

    def hang_up(self) -> None:
        """End of its input: a child that reads jobs leaves once its job is done."""
        try:
            if self.proc.stdin is not None:
                self.proc.stdin.close()
        except OSError:
            pass

    def reap(self, grace_s: float, term_s: float | None = 3.0) -> bool:
        """End it: end of input and ``grace_s`` to leave, then SIGTERM and ``term_s`` (None: none), then SIGKILL.
        Whether it had to be told to stop."""
        self.hang_up()
        try:
            self.proc.wait(timeout=grace_s)
            return False
        except subprocess.TimeoutExpired:
            pass
        if term_s is not None:
            try:
                self.proc.terminate()
                self.proc.wait(timeout=term_s)
                return True
            except (OSError, subprocess.TimeoutExpired):
                pass
        self.kill()
        return True

    def kill(self) -> None:
        """At once (SIGKILL), and reaped."""
        if self.proc.poll() is None:
            try:
                self.proc.kill()
            except OSError:
                pass
        self.proc.wait()


__all__ = ["command", "ended", "Child", "Gone"]
