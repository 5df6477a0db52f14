"""Suites are found as built-ins and through the entry-point group, and ship inside the wheel."""

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

import gpubench
from gpubench import registry
from gpubench.errors import UsageError
from gpubench.suite import TIME, Suite

ROOT = Path(__file__).resolve().parent.parent


class PluginSuite(Suite):
    name = "plugin-demo"
    version = 1
    backends = frozenset({"fake"})
    metrics = (TIME,)


class FakeEntryPoint:
    def __init__(self, name, obj=None, error=None):
        self.name, self.value, self._obj, self._error = name, f"demo:{name}", obj, error

    def load(self):
        if self._error:
            raise self._error
        return self._obj


def test_builtin_suites_are_found():
    assert "elementwise" in registry.builtin_suites()


def test_entry_point_suites_are_found_and_broken_ones_warn(monkeypatch):
    eps = [FakeEntryPoint("plugin-demo", PluginSuite), FakeEntryPoint("broken", error=ImportError("no module")),
           FakeEntryPoint("notasuite", obj=object)]
    monkeypatch.setattr(registry, "entry_points", lambda group: eps if group == "gpubench.suites" else [])
    with pytest.warns(UserWarning) as caught:
        suites = registry.all_suites()
    assert suites["plugin-demo"] is PluginSuite and "elementwise" in suites
    assert "broken" not in suites and "notasuite" not in suites
    assert len(caught) == 2


def test_select_rejects_unknown_names():
    with pytest.raises(UsageError, match="unknown suite 'x'"):
        registry.select("elementwise,x")
    assert [s.name for s in registry.select("elementwise,elementwise")] == ["elementwise"]


def test_wheel_carries_the_builtin_suites(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-w", str(tmp_path), str(ROOT)],
        capture_output=True, text=True, timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    wheel = next(tmp_path.glob("gpubench_suite-*.whl"))  # the distribution's name, not the command's
    names = zipfile.ZipFile(wheel).namelist()
    metadata = zipfile.ZipFile(wheel).read(next(n for n in names if n.endswith(".dist-info/METADATA"))).decode()
    assert f"Name: {gpubench.DISTRIBUTION}" in metadata.splitlines()
    assert "gpubench/suites/elementwise.py" in names
    assert "gpubench/kernels/stream_triton.py" in names
    entry = next(n for n in names if n.endswith("entry_points.txt"))
    assert "gpubench = gpubench.cli:main" in zipfile.ZipFile(wheel).read(entry).decode()
