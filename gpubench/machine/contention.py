"""Who else used the GPU and the host while a run measured: a shared machine is named, so that a slow figure
is not blamed on the code.

GPU: around each case the runner asks the device which processes hold a context on it
(:meth:`gpubench.machine.telemetry.Telemetry.processes`: NVML's compute and graphics process lists, amdsmi's process
list) and drops our own (this process, the run's worker processes, the other ranks of a run). Any other process
seen just before or just after a case makes that case's rows ``contended``, naming it ("pid 4321 (python3)",
the name from /proc/<pid>/comm; where the device lists pids of another pid namespace, as a container sees the
host's, the others are counted instead). The device's utilisation is read before the first case too: with our
own work not started, a busy device means someone is using it even when no process is visible (another
container's processes may not be listed), and the run is contended from the start.

Host: the share of the host's CPU time that processes outside the run used while each case ran
(``host_load``: /proc/stat's busy time of every CPU, less the CPU time of the run's own processes), and over
the whole run. At :data:`LOADED_HOST` or more the host was busy: figures the host sets (gpubench.results.host_set) were
measured on a machine that was not the hardware's alone. /proc/stat counts what every process used, those of
other containers and the hypervisor's steal included; our own threads are left out, so a CPU run that keeps
every core busy by itself is not "loaded". The heaviest other process over the run is named from /proc (with the
children it reaped), where it used a fair share of what the others used; else the line says none could be named.

Readings are best effort: where the library cannot tell (no NVML, no /proc) the value is None, "unknown",
never "not contended".
"""

from __future__ import annotations

import os
import re
import statistics
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from gpubench.machine.other_runs import Here
    from gpubench.machine.telemetry import Telemetry

# Before the first case our own work has not started: a device this busy is someone else's.
BUSY_IDLE_PCT = 50.0
# A host whose CPUs other processes kept at least this busy (a share of all CPU time) was loaded.
LOADED_HOST = 0.5
PROC = Path("/proc")
OPENING_PROBE_S = 0.2  # how long the host is watched before the first case, for the run's first line


def process_name(pid: int, proc: Path = PROC) -> str:
    """``pid 4321 (python3)``; a pid this host's /proc does not show (another container) says so."""
    try:
        name = (proc / str(pid) / "comm").read_text().strip()
    except OSError:
        return f"pid {pid} (not visible here)"
    return f"pid {pid} ({name})"


def _stat(pid: int | str, proc: Path) -> tuple[str, list[str]] | None:
    """(comm, the fields of /proc/PID/stat after it: state, ppid, ...), or None."""
    try:
        stat = (proc / str(pid) / "stat").read_text()
    except OSError:
        return None
    # comm is parenthesised and may hold spaces or parentheses: split after the last ")".
    head, _, rest = stat.rpartition(")")
    return head.partition("(")[2], rest.split()


@dataclass(frozen=True)
class _CpuMark:
    wall: float  # monotonic seconds
    busy: float  # busy clock ticks of every CPU (/proc/stat)
    ours: float  # clock ticks of the run's own processes (with their reaped children)
    cpus: int


class HostCpu:
    """How much of the host's CPU time processes outside the run used between two marks.

    /proc/stat's first line sums every CPU's time: busy is user + nice + system + irq + softirq + steal (guest
    time is inside user). The run's own time is each own process's utime + stime + cutime + cstime, so a worker
    that ended and was reaped moves into its parent's cutime without being counted twice. ``own`` is read at
    each mark (the watch adds its workers to the same set).
    """

    def __init__(self, own: set[int], proc: Path = PROC):
        self.own = own
        self.proc = proc
        self.tick = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100

    def mark(self) -> _CpuMark | None:
        try:
            lines = (self.proc / "stat").read_text().splitlines()
        except OSError:
            return None
        head = lines[0].split() if lines else []
        if not head or head[0] != "cpu" or len(head) < 8:
            return None
        v = [float(x) for x in head[1:9]] + [0.0] * max(0, 9 - len(head))
        busy = v[0] + v[1] + v[2] + v[5] + v[6] + v[7]  # user nice system (idle iowait) irq softirq steal
        cpus = sum(1 for line in lines[1:] if line.startswith("cpu") and line[3:4].isdigit()) or os.cpu_count() or 1
        ours = 0.0
        for pid in self.own:
            stat = _stat(pid, self.proc)
            if stat is not None and len(stat[1]) > 12:  # utime stime (cutime cstime)
                ours += sum(float(x) for x in stat[1][11:15])
        return _CpuMark(time.monotonic(), busy, ours, cpus)

    def share(self, a: _CpuMark | None, b: _CpuMark | None) -> float | None:
        """The share (0-1) of all CPU time between ``a`` and ``b`` that processes outside the run used."""
        if a is None or b is None or b.wall - a.wall <= 0:
            return None
        capacity = (b.wall - a.wall) * self.tick * b.cpus
        others = (b.busy - a.busy) - (b.ours - a.ours)
        return min(1.0, max(0.0, others / capacity))


