"""The ranks of a multi-process run: the data plane (NCCL/RCCL or gloo) that suites time, and a gloo control
plane on which the ranks agree (the engine's decisions, a case's outcome, Ctrl-C), so that every rank calls
every collective the same number of times.

A rank never hangs for longer than ``timeout_s`` (plus a few seconds; while the group comes up, a minute for a peer
that has not started yet: :data:`_START_GRACE_S`): a heartbeat thread publishes this rank's
progress (:mod:`gpubench.ranks.beats`) to the rendezvous store, and a watchdog thread ends the process when its own
progress has stopped for ``timeout_s`` and no other rank has moved in that time either (a rank waiting for a peer
that is still at work, slowed by a loaded host, waits on). Before it does, it names the ranks that did not arrive
(behind the others, silent, ended, or gone or stopped on this machine) and their hosts. Every store call the
watchdog makes is bounded by a deadline of its own (:mod:`gpubench.ranks.store`): the store's host may be the
rank that stopped. It also ends the process when the store stays out of reach: whoever hosts it (gpubench's
spawner, torchrun's agent, rank 0) is gone, and the ranks, whose collectives no longer need the store, would
otherwise run on as orphans. The process ends through :func:`gpubench.ranks.ending.end`: the run marked, one
line, exit 1.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import re
import threading
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from gpubench.errors import UsageError, first_line
from gpubench.ranks import beats, ending
from gpubench.ranks.beats import HEARTBEAT_S, STALE_S, laggards, read_heartbeats
from gpubench.ranks.env import RankEnv, rendezvous_hint
from gpubench.ranks.store import BoundedStore, FileRendezvous, RendezvousError, TcpRendezvous

if TYPE_CHECKING:
    import torch
    from torch.distributed import Store

# How long the store may stay out of reach when gpubench's own spawner hosts it on this machine: a local store
# answers at once while its process lives. Elsewhere (torchrun's agent, rank 0 on another node) the timeout.
_LOCAL_STORE_GONE_S = 3.0
# A heartbeat read or write: a live store answers in milliseconds; this is a store whose host is stopped or gone.
_DEADLINE_S = 5.0
_GLOO_BACKSTOP_S = 600.0
# The ranks a launcher starts together come up apart (torch's import alone takes seconds, more on a busy host): for
# this long after a rank starts, a peer not started yet, the store's host too, is still coming whatever --timeout says
# (docs/measurements.md, 'Faults'). A rank lost once the group is up is named after --timeout.
_START_GRACE_S = 60.0
# But a rank ready to meet waits for the store itself no longer than --timeout and this (a wrong address, a rank 0
# that never came: said in seconds, not minutes), counted from its imports' end, which on busy cores outlast --timeout.
_CONNECT_SLACK_S = 5.0
_HANDSHAKE_S = 5.0  # a store that listens answers torch's client within this, unless its host is starved
_POLITE = ("SIGTERM", "SIGHUP", "SIGINT")  # a rank that ended on one of these was stopped, not lost
_SETUP = ("", "init")  # where a rank is before its group is ready: its first beat, then the process group's init


SPAWNER, CHECK = "gpubench's spawner", "the gpubench check"  # parents that hold the store up (GPUBENCH_STORE_HOSTED)


def store_host(env: dict[str, str] | None = None) -> str:
    """Who holds the rendezvous store up: gpubench's spawner (which hosts it), the gpubench check (whose folder holds
    its stations' store files: GPUBENCH_STORE_HOSTED=check), torchrun's agent, or rank 0."""
    env = os.environ if env is None else env
    hosted = env.get("GPUBENCH_STORE_HOSTED")
    if hosted == "1":
        return SPAWNER
    if hosted == "check":
        return CHECK
    if env.get("TORCHELASTIC_USE_AGENT_STORE") == "True":
        return "torchrun's agent"
    return "rank 0"


def parent_gone(host: str, rank: int, address: str, pid: int | None, node: str) -> str:
    """The line of a rank whose parent, which held its store up, is gone: gpubench's spawner hosts the store
    itself; a check's stations keep it in a file of the check's, and end with the check."""
    if host == CHECK:
        return f"rank {rank}: the gpubench check (pid {pid} on {node}) that started this measuring process is gone"
    return f"rank {rank} lost the rendezvous store at {address}: {host} (pid {pid} on {node}), which hosts it, is gone"


# A line of torch's C++ log (optionally behind a "[rank0]:" prefix), or of the stack frames that follow one.
_C10D_LOG = re.compile(r"^(\[rank\d+\]:)?(\[[WEI]\d{4} [^]]*\]|Exception raised from |frame #\d+|<omitting python "
                       r"frames>|\s*$)")



class GroupError(RuntimeError):
    """The group can no longer agree (a rank died, or a control-plane operation failed): the run must end.
    ``status``: the run's, ``interrupted`` where every lost rank ended on a signal that asks to stop (SIGTERM)."""

    def __init__(self, message: str, status: str = "failed"):
        super().__init__(message)
        self.status = status


