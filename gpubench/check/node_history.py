"""Envelopes made from check runs: a healthy fleet's (``gpubench expect``), or this node's own earlier checks
(``gpubench check --expect history``).

A figure counts where it was measured on an idle GPU: one measured beside another process (its row names a
co-tenant) is no evidence of what a healthy GPU reads. Each figure the host sets is tied to the host class it was
measured on (:func:`host_class`: the CPU model, as the run's fingerprint names it), since its level is the host's
(memory, root complex, the CPU that issues the copies) as much as the GPU's; a total over every GPU at once is also
tied to how many GPUs made it. A node's own history is its own envelope for every figure with at least
:data:`MIN_RUNS` earlier checks whose verdict on it was PASS or SKIP (a WARN or FAIL is left out, so that a
degradation does not become the norm); the shipped envelope of its GPU model holds the others.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpubench import __version__, results
from gpubench.check import envelope
from gpubench.check.judge import shared_with
from gpubench.check.verdicts import FORMAT, FORMAT_VERSION
from gpubench.errors import UsageError
from gpubench.results.host_set import set_by_host
from gpubench.timing.pace_line import median_pace

VERDICT_FILE = "check.json"
MIN_RUNS = 5  # earlier checks a figure of a node's own history needs before it is that node's envelope
WINDOW = 20  # the newest checks of a node its history reads
# Check verdicts before version 2 measured host copies on every GPU at once: no history of today's h2d/d2h.
HISTORY_FROM_VERSION = 2


def host_class(fingerprint: dict[str, Any] | None) -> str | None:
    """The class of host a figure the host sets was measured on: its CPU model (None where unknown)."""
    identity = (fingerprint or {}).get("identity") or {}
    model = identity.get("cpu_model")
    return str(model) if model else None


@dataclass
class Figures:
    """Healthy figures per check key, and what they were measured on."""

    values: dict[str, list[float]] = field(default_factory=dict)
    paces: dict[str, list[float | None]] = field(default_factory=dict)  # each value's host pace (µs), where taken
    kinds: dict[str, tuple[str, str, bool]] = field(default_factory=dict)  # unit, better, set by the host
    runs: dict[str, set[str]] = field(default_factory=dict)  # the check runs each key's figures come from
    nodes: dict[str, set[str]] = field(default_factory=dict)  # the nodes each key's figures come from
    gpus: dict[str, int] = field(default_factory=dict)  # a node total's GPU count
    models: set[str] = field(default_factory=set)
    hosts: set[str] = field(default_factory=set)
    host_classes: set[str] = field(default_factory=set)
    dates: set[str] = field(default_factory=set)


def verdict_files(paths: Iterable[str | Path]) -> list[tuple[Path, dict[str, Any]]]:
    """Every check verdict under ``paths`` (check run directories, or folders of them), read."""
    found = []
    for p in map(Path, paths):
        if not p.exists():
            raise UsageError(f"{p}: no such file or directory")
        for f in ([p / VERDICT_FILE] if (p / VERDICT_FILE).is_file() else sorted(p.rglob(VERDICT_FILE))):
            try:
                doc = json.loads(f.read_text())
            except (OSError, ValueError):
                continue
            if doc.get("format") == FORMAT:
                found.append((f, doc))
    return found


def _moved(run: str | None, verdict_file: Path) -> str | None:
    """A run directory as check.json names it, or where it is now: beside the directory holding check.json (runs
    copied off the node, or into results/reference, keep their names and their cluster folder)."""
    if not run or Path(run).is_dir():
        return run
    here = verdict_file.parent.parent / Path(run).name
    return str(here) if here.is_dir() else run


def _row(df, v: dict[str, Any]) -> dict[str, Any] | None:
    if df is None or df.empty:
        return None
    rows = df[(df["case"] == v.get("case")) & (df["unit"] == v.get("unit"))]
    return rows.iloc[0].to_dict() if len(rows) else None


def _run_meta(run: str | None) -> dict[str, Any]:
    try:
        return json.loads((Path(run) / results.RUN_FILE).read_text()) if run else {}
    except (OSError, ValueError):
        return {}


def _frame(run: str) -> tuple[Any, dict[str, Any]]:
    """A check run's rows and run.json; none where it cannot be read (moved, truncated, newer): its figures count
    for nothing, and the check goes on."""
    try:
        return results.load(run), _run_meta(run)
    except (UsageError, OSError, ValueError):
        return None, {}


def collect(found: list[tuple[Path, dict[str, Any]]], states: tuple[str, ...] | None = None) -> Figures:
    """The healthy figures of the verdicts ``found``: every measured figure (whatever it was judged: with no
    envelope yet many are SKIP), or only those whose verdict's state is one of ``states``."""
    out, frames = Figures(), {}
    for where, doc in found:
        out.models |= {g["name"] for g in doc.get("gpus", []) if g.get("name")}
        out.hosts.add(str(doc.get("host", "?")))
        out.dates.add(str(doc.get("started") or "")[:10])
        for v in doc.get("verdicts", []):
            if v.get("kind") != "performance" or v.get("value") is None or (states and v.get("state") not in states):
                continue
            run = _moved(v.get("run_dir"), where)
            if run and run not in frames:
                frames[run] = _frame(run)
            df, meta = frames.get(run, (None, {}))
            row = _row(df, v)
            if row is None or shared_with(row):  # a figure measured beside another process is no evidence
                continue
            host = bool(set_by_host(row))
            # As measured: a verdict judged at an envelope's pace keeps the figure it measured in "measured"
            out.values.setdefault(v["check"], []).append(float(v["measured"] if v.get("measured") is not None
                                                               else v["value"]))
            out.paces.setdefault(v["check"], []).append(median_pace(row.get("samples"), row.get("host_pace")))
            out.kinds[v["check"]] = (v.get("unit") or "", v.get("better") or "higher", host)
            out.runs.setdefault(v["check"], set()).add(str(where))
            out.nodes.setdefault(v["check"], set()).add(str(doc.get("host", "?")))
            if v.get("target") == "node" and host:
                out.gpus[v["check"]] = len(doc.get("gpus", []))
            cls = doc.get("host_class") or host_class(meta.get("fingerprint"))
            if host and cls:
                out.host_classes.add(str(cls))
    return out


