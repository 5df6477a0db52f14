"""What makes the gate quiet and right: short human views of a mostly-SAME comparison, a shared GPU named and
not blamed (WORSE → UNKNOWN), and the confirmation rerun's verdicts (compare --confirm)."""

import json
import re
import xml.etree.ElementTree as ET

import pandas as pd
import pytest
from test_compare_helpers import base_run, cli, copy_run, scaled, worse_by

from gpubench import results
from gpubench.compare import confirm
from gpubench.compare.outputs.common import short_cases

SIZES = 25  # × 5 figures (a copy has no FLOP/s): 125, about a quick nightly's count


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    return base_run(tmp_path_factory)


def widen(df: pd.DataFrame) -> pd.DataFrame:
    """The run's rows at SIZES array sizes, as a quick nightly's table has many cases."""
    parts = []
    for k in range(1, SIZES + 1):
        part = df.copy()
        part["case"] = part["case"].str.replace("array_bytes=4194304", f"array_bytes={4194304 * k}", regex=False)
        parts.append(part)
    return pd.concat(parts, ignore_index=True)


def slower(cases: str, by: float = 0.10):
    """Rows of cases matching ``cases`` worse by ``by``."""
    def alter(df):
        df = widen(df)
        hit = df["case"].str.contains(cases)
        df.loc[hit] = scaled(df.loc[hit], worse_by(by))
        return df
    return alter


def test_a_mostly_same_compare_fits_a_screen_and_lists_what_moved(capsys, base, tmp_path):
    b = copy_run(base, tmp_path, "20990101T000000Z-0000b0", widen)
    c = copy_run(base, tmp_path, "20990101T000000Z-0000c0", slower(r"array_bytes=8388608,"))
    md, xml, js = tmp_path / "s.md", tmp_path / "j.xml", tmp_path / "c.json"
    code, out, _ = cli(capsys, "compare", b, c, "--out", md, "--out", xml, "--out", js)
    assert code == 1
    lines = out.rstrip("\n").splitlines()
    assert len(lines) <= 40, out
    assert lines[0] == "5 WORSE, 120 SAME"  # the counts lead
    worse = [ln for ln in lines if ln.lstrip().startswith("WORSE")]
    assert len(worse) == 5 and not any(ln.lstrip().startswith("SAME") for ln in lines)
    # the parameters every listed row shares are said once, as the run's tables say them; what is left is a short id
    assert "every case listed has dtype=fp32, array_bytes=8 MiB, impl=torch" in out
    assert sorted(ln.split()[2] for ln in worse) == ["op=copy"] * 2 + ["op=triad"] * 3
    assert "120 SAME figure(s) not listed" in out

    text = md.read_text()
    assert len(text.splitlines()) <= 40, text
    assert text.splitlines()[0] == "### ❌ gpubench compare: 5 WORSE, 120 SAME"
    assert sum(ln.startswith("| WORSE") for ln in text.splitlines()) == 5 and "| SAME" not in text
    # the machine outputs keep every figure
    doc = json.loads(js.read_text())
    assert len(doc["rows"]) == 125 and doc["summary"] == {"WORSE": 5, "SAME": 120}
    root = ET.parse(xml).getroot()
    assert root.get("tests") == "125" and root.get("failures") == "5"

    code, out, _ = cli(capsys, "compare", b, c, "--all")
    assert sum(ln.lstrip().startswith("SAME") for ln in out.splitlines()) == 120


def test_short_cases_drop_what_every_row_shares():
    short, shared = short_cases(["op=copy,dtype=fp32,array_bytes=1073741824,impl=torch",
                                 "op=copy,dtype=fp32,array_bytes=4194304,impl=triton"])
    assert shared == ["op=copy", "dtype=fp32"]
    assert short == ["array_bytes=1 GiB,impl=torch", "array_bytes=4 MiB,impl=triton"]
    assert short_cases(["a=1,b=3000"] * 2) == (["a=1,b=3000"] * 2, [])  # a lone case keeps its parameters


def contended(pid_name: str, cases: tuple = ()):
    def meta(info):
        info["contention"] = {"contended": pid_name, "gpu": {"others": [pid_name]},
                              "cases": {"elementwise": list(cases)},
                              "host": {"load1": 0.2, "cpus": 16, "loaded": False, "heaviest": None}}
    return meta


def test_a_contended_run_s_worse_is_unknown_naming_the_other_process(capsys, base, tmp_path):
    def alter(df):
        df = scaled(df, worse_by(0.10))
        df["contended"] = "pid 4321 (python3)"
        return df
    cases = tuple(results.load(base)["case"].unique())
    c = copy_run(base, tmp_path, "20990101T000000Z-0000c1", alter, meta=contended("pid 4321 (python3)", cases))
    md, js = tmp_path / "s.md", tmp_path / "c.json"
    code, out, _ = cli(capsys, "compare", base, c, "--out", md, "--out", js)
    assert code == 0  # nothing WORSE is blamed on the code
    first = out.splitlines()[0]
    assert first.startswith("5 UNKNOWN") and "GPU shared during the current run: pid 4321 (python3)" in first
    assert "GPU shared during the current run: pid 4321 (python3)" in md.read_text().splitlines()[0]
    doc = json.loads(js.read_text())
    assert doc["summary"] == {"UNKNOWN": 5} and doc["exit_code"] == 0
    assert all("pid 4321 (python3)" in r["note"] for r in doc["rows"])
    assert doc["contention"][0] == "GPU shared during the current run: pid 4321 (python3)"
    # a case measured while the other process was not there keeps its verdict
    c = copy_run(base, tmp_path, "20990101T000000Z-0000c3", alter,
                 meta=contended("pid 4321 (python3)", [x for x in cases if "op=copy" in x]))
    code, out, _ = cli(capsys, "compare", base, c, "--format", "json")
    doc = json.loads(out)
    assert code == 1 and doc["summary"] == {"WORSE": 3, "UNKNOWN": 2}
    assert {r["case"].split(",")[0] for r in doc["rows"] if r["verdict"] == "UNKNOWN"} == {"op=copy"}


