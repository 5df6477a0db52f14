"""The run's worker processes (gpubench.run.per_process), started before the run imports anything heavy.

A worker's start-up is its imports (torch, the suites), then a device context and its plan: the run measures
nothing until its workers have started, since a context opening on the same GPU slows what it times (issue 47),
and that wait costs a quick run seconds. Started as ``gpubench run`` begins, before it imports the suites, the
workers import alongside it, which shortens that wait (docs/measurements.md, Wall time); they open no device until the run, once it has its plan, tells them to (``start``), so a run
that ends up with no case set per process (a filter) kills them before any touched the GPU.

This module is light (no numpy, pandas or torch) so that it can run first. Early only for a GPU backend: on the
fake or CPU backend the speculative imports would compete with the run's own on a small machine (the CI VM).
``GPUBENCH_PRESTART`` overrides: ``1`` always (the tests, on the fake backend), ``0`` never. A pinned run
(``GPUBENCH_PIN``) starts its workers late, as their threads' environment needs the pinning.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from gpubench.child import Child, command

PRESTART_ENV = "GPUBENCH_PRESTART"
PIN_ENV = "GPUBENCH_PIN"  # where the measuring processes run (gpubench.run.per_process.choose_pinning)
DEFAULT_PIN = "off"
START = "start"  # the line that tells a worker to read the run's spec and open its device
# Device nodes of the NVIDIA and ROCm drivers: whether ``--backend auto`` will likely find a GPU, known without torch.
GPU_NODES = ("/dev/nvidiactl", "/dev/kfd")


@dataclass
class Started:
    """Worker processes 1..count, running, not yet told what to measure (their folder holds their logs)."""

    dir: Path
    procs: dict[int, Child] = field(default_factory=dict)
    logs: dict[int, IO[bytes]] = field(default_factory=dict)
    failed: dict[int, str] = field(default_factory=dict)  # those that could not be started, with why

    @property
    def count(self) -> int:
        return len(self.procs) + len(self.failed)

    def take(self) -> tuple[dict[int, Child], dict[int, IO[bytes]], dict[int, str]]:
        """The processes, their logs and those that failed, handed over (this keeps none, so kill() spares them)."""
        taken = dict(self.procs), dict(self.logs), dict(self.failed)
        self.procs.clear(), self.logs.clear(), self.failed.clear()
        return taken

    def kill(self) -> None:
        """End them all at once: none has opened a device (they wait for ``start``)."""
        for proc in self.procs.values():
            proc.kill()
        for log in self.logs.values():
            log.close()
        self.procs.clear()
        shutil.rmtree(self.dir, ignore_errors=True)


def spawn(count: int, env: dict[str, str] | None = None) -> Started:
    """``count`` workers (``python -m gpubench.run.worker DIR K``), each waiting for ``start`` on its standard input."""
    started = Started(Path(tempfile.mkdtemp(prefix="gpubench-workers-")))
    for k in range(1, count + 1):
        log = open(started.dir / f"stderr-{k}.txt", "wb")  # noqa: SIM115 — closed with the workers
        started.logs[k] = log
        try:
            started.procs[k] = Child(command("gpubench.run.worker", str(started.dir), str(k)), env=env, pipes=True,
                                     stderr=log)
        except OSError as e:
            started.failed[k] = f"could not start: {e}"
    return started


def wanted(backend: str, processes: int, per_process: bool, *, env: dict[str, str] | None = None,
           gpu_nodes: tuple[str, ...] = GPU_NODES) -> bool:
    """Whether a run on ``backend`` of ``processes`` processes, whose suites can set cases per process
    (``per_process``), starts its workers early."""
    env = os.environ if env is None else env
    asked = env.get(PRESTART_ENV, "").strip()
    if asked == "0" or processes <= 1 or not per_process:
        return False
    if (env.get(PIN_ENV, DEFAULT_PIN).strip() or DEFAULT_PIN) != "off":
        return False
    if asked == "1":
        return True
    return backend in ("cuda", "hip") or (backend == "auto" and any(os.path.exists(p) for p in gpu_nodes))


def early(suites: list[str], backend: str, processes: int) -> Started | None:
    """The workers of a run of ``suites`` on ``backend`` in ``processes`` processes, started now where
    :func:`wanted` says (else None); the run kills those it does not take."""
    from gpubench import declared  # the suites' declarations, from their cache: no suite is imported

    per_process = any(d.per_process for d in declared.suites() if d.name in set(suites))
    return spawn(processes - 1) if wanted(backend, processes, per_process) else None


__all__ = ["PRESTART_ENV", "PIN_ENV", "DEFAULT_PIN", "START", "Started", "spawn", "wanted", "early"]
