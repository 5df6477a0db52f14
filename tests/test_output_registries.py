"""Every output of gpubench is one module per format in its owner's package, found by one registry
(gpubench.registry.Formats): compare's, check's, export's own and the nightly history's. What a package and its
formats declare is read from their sources, so that a command lists them without importing what they import."""

from __future__ import annotations

import importlib
import json
import subprocess
import sys

import pytest
from test_compare_helpers import base_run, cli, one_line_error

from gpubench.registry import Formats

PACKAGES = {
    "gpubench.compare.outputs": ["terminal", "json", "junit", "markdown", "sensitivity"],
    "gpubench.check.outputs": ["table", "json", "junit", "prometheus"],
    "gpubench.results.exports": ["pytest-benchmark"],
    "gpubench.report.history.outputs": ["page", "history-csv", "history-json"],
}


@pytest.mark.parametrize("package", PACKAGES)
def test_each_registry_lists_its_formats_the_default_first_and_no_shared_module(package):
    formats = Formats(package)
    assert formats.names() == PACKAGES[package]
    assert formats.default == formats.names()[0] == importlib.import_module(package).DEFAULT
    assert formats.others() == formats.names()[1:]
    for shared in getattr(importlib.import_module(package), "SHARED", ()):
        importlib.import_module(f"{package}.{shared}")  # a module there, which is no format
        assert shared not in formats.names()


@pytest.mark.parametrize("package", PACKAGES)
def test_what_a_format_declares_in_its_source_is_what_it_holds(package):
    formats = Formats(package)
    for name in formats.names():
        module = formats.get(name)
        for key in ("SUFFIXES", "CONSOLE", "ORDER", "FILE_ONLY"):
            assert formats.declared(name, key) == getattr(module, key, None), (name, key)


def test_compare_takes_an_out_files_format_from_its_suffix_and_names_the_file_formats():
    compare = Formats("gpubench.compare.outputs")
    assert compare.files() == ["markdown", "junit", "json", "sensitivity"]
    assert compare.suffixes() == [".md", ".xml", ".json"]
    assert compare.for_suffix(".MARKDOWN") == "markdown" and compare.for_suffix(".txt") is None
    assert compare.is_console("terminal") and not compare.is_console("json")


def test_an_unknown_format_is_one_line_naming_those_there_are():
    with pytest.raises(Exception, match=r"no output format 'yaml': choose table, json, junit, prometheus$"):
        Formats("gpubench.check.outputs").get("yaml")


PROBE = """
import json, sys
from gpubench.registry import Formats
said = {p: (Formats(p).names(), Formats(p).declared(Formats(p).names()[0], "CONSOLE"))
        for p in ("gpubench.results.exports", "gpubench.report.history.outputs")}
loaded = sorted(m for m in ("pandas", "numpy", "gpubench.results", "gpubench.report") if m in sys.modules)
print(json.dumps([said, loaded]))
"""


def test_a_registry_is_read_without_importing_its_package():
    # The results and the report import pandas: export's --help lists their formats all the same.
    proc = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    said, loaded = json.loads(proc.stdout)
    assert said["gpubench.report.history.outputs"][0] == PACKAGES["gpubench.report.history.outputs"]
    assert loaded == []


NEW_EXPORT = '''
def export(run, out):
    return f"rows of {run}\\n", f"a line written to {out}"
'''


def test_a_new_export_format_is_one_file(capsys, tmp_path, tmp_path_factory, monkeypatch, extra_format):
    from gpubench.results import exports

    extra_format(exports, "rows_text", NEW_EXPORT)
    monkeypatch.setenv("COLUMNS", "1000")  # each option's help on one line
    with pytest.raises(SystemExit):
        cli(capsys, "export", "--help")
    assert "output format: pytest-benchmark (default), rows-text, history-csv" in capsys.readouterr().out
    run = base_run(tmp_path_factory)
    code, out, err = cli(capsys, "export", run, "--format", "rows-text", "--out", tmp_path / "r.txt")
    assert code == 0, err
    assert (tmp_path / "r.txt").read_text() == f"rows of {run}\n"
    assert out == f"a line written to {tmp_path / 'r.txt'}\n"
    code, _, err = cli(capsys, "export", run, "--format", "nosuch", "--out", tmp_path / "x")
    assert code == 2 and "choose from pytest-benchmark, rows-text, history-csv" in one_line_error(err)
