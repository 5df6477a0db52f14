"""ci/nightly.sh on the fake backend: by default the nights before tonight's are its baseline (a window that
fills, judging nothing WORSE until it holds 3 runs); with BASELINE_WINDOW=0 the first night is a pinned
baseline, and a regression against it fails the job with compare's exit code once a rerun agrees."""

import json
import os
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from history_nights import embedded, recorded_worse, red
from test_compare_helpers import copy_run, scaled

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "ci" / "nightly.sh"


def nightly(tmp_path, **env):
    full = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
            "SUITES": "elementwise", "RUN_ARGS": "--quick --backend fake --dtype fp32 --filter op=copy",
            "SUMMARY": str(tmp_path / "summary.md"), "JUNIT": str(tmp_path / "junit.xml"), **env}
    if "GITHUB_STEP_SUMMARY" not in env:
        full.pop("GITHUB_STEP_SUMMARY", None)  # this test suite may itself run in GitHub Actions
    return subprocess.run(["bash", str(SCRIPT), "lab", str(tmp_path / "results")], capture_output=True,
                          text=True, env=full, cwd=tmp_path, timeout=300)


def test_nightly_sets_then_uses_the_baseline(tmp_path):
    first = nightly(tmp_path, BASELINE_WINDOW="0")
    assert first.returncode == 0, first.stderr
    assert "is now the baseline" in first.stdout
    lab = tmp_path / "results" / "lab"
    assert (lab / "baseline").is_symlink()
    assert not (tmp_path / "summary.md").exists()

    step_summary = tmp_path / "step.md"
    second = nightly(tmp_path, GITHUB_STEP_SUMMARY=str(step_summary), BASELINE_WINDOW="0")
    assert second.returncode == 0, second.stderr
    assert "SAME" in (tmp_path / "summary.md").read_text()
    assert step_summary.read_text() == (tmp_path / "summary.md").read_text()
    assert ET.parse(tmp_path / "junit.xml").getroot().get("failures") == "0"

    # a baseline that was 10 % faster: tonight's run is WORSE and the job fails with compare's exit code 1
    base = (lab / "baseline").resolve()
    faster = copy_run(base, lab, "20000101T000000Z-00fa57", lambda df: scaled(
        df, lambda r: 1.10 if r["better"] == "higher" else 1 / 1.10))
    (lab / "baseline").unlink()
    (lab / "baseline").write_text(faster.name + "\n")  # a file naming the run works as well as a symlink
    third = nightly(tmp_path, BASELINE_WINDOW="0")
    assert third.returncode == 1, third.stderr
    assert ET.parse(tmp_path / "junit.xml").getroot().get("failures") == "2"
    assert "2 WORSE" in (tmp_path / "summary.md").read_text()


def test_nightly_exits_2_on_a_setup_error_and_sets_no_baseline(tmp_path):
    proc = nightly(tmp_path, SUITES="nosuch")
    assert proc.returncode == 2
    assert "unknown suite 'nosuch'" in proc.stderr
    assert not (tmp_path / "results" / "lab" / "baseline").exists()


