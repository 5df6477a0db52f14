"""pytest-benchmark (``gpubench export RUN``, the default): a run's time figures as a pytest-benchmark JSON file,
which ``pytest-benchmark compare`` and its storage read like one of their own saved runs.

Only time metrics (units s, ms, us, ns) are exported: pytest-benchmark holds seconds per round and derives
ops/s from them; a bandwidth or a TFLOP/s has no place in that model. One benchmark per ok row:
- ``group`` the suite, ``name`` ``METRIC[CASE]``, ``fullname`` ``gpubench/SUITE::METRIC[CASE]``, ``param`` the
  case id and ``params`` its parameters;
- ``stats.data`` the row's raw samples in seconds (each the mean per-call time of a batch of ``inner`` calls),
  ``stats.iterations`` = ``inner``, and the other stats computed from them the way pytest-benchmark does;
- ``extra_info`` the unit, device, backend, host, run_id, cv and the work counts;
- ``machine_info`` from the run's fingerprint, ``commit_info`` the gpubench commit, ``datetime`` the run's start.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from gpubench import DISTRIBUTION, results
from gpubench.errors import UsageError
from gpubench.suite import TIME_SCALE

# pytest-benchmark's JSON layout this follows (machine_info, commit_info, benchmarks[].stats, datetime, version).
PYTEST_BENCHMARK_VERSION = "5.1.0"


def benchmark_stats(seconds: Sequence[float]) -> dict[str, Any]:
    """pytest-benchmark's stats fields for rounds of ``seconds``, computed by its own Stats class (its
    definitions of quartiles and outliers changed between releases: the installed one decides)."""
    try:
        from pytest_benchmark.stats import Stats
    except ImportError as e:
        raise UsageError(f"exporting for pytest-benchmark needs it installed: pip install '{DISTRIBUTION}[pytest]' "
                         "(or pip install pytest-benchmark)") from e
    data = [float(x) for x in seconds]
    if not data:
        raise ValueError("no samples")
    stats = Stats()
    for x in data:
        stats.update(x)
    return stats.as_dict()


def _params(row: dict[str, Any]) -> dict[str, Any]:
    """The case's parameters: names from its id, values from the row's columns (typed) where present."""
    params: dict[str, Any] = {}
    last = None
    for part in str(row["case"]).split(","):
        if "=" in part:
            last, value = part.split("=", 1)
            params[last] = value
        elif last is not None:  # a value that held a comma
            params[last] += "," + part
    for k in params:
        v = row.get(k)
        if v is not None and not (isinstance(v, float) and math.isnan(v)):
            params[k] = v.item() if hasattr(v, "item") else v
    return params


def _plain(x: object) -> Any:
    if hasattr(x, "item") and not isinstance(x, (str, bytes)):
        x = x.item()
    if isinstance(x, float) and not math.isfinite(x):
        return None
    return x


def benchmark_entry(row: dict[str, Any]) -> dict[str, Any]:
    scale = TIME_SCALE[row["unit"]]
    seconds = [float(x) / scale for x in row["samples"]]
    inner = int(row["inner"]) if _plain(row.get("inner")) else 1
    name = f"{row['metric']}[{row['case']}]"
    return {
        "group": row["suite"],
        "name": name,
        "fullname": f"gpubench/{row['suite']}::{name}",
        "params": _params(row),
        "param": row["case"],
        "extra_info": {k: _plain(row.get(k)) for k in (
            "unit", "suite_version", "device", "device_index", "backend", "host", "cluster", "run_id", "n", "cv",
            "noisy", "host_bound", "work_bytes", "work_flops", "stop")},
        "options": {"timer": f"gpubench ({row.get('backend')})", "disable_gc": False, "min_rounds": None,
                    "max_time": None, "min_time": None, "warmup": _plain(row.get("warmup_s"))},
        "stats": {**benchmark_stats(seconds), "data": seconds, "iterations": inner},
    }


def exportable(df: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(rows exported, rows left out): ok rows of a time unit with finite samples."""
    has_samples = df["samples"].map(lambda s: s is not None and len(s) > 0 and all(math.isfinite(x) for x in s))
    keep = (df["status"] == "ok") & df["unit"].isin(list(TIME_SCALE)) & has_samples
    return df[keep], df[~keep]


def machine_info(meta: dict[str, Any]) -> dict[str, Any]:
    identity = (meta.get("fingerprint") or {}).get("identity") or {}
    system, _, release = str(identity.get("os") or "").partition(" ")
    return {
        "node": identity.get("hostname"), "processor": identity.get("cpu_model"), "machine": None,
        "python_implementation": "CPython", "python_version": identity.get("python"), "system": system or None,
        "release": release or None, "cpu": {"brand_raw": identity.get("cpu_model"), "count": identity.get("cpu_count")},
        "gpubench": {"fingerprint": (meta.get("fingerprint") or {}).get("fingerprint"), "identity": identity,
                     "gpubench_version": meta.get("gpubench_version"), "cluster": meta.get("cluster")},
    }


def to_pytest_benchmark(df: pd.DataFrame, meta: dict[str, Any]) -> dict[str, Any]:
    rows, _ = exportable(df)
    return {
        "machine_info": machine_info(meta),
        "commit_info": {"id": meta.get("git_sha"), "time": None, "author_time": None, "dirty": None,
                        "project": "gpubench", "branch": None},
        "benchmarks": [benchmark_entry(r) for r in rows.to_dict("records")],
        "datetime": meta.get("start_time"),
        "version": PYTEST_BENCHMARK_VERSION,
    }


def export(run: str | os.PathLike, out: str | os.PathLike) -> tuple[str, str]:
    """``run``'s time figures as pytest-benchmark JSON, and the line saying what was written to ``out``."""
    df = results.load(run)
    meta = df.attrs.get("run") or {}
    if not meta and Path(run).is_file() and (Path(run).parent / results.RUN_FILE).is_file():
        meta = results.read_run_meta(Path(run).parent)
    doc = to_pytest_benchmark(df, meta)
    written, left = len(doc["benchmarks"]), len(df) - len(doc["benchmarks"])
    if not written:
        raise UsageError(f"{run} has no ok time figure (unit s, ms, us or ns) to export: pytest-benchmark holds "
                         "times only; export a run of a suite with a time metric (elementwise, launch)")
    return json.dumps(doc, indent=4) + "\n", (f"{written} time figure(s) written to {out} as pytest-benchmark JSON"
                                             + (f"; {left} row(s) left out (not ok, or not a time metric)" if left
                                                else ""))


__all__ = ["export", "to_pytest_benchmark", "benchmark_stats", "PYTEST_BENCHMARK_VERSION"]
