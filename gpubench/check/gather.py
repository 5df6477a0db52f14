"""``gpubench check --gather --fleet DIR``: the verdicts of every node's check under DIR (ci/check-nodes.sbatch
writes them there), one line per node worst first, each GPU's figures also held against the same figure on every
other node's GPUs of its model (the median of those, leaving the node out): a node that passed its own check but
reads 10 % under the fleet is named here. Nothing is measured, so nothing is retried: such a finding is a WARN
(look at it), and a FAIL stays the node's own verdict. Exit 1 if a node FAILed (with --strict, or WARNed).

The nodes expected come from the allocation, never from who answered (--expect-nodes N|LIST, else SLURM's
SLURM_JOB_NODELIST through ``scontrol show hostnames``): a node that left no verdict (it died, its check crashed
or never started) is a FAIL line, "no verdict", with its check's exit code where its task wrote one
(``<node>.exit`` beside the verdicts) and srun's (--srun-exit)."""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any

import numpy as np

from gpubench import outputs
from gpubench.check.judge import PEER_FAIL
from gpubench.check.model import FORMAT, FORMAT_VERSION, STATES, worst
from gpubench.check.node import peer_figures, read_all
from gpubench.console import out_console
from gpubench.errors import UsageError
from gpubench.ranks import hostlist


class _Figure:
    """One figure over the fleet's GPUs of a model, sorted once: its median leaving one node's GPUs out, exactly,
    without copying the rest (a gather of 1,000 nodes of 8 GPUs asks it 9,000 times)."""

    def __init__(self, pairs: list[tuple[str, float]]):
        self.values = np.sort(np.array([v for _, v in pairs], dtype=float))
        self.own: dict[str, list[float]] = {}
        for host, value in pairs:
            self.own.setdefault(host, []).append(value)

    def median_without(self, host: str) -> tuple[float, int] | None:
        """The median of every other node's figures and how many there are; None under 2."""
        own = sorted(self.own.get(host, []))
        m = len(self.values) - len(own)
        if m < 2:
            return None
        where, last, dup = [], None, 0
        for v in own:  # the positions of this node's figures in the sorted whole (equal ones side by side)
            dup = dup + 1 if v == last else 0
            where.append(int(np.searchsorted(self.values, v, "left")) + dup)
            last = v

        def at(rank: int) -> float:  # the rank-th of the others: each left-out position at or before it shifts it
            i = rank
            for p in where:
                if p <= i:
                    i += 1
            return float(self.values[i])

        return (at((m - 1) // 2) + at(m // 2)) / 2, m


Pool = dict[tuple[str, str], _Figure]  # (model, check) -> that figure over every node


def _fleet_median(pool: Pool, key: tuple[str, str], host: str, memo: dict) -> tuple[float, int] | None:
    """The median of a figure over every other node's GPUs of the model, and how many; None under 2 (memoised
    per node: its GPUs share it)."""
    if (key, host) not in memo:
        memo[(key, host)] = pool[key].median_without(host) if key in pool else None
    return memo[(key, host)]


def _outliers(doc: dict[str, Any], pool: Pool, memo: dict) -> list[dict[str, Any]]:
    """Fleet findings for one node: its GPUs' figures worse than the other nodes' median by more than PEER_FAIL,
    beyond the figure's own interval."""
    out = []
    model = next((g.get("name") for g in doc.get("gpus", []) if g.get("name")), "")
    for v in doc.get("verdicts", []):
        value = v.get("value")
        if v.get("kind") != "performance" or not isinstance(value, (int, float)) or not math.isfinite(value):
            continue
        fleet = _fleet_median(pool, (model, v["check"]), doc["host"], memo)
        if fleet is None:
            continue
        median, peers = fleet
        higher = v.get("better") == "higher"
        ci = v.get("ci") or [value, value]
        best = max(ci) if higher else min(ci)
        limit = median * (1 - PEER_FAIL) if higher else median * (1 + PEER_FAIL)
        if (best < limit) if higher else (best > limit):
            where = f"GPU {v['gpu']}" if v.get("gpu") is not None else v.get("target", "node")
            out.append({**v, "check": v["check"], "target": v.get("target"), "state": "WARN",
                        "text": f"{where} {value:,.4g} {v.get('unit') or ''}: {abs(value / median - 1):.0%} "
                                f"{'below' if higher else 'above'} the fleet's median {median:,.4g} "
                                f"({peers} GPUs on other nodes)", "peer_median": median, "peers": peers,
                        "notes": ["fleet"]})
    return out


def expected_nodes(expect: str | None, env: dict[str, str] | None = None) -> tuple[list[str], int]:
    """The nodes the allocation holds (names, in order) and how many: ``--expect-nodes`` N (a count alone) or a
    SLURM host list; else SLURM_JOB_NODELIST where set; else none known (0)."""
    env = os.environ if env is None else env
    text = expect if expect is not None else env.get("SLURM_JOB_NODELIST")
    if not text:
        return [], 0
    if text.strip().isdigit():
        return [], int(text)
    names = list(dict.fromkeys(hostlist.expand(text)))
    return names, len(names)


def _silent(root: Path, name: str, srun_exit: int | None) -> dict[str, Any]:
    """The FAIL line of an expected node that left no verdict."""
    why = ["no verdict"]
    exit_file = root / f"{name}.exit"
    if exit_file.is_file():
        why.append(f"its check exited {exit_file.read_text().strip() or '?'}")
    if srun_exit is not None:
        why.append(f"srun exit {srun_exit}")
    return {"host": name, "state": "FAIL", "headline": f"node {name}: FAIL — {'; '.join(why)}", "fleet": [],
            "path": None, "started": None}


def gather(root: str | Path, expect: str | None = None, srun_exit: int | None = None) -> list[dict[str, Any]]:
    docs = read_all(Path(root))
    names, count = expected_nodes(expect)
    if not docs and not count:
        raise UsageError(f"--fleet {root}: no check verdict (check.json) under it: run gpubench check on the nodes "
                         "with --out there first")
    pool_lists: dict[tuple[str, str], list[tuple[str, float]]] = {}
    for doc in docs:
        model = next((g.get("name") for g in doc.get("gpus", []) if g.get("name")), "")
        for check, value in peer_figures(doc):
            pool_lists.setdefault((model, check), []).append((doc["host"], value))
    pool = {k: _Figure(v) for k, v in pool_lists.items()}
    memo: dict = {}
    nodes = []
    for doc in docs:
        fleet = _outliers(doc, pool, memo)
        state = worst([doc.get("state", "SKIP"), *(f["state"] for f in fleet)])
        nodes.append({"host": doc["host"], "state": state, "headline": doc.get("headline", ""), "fleet": fleet,
                      "path": doc.get("_path"), "started": doc.get("started")})
    seen = {n["host"] for n in nodes}
    nodes += [_silent(Path(root), name, srun_exit) for name in names if name not in seen]
    if not names and count > len(nodes):  # a count alone: the silent nodes cannot be named
        nodes.append({"host": "?", "state": "FAIL", "fleet": [], "path": None, "started": None,
                      "headline": f"{count - len(nodes)} of {count} expected nodes left no verdict"
                                  + (f"; srun exit {srun_exit}" if srun_exit is not None else "")})
    rank = {s: i for i, s in enumerate(STATES)}
    return sorted(nodes, key=lambda n: (rank[n["state"]], n["host"]))


def main(root: str, fmt: str, report: str | None, strict: bool, expect: str | None = None,
         srun_exit: int | None = None) -> int:
    nodes = gather(root, expect, srun_exit)
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


__all__ = ["gather", "main", "expected_nodes"]