def test_a_worse_that_does_not_repeat_is_dropped_and_one_that_repeats_fails(tmp_path):
    assert nightly(tmp_path, BASELINE_WINDOW="0").returncode == 0  # the baseline
    slow = {"GPUBENCH_FAKE_SLOW_CASES": "1.5:op=copy", "BASELINE_WINDOW": "0"}

    # Slow in the night's process only: the rerun in a fresh process does not agree, the night passes.
    marker = tmp_path / "slow-once"
    marker.write_text("")
    once = nightly(tmp_path, **slow, GPUBENCH_FAKE_SLOW_ONCE=str(marker))
    assert once.returncode == 0, once.stdout + once.stderr
    assert not marker.exists()  # the night's process took it; the rerun ran at full speed
    assert "measuring their cases again" in once.stdout
    summary = (tmp_path / "summary.md").read_text()
    assert summary.splitlines()[0] == "### ✅ gpubench compare: 2 UNKNOWN"
    assert summary.count("WORSE once, SAME on a rerun in a fresh process") == 2
    assert ET.parse(tmp_path / "junit.xml").getroot().get("failures") == "0"
    assert len(once.stdout.splitlines()) <= 40  # the night's log is short: the runs' output is in a file
    assert "run directory:" in (tmp_path / "nightly-run.log").read_text()
    # the first compare recorded WORSE; the rerun's verdict replaced it: the blip leaves no trace in the memory
    night = sorted((tmp_path / "results" / "lab").glob("2*"))[-1]
    record = json.loads((night / "verdict.json").read_text())
    assert record["exit_code"] == 0 and record["worse"] == [] and record["rerun"]

    # Slow in every process: the rerun agrees and the night fails.
    always = nightly(tmp_path, **slow)
    assert always.returncode == 1, always.stdout + always.stderr
    summary = (tmp_path / "summary.md").read_text()
    assert summary.splitlines()[0] == "### ❌ gpubench compare: 2 WORSE"
    assert summary.count("confirmed by a rerun (+50.0%)") + summary.count("confirmed by a rerun (-33.3%)") == 2
    assert ET.parse(tmp_path / "junit.xml").getroot().get("failures") == "2"
    reruns = list((tmp_path / "results" / "lab" / "confirm" / "lab").iterdir())
    assert len(reruns) == 2  # kept apart from the nights, out of the baseline window's way

    # Slow while another process holds the GPU: named, not blamed.
    shared = nightly(tmp_path, **slow, GPUBENCH_FAKE_OTHER_PIDS=str(os.getpid()))
    assert shared.returncode == 0, shared.stdout + shared.stderr
    first = (tmp_path / "summary.md").read_text().splitlines()[0]
    assert first.startswith("### ✅ gpubench compare: 2 UNKNOWN — GPU shared during the current run: "
                            f"pid {os.getpid()} (")
    run_json = json.loads(next(iter(sorted((tmp_path / "results" / "lab").glob("2*/run.json"))[-1:])).read_text())
    assert run_json["contention"]["contended"].startswith(f"pid {os.getpid()} (")
    assert len(run_json["contention"]["cases"]["elementwise"]) == 1  # the one case, op=copy at one size


def test_the_default_window_fills_before_it_judges_and_then_catches_a_slowdown(tmp_path):
    slow = {"GPUBENCH_FAKE_SLOW_CASES": "1.5:op=copy"}
    first = nightly(tmp_path)
    assert first.returncode == 0, first.stdout + first.stderr
    assert "starts the baseline window" in first.stdout
    lab = tmp_path / "results" / "lab"
    assert not (lab / "baseline").exists()  # the window needs no pinned run

    # One run in the window: a 50 % slowdown is listed, not WORSE, and the summary says why.
    young = nightly(tmp_path, **slow)
    assert young.returncode == 0, young.stdout + young.stderr
    summary = (tmp_path / "summary.md").read_text()
    assert summary.splitlines()[0] == "### ✅ gpubench compare: 2 UNKNOWN"
    assert "the baseline window holds 1 run(s); changes are judged from 3 runs on" in summary
    shutil.rmtree(sorted(lab.glob("2*"))[-1])  # not kept: the window should hold runs of the machine as it is

    for runs in (1, 2, 3):  # the window fills; nothing changed
        quiet = nightly(tmp_path)
        assert quiet.returncode == 0, quiet.stdout + quiet.stderr
        young_note = f"the baseline window holds {runs} run(s)" in (tmp_path / "summary.md").read_text()
        assert young_note == (runs < 3)
    # Three runs of spread 0 (the fake backend is deterministic): the same slowdown is WORSE, and a rerun agrees.
    caught = nightly(tmp_path, **slow)
    assert caught.returncode == 1, caught.stdout + caught.stderr
    summary = (tmp_path / "summary.md").read_text()
    assert summary.splitlines()[0] == "### ❌ gpubench compare: 2 WORSE"
    assert summary.count("confirmed by a rerun") == 2
    # the history page beside the summary: every night kept, tonight red where the gate recorded it
    assert "nightly: history page history/index.html" in caught.stdout
    doc = embedded(tmp_path / "history" / "index.html")
    assert [n["run_id"] for n in doc["nights"]] == sorted(p.name for p in lab.glob("2*"))
    assert {r for r, _ in red(doc)} == {doc["nights"][-1]["run_id"]} and red(doc) == recorded_worse(lab)


