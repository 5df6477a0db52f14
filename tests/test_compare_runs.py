"""Runs as the unit of evidence: a baseline window's run medians, figures whose level moves between processes,
few samples per run, derived rows with their parents' noise, cross-cluster efficiency, per-case thresholds,
post-passes, and older tables. Synthetic run directories made from one fake-backend run."""

import json
import math
import xml.etree.ElementTree as ET

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from test_compare_helpers import base_run, cli, copy_run, device_rows, scaled, set_system, worse_by

from gpubench import results
from gpubench.timing import stats
from gpubench.run.rows import derived_rows
from gpubench.compare import margin, comparison as report, thresholds, verdict
from gpubench.compare.verdict import MIN_RUNS, UNKNOWN, WORSE, judge, spread_factor

H100, H200 = "NVIDIA H100 80GB HBM3", "NVIDIA H200"
LEVELS_30 = (1.0, 1.3, 0.85, 1.2, 0.95)  # run levels of a host-timed figure on one H200: up to 30 % apart
QUIET = (1.0, 1.002, 0.998, 1.001, 0.999)  # a GPU-timed figure's: 0.4 %


@pytest.fixture
def base(tmp_path_factory):
    return base_run(tmp_path_factory)


def host_timed(df):
    df = df.copy()
    df["timing_method"] = "host clock"
    return df


def first_samples(k):
    """Each row keeps its first ``k`` samples (CPU --quick rows have 3)."""
    def alter(df):
        df = df.copy()
        df["samples"] = [list(s)[:k] for s in df["samples"]]
        df["n"] = [len(s) for s in df["samples"]]
        return scaled(df, lambda r: 1.0)  # stats follow
    return alter


def window(base, parent, levels, alter=lambda df: df):
    """One run per level (its samples all × that level, as one process's share its level), oldest first."""
    parent.mkdir(parents=True, exist_ok=True)
    for i, k in enumerate(levels):
        copy_run(base, parent, f"2099010{i + 1}T000000Z-00000{i}", lambda df, k=k: alter(scaled(df, lambda r: k)))
    return parent


def doc_of(capsys, *argv):
    code, out, err = cli(capsys, "compare", *argv, "--format", "json")
    assert code in (0, 1), err
    return code, json.loads(out)


def compared(doc):
    return [r for r in doc["rows"] if r["status"] == "compared"]


@pytest.mark.parametrize("level", [1.3, 0.75, 1.25])
def test_a_30_percent_level_shift_inside_a_window_of_such_shifts_is_never_worse(capsys, base, tmp_path, level):
    runs = window(base, tmp_path / "results" / "t", LEVELS_30, host_timed)
    cur = copy_run(base, tmp_path, "20990201T000000Z-0000ff", lambda df: host_timed(scaled(df, lambda r: level)))
    code, doc = doc_of(capsys, runs, cur)
    assert code == 0
    rows = compared(doc)
    assert rows and all(r["verdict"] in ("SAME", "UNKNOWN") for r in rows)
    assert all(r["runs_baseline"] == 5 for r in rows)
    assert any("run-to-run spread" in r["note"] for r in rows)


def test_a_5_percent_shift_of_a_quiet_figure_is_worse(capsys, base, tmp_path):
    runs = window(base, tmp_path / "results" / "t", QUIET)
    cur = copy_run(base, tmp_path, "20990201T000000Z-0000ff", lambda df: scaled(df, worse_by(0.05)))
    code, doc = doc_of(capsys, runs, cur)
    assert code == 1
    rows = compared(doc)
    assert {r["verdict"] for r in rows} == {WORSE}
    assert all(r["basis"] == "samples" and r["run_spread"] == pytest.approx(0.004, abs=1e-6) for r in rows)


