"""``gpubench check --gather --fleet DIR``: the verdicts of every node's check under DIR (ci/check-nodes.sbatch
writes them there), one line per node worst first, each GPU's figures also held against the same figure on every
other node's GPUs of its model (the median of those, leaving the node out): a node that passed its own check but
reads 10 % under the fleet is named here. Nothing is measured, so nothing is retried: such a finding is a WARN
(look at it), and a FAIL stays the node's own verdict. Exit 1 if a node FAILed (with --strict, or WARNed).

The nodes expected come from the allocation, never from who answered (--expect-nodes N|LIST, else SLURM's
SLURM_JOB_NODELIST through ``scontrol show hostnames``): a node that left no verdict (it died, its check crashed
or never started) is a FAIL line, "no verdict", with its check's exit code where its task wrote one
(``<node>.exit`` beside the verdicts) and srun's (--srun-exit); a node that reported but was not expected is a WARN
saying so, with a hint where only zero-padding tells the two names apart.

The fabric check's verdict (``gpubench check --fabric``: host "fabric of N nodes", verdicts that name ``nodes``) is
no node of its own: each of its WARN and FAIL verdicts folds into every node it names (a link into both ends), a
``fabric:`` line under that node, and a node it names that left no check of its own still has its line."""

from __future__ import annotations

import contextlib
import gc
import json
import math
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from gpubench.results import destination as outputs
from gpubench.check.judge import PEER_FAIL
from gpubench.check.verdicts import FORMAT, FORMAT_VERSION, STATES, worst
from gpubench.check.node import VERDICT_FILE, peer_figures, read_all
from gpubench.console import out_console
from gpubench.errors import UsageError
from gpubench.ranks import hostlist