@pytest.mark.parametrize("window", ["0", "5"])
def test_a_green_night_compares_once_and_a_red_one_twice(tmp_path, window):
    # compare costs seconds (issue 48's quick night): a night with nothing WORSE must not judge itself twice, and
    # with a window of runs compare draws the history page itself (no second interpreter for `gpubench report`)
    real = shutil.which("gpubench", path=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    shim, calls = tmp_path / "shim", tmp_path / "calls.txt"
    shim.mkdir()
    (shim / "gpubench").write_text(f'#!/usr/bin/env bash\necho "$1" >> {calls}\nexec {real} "$@"\n')
    (shim / "gpubench").chmod(0o755)
    path = f"{shim}{os.pathsep}{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"
    page = tmp_path / "history" / "index.html"
    first = nightly(tmp_path, BASELINE_WINDOW=window, PATH=path)
    assert first.returncode == 0, first.stdout + first.stderr  # the baseline, or the window's first run
    pinned = window == "0"
    # the first night of a window asks compare first: it refuses (no earlier run), and that starts the window
    assert calls.read_text().split() == (["run", "report"] if pinned else ["run", "compare", "report"])
    assert ("is now the baseline" if pinned else "starts the baseline window") in first.stdout
    assert first.stderr == "" and page.is_file()
    page.unlink()
    calls.write_text("")
    green = nightly(tmp_path, BASELINE_WINDOW=window, PATH=path)
    assert green.returncode == 0, green.stdout + green.stderr
    assert calls.read_text().split() == (["run", "compare", "report"] if pinned else ["run", "compare"])
    assert green.stdout.count("gpubench compare") == 1 and "SAME" in green.stdout
    assert "nightly: history page history/index.html" in green.stdout
    assert len(embedded(page)["nights"]) == 2  # both nights on the page, whichever command drew it
    # its verdict is recorded: the run's directory remembers it (the gate's memory)
    night = sorted((tmp_path / "results" / "lab").glob("2*"))[-1]
    assert json.loads((night / "verdict.json").read_text())["exit_code"] == 0

    calls.write_text("")
    red_night = nightly(tmp_path, BASELINE_WINDOW=window, PATH=path, GPUBENCH_FAKE_SLOW_CASES="1.5:op=copy")
    # a window of two runs lists a change, never WORSE: nothing to confirm
    assert red_night.returncode == (1 if pinned else 0), red_night.stdout + red_night.stderr
    rerun = ["run", "compare", "run", "compare"] if pinned else ["run", "compare"]
    assert calls.read_text().split() == rerun + (["report"] if pinned else [])
    assert red_night.stdout.count("gpubench compare") == 1  # the confirmed verdict only
    night = sorted((tmp_path / "results" / "lab").glob("2*"))[-1]
    record = json.loads((night / "verdict.json").read_text())
    assert record["exit_code"] == (1 if pinned else 0) and bool(record["rerun"]) is pinned
    assert len(record["worse"]) == (2 if pinned else 0)
    doc = embedded(page)
    assert doc["nights"][-1]["run_id"] == night.name  # tonight's page, tonight's verdict on it
    assert red(doc) == recorded_worse(tmp_path / "results" / "lab")


def test_a_history_page_that_cannot_be_drawn_leaves_the_gates_exit_code(tmp_path):
    assert nightly(tmp_path).returncode == 0  # the window's first run
    shutil.rmtree(tmp_path / "history")
    (tmp_path / "history").write_text("a file where the page's folder should be\n")
    night = nightly(tmp_path)
    assert night.returncode == 0, night.stdout + night.stderr
    assert "SAME" in (tmp_path / "summary.md").read_text()
    assert "the history page could not be drawn" in night.stderr


def test_a_bad_window_is_a_setup_error_before_anything_runs(tmp_path):
    proc = nightly(tmp_path, BASELINE_WINDOW="five")
    assert proc.returncode == 2
    assert "BASELINE_WINDOW=five: give a number of runs" in proc.stderr
    assert not (tmp_path / "results").exists()


def test_compare_args_reach_the_nights_compare(tmp_path):
    assert nightly(tmp_path, BASELINE_WINDOW="0").returncode == 0  # the baseline
    plain = nightly(tmp_path, BASELINE_WINDOW="0", COMPARE_ARGS="--no-host-pace")
    assert plain.returncode == 0, plain.stdout + plain.stderr
    bad = nightly(tmp_path, BASELINE_WINDOW="0", COMPARE_ARGS="--no-host-pace --nosuch-option")
    assert bad.returncode == 2 and "--nosuch-option" in bad.stderr, bad.stdout + bad.stderr