def test_few_samples_per_run_are_judged_on_the_window_s_run_medians(capsys, base, tmp_path):
    runs = window(base, tmp_path / "results" / "t", QUIET, first_samples(3))
    cur = copy_run(base, tmp_path, "20990201T000000Z-0000ff", lambda df: first_samples(3)(scaled(df, worse_by(0.10))))
    code, doc = doc_of(capsys, runs, cur)
    assert code == 1
    rows = compared(doc)
    assert {r["verdict"] for r in rows} == {WORSE} and {r["basis"] for r in rows} == {"run-medians"}
    # two single runs of 3 samples each: the rank test cannot reach alpha (best p 0.1), nothing is WORSE
    code, doc = doc_of(capsys, sorted(runs.iterdir())[-1], cur)
    assert code == 0 and {r["verdict"] for r in compared(doc)} == {UNKNOWN}


def test_a_host_timed_figure_needs_baseline_runs_a_gpu_timed_one_does_not(capsys, base, tmp_path):
    a = copy_run(base, tmp_path, "20990101T000000Z-00000a", host_timed)
    b = copy_run(base, tmp_path, "20990102T000000Z-00000b", lambda df: host_timed(scaled(df, worse_by(0.30))))
    code, doc = doc_of(capsys, a, b)
    assert code == 0
    rows = compared(doc)
    assert {r["verdict"] for r in rows} == {UNKNOWN}
    assert all(f"needs {MIN_RUNS} or more baseline runs (has 1)" in r["note"] for r in rows)
    # the same shift of GPU-timed figures between two single runs: judged on the samples, as before
    c = copy_run(base, tmp_path, "20990103T000000Z-00000c", lambda df: scaled(df, worse_by(0.30)))
    code, doc = doc_of(capsys, base, c)
    assert code == 1 and {r["verdict"] for r in compared(doc)} == {WORSE}


def test_a_window_of_one_or_two_runs_lists_a_change_and_judges_it_from_three(capsys, base, tmp_path):
    # GPU-timed figures move between processes too (a graph replay's launch cost, pinned copies on an H100):
    # a nightly history's first runs cannot tell that from a regression, whatever the samples say.
    cur = copy_run(base, tmp_path, "20990201T000000Z-0000ff", lambda df: scaled(df, worse_by(0.30)))
    for k in (1, 2):
        runs = window(base, tmp_path / f"young{k}" / "t", QUIET[:k])
        code, doc = doc_of(capsys, runs, cur)
        assert code == 0
        rows = compared(doc)
        assert rows and {r["verdict"] for r in rows} == {UNKNOWN}
        assert all(f"the baseline window holds {k} run(s) of this figure" in r["note"] for r in rows)
        assert any(f"holds {k} run(s); changes are judged from {MIN_RUNS} runs on" in n for n in doc["notes"])
    runs = window(base, tmp_path / "full" / "t", QUIET[:MIN_RUNS])
    code, doc = doc_of(capsys, runs, cur)
    assert code == 1 and {r["verdict"] for r in compared(doc)} == {WORSE}
    assert not any("changes are judged from" in n for n in doc["notes"])


def test_a_host_set_figure_is_judged_on_its_longer_history_a_gpu_timed_one_on_the_window(capsys, base, tmp_path):
    # An H100's pageable 1 GiB copy, nothing changed: 137, 132, 122, 117, 118, 117, 115 ms, then 143 and 155.
    drift = (1.19, 1.15, 1.06, 1.02, 1.03, 1.02, 1.0)
    worse = lambda df: scaled(df, worse_by(0.20))  # noqa: E731
    runs = window(base, tmp_path / "host" / "t", drift, host_timed)
    cur = copy_run(base, tmp_path, "20990201T000000Z-0000ff", lambda df: host_timed(worse(df)))
    code, doc = doc_of(capsys, runs, cur)
    assert code == 0
    rows = compared(doc)
    assert rows and {r["verdict"] for r in rows} == {UNKNOWN}
    assert all("over 7 runs" in r["note"] for r in rows)  # the window alone (5 runs, 3 %) would say WORSE
    # the same history of a GPU-timed figure: its window of the last 5 runs decides, and a 20 % step is WORSE
    runs = window(base, tmp_path / "gpu" / "t", drift)
    cur = copy_run(base, tmp_path, "20990201T000000Z-0000fe", worse)
    code, doc = doc_of(capsys, runs, cur)
    assert code == 1 and {r["verdict"] for r in compared(doc)} == {WORSE}


