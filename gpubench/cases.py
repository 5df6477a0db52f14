"""One case, or a suite's cases measured together, through the engine into rows (gpubench.rows builds them).

Faults stay local: a case that raises becomes an ``error`` row, one whose check fails an ``invalid`` row that is
never timed, one a Ctrl-C abandoned a ``skipped`` row that says so.

**Together** (:func:`run_together`): the cases whose level the host sets (a host-timed launch, a pageable copy:
gpubench.levels) move with the host's state, which changes within a second or so. Measured one after the other,
a process's samples of such a case come from a tenth of a second of a quick run: one draw of that state, and the
process's median moves with it. On one H200 (2026-11-29, twelve processes, `results/reference/h200/spread-20261129/`)
a 1 MiB pageable copy's process medians, taken at the same host pace, spread 21-27 % from one moment of each process and
10 % from eight moments spread over it; a kernel launch's host time 14-26 % against 4 %. So a process opens
such cases together (each checked, its inputs made and warmed up once, as alone) and samples them in turn, a slice
of each at a time (:data:`SLICES`): each case's samples then span the whole stretch, for the same sampling time.
Cases are opened while their device buffers fit in half of what one case may hold (gpubench.memory.budget); the
next is opened once those are done.
"""

from __future__ import annotations

import contextlib
import inspect
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from gpubench import engine, memory
from gpubench.backends.base import Backend
from gpubench.options import read as read_options
from gpubench.ranks import agree
from gpubench.ranks.group import Group, GroupError
from gpubench.rows import MAX_MESSAGE, case_rows, first_line
from gpubench.rundir import ABANDONED
from gpubench.suite import Case, GridContext, Skip, Suite

SLICES = 4  # the slices each case measured together is sampled in, its budget shared between them


def _call_prepare(suite: Suite, case: Case, backend: Backend, ctx: GridContext | None) -> Any:
    # A suite whose prepare takes (case, backend) alone (written before options reached it) still runs.
    if len(inspect.signature(suite.prepare).parameters) < 3:
        return suite.prepare(case, backend)
    if ctx is None:  # a case run outside a plan (tests, tools): the suite's defaults on this device
        ctx = GridContext(backend=backend.name, quick=False, cache_bytes=backend.cache_bytes(),
                          memory_bytes=backend.memory_bytes(), options=read_options(suite.options, {}))
    return suite.prepare(case, backend, ctx)


def _prepare(suite: Suite, case: Case, backend: Backend, group: Group | None, ctx: GridContext | None) -> Any:
    """``suite.prepare``; across a group, a Skip or failure on any rank is every rank's (else the others would
    go on into collectives the failed rank never joins)."""
    if group is None:
        return _call_prepare(suite, case, backend, ctx)
    workload, error = None, None
    try:
        workload = _call_prepare(suite, case, backend, ctx)
    except Exception as e:  # noqa: BLE001 — shared with the other ranks just below
        error = e
    agree.shared(group, error)
    return workload


def run_case(
    suite: Suite,
    case: Case,
    backend: Backend,
    base: dict[str, Any],
    config: engine.EngineConfig,
    telemetry: Any,
    group: Group | None = None,
    tick: Callable[[], None] | None = None,
    ctx: GridContext | None = None,
    interrupted: Callable[[], bool] | None = None,
) -> list[dict[str, Any]]:
    """The case's rows; with ``interrupted`` (see :func:`engine.measure`), a case abandoned on the way is one
    ``skipped`` row per metric whose message says so. Each row keeps what the case cost (``case_s``)."""
    t0 = time.monotonic()
    how = _outcome(suite, case, backend, config, telemetry, group, tick, ctx, interrupted)
    return case_rows(suite, case, base, case_s=time.monotonic() - t0, **how)


def _outcome(suite: Suite, case: Case, backend: Backend, config: engine.EngineConfig, telemetry: Any,
             group: Group | None, tick: Callable[[], None] | None, ctx: GridContext | None,
             interrupted: Callable[[], bool] | None) -> dict[str, Any]:
    """How the case ended, as :func:`gpubench.rows.case_rows` takes it: status, message, workload, measurement."""
    workload = None
    try:
        getattr(backend, "begin_case", lambda case_id: None)(case.id)  # test stand-ins may lack it
        workload = _prepare(suite, case, backend, group, ctx)
        with workload.method.context() if workload.method.context else contextlib.nullcontext():
            meas = engine.measure(workload, backend, config, telemetry, group=group, tick=tick,
                                  interrupted=interrupted)
    except GroupError:
        raise  # the ranks can no longer agree: the run ends (the caller names the ranks)
    except engine.Interrupted:
        return {"status": "skipped", "message": ABANDONED, "workload": workload}
    except KeyboardInterrupt:
        raise
    except Exception as e:  # noqa: BLE001 — any failure of one case (OOM, compile error) is that case's row
        return _failed(e, workload)
    finally:
        _release(backend)
    return _ended(workload, meas, config)


def _release(backend: Backend) -> None:
    try:
        backend.release()
    except Exception:  # noqa: BLE001 — releasing after a failed case must not hide that case's error
        pass


