"""Pooling: the rows of one side of a comparison, one row per figure (suite, case, metric).

All ok rows of a figure on a side are pooled: their samples concatenated, the figure the median of them all (a run
with rows of several devices is compared as one). A window of runs is pooled too, but each run stays one piece
of evidence: ``run_values`` keeps each run's own median (one process's samples share its level, so the runs, not
the samples, say how far a figure moves when nothing changed) and ``run_n`` the fewest samples any of its runs
has. A run that measured a figure in several processes (``sample_process``, gpubench.run.per_process) gives one value
per process instead: its processes are evidence of the same kind. ``history_values`` adds the run medians of
older runs of a directory (gpubench.compare.load), for figures the host sets, which drift, and ``history_count``
how many runs those values come from. ``run_medians`` (and ``history_medians``) keep one value per run whatever
its processes: each run's median of all its samples, which a rule on a window of runs of several processes each
reads (gpubench.compare.margin).

Everything is computed with group-bys over the concatenated rows and their flattened samples, never a Python
loop per run or per process: a window of 20 quick-set nights holds some 3,000 rows and 60,000 samples, and
pooling it row by row took most of a compare's time (issue 48).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from gpubench.timing.stats import summarize

KEY = ("suite", "case", "metric")
_STATS = ("mean", "min", "max", "stdev", "iqr", "cv")


@dataclass
class Flat:
    """The samples of some rows, flattened: each sample's value, row (position in the rows) and process."""

    values: np.ndarray
    row: np.ndarray
    process: np.ndarray
    per_row: np.ndarray  # samples per row


def _listed(x) -> bool:
    return isinstance(x, (list, tuple, np.ndarray))


def flatten(rows: pd.DataFrame) -> Flat:
    """Every sample of ``rows`` with its row and process (gpubench.compare.pace moves them by the host's pace)."""
    samples = [s if _listed(s) else [] for s in rows["samples"].tolist()]
    per_row = np.fromiter((len(s) for s in samples), dtype=np.int64, count=len(samples))
    total = int(per_row.sum())
    values = np.fromiter((float(v) for s in samples for v in s), dtype=float, count=total)
    labels = rows["sample_process"].tolist() if "sample_process" in rows.columns else [None] * len(samples)
    # a row whose labels do not match its samples (or that has none) took them all in process 0
    process = np.fromiter((int(p) for s, lab in zip(samples, labels)
                           for p in (lab if _listed(lab) and len(lab) == len(s) else [0] * len(s))),
                          dtype=np.int64, count=total)
    return Flat(values, np.repeat(np.arange(len(samples)), per_row), process, per_row)


def _medians(values: np.ndarray, unit: np.ndarray, units: int) -> np.ndarray:
    """np.median of each unit's values (NaN where a unit holds a NaN, as np.median gives; NaN where it holds none)."""
    out = np.full(units, math.nan)
    if len(values):
        s = pd.Series(values).groupby(unit).median()
        out[s.index.to_numpy()] = s.to_numpy()
        nan = pd.Series(np.isnan(values)).groupby(unit).any()
        out[nan.index.to_numpy()[nan.to_numpy()]] = math.nan
    return out


@dataclass
class _Values:
    """Values of runs (or of processes of runs), and the samples behind each unit's values."""

    unit: np.ndarray  # the run each value belongs to
    process: np.ndarray  # its process (0 for a run's single value)
    value: np.ndarray
    counted: np.ndarray  # runs whose sample count is ``count`` (a run of several processes: once per process)
    count: np.ndarray


