"""``gpubench check``'s measurements: ordinary ``gpubench run`` children, so that the check's figures are a run
directory like any other (compare, report and the nightly gate read it), while the health facts are polled here.

1. One run of the check set's per-GPU figures on every GPU at once (``--devices``: one process per GPU, the GPUs
   going case by case in step), at the quick grids' sizes, each figure in one process (``--processes 1``: a figure
   that fails gets a fresh process of its own, the retry).
2. With 2 GPUs or more, the comm suite over all of them (all_reduce busbw at a large size), and sendrecv on every
   pair in rounds of disjoint pairs run at once (the circle method: 8 GPUs make 7 rounds of 4 pairs), so that a bad
   link is named by its pair. On 2 GPUs the pair is the node: one run holds both.

The children's progress goes to the terminal (stderr); their stdout is read for the run directory.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from gpubench import results
from gpubench.check import checkset
from gpubench.check.checkset import Evidence, Figure
from gpubench.errors import UsageError
from gpubench.ranks.env import standalone

COMM_BYTES = {"cuda": "1G", "hip": "1G"}  # other backends (fake, cpu): 1M, so that tests stay quick
CHILD_TIMEOUT_S = 900.0
_RUN_DIR = re.compile(r"^run directory: (.+)$", re.MULTILINE)
VISIBLE = {"cuda": "CUDA_VISIBLE_DEVICES", "hip": "HIP_VISIBLE_DEVICES"}


@dataclass
class Child:
    """One gpubench run the check started: what it measured, or why it has nothing."""

    what: str  # "devices", "node", "pair 0-1", "retry ..."
    run_dir: str | None
    code: int
    why: str = ""
    pair: tuple[int, int] | None = None
    wall_s: float = 0.0


@dataclass
class Plan:
    backend: str
    devices: list[int]
    out: str
    cluster: str
    figures: list[Figure]
    timeout_s: float = CHILD_TIMEOUT_S
    children: list[Child] = field(default_factory=list)


def rounds(devices: Sequence[int]) -> list[list[tuple[int, int]]]:
    """Every pair of ``devices`` once, in rounds of disjoint pairs (round-robin by the circle method)."""
    ids = list(devices) + ([None] if len(devices) % 2 else [])
    n, out = len(ids), []
    for _ in range(n - 1):
        pairs = [(ids[i], ids[n - 1 - i]) for i in range(n // 2)]
        out.append([tuple(sorted(p)) for p in pairs if None not in p])
        ids = [ids[0], ids[-1], *ids[1:-1]]  # keep the first, rotate the rest
    return [r for r in out if r]


def _visible(backend: str, devices: Sequence[int]) -> dict[str, str]:
    """The environment that shows a child only ``devices`` (indices as this process numbers them)."""
    var = VISIBLE.get(backend)
    if var is None:
        return {}
    current = [d.strip() for d in os.environ.get(var, "").split(",") if d.strip()]
    names = [current[d] if d < len(current) else str(d) for d in devices]
    return {var: ",".join(names)}


def child(plan: Plan, what: str, words: list[str], env: dict[str, str] | None = None,
          pair: tuple[int, int] | None = None) -> Child:
    """Run ``gpubench run <words>`` and find its run directory. A child that ends without one says why. It is a
    world of its own: the launcher that may have started the check (srun) does not reach it."""
    argv = [sys.executable, "-m", "gpubench", "run", *words, "--out", plan.out, "--cluster", plan.cluster,
            "--backend", plan.backend]
    t0 = time.monotonic()
    try:
        proc = subprocess.run(argv, env={**standalone(os.environ), **(env or {})}, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True, timeout=plan.timeout_s)
    except subprocess.TimeoutExpired:
        c = Child(what, None, 124, f"no result within {plan.timeout_s:.0f} s (the run was stopped)", pair)
        plan.children.append(c)
        return c
    sys.stderr.write(_tail(proc.stderr, 20))
    found = _RUN_DIR.findall(proc.stdout or "")
    if proc.returncode == 2 and not found:
        raise UsageError(f"the check's {what} run refused its input: {_last_line(proc.stderr)}")
    run_dir = found[-1].strip() if found else None
    why = "" if run_dir else f"the run ended without results (exit {proc.returncode}): {_last_line(proc.stderr)}"
    c = Child(what, run_dir, proc.returncode, why, pair, time.monotonic() - t0)
    plan.children.append(c)
    return c


def _tail(text: str, lines: int) -> str:
    # Progress bars redraw with carriage returns: keep what a terminal would show last, not every frame.
    kept = [ln.rsplit("\r", 1)[-1] for ln in (text or "").splitlines() if ln.strip()]
    return "".join(f"  {ln}\n" for ln in kept[-lines:])


def _last_line(text: str) -> str:
    lines = [ln.strip() for ln in (text or "").splitlines() if ln.strip()]
    return lines[-1] if lines else "no message"


def measure(plan: Plan, say: Callable[[str], None]) -> list[Child]:
    """Every child run of the check, in order; returns them (also kept in ``plan.children``)."""
    suites, pattern = checkset.devices_filter(plan.figures)
    where = ["--devices", ",".join(map(str, plan.devices))] if len(plan.devices) > 1 else ["--device", str(plan.devices[0])]
    say(f"measuring {', '.join(suites)} on GPU{'s' if len(plan.devices) > 1 else ''} "
        f"{', '.join(map(str, plan.devices))}")
    child(plan, "devices", ["--suite", ",".join(suites), "--quick", "--processes", "1", "--filter", pattern, *where])
    if len(plan.devices) >= 2 and any(f.run != "devices" for f in plan.figures):
        _comm(plan, say)
    return plan.children


def _comm_args(plan: Plan, collectives: list[str], nproc: int) -> list[str]:
    size = COMM_BYTES.get(plan.backend, "1M")
    suite = next(f.suite for f in plan.figures if f.run != "devices")  # the ranks' suite, as checks.toml names it
    return ["--suite", suite, "--collectives", ",".join(collectives), "--sizes", size, "--nproc", str(nproc)]


def _comm(plan: Plan, say: Callable[[str], None]) -> None:
    n = len(plan.devices)
    wanted = {f.run for f in plan.figures}
    both = n == 2 and "pairs" in wanted  # the pair is the node: one run measures all_reduce and sendrecv
    if both or "node" in wanted:
        collectives = ["all_reduce"] * ("node" in wanted) + ["sendrecv"] * both
        say(f"measuring {' and '.join(collectives)} over {n} GPUs")
        node = child(plan, "node", _comm_args(plan, collectives, n), _visible(plan.backend, plan.devices))
        if both:
            node.pair = (plan.devices[0], plan.devices[1])
    if both or "pairs" not in wanted:
        return
    schedule = rounds(plan.devices)
    say(f"measuring sendrecv on {sum(map(len, schedule))} GPU pairs in {len(schedule)} rounds of disjoint pairs")
    for pairs in schedule:
        with ThreadPoolExecutor(max_workers=len(pairs)) as pool:
            list(pool.map(lambda p: child(plan, f"pair {p[0]}-{p[1]}", _comm_args(plan, ["sendrecv"], 2),
                                          _visible(plan.backend, p), pair=p), pairs))


def evidence(plan: Plan) -> list[Evidence]:
    """Each figure's evidence in the children's run directories; a figure whose run ended without results is
    evidence of that (``row`` None, ``why`` the child's)."""
    out: list[Evidence] = []
    for c in plan.children:
        figures = [f for f in plan.figures if _measured_by(f, c)]
        if c.run_dir is None:
            out += [_missing(f, c, plan) for f in figures]
            continue
        df = results.load(c.run_dir)
        for f in figures:
            # A pairs run's devices count from 0 within the pair; a node run on 2 GPUs is that pair's run too.
            pair = c.pair if f.target == "pair" and f.run != "devices" else None
            out += checkset.evidence(f, df, c.run_dir, pair=pair)
    return out


def _measured_by(f: Figure, c: Child) -> bool:
    if c.what == "devices":
        return f.run == "devices"
    if c.what == "node":
        return f.run == "node" or (f.run == "pairs" and c.pair is not None)
    return c.what.startswith("pair ") and f.run == "pairs"


def _missing(f: Figure, c: Child, plan: Plan) -> Evidence:
    if f.target == "gpu":
        return Evidence(f, "gpus " + ",".join(map(str, plan.devices)), None, None, None, c.why, None)
    target = f"gpu{c.pair[0]}-gpu{c.pair[1]}" if c.pair else "node"
    return Evidence(f, target, None, c.pair, None, c.why, None)


def retry(plan: Plan, ev: Evidence) -> float | None:
    """``ev``'s figure measured again in a fresh process: the case alone on its GPU, or its comm run again."""
    row = ev.row or {}
    if ev.figure.run == "devices":
        device = int(row.get("device_index") or 0)
        words = ["--suite", ev.figure.suite, "--quick", "--processes", "1",
                 "--filter", f"^{re.escape(str(row['case']))}$", "--device", str(device)]
        c = child(plan, f"retry {ev.figure.key} {ev.target}", words)
        pair = None
    else:
        gpus = list(ev.pair) if ev.pair else plan.devices
        collective = ["sendrecv"] if ev.pair else ["all_reduce"]
        c = child(plan, f"retry {ev.figure.key} {ev.target}", _comm_args(plan, collective, len(gpus)),
                  _visible(plan.backend, gpus), pair=ev.pair)
        pair = ev.pair
    if c.run_dir is None:
        return None
    again = checkset.evidence(ev.figure, results.load(c.run_dir), c.run_dir, pair=pair)
    match = [e for e in again if e.target == ev.target and e.row is not None and e.row.get("status") == "ok"]
    if not match and ev.figure.run == "devices" and ev.figure.target == "gpu":
        match = [e for e in again if e.row is not None and e.row.get("status") == "ok"]
    return match[0].value if match else None


def needs_more(plan: Plan) -> list[Figure]:
    """The figures this node has too few GPUs for."""
    return [f for f in plan.figures if f.needs > len(plan.devices)]


__all__ = ["Plan", "Child", "rounds", "measure", "evidence", "retry", "needs_more", "COMM_BYTES"]
