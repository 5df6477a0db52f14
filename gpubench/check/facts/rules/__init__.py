"""The health facts' rules, one module per fact: how each is judged PASS, WARN, FAIL or SKIP and its message.

:data:`FACTS` lists them in the order their verdicts are given; every list of checks, titles and fields in
:mod:`gpubench.check.facts` is derived from it. A new fact is a new module here whose ``FACT`` is added to
:data:`FACTS`, plus its test. SKIP is never a pass, and missing data never PASSes.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from gpubench.check.facts.rules import ecc, nvlink, pcie_link, processes, row_remap, throttle
from gpubench.check.facts.rules.common import Fact
from gpubench.check.verdicts import Verdict

FACTS: tuple[Fact, ...] = (pcie_link.FACT, ecc.FACT, row_remap.FACT, nvlink.FACT, throttle.FACT, processes.FACT)

CHECKS = tuple(f.check for f in FACTS)
TITLES = {f.check: f.title for f in FACTS}
# A healthy GPU's fields (the fake backend's): read once, and polled while the check loads the GPUs.
HEALTHY_STATIC: dict[str, Any] = {k: v for f in FACTS for k, v in f.static.items()}
HEALTHY_POLL: dict[str, Any] = {k: v for f in FACTS for k, v in f.poll.items()}
# What a reader's static() returns besides "interconnect" and "why", and what its poll() returns.
STATIC_KEYS = tuple(HEALTHY_STATIC)
POLL_KEYS = tuple(HEALTHY_POLL)
# How each polled field's readings add up over the check (FactsWatch); pids are the watch's own to fold.
FOLDS = {k: fn for f in FACTS for k, fn in f.fold.items()}


def judge(gpu: int, static: dict[str, Any], seen: dict[str, Any], row_throttle: Iterable[str] = frozenset(),
          row_pids: Mapping[int, str] | None = None) -> list[Verdict]:
    """One fact verdict per check (:data:`CHECKS`) for ``gpu`` from its static facts (``FactsReader.static``)
    and what ``FactsWatch`` saw (``FactsWatch.seen``). ``row_throttle``: throttle reasons the measured rows
    recorded; ``row_pids``: other processes the rows recorded, {pid: name} (None: the rows do not know; {}: they saw
    none). Rules: each fact's module."""
    return [f.rule(gpu, static, seen, row_throttle, row_pids) for f in FACTS]


__all__ = ["FACTS", "CHECKS", "TITLES", "HEALTHY_STATIC", "HEALTHY_POLL", "STATIC_KEYS", "POLL_KEYS", "FOLDS", "judge",
           "Fact"]
