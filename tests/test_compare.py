"""gpubench compare end to end on real run directories (the CLI on the fake backend) and altered copies."""

import json
import re
import xml.etree.ElementTree as ET

import pyarrow.parquet as pq
import pytest
from test_compare_helpers import (base_run, better_by, cli, copy_run, noisy, one_line_error, real_run, scaled,
                                  worse_by)

from gpubench import results
from gpubench.compare.verdict import COLUMNS


@pytest.fixture
def base(tmp_path_factory):
    return base_run(tmp_path_factory)


def compare_json(capsys, *argv):
    code, out, err = cli(capsys, "compare", *map(str, argv), "--format", "json")
    assert code in (0, 1), err
    return code, json.loads(out)


def verdicts(doc):
    return {(r["case"].split(",")[0], r["metric"]): r["verdict"] for r in doc["rows"]}


def test_a_run_compared_with_itself_is_same_and_exits_0(capsys, base):
    code, out, err = cli(capsys, "compare", base, base)
    assert code == 0, err
    assert "SAME" in out and "WORSE" not in out
    code, doc = compare_json(capsys, base, base)
    assert code == 0 and doc["exit_code"] == 0
    assert {r["verdict"] for r in doc["rows"]} == {"SAME"}
    # copy's TFLOP/s is NaN on both sides (a copy does no arithmetic): left out, not listed
    assert ("op=copy", "throughput") not in verdicts(doc)
    assert len(doc["rows"]) == 5


def test_a_5_percent_regression_is_worse_and_exits_1(capsys, base, tmp_path):
    cur = copy_run(base, tmp_path, "20990101T000000Z-000001", lambda df: scaled(df, worse_by(0.05)))
    code, out, _ = cli(capsys, "compare", base, cur)
    assert code == 1
    assert "WORSE" in out
    _, doc = compare_json(capsys, base, cur)
    assert set(verdicts(doc).values()) == {"WORSE"}
    bw = next(r for r in doc["rows"] if r["metric"] == "bandwidth")
    assert bw["change"] == pytest.approx(-0.05) and bw["basis"] == "samples" and bw["p_value"] <= 0.01
    assert bw["n_baseline"] == bw["n_current"] == 5


def test_improvements_are_better_and_exit_0(capsys, base, tmp_path):
    cur = copy_run(base, tmp_path, "20990101T000000Z-000002", lambda df: scaled(df, better_by(0.08)))
    code, doc = compare_json(capsys, base, cur)
    assert code == 0 and set(verdicts(doc).values()) == {"BETTER"}


def test_the_same_shift_inside_noise_is_not_worse(capsys, base, tmp_path):
    spread = [0.85, 1.15, 0.95, 1.10, 0.90]  # ±15 % around the fake backend's exact figures
    b = copy_run(base, tmp_path, "20990101T000000Z-000003", lambda df: scaled(df, noisy(spread)))
    c = copy_run(base, tmp_path, "20990101T000000Z-000004", lambda df: scaled(
        df, lambda r: [k * worse_by(0.05)(r) for k in reversed(spread)]))
    code, doc = compare_json(capsys, b, c)
    assert code == 0
    assert {round(abs(r["change"]), 6) for r in doc["rows"]} == {0.05}
    assert set(verdicts(doc).values()) == {"UNKNOWN"}
    assert all(r["p_value"] > 0.01 for r in doc["rows"])


def test_worst_rows_come_first(capsys, base, tmp_path):
    def alter(df):
        def f(r):
            if r["case"].startswith("op=triad") and r["metric"] == "time":
                return 1.20
            if r["case"].startswith("op=copy") and r["metric"] == "time":
                return 1.07
            return 1.0
        return scaled(df, f)

    cur = copy_run(base, tmp_path, "20990101T000000Z-000005", alter)
    code, doc = compare_json(capsys, base, cur)
    assert code == 1
    assert [(r["verdict"], r["case"].split(",")[0]) for r in doc["rows"][:2]] == [("WORSE", "op=triad"),
                                                                                  ("WORSE", "op=copy")]
    assert {r["verdict"] for r in doc["rows"][2:]} == {"SAME"}