@pytest.mark.parametrize("row,why", [
    ({"timing_method": "host clock, copy + sync"}, "host-timed"),
    ({"host_bound": True}, "host-bound"),
    ({"host_bound": np.bool_(True)}, "host-bound"),
    ({"memory": "pageable"}, "pageable copy"),
    # where this process's host buffers landed sets a pinned or registered copy's rate (gpubench.results.host_set)
    ({"memory": "pinned", "host_bound": False, "timing_method": "held stream, events"}, "pinned host buffers"),
    ({"memory": "registered"}, "registered host buffers"),
    ({"memory": "device", "timing_method": "held stream, events"}, ""),
    ({"host_bound": None}, ""),
])
def test_which_rows_move_between_processes(row, why):
    assert verdict.moves_between_runs(row) == why


def test_the_spread_factor_keeps_an_unchanged_figure_quiet():
    # k runs and one more from the same distribution: how often is the new one beyond factor × range?
    rng = np.random.default_rng(7)
    for k in (3, 5, 8):
        w, x = rng.normal(size=(40000, k)), rng.normal(size=40000)
        far = np.abs(x - np.median(w, axis=1)) > spread_factor(k) * (w.max(axis=1) - w.min(axis=1))
        assert far.mean() < 0.015, (k, far.mean())
    assert spread_factor(MIN_RUNS - 1) == math.inf


def test_a_host_set_figure_pooled_over_processes_takes_the_pooled_factor():
    # A window of 5 runs of 3 processes each (15 process medians 0.95-1.05: spread 10 %) against tonight's 3
    # processes 10 % slower: beyond 0.84 x 10 % (the pooled factor), within 1.15 x 10 % (one process's draw).
    window = [0.95, 1.0, 1.05] * 5
    rng = np.random.default_rng(3)
    base = [v * (1 + 0.001 * e) for v in window for e in rng.standard_normal(20)]
    tonight = [1.10 * (1 + 0.001 * e) for e in rng.standard_normal(60)]
    args = dict(baseline_runs=window, run_count=5, window=True)
    host = judge(base, tonight, "lower", 0.05, moves="host-timed", current_processes=3, **args)
    assert host["verdict"] == WORSE and "against this run's 3 × 0.84" in host["note"], host
    assert host["catches"] == pytest.approx(0.084, rel=0.02)
    # The same figure from one process tonight, timed on the GPU (its processes draw levels) or a copy to pinned
    # buffers (no host pace: a run's processes share its level): one draw's factor.
    for kw in (dict(moves="host-timed", current_processes=1), dict(moves="", current_processes=3),
               dict(moves="pinned host buffers", current_processes=3)):
        r = judge(base, tonight, "lower", 0.05, **kw, **args)
        assert r["verdict"] == UNKNOWN and r["catches"] == pytest.approx(0.115, rel=0.02), (kw, r)
    # A window whose runs were not all measured in 3 processes (14 values of 5 runs): one draw's factor too.
    r = judge(base, tonight, "lower", 0.05, moves="host-timed", current_processes=3,
              **{**args, "baseline_runs": window[:14]})
    assert r["verdict"] == UNKNOWN, r
    assert spread_factor(15, window_runs=5, current_processes=3) == margin._POOLED_FACTOR[3][5]
    assert spread_factor(15, window_runs=5) == spread_factor(15) == margin._SPREAD_FACTOR[15]
    assert spread_factor(40, window_runs=8, current_processes=5) == margin._POOLED_FACTOR[5][8]
    # more processes than tabulated: the largest tabulated count's factor, the larger one
    assert spread_factor(60, window_runs=10, current_processes=6) == margin._POOLED_FACTOR[6][10]
    assert spread_factor(80, window_runs=10, current_processes=8) == margin._POOLED_FACTOR[6][10]


