"""Where the time of a comm run goes, case by case: put this folder on PYTHONPATH and set GPUBENCH_PHASES to a
file name; each rank of `gpubench run --suite comm` then writes <name>.<rank>.json at its exit.

Phases of a case: prepare (suite.prepare), inputs (make_inputs: buffers, random data, a graph's capture),
check (the untimed correctness call and comparison), warmup and timing (the engine's two loops), write (the
table rewritten after the case), other (the rest of the case loop: agreement, progress). Before the first
case: start (interpreter, imports, process group). A measuring tool, not part of gpubench: it wraps functions
from outside and changes nothing they do.
"""

import atexit
import json
import os
import time

_T0 = time.perf_counter()
_PATH = os.environ.get("GPUBENCH_PHASES")

if _PATH and os.environ.get("RANK") is not None:
    from gpubench import engine, runner, rundir

    state = {"cases": [], "first_case": None, "last_end": None}
    cur: dict = {}

    def _wrap_inputs(workload):
        make = workload.make_inputs

        def timed():
            t = time.perf_counter()
            try:
                return make()
            finally:
                cur["inputs"] = cur.get("inputs", 0.0) + time.perf_counter() - t

        workload.make_inputs = timed
        return workload

    _prepare, _measure, _check = runner._prepare, engine.measure, engine.check
    _run_case, _write = runner.run_case, rundir.RunDir.write_table

    def prepare(suite, case, backend, group):
        t = time.perf_counter()
        try:
            return _wrap_inputs(_prepare(suite, case, backend, group))
        finally:
            cur["prepare"] = time.perf_counter() - t

    def check(*a, **k):
        t = time.perf_counter()
        try:
            return _check(*a, **k)
        finally:
            cur["check"] = cur.get("check", 0.0) + time.perf_counter() - t

    def measure(*a, **k):
        t = time.perf_counter()
        m = _measure(*a, **k)
        total = time.perf_counter() - t
        cur["warmup"] = m.warmup_s
        cur["timing"] = total - m.warmup_s - cur.get("check", 0.0) - cur.get("inputs", 0.0)
        cur["samples"], cur["inner"], cur["stop"] = len(m.samples_s), m.inner, m.stop
        return m

    def run_case(suite, case, *a, **k):
        now = time.perf_counter()
        if state["first_case"] is None:
            state["first_case"] = now
        elif state["last_end"] is not None and state["cases"]:
            state["cases"][-1]["other"] = now - state["last_end"] - state["cases"][-1].get("write", 0.0)
        cur.clear()
        try:
            return _run_case(suite, case, *a, **k)
        finally:
            cur["case"], cur["total"] = case.id, time.perf_counter() - now
            state["cases"].append(dict(cur))
            state["last_end"] = time.perf_counter()

    def write_table(self, suite, df):
        t = time.perf_counter()
        try:
            return _write(self, suite, df)
        finally:
            if state["cases"]:
                state["cases"][-1]["write"] = state["cases"][-1].get("write", 0.0) + time.perf_counter() - t

    runner._prepare, engine.measure, engine.check = prepare, measure, check
    runner.run_case, rundir.RunDir.write_table = run_case, write_table

    @atexit.register
    def _dump():
        end = time.perf_counter()
        out = {"rank": int(os.environ["RANK"]), "wall_s": end - _T0,
               "start_s": (state["first_case"] or end) - _T0,
               "end_s": end - (state["last_end"] or end), "cases": state["cases"]}
        with open(f"{_PATH}.{os.environ['RANK']}.json", "w") as f:
            json.dump(out, f)
