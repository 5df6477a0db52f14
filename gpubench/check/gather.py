"""``gpubench check --gather --fleet DIR``: the verdicts of every node's check under DIR (ci/check-nodes.sbatch
writes them there), one line per node worst first, each GPU's figures also held against the same figure on every
other node's GPUs of its model (the median of those, leaving the GPU out): a node that passed its own check but
reads 10 % under the fleet is named here. Nothing is measured, so nothing is retried: such a finding is a WARN
(look at it), and a FAIL stays the node's own verdict. Exit 1 if a node FAILed (with --strict, or WARNed)."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np

from gpubench import outputs
from gpubench.check.judge import PEER_FAIL
from gpubench.check.model import FORMAT, FORMAT_VERSION, STATES, worst
from gpubench.check.node import peer_figures, read_all
from gpubench.console import out_console
from gpubench.errors import UsageError


def _outliers(doc: dict[str, Any], pool: dict[tuple[str, str], list[tuple[str, float]]]) -> list[dict[str, Any]]:
    """Fleet findings for one node: its GPUs' figures worse than the other nodes' median by more than PEER_FAIL,
    beyond the figure's own interval."""
    out = []
    model = next((g.get("name") for g in doc.get("gpus", []) if g.get("name")), "")
    for v in doc.get("verdicts", []):
        value = v.get("value")
        if v.get("kind") != "performance" or not isinstance(value, (int, float)) or not math.isfinite(value):
            continue
        others = [x for host, x in pool.get((model, v["check"]), []) if host != doc["host"]]
        if len(others) < 2:
            continue
        median = float(np.median(others))
        higher = v.get("better") == "higher"
        ci = v.get("ci") or [value, value]
        best = max(ci) if higher else min(ci)
        limit = median * (1 - PEER_FAIL) if higher else median * (1 + PEER_FAIL)
        if (best < limit) if higher else (best > limit):
            where = f"GPU {v['gpu']}" if v.get("gpu") is not None else v.get("target", "node")
            out.append({**v, "check": v["check"], "target": v.get("target"), "state": "WARN",
                        "text": f"{where} {value:,.4g} {v.get('unit') or ''}: {abs(value / median - 1):.0%} "
                                f"{'below' if higher else 'above'} the fleet's median {median:,.4g} "
                                f"({len(others)} GPUs on other nodes)", "peer_median": median, "peers": len(others),
                        "notes": ["fleet"]})
    return out


def gather(root: str | Path) -> list[dict[str, Any]]:
    docs = read_all(Path(root))
    if not docs:
        raise UsageError(f"--fleet {root}: no check verdict (check.json) under it: run gpubench check on the nodes "
                         "with --out there first")
    pool: dict[tuple[str, str], list[tuple[str, float]]] = {}
    for doc in docs:
        model = next((g.get("name") for g in doc.get("gpus", []) if g.get("name")), "")
        for check, value in peer_figures(doc):
            pool.setdefault((model, check), []).append((doc["host"], value))
    nodes = []
    for doc in docs:
        fleet = _outliers(doc, pool)
        state = worst([doc.get("state", "SKIP"), *(f["state"] for f in fleet)])
        nodes.append({"host": doc["host"], "state": state, "headline": doc.get("headline", ""), "fleet": fleet,
                      "path": doc.get("_path"), "started": doc.get("started")})
    rank = {s: i for i, s in enumerate(STATES)}
    return sorted(nodes, key=lambda n: (rank[n["state"]], n["host"]))


def main(root: str, fmt: str, report: str | None, strict: bool) -> int:
    nodes = gather(root)
    if fmt == "json":
        text = json.dumps({"format": f"{FORMAT}-fleet", "version": FORMAT_VERSION, "nodes": nodes}, indent=2) + "\n"
        if report and report != "-":
            outputs.write_text(outputs.file(report, "--report"), text, "--report")
        else:
            print(text, end="")
    elif fmt != "table":
        raise UsageError("--gather writes --format table or json (each node's own check writes junit and prometheus)")
    else:
        console = out_console()
        counts = {s: sum(n["state"] == s for n in nodes) for s in STATES}
        console.print(f"fleet {root}: {len(nodes)} nodes — " + ", ".join(f"{c} {s}" for s, c in counts.items() if c),
                      markup=False, highlight=False)
        for n in nodes:
            console.print(f"  {n['state']:<4}  {n['headline']}", markup=False, highlight=False, soft_wrap=True)
            for f in n["fleet"]:
                console.print(f"        fleet: {f['check']} {f['text']}", markup=False, highlight=False, soft_wrap=True)
    bad = {"FAIL", "WARN"} if strict else {"FAIL"}
    return 1 if any(n["state"] in bad for n in nodes) else 0


__all__ = ["gather", "main"]
