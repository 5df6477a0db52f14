"""What a fabric check leaves: a run directory like any run's (``run.json`` and a ``fabric`` table, rewritten after
every round, so a crash keeps the rounds done), whose rows compare, the history page and ``--fleet`` read as they
read any suite's, and the verdict beside them (``check.json``)."""

from __future__ import annotations

import socket
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from gpubench.backends.base import Backend
from gpubench.check.fabric.exchange import busbw_samples
from gpubench.check.fabric.judge import PairResult
from gpubench.check.node_history import VERDICT_FILE
from gpubench.check.outputs import json_
from gpubench.check.verdicts import NodeVerdict
from gpubench.results import frame
from gpubench.results.destination import write_text
from gpubench.results.rundir import RunDir
from gpubench.run.rows import figure, finish
from gpubench.suite import Case, Metric

TABLE = "fabric"  # the table's name in the run directory: the check's own, no suite's
VERSION = 1
BUSBW = Metric("busbw", "GB/s", "higher")
LATENCY = Metric("latency", "us", "lower")
PARAMS = ("pair", "rail", "phase", "bytes")


def open_run(out: str, cluster: str, argv: Sequence[str], backend: str, plan: dict[str, Any]) -> RunDir:
    return RunDir.create(out, cluster, {"argv": list(argv), "backend": backend, "fabric": plan,
                                        "suites": {TABLE: {"version": VERSION, "cases": 0}}, "notes": []})


def pair_rows(base: dict[str, Any], r: PairResult, answers: dict[int, Any], ranks: dict[tuple[str, int], int],
              nbytes: int) -> list[dict[str, Any]]:
    """A pair's rows: its busbw (GB/s, the sum over its rails, per iteration) and latency (µs), from its ranks'
    samples; a pair that returned nothing is a row of status error saying so."""
    rails = sorted(r.rails)
    case = Case.of(pair=f"{r.a}-{r.b}", rail="all" if len(rails) > 1 else str(rails[0]), phase=r.phase,
                   bytes=nbytes)
    sides = [[answers.get(ranks.get((n, rail))) or {} for n in (r.a, r.b)] for rail in rails]
    if r.busbw is None or any("samples" not in s for pair in sides for s in pair):
        silent = [str(x) for x, v in r.rails.items() if v is None]
        why = f"no answer on rail {', '.join(silent)} within the timeout" if silent else "no answer"
        return [finish(figure(base, TABLE, VERSION, case, m, []), "error", why) for m in (BUSBW, LATENCY)]
    per_rail = [busbw_samples(*pair) for pair in sides]
    busbw = [sum(xs) for xs in zip(*per_rail)]
    latency = [max(ts) * 1e6 for ts in zip(*(s["latency"] for pair in sides for s in pair))]
    return [finish(figure(base, TABLE, VERSION, case, BUSBW, busbw), "ok", ""),
            finish(figure(base, TABLE, VERSION, case, LATENCY, latency), "ok", "")]


def all_reduce_rows(base: dict[str, Any], reduced: dict[str, Any] | None, nodes: int, ranks: int) -> list[dict]:
    if not reduced or "skip" in reduced:
        return []
    case = Case.of(pair="all", rail="all", phase="all_reduce", bytes=reduced.get("bytes", 0), nodes=nodes, ranks=ranks)
    if "busbw" not in reduced:
        return [finish(figure(base, TABLE, VERSION, case, BUSBW, []), "error", reduced.get("silent", "no answer"))]
    return [finish(figure(base, TABLE, VERSION, case, BUSBW, list(reduced["busbw"])), "ok", "")]


def base_columns(backend: Backend, cluster: str) -> dict[str, Any]:
    return {"backend": backend.name, "device": backend.device_name(), "device_index": backend.device_index,
            "host": socket.gethostname(), "cluster": cluster, "processes": 1}


def write(rd: RunDir, rows: list[dict[str, Any]]) -> None:
    rd.write_table(TABLE, frame(rows, PARAMS))
    rd.meta["suites"][TABLE]["cases"] = len({r["case"] for r in rows})
    rd.flush()


def keep(rd: RunDir, node: NodeVerdict) -> Path:
    path = rd.path / VERDICT_FILE
    write_text(path, json_.check(node))
    return path


__all__ = ["open_run", "pair_rows", "all_reduce_rows", "base_columns", "write", "keep", "TABLE"]
