"""Helpers the test_compare*.py files share (no tests here): a real run directory made through the CLI on the
fake backend, copies of it, and tables altered to hold a regression, noise, or other devices."""

from __future__ import annotations

import contextlib
import io
import json
import shutil
from collections.abc import Callable
from pathlib import Path

import pandas as pd

from gpubench import results
from gpubench.cli import main

RUN_ARGS = ("run", "--suite", "elementwise", "--backend", "fake", "--quick", "--dtype", "fp32",
            "--filter", "op=(copy|triad)")
_CACHE: dict[str, Path] = {}


def cli(capsys, *argv) -> tuple[int, str, str]:
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def one_line_error(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("gpubench: error: ")
    return lines[0]


def real_run(out: Path, cluster: str = "t", only: str | None = None) -> Path:
    """``gpubench run`` on the fake backend (2 elementwise cases, or the ``only`` one; 5 samples each); its run
    directory."""
    before = set((out / cluster).iterdir()) if (out / cluster).exists() else set()
    # Its table and progress lines would land in the output of whichever test made the run first.
    with contextlib.redirect_stdout(io.StringIO()) as log, contextlib.redirect_stderr(log):
        code = main([*RUN_ARGS, "--out", str(out), "--cluster", cluster, *(["--filter", only] if only else [])])
    assert code == 0, log.getvalue()[-2000:]
    (new,) = set((out / cluster).iterdir()) - before
    return new


def base_run(tmp_path_factory) -> Path:
    """One real run for the whole session: copy it (copy_run) before changing anything."""
    if "base" not in _CACHE:
        _CACHE["base"] = real_run(tmp_path_factory.mktemp("base-run"))
    return _CACHE["base"]


def copy_run(src: Path, parent: Path, run_id: str, alter: Callable[[pd.DataFrame], pd.DataFrame] | None = None,
             meta: Callable[[dict], None] | None = None) -> Path:
    """A copy of run ``src`` as ``parent/run_id``, its tables passed through ``alter`` and run.json through ``meta``."""
    dst = parent / run_id
    shutil.copytree(src, dst)
    info = json.loads((dst / "run.json").read_text())
    info["run_id"] = run_id
    if meta:
        meta(info)
    (dst / "run.json").write_text(json.dumps(info))
    for table in dst.glob("*.parquet"):
        df = results.load_table(table)
        df["run_id"] = run_id
        if alter:
            df = alter(df)
        results.save(df, table)
    return dst


def scaled(df: pd.DataFrame, factor: Callable[[dict], float | list[float]]) -> pd.DataFrame:
    """Each row's samples times ``factor(row)`` (one number, or one per sample); value and stats follow."""
    from gpubench.timing.stats import summarize

    df = df.copy()
    rows = df.to_dict("records")
    new_samples, stats = [], []
    for r in rows:
        f = factor(r)
        fs = f if isinstance(f, list) else [f] * len(r["samples"])
        s = [x * k for x, k in zip(r["samples"], fs)]
        new_samples.append(s)
        stats.append(summarize(s))
    df["samples"] = new_samples
    df["value"] = [st["median"] for st in stats]
    for k in ("mean", "min", "max", "stdev", "iqr", "cv"):
        df[k] = [st[k] for st in stats]
    return df


def worse_by(fraction: float) -> Callable[[dict], float]:
    """Samples moved by ``fraction`` in each metric's worse direction (less bandwidth, more time)."""
    return lambda r: (1 - fraction) if r["better"] == "higher" else (1 + fraction)


def better_by(fraction: float) -> Callable[[dict], float]:
    return lambda r: (1 + fraction) if r["better"] == "higher" else (1 - fraction)


def noisy(pattern: list[float]) -> Callable[[dict], list[float]]:
    return lambda r: [pattern[i % len(pattern)] for i in range(len(r["samples"]))]


def set_system(gpu_model: str, **identity) -> Callable[[dict], None]:
    def apply(info: dict) -> None:
        info["fingerprint"]["identity"].update(gpu_model=gpu_model, **identity)
        if "cluster" in identity:
            info["cluster"] = identity["cluster"]
    return apply


def device_rows(df: pd.DataFrame, device: str) -> pd.DataFrame:
    df = df.copy()
    df["device"] = device
    return df
