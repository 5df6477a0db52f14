"""``gpubench check``'s measurements: one long-lived station per GPU (:mod:`gpubench.check.station`), started at once,
each paying Python's, torch's and the device's start-up once, that take their GPU's figures in turn; the figures
are ordinary run directories (compare, report and the nightly gate read them), found through the stations'
answers, never through what a terminal shows.

On one GPU its station measures every per-GPU figure in one run. On several, the stations form one group (a
torch.distributed world over the node's GPUs) and, in this order:

1. ``devices``: every GPU at once, case by case in step (as ``gpubench run --devices``): HBM, GEMMs, the launch,
   peer copies (each GPU's k-th peer is the GPU k + 1 places after it, so that at every step each GPU copies to a
   different one) and host copies on every GPU at once, whose total is a node figure of its own;
2. ``turns``: host copies one GPU at a time, each case on each GPU in turn, as nvbandwidth measures each GPU;
3. ``node``: all_reduce over every GPU (on 2 GPUs the pair is the node, and sendrecv is measured there too);
4. ``pairs`` (3 GPUs or more): the group is left, and the stations form pairs, round by round, every pair once in
   rounds of disjoint pairs run at once (the circle method: 8 GPUs make 7 rounds of 4 pairs), so that a bad link is
   named by its pair.

Each figure is measured in one process (``--processes 1``); a figure that would FAIL is measured again by fresh
stations (:func:`retry`): the retry in a fresh process.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from gpubench import results
from gpubench.check import checkset, stations
from gpubench.check.checkset import Evidence, Figure
from gpubench.check.stations import Pool, StationError
from gpubench.errors import UsageError
from gpubench.options import read as read_options
from gpubench.registry import select
from gpubench.run.request import Conduct, Placement, RunRequest, Selection, dumps

# How the check runs every measurement: at the quick grids' sizes, each figure in one process.
CONDUCT = {"quick": True, "telemetry": True, "processes": 1}
COMM_BYTES = {"cuda": 1 << 30, "hip": 1 << 30}  # other backends (fake, cpu): 1 MiB, so that tests stay quick
SMALL_COMM_BYTES = 1 << 20


@dataclass
class Child:
    """One measurement the check made: what, which figures, its run directory, or why it has none."""

    what: str  # "single", "devices", "turns", "node", "pairs round 2", "retry ..."
    run_dir: str | None
    code: int
    why: str = ""
    pair: tuple[int, int] | None = None
    wall_s: float = 0.0
    figures: tuple[str, ...] = ()  # the keys of the figures it measured
    gpus: tuple[int, ...] = ()
    status: str = ""  # its run's: complete, failed (a peer lost), interrupted


@dataclass
class Plan:
    backend: str
    devices: list[int]
    out: str
    cluster: str
    figures: list[Figure]
    children: list[Child] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)  # extra environment of every station


@dataclass(frozen=True)
class Step:
    """One job for a group of stations: its kind (:data:`gpubench.check.station.KINDS`), the figures it measures
    (or one ``case`` of them, for a retry)."""

    what: str
    kind: str
    figures: tuple[Figure, ...]
    sizes: tuple[int, ...] | None = None
    case: str | None = None


def rounds(devices: Sequence[int]) -> list[list[tuple[int, int]]]:
    """Every pair of ``devices`` once, in rounds of disjoint pairs (round-robin by the circle method)."""
    ids = list(devices) + ([None] if len(devices) % 2 else [])
    n, out = len(ids), []
    for _ in range(n - 1):
        pairs = [(ids[i], ids[n - 1 - i]) for i in range(n // 2)]
        out.append([tuple(sorted(p)) for p in pairs if None not in p])
        ids = [ids[0], ids[-1], *ids[1:-1]]  # keep the first, rotate the rest
    return [r for r in out if r]


def measured(plan: Plan) -> list[Figure]:
    """The figures this node has enough GPUs for."""
    return [f for f in plan.figures if f.needs <= len(plan.devices)]


def needs_more(plan: Plan) -> list[Figure]:
    """The figures this node has too few GPUs for."""
    return [f for f in plan.figures if f.needs > len(plan.devices)]


def _comm_sizes(plan: Plan) -> tuple[int, ...]:
    return (COMM_BYTES.get(plan.backend, SMALL_COMM_BYTES),)


def suites_of(plan: Plan) -> list[Any]:
    """The suites the plan's figures are measured by (importing them: torch)."""
    names = checkset.selection(measured(plan), plan.backend)[0]
    return select(",".join(names)) if names else []


