"""What Linux's /proc says of this machine and its processes: which machine and pid namespace this is, a process's
state and when it started (so that a reused pid is told apart from the process it names)."""

from __future__ import annotations

import os
from pathlib import Path


def _read_text(path: str) -> str:
    try:
        return Path(path).read_text().strip()
    except OSError:
        return ""


def machine() -> str:
    """This machine and pid namespace: pids are comparable between processes with the same value."""
    try:
        ns = os.stat("/proc/self/ns/pid").st_ino
    except OSError:
        ns = 0
    return f"{os.uname().nodename}/{_read_text('/proc/sys/kernel/random/boot_id')}/{ns}"


def proc_stat(pid: int) -> list[str] | None:
    """/proc/PID/stat's fields after the command name (which may hold spaces); None where there is no such process."""
    text = _read_text(f"/proc/{pid}/stat")
    if not text or ")" not in text:
        return None
    return text.rsplit(")", 1)[1].split()


def started(pid: int) -> int | None:
    """When the process started (clock ticks since boot): tells a pid reused by another process apart."""
    fields = proc_stat(pid)
    return int(fields[19]) if fields and len(fields) > 19 else None


__all__ = ["machine", "proc_stat", "started"]