def test_tonight_is_pooled_only_where_both_sides_were_moved_to_the_host_pace():
    # compare marks the rows it moved along a pace line (gpubench.compare.pace.AT_PACE); without the pace the host's
    # state stays in the processes' levels, which a run's processes share: one draw's factor.
    from gpubench.compare.pace import AT_PACE

    window = [0.95, 1.0, 1.05] * 5
    rng = np.random.default_rng(4)
    b = {"samples": [v * (1 + 0.001 * e) for v in window for e in rng.standard_normal(20)], "run_values": window,
         "run_count": 5, "run_n": 20, "history_values": window, "history_count": 5, "timing_method": "host clock",
         "value": 1.0}
    c = {"samples": [1.10 * (1 + 0.001 * e) for e in rng.standard_normal(60)], "run_values": [1.1, 1.1, 1.1],
         "run_count": 1, "run_n": 20, "timing_method": "host clock", "value": 1.1}
    cases = ((True, True, WORSE), (np.True_, np.True_, WORSE), (True, False, UNKNOWN), (False, True, UNKNOWN),
             (float("nan"), float("nan"), UNKNOWN), (None, None, UNKNOWN))
    for at_base, at_tonight, want in cases:
        r = verdict._judge_pair({**b, AT_PACE: at_base}, {**c, AT_PACE: at_tonight}, "lower", 0.05, 0.01, False, True)
        assert r["verdict"] == want, (at_base, at_tonight, r)


def test_judge_on_run_medians_without_samples():
    # a derived figure of older runs (no samples): the window's run medians decide
    r = judge([], [], "lower", 0.05, baseline_value=1.0, current_value=1.2, baseline_runs=[1.0, 1.001, 0.999, 1.0])
    assert r["verdict"] == WORSE and r["basis"] == "run-medians"
    r = judge([], [], "lower", 0.05, baseline_value=1.0, current_value=1.2, baseline_runs=[1.0, 1.3, 0.9, 1.1])
    assert r["verdict"] == UNKNOWN and "run-to-run spread" in r["note"]


def _launch_rows(eager, graph, replay):
    rows = []
    for measure, nodes, samples, method in (("chain_eager", 100, eager, "device events"),
                                             ("chain_graph", 100, graph, "device events"),
                                             *(("graph_launch", n, [s * n for s in replay], "host clock")
                                               for n in (1, 10, 100, 1000))):
        rows.append({"measure": measure, "nodes": nodes, "metric": "time", "status": "ok", "stop": "cv",
                     "value": float(np.median(samples)), "samples": list(samples), "timing_method": method})
    return rows


def test_a_derived_row_inherits_its_parents_noise():
    from gpubench.suites.launch import Launch

    rng = np.random.default_rng(3)
    tight = {"eager": 200 + rng.normal(0, 0.2, 20), "graph": 100 + rng.normal(0, 0.1, 20)}
    loose = {"eager": 200 + rng.normal(0, 20, 20), "graph": 100 + rng.normal(0, 10, 20)}
    replay = 1 + rng.normal(0, 0.05, 12)
    by = {}
    for name, p in (("tight", tight), ("loose", loose)):
        derived = Launch().summarize(_launch_rows(p["eager"], p["graph"], replay))
        by[name] = {d.case["measure"]: d for d in derived}
    speed_t, speed_l = by["tight"]["chain_speedup"], by["loose"]["chain_speedup"]
    assert len(speed_t.samples) == 20  # as many as its thinnest parent
    assert stats.summarize(speed_l.samples)["cv"] > 20 * stats.summarize(speed_t.samples)["cv"]
    assert np.median(speed_t.samples) == pytest.approx(speed_t.value, rel=0.01)
    fixed = by["tight"]["graph_launch_fixed"]
    assert len(fixed.samples) == 12 and dict(fixed.extra)["timing_method"] == "host clock"
    assert dict(speed_t.extra)["timing_method"] == "device events"
    # the rows carry them: n and samples, no longer a threshold-only n = 0
    rows = derived_rows(Launch(), [speed_l, fixed], {})
    assert [r["n"] for r in rows] == [20, 12] and rows[1]["timing_method"] == "host clock"