def cpu_times(proc: Path) -> dict[int, tuple[int, float, str]]:
    """{pid: (ppid, utime+stime in clock ticks, comm)} of every process /proc shows."""
    return {pid: (ppid, own, name) for pid, (ppid, own, _, name) in _usage(proc).items()}


def descendants(roots: Iterable[int], table: dict[int, tuple[int, float, str]]) -> set[int]:
    """``roots`` and every process below them in ``table`` (:func:`cpu_times`'s), by parent links; shared with
    gpubench.check's health facts, which find the check's own processes so."""
    kids: dict[int, list[int]] = {}
    for pid, (ppid, _, _) in table.items():
        kids.setdefault(ppid, []).append(pid)
    out, todo = set(roots), list(roots)
    while todo:
        for k in kids.get(todo.pop(), []):
            if k not in out:
                out.add(k)
                todo.append(k)
    return out


def _usage(proc: Path) -> dict[int, tuple[int, float, float, str]]:
    """{pid: (ppid, its own CPU ticks (utime+stime), those of the children it reaped (cutime+cstime), comm)}."""
    out = {}
    for d in proc.iterdir() if proc.is_dir() else ():
        stat = _stat(d.name, proc) if d.name.isdigit() else None
        if stat is None:
            continue
        name, fields = stat
        try:
            kids = sum(float(x) for x in fields[13:15]) if len(fields) > 14 else 0.0
            out[int(d.name)] = (int(fields[1]), float(fields[11]) + float(fields[12]), kids, name)
        except (IndexError, ValueError):
            continue
    return out


class Heaviest:
    """The heaviest process outside the run over its duration (CPU time from /proc at the start and the end): its
    own time and that of the children it reaped meanwhile, so that work done in processes that come and go (a
    build's compilers, a test runner's subprocesses) is counted in the one that waits for them."""

    def __init__(self, own: set[int], proc: Path = PROC):
        self.own, self.proc = own, proc  # read at the end: the watch adds its workers to the same set
        self.t0 = time.monotonic()
        self.start = _usage(proc)

    def top(self) -> tuple[str, float] | None:
        """(``pid 4321 (make) 180% CPU``, the CPUs it kept busy: 1.8), or None where none used any."""
        end = _usage(self.proc)
        ours = descendants(self.own, {pid: (ppid, own, name) for pid, (ppid, own, _, name) in end.items()})
        wall = max(time.monotonic() - self.t0, 1e-3)
        tick = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
        best: tuple[str, float] | None = None
        for pid, (_, own, kids, name) in end.items():
            if pid in ours:
                continue
            _, own0, kids0, _ = self.start.get(pid, (0, 0.0, 0.0, ""))
            mine, reaped = (own - own0) / tick / wall, max(0.0, kids - kids0) / tick / wall
            if mine + reaped > (best[1] if best else 0.0):
                children = " with its children" if reaped > mine else ""
                best = (f"pid {pid} ({name}) {100 * (mine + reaped):.0f}% CPU{children}", mine + reaped)
        return best

    def name(self) -> str | None:
        top = self.top()
        return top[0] if top else None


@dataclass
class _Case:
    before: list[str] | None
    cpu: _CpuMark | None