def test_rows_on_one_side_not_ok_or_of_another_suite_version_are_listed(capsys, base, tmp_path):
    def alter(df):
        df = df[~((df["case"].str.startswith("op=copy")) & (df["metric"] == "time"))].copy()
        triad_bw = df["case"].str.startswith("op=triad") & (df["metric"] == "bandwidth")
        df.loc[triad_bw, "status"] = "error"
        df.loc[triad_bw, "message"] = "RuntimeError: boom"
        triad_time = df["case"].str.startswith("op=triad") & (df["metric"] == "time")
        df.loc[triad_time, "suite_version"] = 2
        return df

    cur = copy_run(base, tmp_path, "20990101T000000Z-000006", alter)
    code, doc = compare_json(capsys, base, cur)
    assert code == 0
    by = {(r["case"].split(",")[0], r["metric"]): r for r in doc["rows"]}
    assert by[("op=copy", "time")]["status"] == "only-baseline" and by[("op=copy", "time")]["verdict"] is None
    assert by[("op=triad", "bandwidth")]["status"] == "not-ok"
    assert "current error: RuntimeError: boom" in by[("op=triad", "bandwidth")]["note"]
    assert by[("op=triad", "time")]["verdict"] == "incomparable"
    assert by[("op=copy", "bandwidth")]["verdict"] == "SAME"
    assert doc["summary"] == {"SAME": 2, "only-baseline": 1, "not-ok": 1, "incomparable": 1}
    code, doc = compare_json(capsys, cur, base)
    assert {r["status"] for r in doc["rows"]} >= {"only-current"}


def test_n_equal_1_rows_are_judged_by_the_threshold_alone(capsys, base, tmp_path):
    # e.g. figures imported from logs: one number per figure
    def one_sample(k):
        def alter(df):
            df = scaled(df, lambda r: k if r["better"] == "higher" else 1 / k)
            df["samples"] = [s[:1] for s in df["samples"]]
            df["n"] = 1
            return df
        return alter

    b = copy_run(base, tmp_path, "20990101T000000Z-000007", one_sample(1.0))
    c = copy_run(base, tmp_path, "20990101T000000Z-000008", one_sample(0.93))
    code, doc = compare_json(capsys, b, c)
    assert code == 1
    assert {r["basis"] for r in doc["rows"]} == {"threshold-only"}
    assert {r["verdict"] for r in doc["rows"]} == {"WORSE"}
    assert all(r["p_value"] is None for r in doc["rows"])
    c2 = copy_run(base, tmp_path, "20990101T000000Z-000009", one_sample(0.97))
    code, doc = compare_json(capsys, b, c2)
    assert code == 0 and {r["verdict"] for r in doc["rows"]} == {"SAME"}


def test_a_thresholds_file_and_threshold_option(capsys, base, tmp_path):
    cur = copy_run(base, tmp_path, "20990101T000000Z-000010", lambda df: scaled(df, worse_by(0.05)))
    th = tmp_path / "th.toml"
    th.write_text("[elementwise]\nbandwidth = 0.10\n")
    code, doc = compare_json(capsys, base, cur, "--thresholds", th)
    assert code == 1
    v = verdicts(doc)
    assert v[("op=copy", "bandwidth")] == "SAME" and v[("op=copy", "time")] == "WORSE"
    assert doc["thresholds"]["suites"] == {"elementwise": {"bandwidth": 0.10}}
    code, doc = compare_json(capsys, base, cur, "--threshold", "0.08")
    assert code == 0 and set(verdicts(doc).values()) == {"SAME"}


