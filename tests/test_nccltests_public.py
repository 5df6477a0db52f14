"""Real nccl-tests / rccl-tests logs other people published (tests/fixtures/nccl-tests/public/: each file's
`## fixture:` header names its source; manifest.json holds what each log prints, read by hand). Each is imported
as a user would paste it: the table read to the printed digits, a failure imported as failed with its reason, and a
refusal only where the log does not hold what an import needs, said in one line that names what to give."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

from gpubench import results

ROOT = Path(__file__).resolve().parent.parent
PUBLIC = ROOT / "tests" / "fixtures" / "nccl-tests" / "public"
MANIFEST = json.loads((PUBLIC / "manifest.json").read_text())
# Where the log itself cannot settle a run, what a user would give, and why.
GIVEN = {
    # 20 racks of GB200 from rank 1439 on: busbw / algbw cannot tell 1,440 ranks from their neighbours
    "coreweave-gb200-20-racks-from-rank1439.txt": ["--ranks", "1440"],
    # all_gather tables whose log never names the binary (the README around it does)
    "skypilot-gke-h200-rdma-all-gather-prefixed.txt": ["--collective", "all_gather"],
    "gcp-gke-h200-all-gather-nccl-2.26.6-plain.txt": ["--collective", "all_gather"],
    "rccl-issue1490-mi250x-slingshot-srun-label-all-gather.txt": ["--collective", "all_gather"],
    # 1,024 ranks, the device list pasted up to rank 99
    "nccl-tests-issue322-h100-1024rank-truncated-ranks-failure-after-rows.txt": ["--ranks", "1024"],
}


def _log(tmp_path: Path, name: str) -> Path:
    """The log as published: the fixture's own header lines left out."""
    text = (PUBLIC / name).read_text()
    body = "\n".join(ln for ln in text.splitlines() if not ln.startswith("## fixture:"))
    path = tmp_path / name
    path.write_text(body + "\n")
    return path


def _import(tmp_path: Path, log: Path, *extra: str):
    return subprocess.run([sys.executable, "-m", "gpubench", "import", "nccl-tests", str(log), "--out",
                           str(tmp_path / "r"), "--cluster", "t", *extra], capture_output=True, text=True,
                          timeout=120, cwd=ROOT, env=dict(os.environ))


def test_every_public_log_has_its_source_and_there_are_enough():
    assert len(MANIFEST) >= 10
    for entry in MANIFEST:
        head = [ln for ln in (PUBLIC / entry["file"]).read_text().splitlines() if ln.startswith("## fixture:")]
        assert any("source:" in ln for ln in head), entry["file"]
    kinds = {(m["tool"], m.get("version")) for m in MANIFEST}
    assert {t for t, _ in kinds} == {"nccl-tests", "rccl-tests"}


@pytest.mark.parametrize("entry", MANIFEST, ids=[m["file"] for m in MANIFEST])
def test_a_public_log_imports_as_published(tmp_path, entry):
    log = _log(tmp_path, entry["file"])
    given = GIVEN.get(entry["file"], [])
    if given:  # without it: refused in one line that names the option
        alone = _import(tmp_path / "alone", log)
        assert alone.returncode == 2 and given[0] in alone.stderr, alone.stderr
        assert len(alone.stderr.strip().splitlines()) == 1, alone.stderr
    proc = _import(tmp_path, log, *given)
    failed = bool(entry.get("failed"))
    wrong = entry.get("out_of_bounds") not in (None, "0")
    assert proc.returncode == (1 if failed or wrong else 0), proc.stdout[-2000:] + proc.stderr[-2000:]
    run = next((tmp_path / "r" / "t").iterdir())
    meta = json.loads((run / "run.json").read_text())
    if failed:
        said = entry["failure"][entry["failure"].index("Test "):].split("'")[0].strip()  # after any host prefix
        assert said in proc.stdout, proc.stdout
        assert meta["status"] == ("failed" if entry["rows"] == 0 else "complete") and meta["failure"]
    if entry["rows"] == 0:
        return
    df = results.load(run)
    busbw = df[(df["metric"] == "busbw") & (df["inplace"] == False)]  # noqa: E712 — a column of booleans
    busbw = busbw.sort_values("bytes")
    assert len(busbw) == entry["rows"], (len(busbw), entry["rows"])
    for which, row in (("first", busbw.iloc[0]), ("last", busbw.iloc[-1])):
        expected = entry[f"{which}_row"]
        assert int(row["bytes"]) == expected["size"]
        printed = expected["busbw_out"]
        assert math.isclose(float(row["value"]), float(printed), abs_tol=0.5 * 10 ** -_decimals(printed)), \
            (which, row["value"], printed)
    if entry.get("collective"):
        assert set(df["collective"]) == {entry["collective"]}
    if entry.get("world_size"):
        assert set(df["world_size"]) == {entry["world_size"]}


def _decimals(text: str) -> int:
    return len(text.split(".")[1]) if "." in text else 0
