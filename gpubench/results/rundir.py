"""A run on disk: ``<out>/<cluster>/<run_id>/`` with ``run.json`` and one table per suite.

``run.json`` is written when the run starts (status ``running``) and rewritten when it ends, so a run that
crashed or was killed is recognisable as such and keeps every table it wrote.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import os
import re
import secrets
import subprocess
import threading
import time
from pathlib import Path
from typing import Any, Protocol

import pandas as pd

from gpubench import DISTRIBUTION, __version__, results
from gpubench.results import destination as outputs
from gpubench.errors import UsageError
from gpubench.files import write_json
from gpubench.machine.procfs import machine, proc_stat, started

# A case a Ctrl-C abandoned (status skipped): it was never measured. Its rows say so to people in their message and
# to readers in their ``stop`` column: a reader acts on the column, never on the words.
ABANDONED = "interrupted (Ctrl-C): abandoned before it was measured"
ABANDONED_STOP = "abandoned"

# A run still ``running`` is abandoned when its writer's process is gone (seen from its machine) or, seen from
# elsewhere, when its lease file has not been touched for LEASE_STALE_S (the writer touches it every LEASE_S).
LEASE = ".alive"
LEASE_S = 60.0
LEASE_STALE_S = 600.0

_LABEL = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")


def utc_now() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")


def check_label(label: str) -> str:
    """Cluster labels become directory names: keep them to a safe alphabet."""
    if not _LABEL.match(label):
        raise UsageError(f"bad --cluster {label!r}: use letters, digits, '.', '_' or '-' (at most 64)")
    return label


def git_sha() -> str | None:
    """The commit of the gpubench source in use, when it runs from a git checkout."""
    here = Path(__file__).resolve().parents[2]  # gpubench/results/rundir.py: the checkout's root
    # Installed into site-packages, the parent may sit inside some other project's git tree: only a
    # gpubench checkout's own commit means anything.
    try:
        if f'name = "{DISTRIBUTION}"' not in (here / "pyproject.toml").read_text():
            return None
    except OSError:
        return None
    try:
        out = subprocess.run(
            ["git", "-C", str(here), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=5
        )
    except (OSError, subprocess.SubprocessError):
        return None
    sha = out.stdout.strip()
    return sha if out.returncode == 0 and re.fullmatch(r"[0-9a-f]{40}", sha) else None


def ensure_writable(out: str | os.PathLike, cluster: str) -> Path:
    """Create ``<out>/<cluster>`` and prove we can write there, before anything is measured."""
    return outputs.folder(Path(out) / cluster, "--out", parents=True)




def kept(path: str | os.PathLike) -> int:
    """How many cases a run directory's tables hold measured (not a case a Ctrl-C abandoned, not a figure derived
    from others)."""
    try:
        df = results.load(path)
        mask = ~df["stop"].isin(("derived", ABANDONED_STOP))
        return int(df.loc[mask, "case"].nunique()) if len(df) else 0
    except (UsageError, OSError):
        return 0


def saved(path: str | os.PathLike | None, n: int | None = None) -> str:
    """What a run directory holds, read back from it (or ``n``, its :func:`kept`, read already), in words true
    whatever it holds: "3 cases were saved in DIR", or that none was (a case a Ctrl-C abandoned, or a figure
    derived from others, is no case saved)."""
    if path is None:
        return "no case was saved"
    n = kept(path) if n is None else n
    if n == 0:
        return f"no case was saved (run directory: {path})"
    return f"{n} case{'s were' if n > 1 else ' was'} saved in {path}"










def _alive(writer: dict[str, Any]) -> bool:
    fields = proc_stat(int(writer.get("pid") or 0))
    return fields is not None and fields[0] not in ("Z", "X") and (
        not writer.get("start") or started(int(writer["pid"])) == writer["start"])


def status_of(path: str | os.PathLike, meta: dict[str, Any] | None = None, *, now: float | None = None) -> str:
    """A run's status as readers should show it: run.json's, or ``abandoned`` for a run still ``running`` whose
    processes are gone (killed with SIGKILL, its node lost): its writer's process is not there (looked at from its
    own machine), or nothing touched its lease (or, for a run written before leases, any file) for LEASE_STALE_S."""
    path = Path(path)
    if meta is None:
        try:
            meta = json.loads((path / results.RUN_FILE).read_text())
        except (OSError, ValueError):
            return "unknown"
    status = str(meta.get("status") or "unknown")
    if status != "running":
        return status
    writer = meta.get("writer") or {}
    if writer.get("machine") and writer["machine"] == machine():
        return "running" if _alive(writer) else "abandoned"
    try:
        touched = max(f.stat().st_mtime for f in ([path / LEASE] if (path / LEASE).exists() else path.iterdir()))
    except (OSError, ValueError):
        return status
    return "abandoned" if (time.time() if now is None else now) - touched > LEASE_STALE_S else "running"


class RunRecord(Protocol):
    """Where a run's tables and its closing word go: a :class:`RunDir` in the process that writes the run, an
    :class:`Unwritten` in a rank that only measures."""

    def write_table(self, suite: str, df: pd.DataFrame) -> object:
        """``suite``'s table, rewritten whole (every case so far)."""

    def finish(self, status: str, **extra: Any) -> None:
        """Close the run ``status``, with ``extra`` keys in its run.json."""


