"""``python -m gpubench.check.station BACKEND GPU STATIONS``: gpubench check's measuring process on one GPU.

The check starts one station per GPU, all at once (STATIONS of them), and each pays Python's, torch's and the device's start-up once;
then the check hands them its measurements in turn (:mod:`gpubench.check.drive`). A station binds its threads to
the CPUs near its GPU before anything else (:mod:`gpubench.check.affinity`) and says ``ready`` with what it found.
Then it reads jobs, one JSON object a line on its standard input, and answers each with one JSON line on its
standard output (the protocol's alone: whatever a library prints goes to standard error, the terminal):

``{"do": "group", "rank": R, "world": N, "store": PATH, "timeout": S}``
    join a group of stations (a torch.distributed world: NCCL/RCCL on GPUs, gloo otherwise, with gpubench's
    control plane and watchdog, :class:`gpubench.ranks.group.Group`) whose rendezvous store is the file PATH, in a
    folder of the check's; every rank answers ``grouped``.
``{"do": "run", "kind": K, "what": PHASE, "request": REQUEST, "own": [PID, ...]}``
    measure the run the check asks for (``request``: a :class:`gpubench.run.request.RunRequest` the check made, as
    ``gpubench run`` would have been asked it: :func:`gpubench.run.request.dumps`) into an ordinary run directory
    (:mod:`gpubench.run.runner`), and answer ``done`` with ``run_dir`` (rank 0's; null on the others), the run's
    ``status`` and its ``failures``. Kinds, each a layout of the run (:mod:`gpubench.run.layouts`): ``single`` (this
    GPU alone), ``fleet`` (every station of the group at once, case by case in step: ``gpubench run --devices``),
    ``turns`` (the group's GPUs one at a time, each case on each GPU in turn, so that no two share the host's memory
    and links while they measure, as nvbandwidth measures each GPU), ``ranks`` (a collective suite over the group).
    ``own``: the check's stations, which are no co-tenant of a figure wherever they hold a context.
``{"do": "ungroup"}``
    leave the group (answer ``ungrouped``), so that the station can join another (the GPU pairs, round by round).

A job that cannot be done is answered ``failed`` with ``why`` (and ``usage`` true where its input was at fault); the
station goes on. End of input, or the check's process gone, ends the station.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
import traceback
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from gpubench.run import runner
from gpubench.backends import open_backend
from gpubench.backends.base import Backend
from gpubench.check import affinity
from gpubench.errors import UsageError, first_line
from gpubench.ranks import ending
from gpubench.ranks.env import RankEnv, share_host_cores
from gpubench.ranks.group import Group
from gpubench.ranks.store import FileRendezvous
from gpubench.registry import all_suites
from gpubench.run.layouts import Alone, Devices, Ranks
from gpubench.run.plan import plan_for
from gpubench.run.request import loads
from gpubench.run.runner import RunHooks
from gpubench.suite import Case, Suite

if TYPE_CHECKING:
    from gpubench.timing.engine import EngineConfig

Emit = Callable[..., None]
# The fake device's calls take microseconds on its clock, but a collective over gloo takes about a millisecond of
# real time: the engine, budgeting by the device's clock, would make thousands of calls per sample (a fake check's
# comm run took 128 s). A collective on the fake device is modelled as a millisecond at least (the fake backend's
# GPUBENCH_FAKE_CALL_S, which wins where set).
FAKE_COLLECTIVE_S = 1e-3
_PARENT_POLL_S = 1.0
GONE = "the gpubench check that started this measuring process is gone"


class Turns(Devices):
    """The group's GPUs one at a time: each case is measured on each GPU in turn (rank order), the others waiting
    at the control plane, then every GPU's rows go to rank 0 as in a ``--devices`` run."""

    name = "turns"

    def measure(self, run: runner.Runner, suite: Suite, case: Case, cfg: EngineConfig,
                interrupted: Callable[[], bool] | None) -> list[dict[str, Any]]:
        rows: list[dict[str, Any]] = []
        for turn in range(self.group.world_size):
            if turn == self.group.rank:
                rows = run.run_case(suite, case, cfg, tick=self.group.step, interrupted=interrupted)
            self.group.gather_objects(turn)  # the next GPU starts when this one is done
        return rows


# The job's kind: the layout its run is measured in (gpubench.run.layouts), and what run.json says of it.
KINDS = {"single": Alone, "fleet": Devices, "turns": Turns, "ranks": Ranks}
_ORDER = {"single": "this GPU alone", "fleet": "every GPU at once, case by case in step",
          "turns": "one GPU at a time", "ranks": "the group's GPUs together (collectives)"}


