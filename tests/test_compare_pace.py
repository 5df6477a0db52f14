"""Host-timed figures judged at the baseline's host pace (gpubench.compare.pace; the probe: gpubench.machine.host_pace).

The nights are synthetic quick-set nights (tests/synthetic_nights.py) whose host-timed figures follow a host pace
drawn per process, as the lent hosts' do (results/reference/h200/host-pace-20261128/); and real runs of the fake
backend whose host runs slower in some processes (GPUBENCH_FAKE_HOST_PACE)."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest
from synthetic_nights import make_nights
from test_compare_helpers import cli

from gpubench.timing import engine
from gpubench.run import rows
from gpubench import results
from gpubench.backends.fake import FAKE_PACE_S, FakeBackend
from gpubench.compare import pace
from gpubench.suite import Method, Workload

HOST_LAUNCH = "measure=host_launch,api=torch,nodes=1"


def _paced(sd: float, slope: float = 1.0, fixed: dict[int, float] | None = None):
    """An ``alter`` for make_nights: each process of each host-timed row draws a host pace (µs, lognormal with
    ``sd``), its samples move as pace**slope, and every sample carries its process's pace. ``fixed``: night ->
    the pace of all its processes."""

    def alter(k: int, _meta: dict, tables: dict[str, pd.DataFrame]) -> None:
        rng = np.random.default_rng([99, k])
        for name, df in tables.items():
            paces, samples = [], []
            for r in df.to_dict("records"):
                s = list(r["samples"] or [])
                if not s or not str(r.get("timing_method") or "").startswith("host"):
                    paces.append([])
                    samples.append(s)
                    continue
                lab = list(r.get("sample_process") or []) or [0] * len(s)
                # The template night's processes read two levels of their own (its host's moments): one level
                # for all, which the pace drawn here then moves.
                level = {p: float(np.median([v for v, q in zip(s, lab) if q == p])) for p in set(lab)}
                per = {p: (fixed[k] if fixed and k in fixed else 100.0 * math.exp(rng.normal(0.0, sd)))
                       for p in set(lab)}
                paces.append([per[p] for p in lab])
                samples.append([v * level[0] / level[p] * (per[p] / 100.0) ** slope for v, p in zip(s, lab)])
            df["samples"], df["host_pace"] = samples, paces
            df["value"] = [float(np.median(s)) if s else v for s, v in zip(samples, df["value"])]
            tables[name] = df

    return alter


def _rows(capsys, lab, tonight, *more):
    code, out, err = cli(capsys, "compare", lab, tonight, "--no-record", "--format", "json", *more)
    assert code in (0, 1), err
    doc = json.loads(out)
    return code, doc, {(r["case"], r["metric"]): r for r in doc["rows"] if r["suite"] == "launch"}


def test_a_host_s_pace_no_longer_blinds_the_gate_to_the_figures_it_sets(capsys, tmp_path):
    runs = make_nights(tmp_path / "lab", 10, host_sd=0.01, alter=_paced(0.25))
    code, doc, paced = _rows(capsys, runs[0].parent, runs[-1])
    code_raw, doc_raw, raw = _rows(capsys, runs[0].parent, runs[-1], "--no-host-pace")
    launch = paced[(HOST_LAUNCH, "time")]
    assert launch["catches"] is not None and launch["catches"] <= 0.10, launch
    assert raw[(HOST_LAUNCH, "time")]["catches"] is None or raw[(HOST_LAUNCH, "time")]["catches"] > 0.25
    assert code == 0 and code_raw == 0
    assert doc["sensitivity"]["host"]["within_goal"] > doc_raw["sensitivity"]["host"]["within_goal"]
    assert any(n.startswith("host pace: ") for n in doc["notes"]), doc["notes"]
    assert not any(n.startswith("host pace: ") for n in doc_raw["notes"])


def test_a_slower_launch_on_a_slow_host_is_worse_and_a_slow_host_alone_is_not(capsys, tmp_path):
    lab = tmp_path / "lab"
    runs = make_nights(lab, 9, host_sd=0.01, alter=_paced(0.25))
    # Tonight the host runs 40 % slower in every process and the launch itself costs 30 % more.
    slow = make_nights(lab, 1, first=9, host_sd=0.01, slow={"host_launch": 1.3},
                       alter=_paced(0.25, fixed={9: 140.0}))
    code, _, rows = _rows(capsys, runs[0].parent, slow[-1])
    assert code == 1 and rows[(HOST_LAUNCH, "time")]["verdict"] == "WORSE", rows[(HOST_LAUNCH, "time")]
    assert 0.2 < rows[(HOST_LAUNCH, "time")]["change"] < 0.4
    code_raw, _, raw = _rows(capsys, runs[0].parent, slow[-1], "--no-host-pace")
    assert raw[(HOST_LAUNCH, "time")]["verdict"] != "WORSE"  # as measured, within the host's own spread
    # The slow host alone (nothing else slower) is no regression.
    other = tmp_path / "other"
    make_nights(other, 9, host_sd=0.01, alter=_paced(0.25))
    alone = make_nights(other, 1, first=9, host_sd=0.01, alter=_paced(0.25, fixed={9: 140.0}))
    code, doc, rows = _rows(capsys, other, alone[-1])
    assert code == 0 and rows[(HOST_LAUNCH, "time")]["verdict"] == "SAME", rows[(HOST_LAUNCH, "time")]
    assert any("in 140 µs" in n for n in doc["notes"] if n.startswith("host pace: ")), doc["notes"]


def test_tables_without_a_pace_are_judged_as_measured(capsys, tmp_path):
    runs = make_nights(tmp_path / "lab", 8)  # the template is a schema-6 night: no sample carries a pace
    _, doc, rows = _rows(capsys, runs[0].parent, runs[-1])
    _, doc_raw, raw = _rows(capsys, runs[0].parent, runs[-1], "--no-host-pace")
    assert rows == raw
    assert not any(n.startswith("host pace: ") for n in doc["notes"])


def _points(paces, values, key=("launch", "c", "time")):
    n = len(paces)
    return pd.DataFrame({"suite": key[0], "case": key[1], "metric": key[2], "status": "ok",
                         "samples": [[v] for v in values], "host_pace": [[p] for p in paces],
                         "sample_process": [[] for _ in range(n)], "value": values})


def test_the_line_is_the_baseline_s_and_a_stray_point_does_not_tilt_it():
    rng = np.random.default_rng(3)
    paces = 100 * np.exp(rng.normal(0, 0.3, 12))
    values = 8.0 * (paces / 100) ** 0.6
    values[0] *= 3  # one stray process
    (line,) = pace.lines([_points(paces, values)]).values()
    assert line.slope == pytest.approx(0.6, abs=0.05)
    assert line.pace == pytest.approx(float(np.exp(np.median(np.log(paces)))))
    moved = pace.apply(_points([140.0], [8.0 * 1.4 ** 0.6]), {("launch", "c", "time"): line})
    assert moved["samples"][0][0] == pytest.approx(8.0 * (line.pace / 100) ** 0.6, rel=0.02)
    assert moved["value"][0] == moved["samples"][0][0]


def test_no_line_from_too_few_points_a_steady_pace_or_a_slope_past_the_limit():
    paces = 100 * np.exp(np.linspace(-0.3, 0.3, 12))
    assert pace.lines([_points(paces[: pace.MIN_POINTS - 1], paces[: pace.MIN_POINTS - 1])]) == {}
    steady = np.full(12, 100.0) * (1 + np.linspace(0, 0.01, 12))
    assert pace.lines([_points(steady, np.linspace(1, 2, 12))]) == {}
    assert pace.lines([_points(paces, (paces / 100) ** 5)]) == {}
    assert pace.lines([_points(paces, (paces / 100) ** 2)]) != {}
    # a figure the pace does not move: its own noise, unrelated to the pace, keeps its samples as they are
    noise = np.random.default_rng(5).permutation(paces / 100)
    assert pace.lines([_points(paces, noise)]) == {}


def test_the_engine_takes_the_host_s_pace_before_each_host_timed_sample_only():
    host = Workload(run=lambda x: x, make_inputs=lambda: 0, method=Method(timing="host"))
    device = Workload(run=lambda x: x, make_inputs=lambda: 0)
    fake = FakeBackend()
    fake.pace_level = 2.0
    m = engine.measure(host, fake, engine.QUICK)
    assert len(m.host_pace_s) == len(m.samples_s) > 0
    assert m.host_pace_s == [pytest.approx(2 * FAKE_PACE_S)] * len(m.samples_s)
    assert engine.measure(device, FakeBackend(), engine.QUICK).host_pace_s == []
    # a device-timed workload whose time is the host's (an eager chain) asks for it: one per sample as well
    paced = engine.measure(Workload(run=lambda x: x, make_inputs=lambda: 0, method=Method(paced=True)), fake,
                           engine.QUICK)
    assert len(paced.host_pace_s) == len(paced.samples_s) > 0
    assert paced.host_pace_s == [pytest.approx(2 * FAKE_PACE_S)] * len(paced.samples_s)


def _fake_launch(capsys, monkeypatch, tmp_path, paces: str, measures: str) -> pd.DataFrame:
    """The table of a quick fake launch run of these measures, each process's host at these paces."""
    monkeypatch.setenv("GPUBENCH_FAKE_HOST_PACE", paces)
    code, _, err = cli(capsys, "run", "--suite", "launch", "--backend", "fake", "--quick", "--filter",
                       f"measure=({measures})", "--out", tmp_path, "--cluster", "t")
    assert code == 0, err[-2000:]
    (run,) = (tmp_path / "t").iterdir()
    return results.load(run)