def _job(plan: Plan, step: Step, gpus: Sequence[int]) -> Callable[[int], dict[str, Any]]:
    """The job of ``step`` for the station of each GPU of ``gpus``: its kind, and the run it asks for."""
    suites, pattern = checkset.selection(list(step.figures), plan.backend)
    if step.case is not None:
        pattern = f"^{re.escape(step.case)}$"
    chosen = tuple(select(",".join(suites)))
    devices = ",".join(map(str, gpus)) if step.kind in ("fleet", "turns") else None

    def job(gpu: int) -> dict[str, Any]:
        return {"kind": step.kind, "what": step.what,
                "request": dumps(_request(plan, chosen, pattern, step.sizes, devices, gpu))}

    return job


def _request(plan: Plan, suites: tuple[Any, ...], pattern: str, sizes: tuple[int, ...] | None, devices: str | None,
             gpu: int) -> RunRequest:
    """The run a station measures, as ``gpubench run`` would have been asked it (run.json keeps that command line):
    the check's grids are the quick ones, each figure measured in one process (:data:`CONDUCT`)."""
    argv = ["gpubench", "run", "--suite", ",".join(s.name for s in suites), "--quick", "--processes", "1",
            "--filter", pattern, "--backend", plan.backend, "--out", plan.out, "--cluster", plan.cluster]
    argv += ["--devices", devices] if devices else ["--device", str(gpu)]
    argv += ["--sizes", ",".join(map(str, sizes))] if sizes else []
    return RunRequest(
        what=Selection(suites=suites, case_filter=pattern, sizes=sizes,
                       options={s.name: read_options(s.options, {}) for s in suites}),
        where=Placement(backend=plan.backend, device=gpu, devices=devices),
        how=Conduct(**CONDUCT, out=plan.out, cluster=plan.cluster),
        argv=tuple(argv),
    )


def _record(plan: Plan, step: Step, gpus: Sequence[int], run_dir: str | None, code: int, why: str, t0: float,
            pair: tuple[int, int] | None = None, status: str = "") -> Child:
    c = Child(step.what, run_dir, code, why, pair, time.monotonic() - t0, tuple(f.key for f in step.figures),
              tuple(gpus), status)
    plan.children.append(c)
    return c


