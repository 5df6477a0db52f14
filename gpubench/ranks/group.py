"""The ranks of a multi-process run: the data plane (NCCL/RCCL or gloo) that suites time, and a gloo control
plane on which the ranks agree (the engine's decisions, a case's outcome, Ctrl-C), so that every rank calls
every collective the same number of times.

A rank never hangs for longer than ``timeout_s``: a heartbeat thread publishes this rank's progress (a counter
of control-plane steps, the case it is in, and when it last moved) to the rendezvous store, and a watchdog
thread ends the process when its own progress has stopped for ``timeout_s`` and no other rank has moved in that
time either (a rank waiting for a peer that is still at work, slowed by a loaded host, waits on). Before it does, it reads every rank's heartbeat from the store
and names the ranks that did not arrive (behind the others, or silent: dead or stopped). It also ends the
process when the store stays out of reach: whoever hosts it (gpubench's spawner, torchrun's agent, rank 0) is
gone, and the ranks, whose collectives no longer need the store, would otherwise run on as orphans.
"""

from __future__ import annotations

import datetime as dt
import faulthandler
import json
import os
import sys
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from gpubench.ranks.env import RankEnv

_HEARTBEAT_S = 0.5
# How long the store may stay out of reach when gpubench's own spawner hosts it on this machine: a local store
# answers at once while its process lives. Elsewhere (torchrun's agent, rank 0 on another node) the timeout.
_LOCAL_STORE_GONE_S = 3.0
_STALE_S = 4 * _HEARTBEAT_S + 1  # a heartbeat older than this: its rank is dead or stopped
_GLOO_BACKSTOP_S = 600.0
_PREFIX = "gpubench/"


class GroupError(RuntimeError):
    """The group can no longer agree (a rank died, or a control-plane operation failed): the run must end."""


def store_client(renv: RankEnv, timeout_s: float, *, master: bool = False):
    import torch.distributed as dist

    return dist.TCPStore(renv.master_addr, renv.master_port, renv.world_size, master,
                         timeout=dt.timedelta(seconds=timeout_s), wait_for_workers=False)


def read_heartbeats(store: Any, world_size: int) -> dict[int, dict[str, Any]]:
    """Each rank's last heartbeat, for the ranks that published one."""
    out = {}
    for r in range(world_size):
        key = f"{_PREFIX}hb/{r}"
        try:
            if store.check([key]):
                out[r] = json.loads(store.get(key))
        except Exception:  # noqa: BLE001 — a store that went away leaves the rank unknown, not the caller dead
            continue
    return out


def laggards(beats: dict[int, dict[str, Any]], world_size: int, *, now: float, stale_s: float) -> str:
    """Which ranks did not arrive, in words: missing, silent for ``stale_s``, or behind the most advanced."""
    if not beats:
        # Every rank publishes one within a heartbeat of starting: none readable means the store is out of reach.
        return ("no rank's heartbeat could be read from the rendezvous store: the process that hosted it "
                "(gpubench's spawner, torchrun's agent or rank 0) may be gone")
    top = max(b["step"] for b in beats.values())
    words = []
    for r in range(world_size):
        b = beats.get(r)
        if b is None:
            words.append(f"rank {r} never started")
        elif now - b["time"] > stale_s:
            words.append(f"rank {r} silent for {now - b['time']:.0f} s (dead or stopped) in {b['where'] or 'setup'}")
        elif b["step"] < top:
            words.append(f"rank {r} behind, still in {b['where'] or 'setup'}")
    if not words:
        where = sorted({b["where"] for b in beats.values()})
        return f"every rank is inside the same step ({', '.join(where)}): the operation itself hung"
    return "; ".join(words)