def _paces_by_process(row) -> dict[int, set[float]]:
    return {p: {round(v, 6) for v, q in zip(row["host_pace"], row["sample_process"]) if q == p} for p in range(3)}


def test_the_eager_chain_carries_the_host_s_pace_and_the_held_cases_do_not(capsys, monkeypatch, tmp_path):
    df = _fake_launch(capsys, monkeypatch, tmp_path, "1,2,1", "chain_eager|gpu_gap|host_launch")
    df = df[(df["metric"] == "time") & (df["status"] == "ok")]
    chain = df[df["measure"] == "chain_eager"].iloc[0]
    assert chain["timing_method"] == "device events" and chain["processes"] == 3
    assert len(chain["host_pace"]) == len(chain["samples"]) > 0
    by = _paces_by_process(chain)
    assert by == {0: {100.0}, 1: {200.0}, 2: {100.0}}  # each process's own pace, taken at its batches
    gaps = df[df["measure"] == "gpu_gap"]
    assert all(len(p) == 0 for p in gaps["host_pace"])  # held on the device: none
    # but measured in every process: each draws one of two levels (results/reference/h200/aa-series-20261129)
    assert list(gaps["processes"]) == [3] * len(gaps) > [] and all(set(q) == {0, 1, 2} for q in gaps["sample_process"])