class Watch:
    """What the runner asks around each case: :meth:`begin` before it, :meth:`end` after it."""

    def __init__(self, reader: Telemetry | None, own_pids: Iterable[int] | None = None, proc: Path = PROC,
                 busy_is_ours: bool = False, beside: Here | None = None):
        """``busy_is_ours``: the run's own processes were using the device just before (a worker's turn follows
        the run's and the other workers'), so a busy device at the start names no co-tenant. ``beside``: this
        process's entry among the machine's gpubench runs (gpubench.machine.other_runs.Here), whose others it names."""
        self.reader = reader
        self.beside = beside
        self.runs: dict[int, str] = {}  # other gpubench runs of the host on other devices, for run.json
        self.own = set(own_pids or ()) | {os.getpid()}
        self.proc = proc
        self.others: dict[int, str] = {}  # every other process seen during the run
        self.counted: list[str] = []  # others seen only as a count (pids of another namespace)
        self.busy: list[float] = []
        self.cases: dict[str, list[str]] = {}  # contended case ids by suite, for run.json
        self.loaded_cases: dict[str, list[str]] = {}  # case ids measured on a busy host, by suite
        self.known = _call(reader, "processes") is not None
        self.busy_before = _call(reader, "utilization")
        self._idle_busy = not busy_is_ours and self.busy_before is not None and self.busy_before >= BUSY_IDLE_PCT
        self._cpu = HostCpu(self.own, proc)
        self._run_mark = self._cpu.mark()
        self._heaviest = Heaviest(self.own, proc)
        self._last: tuple[float, list[str] | None, _CpuMark | None] | None = None

    def add_own(self, pids: Iterable[int]) -> None:
        """Processes of this run started after the watch (its workers): ours, not co-tenants."""
        self.own.update(pids)  # the host readers share this set

    def host_load(self, a: _CpuMark | None, b: _CpuMark | None) -> float | None:
        """The share of the host's CPU time others used between two marks; a reader that knows better (the fake
        backend's, for tests) says so instead."""
        given = getattr(self.reader, "host_load", None) if self.reader is not None else None
        if given is not None:
            return _call(self.reader, "host_load")
        return self._cpu.share(a, b)

    def check(self) -> list[str] | None:
        """Other processes on the device now (and gpubench runs on it since the last look), named (None: unknown)."""
        runs = self._runs()
        pids = _call(self.reader, "processes")
        u = _call(self.reader, "utilization")
        if u is not None:
            self.busy.append(u)
        if pids is None:
            return list(runs.values()) or None
        return list(dict.fromkeys([*self._named(pids), *runs.values()]))

    def _runs(self) -> dict[int, str]:
        """The machine's other gpubench runs since the last look: those on this device, named; the others kept for
        run.json (gpubench.machine.other_runs)."""
        here = {}
        for run in self.beside.others(self.own) if self.beside is not None else ():
            if run.here:
                here[run.pid] = self.others[run.pid] = run.name
            else:
                self.runs[run.pid] = run.name
        return here

    def leave(self) -> None:
        """The run measures no more: its entry among the machine's gpubench runs says so."""
        if self.beside is not None:
            self.beside.leave()

    def _named(self, pids: list[int]) -> list[str]:
        """The other processes among those the device lists, named (or counted)."""
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
            if pid not in self.others:  # a gpubench run already seen keeps its name
                self.others[pid] = process_name(pid, self.proc)
            named.append(self.others[pid])
        return named

    def opening(self) -> list[str]:
        """The run's first lines when it starts on a shared GPU or a busy host (none otherwise): the device's
        processes and utilisation now, and the host watched for a moment."""
        lines = []
        gpu = self.note(self.check(), None)
        if gpu:
            lines.append(f"GPU shared: {gpu}: figures measured beside it are not this GPU's alone")
        a = self._cpu.mark()
        if a is not None and getattr(self.reader, "host_load", None) is None:
            time.sleep(OPENING_PROBE_S)
        load = self.host_load(a, self._cpu.mark())
        if load is not None and load >= LOADED_HOST:
            lines.append(f"host busy: {host_text(load, self._cpus())}: figures the host sets (host-timed, "
                         "host-bound, host buffers, the CPU backend) are not this machine's alone")
        return lines

    def begin(self) -> _Case:
        """Before a case: the device's other processes, and a CPU mark (the last case's end mark when it was just
        taken, so that consecutive cases read /proc once between them)."""
        if self._last is not None and time.monotonic() - self._last[0] < 0.5:
            _, before, cpu = self._last
            return _Case(before, cpu)
        return _Case(self.check(), self._cpu.mark())

    def end(self, case: _Case, suite: str | None = None, case_id: str | None = None) -> tuple[str | None, float | None]:
        """After a case: its ``contended`` (None unknown, "" alone, else who else was there) and its
        ``host_load``, remembered for run.json when the case is named."""
        after, mark = self.check(), self._cpu.mark()
        self._last = (time.monotonic(), after, mark)
        contended = self.note(case.before, after)
        load = self.host_load(case.cpu, mark)
        if suite is not None and case_id is not None:
            self.mark(suite, case_id, contended, load)
        return contended, load

    def note(self, before: list[str] | None, after: list[str] | None) -> str | None:
        """The ``contended`` text of what was seen before and after a case."""
        if before is None and after is None and not self._idle_busy:
            return None
        names = list(dict.fromkeys([*(before or []), *(after or [])]))
        if self._idle_busy:
            names.append(f"device {self.busy_before:.0f}% busy before the run")
        return ", ".join(names)

    def mark(self, suite: str, case: str, contended: str | None, host_load: float | None = None) -> None:
        """Remember a contended case, or one measured on a busy host (a derived one too), for run.json."""
        for flagged, into in ((bool(contended), self.cases), (host_load is not None and host_load >= LOADED_HOST,
                                                               self.loaded_cases)):
            if flagged and case not in into.get(suite, []):
                into.setdefault(suite, []).append(case)

    def _cpus(self) -> int:
        m = self._run_mark
        return m.cpus if m is not None else (os.cpu_count() or 1)

    def summary(self) -> dict[str, Any]:
        """run.json's ``contention``: ``contended`` (a line, "" none, None unknown), the contended ``cases`` by
        suite, the GPU and host readings."""
        gpu_names = [*self.others.values(), *dict.fromkeys(self.counted)]
        if self._idle_busy:
            gpu_names.append(f"device {self.busy_before:.0f}% busy before the run")
        contended = ", ".join(gpu_names) if (self.known or self._idle_busy or gpu_names) else None
        share = self.host_load(self._run_mark, self._cpu.mark())
        heaviest = self._heaviest.top()
        try:
            load1 = os.getloadavg()[0]
        except OSError:
            load1 = None
        return {
            "contended": contended,
            "gpu": {"others": [*self.others.values(), *dict.fromkeys(self.counted)],
                    "busy_before_pct": self.busy_before,
                    "busy_between_pct": float(statistics.median(self.busy)) if self.busy else None},
            "cases": self.cases,
            "host": {"others_share": share, "cpus": self._cpus(), "load1": load1,
                     "loaded": None if share is None else share >= LOADED_HOST,
                     "heaviest": heaviest[0] if heaviest else None,
                     "heaviest_cpus": heaviest[1] if heaviest else None, "loaded_cases": self.loaded_cases,
                     "gpubench_runs": list(self.runs.values())},
        }