class RunDir:
    def __init__(self, path: Path, meta: dict[str, Any]):
        self.path = path
        self.meta = meta
        self._done = threading.Event()

    def _lease(self) -> None:
        """Touch the lease while the run lives: a reader elsewhere tells a run in progress from an abandoned one."""
        while True:
            try:
                (self.path / LEASE).touch()
            except OSError:
                pass
            if self._done.wait(LEASE_S):
                return

    @property
    def run_id(self) -> str:
        return self.meta["run_id"]

    @classmethod
    def create(cls, out: str | os.PathLike, cluster: str, meta: dict[str, Any]) -> RunDir:
        parent = ensure_writable(out, cluster)
        # Time first so that run directories sort chronologically; the random tail avoids collisions.
        stamp = dt.datetime.now(dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
        while True:
            run_id = f"{stamp}-{secrets.token_hex(3)}"
            path = parent / run_id
            try:
                path.mkdir()
                break
            except FileExistsError:
                continue
        full = {
            "schema_version": results.SCHEMA_VERSION,
            "gpubench_version": __version__,
            "git_sha": git_sha(),
            "run_id": run_id,
            "cluster": cluster,
            "status": "running",
            "start_time": utc_now(),
            "end_time": None,
            # who writes it, to tell a run in progress from one whose processes are gone (status_of)
            "writer": {"host": os.uname().nodename, "pid": os.getpid(), "start": started(os.getpid()),
                       "machine": machine()},
            **meta,
        }
        rd = cls(path, full)
        rd.flush()
        threading.Thread(target=rd._lease, name="gpubench-lease", daemon=True).start()
        return rd

    def flush(self) -> None:
        write_json(self.path / results.RUN_FILE, self.meta)

    def write_table(self, suite: str, df: pd.DataFrame) -> Path:
        return results.save(df, self.path / f"{suite}{results.TABLE_SUFFIX}", suite=suite)

    def finish(self, status: str, **extra: Any) -> None:
        """Close the run ``status``; a run another process closed first keeps its word (a peer that saw this rank
        stop: under mpirun the stopped rank 0 is resumed to be ended, and its own view, "rank 1 is gone", came
        after the peer's, "rank 0 is stopped")."""
        self._done.set()
        self.meta.update(extra, status=status, end_time=utc_now())
        try:
            disk = json.loads((self.path / results.RUN_FILE).read_text())
        except (OSError, ValueError):
            disk = {}
        if disk.get("status") not in (None, "running"):
            self.meta.update({k: disk.get(k) for k in ("status", "error", "end_time")})
        self.flush()


def mark_ended(path: str | os.PathLike, status: str, reason: str, count: bool = True) -> bool:
    """Close a run that is still ``running`` on disk: ``status`` (failed, interrupted), the reason and (``count``)
    the cases its tables kept. A run someone already closed keeps their word (rank 0's own, a peer's, the
    spawner's). Whether it marked it."""
    file = Path(path) / results.RUN_FILE
    meta = json.loads(file.read_text())
    if meta.get("status") != "running":
        return False
    # Closed first, counted after: reading the tables back takes a while on a busy host, and a launcher's SIGKILL
    # follows its SIGTERM within a second, which left runs "running" in CI (docs/measurements.md, 'Faults').
    meta.update(status=status, error=reason, end_time=utc_now())
    write_json(file, meta)
    if count:
        count_kept(path, reason)
    return True


def count_kept(path: str | os.PathLike, reason: str | None, n: int | None = None) -> None:
    """Add the cases kept (``n``, where read already) to a run closed with ``reason``, if that is still its word;
    ``reason`` None: to a closed run whoever closed it, where no count is there yet. Best effort: the run is closed
    already."""
    file = Path(path) / results.RUN_FILE
    with contextlib.suppress(Exception):
        if reason is None and not _count_due(json.loads(file.read_text())):
            return  # its closer counted it: no table read for nothing
        n = kept(path) if n is None else n
        meta = json.loads(file.read_text())  # again: reading the tables took a while
        if meta.get("error") == reason if reason is not None else _count_due(meta):  # not a later closer's word
            write_json(file, {**meta, "cases_done": n})


def _count_due(meta: dict[str, Any]) -> bool:
    """A run closed without its cases counted."""
    return meta.get("status") != "running" and meta.get("cases_done") is None


class Unwritten:
    """The run directory of a rank other than 0: rank 0 writes the run, the others only measure. A rank that sees
    the run fail closes it where rank 0 has not (rank 0 gone): ``closes`` is the run's directory."""

    run_id = None
    path = None
    closes: str | None = None

    def write_table(self, suite: str, df: pd.DataFrame) -> None:
        pass

    def finish(self, status: str, **extra: Any) -> None:
        if self.closes and status != "complete" and extra.get("error"):
            with contextlib.suppress(Exception):  # rank 0's own word, where it has one, stands
                mark_ended(self.closes, status, extra["error"])