def test_a_figure_derived_from_paced_parents_carries_their_pace_per_process(capsys, monkeypatch, tmp_path):
    df = _fake_launch(capsys, monkeypatch, tmp_path, "1,3,1", "chain_eager|chain_graph|graph_launch|graph_replay")
    rows = {m: df[(df["measure"] == m) & (df["status"] == "ok")].iloc[0]
            for m in ("chain_speedup", "graph_launch_per_node", "graph_replay_fixed")}
    # From the eager chain's and the graph launches' paces. (Not the launch fit's fixed cost: the fake's launches
    # have none, so each process's fit reads 0 within rounding, one figure for all, which carries no process.)
    for m in ("chain_speedup", "graph_launch_per_node"):
        r = rows[m]
        assert r["stop"] == "derived" and len(r["host_pace"]) == len(r["samples"]) > 0, m
        by = _paces_by_process(r)
        assert by == {0: {100.0}, 1: {300.0}, 2: {100.0}}, (m, by)
    assert len(rows["graph_replay_fixed"]["host_pace"]) == 0  # its parents are held on the device: no pace
    # The one-node replay is measured in every process (results/reference/h200/per-process-20261129), the larger
    # ones in the first; the fit over them is still made (the fake's replay costs the same per node at any size)
    replays = df[(df["measure"] == "graph_replay") & (df["metric"] == "time") & (df["status"] == "ok")]
    assert dict(zip(replays["nodes"], replays["processes"])) == {1: 3, 10: 1, 100: 1, 1000: 1}
    per_node = df[(df["measure"] == "graph_replay_per_node") & (df["metric"] == "time")]["value"].iloc[0]
    assert per_node == pytest.approx(replays[replays["nodes"] == 1]["value"].iloc[0], rel=1e-6)