def union(texts: Iterable[Any]) -> str | None:
    """Several ``contended`` texts as one (each process's, each rank's): every name once, in order; "" where all
    that is known is that nobody else was there; None where none of them knew."""
    texts = list(texts)
    names = [n for s in texts if isinstance(s, str) and s for n in s.split(", ")]
    if names:
        return ", ".join(dict.fromkeys(names))
    return "" if any(s == "" for s in texts) else None


def _call(reader: Telemetry | None, name: str) -> Any:
    fn = getattr(reader, name, None)
    if fn is None:
        return None
    try:
        return fn()
    except Exception:  # noqa: BLE001 — a failing query is an unknown, never a failed run
        return None


def host_text(share: float, cpus: int) -> str:
    """``other processes used 95% of 2 CPUs``."""
    return f"other processes used {100 * share:.0f}% of {cpus} CPU{'s' if cpus != 1 else ''}"


# The heaviest process is named where it used at least this share of what the others used: one that used 1 % of a
# CPU on a host others kept 79 % busy is not what made it busy; one of 1.8 CPUs among 9 busy ones is a part of it.
NAMED_SHARE = 0.1


def host_line(host: dict[str, Any] | None) -> str | None:
    """``other processes used 95% of 16 CPUs (heaviest: pid 99 (stress) 180% CPU)`` for a loaded host; None
    otherwise. Older runs recorded the load average instead of the share: ``load 7.9 of 16 CPUs``."""
    if not host or not host.get("loaded"):
        return None
    heavy = _heaviest_text(host)
    if host.get("others_share") is not None:
        return f"{host_text(float(host['others_share']), int(host.get('cpus') or 1))}{heavy}"
    if host.get("load1") is not None:
        return f"load {host['load1']:.1f} of {host['cpus']} CPUs{heavy}"
    return f"busy{heavy}"


