"""How much memory a case may take: what is available now, less headroom, never what is installed.

A machine shared with other processes (a CI runner, a GPU another job holds part of) has far less free than
its total. Sizing from the total made runs skip cases that would have fit at a smaller size, or grow until
the OOM killer ended them. Suites size their buffers from :func:`budget` and say a case's real need
(one function per suite computes it) when even that is too much.
"""

from __future__ import annotations

import os
from pathlib import Path

from gpubench.units import format_bytes

# A case may take this share of what is available when it starts: the rest is headroom for the allocator's
# rounding, the interpreter and libraries, and other processes that grow meanwhile.
HEADROOM = 0.75


def host_available_bytes(meminfo: str | Path = "/proc/meminfo") -> int | None:
    """The kernel's estimate of memory a new allocation can get without swapping (MemAvailable), else free
    pages (sysconf), else None (unknown)."""
    try:
        for line in Path(meminfo).read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_AVPHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return None


def budget(backend) -> int:
    """Bytes one case may hold on ``backend``'s device: HEADROOM × what is available now."""
    available = getattr(backend, "available_bytes", None)
    free = available() if available is not None else backend.memory_bytes()
    return int(HEADROOM * free)


# The words every too_big message holds: a run whose every case was skipped for memory asked for nothing that fits.
TOO_BIG = "a case may take"


def too_big(need: int, backend, what: str = "") -> str | None:
    """None if ``need`` bytes fit the budget, else the skip message: the need (``what`` says of what) against
    the budget and what is available."""
    limit = budget(backend)
    if need <= limit:
        return None
    of = f" {what}" if what else ""
    return (f"needs {format_bytes(need)}{of}, over the {format_bytes(limit)} {TOO_BIG} "
            f"({int(100 * HEADROOM)} % of {format_bytes(limit / HEADROOM)} available)")
