"""Suites are found as built-ins and through the entry-point group, and ship inside the wheel."""

import shutil
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


def _shipped(root: Path) -> dict[str, Path]:
    """Each file of the package's sources (gpubench/, and suites/ installed as gpubench/suites) by the name the wheel
    must hold it under: a folder of a suite or of data files left out of pyproject's packages would be missing."""
    found = {}
    for top, name in (("gpubench", "gpubench"), ("suites", "gpubench/suites")):
        for f in (root / top).rglob("*"):
            if f.is_file() and "__pycache__" not in f.parts and f.suffix in (".py", ".toml", ".json", ".js", ".css"):
                found[f"{name}/{f.relative_to(root / top).as_posix()}"] = f
    return found


def test_wheel_carries_the_builtin_suites(tmp_path):
    # Built from a copy of the sources: a checkout's build/ folder, left by an earlier build, would lend the wheel
    # files that pyproject no longer ships.
    src = tmp_path / "src"
    src.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, src / name)
    for top in ("gpubench", "suites"):
        shutil.copytree(ROOT / top, src / top, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-v", "--no-deps", "--no-build-isolation", "-w", str(tmp_path),
         str(src)],
        capture_output=True, text=True, timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    # setuptools' "Package would be ignored" block: a folder Python imports that the packages list leaves out.
    assert "would be ignored" not in proc.stdout + proc.stderr, proc.stdout[-3000:]
    wheel = next(tmp_path.glob("gpubench_suite-*.whl"))  # the distribution's name, not the command's
    names = zipfile.ZipFile(wheel).namelist()
    missing = sorted(set(_shipped(ROOT)) - set(names))
    assert not missing, f"not in the wheel (add their folders to pyproject.toml's packages): {missing}"
    metadata = zipfile.ZipFile(wheel).read(next(n for n in names if n.endswith(".dist-info/METADATA"))).decode()
    assert f"Name: {gpubench.DISTRIBUTION}" in metadata.splitlines()
    assert "gpubench/suites/elementwise.py" in names
    assert "gpubench/kernels/stream_triton.py" in names
    entry = next(n for n in names if n.endswith("entry_points.txt"))
    assert "gpubench = gpubench.cli:entry" in zipfile.ZipFile(wheel).read(entry).decode()
