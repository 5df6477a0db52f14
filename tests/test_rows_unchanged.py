"""Every suite's quick run on the fake backend gives the rows it gave when this file's snapshot was taken: the
same case ids, metrics, units and statuses. A change of the engine's or the suites' structure must not change
what a run records; a change that means to (a new case, a new metric) updates the snapshot on purpose:

    GPUBENCH_UPDATE_ROWS=1 pytest tests/test_rows_unchanged.py

Each fake call lasts 10 ms of fake time (GPUBENCH_FAKE_CALL_S), so the engine batches few real calls and the
whole file takes about a minute on a 2-core machine."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from gpubench import results

SNAPSHOTS = Path(__file__).parent / "fixtures" / "rows"
# The suite, and the options that keep its run short where the default quick grid would be long on the fake.
RUNS = {
    "elementwise": (),
    "gemm": (),
    "launch": (),
    "copy": (),
    "comm": (),
    "autotune-kernels": (),
    "autotune": ("--knob", "NCCL_PROTO=LL,Simple"),
}
COLUMNS = ["suite", "case", "metric", "unit", "status"]


def _rows(tmp_path: Path, suite: str, extra: tuple[str, ...]) -> list[list[str]]:
    env = {**os.environ, "GPUBENCH_FAKE_CALL_S": "0.01", "NCCL_NVLS_ENABLE": "0"}
    proc = subprocess.run([sys.executable, "-m", "gpubench", "run", "--suite", suite, "--backend", "fake", "--quick",
                           "--out", str(tmp_path), "--cluster", "rows", *extra],
                          capture_output=True, text=True, env=env, timeout=600)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    (run,) = (tmp_path / "rows").iterdir()
    df = results.load(run)
    return sorted(df[COLUMNS].astype(str).values.tolist())


@pytest.mark.parametrize("suite", list(RUNS))
def test_quick_rows_match_the_snapshot(tmp_path, suite):
    rows = _rows(tmp_path, suite, RUNS[suite])
    path = SNAPSHOTS / f"{suite}.json"
    if os.environ.get("GPUBENCH_UPDATE_ROWS") == "1":
        path.write_text("[\n" + ",\n".join(json.dumps(r) for r in rows) + "\n]\n")
    assert rows, f"{suite}'s quick run wrote no rows"
    want = json.loads(path.read_text())
    gone = [r for r in want if r not in rows]
    new = [r for r in rows if r not in want]
    assert not gone and not new, f"{suite}: rows gone {gone[:5]}, rows new {new[:5]}"
