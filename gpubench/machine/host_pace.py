"""The host's pace: how fast the host's CPU runs a fixed piece of work now, taken beside each sample the host times.

Why: on the lent GPU hosts (KVM guests) the figures the host times move together with the host's own speed, by
tens of percent, over seconds: a pure Python loop, a kernel launch's host time, an event's round trip and a pageable
copy slowed down and sped up together (`results/reference/h200/host-pace-20261128/`). Taking this probe beside a
figure lets compare judge the figure at the baseline's pace (gpubench.compare.pace) instead of calling the host's
slow minute a regression, or missing one.

The probe mixes what the host-set figures spend: a system call and a small native call from the interpreter,
:data:`ROUNDS` times (its cost: docs/method.md).
"""

from __future__ import annotations

import os
import time
from functools import cache
from typing import Any

ROUNDS = 100


@cache
def _operands() -> tuple[Any, Any, Any, Any]:
    import numpy as np  # here, not at import: the command line imports the backends before it needs a number

    return np.add, np.ones(16), np.ones(16), np.empty(16)


def probe_s() -> float:
    """Seconds the fixed piece of work took now."""
    add, a, b, c = _operands()
    getppid = os.getppid
    t0 = time.perf_counter()
    for _ in range(ROUNDS):
        getppid()
        add(a, b, out=c)
    return time.perf_counter() - t0


__all__ = ["ROUNDS", "probe_s"]
