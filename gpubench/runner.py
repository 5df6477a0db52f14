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
import os
import re
import signal
import socket
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import pandas as pd

from gpubench import contention, engine, results
from gpubench import processes as proc
from gpubench.backends.base import Backend
from gpubench.errors import UsageError
from gpubench.fingerprint import collect
from gpubench.memory import budget
from gpubench.options import read as read_options
from gpubench.ranks import agree, describe, ending
from gpubench.ranks.group import Group, GroupError
from gpubench.request import RunRequest
from gpubench.rows import MAX_MESSAGE, case_rows, derive, first_line, mark_rows
from gpubench.rundir import ABANDONED, RunDir, mark_ended
from gpubench.suite import Case, GridContext, Skip, Suite

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
    ``skipped`` row per metric whose message says so."""
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
        return case_rows(suite, case, base, status="skipped", message=ABANDONED, workload=workload)
    except Skip as e:
        return case_rows(suite, case, base, status="skipped", message=str(e)[:MAX_MESSAGE], workload=workload)
    except KeyboardInterrupt:
        raise
    except Exception as e:  # noqa: BLE001 — any failure of one case (OOM, compile error) is that case's row
        return case_rows(suite, case, base, status="error", message=first_line(e), workload=workload)
    finally:
        try:
            backend.release()
        except Exception:  # noqa: BLE001 — releasing after a failed case must not hide that case's error
            pass
    if not meas.valid:
        chk = meas.check
        msg = chk.detail or f"check failed: error {chk.error:.3g} > tolerance {chk.tolerance:.3g}"
        return case_rows(suite, case, base, status="invalid", message=msg[:MAX_MESSAGE], workload=workload, meas=meas)
    return case_rows(suite, case, base, status="ok", workload=workload, meas=meas, config=config)


_WHO = ("host", "device_index", "device", "gpu_uuid", "pci_bus_id")


def _static(reader: Any) -> dict[str, Any]:
    try:
        return dict(reader.static() or {})
    except Exception:  # noqa: BLE001 — identity columns are best effort
        return {}


def _pci(backend: Backend) -> str | None:
    try:
        return backend.pci_bus_id()
    except Exception:  # noqa: BLE001
        return None


def _same_plan(p: Plan, group: Group) -> None:
    """The ranks of a fleet go case by case together: they must lay out the same cases (GPUs of different
    sizes may not), or say so on every rank before anything is written."""
    mine = [(s.name, [s.fleet_key(c, p.contexts[s.name]) for c in p.cases[s.name]]) for s in p.suites]
    plans = group.gather_objects(mine)
    for rank, theirs in enumerate(plans):
        if theirs != plans[0]:
            raise UsageError(f"rank {rank}'s device lays out other cases than rank 0's (different GPU models?): "
                             "run each kind of GPU in its own --devices run")


def _everyones(group: Group, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Every rank's rows for one case, in rank order (rank 0 writes them; the others keep an empty list)."""
    gathered = group.gather_objects(rows)
    return [r for part in gathered for r in part] if group.rank == 0 else []


class _Unwritten:
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


class _StopFlag:
    """First SIGINT: stop (the runner and the engine look at ``set``). Second: KeyboardInterrupt, at once."""

    def __init__(self, on_first: Callable[[], None] | None = None):
        self.set = False
        self._on_first = on_first
        self._old = None

    def __enter__(self):
        if threading.current_thread() is threading.main_thread():
            self._old = signal.signal(signal.SIGINT, self._handle)
        return self

    def _handle(self, signum, frame):
        if self.set:
            raise KeyboardInterrupt
        self.set = True
        if self._on_first:
            self._on_first()

    def __exit__(self, *exc):
        if self._old is not None:
            signal.signal(signal.SIGINT, self._old)
        return False


def execute(p: Plan, backend: Backend, request: RunRequest, *, progress: Any = None, group: Group | None = None,
            config: engine.EngineConfig | None = None) -> Outcome:
    """Run the plan; ``progress`` gets ``start(total)``, ``advance(suite, case, rows)``, ``note(text)``.

    Alone, this process measures (:class:`Single`). With a ``group`` every rank runs the plan in step, and rank 0
    alone writes the run directory: the ranks of a collective suite measure together, the engine agreeing on
    every decision (:class:`Ranks`); on a fleet (``run --devices``) each rank measures its own device alone and
    sends its rows to rank 0 after each case (:class:`Fleet`).
    """
    kind = Single if group is None else Fleet if request.where.fleet else Ranks
    return kind(p, backend, request, progress, config, group).run()


