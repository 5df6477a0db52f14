"""Runs suites case by case through the engine and writes the run directory as it goes.

Faults stay local: a case that raises becomes an ``error`` row and the run goes on; a case that fails its
check becomes an ``invalid`` row and is never timed. Each suite's table is rewritten (atomically) after every
case, so Ctrl-C or a crash keeps everything measured so far. The first Ctrl-C abandons the case in progress at
the engine's next check (within a batch: a ``skipped`` row says it was interrupted) and stops; the ranks of a
collective, which must call it together, stop after the case instead. A second Ctrl-C stops at once.
"""

from __future__ import annotations

import contextlib
import inspect
import re
import socket
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pandas as pd

from gpubench.machine import contention
from gpubench.timing import engine
from gpubench.timing.graphs import FALLBACK
from gpubench import results
from gpubench.run import prestart
from gpubench.run import per_process as proc
from gpubench.backends.base import Backend
from gpubench.machine.other_runs import enter
from gpubench.errors import first_line
from gpubench.machine.fingerprint import collect
from gpubench.run.interrupt import StopFlag
from gpubench.run.layouts import Alone
from gpubench.options import read as read_options
from gpubench.run.plan import Plan, plan
from gpubench.ranks import agree
from gpubench.ranks.group import Group, GroupError
from gpubench.run.request import RunRequest
from gpubench.run.rounds import rounds, spec
from gpubench.run.rows import MAX_MESSAGE, amend, case_rows, derive, mark_rows
from gpubench.results.rundir import ABANDONED, ABANDONED_STOP, RunDir
from gpubench.suite import Case, GridContext, Skip, Suite

if TYPE_CHECKING:
    from gpubench.console import ProgressSink
    from gpubench.machine.telemetry import Telemetry


@dataclass
class Outcome:
    run_dir: RunDir
    tables: dict[str, pd.DataFrame] = field(default_factory=dict)  # as written to the run directory
    status: str = "complete"
    abandoned: str | None = None  # "suite case" of the case a Ctrl-C interrupted, if any
    contention: dict[str, Any] = field(default_factory=dict)  # run.json's: who else used the GPU and the host
    notes: list[str] = field(default_factory=list)  # the suites' own notes ("suite: line"), printed under the table
    error: str | None = None  # why the run failed as a whole (the ranks could no longer agree: a peer lost)

    @property
    def frame(self) -> pd.DataFrame:
        frames = [df for df in self.tables.values() if len(df)]
        return pd.concat(frames, ignore_index=True) if frames else results.frame([])

    @property
    def failures(self) -> int:
        df = self.frame
        if df.empty:
            return 0
        return int(df.loc[df["status"].isin(["error", "invalid"]), "case"].nunique())


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
    telemetry: Telemetry | None,
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


def _outcome(suite: Suite, case: Case, backend: Backend, config: engine.EngineConfig, telemetry: Telemetry | None,
             group: Group | None, tick: Callable[[], None] | None, ctx: GridContext | None,
             interrupted: Callable[[], bool] | None) -> dict[str, Any]:
    """How the case ended, as :func:`gpubench.run.rows.case_rows` takes it: status, message, workload, measurement,
    and graph mode's notes (``notes``: how it was timed, kept where the measurement then failed)."""
    workload, notes = None, {}
    try:
        getattr(backend, "begin_case", lambda case_id: None)(case.id)  # test stand-ins may lack it
        workload = _prepare(suite, case, backend, group, ctx)
        with workload.method.context() if workload.method.context else contextlib.nullcontext():
            meas = engine.measure(workload, backend, config, telemetry, group=group, tick=tick,
                                  interrupted=interrupted, notes=notes)
    except GroupError:
        raise  # the ranks can no longer agree: the run ends (the caller names the ranks)
    except engine.Interrupted:
        return {"status": "skipped", "message": ABANDONED, "abandoned": True, "workload": workload, "notes": notes}
    except Skip as e:
        return {"status": "skipped", "message": str(e)[:MAX_MESSAGE], "workload": workload, "notes": notes}
    except KeyboardInterrupt:
        raise
    except Exception as e:  # noqa: BLE001 — any failure of one case (OOM, compile error) is that case's row
        return {"status": "error", "message": first_line(e), "workload": workload, "notes": notes}
    finally:
        try:
            backend.release()
        except Exception:  # noqa: BLE001 — releasing after a failed case must not hide that case's error
            pass
    if not meas.valid:
        chk = meas.check
        msg = chk.detail or f"check failed: error {chk.error:.3g} > tolerance {chk.tolerance:.3g}"
        return {"status": "invalid", "message": msg[:MAX_MESSAGE], "workload": workload, "meas": meas}
    return {"status": "ok", "workload": workload, "meas": meas, "config": config}