class _Figure:
    """One figure over the fleet's GPUs of a model: for every node, the median of the other nodes' figures, exactly,
    all nodes at once (a gather of 1,000 nodes of 8 GPUs asks for 9,000 of them).

    The figures are sorted once; the median of the rest is one or two ranks of what remains once a node's own
    figures are taken out, and such a rank is found in the sorted whole by stepping past each of the node's own
    positions at or before it: a loop over a node's GPUs (8), each step done for every node at once."""

    def __init__(self, pairs: list[tuple[str, float]]):
        values = np.array([v for _, v in pairs], dtype=float)
        n, ascending = len(values), np.argsort(values, kind="stable")
        self.values = values[ascending]
        index: dict[str, int] = {}
        ids = np.array([index.setdefault(host, len(index)) for host, _ in pairs], dtype=np.int64)
        # Where each figure sits in the sorted whole (equal figures at distinct positions, side by side).
        position = np.empty(n, dtype=np.int64)
        position[ascending] = np.arange(n)
        counts = np.bincount(ids, minlength=len(index))
        # own[h]: node h's positions, ascending, padded past the end (never at or before a rank).
        order = np.lexsort((position, ids))
        column = np.arange(n) - np.concatenate(([0], np.cumsum(counts)[:-1]))[ids[order]]
        own = np.full((len(index), int(counts.max(initial=0))), n, dtype=np.int64)
        own[ids[order], column] = position[order]
        rest = n - counts

        def at(rank: np.ndarray) -> np.ndarray:  # the rank-th of the others, for every node
            i = rank.copy()
            for k in range(own.shape[1]):
                i += own[:, k] <= i
            return self.values[np.clip(i, 0, max(n - 1, 0))]

        low, high = np.maximum((rest - 1) // 2, 0), np.maximum(rest // 2, 0)
        medians = (at(low) + at(high)) / 2
        self._medians = {host: (float(medians[h]), int(rest[h])) if rest[h] >= 2 else None
                         for host, h in index.items()}
        self._whole = (float(np.median(self.values)), n) if n >= 2 else None  # for a node with none of its own

    def median_without(self, host: str) -> tuple[float, int] | None:
        """The median of every other node's figures and how many there are; None under 2."""
        return self._medians[host] if host in self._medians else self._whole


Pool = dict[tuple[str, str], _Figure]  # (model, check) -> that figure over every node


def _outliers(doc: dict[str, Any], pool: Pool) -> list[dict[str, Any]]:
    """Fleet findings for one node: its GPUs' figures worse than the other nodes' median by more than PEER_FAIL,
    beyond the figure's own interval; never a figure the host sets."""
    out = []
    model = next((g.get("name") for g in doc.get("gpus", []) if g.get("name")), "")
    for v in doc.get("verdicts", []):
        value = v.get("value")
        if v.get("kind") != "performance" or not isinstance(value, (int, float)) or not math.isfinite(value):
            continue
        if v.get("host_set"):  # the host's, not the GPU's: held to its envelope alone, as on the node (check.judge)
            continue  # (an idle node's host-timed launch read far above another's: docs/measurements.md, 'Faults')
        figure = pool.get((model, v["check"]))
        fleet = figure.median_without(doc["host"]) if figure is not None else None
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


FABRIC_HOST = "fabric of "  # the host of the fabric check's verdict: "fabric of 16 nodes"


def _is_fabric(doc: dict[str, Any]) -> bool:
    return str(doc.get("host", "")).startswith(FABRIC_HOST) or \
        any(v.get("nodes") for v in doc.get("verdicts", []) if isinstance(v, dict))


def _fabric_docs(docs: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(the nodes' own verdicts, the fabric verdicts): the newest per host read_all keeps, with the older ones of a
    fabric's run folder (runs of as many nodes share a host) counted back in, that the note may say how many."""
    fabric = [d for d in docs if _is_fabric(d)]
    seen = {str(Path(d["_path"]).resolve()) for d in fabric}
    for d in list(fabric):
        for path in Path(d["_path"]).parent.parent.glob(f"*/{VERDICT_FILE}"):
            if str(path.resolve()) in seen:
                continue
            seen.add(str(path.resolve()))
            try:
                other = json.loads(path.read_text())
            except (OSError, ValueError):
                continue
            if isinstance(other, dict) and _is_fabric(other):
                fabric.append({**other, "_path": str(path)})
    return [d for d in docs if not _is_fabric(d)], fabric


Findings = dict[str, list[dict[str, Any]]]  # node name -> the fabric's verdicts naming it


def _fabric_findings(fabric: list[dict[str, Any]], root: Path) -> tuple[Findings, dict[str, Any]]:
    """Each node's WARN and FAIL verdicts of the newest fabric check (by its start); what was read (``fabric_run``,
    the path of that verdict) and notes on it."""
    notes: list[str] = []
    read: dict[str, Any] = {"fabric_run": None, "notes": notes}
    if not fabric:
        exit_file = root / "fabric.exit"  # ci/check-nodes.sbatch's fabric step, where it ran
        code = exit_file.read_text().strip() if exit_file.is_file() else "0"
        if code != "0":
            notes.append(f"fabric: no verdict; its check exited {code or '?'} (its output is in the job's log)")
        return {}, read
    newest = max(fabric, key=lambda d: str(d.get("started") or ""))
    if len(fabric) > 1:
        notes.append(f"fabric: {len(fabric)} fabric verdicts under {root}; the newest is folded in "
                     f"({newest.get('started')}, {newest['_path']})")
    read["fabric_run"] = newest["_path"]
    findings: Findings = {}
    for v in newest.get("verdicts", []):
        if v.get("state") in ("FAIL", "WARN"):
            for name in dict.fromkeys(v.get("nodes") or []):
                findings.setdefault(str(name), []).append(v)
    return findings, read


def _fold_fabric(nodes: list[dict[str, Any]], findings: Findings, names: list[str]) -> list[dict[str, Any]]:
    """The fabric's findings into the lines of the nodes they name; a line of its own for a named node that has none
    (its own check left no verdict and it was not among the nodes expected)."""
    for n in nodes:
        n["fabric"] = findings.get(n["host"], [])
        n["state"] = worst([n["state"], *(f["state"] for f in n["fabric"])])
    lined = {n["host"] for n in nodes}
    for name, found in findings.items():
        if name not in lined:
            state = worst(f["state"] for f in found)
            nodes.append({"host": name, "state": state, "fleet": [], "fabric": found, "path": None, "started": None,
                          "headline": f"node {name}: {state} — no verdict of its own; named by the fabric check",
                          **({"expected": name in names} if names else {})})
    return nodes


def fabric_line(f: dict[str, Any], host: str) -> str:
    """A fabric finding under a node's line: ``fabric_node FAIL — ...``; elsewhere than the node itself, the target:
    ``fabric_link node01-node04 FAIL — ...: the link, not either node`` (under both its ends),
    ``fabric_nic node03:rail1 WARN — ...``."""
    target = str(f.get("target") or "")
    where = "" if target == host else f"{target} "
    return f"{f['check']} {where}{f['state']} — {f['text']}"


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


def _silent(root: Path, name: str, srun_exit: int | None, padded: str | None = None) -> dict[str, Any]:
    """The FAIL line of an expected node that left no verdict (``padded``: the node that reported under this name
    written with other zero-padding)."""
    why = ["no verdict"]
    exit_file = root / f"{name}.exit"
    if exit_file.is_file():
        why.append(f"its check exited {exit_file.read_text().strip() or '?'}")
    if srun_exit is not None:
        why.append(f"srun exit {srun_exit}")
    if padded:
        why.append(f"{padded} reported, a name that differs only in zero-padding")
    return {"host": name, "state": "FAIL", "headline": f"node {name}: FAIL — {'; '.join(why)}", "fleet": [],
            "path": None, "started": None, "expected": True}


def _unpadded(name: str) -> str:
    """``name`` with every number written without leading zeros: gpu-001 and gpu-1 read alike."""
    return re.sub(r"\d+", lambda m: str(int(m.group())), name)


def _not_expected(node: dict[str, Any], expect: str, count: int, padded: str | None) -> None:
    """Mark a node that reported but is not among the nodes expected: a WARN (the verdicts folder and the allocation
    disagree), with a hint where the two names differ only in zero-padding (SLURM host lists gpu-[001-003] and
    gpu-[1-3] name other nodes)."""
    hint = (f"; only zero-padding tells it from {padded} of that list (a SLURM range is as wide as its first number: "
            "[001-003] names 001, 002, 003 and [1-3] names 1, 2, 3)" if padded else "")
    node.update(state=worst([node["state"], "WARN"]), expected=False,
                unexpected=f"{node['host']} reported but is not among the {count} nodes expected ({expect}){hint}")


def _expected(nodes: list[dict[str, Any]], names: list[str], expect: str, root: Path,
              srun_exit: int | None) -> list[dict[str, Any]]:
    """The nodes that reported, each marked expected or not; a FAIL line for each expected node without a verdict."""
    seen = {n["host"] for n in nodes}
    silent = [name for name in names if name not in seen]
    known = set(names)
    strays = {_unpadded(n["host"]): n["host"] for n in nodes if n["host"] not in known}
    by_form = {_unpadded(name): name for name in silent}
    for n in nodes:
        if n["host"] in known:
            n["expected"] = True
        else:
            _not_expected(n, expect, len(names), by_form.get(_unpadded(n["host"])))
    return nodes + [_silent(root, name, srun_exit, strays.get(_unpadded(name))) for name in silent]


@contextlib.contextmanager
def _collector_paused() -> Iterator[None]:
    """Python's cyclic garbage collector off for the gather. The verdicts read are a million small dicts and lists,
    alive until the gather ends and free of cycles, and every few hundred new objects the collector walked them
    again (what that cost: docs/measurements.md, 'Wall time')."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def gather(root: str | Path, expect: str | None = None, srun_exit: int | None = None) -> list[dict[str, Any]]:
    return gather_fleet(root, expect, srun_exit)[0]


def gather_fleet(root: str | Path, expect: str | None = None,
                 srun_exit: int | None = None) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The fleet's lines, worst first, and what was read beside the nodes: ``fabric_run`` (the fabric verdict folded
    in, or None) and ``notes``."""
    with _collector_paused():
        return _gather(root, expect, srun_exit)


def _gather(root: str | Path, expect: str | None,
            srun_exit: int | None) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    docs, fabric = _fabric_docs(read_all(Path(root)))
    findings, read = _fabric_findings(fabric, Path(root))
    names, count = expected_nodes(expect)
    if not docs and not fabric and not count:
        raise UsageError(f"--fleet {root}: no check verdict (check.json) under it: run gpubench check on the nodes "
                         "with --out there first")
    pool_lists: dict[tuple[str, str], list[tuple[str, float]]] = {}
    for doc in docs:
        model = next((g.get("name") for g in doc.get("gpus", []) if g.get("name")), "")
        for check, value in peer_figures(doc):
            pool_lists.setdefault((model, check), []).append((doc["host"], value))
    pool = {k: _Figure(v) for k, v in pool_lists.items()}
    nodes = []
    for doc in docs:
        fleet = _outliers(doc, pool)
        state = worst([doc.get("state", "SKIP"), *(f["state"] for f in fleet)])
        nodes.append({"host": doc["host"], "state": state, "headline": doc.get("headline", ""), "fleet": fleet,
                      "path": doc.get("_path"), "started": doc.get("started")})
    if names:
        nodes = _expected(nodes, names, expect or os.environ.get("SLURM_JOB_NODELIST", ""), Path(root), srun_exit)
    if not names and count > len(nodes):  # a count alone: the silent nodes cannot be named
        nodes.append({"host": "?", "state": "FAIL", "fleet": [], "path": None, "started": None,
                      "headline": f"{count - len(nodes)} of {count} expected nodes left no verdict"
                                  + (f"; srun exit {srun_exit}" if srun_exit is not None else "")})
    nodes = _fold_fabric(nodes, findings, names)
    rank = {s: i for i, s in enumerate(STATES)}
    return sorted(nodes, key=lambda n: (rank[n["state"]], n["host"])), read


def main(root: str, fmt: str, report: str | None, strict: bool, expect: str | None = None,
         srun_exit: int | None = None) -> int:
    nodes, read = gather_fleet(root, expect, srun_exit)
    if fmt == "json":
        text = json.dumps({"format": f"{FORMAT}-fleet", "version": FORMAT_VERSION, **read, "nodes": nodes},
                          indent=2) + "\n"
        if report and report != "-":
            outputs.write_text(outputs.file(report, "--report"), text, "--report")
        else:
            print(text, end="")
    elif fmt != "table":
        raise UsageError("--gather writes --format table or json (each node's own check writes junit and prometheus)")
    else:
        console = out_console()
        counts = {s: sum(n["state"] == s for n in nodes) for s in STATES}
        strays = sum(n.get("expected") is False for n in nodes)
        among = f" ({len(nodes) - strays} expected, {strays} not expected)" if strays else ""
        console.print(f"fleet {root}: {len(nodes)} nodes{among} — " + ", ".join(f"{c} {s}" for s, c in counts.items()
                                                                               if c), markup=False, highlight=False)
        for note in read["notes"]:
            console.print(f"  note: {note}", markup=False, highlight=False, soft_wrap=True)
        for n in nodes:
            console.print(f"  {n['state']:<4}  {n['headline']}", markup=False, highlight=False, soft_wrap=True)
            if n.get("unexpected"):
                console.print(f"        not expected: {n['unexpected']}", markup=False, highlight=False, soft_wrap=True)
            for f in n["fleet"]:
                console.print(f"        fleet: {f['check']} {f['text']}", markup=False, highlight=False, soft_wrap=True)
            for f in n["fabric"]:
                console.print(f"        fabric: {fabric_line(f, n['host'])}", markup=False, highlight=False,
                              soft_wrap=True)
    bad = {"FAIL", "WARN"} if strict else {"FAIL"}
    return 1 if any(n["state"] in bad for n in nodes) else 0


__all__ = ["gather", "gather_fleet", "main", "expected_nodes", "fabric_line"]
