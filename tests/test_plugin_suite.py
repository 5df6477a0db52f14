"""A suite with an option and a chart, written outside gpubench (tests/plugin/gpubench_square.py) and
registered the way third-party suites are (the ``gpubench.suites`` entry-point group of an installed
distribution): it is listed, takes its option from the command line, derives its figure and draws its chart, with
no file of gpubench touched."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from gpubench import results

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def installed(tmp_path):
    """An installed distribution ``gpubench-square`` whose entry point names the plugin's suite."""
    site = tmp_path / "site"
    info = site / "gpubench_square-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: gpubench-square\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text("[gpubench.suites]\nsquare = gpubench_square:Square\n")
    path = os.pathsep.join([str(site), str(ROOT / "tests" / "plugin"), os.environ.get("PYTHONPATH", "")])
    return dict(os.environ, PYTHONPATH=path, COLUMNS="200")


def _gpubench(env, *args):
    return subprocess.run([sys.executable, "-m", "gpubench", *map(str, args)], capture_output=True, text=True,
                          timeout=600, cwd=ROOT, env=env)


def test_a_plugin_suite_is_listed_runs_with_its_option_and_draws_its_chart(installed, tmp_path):
    listed = _gpubench(installed, "list")
    assert listed.returncode == 0, listed.stderr
    assert "square" in listed.stdout and "plugin suite" in listed.stdout

    helped = _gpubench(installed, "run", "--help")
    group = helped.stdout.split("\nsquare (", 1)
    assert len(group) == 2 and "--square-scale S" in group[1], helped.stdout[-3000:]

    bad = _gpubench(installed, "run", "--suite", "square", "--backend", "cpu", "--square-scale", "0")
    assert bad.returncode == 2 and "--square-scale 0 must be at least 1" in bad.stderr

    ran = _gpubench(installed, "run", "--suite", "square", "--backend", "cpu", "--quick", "--square-scale", "3",
                    "--out", tmp_path / "results", "--cluster", "t", "--no-telemetry")
    assert ran.returncode == 0, ran.stdout[-2000:] + ran.stderr[-2000:]
    (run,) = (tmp_path / "results" / "t").iterdir()
    df = results.load(run)
    assert set(df["scale"].astype(int)) == {3} and set(df["status"]) == {"ok"}
    derived = df[df["stop"] == "derived"]
    (per,) = derived.to_dict("records")
    largest = df[(df["metric"] == "time") & (df["elements"] == per["elements"]) & (df["stop"] != "derived")]
    assert per["metric"] == "time_per_element" and per["unit"] == "ns" and per["elements"] == 1 << 12
    assert per["value"] == pytest.approx(largest["value"].iloc[0] * 1e3 / (1 << 12))

    page = tmp_path / "report"
    drawn = _gpubench(installed, "report", run, "--out", page)
    assert drawn.returncode == 0, drawn.stderr[-2000:]
    assert "square: square.png" in drawn.stdout and (page / "square.png").stat().st_size > 0
    assert "square.png" in (page / "index.html").read_text() or "square" in (page / "index.html").read_text()


def test_without_the_plugin_the_option_is_not_there(tmp_path):
    proc = _gpubench(dict(os.environ), "run", "--suite", "square", "--backend", "cpu", "--square-scale", "3")
    assert proc.returncode == 2 and "square-scale" in proc.stderr
