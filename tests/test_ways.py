"""The other ways into and out of a suite's table (gpubench/suite.py): each built-in one is found by its name, a
suite the library has never seen is reached the same way, and what the command line refuses is one line, exit 2."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pandas as pd
import pytest

from gpubench import declared, registry, results
from gpubench.cli import main
from gpubench.suite import TIME, Case, Suite, Workload
from gpubench.suite import Engine, Exporter, Importer


def _run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def _one_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("gpubench: error: "), err
    return lines[0]


def test_each_built_in_way_is_found_by_its_name_and_is_what_its_kind_holds():
    for kind, cls, names in (("engines", Engine, {"nccl-tests"}), ("importers", Importer, {"nccl-tests", "rccl-tests"}),
                             ("exporters", Exporter, {"tunableop", "triton-configs"})):
        found = declared.ways(kind)
        assert names <= set(found), (kind, sorted(found))
        for name, owner in found.items():
            suite, way = declared.way(kind, name)
            assert suite.name == owner and suite is registry.all_suites()[owner]
            assert isinstance(way, cls) and way.name == name and callable(way.run if cls is Engine else
                                                                            way.read if cls is Importer else way.write)
    assert declared.way("engines", "nccl-tests")[0].name == "comm"
    assert declared.way("exporters", "tunableop")[0].name == "autotune-kernels"
    drivers = {name: cls.driver for name, cls in registry.all_suites().items() if cls.driver}
    assert set(drivers) == {"autotune"} and isinstance(drivers["autotune"], Engine) and drivers["autotune"].alone
    # The old per-suite hooks are gone: one way per thing, no second path that could drift from it.
    for gone in ("drives", "drive", "run_engine", "import_logs", "imports", "exports"):
        assert not hasattr(Suite, gone), gone


def test_reaching_a_way_imports_its_suite_alone(tmp_path):
    # gpubench import needs comm's importer: not elementwise's module and torch with it (seconds on a busy VM).
    # The first command after an install writes the suites' declarations (importing them all); the next reads them.
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path)}
    probe = ("import sys; from gpubench.declared import way; cls, w = way('importers', 'rccl-tests'); "
             "print(cls.name, w.name, sorted(m for m in ('gpubench.suites.elementwise', 'gpubench.suites.gemm', "
             "'torch') if m in sys.modules))")
    first = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, timeout=300)
    assert first.returncode == 0 and first.stdout.startswith("comm rccl-tests"), first.stderr[-2000:]
    second = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, timeout=300)
    assert second.returncode == 0 and second.stdout.strip() == "comm rccl-tests []", (second.stdout, second.stderr)


def test_a_name_no_suite_declares_is_a_usage_error_naming_those_there_are():
    with pytest.raises(Exception, match=r"no suite exports 'yaml': choose from .*tunableop") as e:
        declared.way("exporters", "yaml")
    assert type(e.value).__name__ == "UsageError"


class Toy(Suite):
    """A suite the library has never seen, with one exporter and a driver-free grid of one case."""

    name = "toy"
    version = 1
    backends = frozenset({"fake", "cpu"})
    metrics = (TIME,)
    params = ("n",)
    exporters = (Exporter("toy-lines", lambda df, meta: ("\n".join(f"{v:.3g}" for v in df["value"]) + "\n",
                                                         f"{len(df)} line(s) of run {meta.get('run_id')}")),)

    def cases(self, ctx):
        yield Case.of(n=1)

    def prepare(self, case, backend, ctx=None):
        return Workload(run=lambda x: x + 1, make_inputs=lambda: 1, bytes=8)


@pytest.fixture
def toy(monkeypatch):
    real = registry.all_suites
    monkeypatch.setattr(registry, "all_suites", lambda: {**real(), "toy": Toy})
    monkeypatch.setattr(declared, "suites", lambda: [declared.of(cls) for cls in registry.all_suites().values()])
    return Toy


def test_a_new_suites_exporter_is_reached_by_export_format_with_its_own_rows_only(capsys, tmp_path, toy):
    code, _, err = _run(capsys, "run", "--suite", "toy,elementwise", "--backend", "fake", "--quick", "--filter",
                        "n=1|op=copy,dtype=fp32", "--out", str(tmp_path / "r"), "--cluster", "t")
    assert code == 0, err
    (run,) = list((tmp_path / "r" / "t").iterdir())
    df = results.load(run)
    mine = df[df["suite"] == "toy"]
    assert len(mine) >= 1 and (df["suite"] != "toy").any()
    code, out, err = _run(capsys, "export", str(run), "--format", "toy-lines", "--out", str(tmp_path / "x.txt"))
    assert code == 0, err
    lines = (tmp_path / "x.txt").read_text().splitlines()
    assert len(lines) == len(mine)  # the other suite's rows were not handed to it
    assert f"{len(mine)} line(s) of run {json.loads((run / 'run.json').read_text())['run_id']}" in out


def test_export_refuses_a_format_nobody_writes_and_a_run_without_the_suites_rows(capsys, tmp_path, toy):
    table = tmp_path / "t.parquet"
    pd.DataFrame({"suite": ["elementwise"], "value": [1.0]}).to_parquet(table)
    code, _, err = _run(capsys, "export", str(table), "--format", "yaml", "--out", str(tmp_path / "y"))
    line = _one_line(err)
    assert code == 2 and "unknown --format 'yaml'" in line and "pytest-benchmark" in line and "toy-lines" in line
    code, _, err = _run(capsys, "run", "--suite", "elementwise", "--backend", "fake", "--quick", "--filter",
                        "op=copy,dtype=fp32", "--out", str(tmp_path / "r"), "--cluster", "t")
    assert code == 0, err
    (run,) = list((tmp_path / "r" / "t").iterdir())
    code, _, err = _run(capsys, "export", str(run), "--format", "toy-lines", "--out", str(tmp_path / "z"))
    assert code == 2 and "has no toy rows" in _one_line(err) and not (tmp_path / "z").exists()


@pytest.mark.parametrize("argv,needle", [
    # An option only the nccl-tests engine reads, given to gpubench's own loop.
    (["--suite", "comm", "--nccl-tests-layout", "threads"], "--nccl-tests-layout is for --engine nccl-tests"),
    (["--suite", "elementwise", "--engine", "nccl-tests"], "--engine nccl-tests runs the comm suite only"),
    (["--suite", "comm,elementwise", "--engine", "nccl-tests"], "--engine nccl-tests runs the comm suite only"),
    (["--suite", "autotune", "--devices", "0"], "autotune runs alone"),
    (["--suite", "autotune,comm"], "autotune runs alone"),
])
def test_run_refuses_an_engine_where_it_does_not_belong_in_one_line(capsys, tmp_path, argv, needle):
    code, _, err = _run(capsys, "run", *argv, "--backend", "fake", "--out", str(tmp_path / "out"))
    assert code == 2 and needle in _one_line(err)
    assert not (tmp_path / "out").exists()


def test_import_of_logs_no_suite_reads_is_one_line_naming_the_tools(capsys, tmp_path):
    log = tmp_path / "x.log"
    log.write_text("# nThread 1\n")
    code, _, err = _run(capsys, "import", "ib-write-bw", str(log), "--out", str(tmp_path / "out"))
    line = _one_line(err)
    assert code == 2 and "'ib-write-bw'" in line and "nccl-tests" in line and "rccl-tests" in line
    assert not (tmp_path / "out").exists()