def run_values(rows: pd.DataFrame, group: np.ndarray, groups: int
               ) -> tuple[list[list[float]], np.ndarray, list[list[float]]]:
    """For each of ``groups`` groups of ok ``rows`` (``group``: each row's, 0..groups-1): each run's median of
    the figure, oldest first (rows of several devices of one run: their median; a run that measured it in several
    processes: each process's median, by process), the fewest samples a run (or process) has, and each run's one
    median, oldest first (a run of several processes: the median of all its samples).

    A run of one row gives that row's value (a derived figure's value is not its samples' median); a run without
    samples, the median of its rows' values."""
    rows = rows.reset_index(drop=True)
    flat = flatten(rows)
    run = rows["run_id"].fillna("?").astype(str).to_numpy() if "run_id" in rows.columns else np.full(len(rows), "?")
    # a unit is one run of one group, numbered as the runs first appear (oldest first)
    unit = pd.DataFrame({"g": group, "r": run}).groupby(["g", "r"], sort=False).ngroup().to_numpy()
    n_units = int(unit.max()) + 1 if len(unit) else 0
    unit_group = np.zeros(n_units, dtype=np.int64)
    unit_group[unit] = group
    sample_unit = unit[flat.row]
    multi = np.zeros(n_units, dtype=bool)  # runs whose samples came from several processes
    if len(flat.values):
        procs = pd.Series(flat.process).groupby(sample_unit).nunique()
        multi[procs.index.to_numpy()[procs.to_numpy() > 1]] = True
    parts = [_single_runs(rows, flat, unit, n_units, ~multi), _process_runs(flat, sample_unit, multi)]
    u, p, v = (np.concatenate([getattr(x, f) for x in parts]) for f in ("unit", "process", "value"))
    order = np.lexsort((p, u))  # runs as they first appear, a run's processes in order
    g = unit_group[u[order]]
    by_group = np.argsort(g, kind="stable")
    g, v = g[by_group], v[order][by_group]
    bounds = np.searchsorted(g, np.arange(groups + 1))
    values = [v[bounds[k]:bounds[k + 1]].tolist() for k in range(groups)]
    none = np.iinfo(np.int64).max
    fewest = np.full(groups, none, dtype=np.int64)
    np.minimum.at(fewest, unit_group[np.concatenate([x.counted for x in parts])],
                  np.concatenate([x.count for x in parts]))
    fewest[fewest == none] = 0
    return values, fewest, _per_run(parts[0], _medians(flat.values, sample_unit, n_units), multi, unit_group, groups)


def _per_run(single: _Values, pooled: np.ndarray, multi: np.ndarray, unit_group: np.ndarray,
             groups: int) -> list[list[float]]:
    """Each group's run medians, runs as they first appear: a run of one process its value, a run of several the
    median of all its samples (``pooled``, by unit)."""
    value = np.full(len(multi), math.nan)
    value[single.unit] = single.value
    value[multi] = pooled[multi]
    has = np.zeros(len(multi), dtype=bool)
    has[single.unit] = True
    has |= multi
    units = np.flatnonzero(has)
    units = units[np.argsort(unit_group[units], kind="stable")]
    bounds = np.searchsorted(unit_group[units], np.arange(groups + 1))
    return [value[units[bounds[k]:bounds[k + 1]]].tolist() for k in range(groups)]


def _single_runs(rows: pd.DataFrame, flat: Flat, unit: np.ndarray, n_units: int, single: np.ndarray) -> _Values:
    """The value of each run whose samples came from one process: its one row's value, else the median of its
    samples, else the median of its rows' values (none where it has neither)."""
    nrows = np.bincount(unit, minlength=n_units)
    total = np.bincount(unit, weights=flat.per_row, minlength=n_units).astype(np.int64)
    value = pd.to_numeric(rows["value"], errors="coerce").to_numpy(dtype=float)
    finite = np.isfinite(value)
    first = np.full(n_units, len(unit), dtype=np.int64)
    np.minimum.at(first, unit, np.arange(len(unit)))  # each run's first row: every run has one
    one_row = single & (nrows == 1) & finite[first]
    sampled = single & ~one_row & (total > 0)
    valued = single & ~one_row & ~sampled & (np.bincount(unit[finite], minlength=n_units) > 0)
    result = np.where(one_row, value[first], np.where(sampled, _medians(flat.values, unit[flat.row], n_units),
                                                      _medians(value[finite], unit[finite], n_units)))
    keep = np.flatnonzero(one_row | sampled | valued)
    counted = np.flatnonzero(single)
    return _Values(keep, np.zeros(len(keep), dtype=np.int64), result[keep], counted, total[counted])


def _process_runs(flat: Flat, sample_unit: np.ndarray, multi: np.ndarray) -> _Values:
    """Each process's median of the runs whose samples came from several processes."""
    take = multi[sample_unit] if len(sample_unit) else np.zeros(0, dtype=bool)
    if not take.any():
        empty = np.zeros(0, dtype=np.int64)
        return _Values(empty, empty, np.zeros(0), empty, empty)
    pairs = pd.DataFrame({"u": sample_unit[take], "p": flat.process[take]}).groupby(["u", "p"], sort=True)
    sizes = pairs.size()
    u = sizes.index.get_level_values("u").to_numpy()
    p = sizes.index.get_level_values("p").to_numpy()
    med = _medians(flat.values[take], pairs.ngroup().to_numpy(), len(sizes))  # ngroup numbers them as size() lists
    return _Values(u, p, med, u, sizes.to_numpy())


