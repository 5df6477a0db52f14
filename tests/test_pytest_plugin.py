"""The gpu_benchmark fixture (gpubench/pytest_plugin.py), run by pytester on the fake backend, whose clock
makes every call last 5 µs (backends/fake.py): the figures below are exact, not measured."""

import json
import subprocess
import sys
from importlib.metadata import entry_points
from pathlib import Path

import pytest

# pytester runs pytest in this process and drops the modules each inner run imported; numpy's C extension
# cannot be imported twice, so what the plugin imports is imported here first, and kept.
import gpubench.backends.fake  # noqa: F401
import gpubench.timing.engine  # noqa: F401
import gpubench.timing.stats  # noqa: F401
from gpubench.files import loads as _toml_loads  # tomllib, or tomli on Python 3.10

pytest_plugins = ["pytester"]

ROOT = Path(__file__).resolve().parent.parent
TEST_FILE = """
calls = []

def add(a, b):
    calls.append(1)
    return a + b

def test_add(gpu_benchmark):
    assert gpu_benchmark(add, 2, b=3) == 5
    assert abs(gpu_benchmark.median_s - 5e-6) < 1e-12  # the fake clock sums floats
    assert len(gpu_benchmark.samples_s) == gpu_benchmark.stats["n"] >= 10
    assert len(calls) > gpu_benchmark.measurement.inner * 10  # warm-up and samples really called it
"""


def plugin_args():
    # Installed (pip install -e .) the entry point loads it; from a bare checkout, name it.
    installed = any(ep.value == "gpubench.pytest_plugin" for ep in entry_points(group="pytest11"))
    return [] if installed else ["-p", "gpubench.pytest_plugin"]


def test_pyproject_registers_the_plugin():
    meta = _toml_loads((ROOT / "pyproject.toml").read_text())
    assert meta["project"]["entry-points"]["pytest11"] == {"gpubench": "gpubench.pytest_plugin"}
    assert any(d.startswith("pytest-benchmark") for d in meta["project"]["optional-dependencies"]["test"])


def test_fixture_times_through_the_engine_without_pytest_benchmark(pytester):
    pytester.makepyfile(test_x=TEST_FILE)
    result = pytester.runpytest("--gpubench-backend", "fake", "-p", "no:benchmark", *plugin_args())
    result.assert_outcomes(passed=1)


def test_results_go_into_pytest_benchmarks_storage(pytester, tmp_path):
    pytester.makepyfile(test_x=TEST_FILE)
    out = tmp_path / "bench.json"
    result = pytester.runpytest("--gpubench-backend", "fake", f"--benchmark-json={out}", *plugin_args())
    result.assert_outcomes(passed=1)
    result.stdout.no_fnmatch_line("*was not used at all*")
    doc = json.loads(out.read_text())
    (bench,) = doc["benchmarks"]
    stats = bench["stats"]
    assert bench["name"] == "test_add"
    assert stats["median"] == pytest.approx(5e-6) and stats["min"] == pytest.approx(5e-6)
    assert stats["iterations"] == 400  # the engine's 2 ms samples of 5 µs calls
    assert stats["rounds"] == len(stats["data"]) >= 10
    assert bench["extra_info"]["gpubench_backend"] == "fake" and bench["extra_info"]["inner"] == 400
    assert bench["options"]["timer"] == "gpubench (fake)"
    # pytest-benchmark's own compare command reads what its session saved
    proc = subprocess.run([str(Path(sys.executable).parent / "pytest-benchmark"), "compare", str(out)],
                          capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "test_add" in proc.stdout


def test_quick_option_and_one_use_per_test(pytester):
    pytester.makepyfile(test_x="""
import pytest

def test_twice(gpu_benchmark):
    gpu_benchmark(lambda: None)
    assert len(gpu_benchmark.samples_s) == 5  # --gpubench-quick: the engine's 5 samples
    with pytest.raises(RuntimeError, match="once per test"):
        gpu_benchmark(lambda: None)
""")
    result = pytester.runpytest("--gpubench-backend", "fake", "--gpubench-quick", "-p", "no:benchmark",
                                *plugin_args())
    result.assert_outcomes(passed=1)


def test_a_workload_with_a_failing_check_fails_the_test(pytester):
    pytester.makepyfile(test_x="""
from gpubench.suite import Check, Workload

def test_wrong(gpu_benchmark):
    gpu_benchmark.measure(Workload(run=lambda x: x, make_inputs=lambda: 1,
                                   check=lambda i, o: Check(False, 0.5, 0.1, "wrong answer")))
""")
    result = pytester.runpytest("--gpubench-backend", "fake", "-p", "no:benchmark", *plugin_args())
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*AssertionError: wrong answer*"])
