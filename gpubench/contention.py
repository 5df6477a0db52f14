"""Who else used the GPU and the host while a run measured: a shared machine is named, so that a slow figure
is not blamed on the code.

GPU: between cases the runner asks the device which processes hold a context on it
(:meth:`gpubench.telemetry.Telemetry.processes`: NVML's compute and graphics process lists, amdsmi's process
list) and drops our own (this process and the other ranks of a run). Any other process seen just before or
just after a case makes that case's rows ``contended``, naming it ("pid 4321 (python3)", the name from
/proc/<pid>/comm; where the device lists pids of another pid namespace, as a container sees the host's, the
others are counted instead). The device's utilisation is read before the first case too: with our own work not started,
a busy device means someone is using it even when no process is visible (another container's processes may
not be listed), and the run is contended from the start.

Host: the load average against the CPU count, and the heaviest other process over the run (CPU time from
/proc between the start and the end, the process tree of this run left out). These go into run.json only:
compare lists a loaded host among what differs between the sides, rather than judging rows by it.

Readings are best effort: where the library cannot tell (no NVML, no /proc) the column is None, "unknown",
never "not contended".
"""

from __future__ import annotations

import os
import statistics
import time
from pathlib import Path
from typing import Any

# Before the first case our own work has not started: a device this busy is someone else's.
BUSY_IDLE_PCT = 50.0
# A host whose 1-minute load exceeds this share of its CPUs is loaded (the measuring process itself is ~1).
LOADED_HOST = 0.5
PROC = Path("/proc")


def process_name(pid: int, proc: Path = PROC) -> str:
    """``pid 4321 (python3)``; a pid this host's /proc does not show (another container) says so."""
    try:
        name = (proc / str(pid) / "comm").read_text().strip()
    except OSError:
        return f"pid {pid} (not visible here)"
    return f"pid {pid} ({name})"


class Watch:
    """What the runner asks between cases. ``note()`` is a case's ``contended`` value: None unknown, ""
    alone, else who else was there."""

    def __init__(self, reader: Any, own_pids: set[int] | None = None, proc: Path = PROC):
        self.reader = reader
        self.own = set(own_pids or ()) | {os.getpid()}
        self.proc = proc
        self.others: dict[int, str] = {}  # every other process seen during the run
        self.counted: list[str] = []  # others seen only as a count (pids of another namespace)
        self.busy: list[float] = []
        self.cases: dict[str, list[str]] = {}  # contended case ids by suite, for run.json
        self.known = _call(reader, "processes") is not None
        self.busy_before = _call(reader, "utilization")
        self._idle_busy = self.busy_before is not None and self.busy_before >= BUSY_IDLE_PCT
        self._host = HostLoad(proc)

    def check(self) -> list[str] | None:
        """Other processes on the device now, named (None: unknown)."""
        pids = _call(self.reader, "processes")
        u = _call(self.reader, "utilization")
        if u is not None:
            self.busy.append(u)
        if pids is None:
            return None
        if pids and not (self.own & set(pids)) and not any((self.proc / str(p)).exists() for p in pids):
            # The device lists pids of another pid namespace (a container sees the host's): ours is among them
            # once we hold a context, but which one cannot be told. Count the others rather than name them.
            k = len(pids) - 1
            if not k:
                return []
            text = f"{k} other process{'es' if k > 1 else ''} (host pids {' '.join(map(str, pids))})"
            self.counted.append(text)
            return [text]
        named = []
        for pid in pids:
            if pid in self.own:
                continue
            if pid not in self.others:
                self.others[pid] = process_name(pid, self.proc)
            named.append(self.others[pid])
        return named

    def note(self, before: list[str] | None, after: list[str] | None, suite: str | None = None,
             case: str | None = None) -> str | None:
        """The ``contended`` cell of a case measured between the two checks (remembered for run.json when the
        case is named)."""
        if before is None and after is None and not self._idle_busy:
            return None
        names = list(dict.fromkeys([*(before or []), *(after or [])]))
        if self._idle_busy:
            names.append(f"device {self.busy_before:.0f}% busy before the run")
        text = ", ".join(names)
        if suite is not None and case is not None:
            self.mark(suite, case, text)
        return text

    def mark(self, suite: str, case: str, contended: str | None) -> None:
        """Remember a contended case (a derived one too) for run.json's ``contention.cases``."""
        if contended:
            self.cases.setdefault(suite, []).append(case)

    def summary(self) -> dict[str, Any]:
        """run.json's ``contention``: ``contended`` (a line, "" none, None unknown), the contended ``cases`` by
        suite, the GPU and host readings."""
        gpu_names = [*self.others.values(), *dict.fromkeys(self.counted)]
        if self._idle_busy:
            gpu_names.append(f"device {self.busy_before:.0f}% busy before the run")
        contended = ", ".join(gpu_names) if (self.known or self._idle_busy) else None
        return {
            "contended": contended,
            "gpu": {"others": [*self.others.values(), *dict.fromkeys(self.counted)], "busy_before_pct": self.busy_before,
                    "busy_between_pct": float(statistics.median(self.busy)) if self.busy else None},
            "cases": self.cases,
            "host": self._host.summary(),
        }


