"""``python -m gpubench.run.worker DIR K``: worker process K of a run (gpubench.run.per_process).

It imports gpubench and every suite, then waits for ``start`` on its standard input (gpubench.run.prestart: the run
may start it before it knows what to measure; end of input instead: it leaves, having touched no device). Then it
reads the run's :class:`gpubench.run.per_process.Spec` from ``DIR/spec.pkl``, opens the same device, lays out the same
suites and picks the cases the spec names, says ``ready`` and waits. A line on its standard input
(JSON: ``own``, the pids of the run's own processes, which are not co-tenants, and ``cases``, suite -> the case
ids to measure: those the run measured ok) starts it: it measures each case once, as the run does
(gpubench.run.runner.run_case, the same engine settings, the budget shared between the processes), writes its rows
to ``DIR/rows-K.pkl`` and says ``done``. End of input before that line: it leaves without measuring.

Its protocol has the standard output to itself: whatever a library prints goes to standard error (the run
keeps it in DIR, and quotes its last line if the worker fails). A Ctrl-C ends it at once: the run decides.
"""

from __future__ import annotations

import json
import os
import pickle
import signal
import socket
import sys
from pathlib import Path

# None of these prints when imported: the protocol's standard output is set up in main, before any suite or
# device library (torch) is loaded.
from gpubench.machine import contention
from gpubench.run import leave, prestart, per_process as processes, runner
from gpubench.run.rows import mark_rows
from gpubench.backends import open_backend
from gpubench.registry import all_suites
from gpubench.run.plan import plan_for


def main(argv: list[str]) -> int:
    signal.signal(signal.SIGINT, signal.SIG_DFL)  # the run handles a Ctrl-C; a worker just ends
    protocol = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)  # prints of libraries go to the log, never into the protocol
    work, index = Path(argv[0]), int(argv[1])
    all_suites()  # their imports (torch), while the run is still at its own
    if sys.stdin.readline().strip() != prestart.START:
        return 0  # the run took no worker: nothing was opened
    spec = pickle.loads((work / "spec.pkl").read_bytes())
    os.environ["GPUBENCH_WORKER_INDEX"] = str(index)  # which process this is (the fake backend reads it)
    backend = open_backend(spec.backend, spec.device)
    plan = plan_for(spec.request, backend)
    telemetry = spec.request.how.telemetry
    protocol.write(f"{processes.READY}\n")
    go = sys.stdin.readline()
    if not go.strip():
        return 0
    job = json.loads(go)
    own, wanted = {int(p) for p in job["own"]}, job["cases"]
    cases = [(s, c) for s in plan.suites for c in plan.cases[s.name] if c.id in set(wanted.get(s.name, ()))]
    reader = backend.telemetry()
    sampler = reader if telemetry else None
    # The device was busy with this run's own work a moment ago (the run's process, the worker before): that is
    # no co-tenant, and flagging it blinded the gate to a night's per-process cases (docs/measurements.md, compare).
    watch = contention.Watch(reader if telemetry else None, own, busy_is_ours=True)
    base = {"backend": backend.name, "device": backend.device_name(), "device_index": backend.device_index,
            "host": socket.gethostname()}
    config = processes.scaled(spec.config, spec.request.how.processes)
    rows = []
    try:
        for suite, case in cases:
            token = watch.begin()
            new = runner.run_case(suite, case, backend, base, config, sampler, ctx=plan.contexts.get(suite.name))
            new = mark_rows(new, *watch.end(token))
            rows.extend(new)
    finally:
        try:
            reader.close()
        except Exception:  # noqa: BLE001
            pass
    tmp = work / f".rows-{index}.pkl"
    tmp.write_bytes(pickle.dumps(rows))
    os.replace(tmp, work / f"rows-{index}.pkl")
    protocol.write(f"{processes.DONE}\n")
    return 0


if __name__ == "__main__":
    # Out at once: the run waits for each worker to end before the next measures, and an interpreter's teardown
    # with torch loaded is most of that wait (docs/measurements.md, Wall time). Its rows are written by then.
    leave.at_once(main(sys.argv[1:]))