def test_a_loaded_host_on_one_side_is_among_the_differences(capsys, base, tmp_path):
    def loaded(info):
        info["contention"] = {"contended": "", "host": {"load1": 9.0, "cpus": 16, "loaded": True,
                                                        "heaviest": "pid 99 (stress) 180% CPU"}}
    a = copy_run(base, tmp_path, "20990101T000000Z-0000a2", meta=contended(""))
    c = copy_run(base, tmp_path, "20990101T000000Z-0000c2", meta=loaded)
    code, out, _ = cli(capsys, "compare", a, c, "--format", "json")
    assert code == 0
    assert json.loads(out)["setting_differences"] == [
        "host load: not loaded → load 9.0 of 16 CPUs (heaviest: pid 99 (stress) 180% CPU)"]


def rows(*verdicts):
    return pd.DataFrame([{"suite": "s", "case": f"c{i}", "metric": "time", "status": "compared", "verdict": v,
                          "change": 0.1 if v == "WORSE" else 0.0, "note": ""} for i, v in enumerate(verdicts)])


def test_confirm_keeps_a_worse_that_repeats_and_drops_one_that_does_not():
    night = rows("WORSE", "WORSE", "WORSE", "SAME")
    rerun = rows("WORSE", "SAME", "UNKNOWN", "SAME").iloc[:3]
    rerun = pd.concat([rerun, rows("WORSE").assign(case="other")])
    got = confirm.apply(night, rerun)
    assert list(got["verdict"]) == ["WORSE", "UNKNOWN", "UNKNOWN", "SAME"]
    assert got.loc[0, "note"] == "confirmed by a rerun (+10.0%)"
    assert got.loc[1, "note"] == "WORSE once, SAME on a rerun in a fresh process (+0.0%)"
    # a WORSE the rerun did not measure stays WORSE: no evidence is not an acquittal
    got = confirm.apply(rows("WORSE"), rows("SAME").assign(case="elsewhere"))
    assert got.loc[0, "verdict"] == "WORSE" and "did not measure" in got.loc[0, "note"]


def test_confirm_plan_reruns_exactly_the_worse_cases_and_a_derived_row_s_suite():
    doc = {"rows": [{"suite": "elementwise", "case": "op=add,n=1", "metric": m, "status": "compared",
                     "verdict": "WORSE"} for m in ("time", "bandwidth")]
           + [{"suite": "launch", "case": "measure=graph_fixed", "metric": "time", "status": "compared",
               "verdict": "WORSE"},
              {"suite": "gemm", "case": "M=1", "metric": "time", "status": "compared", "verdict": "SAME"}]}
    current = pd.DataFrame([
        {"suite": "elementwise", "case": "op=add,n=1", "stop": "cv"},
        {"suite": "elementwise", "case": "op=add,n=10", "stop": "cv"},
        {"suite": "launch", "case": "measure=graph,nodes=1", "stop": "cv"},
        {"suite": "launch", "case": "measure=graph,nodes=10", "stop": "cv"},
        {"suite": "launch", "case": "measure=graph_fixed", "stop": "derived"},
        {"suite": "gemm", "case": "M=1", "stop": "cv"}])
    suites, regex = confirm.plan(doc, current)
    assert suites == ["elementwise", "launch"]
    picked = [c for c in current["case"] if re.search(regex, c)]
    assert picked == ["op=add,n=1", "measure=graph,nodes=1", "measure=graph,nodes=10"]
    assert confirm.plan({"rows": doc["rows"][-1:]}, current) is None


def test_unknown_rows_sharing_a_reason_say_it_once_and_stay_listed():
    from gpubench.compare.outputs.common import _marks

    young = "host-timed: judging it needs 3 or more baseline runs (has 1)"
    rows = [{"status": "compared", "verdict": "UNKNOWN", "note": young, "case": f"c{i}"} for i in range(4)]
    rows += [{"status": "compared", "verdict": "UNKNOWN", "note": "within noise (p=0.2)", "case": "x"},
             {"status": "compared", "verdict": "WORSE", "note": young, "case": "w"}]
    kept, said = _marks(rows)
    # every figure is listed; the shared note is said once, each of its rows marked (a WORSE keeps its own note)
    assert [r["case"] for r in kept] == ["c0", "c1", "c2", "c3", "x", "w"]
    assert [r["note"] for r in kept] == ["[1]"] * 4 + ["within noise (p=0.2)", young]
    assert said == [f"[1] 4 figure(s): {young}"]
    # notes that differ only in their figures share a reason: a quiet night's many "within the spread" rows
    spread = [f"{d} by the threshold or more, but within the run-to-run spread ({p}% over 5 runs × 2.5)"
              for d, p in (("worse", 38.1), ("better", 55.3), ("worse", 8.6))]
    rows = [{"status": "compared", "verdict": "UNKNOWN", "note": n, "case": f"s{i}"} for i, n in enumerate(spread)]
    kept, said = _marks(rows)
    assert [r["note"] for r in kept] == ["[1]"] * 3 and said == [
        "[1] 3 figure(s): moved by the threshold or more, but within the run-to-run spread"]
    kept, said = _marks(rows[:2])
    assert kept == rows[:2] and said == []  # fewer than 3 keep their own notes
