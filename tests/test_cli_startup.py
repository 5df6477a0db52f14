"""The command line answers at once: --help, list, a usage error and every command's --help import nothing heavy
(issue 48). What a command imports is what its start costs; a timed test would fail on a busy machine, so this
counts modules, and benchmarks/cost.py measures the times."""

import argparse
import json
import os
import subprocess
import sys

import pytest

from gpubench import declared
from gpubench.cli import COMMANDS
from gpubench.commands import run as run_command
from gpubench.registry import all_suites

HEAVY = ("pandas", "torch", "scipy", "matplotlib", "numpy", "pyarrow", "triton")

# Runs the command line as `gpubench ARGS` does, then writes which heavy packages it had imported.
PROBE = """
import json, os, sys
from gpubench.cli import main
try:
    rc = main(sys.argv[1:])
except SystemExit as e:
    rc = e.code
heavy = sorted({m.split(".")[0] for m in sys.modules} & set(os.environ["PROBE_HEAVY"].split(",")))
with open(os.environ["PROBE_OUT"], "w") as f:
    json.dump([rc, heavy], f)
"""


def probe(tmp_path, *argv):
    out = tmp_path / "probe.json"
    env = {**os.environ, "PROBE_OUT": str(out), "PROBE_HEAVY": ",".join(HEAVY)}
    proc = subprocess.run([sys.executable, "-c", PROBE, *argv], capture_output=True, text=True, env=env, timeout=300)
    assert out.exists(), proc.stderr[-2000:]
    rc, heavy = json.loads(out.read_text())
    return rc, heavy, proc


@pytest.fixture(scope="module")
def warm(tmp_path_factory):
    """The suites' declarations cached, as any command that imports the suites leaves them (the first one after an
    install or an edit imports them: it says nothing of the start of the next)."""
    rc, _, proc = probe(tmp_path_factory.mktemp("warm"), "list")
    assert rc == 0, proc.stderr[-2000:]


@pytest.mark.parametrize("argv", [
    ["--help"], ["list"], ["frobnicate"], ["run", "--help"], ["run", "--suite", "nosuch"],
    ["run", "--suite", "elementwise", "--no-such-option"], ["compare", "only-one"],
    *([name, "--help"] for name in COMMANDS),
])
def test_the_command_line_imports_nothing_heavy_before_a_command_needs_it(tmp_path, warm, argv):
    rc, heavy, proc = probe(tmp_path, *argv)
    assert rc in (0, 2), proc.stderr[-2000:]
    assert heavy == [], f"gpubench {' '.join(argv)} imported {heavy}"
    if rc == 2:  # a usage error: one line, saying what to do
        assert proc.stderr.count("\n") == 1 and proc.stderr.startswith("gpubench: error: "), proc.stderr


def test_list_reads_the_declarations_the_suites_make():
    listed = {d.name: d for d in declared.suites()}
    for name, cls in all_suites().items():
        d = listed.pop(name)
        assert (d.version, d.backends, d.metrics, d.description) == (cls.version, cls.backends, cls.metrics,
                                                                      cls.description)
    assert not listed


def _run_help(suites) -> str:
    p = argparse.ArgumentParser(prog="gpubench run")
    run_command.add(p, suites)
    return p.format_help()


def test_run_help_from_the_declarations_is_the_suites_own():
    declared.remember(list(all_suites().values()))
    assert _run_help(declared.suites()) == _run_help(all_suites().values())


def test_an_edited_source_or_another_cache_is_never_read_as_current(tmp_path, monkeypatch):
    src = tmp_path / "src"
    src.mkdir()
    (src / "mod.py").write_text("x = 1\n")
    monkeypatch.setattr(declared, "_sources", lambda: [src])
    before = declared._key()
    (src / "mod.py").write_text("x = 12\n")
    assert declared._key() != before

    cache = tmp_path / "suites.json"
    found = declared.remember([all_suites()["elementwise"]], key="old", path=cache)
    assert declared._read(cache, "old") == found
    assert declared._read(cache, "new") is None  # a cache of other sources is rebuilt, not read
    cache.write_text('{"key": "old", "suites": [')  # cut short by a crash
    assert declared._read(cache, "old") is None


def test_a_home_without_room_for_the_cache_still_lists(tmp_path, monkeypatch):
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    monkeypatch.setenv("XDG_CACHE_HOME", str(blocker))
    assert {d.name for d in declared.suites()} == set(all_suites())
