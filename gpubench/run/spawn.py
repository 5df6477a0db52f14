"""gpubench's own launcher for one machine: one process per rank, supervised until the last one ends.

The parent hosts the rendezvous store, so it can read every rank's heartbeat. It runs the same command line in
each child with torchrun's variables set (plus GPUBENCH_SPAWNED), lets rank 0 print, and watches:
- a rank that dies (a signal, or an exit code other than 0, 1 or 130) ends the run: the others get a moment
  to notice, then are killed; nothing is left behind;
- if no rank makes progress for the timeout (all stalled inside one operation), or a live rank's heartbeat
  falls silent for the timeout (stopped, or wedged with its heartbeat thread), every rank is killed;
- either way the run directory rank 0 created is marked failed with a message naming the ranks;
- SIGTERM or SIGHUP to the parent (a job's time limit, ``timeout``, a closed terminal) ends the ranks too and
  marks the run interrupted with the signal's name: the ranks never outlive the process that started them (if
  it dies without a word, SIGKILL, they notice its store is gone: ``Group._watch``);
- SIGINT reaches the ranks through the parent only: each rank runs in a session of its own, so a terminal's
  Ctrl-C (sent to the foreground process group) and a ``kill -INT`` of the parent count the same, once each
  (the first stops the ranks after the current case, the second at once).
"""

from __future__ import annotations

import datetime as dt
import os
import signal
import sys
import threading
import time
from pathlib import Path

from gpubench.ranks.beats import laggards, machine, read_heartbeats
from gpubench.child import Child, command
from gpubench.run.request import RunRequest
from gpubench.results.rundir import mark_ended, saved

_POLL_S = 0.2
_STARTING_S = 300.0  # how long ranks may take to start (their first heartbeat) before the spawner gives up
_GRACE_S = 2.0  # after a rank died: time for the others to record their own view before they are killed
_ENDING = (signal.SIGTERM, signal.SIGHUP)  # signals that end the parent: it ends the ranks first
_NORMAL = (0, 1, 130)  # exit codes of a rank that ended on its own terms (1: a case failed; 130: Ctrl-C)


def _describe_exit(rank: int, child: Child) -> tuple[str, str]:
    """Why a rank's end ended the run, in words, and the run's status: ``interrupted`` for a rank that was asked
    to stop (SIGTERM, SIGHUP: it closed the run itself, exit 128+N), ``failed`` otherwise."""
    words = child.ended(0)
    status = "interrupted" if words.startswith("was stopped by") else "failed"
    return f"rank {rank} (pid {child.pid} on {os.uname().nodename}) {words}", status


def _wait(procs: list[Child], seconds: float) -> None:
    """Until every process has ended, or ``seconds`` have passed."""
    end = time.monotonic() + seconds
    while time.monotonic() < end and any(p.alive for p in procs):
        time.sleep(0.05)


def _kill_all(procs: list[Child]) -> None:
    """At once: the run is closed already (the ranks keep each case as they finish it); a rank asked to stop
    would only say so again."""
    for p in procs:
        p.kill()


class _Signals:
    """What the parent was sent, noted by its handlers and acted on by the supervising loop.

    The handlers only take note: an exception raised from one lands wherever the loop happens to be (inside
    reading the store, whose errors are caught and ignored, or between two steps of killing the ranks), and
    a Ctrl-C or a SIGTERM caught there was lost or half done. The loop looks at least every ``_POLL_S``.
    """

    def __init__(self):
        self.interrupts = 0  # SIGINTs received
        self.ended: str | None = None  # the name of the first SIGTERM/SIGHUP
        self._old: dict = {}

    def _interrupt(self, _signum, _frame) -> None:
        self.interrupts += 1

    def _end(self, signum, _frame) -> None:
        self.ended = self.ended or signal.Signals(signum).name

    def __enter__(self):
        if threading.current_thread() is threading.main_thread():  # Python sets handlers from there only
            self._old = {sig: signal.signal(sig, self._end) for sig in _ENDING}
            self._old[signal.SIGINT] = signal.signal(signal.SIGINT, self._interrupt)
        return self

    def __exit__(self, *exc):
        """Back to the handlers before: a second SIGTERM while the ranks are being stopped ends the parent."""
        for sig, old in self._old.items():
            signal.signal(sig, old)
        self._old = {}
        return False


def _run_dir(store) -> Path | None:
    """The run directory rank 0 published, if it got that far."""
    try:
        return Path(store.get("gpubench/run_dir").decode()) if store.check(["gpubench/run_dir"]) else None
    except Exception:  # noqa: BLE001 — no run directory to speak of
        return None


def _mark_ended(store, reason: str, status: str = "failed") -> Path | None:
    """Rank 0 published its run directory; if no one closed the run, record why it ended. Returns that directory
    (None if rank 0 published none)."""
    run = _run_dir(store)
    if run is None:
        return None
    try:
        mark_ended(run, status, reason)
    except Exception:  # noqa: BLE001 — nothing to mark
        pass
    return run