def pool(raw: pd.DataFrame, history: pd.DataFrame | None = None) -> pd.DataFrame:
    """One row per (suite, case, metric): see the module docstring. Rows keep the columns of the latest ok row of
    their figure (of its latest suite version: a window spanning a version change pools only the newest version's
    rows); value, the stats and samples are recomputed from the pooled rows. ``history``: rows of older runs, for
    ``history_values`` only."""
    if raw.empty:
        return raw.copy()
    df = raw.reset_index(drop=True)
    df.attrs = {}  # run.json rides on a loaded table's attrs, and pandas deep-copies attrs on every slice
    group = df.groupby(list(KEY), sort=False, dropna=False).ngroup().to_numpy()
    groups = int(group.max()) + 1
    ok = (df["status"] == "ok").to_numpy()
    version = df["suite_version"].to_numpy(dtype=object)
    last_ok = np.full(groups, -1, dtype=np.int64)
    where_ok = np.flatnonzero(ok)
    np.maximum.at(last_ok, group[where_ok], where_ok)
    latest = np.where(last_ok >= 0, version[np.maximum(last_ok, 0)], None)
    kept = ok & (last_ok[group] >= 0) & (version == latest[group]).astype(bool)
    rows = df[kept]
    values, fewest, medians = run_values(rows, group[kept], groups)
    runs = _run_counts(rows, group[kept], groups)
    older = _history(history)
    last_row = np.full(groups, -1, dtype=np.int64)
    np.maximum.at(last_row, group, np.arange(len(df)))
    pick = np.where(last_ok >= 0, last_ok, last_row)
    out = df.iloc[pick].to_dict("records")
    flat, bounds = _grouped_samples(rows, group[kept], groups)
    value = pd.to_numeric(rows["value"], errors="coerce").to_numpy(dtype=float)
    count = np.bincount(group[kept], minlength=groups)
    for k, row in enumerate(out):
        if last_ok[k] < 0:
            row["pooled"] = 0
            continue
        row["run_values"], row["run_n"], row["run_count"] = values[k], int(fewest[k]), int(runs[k])
        row["run_medians"] = medians[k]
        past, past_medians, past_runs = older.get((*(row[c] for c in KEY), row["suite_version"]), ([], [], 0))
        row["history_values"] = past + row["run_values"]
        row["history_medians"] = past_medians + medians[k]
        row["history_count"] = past_runs + int(runs[k])
        if count[k] > 1:
            samples = flat[bounds[k]:bounds[k + 1]]
            st = summarize(samples)
            row.update({s: st[s] for s in _STATS})
            row["value"] = st["median"] if len(samples) else _median_finite(value[group[kept] == k])
            row["n"] = st["n"]
            row["samples"] = samples.tolist()
        row["pooled"] = int(count[k])
    return pd.DataFrame(out)


def _median_finite(values: np.ndarray) -> float:
    finite = values[np.isfinite(values)]
    return float(np.median(finite)) if len(finite) else math.nan


def _grouped_samples(rows: pd.DataFrame, group: np.ndarray, groups: int) -> tuple[np.ndarray, np.ndarray]:
    """Every sample of ``rows``, by group (rows in their order within one), and where each group's start."""
    flat = flatten(rows.reset_index(drop=True))
    g = group[flat.row]
    order = np.argsort(g, kind="stable")
    return flat.values[order], np.searchsorted(g[order], np.arange(groups + 1))


def _run_counts(rows: pd.DataFrame, group: np.ndarray, groups: int) -> np.ndarray:
    """How many runs each group's rows come from (rows, where they name no run)."""
    if "run_id" not in rows.columns:
        return np.bincount(group, minlength=groups)
    counts = pd.Series(rows["run_id"].to_numpy()).groupby(group).nunique()
    out = np.zeros(groups, dtype=np.int64)
    out[counts.index.to_numpy()] = counts.to_numpy()
    return out


def _history(history: pd.DataFrame | None) -> dict[tuple, tuple[list[float], list[float], int]]:
    """The run medians of older runs' ok rows (a value per process where a run measured a figure in several; and
    one per run), by figure and suite version, oldest first, and how many runs they come from."""
    if history is None or history.empty:
        return {}
    ok = history[history["status"] == "ok"].reset_index(drop=True)
    ok.attrs = {}
    if ok.empty:
        return {}
    cols = [*KEY, "suite_version"]
    group = ok.groupby(cols, sort=False, dropna=False).ngroup().to_numpy()
    groups = int(group.max()) + 1
    values, _, medians = run_values(ok, group, groups)
    runs = _run_counts(ok, group, groups)
    # ngroup numbers the figures as they first appear, as drop_duplicates lists them
    keys = [tuple(r) for r in ok.drop_duplicates(cols)[cols].itertuples(index=False)]
    return {key: (v, m, int(n)) for key, v, m, n in zip(keys, values, medians, runs)}


__all__ = ["pool", "run_values", "KEY"]
