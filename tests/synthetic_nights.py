"""Synthetic directories of quick-set nights, for compare's tests and the benchmark of its own cost.

    from synthetic_nights import make_nights
    runs = make_nights(tmp_path / "lab", 50)            # 50 nights, oldest first: run directories
    runs = make_nights(d, 10, slow={"measure=host_launch": 1.3}, slow_from=8)   # the last two 30 % slower

Every night is the one-H100 quick set of ci/nightly.sh (elementwise, gemm, launch and copy ``--quick``; 157 rows,
4 tables) measured on 2026-11-25 (results/reference/h100/gate-memory-20261125, copied with the ``roof`` tag
today's suites write into tests/fixtures/quick-night), its samples moved by seeded noise of the size an H100
shows when nothing changed: each night its own level per figure (``gpu_sd`` for figures the GPU times,
``host_sd`` for those the host sets: gpubench.results.host_set), each process of a figure measured in several processes
its own level around it, and every sample a little noise. The same arguments give the same nights.

Nothing here runs gpubench: the nights are written as its runs write them (results.save, run.json), so that
making 200 of them takes seconds, not 200 runs.
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from gpubench import results
from gpubench.results.host_set import set_by_host
from gpubench.timing.stats import summarize

TEMPLATE = Path(__file__).resolve().parent / "fixtures" / "quick-night"
START = datetime(2026, 11, 1, 3, 17, tzinfo=timezone.utc)
_STATS = ("mean", "min", "max", "stdev", "iqr", "cv")
_TEMPLATE_CACHE: dict[Path, tuple[dict[str, Any], dict[str, pd.DataFrame]]] = {}


def template(path: Path = TEMPLATE) -> tuple[dict[str, Any], dict[str, pd.DataFrame]]:
    """(run.json, {table name: rows}) of the night every synthetic night is made from."""
    if path not in _TEMPLATE_CACHE:
        meta = json.loads((path / results.RUN_FILE).read_text())
        tables = {t.name: results.load_table(t) for t in sorted(path.glob(f"*{results.TABLE_SUFFIX}"))}
        _TEMPLATE_CACHE[path] = (meta, tables)
    meta, tables = _TEMPLATE_CACHE[path]
    return copy.deepcopy(meta), {k: v.copy() for k, v in tables.items()}


def run_id(k: int, start: datetime = START) -> str:
    """Night ``k``'s run_id: the UTC start time (one night a day from ``start``) and a fixed suffix."""
    return f"{(start + timedelta(days=k)).strftime('%Y%m%dT%H%M%SZ')}-{k:06x}"


def _factor(row: dict[str, Any], slow: dict[str, float] | None) -> float:
    """How much slower night's ``row`` is: the first ``slow`` pattern its ``suite case metric`` matches."""
    for pattern, by in (slow or {}).items():
        if re.search(pattern, f"{row['suite']} {row['case']} {row['metric']}"):
            return by
    return 1.0


def _moved(row: dict[str, Any], rng: np.random.Generator, gpu_sd: float, host_sd: float, sample_sd: float,
           slower: float, paces: list[list[float]] | None = None) -> list[float]:
    """``row``'s samples at this night's level: theirs, times the night's level of the figure, each process's
    own around it, and each sample's noise; ``slower`` in the figure's worse direction. ``paces``: where given, a
    host-timed row's host pace per sample (µs) is appended to it, 100 × the night's and its process's level (a host
    whose speed sets the figure's level), and an empty list for any other row."""
    samples = np.asarray(row["samples"] or [], dtype=float)
    if samples.size == 0:
        if paces is not None:
            paces.append([])
        return []
    host = bool(set_by_host(row))
    level = 1.0 + rng.normal(0.0, host_sd if host else gpu_sd)
    procs = np.asarray(row.get("sample_process") or [0] * samples.size, dtype=int)
    if procs.size != samples.size:
        procs = np.zeros(samples.size, dtype=int)
    per_process = 1.0 + rng.normal(0.0, host_sd if host else gpu_sd / 2, size=int(procs.max()) + 1)
    noise = 1.0 + rng.normal(0.0, sample_sd, size=samples.size)
    worse = slower if row.get("better") == "lower" else 1.0 / slower
    if paces is not None:
        timed = str(row.get("timing_method") or "").startswith("host")
        paces.append(list(100.0 * level * per_process[procs]) if timed else [])
    return list(samples * level * per_process[procs] * noise * worse)