def run(request: RunRequest, nproc: int) -> int:
    """``request`` as ``nproc`` ranks on this machine, supervised (each rank is given its command line, as a
    launcher's ranks are); the exit code of the whole. (The command line then leaves without tearing torch down:
    gpubench.cli.entry. A library call, a test's, returns.)"""
    import torch.distributed as dist  # heavy: loaded only where ranks are started

    argv, timeout_s = list(request.argv[1:]), request.where.timeout

    store = dist.TCPStore("127.0.0.1", 0, nproc, True, timeout=dt.timedelta(seconds=timeout_s),
                          wait_for_workers=False)
    procs: list[Child] = []
    base = dict(os.environ)
    # Handlers before the first rank starts: no signal may leave one behind.
    with _Signals() as signals:
        for rank in range(nproc):
            env = dict(base, RANK=str(rank), WORLD_SIZE=str(nproc), LOCAL_RANK=str(rank),
                       LOCAL_WORLD_SIZE=str(nproc), MASTER_ADDR="127.0.0.1", MASTER_PORT=str(store.port),
                       GPUBENCH_SPAWNED="1", GPUBENCH_STORE_HOSTED="1")
            # A session of its own: signals meant for the run come through the parent, which forwards SIGINT
            # (were the ranks in the terminal's process group, a Ctrl-C would reach them directly and a
            # forwarded copy would count twice; outside it, a `kill -INT` of the parent alone would never reach
            # them). Without a controlling terminal a rank also never stops on job control when it writes to one.
            procs.append(Child(command("gpubench", *argv), env=env, session=True, quiet=rank != 0))
        failure, status = _supervise(procs, store, timeout_s, signals)
    ended = signals.ended
    if ended is not None:
        run = _mark_ended(store, f"gpubench was sent {ended}; the ranks were stopped", status="interrupted")
        _kill_all(procs)  # a second signal meets the default handler
        print(f"gpubench: error: stopped by {ended}; {saved(run)}", file=sys.stderr, flush=True)
        return 128 + signal.Signals[ended].value
    if failure is not None and failure != "interrupted":
        run = _mark_ended(store, failure, status)
        _kill_all(procs)
        print(f"gpubench: error: {failure}; {saved(run)}", file=sys.stderr, flush=True)
        return 1
    _kill_all(procs)  # none is left after a second Ctrl-C
    codes = [p.proc.returncode for p in procs]
    if failure == "interrupted" or 130 in codes:
        _mark_ended(store, "interrupted (Ctrl-C twice)", status="interrupted")  # only if rank 0 could not
        return 130
    return max(codes)


def _supervise(procs: list[Child], store, timeout_s: float, signals: _Signals) -> tuple[str | None, str]:
    """Watch the ranks until the last one ends, the run fails, or the parent is sent SIGTERM/SIGHUP
    (``signals.ended``): why the run failed ("interrupted" for a second Ctrl-C) or None, and the run's status.
    The ranks still running are left to the caller, who closes the run before it ends them."""
    failure: str | None = None
    status = "failed"
    nproc = len(procs)
    died_at = 0.0
    last_step, last_change = None, time.monotonic()
    forwarded = 0
    here = machine()
    while any(p.alive for p in procs):
        if signals.ended:
            return failure, status
        if signals.interrupts > forwarded:
            # Passed on to the ranks, each once: the first stops them after their case, a second ends them now
            # (they mark the run themselves; those still there after the grace are killed).
            forwarded = min(signals.interrupts, 2)
            for p in procs:
                if p.alive:
                    p.proc.send_signal(signal.SIGINT)
            if forwarded > 1:
                _wait(procs, _GRACE_S)
                _kill_all(procs)
                return failure or "interrupted", status
            continue
        time.sleep(_POLL_S)  # a signal's handler returns into the sleep: acted on within _POLL_S
        for rank, p in enumerate(procs):
            if not p.alive and p.proc.returncode not in _NORMAL and failure is None:
                (failure, status), died_at = _describe_exit(rank, p), time.monotonic()
        if failure:
            # The others get a moment to see it and say so themselves (rank 0 closes the run with its view).
            if time.monotonic() - died_at > _GRACE_S or not any(p.alive for p in procs):
                return failure, status
            continue
        # Backstop for the ranks' own watchdogs: nobody has moved for longer than they should have waited.
        beats = read_heartbeats(store, nproc)
        # A live rank whose heartbeat thread fell silent is stopped or wedged: end the run now rather than when
        # the others next need it (a --devices rank measures alone and may not need it for a whole case).
        now = time.time()
        silent = [r for r, b in beats.items() if procs[r].alive and now - b["time"] > timeout_s]
        if silent:
            return "no heartbeat for {:.0f} s: {}".format(
                timeout_s, laggards(beats, nproc, now=now, stale_s=timeout_s, here=here)), status
        step = tuple(sorted((r, b["step"]) for r, b in beats.items()))
        # Until every rank has beaten once they are starting (importing torch: a minute on a loaded host), and
        # their own watchdogs are not running yet: the backstop waits longer there.
        limit = timeout_s + 10 if len(beats) == nproc else max(timeout_s + 10, _STARTING_S)
        if step != last_step:
            last_step, last_change = step, time.monotonic()
        elif time.monotonic() - last_change > limit:
            return "no rank made progress for {:.0f} s: {}".format(
                timeout_s, laggards(beats, nproc, now=time.time(), stale_s=timeout_s, here=here)), status
    return failure, status


def default_nproc(backend_name: str) -> int:
    """One rank per local GPU; two on CPUs (the least that exercises a collective)."""
    if backend_name in ("cuda", "hip"):
        import torch

        return torch.cuda.device_count()
    return 2


__all__ = ["run", "default_nproc"]