def session(plan: Plan, pool: Pool, sets: Sequence[Sequence[int]], steps: Sequence[Step],
            pairs: Sequence[tuple[int, int] | None] | None = None) -> list[Child]:
    """``steps`` in order on groups of stations, one group per GPU set in ``sets`` (all at once): formed first,
    left after. A station that fails ends the attempt: its group's stations are ended (they may wait inside a
    collective) and the steps not done are tried once more by fresh stations; a second failure records them
    with why (a figure not measured twice is a FAIL, never a pass)."""
    pairs = list(pairs) if pairs is not None else [None] * len(sets)
    done: list[Child] = []
    why = ""
    for attempt in (1, 2):
        try:
            done += _attempt(plan, pool, sets, steps[len(done) // len(sets):], pairs)
            return done
        except _Failed as failed:
            done += failed.done
            why = failed.error.why
            if len(done) == len(steps) * len(sets):
                return done  # every step was done: it was leaving the group that failed
            if not (attempt == 1 and failed.retryable):
                break
    for step in steps[len(done) // len(sets):]:
        for gpus, pair in zip(sets, pairs):
            done.append(_record(plan, step, gpus, None, 1, why, time.monotonic(), pair))
    return done


class _Failed(Exception):
    def __init__(self, error: StationError, done: list[Child], retryable: bool):
        self.error, self.done, self.retryable = error, done, retryable


def _attempt(plan: Plan, pool: Pool, sets: Sequence[Sequence[int]], steps: Sequence[Step],
             pairs: Sequence[tuple[int, int] | None]) -> list[Child]:
    grouped = len(sets) > 1 or len(sets[0]) > 1
    done: list[Child] = []
    members: list[list[stations.Station]] = []
    t0 = time.monotonic()  # the first step's wall includes forming the group
    try:
        members = [pool.get(gpus) for gpus in sets]
        if grouped:
            stations.form(members, pool.folder)
        for step in steps:
            # Every station is the check's own, not a co-tenant: once they have copied to their peers, each holds a
            # context on its peers' GPUs too (docs/measurements.md, check).
            jobs = [_job(plan, step, gpus) for gpus in sets]
            answers = stations.run(members, lambda k, gpu: {**jobs[k](gpu), "own": pool.pids()})
            for gpus, pair, a in zip(sets, pairs, answers):
                why = "" if a.get("run_dir") else f"the run ended without results ({a.get('status')})"
                done.append(_record(plan, step, gpus, a.get("run_dir"), int(bool(a.get("failures"))), why, t0, pair,
                                    str(a.get("status") or "")))
            t0 = time.monotonic()
        if grouped:
            stations.leave(members)
    except StationError as e:
        if e.usage:
            raise UsageError(f"the check's {steps[len(done) // len(sets)].what} run refused its input: {e.why}") \
                from None
        pool.discard([s for m in members for s in m])
        # a station that never started is not started again: only a session whose stations all started is retried
        raise _Failed(e, done, len(members) == len(sets)) from None
    return done


def measure(plan: Plan, pool: Pool, say: Callable[[str], None]) -> list[Child]:
    """Every measurement of the check, in order (docstring); returns them (also kept in ``plan.children``)."""
    figures = measured(plan)
    n, devices = len(plan.devices), plan.devices
    by_run = {run: tuple(f for f in figures if f.run == run) for run in checkset.RUNS}
    gpus_text = f"GPU{'s' if n > 1 else ''} {', '.join(map(str, devices))}"
    if n == 1:
        per_gpu = by_run["devices"] + by_run["turns"]
        if per_gpu:
            say(f"measuring {', '.join(checkset.selection(list(per_gpu))[0])} on {gpus_text}")
            session(plan, pool, [devices], [Step("single", "single", per_gpu)])
        return plan.children
    steps = []
    if by_run["devices"]:
        steps.append(Step("devices", "fleet", by_run["devices"]))
    if by_run["turns"]:
        steps.append(Step("turns", "turns", by_run["turns"]))
    node = by_run["node"] + (by_run["pairs"] if n == 2 else ())
    if node:
        steps.append(Step("node", "ranks", node, _comm_sizes(plan)))
    if steps:
        say(f"measuring {', '.join(s.what for s in steps)} on {gpus_text}")
        session(plan, pool, [devices], steps, [tuple(devices) if n == 2 else None])
    if n > 2 and by_run["pairs"]:
        schedule = rounds(devices)
        say(f"measuring {', '.join(f.key for f in by_run['pairs'])} on {sum(map(len, schedule))} GPU pairs in "
            f"{len(schedule)} rounds of disjoint pairs")
        for k, pairs in enumerate(schedule, 1):
            step = Step(f"pairs round {k}", "ranks", by_run["pairs"], _comm_sizes(plan))
            session(plan, pool, [list(p) for p in pairs], [step], list(pairs))
    return plan.children


def phases(plan: Plan) -> list[dict[str, Any]]:
    """What the check measured and how long each took (a round's pairs, measured at once, together), for
    check.json: where a check's time goes, and how it grows with the GPUs."""
    out: dict[str, dict[str, Any]] = {}
    for c in plan.children:
        p = out.setdefault(c.what, {"what": c.what, "gpus": [], "wall_s": 0.0, "run_dirs": [], "why": ""})
        p["gpus"] = sorted(set(p["gpus"]) | set(c.gpus))
        p["wall_s"] = round(max(p["wall_s"], c.wall_s), 2)
        p["run_dirs"] += [c.run_dir] if c.run_dir else []
        p["why"] = p["why"] or c.why
    return list(out.values())


def evidence(plan: Plan) -> list[Evidence]:
    """Each figure's evidence in the stations' run directories; a figure whose run ended without results is
    evidence of that (``row`` None, ``why`` the run's)."""
    out: list[Evidence] = []
    frames: dict[str, Any] = {}
    for c in plan.children:
        figures = [f for f in plan.figures if f.key in c.figures and not c.what.startswith("retry")]
        if c.run_dir is None:
            out += [e for f in figures for e in _missing(f, c)]
            continue
        if c.run_dir not in frames:
            frames[c.run_dir] = results.load(c.run_dir)
        for f in figures:
            # A comm run's figure is its pair's (the pair it was given), or the node's.
            pair = c.pair if f.target == "pair" and f.run in ("node", "pairs") else None
            got = checkset.evidence(f, frames[c.run_dir], c.run_dir, pair=pair)
            # A target its run has no row for (the run failed on the way: a peer lost) is not measured, never absent
            why = f"its run ({c.status or 'ended'}) has no row of it"
            targets = {e.target for e in got}
            out += got + [e for e in _missing(f, replace(c, why=why)) if e.target not in targets]
    return out


def _missing(f: Figure, c: Child) -> list[Evidence]:
    """What a measurement that ended without results leaves of ``f``: its why, on each target it would have had."""
    if f.target == "gpu":
        return [Evidence(f, f"gpu{g}", g, None, None, c.why, None) for g in c.gpus]
    if f.target == "pair" and c.pair:
        return [Evidence(f, f"gpu{c.pair[0]}-gpu{c.pair[1]}", None, c.pair, None, c.why, None)]
    if f.target == "pair":  # a devices run's pairs: every pair of its GPUs
        return [Evidence(f, f"gpu{a}-gpu{b}", None, (a, b), None, c.why, None)
                for i, a in enumerate(c.gpus) for b in c.gpus[i + 1:]]
    return [Evidence(f, "node", None, None, None, c.why, None)]


def retry(plan: Plan, ev: Evidence) -> Evidence | None:
    """``ev``'s figure measured again by fresh stations (fresh processes): a per-GPU case alone on its GPU, a
    total of every GPU at once again, a collective over its pair or the node again. None if it could not be."""
    f, row = ev.figure, ev.row or {}
    if f.combine:  # every GPU's case again (each GPU names its own case: the figure's pattern, not one id)
        gpus, step, pair = plan.devices, Step(f"retry {f.key} {ev.target}", "fleet", (f,)), None
    elif f.run in ("devices", "turns"):
        gpus = [int(row.get("device_index") or 0)]
        step, pair = Step(f"retry {f.key} {ev.target}", "single", (f,), case=str(row.get("case"))), None
    else:
        gpus, pair = (list(ev.pair), ev.pair) if ev.pair else (plan.devices, None)
        step = Step(f"retry {f.key} {ev.target}", "ranks", (f,), _comm_sizes(plan))
    with Pool(plan.backend, gpus, plan.env) as pool:
        pool.start()
        (c,) = session(plan, pool, [gpus], [step], [pair])
    if c.run_dir is None:
        return None
    again = checkset.evidence(f, results.load(c.run_dir), c.run_dir, pair=pair if f.target == "pair" else None)
    match = [e for e in again if e.target == ev.target and e.row is not None and e.row.get("status") == "ok"]
    if not match and f.target == "gpu":
        match = [e for e in again if e.row is not None and e.row.get("status") == "ok"]
    return match[0] if match else None


__all__ = ["Plan", "Child", "Step", "rounds", "measure", "measured", "suites_of", "session", "phases", "evidence",
           "retry", "needs_more", "COMM_BYTES"]