def test_every_output_format_parses_back(capsys, base, tmp_path):
    cur = copy_run(base, tmp_path, "20990101T000000Z-000011",
                   lambda df: scaled(df, lambda r: 1.10 if r["metric"] == "time" else 1.0))
    md, xml, js = tmp_path / "s.md", tmp_path / "j.xml", tmp_path / "c.json"
    code, out, _ = cli(capsys, "compare", base, cur, "--out", md, "--out", xml, "--out", js)
    assert code == 1
    assert "WORSE" in out  # the terminal still gets the table

    doc = json.loads(js.read_text())
    assert doc["format"] == "gpubench-compare" and doc["version"] == 1
    assert set(doc) >= {"baseline", "current", "rows", "summary", "exit_code", "thresholds", "alpha", "title"}
    assert doc["exit_code"] == 1 and doc["summary"] == {"WORSE": 2, "SAME": 3}
    assert all(list(r) == list(COLUMNS) for r in doc["rows"])
    assert doc["baseline"]["run_ids"] == [results.load(base).attrs["run"]["run_id"]]
    assert doc["current"]["run_ids"] == ["20990101T000000Z-000011"]

    root = ET.parse(xml).getroot()
    cases = root.findall("./testsuite/testcase")
    assert len(cases) == 5 and root.get("tests") == "5" and root.get("failures") == "2"
    failed = [c for c in cases if c.find("failure") is not None]
    assert {c.get("name").split()[1] for c in failed} == {"time"}
    assert all(c.get("classname") == "gpubench.elementwise" for c in cases)
    assert "+10.0%" in failed[0].find("failure").get("message")

    lines = md.read_text().splitlines()
    assert lines[0].startswith("### ") and "2 WORSE" in lines[0]
    table = [ln for ln in lines if ln.startswith("|")]
    cells = [re.split(r"(?<!\\)\|", ln)[1:-1] for ln in table]
    assert len({len(c) for c in cells}) == 1  # every row as wide as the header
    assert [c.strip() for c in cells[0]][:4] == ["verdict", "suite", "case", "metric"]
    assert set("".join(cells[1])) <= set("-")
    assert [c[0].strip() for c in cells[2:]] == ["WORSE", "WORSE"]  # people read what moved
    assert "3 SAME figure(s) not listed" in md.read_text()
    cli(capsys, "compare", base, cur, "--out", md, "--all")
    cells = [re.split(r"(?<!\\)\|", ln)[1:-1] for ln in md.read_text().splitlines() if ln.startswith("|")]
    assert [c[0].strip() for c in cells[2:]] == ["WORSE", "WORSE", "SAME", "SAME", "SAME"]


def test_format_to_stdout_without_out(capsys, base):
    code, out, _ = cli(capsys, "compare", base, base, "--format", "junit")
    assert code == 0
    assert ET.fromstring(out.split("\n", 1)[1]).tag == "testsuites"
    code, out, _ = cli(capsys, "compare", base, base, "--format", "markdown")
    assert code == 0 and out.startswith("### ")


def test_a_newer_schema_exits_2_with_one_line(capsys, base, tmp_path):
    newer = tmp_path / "newer.parquet"
    table = pq.read_table(base / "elementwise.parquet")
    meta = dict(table.schema.metadata)
    meta[results.META_KEY] = json.dumps({"schema_version": results.SCHEMA_VERSION + 1}).encode()
    pq.write_table(table.replace_schema_metadata(meta), newer)
    code, _, err = cli(capsys, "compare", base, newer)
    assert code == 2
    assert "newer than this gpubench reads" in one_line_error(err)


def test_no_common_rows_exits_2_saying_what_to_do(capsys, base, tmp_path):
    def other_suite(df):
        df["suite"] = "other"
        return df

    cur = copy_run(base, tmp_path, "20990101T000000Z-000012", other_suite)
    code, _, err = cli(capsys, "compare", base, cur)
    assert code == 2
    assert "no figure in common: compare runs of the same suites" in one_line_error(err)


@pytest.mark.parametrize("argv,needle", [
    (["compare", "x"], "compare takes BASELINE CURRENT (2 paths), not 1"),
    (["compare", "nosuch", "nosuch2"], "does not exist"),
    (["compare", "BASE", "BASE", "--out", "result.txt"], "pass --format markdown|junit|json"),
    (["compare", "BASE", "BASE", "--baseline-window", "3"], "needs a directory of runs"),
    (["compare", "BASE", "BASE", "--threshold", "5"], "thresholds are fractions"),
    (["compare", "BASE", "BASE", "--alpha", "2"], "--alpha 2"),
])
def test_usage_errors_exit_2(capsys, base, tmp_path, monkeypatch, argv, needle):
    monkeypatch.chdir(tmp_path)
    code, _, err = cli(capsys, *[str(base) if a == "BASE" else a for a in argv])
    assert code == 2
    assert needle in one_line_error(err)


