"""Which figures have a level the host sets: what the runner measures in several processes, what a loaded host
disturbs, and what compare never judges on one process's evidence.

A GPU-timed figure of a kernel is the device's: two processes of one build measure the same level. Some figures
are the host's instead. Host clocks time what the CPU spends, which moves with the host's state from one process
to the next; so do figures the device waited on the host for (``host_bound``), copies staged by the host
(pageable), and copies between the device and host buffers, whose rate follows where the process's buffers
landed (pinned and registered: docs/measurements.md, 'check'). Rows say which in columns the suites and the engine
fill:
``timing_method`` (copy, launch and their derived rows), ``host_bound`` (the engine's) and copy's ``memory``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

HOST_MEMORY = ("pageable", "pinned", "registered")  # copy's host buffers


def set_by_host(row: dict[str, Any] | None) -> str:
    """Why a row's level moves between processes, or "" when nothing says so."""
    if row is None:
        return ""
    method = row.get("timing_method")
    if isinstance(method, str) and method.startswith("host"):
        return "host-timed"
    host_bound = row.get("host_bound")
    if isinstance(host_bound, (bool, np.bool_)) and bool(host_bound):
        return "host-bound"
    memory = row.get("memory")
    if memory == "pageable":
        return "pageable copy"
    if memory in HOST_MEMORY:
        return f"{memory} host buffers"
    return ""


def disturbed_by_load(row: dict[str, Any] | None) -> str:
    """Why a busy host disturbs a row's figure, or "": the figures the host sets, and every figure of the CPU
    backend (there the CPU is the device)."""
    if row is None:
        return ""
    return set_by_host(row) or ("measured on the CPU" if row.get("backend") == "cpu" else "")


__all__ = ["set_by_host", "disturbed_by_load", "HOST_MEMORY"]