class Single:
    """One process measures the plan on its device. ``processes``: the cases a suite says are set per process are
    measured in that many processes, this one and fresh workers after it (:mod:`gpubench.processes`)."""

    # Alone (or each rank of --devices on its own device) a Ctrl-C abandons the case in progress at any batch.
    abandon = True

    def __init__(self, p: Plan, backend: Backend, request: RunRequest, progress: Any = None,
                 config: engine.EngineConfig | None = None, group: Group | None = None):
        self.p, self.backend, self.request, self.progress, self.group = p, backend, request, progress, group
        self.config = config or (engine.QUICK if request.how.quick else engine.FULL)
        self.telemetry = request.how.telemetry
        self.current: str | None = None  # "suite case" while it is measured
        self.workers: proc.Workers | None = None

    # What differs between the kinds of run.

    def _per_process(self) -> dict[str, list[str]]:
        """The cases measured in several processes: on a device (the CPU backend's own figures are measured in this
        one), by a run of one process (ranks measure in their own)."""
        if self.request.how.processes <= 1 or not self.backend.is_gpu:
            return {}
        cases = {s.name: [c.id for c in self.p.cases[s.name] if s.per_process(c)] for s in self.p.suites}
        return {k: v for k, v in cases.items() if v}

    def _processes_asked(self) -> int:
        return self.request.how.processes

    def _join(self, meta: dict[str, Any], base: dict[str, Any]) -> None:
        """What the run's record says of the other processes (none here)."""

    def _run_dir(self, meta: dict[str, Any]) -> RunDir | _Unwritten:
        rd = RunDir.create(self.request.how.out, self.request.how.cluster, meta)
        ending.follow(run_dir=rd.path)  # a SIGTERM closes it (interrupted) with what it kept
        return rd

    def _run_id(self, rd: RunDir | _Unwritten) -> str | None:
        return rd.run_id

    def _own_pids(self) -> set[int]:
        return set()

    def _step(self, stop: _StopFlag, label: str) -> None:
        """Before each case: nothing to agree on alone."""

    def _run_case(self, suite: Suite, case: Case, cfg: engine.EngineConfig,
                  interrupted: Callable[[], bool] | None) -> list[dict[str, Any]]:
        # A case set per process is measured where every process measures it (gpubench.processes: pinning).
        with proc.pinned(self.pinning, case.id in self.per_process.get(suite.name, ())):
            return run_case(suite, case, self.backend, self.base, cfg, self.sampler, self.group,
                            interrupted=interrupted, ctx=self.p.contexts.get(suite.name))

    def _share(self, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """The rows the run directory gets for ``rows`` of this process."""
        return rows

    # The run, the same for every kind.

    def run(self) -> Outcome:
        self.reader = self.backend.telemetry()
        # One reading for the record, even with telemetry off.
        self.fingerprint = collect(self.backend.identity(), self.request.how.cluster, self.reader)
        self.sampler = self.reader if self.telemetry else None
        self.per_process = self._per_process()
        self.base = self._base()
        self.pinning = proc.choose_pinning(self.base.get("pci_bus_id")) if self.per_process else proc.NOT_PINNED
        meta = self._meta()
        self._join(meta, self.base)
        self.rd = self._run_dir(meta)
        self.base["run_id"] = self._run_id(self.rd)
        self.watch = contention.Watch(self.reader if self.telemetry else None, self._own_pids())
        self.outcome = Outcome(self.rd)
        if self.progress:
            for line in [*self.p.notes, *self.watch.opening()]:
                self.progress.note(line)
            self.progress.start(self.p.total)
        status, notes = self._measure()
        self.outcome.status = status
        # What the suites said about their grids (shrunk to fit) and about what they did not measure (comm: a world
        # of one, cases no world size allows), one "suite: line" list; a Ctrl-C-abandoned case has a row but was
        # not done.
        self.outcome.notes = [f"{s.name}: {line}" for s in self.p.suites for line in s.notes(self.p.contexts.get(s.name))]
        notes = [*self.p.notes, *self.outcome.notes, *notes]
        self.outcome.contention = self.watch.summary()
        error = {"error": self.outcome.error} if self.outcome.error else {}
        self.rd.finish(status, contention=self.outcome.contention, cases_done=sum(
            df.loc[df["message"] != ABANDONED, "case"].nunique() for df in self.outcome.tables.values()), notes=notes,
            **error)
        return self.outcome

    def _meta(self) -> dict[str, Any]:
        config, backend = self.config, self.backend
        return {
            "argv": list(self.request.argv),
            "backend": backend.name,
            "device_index": backend.device_index,
            "quick": self.request.how.quick,
            "engine": {k: getattr(config, k) for k in config.__dataclass_fields__},
            "suites": {s.name: {"version": s.version, "cases": len(self.p.cases[s.name])} for s in self.p.suites},
            "notes": list(self.p.notes),
            "telemetry": getattr(self.reader, "source", "none") if self.telemetry else "off",
            "processes": {"asked": self._processes_asked(), "cases": self.per_process,
                          "pinning": self.pinning.as_dict()},
            "fingerprint": self.fingerprint,
        }

    def _base(self) -> dict[str, Any]:
        """The columns every row of this process has."""
        static = _static(self.reader)
        return {
            "backend": self.backend.name,
            "device": self.backend.device_name(),
            "device_index": self.backend.device_index,
            "gpu_uuid": static.get("uuid"),
            "pci_bus_id": static.get("pci_bus_id") or _pci(self.backend),
            "host": socket.gethostname(),
            "cluster": self.request.how.cluster,
        }

    def _measure(self) -> tuple[str, list[str]]:
        """Every suite's cases, then the per-process rounds: the run's status and the notes of the rounds."""
        notes: list[str] = []
        status = "complete"
        stopping = ("stopping: the case in progress is abandoned (Ctrl-C again to stop at once)" if self.abandon
                    else "stopping after this case (Ctrl-C again to stop now)")
        try:
            with _StopFlag(lambda: self.progress and self.progress.note(stopping)) as stop:
                if self.per_process:
                    self.workers = proc.Workers(_spec(self.p, self.backend, self.config, self.telemetry,
                                                      self.request.how.processes, self.per_process),
                                                self.request.how.processes - 1, stop=lambda: stop.set,
                                                pinning=self.pinning)
                    self.watch.add_own(self.workers.pids)
                status = self._suites(stop)
                if self.workers is not None and not stop.set:
                    notes += _rounds(self.p, self.workers, self.request.how.processes, self.watch, self.outcome,
                                     self.base, self.config, self.progress)
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
            if self.workers is not None:
                self.workers.close()
            try:
                self.reader.close()
            except Exception:  # noqa: BLE001
                pass
        return status, notes

    def _suites(self, stop: _StopFlag) -> str:
        """Each suite's cases, then the figures it derives over them; "interrupted" where a Ctrl-C stopped them."""
        for suite in self.p.suites:
            rows: list[dict[str, Any]] = []  # what the run directory gets (every rank's, on rank 0)
            mine: list[dict[str, Any]] = []  # this process's
            for case in self.p.cases[suite.name]:
                self._step(stop, f"{suite.name} {case.id}")
                if stop.set:
                    break
                new = self._case(suite, case, stop)
                mine.extend(new)
                new = self._share(new)
                if any(r["message"] == ABANDONED for r in new):
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
                for r in derived:
                    r["message"] = (r["message"] + "; run interrupted: over the cases measured")[:MAX_MESSAGE]
            derived = self._share(derived)
            if derived:
                rows.extend(derived)
                self._write(suite, rows)
            if stop.set:
                return "interrupted"
        return "complete"

    def _case(self, suite: Suite, case: Case, stop: _StopFlag) -> list[dict[str, Any]]:
        """This process's rows of one case, marked with who else used the machine meanwhile."""
        self.current = f"{suite.name} {case.id}"
        cfg = self.config
        if case.id in self.per_process.get(suite.name, ()):
            self.workers.wait_ready()  # their start-up is over before a figure the host sets is measured
            cfg = proc.scaled(self.config, self.request.how.processes)
        token = self.watch.begin()
        new = self._run_case(suite, case, cfg, (lambda: stop.set) if self.abandon else None)
        mark_rows(new, *self.watch.end(token, suite.name, case.id))
        return new

    def _write(self, suite: Suite, rows: list[dict[str, Any]]) -> None:
        df = results.frame(rows, suite.params)
        self.rd.write_table(suite.name, df)
        self.outcome.tables[suite.name] = df


class Ranks(Single):
    """The ranks of a collective suite (comm) run the plan in step, the engine agreeing on every decision; rank 0
    alone writes the run directory."""

    # The ranks of a collective, which must call it together, finish the case in progress, then stop.
    abandon = False

    def _per_process(self) -> dict[str, list[str]]:
        return {}  # a run of several ranks measures in its own processes

    def _processes_asked(self) -> int:
        return 1

    def _join(self, meta: dict[str, Any], base: dict[str, Any]) -> None:
        meta["dist"] = describe.run_meta(self.group, self.backend)

    def _run_dir(self, meta: dict[str, Any]) -> RunDir | _Unwritten:
        writer = self.group.rank == 0
        rd = super()._run_dir(meta) if writer else _Unwritten()
        # Every rank knows where the run is: any of them closes it where rank 0 is gone (stopped, killed).
        path = self.group.gather_objects(str(rd.path) if writer else None)[0]
        self.group.publish_run_dir(path)
        if not writer:
            rd.closes = path
        return rd

    def _own_pids(self) -> set[int]:
        # Other ranks' processes may hold contexts on this device (peer access): they are ours, not a co-tenant.
        return set(self.group.gather_objects(os.getpid()))

    def _step(self, stop: _StopFlag, label: str) -> None:
        # A Ctrl-C seen by any rank stops them all after the same case.
        self.group.step(label)
        stop.set = self.group.any(stop.set)


class Fleet(Ranks):
    """``run --devices``: each rank measures its own device alone; the ranks go case by case in step, and rank 0
    writes every rank's rows of a case once it is done everywhere."""

    abandon = True

    def _join(self, meta: dict[str, Any], base: dict[str, Any]) -> None:
        _same_plan(self.p, self.group)
        meta["fleet"] = self.group.gather_objects({"rank": self.group.rank, "pid": os.getpid(),
                                                   **{k: base[k] for k in _WHO},
                                                   "fingerprint": self.fingerprint.get("fingerprint")})

    def _run_id(self, rd: RunDir | _Unwritten) -> str | None:
        return self.group.gather_objects(rd.run_id)[0]

    def _run_case(self, suite: Suite, case: Case, cfg: engine.EngineConfig,
                  interrupted: Callable[[], bool] | None) -> list[dict[str, Any]]:
        # Each device measures alone: the group only ticks.
        return run_case(suite, case, self.backend, self.base, cfg, self.sampler, tick=self.group.step,
                        interrupted=interrupted, ctx=self.p.contexts.get(suite.name))

    def _share(self, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return _everyones(self.group, rows)


def _spec(p: Plan, backend: Backend, config: engine.EngineConfig, telemetry: bool, count: int,
          cases: dict[str, list[str]]) -> proc.Spec:
    """What the workers need to lay out the run's cases as it did."""
    ctx = next(iter(p.contexts.values()))
    return proc.Spec(
        backend=backend.name, device=backend.device_index, suites=[s.name for s in p.suites],
        options={name: dict(c.options) for name, c in p.contexts.items()}, quick=ctx.quick,
        sizes=list(ctx.sizes) if ctx.sizes else None, dtypes=list(ctx.dtypes) if ctx.dtypes else None,
        search=ctx.search, telemetry=telemetry, config=config, processes=count, cases=cases)


def _rounds(p: Plan, workers: proc.Workers, count: int, watch: contention.Watch, outcome: Outcome,
            base: dict[str, Any], config: engine.EngineConfig, progress: Any) -> list[str]:
    """Workers 1..count-1 measure the per-process cases one after the other; each one's samples join the rows
    (and the suites' derived rows are made again over them). The notes of workers that could not."""
    notes: list[str] = []
    # Only the cases the run measured ok: a case it skipped (no GPU, too large) or that failed is not measured again.
    ok = {name: sorted(set(outcome.tables[name].query("status == 'ok'")["case"]) & set(ids))
          for name, ids in workers.spec.cases.items() if name in outcome.tables}
    ok = {name: ids for name, ids in ok.items() if ids}
    n = sum(len(c) for c in ok.values())
    if not n:
        return notes
    for k in range(1, count):
        t0 = time.monotonic()
        try:
            got = workers.measure(k, sorted(watch.own), ok)
        except proc.WorkerError as e:
            line = f"process {k + 1} of {count}: {e}; its cases keep the samples of the other processes"
            notes.append(line)
            if progress:
                progress.note(line)
            if workers.stop():
                break
            continue
        by_key = {(r["suite"], r["case"], r["metric"]): r for r in got}
        for suite in p.suites:
            if suite.name not in workers.spec.cases or suite.name not in outcome.tables:
                continue
            rows = outcome.tables[suite.name].to_dict("records")
            measured = [proc.pool(r, by_key[(r["suite"], r["case"], r["metric"])], k, config.target_cv)
                        if (r["suite"], r["case"], r["metric"]) in by_key else r
                        for r in rows if r.get("stop") != "derived"]
            failed = {r["case"]: r for r in got if r["suite"] == suite.name and r["status"] not in ("ok", "invalid")}
            notes += [f"{suite.name} {case}: process {k + 1} of {count}: {r['status']}: {r['message']}"[:MAX_MESSAGE]
                      for case, r in failed.items()]
            for r in measured:
                watch.mark(suite.name, r["case"], r.get("contended"), r.get("host_load"))
            derived = derive(suite, measured, base)
            df = results.frame(measured + derived, suite.params)
            outcome.run_dir.write_table(suite.name, df)
            outcome.tables[suite.name] = df
        if progress:
            progress.note(f"process {k + 1} of {count}: measured the {n} case(s) set per process "
                          f"({time.monotonic() - t0:.1f} s)")
    return notes