def _static(reader: Telemetry) -> dict[str, Any]:
    try:
        return dict(reader.static() or {})
    except Exception:  # noqa: BLE001 — identity columns are best effort
        return {}


@dataclass(frozen=True)
class RunHooks:
    """What a caller of the runner adds to a run, beside its request (the check's stations): keys of its own in
    run.json (``meta``), processes of its own that are no co-tenant of any figure (``own_pids``), and whether a
    device busy as the run starts is its own doing (``busy_is_ours``: a measuring process's earlier run)."""

    meta: Mapping[str, Any] = field(default_factory=dict)
    own_pids: frozenset[int] = frozenset()
    busy_is_ours: bool = False


def execute(p: Plan, backend: Backend, request: RunRequest, *, layout: Alone | None = None,
            progress: ProgressSink | None = None, config: engine.EngineConfig | None = None,
            early: prestart.Started | None = None, hooks: RunHooks | None = None) -> Outcome:
    """Run the plan in ``layout`` (gpubench.run.layouts; alone by default); ``progress`` gets ``start(total)``,
    ``advance(suite, case, rows)``, ``note(text)``. ``early``: workers started as the command began
    (gpubench.run.prestart), for the run alone to take or kill."""
    return Runner(p, backend, request, layout or Alone(), progress=progress, config=config, early=early,
                  hooks=hooks or RunHooks()).run()



def graph_fallbacks(df: pd.DataFrame | None) -> list[str]:
    """One line per reason graph capture failed in a suite's table, with the cases timed eager instead (their rows
    say so: graph False, a message beginning with graphs.FALLBACK)."""
    if df is None or df.empty or "message" not in df:
        return []
    first = df.drop_duplicates("case")
    reasons = first["message"].astype(str).str.extract(f"{re.escape(FALLBACK)}([^;]*)", expand=False).dropna()
    return [f"graph capture failed for {n} case(s), timed eager instead (rows: graph False): {reason}"
            for reason, n in reasons.value_counts(sort=False).items()]