def _ended(workload: Any, meas: engine.Measurement, config: engine.EngineConfig) -> dict[str, Any]:
    """How a measured case ended: ``invalid`` where its check failed (never timed), else ``ok``."""
    if not meas.valid:
        chk = meas.check
        msg = chk.detail or f"check failed: error {chk.error:.3g} > tolerance {chk.tolerance:.3g}"
        return {"status": "invalid", "message": msg[:MAX_MESSAGE], "workload": workload, "meas": meas}
    return {"status": "ok", "workload": workload, "meas": meas, "config": config}


def _failed(e: BaseException, workload: Any) -> dict[str, Any]:
    if isinstance(e, Skip):
        return {"status": "skipped", "message": str(e)[:MAX_MESSAGE], "workload": workload}
    return {"status": "error", "message": first_line(e), "workload": workload}


@dataclass
class _Together:
    """One case of :func:`run_together` on its way: opened, sampled in slices, closed."""

    case: Case
    workload: Any = None
    opened: engine.Opened | None = None
    how: dict[str, Any] | None = None  # how it ended, once it has
    spent_s: float = 0.0  # the case's own seconds, its steps together
    footprint: int = 0

    def step(self, backend: Backend, what: Callable[[], Any]) -> None:
        """One step of the case (open, a slice, close), in its own context; a failure ends it (an abandon ends
        them all: the caller's)."""
        t0 = time.monotonic()
        try:
            getattr(backend, "begin_case", lambda case_id: None)(self.case.id)
            method = self.workload.method if self.workload is not None else None
            with method.context() if method is not None and method.context else contextlib.nullcontext():
                what()
        except (engine.Interrupted, KeyboardInterrupt):
            raise
        except Exception as e:  # noqa: BLE001 — one case's failure (OOM, compile error) is that case's row
            if self.opened is not None:
                self.opened.abandon()
            self.opened, self.how = None, _failed(e, self.workload)
        finally:
            self.spent_s += time.monotonic() - t0

    @property
    def sampling(self) -> bool:
        return self.how is None and self.opened is not None and self.opened.ready


@dataclass
class _Block:
    """The cases open at once, and the device bytes they hold."""

    room: int
    items: list[_Together] = field(default_factory=list)

    def full_for(self, item: _Together) -> bool:
        held = sum(i.footprint for i in self.items if i.how is None)
        return bool(self.items) and held + item.footprint > self.room


def run_together(suite: Suite, cases: list[Case], backend: Backend, base: dict[str, Any],
                 config: engine.EngineConfig, telemetry: Any, ctx: GridContext | None = None,
                 interrupted: Callable[[], bool] | None = None, slices: int = SLICES) -> list[list[dict[str, Any]]]:
    """The rows of each of ``cases``, measured together (the module docstring), in their order; a case a Ctrl-C
    abandoned before it was opened has none."""
    items = [_Together(c) for c in cases]
    block = _Block(memory.budget(backend) // 2)
    try:
        for item in items:
            item.step(backend, lambda item=item: _prepared(item, suite, backend, ctx))
            if item.how is not None:
                continue
            if block.full_for(item):
                _finish(block.items, backend, config, slices)
                block.items = []
            item.step(backend, lambda item=item: _open(item, backend, config, telemetry, interrupted))
            block.items.append(item)
        _finish(block.items, backend, config, slices)
    except (engine.Interrupted, KeyboardInterrupt) as e:
        for item in items:
            if item.opened is not None and item.how is None:
                item.opened.abandon()
                item.how = {"status": "skipped", "message": ABANDONED, "workload": item.workload}
        if isinstance(e, KeyboardInterrupt):
            raise
    finally:
        _release(backend)
    return [case_rows(suite, i.case, base, case_s=i.spent_s, **i.how) if i.how is not None else [] for i in items]


def _prepared(item: _Together, suite: Suite, backend: Backend, ctx: GridContext | None) -> None:
    item.workload = _prepare(suite, item.case, backend, None, ctx)
    item.footprint = int(item.workload.footprint or item.workload.bytes or 0)


def _open(item: _Together, backend: Backend, config: engine.EngineConfig, telemetry: Any,
          interrupted: Callable[[], bool] | None) -> None:
    item.opened = engine.Opened(item.workload, backend, config, telemetry, interrupted=interrupted)
    if not item.opened.ready:  # its check failed: never timed
        item.how = _ended(item.workload, item.opened.close(), config)


def _finish(items: list[_Together], backend: Backend, config: engine.EngineConfig, slices: int) -> None:
    """The open ``items`` sampled in turn, a slice of each at a time, then closed."""
    for _ in range(slices):
        for item in items:
            if item.sampling:
                item.step(backend, lambda item=item: item.opened.slice(slices))
    for item in items:
        if item.sampling:
            opened = item.opened
            item.step(backend, lambda: setattr(item, "how", _ended(item.workload, opened.close(), config)))
            item.opened = None


__all__ = ["run_case", "run_together", "SLICES"]
