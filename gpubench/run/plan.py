"""The plan of a run: each suite's grid of cases, laid out before anything is measured, so that bad input fails
before a run directory exists."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from gpubench.backends.base import Backend
from gpubench.errors import UsageError
from gpubench.machine.memory_budget import budget
from gpubench.options import read as read_options
from gpubench.ranks.group import Group
from gpubench.run.request import RunRequest
from gpubench.suite import Case, GridContext, Suite


@dataclass
class Plan:
    """What will run, fixed before anything is measured (so bad input fails before a directory exists)."""

    suites: list[Suite]
    cases: dict[str, list[Case]]
    # Each suite's grid context (its options among it): ``prepare`` gets the one its ``cases`` got.
    contexts: dict[str, GridContext] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)  # what the suites said about their grids (shrunk to fit)

    @property
    def total(self) -> int:
        return sum(len(c) for c in self.cases.values())


def plan(
    suites: Sequence[Suite],
    backend: Backend,
    *,
    quick: bool,
    sizes: Sequence[int] | None = None,
    dtypes: Sequence[str] | None = None,
    case_filter: str | None = None,
    search: bool = False,
    options: Mapping[str, Mapping[str, Any]] | None = None,
    group: Group | None = None,
    world_size: int | None = None,
) -> Plan:
    """The grid of each suite. ``options`` maps a suite's name to its options' values (the defaults of those
    missing); ``world_size`` is the ranks' count where they are not started yet. ``backend`` may be a stand-in
    with the device's sizes alone, where the processes that will measure are not started yet."""
    base = GridContext(
        backend=backend.name,
        quick=quick,
        cache_bytes=backend.cache_bytes(),
        memory_bytes=backend.memory_bytes(),
        budget_bytes=budget(backend),
        sizes=tuple(sizes) if sizes else None,
        dtypes=tuple(dtypes) if dtypes else None,
        search=search,
        device_index=backend.device_index,
        device_count=backend.device_count(),
        group=group,
        world_size=group.world_size if group is not None else (world_size or 1),
    )
    try:
        pattern = re.compile(case_filter) if case_filter else None
    except re.error as e:
        raise UsageError(f"bad --filter {case_filter!r}: {e}") from e
    cases: dict[str, list[Case]] = {}
    contexts: dict[str, GridContext] = {}
    for suite in suites:
        if backend.name not in suite.backends:
            raise UsageError(
                f"suite {suite.name!r} does not run on backend {backend.name!r}: it supports "
                f"{', '.join(sorted(suite.backends))}"
            )
        ctx = replace(base, options=read_options(suite.options, (options or {}).get(suite.name, {})))
        grid = list(suite.cases(ctx))
        if pattern:
            grid = [c for c in grid if pattern.search(c.id)]
        cases[suite.name], contexts[suite.name] = grid, ctx
    p = Plan(list(suites), cases, contexts, list(base.notes))
    if p.total == 0:
        raise UsageError("no case matches: loosen --filter/--dtype/--sizes (gpubench list shows the suites)")
    return p


def plan_for(request: RunRequest, backend: Backend, group: Group | None = None,
             world_size: int | None = None) -> Plan:
    """The plan of ``request`` on ``backend``: the one way a request becomes a plan, in the run's own process, its
    ranks, its workers and the check's stations alike."""
    what = request.what
    return plan(what.suites, backend, quick=request.how.quick, sizes=what.sizes, dtypes=what.dtypes,
                case_filter=what.case_filter, search=what.search, options=what.options, group=group,
                world_size=world_size)


__all__ = ["Plan", "plan", "plan_for"]