class Group:
    """This process's place among the ranks, and the operations through which the ranks agree."""

    def __init__(self, renv: RankEnv, data_backend: str, timeout_s: float, device: str | torch.device | None = None,
                 rendezvous: TcpRendezvous | FileRendezvous | None = None):
        import torch
        import torch.distributed as dist

        self.renv = renv
        self.rank = renv.rank
        self.world_size = renv.world_size
        self.timeout_s = timeout_s
        self.data_backend = data_backend
        self.trouble: str | None = None  # set once a control-plane operation failed: a peer is being lost
        self._step = 0
        self._where = ""
        self._last_change = time.time()
        self._ended: str | None = None  # the signal this rank ends on, for its last beat
        self._stop = threading.Event()
        self._here = beats.machine()
        self._started = beats.started(os.getpid())
        self._roster: dict[int, dict[str, Any]] = {}  # the last beats read: who each rank is, where
        self._store_host = store_host()
        parent = self._store_host in (SPAWNER, CHECK)
        self._store_grace_s = _LOCAL_STORE_GONE_S if parent else timeout_s
        # gpubench's spawner (or the check) is this rank's parent: its end is seen at once, as a new parent; the
        # store's clients notice only after their retries and the grace (docs/measurements.md, 'Faults').
        self._spawner = os.getppid() if parent else None
        # Until then a peer may still be starting (a loaded host starts ranks seconds apart): see _START_GRACE_S.
        self._starting_until = time.time() + max(timeout_s, _START_GRACE_S)
        # The launcher's store at MASTER_ADDR:MASTER_PORT, or one its parent made (the check's stations: a file).
        self._rdv = rendezvous or TcpRendezvous(renv.master_addr, renv.master_port, renv.world_size,
                                                hint=rendezvous_hint(renv))
        self.store = self._connect(renv.rank == 0 and self._store_host == "rank 0")
        # Beats go out and are read on clients of their own, each call bounded: never the client above.
        connect = lambda: self._rdv.client(min(timeout_s, _DEADLINE_S))  # noqa: E731
        self._writer, self._reader = BoundedStore(connect, _DEADLINE_S), BoundedStore(connect, _DEADLINE_S)
        self._first_beat(self._starting_until)
        self._thread = threading.Thread(target=self._watch, name="gpubench-watchdog", daemon=True)
        self._thread.start()
        ending.follow(group=self)
        timeout = dt.timedelta(seconds=timeout_s)
        # gloo's collectives wait on (a --devices rank done first waits for a peer still measuring, which gloo's own
        # timeout ended): the watchdog decides, this is its backstop. NCCL's stays --timeout (its watchdog aborts).
        gloo_timeout = dt.timedelta(seconds=max(10 * timeout_s, _GLOO_BACKSTOP_S))
        kwargs = {}
        if data_backend == "nccl" and device is not None:
            kwargs["device_id"] = torch.device(device)  # eager NCCL init: a missing rank fails here, named
        self.step("init")
        dist.init_process_group(data_backend, store=dist.PrefixStore("pg", self.store), rank=renv.rank,
                                world_size=renv.world_size, timeout=gloo_timeout if data_backend == "gloo" else timeout,
                                **kwargs)
        self.data = dist.group.WORLD
        self.control = (self.data if data_backend == "gloo"
                        else dist.new_group(backend="gloo", timeout=gloo_timeout))
        self.step("ready")
        if self.rank != 0:
            # Rank 0 hosts the store under srun, mpirun and a bare launch: who it is, read on the client that has just
            # served init, names a rank 0 lost a moment later by pid and host (the thread alone read it too late:
            # docs/measurements.md, 'Faults'). Should rank 0 stop now, the watchdog ends this rank as in a collective.
            self._roster.update({0: json.loads(self.store.get(beats.key(0)))})
        # Every rank has beaten: who each is, on a thread and store client of its own (beats must not wait behind a slow
        # answer), the client connected now, while the store surely answers: one connecting to a store being
        # replaced froze its station (docs/measurements.md, 'Faults').
        self._roster_thread = threading.Thread(target=self._know_everyone,
                                               args=(self._rdv.client(max(timeout_s, 60.0)),),
                                               name="gpubench-roster", daemon=True)
        self._roster_thread.start()

    def _connect(self, master: bool) -> Any:
        """This rank's client of the store (the store itself, ``master``), within --timeout + 5 s; a store that
        cannot be made or reached is a UsageError in one line naming what to set."""
        renv, end = self.renv, time.monotonic() + min(_START_GRACE_S, self.timeout_s + _CONNECT_SLACK_S)
        try:
            # torch's client logs each failed try with its C++ frames: what failed is said in one line below
            with ending.mute_stderr(keep=lambda line: not _C10D_LOG.match(line)):
                return self._client(master, end)
        except RendezvousError as e:
            raise UsageError(f"rank {renv.rank}: {e}") from None
        except RuntimeError as e:  # torch's own: a port taken, or what answers there is no store
            why = ("what answers there is no rendezvous store (another service's port?)" if "Ping failed" in str(e)
                   else first_line(e))
            raise UsageError(f"rank {renv.rank}: the rendezvous store at {self._rdv.address} could not be "
                             f"{'made' if master else 'reached'}: {why}; {rendezvous_hint(renv)}") from None

    def _client(self, master: bool, end: float) -> Any:
        """Something listens at the store's address (:meth:`reach`); then torch's client, whose handshake with a
        store that listens takes milliseconds: given a few seconds at a time, so that what answers but is no store
        is said then, not at the deadline past torch's retries (docs/measurements.md, 'Faults')."""
        while True:
            self._rdv.reach(end - time.monotonic(), master=master)
            try:
                return self._rdv.client(self.timeout_s, master=master,
                                        connect_s=max(0.1, min(end - time.monotonic(), _HANDSHAKE_S)))
            except RuntimeError as e:
                if "Ping failed" in str(e) or master or time.monotonic() >= end:
                    raise

    # --- progress and the watchdog -------------------------------------------------------------------------
    def step(self, where: str | None = None) -> None:
        """Mark progress (the heartbeat carries it); ``where`` names what this rank is doing now."""
        self._step += 1
        if where is not None:
            self._where = where
        self._last_change = time.time()

    def _beat(self, deadline_s: float | None = None) -> None:
        beat = {"step": self._step, "where": self._where, "time": time.time(), "moved": self._last_change,
                "pid": os.getpid(), "start": self._started, "host": os.uname().nodename, "machine": self._here,
                "ended": self._ended}
        self._writer.call(lambda s: s.set(beats.key(self.rank), beats.dumps(beat)), deadline_s)

    def _first_beat(self, until: float) -> None:
        """The first beat, tried again until ``until``: while the ranks come up, the store's host is busy starting
        too, and a first beat bounded by the watchdog's deadline alone went unanswered and ended a rank in CI
        (docs/measurements.md, 'Faults')."""
        while True:
            try:
                self._beat()
                return
            except Exception:  # noqa: BLE001 — unanswered or refused: again, until the start's grace is over
                if time.time() >= until:
                    raise
                time.sleep(HEARTBEAT_S / 2)

    def say_ended(self, signal_name: str, deadline_s: float = 1.0) -> None:
        """A last beat: this rank ends on ``signal_name`` (the peers name it so). Best effort, within the deadline."""
        self._ended = signal_name
        try:
            self._beat(deadline_s)
        except Exception:  # noqa: BLE001 — its silence will name it instead
            pass

    def _read(self, deadline_s: float | None = None) -> dict[int, dict[str, Any]]:
        """Every rank's beat, bounded; raises where the store does not answer."""
        seen = self._reader.call(lambda s: beats.read(s, self.world_size), deadline_s)
        self._roster.update(seen)
        return seen

    def _watch(self) -> None:
        lost_since = None
        while not self._stop.wait(HEARTBEAT_S):
            if self._spawner is not None and os.getppid() != self._spawner:
                ending.end("failed", parent_gone(self._store_host, self.rank, self._address(), self._spawner,
                                                 os.uname().nodename), 1)
            try:
                self._beat()
                lost_since = None
            except Exception:  # noqa: BLE001 — the store's host may have died: end once it stays away
                lost_since = lost_since or time.time()
                if time.time() - lost_since > self._store_grace_s:
                    self.abort(f"rank {self.rank} lost the rendezvous store at {self._address()} for "
                               f"{self._store_grace_s:.0f} s")
            if time.time() - self._last_change > self.timeout_s and not self._others_moving():
                self.abort(f"rank {self.rank} made no progress for {self.timeout_s:.0f} s in "
                           f"{self._where or 'setup'}")

    def _know_everyone(self, client: Store) -> None:
        """Who every rank is (pid, host), read once all have joined, while the store surely answers: a rank lost
        later is named by it even if the store no longer answers. Its reads have no deadline: under one, ranks
        starting on busy cores never learnt rank 0's pid and named a stopped rank 0 by number alone
        (docs/measurements.md, 'Faults'). A read fails, or blocks for good, only where the store's host is gone or
        stopped: nothing more to learn."""
        while len(self._roster) < self.world_size and not self._stop.is_set():
            try:
                self._roster.update(beats.read(client, self.world_size))
            except Exception:  # noqa: BLE001 — its host is gone: nothing more to learn
                return
            if len(self._roster) < self.world_size:
                self._stop.wait(HEARTBEAT_S)

    def _address(self) -> str:
        return self._rdv.address

    def _lost(self, seen: dict[int, dict[str, Any]]) -> list[int]:
        return [r for r in beats.lost(seen, self.world_size, now=time.time(), stale_s=STALE_S, here=self._here)
                if r != self.rank]

    def _others_moving(self) -> bool:
        """Whether every other rank's heartbeat is fresh and one of them moved within the timeout: then this
        rank waits for a peer still at work (a --devices rank for one measuring its case alone), not for a
        dead, stopped or hung one. Read only once this rank has stalled, so a large group does not load the
        store; a store that does not answer in time shows nobody moving."""
        try:
            seen = self._read()
        except Exception:  # noqa: BLE001 — unanswered (its host stopped) or gone: nobody can be seen moving
            return False
        lost = self._lost(seen)
        starting = time.time() < self._starting_until
        if lost and all(r not in seen for r in lost) and starting:
            return True  # peers that have not started yet, while the group is still coming up: they may yet come
        if lost:
            return False  # a rank that never started, ended or fell silent: nobody will come
        if starting and any(b.get("where") in _SETUP for r, b in seen.items() if r != self.rank):
            # A peer still setting up (not lost: it runs): its progress counts from the group's first step, before it
            # waited for the store (two ranks in setup called each other silent: docs/measurements.md, 'Faults').
            return True
        now = time.time()
        return any(now - b.get("moved", 0.0) <= self.timeout_s for r, b in seen.items() if r != self.rank)

    def account(self, wait: bool = False, deadline_s: float | None = None) -> tuple[str, str, bool]:
        """Who did not arrive, in words; the run's status that follows (``interrupted`` where each lost rank ended
        on SIGTERM, SIGHUP or SIGINT); whether a peer is lost at all. ``wait``: until a peer is seen lost, at most
        a heartbeat's staleness (a peer whose connection broke has just died, and its beat is not stale yet).
        ``deadline_s``: how long a reading of the store may take (default the watchdog's)."""
        end = time.time() + (STALE_S + HEARTBEAT_S if wait else 0.0)
        while True:
            try:
                seen = self._read(deadline_s)
            except Exception:  # noqa: BLE001
                host_here = self._store_host_runs_here()
                if host_here:
                    # Its host runs, and here: the store was slow (its server thread starved on a busy host), nobody
                    # is known lost (a SIGTERMed rank 0 that called itself or the spawner lost failed runs:
                    # docs/measurements.md, 'Faults').
                    return (f"the rendezvous store {host_here} hosts at {self._address()} did not answer within "
                            f"{deadline_s or _DEADLINE_S:g} s (a busy host)"), "failed", False
                host = self._store_host
                words = beats.unreachable(self._roster, host, self._address(), deadline_s or _DEADLINE_S, self._here)
                # Rank 0 hosts it here and runs: the store was slow (a loaded host), nobody is known lost (calling it
                # lost on a SIGTERM failed a run that was interrupted: docs/measurements.md, 'Faults').
                hosted = self._roster.get(0) if host == "rank 0" else None
                slow = bool(hosted) and hosted.get("machine") == self._here and beats.local_state(hosted, self._here) is None
                return words, "failed", not slow
            lost = self._lost(seen)
            if lost or time.time() >= end:
                break
            time.sleep(HEARTBEAT_S / 2)
        words = laggards(seen, self.world_size, now=time.time(), stale_s=STALE_S, here=self._here, me=self.rank)
        polite = lost and all((seen.get(r) or {}).get("ended") in _POLITE for r in lost)
        return words, "interrupted" if polite else "failed", bool(lost)

    def _store_host_runs_here(self) -> str | None:
        """Who hosts the store, where that is this very process (rank 0's own store) or its parent, gpubench's
        spawner, still its parent and not stopped: then an unanswered store was slow, not gone."""
        if self.rank == 0 and self._store_host == "rank 0":
            return "this rank"
        if self._store_host == SPAWNER and self._spawner is not None and os.getppid() == self._spawner:
            if beats.local_state({"pid": self._spawner, "machine": self._here}, self._here) is None:
                return f"{SPAWNER} (pid {self._spawner}, running)"
        return None

    def abort(self, reason: str) -> None:
        """Name the ranks that did not arrive, mark the run, and end this process at once (exit 1)."""
        words, status, _ = self.account()
        ending.end(status, f"{reason}: {words}", 1)

    def publish_run_dir(self, path: str) -> None:
        """Tell whoever supervises the ranks (our spawner) where the run is, so it can mark a crash there; every
        rank follows it, so that any of them can close it when rank 0 is gone."""
        if self.rank == 0:
            self.store.set(f"{beats.PREFIX}run_dir", path)
        ending.follow(run_dir=path)

    def close(self) -> None:
        """Leave the group: its threads stopped and every store client of it closed before this returns, so that
        whoever holds the store up may let it go at once (the check's stations join one group after another)."""
        import torch.distributed as dist

        self._stop.set()
        self._thread.join()
        self._roster_thread.join(_DEADLINE_S)  # a read of a live store takes milliseconds
        try:
            dist.destroy_process_group()
        except Exception:  # noqa: BLE001
            pass
        self._writer.close()
        self._reader.close()
        self.store = self.data = self.control = None
        ending.forget(group=self)

    # --- agreement on the control plane ------------------------------------------------------------------
    def _control(self, fn: Callable[[], Any]) -> Any:
        self.step()
        try:
            out = fn()
        except Exception as e:  # noqa: BLE001
            # A peer's connection broke: it most likely died. Name it: at once where it was on this machine,
            # else once its heartbeat has gone stale (not the live ranks its last beat was ahead of).
            self.trouble = f"the ranks could not agree ({type(e).__name__})"
            words, status, _ = self.account(wait=True)
            raise GroupError(f"{self.trouble}: {words}", status) from e
        self.step()
        return out

    def max(self, values: Sequence[float]) -> list[float]:
        """Elementwise maximum over ranks."""
        import torch
        import torch.distributed as dist

        t = torch.tensor(list(values), dtype=torch.float64)
        self._control(lambda: dist.all_reduce(t, op=dist.ReduceOp.MAX, group=self.control))
        return t.tolist()

    def sum_int(self, value: int) -> int:
        import torch
        import torch.distributed as dist

        t = torch.tensor([int(value)], dtype=torch.int64)
        self._control(lambda: dist.all_reduce(t, group=self.control))
        return int(t.item())

    def any(self, flag: bool) -> bool:
        return self.sum_int(1 if flag else 0) > 0

    def gather_floats(self, value: float) -> list[float]:
        """Every rank's ``value``, by rank (on every rank)."""
        import torch
        import torch.distributed as dist

        t = torch.zeros(self.world_size, dtype=torch.float64)
        t[self.rank] = float(value)
        self._control(lambda: dist.all_reduce(t, group=self.control))
        return t.tolist()

    def gather_objects(self, obj: object) -> list[Any]:
        import torch.distributed as dist

        out: list[Any] = [None] * self.world_size
        self._control(lambda: dist.all_gather_object(out, obj, group=self.control))
        return out


__all__ = ["Group", "GroupError", "read_heartbeats", "laggards", "store_host", "SPAWNER", "CHECK",
           "parent_gone"]
