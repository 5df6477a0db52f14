"""What compare lists (issue 73, 8): a run of one suite against a run of it and another suite, whose GPU cases were
skipped (a CPU run: rows of dashes). Every output lists the figures compare judged, read back with a parser nobody
here wrote (the terminal at 80 columns through gpubench.console, Markdown with markdown-it, JUnit with
junitparser, JSON), and the skipped cases are counted in one line by suite and reason, not listed as only-current."""

import json

import pandas as pd
import pytest
from junitparser import JUnitXml
from markdown_it import MarkdownIt
from test_compare_helpers import base_run, cli, copy_run, noisy, scaled, worse_by

from gpubench import results
from gpubench.compare.outputs.common import row_cells

SKIP = "needs a GPU: backend 'cpu' runs only torch's fp32 and fp64 products"
SPREAD = [0.85, 1.15, 0.95, 1.10, 0.90]  # samples ±15 %: a 5 % move is within noise, UNKNOWN for one reason


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    return base_run(tmp_path_factory)


def gemm_rows(df: pd.DataFrame, skipped: int, measured: int, skip: bool = True) -> pd.DataFrame:
    """A gemm table as a CPU run writes it: ``skipped`` cases of dashes (status skipped, no number; with ``skip``
    False, as a GPU run measured them), and ``measured`` figures with numbers (copies of the elementwise rows under
    gemm's name)."""
    ok = df[df["value"].notna()].head(measured).copy()
    ok["case"] = [f"shape=square,dtype=fp32,M={16 * (k + 1)},impl=torch" for k in range(len(ok))]
    dash = pd.concat([df.head(1)] * skipped, ignore_index=True)
    dash["case"] = [f"shape=square,dtype=fp64,M={512 + k},impl=triton" for k in range(skipped)]
    if skip:
        dash["status"], dash["message"], dash["n"] = "skipped", SKIP, 0
        dash["value"] = float("nan")
        dash["samples"] = [[] for _ in range(skipped)]
        dash["sample_process"] = [[] for _ in range(skipped)]
    out = pd.concat([ok, dash], ignore_index=True)
    out["suite"] = "gemm"
    return out


def with_gemm(run, skipped=40, measured=3, skip=True):
    """``run`` with a gemm table beside its elementwise one; run.json says it ran both suites."""
    df = results.load(run)
    results.save(gemm_rows(df, skipped, measured, skip), run / "gemm.parquet")
    meta = json.loads((run / "run.json").read_text())
    meta["suites"]["gemm"] = {"version": 3, "cases": skipped + measured}
    (run / "run.json").write_text(json.dumps(meta))
    return run


@pytest.fixture(scope="module")
def pair(base, tmp_path_factory):
    """(an elementwise run, an elementwise,gemm run whose elementwise figures moved 5 % within noise)."""
    lab = tmp_path_factory.mktemp("pair")
    b = copy_run(base, lab, "20990101T000000Z-000001", lambda df: scaled(df, noisy(SPREAD)))
    c = copy_run(base, lab, "20990102T000000Z-000002", lambda df: scaled(
        df, lambda r: [k * worse_by(0.05)(r) for k in reversed(SPREAD)]))
    return b, with_gemm(c)


def judged(capsys, b, c):
    code, out, err = cli(capsys, "compare", b, c, "--format", "json")
    assert code == 0, err
    doc = json.loads(out)
    return doc, [r for r in doc["rows"] if r["status"] == "compared"]


def test_the_terminal_at_80_columns_lists_each_figure_judged_with_its_numbers(capsys, pair, monkeypatch):
    b, c = pair
    doc, rows = judged(capsys, b, c)
    assert len(rows) == 5 and {r["verdict"] for r in rows} == {"UNKNOWN"}
    monkeypatch.setenv("COLUMNS", "80")  # a pipe 80 columns wide: gpubench.console.out_console sizes to it
    code, out, _ = cli(capsys, "compare", b, c)
    assert code == 0
    lines = out.splitlines()
    assert max(len(line) for line in lines) <= 80, out
    for r in rows:  # each figure judged: its metric with both its numbers and its change, on one line
        cells = row_cells(r, False)
        assert any(r["metric"] in line and cells[4] in line and cells[5] in line and cells[6] in line
                   for line in lines), (cells, out)
    # the 40 cases of dashes and the 3 gemm figures the baseline lacks: a line each, by suite and reason
    gemm = [line for line in lines if "gemm" in line]
    assert len(gemm) == 2, out
    said = " ".join(out.split())
    assert f"skipped, no figure on either side: 40 figure(s): gemm 40 (current skipped: {SKIP})" in said
    assert "only in the current run, not compared: 3 figure(s): gemm 3" in said
    assert "only-current" not in out.replace("3 only-current", "")  # the headline's count alone
    assert said.startswith("5 UNKNOWN, 3 only-current, 40 skipped")