def test_propagate_is_paired_and_empty_without_parents():
    assert stats.propagate(lambda a, b: a / b, [[2.0, 2.0], []]) == []
    out = stats.propagate(lambda a, b: a - b, [[5.0] * 4, [1.0, 2.0, 3.0]])
    assert len(out) == 3 and set(out) <= {4.0, 3.0, 2.0}


def _peak_scaled(factor):
    """H200 rows whose bandwidth is the H100's × the ratio of their peaks × factor (efficiency × factor)."""
    def alter(df):
        df = device_rows(df, H200)
        ratio = 4800.0 / 3350.0
        return scaled(df, lambda r: ratio * factor if r["metric"] == "bandwidth" else 1.0 / ratio)
    return alter


@pytest.mark.parametrize("efficiency,code,bandwidth", [(1.0, 0, "SAME"), (0.9, 1, "WORSE")])
def test_cross_cluster_judges_efficiency_not_hardware(capsys, base, tmp_path, efficiency, code, bandwidth):
    a = copy_run(base, tmp_path, "20990101T000000Z-0000a1", lambda df: device_rows(df, H100),
                 meta=set_system(H100))
    b = copy_run(base, tmp_path, "20990101T000000Z-0000b1", _peak_scaled(efficiency), meta=set_system(H200))
    got, doc = doc_of(capsys, a, b, "--cross-cluster")
    assert got == code
    bw = [r for r in compared(doc) if r["metric"] == "bandwidth"]
    assert bw and {r["verdict"] for r in bw} == {bandwidth}
    assert all(r["judged_on"] == "% of peak" and r["ratio"] == pytest.approx(4800 / 3350 * efficiency) for r in bw)
    others = [r for r in compared(doc) if r["metric"] != "bandwidth"]
    assert others and all(r["verdict"] == UNKNOWN and r["judged_on"] == "not judged" for r in others)
    assert f"gpu_model: {H100} → {H200}" in doc["title"]  # the header names what differs


def test_every_format_parses_with_the_new_columns(capsys, base, tmp_path):
    runs = window(base, tmp_path / "results" / "t", QUIET)
    cur = copy_run(base, tmp_path, "20990201T000000Z-0000ff", lambda df: scaled(df, worse_by(0.05)))
    for fmt in ("json", "junit", "markdown"):
        code, out, err = cli(capsys, "compare", runs, cur, "--format", fmt)
        assert code == 1, err
        if fmt == "json":
            assert {"runs_baseline", "run_spread", "judged_on"} <= set(json.loads(out)["rows"][0])
        elif fmt == "junit":
            assert int(ET.fromstring(out.split("\n", 1)[1]).get("failures")) > 0
        else:
            assert out.startswith("### ") and "| WORSE |" in out
    code, out, _ = cli(capsys, "compare", runs, cur)
    assert code == 1 and "WORSE" in out


def test_calibrate_names_cases_and_leaves_a_noisy_one_ungated(capsys, base, tmp_path):
    # the triad case wanders 40 % between runs, the copy case 0.4 %
    levels = [(1.0, 1.0), (1.002, 1.4), (0.998, 1.0)]
    runs = tmp_path / "results" / "t"
    runs.mkdir(parents=True)
    for i, (copy_k, triad_k) in enumerate(levels):
        copy_run(base, runs, f"2099010{i + 1}T000000Z-00000{i}",
                 lambda df, c=copy_k, t=triad_k: scaled(df, lambda r: c if "copy" in r["case"] else t))
    out = tmp_path / "t.toml"
    code, text, err = cli(capsys, "calibrate", runs, "--out", out)
    assert code == 0, err
    th = thresholds.load(out)
    assert not th.suites
    copy_case = next(c for (_, c) in th.cases if "copy" in c)
    assert set(th.cases[("elementwise", copy_case)].values()) == {0.01}  # not widened by triad's noise
    (triad_key,) = [k for k in th.ungated if "triad" in k[1]]
    assert all(v.startswith("not gated: run-to-run spread 40%") for v in th.ungated[triad_key].values())
    assert "not gated" in text
    # compare reads it: a 30 % drop of the ungated case is not WORSE, a 5 % drop of the gated one is
    last = sorted(runs.iterdir())[-1]
    cur = copy_run(last, tmp_path, "20990201T000000Z-0000ff",
                   lambda df: scaled(df, lambda r: worse_by(0.05)(r) if "copy" in r["case"] else worse_by(0.3)(r)))
    code, doc = doc_of(capsys, last, cur, "--thresholds", out)
    assert code == 1
    triad = [r for r in compared(doc) if "triad" in r["case"]]
    assert triad and all(r["verdict"] == UNKNOWN and r["note"].startswith("not gated") for r in triad)
    assert {r["verdict"] for r in compared(doc) if "copy" in r["case"]} == {WORSE}


