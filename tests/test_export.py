"""gpubench export --format pytest-benchmark: pytest-benchmark's own loader and compare command read the file."""

import json
import subprocess
import sys
from pathlib import Path

import pytest
from pytest_benchmark.storage.file import FileStorage
from test_compare_helpers import base_run, cli, copy_run, one_line_error

from gpubench.results.exports import pytest_benchmark as export
from gpubench import results


@pytest.fixture
def exported(capsys, tmp_path_factory, tmp_path):
    run = base_run(tmp_path_factory)
    out = tmp_path / "0001_gpubench.json"  # the name pytest-benchmark's storage gives its own saved runs
    code, text, err = cli(capsys, "export", run, "--format", "pytest-benchmark", "--out", out)
    assert code == 0, err
    assert "2 time figure(s) written" in text and "4 row(s) left out" in text
    return run, out


class _Logger:
    def __init__(self):
        self.warnings = []

    def warning(self, text, **kw):
        self.warnings.append(text)

    def info(self, text, **kw):
        pass


def test_pytest_benchmark_storage_loads_the_file(exported):
    run, out = exported
    logger = _Logger()
    storage = FileStorage(out.parent, logger=logger)
    loaded = list(storage.load(str(out)))
    assert logger.warnings == [] and len(loaded) == 1
    benches = list(storage.load_benchmarks(str(out)))
    df = results.load(run)
    time = df[df["metric"] == "time"].set_index("case")
    assert {b["param"] for b in benches} == set(time.index)
    for b in benches:
        row = time.loc[b["param"]]
        assert b["group"] == "elementwise" and b["name"] == f"time[{b['param']}]"
        assert b["data"] == pytest.approx([s / 1e6 for s in row["samples"]])  # us → s
        assert b["median"] == pytest.approx(row["value"] / 1e6)
        assert b["iterations"] == row["inner"] and b["rounds"] == row["n"]
        assert b["params"]["op"] in ("copy", "triad") and b["params"]["array_bytes"] == 4194304
        assert b["extra_info"]["unit"] == "us" and b["extra_info"]["device"] == "Fake GPU"
    doc = json.loads(out.read_text())
    assert doc["datetime"] == df.attrs["run"]["start_time"]
    assert doc["machine_info"]["gpubench"]["fingerprint"] == df.attrs["run"]["fingerprint"]["fingerprint"]
    assert set(doc) == {"machine_info", "commit_info", "benchmarks", "datetime", "version"}


def test_pytest_benchmark_compare_reads_it(exported, tmp_path):
    _, out = exported
    proc = subprocess.run([str(Path(sys.executable).parent / "pytest-benchmark"), "compare", str(out)],
                          capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "time[op=copy,dtype=fp32,array_bytes=4194304,impl=torch]" in proc.stdout
    assert "Failed to load" not in proc.stdout + proc.stderr


def test_stats_are_the_samples_in_seconds():
    # The stats come from pytest-benchmark's Stats; what gpubench decides is what goes in: the raw samples.
    ours = export.benchmark_stats([3e-6, 1e-6, 2e-6])
    assert ours["rounds"] == 3 and ours["min"] == 1e-6 and ours["max"] == 3e-6
    assert ours["median"] == pytest.approx(2e-6) and ours["total"] == pytest.approx(6e-6)


def test_a_run_without_time_figures_exits_2(capsys, tmp_path_factory, tmp_path):
    def no_time(df):
        return df[df["metric"] != "time"]

    run = copy_run(base_run(tmp_path_factory), tmp_path, "20990101T000000Z-000001", no_time)
    code, _, err = cli(capsys, "export", run, "--out", tmp_path / "x.json")
    assert code == 2 and "no ok time figure" in one_line_error(err)
    assert not (tmp_path / "x.json").exists()


def test_without_pytest_benchmark_the_line_names_the_extra_that_installs_it(capsys, monkeypatch, tmp_path_factory,
                                                                             tmp_path):
    import tomllib

    run = base_run(tmp_path_factory)
    monkeypatch.setitem(sys.modules, "pytest_benchmark.stats", None)  # not installed
    code, _, err = cli(capsys, "export", run, "--out", tmp_path / "x.json")
    assert code == 2 and "pip install 'gpubench-suite[pytest]'" in one_line_error(err)
    assert not (tmp_path / "x.json").exists()
    # and the extra it names is the project's own
    project = tomllib.loads((Path(__file__).resolve().parent.parent / "pyproject.toml").read_text())["project"]
    assert project["name"] == "gpubench-suite"
    assert any(d.startswith("pytest-benchmark") for d in project["optional-dependencies"]["pytest"])