def test_each_process_s_samples_carry_its_own_host_s_pace(capsys, monkeypatch, tmp_path):
    # A pageable copy is host-timed and measured in three processes; the second one's host runs twice as slow.
    monkeypatch.setenv("GPUBENCH_FAKE_HOST_PACE", "1,2,1")
    code, _, err = cli(capsys, "run", "--suite", "copy", "--backend", "fake", "--quick", "--sizes", "64K",
                       "--filter", "direction=h2d,memory=(pageable|pinned)", "--out", tmp_path, "--cluster", "t")
    assert code == 0, err[-2000:]
    (run,) = (tmp_path / "t").iterdir()
    df = results.load(run)
    paged = df[(df["memory"] == "pageable") & (df["metric"] == "time")].iloc[0]
    pinned = df[(df["memory"] == "pinned") & (df["metric"] == "time")].iloc[0]
    assert paged["processes"] == 3 and len(paged["host_pace"]) == len(paged["samples"])
    by = {p: {round(v, 6) for v, q in zip(paged["host_pace"], paged["sample_process"]) if q == p} for p in range(3)}
    assert by == {0: {100.0}, 1: {200.0}, 2: {100.0}}  # µs: FAKE_PACE_S at each process's pace
    slow = [s for s, q in zip(paged["samples"], paged["sample_process"]) if q == 1]
    fast = [s for s, q in zip(paged["samples"], paged["sample_process"]) if q == 0]
    assert min(slow) > 1.9 * max(fast)  # and its host-timed copy took twice as long
    assert len(pinned["host_pace"]) == 0  # timed on the device: no pace taken
    one = rows.one_process(paged.to_dict(), 1)
    assert {round(v, 6) for v in one["host_pace"]} == {200.0} and len(one["host_pace"]) == len(one["samples"])


def test_synthetic_nights_can_carry_the_host_s_pace(capsys, tmp_path):
    # benchmarks/cost.py times compare on such nights: they must be nights whose host-timed figures it moves
    runs = make_nights(tmp_path / "lab", 7, paced=True)
    df = results.load(runs[-1])
    timed = df[df["timing_method"].astype(str).str.startswith("host") & (df["status"] == "ok")]
    other = df[~df["timing_method"].astype(str).str.startswith("host")]
    assert len(timed) and all(len(p) == len(s) > 0 for p, s in zip(timed["host_pace"], timed["samples"]))
    assert all(len(p) == 0 for p in other["host_pace"])
    _, doc, _ = _rows(capsys, runs[0].parent, runs[-1])
    assert any(n.startswith("host pace: ") for n in doc["notes"]), doc["notes"]


def test_calibrate_takes_the_spread_of_a_host_figure_at_the_runs_host_pace(capsys, tmp_path):
    from gpubench.compare import thresholds

    make_nights(tmp_path / "lab", 8, host_sd=0.01, alter=_paced(0.25))
    got = {}
    for flag in ((), ("--no-host-pace",)):
        out = tmp_path / f"th{len(flag)}.toml"
        code, text, err = cli(capsys, "calibrate", tmp_path / "lab", "--out", out, *flag)
        assert code == 0, err
        assert ("host pace: the spread of" in text) == (not flag), text
        th = thresholds.load(out)
        got[bool(flag)] = th.cases.get(("launch", HOST_LAUNCH), {}).get("time")
    assert got[False] is not None and got[False] <= 0.10, got  # at the pace: gated, and tight
    assert got[True] is None or got[True] > 2 * got[False], got  # as measured: the host's moments