def test_an_older_per_suite_thresholds_file_still_loads(tmp_path):
    f = tmp_path / "old.toml"
    f.write_text("[default]\nthreshold = 0.05\n\n[launch]\nthreshold = 0.99  # spread 49.5% at measure=...\n"
                 '\n[copy]\nbandwidth = 0.2\n\n[copy."memory=pinned"]\nbandwidth = 0.02\n')
    th = thresholds.load(f)
    assert th.for_row("launch", "time", "measure=host_launch") == 0.99
    assert th.for_row("copy", "bandwidth", "memory=pageable") == 0.2
    assert th.for_row("copy", "bandwidth", "memory=pinned") == 0.02  # a case's own wins
    assert thresholds.parse(thresholds.loads(thresholds.dumps(th)), "again").as_dict()["cases"] == \
        {"copy/memory=pinned": {"bandwidth": 0.02}}


def test_the_passes_see_both_sides_run_metadata(base, tmp_path):
    df = results.load(base)
    suite, cases = str(df["suite"].iloc[0]), sorted(set(df["case"]))
    cur = copy_run(base, tmp_path, "20990102T000000Z-00000b", lambda df: scaled(df, worse_by(0.3)))
    assert report.build(base, cur).exit_code == 1
    # the same run, as one that shared its GPU during that case: named, not blamed
    shared = copy_run(base, tmp_path, "20990103T000000Z-00000c", lambda df: scaled(df, worse_by(0.3)),
                      meta=lambda m: m.update(contention={"contended": "pid 4321 (python3)",
                                                          "cases": {suite: cases}}))
    rep = report.build(base, shared)
    assert rep.exit_code == 0 and set(rep.rows["verdict"]) == {UNKNOWN}
    assert all("current run shared the GPU with pid 4321 (python3)" in n for n in rep.rows["note"])
    # a baseline that shared its GPU excuses tonight's WORSE the same way
    shared_base = copy_run(base, tmp_path, "20990101T000000Z-00000a",
                           meta=lambda m: m.update(contention={"contended": "pid 99 (x)", "cases": {suite: cases}}))
    rep = report.build(shared_base, cur)
    assert rep.exit_code == 0 and all("baseline run shared the GPU with pid 99 (x)" in n for n in rep.rows["note"])


def test_an_older_run_directory_loads_and_compares(capsys, base, tmp_path):
    """A schema-2 table (no host_us/host_bound), no timing_method, against today's run."""
    old = copy_run(base, tmp_path, "20990101T000000Z-0000o1")
    for table in old.glob("*.parquet"):
        t = pq.read_table(table)
        t = t.drop_columns([c for c in ("host_us", "host_bound") if c in t.column_names])
        meta = dict(t.schema.metadata)
        info = json.loads(meta[results.META_KEY])
        info["schema_version"] = 2
        meta[results.META_KEY] = json.dumps(info).encode()
        pq.write_table(pa.Table.from_batches(t.to_batches(), t.schema.with_metadata(meta)), table)
    assert "host_bound" not in pq.read_table(next(old.glob("*.parquet"))).column_names
    code, doc = doc_of(capsys, old, base)
    assert code == 0 and {r["verdict"] for r in compared(doc)} == {"SAME"}