class Group:
    """This process's place among the ranks, and the operations through which the ranks agree."""

    def __init__(self, renv: RankEnv, data_backend: str, timeout_s: float, device: Any = None):
        import torch
        import torch.distributed as dist

        self.renv = renv
        self.rank = renv.rank
        self.world_size = renv.world_size
        self.timeout_s = timeout_s
        self.data_backend = data_backend
        self._step = 0
        self._where = ""
        self._last_change = time.time()
        self._on_abort: list[Callable[[str], None]] = []
        self._stop = threading.Event()
        self._store_grace_s = _LOCAL_STORE_GONE_S if os.environ.get("GPUBENCH_STORE_HOSTED") == "1" else timeout_s
        # Our own spawner hosts the store (so that it can read heartbeats too); torchrun's agent may host it
        # (TORCHELASTIC_USE_AGENT_STORE); otherwise rank 0 does.
        hosted = os.environ.get("GPUBENCH_STORE_HOSTED") == "1" or os.environ.get("TORCHELASTIC_USE_AGENT_STORE") == "True"
        self.store = store_client(renv, timeout_s, master=renv.rank == 0 and not hosted)
        self._beat_store = store_client(renv, timeout_s)
        self._publish()
        self._thread = threading.Thread(target=self._watch, name="gpubench-watchdog", daemon=True)
        self._thread.start()
        timeout = dt.timedelta(seconds=timeout_s)
        # gloo's collectives wait on: a --devices rank that finished its case first waits in the gather for a
        # peer still measuring (on a loaded host, longer than --timeout), and gloo's own timeout ended the run
        # there. The watchdog decides instead (nobody moved for the timeout, or a peer fell silent); this is
        # its backstop. NCCL's timeout stays --timeout (its own watchdog aborts the communicator).
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

    # --- progress and the watchdog -------------------------------------------------------------------------
    def step(self, where: str | None = None) -> None:
        """Mark progress (the heartbeat carries it); ``where`` names what this rank is doing now."""
        self._step += 1
        if where is not None:
            self._where = where
        self._last_change = time.time()

    def on_abort(self, fn: Callable[[str], None]) -> None:
        """Called with the reason before the watchdog ends the process (rank 0 marks its run failed)."""
        self._on_abort.append(fn)

    def _publish(self) -> None:
        beat = {"step": self._step, "where": self._where, "time": time.time(), "moved": self._last_change,
                "pid": os.getpid(), "host": os.uname().nodename}
        self._beat_store.set(f"{_PREFIX}hb/{self.rank}", json.dumps(beat))

    def _watch(self) -> None:
        lost_since = None
        while not self._stop.wait(_HEARTBEAT_S):
            try:
                self._publish()
                lost_since = None
            except Exception:  # noqa: BLE001 — the store's host may have died: end once it stays away
                lost_since = lost_since or time.time()
                if time.time() - lost_since > self._store_grace_s:
                    self.abort(f"rank {self.rank} lost the rendezvous store at {self.renv.master_addr}:"
                               f"{self.renv.master_port} for {self._store_grace_s:.0f} s: the process that "
                               "hosted it (gpubench's spawner, torchrun's agent or rank 0) is gone")
            if time.time() - self._last_change > self.timeout_s and not self._others_moving():
                self.abort(f"rank {self.rank} made no progress for {self.timeout_s:.0f} s in "
                           f"{self._where or 'setup'}")

    def _others_moving(self) -> bool:
        """Whether every other rank's heartbeat is fresh and one of them moved within the timeout: then this
        rank waits for a peer still at work (a --devices rank for one measuring its case alone), not for a
        dead, stopped or hung one. Read only once this rank has stalled, so a large group does not load the
        store."""
        beats = read_heartbeats(self._beat_store, self.world_size)  # never raises: a lost store reads as no beats
        now = time.time()
        others = [b for r, b in beats.items() if r != self.rank]
        if len(others) < self.world_size - 1 or any(now - b["time"] > _STALE_S for b in others):
            return False  # a rank that never started or fell silent: nobody will come
        return any(now - b.get("moved", 0.0) <= self.timeout_s for b in others)

    def abort(self, reason: str) -> None:
        """Name the ranks that did not arrive, tell the callbacks, and end this process at once."""
        try:
            beats = read_heartbeats(self._beat_store, self.world_size)
            reason = f"{reason}: {laggards(beats, self.world_size, now=time.time(), stale_s=_STALE_S)}"
        except Exception:  # noqa: BLE001
            pass
        for fn in self._on_abort:
            try:
                fn(reason)
            except Exception:  # noqa: BLE001 — ending the process matters more than any callback
                pass
        print(f"gpubench: error: {reason}", file=sys.stderr, flush=True)
        if os.environ.get("GPUBENCH_DEBUG_HANG"):
            faulthandler.dump_traceback(all_threads=True)  # where each thread of this rank was stuck
        os._exit(3)

    def publish_run_dir(self, path: str) -> None:
        """Tell whoever supervises the ranks (our spawner) where the run is, so it can mark a crash there."""
        self.store.set(f"{_PREFIX}run_dir", path)

    def close(self) -> None:
        import torch.distributed as dist

        self._stop.set()
        self._thread.join()
        try:
            dist.destroy_process_group()
        except Exception:  # noqa: BLE001
            pass

    # --- agreement on the control plane ------------------------------------------------------------------
    def _control(self, fn: Callable[[], Any]) -> Any:
        self.step()
        try:
            out = fn()
        except Exception as e:  # noqa: BLE001
            # A peer's connection broke: it most likely died. Its heartbeat goes stale within _STALE_S; wait
            # for that so that the message names the dead rank, not the live ones its last beat was ahead of.
            end = time.time() + _STALE_S + _HEARTBEAT_S
            while True:
                beats = read_heartbeats(self._beat_store, self.world_size)
                now = time.time()
                silent = [r for r in range(self.world_size) if r not in beats or now - beats[r]["time"] > _STALE_S]
                if silent or now >= end:
                    break
                time.sleep(_HEARTBEAT_S / 2)
            who = laggards(beats, self.world_size, now=now, stale_s=_STALE_S)
            raise GroupError(f"the ranks could not agree ({type(e).__name__}): {who}") from e
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

    def gather_objects(self, obj: Any) -> list[Any]:
        import torch.distributed as dist

        out: list[Any] = [None] * self.world_size
        self._control(lambda: dist.all_gather_object(out, obj, group=self.control))
        return out


__all__ = ["Group", "GroupError", "read_heartbeats", "laggards", "store_client"]