def night(k: int, *, seed: int = 0, gpu_sd: float = 0.004, host_sd: float = 0.03, sample_sd: float = 0.002,
          slow: dict[str, float] | None = None, base: Path = TEMPLATE,
          paced: bool = False) -> tuple[dict[str, Any], dict[str, pd.DataFrame]]:
    """(run.json, tables) of night ``k``; ``slow``: {regex on "suite case metric": factor} (1.3: 30 % slower);
    ``paced``: host-timed samples carry the host's pace, as gpubench's runs write them since schema 7."""
    meta, tables = template(base)
    rid = run_id(k)
    rng = np.random.default_rng([seed, k])
    for name, df in tables.items():
        rows = df.to_dict("records")
        paces: list[list[float]] | None = [] if paced else None
        new = [_moved(r, rng, gpu_sd, host_sd, sample_sd, _factor(r, slow), paces) for r in rows]
        if paces is not None:
            df["host_pace"] = paces
        stats = [summarize(s) if s else None for s in new]
        df["samples"] = new
        for col in ("value", *_STATS):
            src = "median" if col == "value" else col
            df[col] = [st[src] if st else r[col] for st, r in zip(stats, rows)]
        df["run_id"] = rid
        tables[name] = df
    start = START + timedelta(days=k)
    meta.update(run_id=rid, cluster="lab", status="complete", start_time=start.isoformat(),
                end_time=(start + timedelta(seconds=70)).isoformat())
    meta["fingerprint"]["identity"]["cluster"] = "lab"
    return meta, tables


def write_night(parent: Path, meta: dict[str, Any], tables: dict[str, pd.DataFrame]) -> Path:
    run = parent / meta["run_id"]
    run.mkdir(parents=True)
    for name, df in tables.items():
        results.save(df, run / name)
    (run / results.RUN_FILE).write_text(json.dumps(meta, indent=1) + "\n")
    return run


def make_nights(directory: str | Path, n: int, *, seed: int = 0, first: int = 0, gpu_sd: float = 0.004,
                host_sd: float = 0.03, sample_sd: float = 0.002, slow: dict[str, float] | None = None,
                slow_from: int | None = None, busy: Sequence[int] = (), paced: bool = False,
                alter: Callable[[int, dict[str, Any], dict[str, pd.DataFrame]], None] | None = None) -> list[Path]:
    """Nights ``first`` .. ``first + n - 1`` of a quick-set history in ``directory`` (a directory of runs, such as
    results/<cluster>), oldest first; their run directories.

    ``gpu_sd``/``host_sd``: the night-to-night spread (a standard deviation, as a fraction) of figures the GPU
    times and of those the host sets; ``sample_sd`` the spread of samples within a process. ``slow``: {regex on
    "suite case metric": factor} applied from night ``slow_from`` on (default: every night). ``busy``: nights
    whose host was busy (run.json's ``contention.host``). ``paced``: host-timed samples carry the host's pace.
    ``alter(k, run.json, tables)``: any other change."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    out = []
    for k in range(first, first + n):
        slower = slow if slow_from is None or k >= slow_from else None
        meta, tables = night(k, seed=seed, gpu_sd=gpu_sd, host_sd=host_sd, sample_sd=sample_sd, slow=slower,
                             paced=paced)
        if k in busy:
            meta["contention"] = {**(meta.get("contention") or {}), "host": {
                "others_share": 0.85, "cpus": 2, "loaded": True}}
        if alter is not None:
            alter(k, meta, tables)
        out.append(write_night(directory, meta, tables))
    return out


__all__ = ["make_nights", "night", "write_night", "run_id", "template", "TEMPLATE"]