def test_markdown_lists_the_figures_judged_and_counts_the_rest(capsys, pair, tmp_path):
    b, c = pair
    doc, rows = judged(capsys, b, c)
    md = tmp_path / "summary.md"
    code, _, err = cli(capsys, "compare", b, c, "--out", md)
    assert code == 0, err
    tokens = MarkdownIt("commonmark").enable("table").parse(md.read_text())
    cells, row = [], None
    for t in tokens:
        if t.type == "tr_open":
            row = []
        elif t.type == "inline" and row is not None:
            row.append(t.content)
        elif t.type == "tr_close":
            cells.append(row)
            row = None
    head, body = cells[0], cells[1:]
    assert head[:4] == ["verdict", "suite", "case", "metric"]
    listed = {(r[1], r[3]) for r in body}
    assert len(body) == 5 and listed == {(r["suite"], r["metric"]) for r in rows}
    assert all(r[0] == "UNKNOWN" for r in body)
    text = md.read_text()
    assert "gemm 40 (current skipped: needs a GPU" in text and "only in the current run, not compared: 3" in text
    # the note the 5 figures share is said once, each row holding its mark
    assert {r[head.index("note")] for r in body} == {"[1]"}
    assert "[1] 5 figure(s): worse by the threshold or more, but within noise (p=" in text


def test_junit_holds_a_testcase_per_figure_judged_and_says_what_was_not_compared(capsys, pair, tmp_path):
    b, c = pair
    doc, rows = judged(capsys, b, c)
    path = tmp_path / "junit.xml"
    code, _, err = cli(capsys, "compare", b, c, "--out", path)
    assert code == 0, err
    (suite,) = list(JUnitXml.fromfile(str(path)))
    cases = list(suite)
    assert sorted(case.name for case in cases) == sorted(f"{r['case']} {r['metric']}" for r in rows)
    assert {case.classname for case in cases} == {"gpubench.elementwise"}
    props = {p.name: p.value for p in suite.properties()}
    assert props["not_compared"] == ("only in the current run, not compared: 3 figure(s): gemm 3; skipped, no figure "
                                     f"on either side: 40 figure(s): gemm 40 (current skipped: {SKIP})")


def test_json_counts_cases_of_dashes_as_skipped_by_suite_and_reason(capsys, pair, base, tmp_path):
    b, c = pair
    doc, rows = judged(capsys, b, c)
    assert doc["summary"] == {"UNKNOWN": 5, "only-current": 3, "skipped": 40}
    assert doc["not_compared"] == [
        {"status": "only-current", "suite": "gemm", "reason": "", "figures": 3},
        {"status": "skipped", "suite": "gemm", "reason": f"current skipped: {SKIP}", "figures": 40}]
    skipped = [r for r in doc["rows"] if r["status"] == "skipped"]
    assert len(skipped) == 40 and {r["baseline"] for r in skipped} == {None} == {r["current"] for r in skipped}
    # skipped on both sides (two CPU runs): dashes, not 40 rows "not-ok" to read through
    b2 = with_gemm(copy_run(base, tmp_path, "20990103T000000Z-000003"))
    code, out, err = cli(capsys, "compare", b2, c, "--format", "json")
    doc = json.loads(out)
    assert code == 0, err
    assert doc["summary"] == {"UNKNOWN": 5, "SAME": 3, "skipped": 40}
    assert doc["not_compared"] == [{"status": "skipped", "suite": "gemm", "reason": f"baseline and current skipped: "
                                                                                  f"{SKIP}", "figures": 40}]
    code, out, _ = cli(capsys, "compare", b2, c)
    assert "not-ok" not in out and "M=512" not in out and "skipped, no figure on either side: 40 figure(s)" in out
    # a figure measured in the baseline and skipped tonight is a figure lost: listed, each row, not counted away
    lost = with_gemm(copy_run(base, tmp_path, "20990104T000000Z-000004"), skip=False)
    code, out, err = cli(capsys, "compare", lost, c, "--format", "json")
    assert code == 0, err
    assert json.loads(out)["summary"] == {"UNKNOWN": 5, "not-ok": 40, "SAME": 3}
    code, out, _ = cli(capsys, "compare", lost, c)
    assert out.count("not-ok") == 40 + 1 and f"[1] 40 figure(s): current skipped: {SKIP}" in out