class Station:
    """This process: its GPU, its binding, the group it is in (if any)."""

    def __init__(self, backend_name: str, gpu: int, stations: int, emit: Emit):
        self.emit = emit
        share_host_cores(backend_name, stations)  # the fake and cpu backends compute on the host's cores: share them
        self.backend = open_backend(backend_name, gpu)
        self.gpu = gpu
        self.binding = affinity.bind(self.backend.pci_bus_id())
        self.group: Group | None = None
        self.comm_backend: Backend | None = None
        self.runs = 0  # jobs run: after the first, a GPU busy as a run starts is this station's last one finishing
        all_suites()  # every request it is given holds suites: their imports (torch) are start-up's, not a run's
        if stations > 1:  # it will join groups: torch.distributed's import (seconds on a busy host) is start-up's
            import torch.distributed  # noqa: F401

    def ready(self) -> None:
        b = self.backend
        reading = {}
        try:
            reader = b.telemetry()
            reading = dict(reader.static() or {})
            reader.close()
        except Exception:  # noqa: BLE001 — identity columns are best effort, as the runner's
            pass
        gpu = {"index": self.gpu, "name": b.device_name(), "uuid": reading.get("uuid"),
               "pci_bus_id": reading.get("pci_bus_id") or b.pci_bus_id()}
        self.emit("ready", gpu=gpu, binding=self.binding, pid=os.getpid())

    # --- jobs --------------------------------------------------------------------------------------------------
    def do_group(self, job: dict[str, Any]) -> None:
        rank, world, timeout = int(job["rank"]), int(job["world"]), float(job.get("timeout") or 120.0)
        os.environ["GPUBENCH_STORE_HOSTED"] = "check"  # the group's store is a file of the check's: it ends with it
        renv = RankEnv("check", rank, world, rank, world, "127.0.0.1", 0, 1)
        gpu = self.backend.name in ("cuda", "hip")
        self.group = Group(renv, "nccl" if gpu else "gloo", timeout, device=self.backend.torch_device if gpu else None,
                           rendezvous=FileRendezvous(job["store"]))
        self.emit("grouped", rank=rank)

    def do_ungroup(self, job: dict[str, Any]) -> None:
        if self.group is not None:
            self.group.close()
        self.group = None
        self.emit("ungrouped")

    def do_run(self, job: dict[str, Any]) -> None:
        _fake_death(self.backend.name)
        kind = KINDS[job["kind"]]
        if kind is not Alone and self.group is None:
            raise UsageError(f"a {job['kind']} run needs a group of stations: none was formed")
        request = loads(job["request"])
        backend = self._comm_backend() if kind is Ranks else self.backend
        plan = plan_for(request, backend, group=self.group if kind is Ranks else None)
        hooks = RunHooks(meta={"check": {"phase": job.get("what") or job["kind"], "order": _ORDER[job["kind"]],
                                         "binding": self.binding}},
                         own_pids=frozenset(int(p) for p in job.get("own") or ()),
                         busy_is_ours=self.runs > 0)  # after its first run, a busy GPU is its own last one's doing
        self.runs += 1
        outcome = runner.execute(plan, backend, request, layout=kind(self.group if kind is not Alone else None),
                                 hooks=hooks)
        path = outcome.run_dir.path
        self.emit("done", run_dir=str(path) if path is not None else None, status=outcome.status,
                  failures=outcome.failures)

    def _comm_backend(self) -> Backend:
        """The device for collectives: this station's, but on the fake backend one whose calls take a collective's
        real time (:data:`FAKE_COLLECTIVE_S`)."""
        if self.backend.name != "fake" or os.environ.get("GPUBENCH_FAKE_CALL_S"):
            return self.backend
        if self.comm_backend is None:
            from gpubench.backends.fake import FakeBackend

            self.comm_backend = FakeBackend(self.gpu, durations=lambda w, i: FAKE_COLLECTIVE_S + w.bytes / 100e9)
        return self.comm_backend


def _fake_death(backend: str) -> None:
    """GPUBENCH_FAKE_STATION_DIES=MARKER (the fake backend only, for tests of the check's second attempt): the first
    station to take the file MARKER (it deletes it) dies at once, as a station whose GPU fell off the bus would."""
    marker = os.environ.get("GPUBENCH_FAKE_STATION_DIES")
    if backend != "fake" or not marker:
        return
    try:
        os.unlink(marker)
    except FileNotFoundError:
        return
    os._exit(9)


def _orphan_watch(parent: int) -> None:
    """End this process when the check that started it is gone (its parent changed), even mid-measurement."""
    def watch() -> None:
        while True:
            time.sleep(_PARENT_POLL_S)
            if os.getppid() != parent:  # its run, if one is open, is closed as interrupted with what it kept
                ending.end("interrupted", GONE, 1)

    threading.Thread(target=watch, name="gpubench-station-parent", daemon=True).start()


def main(argv: list[str]) -> int:
    protocol = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)  # prints of libraries go to standard error, never into the protocol
    _orphan_watch(os.getppid())
    ending.install()  # a SIGTERM (the check ending a station that would not stop) closes its run: interrupted

    def emit(event: str, **fields: Any) -> None:
        try:
            protocol.write(json.dumps({"event": event, **fields}) + "\n")
        except (BrokenPipeError, ValueError):  # its reader closed: the check ended before its parent poll saw it
            # (a node's step killed under Slurm: each station printed a traceback here; docs/measurements.md, Faults)
            ending.end("interrupted", GONE, 1)

    try:
        station = Station(argv[0], int(argv[1]), int(argv[2]) if len(argv) > 2 else 1, emit)
        station.ready()
    except Exception as e:  # noqa: BLE001 — the check names it for this GPU
        emit("failed", why=first_line(e), usage=isinstance(e, UsageError))
        return 1
    handlers = {"group": station.do_group, "ungroup": station.do_ungroup, "run": station.do_run}
    try:
        _serve(handlers, emit)
    except KeyboardInterrupt:  # the check was interrupted (it ends its stations): a run left open is closed
        ending.end("interrupted", "interrupted (Ctrl-C)", 130)
    return 0


def _serve(handlers: dict[str, Callable[[dict[str, Any]], None]], emit: Emit) -> None:
    """Each job of standard input, in turn, until its end."""
    for line in sys.stdin:
        if not line.strip():
            continue
        try:
            job = json.loads(line)
            handlers[job["do"]](job)
        except Exception as e:  # noqa: BLE001 — one job failed; the check decides what follows
            if os.environ.get("GPUBENCH_DEBUG_STATION"):
                traceback.print_exc()
            emit("failed", why=first_line(e), usage=isinstance(e, UsageError))


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
