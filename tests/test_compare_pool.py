"""Pooling with group-bys (gpubench.compare.pool) gives what pooling run by run, process by process gave: the
loop below is compare's pooling as it was before it was vectorised (issue 48), kept as the specification."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from synthetic_nights import make_nights, night

from gpubench import results
from gpubench.compare.load import resolve
from gpubench.compare.pool import KEY, pool
from gpubench.run.rows import labels
from gpubench.timing.stats import summarize


def _finite(x):
    try:
        return x is not None and math.isfinite(float(x))
    except (TypeError, ValueError):
        return False


def _per_run(ok):
    runs = ok["run_id"] if "run_id" in ok.columns else pd.Series(["?"] * len(ok), index=ok.index)
    values, fewest, medians = [], None, []
    for _, g in ok.groupby(runs.fillna("?").astype(str), sort=False):
        split: dict[int, list[float]] = {}
        if "sample_process" in g.columns:
            for row in g[["samples", "sample_process"]].to_dict("records"):
                for v, k in zip(row["samples"] or [], labels(row)):
                    split.setdefault(int(k), []).append(float(v))
        if len(split) > 1:
            for k in sorted(split):
                values.append(float(np.median(split[k])))
                fewest = len(split[k]) if fewest is None else min(fewest, len(split[k]))
            medians.append(float(np.median([v for k in split for v in split[k]])))
            continue
        before = len(values)
        samples = [float(s) for ss in g["samples"] for s in (ss if ss is not None else [])]
        finite = [float(v) for v in g["value"] if _finite(v)]
        if len(g) == 1 and finite:
            values.append(finite[0])
        elif samples:
            values.append(float(np.median(samples)))
        elif finite:
            values.append(float(np.median(finite)))
        medians += values[before:]
        fewest = len(samples) if fewest is None else min(fewest, len(samples))
    return values, int(fewest or 0), medians


def pool_by_loop(raw, history=None):
    older = {}
    if history is not None and not history.empty:
        ok = history[history["status"] == "ok"]
        older = {key: g for key, g in ok.groupby(list(KEY), sort=False, dropna=False)}
    df = raw.reset_index(drop=True)
    df["_order"] = np.arange(len(df))
    out = []
    for _, rows in df.groupby(list(KEY), sort=False, dropna=False):
        ok = rows[rows["status"] == "ok"]
        if ok.empty:
            out.append({**rows.iloc[-1].to_dict(), "pooled": 0})
            continue
        ok = ok[ok["suite_version"] == ok["suite_version"].iloc[-1]]
        row = ok.iloc[-1].to_dict()
        samples = [float(s) for ss in ok["samples"] for s in (ss if ss is not None else [])]
        row["run_values"], row["run_n"], medians = _per_run(ok)
        row["run_count"] = int(ok["run_id"].nunique()) if "run_id" in ok.columns else len(ok)
        row["run_medians"] = medians
        past = older.get(tuple(row[k] for k in KEY))
        if past is not None:
            past = past[past["suite_version"] == row["suite_version"]]
        had = _per_run(past) if past is not None and len(past) else ([], 0, [])
        row["history_values"] = had[0] + row["run_values"]
        row["history_medians"] = had[2] + row["run_medians"]
        past_runs = (int(past["run_id"].nunique()) if "run_id" in past.columns else len(past)) \
            if past is not None and len(past) else 0
        row["history_count"] = past_runs + row["run_count"]
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


def same(a, b) -> bool:
    if isinstance(a, (list, tuple, np.ndarray)) or isinstance(b, (list, tuple, np.ndarray)):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if a is None or b is None or (isinstance(a, float) and math.isnan(a)):
        return pd.isna(a) and pd.isna(b)
    return a == b


def assert_pooled_alike(raw, history=None):
    want, got = pool_by_loop(raw, history), pool(raw, history)
    assert list(got.columns) == list(want.columns)
    assert len(got) == len(want)
    for col in want.columns:
        for i, (w, g) in enumerate(zip(want[col], got[col])):
            assert same(w, g), (col, i, w, g)


@pytest.fixture(scope="module")
def nights(tmp_path_factory):
    """12 quick-set nights: a window of 5 with 7 older runs of history."""
    return make_nights(tmp_path_factory.mktemp("nights") / "lab", 12)


def test_a_directory_s_windows_and_history_pool_as_the_loop_did(nights):
    side = resolve(nights[0].parent, window=5, exclude=[nights[-1].name], baseline=True)
    assert side.history is not None and len(side.raw)
    assert_pooled_alike(side.raw, side.history)


def _rows_of(k, **kw):
    meta, tables = night(k, **kw)
    return pd.concat(tables.values(), ignore_index=True)


def test_devices_versions_failures_and_figures_without_samples_pool_as_the_loop_did():
    a, b, c = _rows_of(1), _rows_of(2), _rows_of(3)
    # one run with two devices: its rows of a figure are one run's
    b2 = b.copy()
    b2["device_index"] = 1
    # a version change in the window, a failed row, a figure with no samples (an import), one without a value
    c.loc[c["suite"] == "gemm", "suite_version"] = 4
    c.loc[c.index[:3], "status"] = "error"
    for df in (a, b):
        df.loc[df.index[5], "samples"] = None
        df.loc[df.index[6], ["samples", "sample_process"]] = pd.Series([[], []], index=["samples", "sample_process"])
    a.loc[a.index[7], "value"] = math.nan
    a.loc[a.index[8], "sample_process"] = [0]  # labels that do not match the samples: process 0
    raw = pd.concat([a, b, b2, c], ignore_index=True)
    assert_pooled_alike(raw)
    assert_pooled_alike(raw, history=pd.concat([_rows_of(0), a], ignore_index=True))
    assert_pooled_alike(raw.drop(columns=["sample_process"]))
    assert_pooled_alike(raw.drop(columns=["run_id"]))


def test_one_run_s_rows_pool_as_they_are(tmp_path):
    (run,) = make_nights(tmp_path / "lab", 1)
    raw = results.load(run)
    assert_pooled_alike(raw)
    got = pool(raw)
    several = got[got["processes"] > 1]
    assert len(several) and all(len(v) == 3 for v in several["run_values"])  # one value per process
