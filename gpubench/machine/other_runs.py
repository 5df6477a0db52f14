"""Other gpubench runs on this machine: a run that measured beside another names it, as it names any other co-tenant.

Two runs at once on one machine each ended clean without a word about the other: NVML lists the other run's process
by its pid alone, and on the CPU nothing lists it. So each measuring process keeps an entry in a folder every run of
the machine reads (:func:`folder`: ``gpubench-runs`` in the system's temporary folder, open to every user as that one
is): its pid, its device (``Backend.device_key``), its run directory and command, when it began and, once done, when
it ended. Around each case a run reads the others' (gpubench.machine.contention.Watch): one on its own device is a co-tenant of
the cases it overlapped, named in their rows' ``contended``; one elsewhere on the host is named in run.json and the
run's closing line. The processes of one gpubench command (a spawner's ranks, a check's stations, a run's workers)
are one family, never each other's co-tenants.

Best effort, as every reading of the contention module: a folder that cannot be written or read names nobody.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from gpubench.machine.procfs import machine, proc_stat, started
from gpubench.files import write_json

FORGET_S = 3600.0  # an entry that ended this long ago is removed by whoever reads it


def folder() -> Path:
    """Where the runs of this machine keep their entries (GPUBENCH_RUNS_DIR: elsewhere, as the tests keep theirs)."""
    return Path(os.environ.get("GPUBENCH_RUNS_DIR") or Path(tempfile.gettempdir()) / "gpubench-runs")


def _command(pid: int) -> list[str]:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").split("\0")
    except OSError:
        return []


def _is_gpubench(argv: list[str]) -> bool:
    """A process gpubench started as: the gpubench command, python -m gpubench[.module], or a launcher of it."""
    return any(os.path.basename(a) == "gpubench" or a.startswith("gpubench.") or "run_module('gpubench" in a
               for a in argv[:4])


def family(pid: int | None = None) -> str:
    """The topmost gpubench process above ``pid`` (this one) and ``pid`` itself, as ``pid-start``: one command's."""
    pid = os.getpid() if pid is None else pid
    root, seen = pid, set()
    while pid > 1 and pid not in seen:
        seen.add(pid)
        if _is_gpubench(_command(pid)):
            root = pid
        fields = proc_stat(pid)
        pid = int(fields[1]) if fields and len(fields) > 1 else 0
    return f"{root}-{started(root)}"


def _alive(entry: dict[str, Any]) -> bool:
    fields = proc_stat(int(entry.get("pid") or 0))
    return fields is not None and fields[0] not in ("Z", "X") and started(int(entry["pid"])) == entry.get("start")


@dataclass(frozen=True)
class Other:
    """Another gpubench run seen from this one."""

    pid: int
    name: str  # "pid 4321 (gpubench run /results/t/<run id>)", "… on GPU <uuid>" where not on this device
    here: bool  # on this process's own device


class Here:
    """This process's entry, and what it reads of the others'."""

    def __init__(self, key: str | None, run_dir: str | os.PathLike | None, argv: list[str] | tuple[str, ...]):
        self.key, self.machine, self.family = key, machine(), family()
        self.node = os.environ.get("SLURMD_NODENAME", "")  # the stand-in srun's nodes share one machine
        self.file = folder() / f"{os.getpid()}-{started(os.getpid())}.json"
        command = " ".join(str(a) for a in argv).replace(", ", ",")  # a name holds no ", " (contention.union)
        run_dir = str(Path(run_dir).absolute()) if run_dir else None  # read from wherever the other run stands
        what = f"{' '.join(str(a) for a in argv[:2])} {run_dir}" if run_dir else command[:200]
        self.entry = {"pid": os.getpid(), "start": started(os.getpid()), "machine": self.machine, "node": self.node,
                      "family": self.family, "key": key, "host": os.uname().nodename,
                      "run_dir": run_dir, "command": command[:200], "what": what,
                      "since": time.time(), "until": None}
        self.looked = self.entry["since"]
        self._write()

    def _write(self) -> None:
        where = self.file.parent
        if not where.is_dir():
            with contextlib.suppress(OSError):
                where.mkdir(parents=True)
                where.chmod(0o1777)  # every user's runs, each removing only its own entries (as /tmp)
        with contextlib.suppress(OSError):
            write_json(self.file, self.entry)

    def leave(self) -> None:
        """This run measures no more: its entry says until when (once)."""
        if self.entry["until"] is None:
            self.entry["until"] = time.time()
            self._write()

    def others(self, own: set[int]) -> list[Other]:
        """The other runs of this machine since the last look (processes of ``own`` and of this family aside)."""
        since, now = self.looked, time.time()
        self.looked = now
        out = []
        for entry in self._entries(now):
            if entry.get("family") == self.family or int(entry.get("pid") or 0) in own:
                continue
            until = entry.get("until")
            if until is None and not _alive(entry):
                until = entry.get("since")  # killed before it could say when: seen only where it began meanwhile
            if until is not None and float(until) < since:
                continue
            here = entry.get("key") == self.key and self.key is not None and entry.get("node") == self.node
            where = "" if here else f" on {entry.get('key') or 'another device'}"
            out.append(Other(int(entry["pid"]), f"pid {entry['pid']} ({entry.get('what') or 'gpubench'}{where})", here))
        return out

    def _entries(self, now: float) -> list[dict[str, Any]]:
        out = []
        for f in folder().glob("*.json") if folder().is_dir() else ():
            try:
                entry = json.loads(f.read_text())
            except (OSError, ValueError):
                continue
            if entry.get("machine") != self.machine or f == self.file:
                continue
            ended = entry.get("until") or (None if _alive(entry) else entry.get("since"))
            if ended is not None and now - float(ended) > FORGET_S:
                with contextlib.suppress(OSError):
                    f.unlink()
                continue
            out.append(entry)
        return out


class Keyed(Protocol):
    """What an entry reads of the measuring process's device (:class:`gpubench.backends.base.Backend`, a floor
    above): which of its machine's devices it is."""

    def device_key(self) -> str | None: ...


def enter(backend: Keyed, run_dir: str | os.PathLike | None, argv: list[str] | tuple[str, ...]) -> Here | None:
    """This measuring process's entry (None for a backend whose device is no machine's: the fake one)."""
    if not getattr(backend, "shares_machine", True):
        return None
    try:
        return Here(backend.device_key(), run_dir, argv)
    except Exception:  # noqa: BLE001 — best effort: a run is never stopped by its neighbours' folder
        return None


__all__ = ["Here", "Other", "enter", "family", "folder", "FORGET_S"]