def _call(reader: Any, name: str) -> Any:
    fn = getattr(reader, name, None)
    if fn is None:
        return None
    try:
        return fn()
    except Exception:  # noqa: BLE001 — a failing query is an unknown, never a failed run
        return None


def _cpu_times(proc: Path) -> dict[int, tuple[int, float, str]]:
    """{pid: (ppid, utime+stime in clock ticks, comm)} of every process /proc shows."""
    out = {}
    for d in proc.iterdir() if proc.is_dir() else ():
        if not d.name.isdigit():
            continue
        try:
            stat = (d / "stat").read_text()
        except OSError:
            continue
        # comm is parenthesised and may hold spaces or parentheses: split after the last ")".
        head, _, rest = stat.rpartition(")")
        fields = rest.split()
        try:
            out[int(d.name)] = (int(fields[1]), float(fields[11]) + float(fields[12]), head.partition("(")[2])
        except (IndexError, ValueError):
            continue
    return out


def _descendants(root: int, table: dict[int, tuple[int, float, str]]) -> set[int]:
    kids: dict[int, list[int]] = {}
    for pid, (ppid, _, _) in table.items():
        kids.setdefault(ppid, []).append(pid)
    out, todo = {root}, [root]
    while todo:
        for k in kids.get(todo.pop(), []):
            if k not in out:
                out.add(k)
                todo.append(k)
    return out


class HostLoad:
    """The host's load over a run: the load average at the end, and the heaviest process not of this run."""

    def __init__(self, proc: Path = PROC):
        self.proc = proc
        self.t0 = time.monotonic()
        self.start = _cpu_times(proc)

    def summary(self) -> dict[str, Any]:
        cpus = os.cpu_count() or 1
        try:
            load1 = os.getloadavg()[0]
        except OSError:
            load1 = None
        end = _cpu_times(self.proc)
        ours = _descendants(os.getpid(), end)
        wall = max(time.monotonic() - self.t0, 1e-3)
        tick = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
        heaviest, most = None, 0.0
        for pid, (_, cpu, name) in end.items():
            if pid in ours:
                continue
            used = (cpu - self.start.get(pid, (0, 0.0, ""))[1]) / tick / wall
            if used > most:
                heaviest, most = f"pid {pid} ({name}) {100 * used:.0f}% CPU", used
        return {"load1": load1, "cpus": cpus, "loaded": None if load1 is None else load1 > LOADED_HOST * cpus,
                "heaviest": heaviest}


def host_line(host: dict[str, Any] | None) -> str | None:
    """``load 7.9 of 16 CPUs (heaviest: pid 99 (stress) 180% CPU)`` for a loaded host; None otherwise."""
    if not host or not host.get("loaded"):
        return None
    heavy = f" (heaviest: {host['heaviest']})" if host.get("heaviest") else ""
    return f"load {host['load1']:.1f} of {host['cpus']} CPUs{heavy}"


__all__ = ["Watch", "HostLoad", "process_name", "host_line", "BUSY_IDLE_PCT", "LOADED_HOST"]
