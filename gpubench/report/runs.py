"""The runs a report is drawn from: each run's rows, and the name its lines carry in legends."""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from gpubench import results
from gpubench.errors import UsageError


@dataclass
class Run:
    path: Path
    df: pd.DataFrame
    meta: dict[str, Any] = field(default_factory=dict)
    label: str = ""

    @property
    def run_id(self) -> str:
        return str(self.meta.get("run_id") or self.path.name)

    @property
    def cluster(self) -> str:
        return str(self.meta.get("cluster") or _first(self.df, "cluster") or "?")

    @property
    def identity(self) -> dict[str, Any]:
        return dict((self.meta.get("fingerprint") or {}).get("identity") or {})

    @property
    def volatile(self) -> dict[str, Any]:
        return dict((self.meta.get("fingerprint") or {}).get("volatile") or {})

    def ok(self, suite: str, metric: str | None = None) -> pd.DataFrame:
        df = self.df
        if "suite" not in df.columns or df.empty:
            return df.iloc[0:0]
        mask = (df["suite"] == suite) & (df["status"] == "ok") & df["value"].notna()
        if metric is not None:
            mask &= df["metric"] == metric
        return df[mask]

    def has(self, suite: str) -> bool:
        return "suite" in self.df.columns and bool((self.df["suite"] == suite).any())


def _first(df: pd.DataFrame, col: str) -> Any:
    if col not in df.columns or not df[col].notna().any():
        return None
    return df[col].dropna().iloc[0]


def load_runs(paths: Sequence[str | os.PathLike]) -> list[Run]:
    if not paths:
        raise UsageError("give at least one run directory (the folder holding run.json), e.g. "
                         "gpubench report results/<cluster>/<run_id>")
    runs = []
    for p in paths:
        path = Path(p)
        if path.is_dir() and not (path / results.RUN_FILE).exists() and not any(path.glob("*.parquet")):
            raise UsageError(f"{path} is not a run directory (no run.json): {_hint(path)}")
        if not path.exists():
            raise UsageError(f"{path} does not exist: give run directories (the folders holding run.json)")
        df = results.load(path)
        meta = dict(df.attrs.get("run") or {})
        # The run's meta is the Run's own: on the table's attrs pandas deep-copies it with every slice and row the
        # charts take (docs/measurements.md, 'Wall time').
        df.attrs = {}
        runs.append(Run(path, df, meta))
    _label(runs)
    return runs


def _hint(path: Path) -> str:
    """What to give instead of a folder without run.json, as runs are laid out (``<out>/<cluster>/<run_id>``):
    a directory of runs names its runs, a results root its clusters."""
    from gpubench.report.history.nights import is_directory_of_runs

    if is_directory_of_runs(path):
        return (f"give the folder holding run.json, e.g. {path}/<run_id>, or {path} alone for its nightly "
                "history")
    clusters = sorted(c.name for c in path.iterdir() if c.is_dir() and not c.is_symlink() and is_directory_of_runs(c))
    if clusters:
        listed = ", ".join(clusters[:3]) + (f" and {len(clusters) - 3} more" if len(clusters) > 3 else "")
        return (f"it holds directories of runs ({listed}): give a run directory, e.g. "
                f"{path / clusters[0]}/<run_id>, or one of them alone for its nightly history")
    return f"give the folder holding run.json, e.g. {path}/<cluster>/<run_id>"


def _label(runs: list[Run]) -> None:
    """Legends name the cluster, and the run id too when a cluster has several runs in the report."""
    clusters = [r.cluster for r in runs]
    for r in runs:
        r.label = r.cluster if clusters.count(r.cluster) == 1 else f"{r.cluster} run {r.run_id.split('-')[-1]}"
    seen: dict[str, int] = {}
    for r in runs:  # the same run given twice still needs two legend entries
        seen[r.label] = seen.get(r.label, 0) + 1
        if seen[r.label] > 1:
            r.label = f"{r.label} #{seen[r.label]}"


def names(runs: list[Run]) -> dict[int, str]:
    """Legend names within one chart (by id of the run): none when one run has data there, else its label."""
    return {id(r): (r.label if len(runs) > 1 else "") for r in runs}


def join(*parts: str) -> str:
    return " ".join(p for p in parts if p)


__all__ = ["Run", "load_runs", "names", "join"]