def test_directory_of_runs_latest_and_baseline_window(capsys, base, tmp_path):
    cluster = tmp_path / "results" / "t"
    cluster.mkdir(parents=True)
    copy_run(base, cluster, "20990101T000000Z-00000a", lambda df: scaled(df, worse_by(0.10)))
    copy_run(base, cluster, "20990102T000000Z-00000b")
    copy_run(base, cluster, "20990103T000000Z-00000c")
    copy_run(base, cluster, "20990104T000000Z-00000d",
             meta=lambda m: m.update(status="interrupted"))  # partial: never chosen
    (cluster / "baseline").symlink_to(cluster / "20990102T000000Z-00000b")  # not counted twice
    # the same directory on both sides: the latest run against the ones before it (up to the default window)
    code, doc = compare_json(capsys, cluster, cluster)
    assert doc["current"]["run_ids"] == ["20990103T000000Z-00000c"]
    assert doc["baseline"]["run_ids"] == ["20990101T000000Z-00000a", "20990102T000000Z-00000b"]
    # a default window the directory cannot fill is no news; which runs it holds, and that two runs judge
    # nothing yet, are
    assert doc["notes"][0] == ("window: 2 run(s) (20990101T000000Z-00000a … 20990102T000000Z-00000b): each "
                               "figure's latest 5 clean runs")
    assert len(doc["notes"]) == 2 and "holds 2 run(s); changes are judged from 3 runs on" in doc["notes"][1]
    code, doc = compare_json(capsys, cluster, cluster, "--baseline-window", "1")
    assert doc["baseline"]["run_ids"] == ["20990102T000000Z-00000b"]
    code, doc = compare_json(capsys, cluster, cluster, "--baseline-window", "2")
    assert doc["baseline"]["run_ids"] == ["20990101T000000Z-00000a", "20990102T000000Z-00000b"]
    assert {r["n_baseline"] for r in doc["rows"]} == {10}  # 5 samples of each run, pooled
    # a baseline pooled from a 10 % worse and an equal run: the latest is better by ~5 % but within noise
    assert set(verdicts(doc).values()) <= {"UNKNOWN", "SAME"}
    code, doc = compare_json(capsys, cluster, cluster, "--baseline-window", "5")
    assert len(doc["baseline"]["run_ids"]) == 2 and any("fewer than the window of 5" in n for n in doc["notes"])
    code, out, _ = cli(capsys, "compare", cluster, cluster, "--baseline-window", "5")
    assert "fewer than the window of 5" in " ".join(out.split())  # the terminal shows the notes too
    # a pointer file naming the baseline run, as ci/nightly.sh keeps it
    (cluster / "baseline").unlink()
    (cluster / "baseline").write_text("20990101T000000Z-00000a\n")
    code, doc = compare_json(capsys, cluster / "baseline", cluster)
    assert doc["baseline"]["run_ids"] == ["20990101T000000Z-00000a"] and code == 0
    assert set(verdicts(doc).values()) == {"BETTER"}
    # a run of the directory judged again later: its baseline is the runs before it, never those made after
    copy_run(base, cluster, "20990106T000000Z-00000f")
    code, doc = compare_json(capsys, cluster, cluster / "20990102T000000Z-00000b")
    assert doc["baseline"]["run_ids"] == ["20990101T000000Z-00000a"]


def test_full_flow_through_main(capsys, tmp_path):
    out = tmp_path / "results"
    first = real_run(out, "lab", only="op=copy")
    second = real_run(out, "lab", only="op=copy")
    # two runs of the same build on one machine: the fake backend's clock makes them equal
    code, _, err = cli(capsys, "compare", first, second)
    assert code == 0, err
    th = tmp_path / "thresholds.toml"
    code, out_text, err = cli(capsys, "calibrate", first, second, "--out", th)
    assert code == 0, err
    assert '[elementwise."op=' in th.read_text()  # a threshold per case
    slower = copy_run(second, out / "lab", "20990101T000000Z-0000ff", lambda df: scaled(df, worse_by(0.06)))
    md, xml = tmp_path / "summary.md", tmp_path / "junit.xml"
    code, out_text, err = cli(capsys, "compare", out / "lab" / first.name, out / "lab", "--thresholds", th,
                              "--out", md, "--out", xml)
    assert code == 1, err
    assert ET.parse(xml).getroot().get("failures") == "2"  # copy's bandwidth and time
    assert "2 WORSE" in md.read_text()
    exported = tmp_path / "bench.json"
    code, _, err = cli(capsys, "export", slower, "--format", "pytest-benchmark", "--out", exported)
    assert code == 0, err
    assert [b["name"] for b in json.loads(exported.read_text())["benchmarks"]] == [
        "time[op=copy,dtype=fp32,array_bytes=4194304,impl=torch]"]
