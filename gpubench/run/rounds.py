"""The per-process rounds of a run: the cases a suite says are set per process (a figure whose level moves between
processes) are measured again in fresh worker processes, one after the other, and their samples pooled into the
run's rows (:mod:`gpubench.run.per_process`)."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

import pandas as pd

from gpubench.machine import contention
from gpubench.timing import engine
from gpubench import results
from gpubench.run import per_process as proc
from gpubench.backends.base import Backend
from gpubench.run.plan import Plan
from gpubench.run.request import RunRequest
from gpubench.run.rows import MAX_MESSAGE, derive, pool

if TYPE_CHECKING:
    from gpubench.console import ProgressSink
    from gpubench.results.rundir import RunRecord


def spec(request: RunRequest, backend: Backend, config: engine.EngineConfig, cases: dict[str, list[str]]) -> proc.Spec:
    """What the workers are given to lay out the run's cases as it did: its request."""
    return proc.Spec(request=request, backend=backend.name, device=backend.device_index, config=config, cases=cases)


def rounds(p: Plan, workers: proc.Workers, count: int, watch: contention.Watch, run_dir: RunRecord,
           tables: dict[str, pd.DataFrame], base: dict[str, Any], config: engine.EngineConfig,
           progress: ProgressSink | None) -> list[str]:
    """Workers 1..count-1 measure the per-process cases one after the other; each one's samples join the rows
    (and the suites' derived rows are made again over them), and the suites' ``tables`` in ``run_dir`` are
    rewritten after each. The notes of workers that could not."""
    notes: list[str] = []
    # Only the cases the run measured ok: a case it skipped (no GPU, too large) or that failed is not measured again.
    ok = {name: sorted(set(tables[name].query("status == 'ok'")["case"]) & set(ids))
          for name, ids in workers.spec.cases.items() if name in tables}
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
            if suite.name not in workers.spec.cases or suite.name not in tables:
                continue
            rows = tables[suite.name].to_dict("records")
            measured = [pool(r, by_key[(r["suite"], r["case"], r["metric"])], k, config.target_cv)
                        if (r["suite"], r["case"], r["metric"]) in by_key else r
                        for r in rows if r.get("stop") != "derived"]
            failed = {r["case"]: r for r in got if r["suite"] == suite.name and r["status"] not in ("ok", "invalid")}
            notes += [f"{suite.name} {case}: process {k + 1} of {count}: {r['status']}: {r['message']}"[:MAX_MESSAGE]
                      for case, r in failed.items()]
            for r in measured:
                watch.mark(suite.name, r["case"], r.get("contended"), r.get("host_load"))
            derived = derive(suite, measured, base)
            df = results.frame(measured + derived, suite.params)
            run_dir.write_table(suite.name, df)
            tables[suite.name] = df
        if progress:
            progress.note(f"process {k + 1} of {count}: measured the {n} case(s) set per process "
                          f"({time.monotonic() - t0:.1f} s)")
    return notes


__all__ = ["spec", "rounds"]
