"""Synthetic quick-set nights for benchmarks/cost.py, where the checkout has no tests/synthetic_nights.py.

    runs = make_nights(work / "lab", 50)   # 50 run directories in work/lab, oldest first

Every night is the one-H100 quick set of ci/nightly.sh (elementwise, gemm, launch and copy ``--quick``: 4 tables)
recorded 2026-11-25 in results/reference/h100/gate-memory-20261125, each row's samples and statistics scaled by a
seeded factor around 1 (1 % standard deviation): a directory compare and report read as they read real nights.
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from pathlib import Path

import numpy as np

from gpubench import results

ROOT = Path(__file__).resolve().parent.parent
NIGHT = ROOT / "results" / "reference" / "h100" / "gate-memory-20261125" / "runs" / "20261125T184855Z-57eba7"
START = datetime(2026, 11, 1, 3, 17, tzinfo=timezone.utc)
SCALED = ("value", "mean", "min", "max", "stdev", "iqr")  # cv, a ratio, does not move with a common factor


def make_nights(directory: str | Path, n: int, seed: int = 0) -> list[Path]:
    """``n`` nights written into ``directory``, one a day from START; the run directories, oldest first."""
    directory = Path(directory)
    meta = json.loads((NIGHT / results.RUN_FILE).read_text())
    tables = {t.name: results.load_table(t) for t in sorted(NIGHT.glob(f"*{results.TABLE_SUFFIX}"))}
    rng = np.random.default_rng(seed)
    made = []
    for k in range(n):
        start = START + timedelta(days=k)
        run_id = f"{start.strftime('%Y%m%dT%H%M%SZ')}-{k:06x}"
        run = directory / run_id
        run.mkdir(parents=True)
        for name, df in tables.items():
            factor = 1.0 + rng.normal(0.0, 0.01, size=len(df))
            night = df.assign(run_id=run_id, samples=[[s * f for s in samples]
                                                      for samples, f in zip(df["samples"], factor)])
            for col in SCALED:
                night[col] = df[col] * factor
            results.save(night, run / name)
        end = start + timedelta(minutes=2)
        (run / results.RUN_FILE).write_text(json.dumps(
            {**meta, "run_id": run_id, "start_time": start.isoformat(), "end_time": end.isoformat()}, indent=2))
        made.append(run)
    return made


__all__ = ["make_nights"]