class Runner:
    """One run of a plan: every suite's cases through the engine in its layout, then the per-process rounds; the
    run directory written as it goes. Its attributes are what a layout reads."""

    def __init__(self, p: Plan, backend: Backend, request: RunRequest, layout: Alone, *,
                 progress: ProgressSink | None = None, config: engine.EngineConfig | None = None,
                 early: prestart.Started | None = None, hooks: RunHooks = RunHooks()):
        self.plan, self.backend, self.request, self.layout, self.progress = p, backend, request, layout, progress
        self.group = layout.group
        self.early, self.hooks = early, hooks
        self.config = config or (engine.QUICK if request.how.quick else engine.FULL)
        self.telemetry = request.how.telemetry
        self.current: str | None = None  # "suite case" while it is measured
        self.workers: proc.Workers | None = None

    def run_case(self, suite: Suite, case: Case, cfg: engine.EngineConfig, *, group: Group | None = None,
                 tick: Callable[[], None] | None = None,
                 interrupted: Callable[[], bool] | None = None) -> list[dict[str, Any]]:
        """One case's rows on this process's device (:func:`run_case` with the run's own columns and sampler)."""
        return run_case(suite, case, self.backend, self.base, cfg, self.sampler, group, tick=tick,
                        interrupted=interrupted, ctx=self.plan.contexts.get(suite.name))

    def run(self) -> Outcome:
        self.reader = self.backend.telemetry()
        # One reading for the record, even with telemetry off.
        self.fingerprint = collect(self.backend.identity(), self.request.how.cluster, self.reader)
        self.sampler = self.reader if self.telemetry else None
        self.per_process = self.layout.per_process(self)
        self.base = self._base()
        self.pinning = proc.choose_pinning(self.base.get("pci_bus_id")) if self.per_process else proc.NOT_PINNED
        if self.early is not None and not (self.per_process and not self.pinning.cpus):
            self.early.kill()  # not needed, or started without the pinning's environment: none opened a device
            self.early = None
        meta = self._meta()
        self.layout.join(self, meta, self.base)
        self.rd = self.layout.run_dir(self, meta)
        self.base["run_id"] = self.layout.run_id(self.rd)
        here = enter(self.backend, self.rd.path or self.rd.closes, self.request.argv)  # among the machine's runs
        self.watch = contention.Watch(self.reader if self.telemetry else None,
                                      {*self.layout.own_pids(), *self.hooks.own_pids},
                                      busy_is_ours=self.hooks.busy_is_ours, beside=here)
        self.outcome = Outcome(self.rd)
        if self.progress:
            for line in [*self.plan.notes, *self.watch.opening()]:
                self.progress.note(line)
            self.progress.start(self.plan.total)
        status, notes = self._measure()
        self.outcome.status = status
        # What the suites said about their grids (shrunk to fit) and about what they did not measure (comm: a world
        # of one, cases no world size allows), one "suite: line" list.
        self.outcome.notes = [f"{s.name}: {line}" for s in self.plan.suites
                              for line in [*s.notes(self.plan.contexts.get(s.name)),
                                           *graph_fallbacks(self.outcome.tables.get(s.name))]]
        notes = [*self.plan.notes, *self.outcome.notes, *notes]
        self.outcome.contention = self.watch.summary()
        error = {"error": self.outcome.error} if self.outcome.error else {}
        self.rd.finish(status, contention=self.outcome.contention, cases_done=sum(
            df.loc[df["stop"] != ABANDONED_STOP, "case"].nunique() for df in self.outcome.tables.values()), notes=notes,
            **error)
        return self.outcome

    def _meta(self) -> dict[str, Any]:
        config, backend, p = self.config, self.backend, self.plan
        return {
            "argv": list(self.request.argv),
            "backend": backend.name,
            "device_index": backend.device_index,
            "quick": self.request.how.quick,
            "engine": {k: getattr(config, k) for k in config.__dataclass_fields__},
            "suites": {s.name: {"version": s.version, "cases": len(p.cases[s.name])} for s in p.suites},
            "notes": list(p.notes),
            "telemetry": getattr(self.reader, "source", "none") if self.telemetry else "off",
            "processes": {"asked": self.layout.processes_asked(self), "cases": self.per_process,
                          "pinning": self.pinning.as_dict()},
            "fingerprint": self.fingerprint,
            **self.hooks.meta,
        }

    def _base(self) -> dict[str, Any]:
        """The columns every row of this process has."""
        static = _static(self.reader)
        return {
            "backend": self.backend.name,
            "device": self.backend.device_name(),
            "device_index": self.backend.device_index,
            "gpu_uuid": static.get("uuid"),
            "pci_bus_id": static.get("pci_bus_id") or self.backend.pci_bus_id(),
            "host": socket.gethostname(),
            "cluster": self.request.how.cluster,
        }

    def _measure(self) -> tuple[str, list[str]]:
        """Every suite's cases, then the per-process rounds: the run's status and the notes of the rounds."""
        notes: list[str] = []
        status = "complete"
        stopping = ("stopping: the case in progress is abandoned (Ctrl-C again to stop at once)" if self.layout.abandon
                    else "stopping after this case (Ctrl-C again to stop now)")
        try:
            with StopFlag(lambda: self.progress and self.progress.note(stopping)) as stop:
                if self.per_process:
                    self.workers = proc.Workers(self.request.how.processes - 1, stop=lambda: stop.set,
                                                pinning=self.pinning, started=self.early)
                    self.workers.start(spec(self.request, self.backend, self.config, self.per_process))
                    self.watch.add_own(self.workers.pids)
                    # Their start-up ends before any figure is measured, not only those set per process: a worker
                    # opening its context on the same GPU slowed the first suite's samples (docs/method.md).
                    self.workers.wait_ready()
                status = self._suites(stop)
                if self.workers is not None and not stop.set:
                    notes += rounds(self.plan, self.workers, self.request.how.processes, self.watch, self.rd,
                                    self.outcome.tables, self.base, self.config, self.progress)
                    if stop.set:
                        status = "interrupted"
        except KeyboardInterrupt:
            status = "interrupted"
            self.outcome.abandoned = self.outcome.abandoned or self.current  # a second Ctrl-C left it unwritten
        except GroupError as e:  # a peer lost: what was kept is written up and shown, the run closed with why
            status, self.outcome.error = e.status, str(e)
        except BaseException as e:
            self.rd.finish("failed", error=first_line(e))
            raise
        finally:
            self.watch.leave()  # the machine's other gpubench runs see that this one measures no more
            if self.workers is not None:
                self.workers.close()
            try:
                self.reader.close()
            except Exception:  # noqa: BLE001
                pass
        return status, notes

    def _suites(self, stop: StopFlag) -> str:
        """Each suite's cases, then the figures it derives over them; "interrupted" where a Ctrl-C stopped them."""
        for suite in self.plan.suites:
            rows: list[dict[str, Any]] = []  # what the run directory gets (every rank's, on rank 0)
            mine: list[dict[str, Any]] = []  # this process's
            for case in self.plan.cases[suite.name]:
                self.layout.step(stop, f"{suite.name} {case.id}")
                if stop.set:
                    break
                new = self._case(suite, case, stop)
                mine.extend(new)
                new = self.layout.share(new)
                if any(r.get("stop") == ABANDONED_STOP for r in new):
                    self.outcome.abandoned = self.current
                rows.extend(new)
                self._write(suite, rows)
                self.current = None
                if self.progress:
                    self.progress.advance(suite, case, new)
            # Interrupted, the suite still summarizes the cases it measured (a search's best so far), and says so
            # in each derived row's message.
            derived = derive(suite, mine, self.base)
            for r in derived:
                self.watch.mark(suite.name, r["case"], r["contended"], r["host_load"])
            if stop.set:
                derived = [amend(r, note="run interrupted: over the cases measured") for r in derived]
            derived = self.layout.share(derived)
            if derived:
                rows.extend(derived)
                self._write(suite, rows)
            if stop.set:
                return "interrupted"
        return "complete"

    def _case(self, suite: Suite, case: Case, stop: StopFlag) -> list[dict[str, Any]]:
        """This process's rows of one case, marked with who else used the machine meanwhile."""
        self.current = f"{suite.name} {case.id}"
        cfg = self.config
        if case.id in self.per_process.get(suite.name, ()):
            cfg = proc.scaled(self.config, self.request.how.processes)
        token = self.watch.begin()
        new = self.layout.measure(self, suite, case, cfg, (lambda: stop.set) if self.layout.abandon else None)
        contended, load = self.watch.end(token)
        contended = self.layout.seen(contended)
        self.watch.mark(suite.name, case.id, contended, load)
        new = mark_rows(new, contended, load)
        return new

    def _write(self, suite: Suite, rows: list[dict[str, Any]]) -> None:
        df = results.frame(rows, suite.params)
        self.rd.write_table(suite.name, df)
        self.outcome.tables[suite.name] = df


# plan lays a run out (gpubench.run.plan), execute runs it: a command calls both from here.
__all__ = ["Plan", "plan", "Outcome", "execute", "run_case", "Runner", "RunHooks"]