def make(figures: Figures, source: str, match: str | None = None, meta: dict[str, Any] | None = None,
         keys: Iterable[str] | None = None, min_nodes: int = 1) -> envelope.Envelope:
    """An envelope of ``figures`` (one GPU model), of every key or those in ``keys``. A figure the host sets
    measured on fewer than ``min_nodes`` nodes is left out (its level is that host's: docs/measurements.md, 'check',
    h2d_all), and the envelope's ``left_out`` says so."""
    if len(figures.models) != 1:
        raise UsageError(f"the runs are of {len(figures.models)} GPU models "
                         f"({', '.join(sorted(figures.models)) or 'none named'}): make one envelope per model")
    model = next(iter(figures.models))
    wanted = set(figures.values) if keys is None else set(keys) & set(figures.values)
    few = sorted(k for k in wanted if figures.kinds[k][2] and len(figures.nodes.get(k, ())) < min_nodes)
    wanted -= set(few)
    if few:
        meta = {**(meta or {}), "left_out": f"{', '.join(few)}: the host sets them, and fewer than {min_nodes} "
                                            "nodes measured them (a node's own history holds them: --expect history)"}
    entries = {k: envelope.entry(figures.values[k], *figures.kinds[k], gpus=figures.gpus.get(k),
                                 paces=figures.paces.get(k))
               for k in figures.values if k in wanted}
    extra = {"host_class": sorted(figures.host_classes)} if figures.host_classes else {}
    return envelope.Envelope(model, match or f"^{re.escape(model)}$", entries, source, meta={**extra, **(meta or {})})


def own(root: str | Path, host: str, model: str | None) -> tuple[envelope.Envelope | None, str]:
    """This node's own envelope from its earlier checks under ``root`` (``<out>/<cluster>``): the figures with
    :data:`MIN_RUNS` earlier checks or more; (None, why) where none has."""
    root = Path(root)
    found = verdict_files([root]) if root.is_dir() else []
    found = [(p, d) for p, d in found if d.get("host") == host and isinstance(d.get("version"), int)
             and HISTORY_FROM_VERSION <= d["version"] <= FORMAT_VERSION
             and (model is None or model in {g.get("name") for g in d.get("gpus", [])})]
    found = sorted(found, key=lambda f: str(f[1].get("started") or ""))[-WINDOW:]
    figures = collect(found, states=("PASS", "SKIP"))
    keys = [k for k, runs in figures.runs.items() if len(runs) >= MIN_RUNS]
    if not keys:
        return None, (f"history: {len(found)} earlier check(s) of {host} under {root}, fewer than {MIN_RUNS} with "
                      "a healthy figure")
    dates = sorted(d for d in figures.dates if d)
    source = (f"history of {host}: {len(found)} earlier checks, {dates[0]} to {dates[-1]}, gpubench {__version__}"
              if dates else f"history of {host}: {len(found)} earlier checks")
    env = make(figures, source, keys=keys)
    env.path = str(root)
    return env, ""


__all__ = ["VERDICT_FILE", "MIN_RUNS", "WINDOW", "Figures", "host_class", "verdict_files", "collect", "make", "own"]
