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
    # all_gather tables whose paste never names the binary nor has a command line above (the README around it does)
    "skypilot-gke-h200-rdma-all-gather-prefixed.txt": ["--collective", "all_gather"],
    "rccl-issue1490-mi250x-slingshot-srun-label-all-gather.txt": ["--collective", "all_gather"],
    # 1,024 ranks, the device list pasted up to rank 99
    "nccl-tests-issue322-h100-1024rank-truncated-ranks-failure-after-rows.txt": ["--ranks", "1024"],
    # sendrecv on 8 GPUs of one process (-g 8 on its command line); no device lines, and sendrecv's busbw does not
    # depend on the world size
    "li-plus-a100x8-sendrecv-sum-redop-command-line.txt": ["--ranks", "8"],
    # a 16-rank table with root 0 and no reduction: gather and scatter print the same columns (the README says scatter)
    "awsome-dt-p4d-16rank-scatter-srun-label-no-footer.txt": ["--collective", "scatter"],
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
    if entry.get("refused"):  # what the log cannot be imported as, said in one line, and nothing written
        proc = _import(tmp_path, log)
        assert proc.returncode == 2 and entry["refused"] in proc.stderr, proc.stderr
        assert len(proc.stderr.strip().splitlines()) == 1 and not (tmp_path / "r").exists(), proc.stderr
        return
    given = GIVEN.get(entry["file"], [])
    if given:  # without it: refused in one line that names the option
        alone = _import(tmp_path / "alone", log)
        assert alone.returncode == 2 and given[0] in alone.stderr, alone.stderr
        assert len(alone.stderr.strip().splitlines()) == 1, alone.stderr
    proc = _import(tmp_path, log, *given)
    # the footer's average is compared within the printed digits: a warning only where rows are missing
    assert ("rows are missing from this log" in proc.stderr) == bool(entry.get("rows_missing")), proc.stderr
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
    read = meta["imported"]["runs"]
    expected_runs = entry.get("runs") or [entry]  # a log of several runs lists each
    assert len(read) == len(expected_runs)
    for i, expected in enumerate(expected_runs):
        _check_run(df[df["import_run"] == i], read[i], expected)


def _check_run(df, summary, expected) -> None:
    """One run's rows against what was read by hand: how many, the first and the largest size's out-of-place busbw
    as printed, the collective (and how it was known), the world size, the footer's average."""
    busbw = df[(df["metric"] == "busbw") & (df["inplace"] == False)]  # noqa: E712 — a column of booleans
    busbw = busbw.sort_values("bytes", kind="stable")
    assert len(busbw) == expected["rows"], (len(busbw), expected["rows"])
    for which, row in (("first", busbw.iloc[0]), ("last", busbw.iloc[-1])):
        row_expected = expected[f"{which}_row"]
        assert int(row["bytes"]) == row_expected["size"]
        printed = row_expected["busbw_out"]
        assert math.isclose(float(row["value"]), float(printed), abs_tol=0.5 * 10 ** -_decimals(printed)), \
            (which, row["value"], printed)
    if expected.get("collective"):
        assert set(df["collective"]) == {expected["collective"]}
    if expected.get("collective_from"):
        assert summary["collective_source"] == expected["collective_from"], summary
    if expected.get("world_size"):
        assert set(df["world_size"]) == {expected["world_size"]}
    if expected.get("avg_busbw") is not None:
        assert summary["avg_busbw"] == float(expected["avg_busbw"])
    if expected.get("line"):
        assert summary["line"] == expected["line"]


def _decimals(text: str) -> int:
    return len(text.split(".")[1]) if "." in text else 0