def _heaviest_text(host: dict[str, Any]) -> str:
    """`` (heaviest: pid 99 (stress) 180% CPU)`` where that process used a fair share of what the others used, else
    that none could be named (the load was in processes too short-lived for /proc to show at the end, in other
    containers, or the hypervisor's). An older run.json, without ``heaviest_cpus``, has it in the text."""
    if "heaviest" not in host:
        return ""  # an older run.json, which did not look
    name, used = host.get("heaviest"), host.get("heaviest_cpus")
    if name and used is None:
        found = re.search(r"(\d+)% CPU", str(name))
        used = int(found.group(1)) / 100 if found else None
    share, cpus = host.get("others_share"), host.get("cpus")
    others = float(share) * int(cpus or 1) if share is not None else None
    if name and (used is None or others is None or used >= NAMED_SHARE * others):
        return f" (heaviest: {name})"
    seen = f": the busiest seen here, {name}" if name else ""
    return f" (no process could be named{seen})"


MEASURED_KEYS = ["suite", "case", "status", "stop"]  # the columns :func:`measured` reads


def measured(rows: Iterable[Mapping[str, Any]]) -> dict[str, set[str]]:
    """The cases each suite measured (suite → case ids): ok and timed, neither skipped (a GPU-only case on a CPU, a
    Ctrl-C) nor failed, nor a figure derived from others."""
    out: dict[str, set[str]] = {}
    for r in rows:
        if r.get("status") == "ok" and r.get("stop") != "derived":
            out.setdefault(str(r.get("suite")), set()).add(str(r.get("case")))
    return out


def _among(cases: dict[str, list[str]] | None, measured: Mapping[str, set[str]]) -> int:
    return sum(len(set(ids) & measured.get(suite, set())) for suite, ids in (cases or {}).items())


def closing(summary: dict[str, Any], measured: Mapping[str, set[str]]) -> list[str]:
    """The run's last lines when it was shared or loaded (none otherwise), from run.json's ``contention``; the cases
    counted are those ``measured`` (:func:`measured` of the run's rows): a skipped case was beside nothing."""
    lines = []
    cases = sum(len(ids) for ids in measured.values())
    shared = _among(summary.get("cases"), measured)
    if summary.get("contended"):
        lines.append(f"GPU shared during this run: {summary['contended']} ({shared} of {cases} cases measured "
                     "beside it: their status says so; compare does not blame the code for them)")
    host = summary.get("host") or {}
    loaded = _among(host.get("loaded_cases"), measured)
    line = host_line(host)
    if line:
        lines.append(f"host busy during this run: {line}; {loaded} of {cases} cases measured while others used "
                     f"{100 * LOADED_HOST:.0f}% of its CPUs or more (compare does not judge the figures the host sets "
                     "on a busy run)")
    elif loaded:
        lines.append(f"host busy during {loaded} of {cases} cases: other processes used {100 * LOADED_HOST:.0f}% of "
                     "its CPUs or more while they ran (the status of the figures the host sets says so)")
    if host.get("gpubench_runs"):
        lines.append(f"other gpubench runs on this host during this run: {', '.join(host['gpubench_runs'])}")
    return lines


__all__ = ["Watch", "union", "HostCpu", "Heaviest", "process_name", "host_line", "host_text", "closing", "measured", "MEASURED_KEYS",
           "BUSY_IDLE_PCT", "LOADED_HOST", "NAMED_SHARE"]
