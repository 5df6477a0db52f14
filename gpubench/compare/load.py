"""One side of a comparison: which runs a path names, and their rows pooled into one row per figure.

A path is
- a run directory (``run.json`` and its tables),
- a table file (``.parquet``; the ``run.json`` beside it, when there is one, gives its fingerprint),
- a directory of runs, such as ``results/<cluster>/``: its ``window`` latest complete runs by run_id order
  (run_ids start with the UTC start time; default :data:`DEFAULT_WINDOW`), of the same system as the other side
  where ``like`` names one,
- or a small text file naming a run directory (the ``baseline`` pointer of ci/nightly.sh), relative to the
  file's own directory.

Pooling joins all rows of one (suite, case, metric) on a side: their samples are concatenated and the figure
is the median of them all. That is how a run with rows from several devices is compared as one
(``gpubench compare --fleet`` looks at its devices one by one instead). A window of runs is pooled too, but
each run stays one piece of evidence: ``run_values`` keeps each run's own median (one process's samples share
its level, so the runs, not the samples, say how far a figure moves when nothing changed), and ``run_n`` the
fewest samples any of its runs has. ``history_values`` adds the run medians of older runs of the directory
(up to :data:`SPREAD_HISTORY` runs in all): figures set by the host drift through quiet stretches longer than
a window (a pageable 1 GiB copy on an H100 host, nothing changed: 115-155 ms over nine runs in seven
minutes, 2026-11-25), so their spread is
taken over the longer history as well.
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from gpubench import results
from gpubench.errors import UsageError
from gpubench.stats import summarize

KEY = ("suite", "case", "metric")
DEFAULT_WINDOW = 5  # baseline runs taken from a directory of runs when --baseline-window is not given
SPREAD_HISTORY = 20  # runs, the window's included, that a host-set figure's run-to-run spread is taken over
_POINTER_MAX_BYTES = 4096  # a pointer file holds one path; anything larger is not one


@dataclass
class Side:
    label: str  # the path as the user gave it
    paths: list[Path]  # run directories or table files, oldest first
    runs: list[dict[str, Any]]  # run.json of each (empty where a bare table has none)
    raw: pd.DataFrame  # every row of every run
    asked_window: int = 1
    notes: list[str] = field(default_factory=list)
    history: pd.DataFrame | None = None  # rows of older runs before the window (directory of runs only)

    @property
    def run_ids(self) -> list[str]:
        ids = [str(r.get("run_id")) for r in self.runs if r.get("run_id")]
        if ids:
            return ids
        return sorted({str(x) for x in self.raw.get("run_id", pd.Series(dtype=object)).dropna()})

    def pooled(self) -> pd.DataFrame:
        return pool(self.raw, self.history)

    @property
    def is_window(self) -> bool:
        """Taken from a directory of runs as a window (a history that may still be filling), not one run."""
        return self.asked_window > 1


def is_run_dir(path: Path) -> bool:
    return (path / results.RUN_FILE).is_file() or any(path.glob(f"*{results.TABLE_SUFFIX}"))


def run_candidates(collection: Path) -> list[tuple[str, Path, dict[str, Any]]]:
    """(run_id, path, run.json) of the complete runs directly under ``collection``, oldest first.

    Symlinks are skipped (a ``baseline`` link would count a run twice); runs still running, interrupted or
    failed are skipped too: their tables are partial.
    """
    found = []
    for child in collection.iterdir():
        if child.is_symlink() or not child.is_dir() or not (child / results.RUN_FILE).is_file():
            continue
        meta = results.read_run_meta(child)
        if meta.get("status") != "complete":
            continue
        found.append((str(meta.get("run_id") or child.name), child, meta))
    return sorted(found, key=lambda t: t[0])


def _read_pointer(path: Path) -> Path | None:
    """The run directory a small text file names, or None if it is not such a file."""
    if path.stat().st_size > _POINTER_MAX_BYTES:
        return None
    try:
        text = path.read_text().strip()
    except (OSError, UnicodeDecodeError):
        return None
    if not text or "\n" in text:
        return None
    target = Path(text)
    target = target if target.is_absolute() else path.parent / target
    return target if target.is_dir() else None


def _same_system(meta: dict[str, Any], like: dict[str, Any]) -> bool:
    from gpubench.compare import cross

    return not cross.differences(cross.system_of_meta(meta), like)


def resolve(path: str | os.PathLike, *, window: int | None = 1, exclude: Sequence[str] = (),
            like: dict[str, Any] | None = None) -> Side:
    """The runs ``path`` names (see the module docstring); ``exclude`` drops run_ids from a directory of runs,
    ``like`` (system facts, :func:`gpubench.compare.cross.system_of`) keeps its runs of that system where it
    has any. ``window=None``: :data:`DEFAULT_WINDOW` runs of a directory of runs, else the one run."""
    label = str(path)
    explicit = window is not None
    window = window if explicit else 1
    p = Path(path)
    if p.is_file() and p.suffix != results.TABLE_SUFFIX:
        target = _read_pointer(p)
        if target is None:
            raise UsageError(f"{p} is neither a {results.TABLE_SUFFIX} table nor a file naming a run directory")
        p = target
    if p.is_file():
        if window > 1:
            raise UsageError(f"--baseline-window {window} needs a directory of runs, and {p} is one table")
        df = results.load_table(p)
        meta = results.read_run_meta(p.parent) if (p.parent / results.RUN_FILE).is_file() else {}
        return Side(label, [p], [meta] if meta else [], df)
    if not p.is_dir():
        raise UsageError(f"{p} does not exist: give a run directory, a {results.TABLE_SUFFIX} table or a "
                         "directory of runs such as results/<cluster>")
    if is_run_dir(p):
        if window > 1:
            raise UsageError(f"--baseline-window {window} needs a directory of runs (such as results/<cluster>), "
                             f"and {p} is one run")
        df = results.load(p)
        meta = df.attrs.get("run") or {}
        return Side(label, [p], [meta] if meta else [], df)
    window = window if explicit else DEFAULT_WINDOW
    every = run_candidates(p)
    current = [c[0] for c in every if c[0] in set(exclude)]
    # Where the current run is one of this directory's, its baseline is the runs before it, not any made later.
    candidates = [c for c in every if c[0] not in set(exclude) and (not current or c[0] < min(current))]
    if like:
        mine = [c for c in candidates if _same_system(c[2], like)]
        candidates = mine or candidates  # none of that system: the latest runs, and compare says they differ
    if not candidates:
        if every:
            raise UsageError(f"{p} holds no complete run other than the current one ({', '.join(exclude)}): "
                             "a baseline needs an earlier run; give its run directory")
        raise UsageError(f"{p} holds no complete run directory: give a run directory or a directory of runs "
                         "written by gpubench run")
    chosen = candidates[-window:]
    frames = [results.load(c[1]) for c in chosen]
    older = candidates[max(0, len(candidates) - max(SPREAD_HISTORY, window)):len(candidates) - len(chosen)]
    history = pd.concat([results.load(c[1]) for c in older], ignore_index=True) if older else None
    side = Side(label, [c[1] for c in chosen], [c[2] for c in chosen],
                pd.concat(frames, ignore_index=True), asked_window=window, history=history)
    if len(chosen) < window and explicit:
        side.notes.append(f"{label}: {len(chosen)} complete run(s), fewer than the window of {window}")
    return side


def _finite(x: Any) -> bool:
    try:
        return x is not None and math.isfinite(float(x))
    except (TypeError, ValueError):
        return False


def pool(raw: pd.DataFrame, history: pd.DataFrame | None = None) -> pd.DataFrame:
    """One row per (suite, case, metric): see the module docstring. Rows keep the columns of the latest row
    of their figure; value, the stats and samples are recomputed from the pooled ok rows. ``history``: rows
    of older runs, for ``history_values`` only."""
    if raw.empty:
        return raw.copy()
    older = _older_runs(history)
    df = raw.reset_index(drop=True)
    df["_order"] = np.arange(len(df))  # later runs come later in raw
    out = []
    for _, rows in df.groupby(list(KEY), sort=False, dropna=False):
        rows = rows.sort_values("_order")
        ok = rows[rows["status"] == "ok"]
        if ok.empty:
            out.append({**rows.iloc[-1].to_dict(), "pooled": 0})
            continue
        # A window spanning a suite version change pools only the latest version's rows.
        ok = ok[ok["suite_version"] == ok["suite_version"].iloc[-1]]
        row = ok.iloc[-1].to_dict()
        samples = [float(s) for ss in ok["samples"] for s in (ss if ss is not None else [])]
        row["run_values"], row["run_n"] = _per_run(ok)
        past = older.get(tuple(row[k] for k in KEY))
        if past is not None:
            past = past[past["suite_version"] == row["suite_version"]]
        row["history_values"] = (_per_run(past)[0] if past is not None and len(past) else []) + row["run_values"]
        if len(ok) > 1:
            st = summarize(samples)
            values = [float(v) for v in ok["value"] if _finite(v)]
            row.update({k: st[k] for k in ("mean", "min", "max", "stdev", "iqr", "cv")})
            row["value"] = st["median"] if samples else (float(np.median(values)) if values else math.nan)
            row["n"] = st["n"]
            row["samples"] = samples
        row["pooled"] = len(ok)
        out.append(row)
    return pd.DataFrame(out).drop(columns=["_order"])


def _older_runs(history: pd.DataFrame | None) -> dict[tuple, pd.DataFrame]:
    """The ok rows of older runs by figure, oldest first."""
    if history is None or history.empty:
        return {}
    ok = history[history["status"] == "ok"]
    return {key: g for key, g in ok.groupby(list(KEY), sort=False, dropna=False)}


def _per_run(ok: pd.DataFrame) -> tuple[list[float], int]:
    """Each run's median of a figure (rows of several devices of one run: their median), oldest first, and the
    fewest samples a run has."""
    runs = ok["run_id"] if "run_id" in ok.columns else pd.Series(["?"] * len(ok), index=ok.index)
    values, fewest = [], None
    for _, g in ok.groupby(runs.fillna("?").astype(str), sort=False):
        samples = [float(s) for ss in g["samples"] for s in (ss if ss is not None else [])]
        finite = [float(v) for v in g["value"] if _finite(v)]
        if len(g) == 1 and finite:
            values.append(finite[0])
        elif samples:
            values.append(float(np.median(samples)))
        elif finite:
            values.append(float(np.median(finite)))
        n = len(samples)
        fewest = n if fewest is None else min(fewest, n)
    return values, int(fewest or 0)


__all__ = ["KEY", "DEFAULT_WINDOW", "Side", "resolve", "pool", "run_candidates", "is_run_dir"]
