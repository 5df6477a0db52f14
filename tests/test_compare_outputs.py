"""compare's output formats are one module each (gpubench.compare.outputs): every one renders a comparison, those
with a fleet view render the fleet's, and a new format is one file, found by the command line without a line
changed elsewhere."""

from __future__ import annotations

import json

import pytest
from test_compare_fleet import EIGHT, fleet_run
from test_compare_helpers import base_run, cli, one_line_error

from gpubench.compare import outputs
from gpubench.compare.fleet import analyze
from gpubench.compare.load import resolve
from gpubench.compare.comparison import build


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    return base_run(tmp_path_factory)


def test_every_format_renders_a_comparison_and_the_fleet(base, tmp_path):
    assert outputs.names()[0] == outputs.DEFAULT == "terminal"
    assert {"terminal", "markdown", "junit", "json"} <= set(outputs.names())
    rep = build(base, base)
    fleet = analyze([resolve(fleet_run(tmp_path / "fleet", EIGHT))])
    for name in outputs.names():
        module = outputs.get(name)
        assert module.compare(rep, False) is not None
        if hasattr(module, "fleet"):
            assert module.fleet(fleet) is not None
    assert {"terminal", "markdown", "junit", "json"} <= {n for n in outputs.names() if hasattr(outputs.get(n), "fleet")}
    assert outputs.for_suffix(".MD") == "markdown" and outputs.for_suffix(".xml") == "junit"
    assert outputs.for_suffix(".txt") is None


NEW_FORMAT = '''
SUFFIXES = (".yaml",)


def compare(report, all_rows=False):
    return f"figures: {len(report.rows)}\\nexit: {report.exit_code}\\n"
'''


def test_a_new_format_is_one_file(capsys, base, tmp_path, extra_format):
    extra_format(outputs, "yaml", NEW_FORMAT)
    code, out, err = cli(capsys, "compare", base, base, "--format", "yaml")
    assert code == 0, err
    assert out.startswith("figures: ")
    code, _, err = cli(capsys, "compare", base, base, "--out", tmp_path / "v.yaml")  # its suffix picks it
    assert code == 0, err
    assert (tmp_path / "v.yaml").read_text().endswith("exit: 0\n")
    # it has no fleet view: --fleet says so in one line, before anything is read
    code, _, err = cli(capsys, "compare", "--fleet", base, "--format", "yaml")
    assert code == 2 and "--fleet has no yaml output: choose " in one_line_error(err)


def test_what_the_formats_share_is_no_format(capsys, base, tmp_path):
    assert outputs.names() == ["terminal", "json", "junit", "markdown", "sensitivity"]
    code, _, err = cli(capsys, "compare", base, base, "--format", "common")
    assert code == 2 and "invalid choice: 'common'" in one_line_error(err)
    code, _, err = cli(capsys, "compare", base, base, "--out", tmp_path / "figures.txt")
    assert code == 2 and "pass --format markdown|junit|json|sensitivity, or name" in one_line_error(err)


def test_an_unknown_format_exits_2(capsys, base):
    code, _, err = cli(capsys, "compare", base, base, "--format", "yaml")
    assert code == 2 and "invalid choice: 'yaml'" in one_line_error(err)


def test_the_json_format_states_what_it_is(capsys, base):
    code, out, _ = cli(capsys, "compare", base, base, "--format", "json")
    doc = json.loads(out)
    assert code == 0 and doc["format"] == "gpubench-compare" and doc["contention"] == [] and doc["recorded"] is None
