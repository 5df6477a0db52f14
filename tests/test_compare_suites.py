"""Directories of runs as compare's baseline where several suites' nights share one --out, and directories whose
other runs are not complete (issue 73): each figure is judged against its own suite's runs, and a run that gives
no baseline is named with why."""

import json

import pytest
from test_compare_helpers import base_run, cli, copy_run, one_line_error, scaled

from gpubench.compare import load
from gpubench.compare.load import KEY, resolve


@pytest.fixture
def base(tmp_path_factory):
    return base_run(tmp_path_factory)


def run_id(day: int) -> str:
    return f"2099{day // 28 + 1:02d}{day % 28 + 1:02d}T000000Z-{day:06x}"


def as_suite(name: str):
    """A night of another suite: the fake run's rows under ``name``, and run.json saying so."""
    def rows(df):
        df = df.copy()
        df["suite"] = name
        return df

    def meta(info):
        info["suites"] = {name: {"version": 1, "cases": 2}}
    return rows, meta


def night(base, lab, day, suite="elementwise", busy=False, status=None, argv=()):
    rows, meta = as_suite(suite) if suite != "elementwise" else (lambda df: df, lambda info: None)
    level = 1 + 0.002 * ((day * 7) % 5 - 2)  # quiet nights: a GPU-timed figure moving 0.4 %

    def info(m):
        meta(m)
        if busy:
            m["contention"] = {"host": {"others_share": 0.9, "loaded": True}}
        if status:
            m["status"] = status
        m["argv"] = [*m["argv"], *argv]
    return copy_run(base, lab, run_id(day), lambda df: scaled(rows(df), lambda r: level), info)


def test_each_suite_of_a_shared_directory_is_judged_against_its_own_runs(capsys, base, tmp_path, monkeypatch):
    monkeypatch.setattr(load, "SPREAD_HISTORY", 6)  # a history of 6 runs, so that few nights show it
    lab = tmp_path / "results" / "lab"
    # elementwise nights and gemm nights alternate; the gemm nights ran with other options, and the latest ones
    # on a busy host, one of them never completed
    for day in range(24):
        if day % 2:
            night(base, lab, day, "gemm", busy=day > 14, status="interrupted" if day == 21 else None,
                  argv=("--timeout", "99"))
        else:
            night(base, lab, day)
    current = night(base, lab, 24)
    cur = resolve(current)
    want = set(zip(*(cur.raw[k].astype(str) for k in KEY)))
    side = resolve(lab, window=3, exclude=cur.run_ids, want=want, baseline=True)
    pooled = side.pooled()
    # each figure's window is the latest 3 elementwise nights, and its history the latest 6 of them, however many
    # gemm nights lie between (read as "the last 6 runs of the directory", it held 3)
    assert set(pooled["run_count"]) == {3} and set(pooled["history_count"]) == {6}
    assert side.run_ids == [run_id(d) for d in (18, 20, 22)]
    code, out, err = cli(capsys, "compare", lab, current, "--baseline-window", "3", "--no-record", "--format", "json")
    doc = json.loads(out)
    assert code == 0, err
    # the gemm nights left out (busy, interrupted) are no news for the elementwise figures, nor are their options
    assert doc["window"] == (f"window: 3 run(s) ({run_id(18)} … {run_id(22)}): each figure's latest 3 clean runs")
    assert doc["setting_differences"] == []
    assert {r["runs_baseline"] for r in doc["rows"]} == {3}
    # a gemm night is held against the gemm nights before it, the busy ones named
    code, out, err = cli(capsys, "compare", lab, lab / run_id(23), "--baseline-window", "3", "--no-record",
                         "--format", "json")
    doc = json.loads(out)
    assert code == 0, err
    assert doc["baseline"]["run_ids"] == [run_id(d) for d in (15, 17, 19)]  # busy nights are read for GPU figures
    assert doc["window"].endswith("left out: 3 busy host (for the figures the host sets), 1 interrupted")


def test_a_directory_whose_other_run_is_not_complete_names_it_and_why(capsys, base, tmp_path):
    lab = tmp_path / "lab"
    cut_short = night(base, lab, 0, status="interrupted")
    current = night(base, lab, 1)
    code, _, err = cli(capsys, "compare", lab, current, "--no-record")
    line = one_line_error(err)
    assert code == 2 and f"{cut_short} is interrupted, not complete" in line, line
    assert "holds no complete run other than the current one" in line and "give its run directory" in line


def test_a_directory_whose_other_run_has_a_table_cut_short_names_it_and_why(capsys, base, tmp_path):
    lab = tmp_path / "lab"
    cut = night(base, lab, 0)
    table = next(cut.glob("*.parquet"))
    table.write_bytes(table.read_bytes()[:100])  # a crash mid-write
    current = night(base, lab, 1)
    code, _, err = cli(capsys, "compare", lab, current, "--no-record")
    line = one_line_error(err)
    assert code == 2 and f"cannot read {table}" in line, line
    # pointed at the run itself, compare says the same of it
    code, _, err = cli(capsys, "compare", cut, current, "--no-record")
    assert code == 2 and f"cannot read {table}" in one_line_error(err)
