"""The rule on a window's run medians (gpubench.compare.margin.window_margin), for figures measured at the host's
pace in several processes a run: each run's median of all its processes is one draw, so a window whose processes
spread widely while its runs agree still sees a move of a few percent."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from synthetic_nights import make_nights
from test_compare_helpers import cli

from gpubench.compare import margin as margins, sensitivity, verdict
from gpubench.compare.pace import AT_PACE
from gpubench.compare.pool import pool
from gpubench.compare.thresholds import Thresholds
from gpubench.compare.margin import RUN_MEDIANS_FROM, RUN_MEDIANS_HISTORY
from gpubench.compare.verdict import SAME, UNKNOWN, WORSE, judge

# Six processes a run whose levels spread ±30 % around the run's (the window's most distant process sets the
# processes' range), runs within ±1 % of each other.
LEVELS = (0.70, 0.85, 0.97, 1.03, 1.15, 1.30)
SHIFTS = (1.0, 1.01, 0.99, 1.005, 0.995)


def _run(rng, shift: float, levels=LEVELS, n: int = 20) -> tuple[list[float], list[int]]:
    """One run's samples and their process labels: each process ``n`` samples at its level × ``shift``."""
    samples, labels = [], []
    for p, level in enumerate(levels):
        samples += [shift * level * (1 + 0.002 * e) for e in rng.standard_normal(n)]
        labels += [p] * n
    return samples, labels


def _window(rng, levels=LEVELS):
    runs = [_run(rng, s, levels) for s in SHIFTS]
    samples = [v for s, _ in runs for v in s]
    procs = [float(np.median([v for v, q in zip(s, lab) if q == p])) for s, lab in runs for p in sorted(set(lab))]
    medians = [float(np.median(s)) for s, _ in runs]
    return samples, procs, medians


def _judge(rng, tonight: float, processes: int = 6, **kw):
    levels = LEVELS[::6 // processes]
    base, procs, medians = _window(rng, levels)
    cur, _ = _run(rng, tonight, levels)
    # the directory's history: 10 runs, the window's 5 and 5 older ones at the same levels
    args = dict(baseline_runs=procs, run_count=5, window=True, moves="host-timed", current_processes=processes,
                run_medians=medians, history_runs=procs * 2, history_count=10, history_medians=medians * 2)
    return judge(base, cur, "lower", 0.05, **{**args, **kw}), medians


def test_runs_of_six_processes_that_agree_catch_a_move_their_processes_spread_hides():
    rng = np.random.default_rng(1)
    r, medians = _judge(rng, 1.10)
    assert r["verdict"] == WORSE, r
    assert "the medians of 5 runs of 6 processes × 2.5" in r["note"], r["note"]
    spread = (max(medians) - min(medians)) / float(np.median(medians))
    margin = margins.window_margin(list(LEVELS) * 5, n_runs=5, pooled=6, moves="host-timed", history_runs=[],
                                   history_count=None, run_medians=medians, history_medians=medians * 2)
    assert margin.limit == sensitivity.RUN_MEDIANS and margin.value == pytest.approx(2.5 * spread, rel=1e-9)
    # what it catches: that margin, or the rank test's reach on samples that hold the processes' ±30 %
    assert max(0.05, margin.value) <= r["catches"] < 0.08, r
    assert r["catches_limit"] in (sensitivity.RUN_MEDIANS, sensitivity.SAMPLES, sensitivity.THRESHOLD)
    # The same window judged on its processes alone (the pooled factor, 0.55 × a 60 % range): blind.
    r, _ = _judge(np.random.default_rng(1), 1.10, run_medians=[], history_medians=[])
    assert r["verdict"] == UNKNOWN and r["catches_limit"] == sensitivity.SPREAD and r["catches"] > 0.25, r


def test_an_unchanged_run_of_six_processes_is_not_worse():
    for seed in range(5):
        r, _ = _judge(np.random.default_rng(10 + seed), 1.0)
        assert r["verdict"] == SAME, r
    # A move within the runs' own spread × the factor stays UNKNOWN.
    r, _ = _judge(np.random.default_rng(2), 1.0, run_medians=[1.0, 1.04, 0.97, 1.02, 0.99],
                  history_medians=[1.0, 1.04, 0.97, 1.02, 0.99] * 2)
    assert r["catches_limit"] == sensitivity.RUN_MEDIANS and r["catches"] == pytest.approx(2.5 * 0.07 / 1.0, rel=1e-6)
    r, _ = _judge(np.random.default_rng(2), 1.10, run_medians=[1.0, 1.04, 0.97, 1.02, 0.99],
                  history_medians=[1.0, 1.04, 0.97, 1.02, 0.99] * 2)
    assert r["verdict"] == UNKNOWN and "within the run-to-run spread" in r["note"], r


def test_the_rule_serves_only_paced_runs_of_enough_processes():
    assert RUN_MEDIANS_FROM == 6
    # Three processes a run (the run median is one of three): the processes' rule alone.
    r, _ = _judge(np.random.default_rng(3), 1.10, processes=3)
    assert r["catches_limit"] != sensitivity.RUN_MEDIANS, r
    # Not moved to the host's pace (current_processes 1 then), or not a figure the host times: neither.
    for kw in (dict(current_processes=1), dict(moves=""), dict(moves="pinned host buffers")):
        r, _ = _judge(np.random.default_rng(3), 1.10, **kw)
        assert r["catches_limit"] != sensitivity.RUN_MEDIANS and r["verdict"] == UNKNOWN, (kw, r)
    # A window of whose runs one lacks a median (4 medians of 5 runs): the processes' rule.
    r, _ = _judge(np.random.default_rng(3), 1.10, run_medians=[1.0, 1.01, 0.99, 1.0])
    assert r["catches_limit"] != sensitivity.RUN_MEDIANS, r
    # A directory of fewer runs than RUN_MEDIANS_HISTORY (a window of 5 whose medians happen to agree says
    # nothing of the host's drift): the processes' rule, blind here.
    assert RUN_MEDIANS_HISTORY == 10
    _, _, medians = _window(np.random.default_rng(3))
    for n in (5, 9):
        r, _ = _judge(np.random.default_rng(3), 1.10, history_medians=(medians * 2)[:n])
        assert r["catches_limit"] != sensitivity.RUN_MEDIANS and r["verdict"] == UNKNOWN, (n, r)


def test_a_drifting_history_of_run_medians_widens_the_rule():
    rng = np.random.default_rng(4)
    _, procs, medians = _window(rng)
    drift = [0.90, 1.12, 0.95, 1.08, 1.0, 0.93, 1.1] + medians  # 12 runs: the single-draw factor for 12 is 1.25
    r, _ = _judge(np.random.default_rng(4), 1.10, history_medians=drift, history_runs=procs * 2 + procs[:12],
                  history_count=12)
    assert r["catches_limit"] == sensitivity.RUN_MEDIANS, r
    assert r["catches"] == pytest.approx(1.25 * (max(drift) - min(drift)) / float(np.median(drift)), rel=1e-6)
    assert r["verdict"] == UNKNOWN and "the medians of the directory's 12 runs × 1.25" in r["note"], r


def _rows(run: str, samples: list[float], labels: list[int], at_pace: bool = True) -> dict:
    return {"suite": "launch", "case": "measure=host_launch,api=torch,nodes=1", "metric": "time", "unit": "us",
            "better": "lower", "status": "ok", "suite_version": 1, "run_id": run, "samples": samples,
            "sample_process": labels, "value": float(np.median(samples)), "timing_method": "host clock",
            AT_PACE: at_pace}


def test_pooling_keeps_each_run_s_median_and_compare_judges_on_them():
    rng = np.random.default_rng(5)
    window = [_rows(f"2026-11-30T00:0{i}", *_run(rng, s)) for i, s in enumerate(SHIFTS)]
    # older runs: one of one process (its one value is its median), then four of six
    single = _rows("2026-11-29T22:00", [1.0, 1.02, 0.98], [0, 0, 0])
    older = [single, *(_rows(f"2026-11-29T23:0{i}", *_run(rng, s)) for i, s in enumerate(SHIFTS[:4]))]
    base = pool(pd.DataFrame(window), history=pd.DataFrame(older))
    row = base.iloc[0]
    assert len(row["run_values"]) == 30 and row["run_count"] == 5
    want = [float(np.median(w["samples"])) for w in window]
    assert row["run_medians"] == pytest.approx(want)
    assert row["history_medians"] == pytest.approx([float(np.median(o["samples"])) for o in older] + want)
    assert row["history_count"] == 10
    tonight = pool(pd.DataFrame([_rows("2026-11-30T01:00", *_run(rng, 1.10))]))
    out = verdict.compare_frames(base, tonight, Thresholds(), window=True)
    got = out.iloc[0]
    assert got["verdict"] == WORSE and "runs of 6 processes" in got["note"], got.to_dict()
    assert got["catches"] < 0.08, got.to_dict()
    # Tonight not moved to the pace: one draw of a process against the processes' range, blind.
    tonight = pool(pd.DataFrame([_rows("2026-11-30T01:00", *_run(rng, 1.10), at_pace=False)]))
    got = verdict.compare_frames(base, tonight, Thresholds(), window=True).iloc[0]
    assert got["verdict"] == UNKNOWN and got["catches"] > 0.25, got.to_dict()


def _six_processes(k: int, _meta: dict, tables: dict) -> None:
    """An ``alter`` for make_nights: every host-timed figure measured in several processes is measured in six, at
    LEVELS around the night's level (the processes spread ±30 %, the runs agree), each process at a host pace of its
    own that moves its samples, as the lent hosts' do (gpubench.compare.pace then moves them back). 40 samples a
    process: the rank test on samples that hold the processes' ±30 % needs that many to see 10 % (with 8 a process
    it read p = 0.015 and said it catches 12 %: its samples, not the runs, set the limit then)."""
    rng = np.random.default_rng([7, k])
    for name, df in tables.items():
        samples, labels, paces = [], [], []
        for r in df.to_dict("records"):
            s, lab = list(r["samples"] or []), list(r.get("sample_process") or [])
            if not s or len(set(lab)) < 2 or not str(r.get("timing_method") or "").startswith("host"):
                samples.append(s), labels.append(lab), paces.append(list(r.get("host_pace") or []))
                continue
            level = float(np.median(s))
            new_s, new_l, new_p = [], [], []
            for p, lv in enumerate(rng.permutation(LEVELS)):
                pace = 100.0 * float(np.exp(rng.normal(0.0, 0.4)))
                new_s += [level * lv * pace / 100.0 * (1 + 0.002 * e) for e in rng.standard_normal(40)]
                new_l += [p] * 40
                new_p += [pace] * 40
            samples.append(new_s), labels.append(new_l), paces.append(new_p)
        df["samples"], df["sample_process"], df["host_pace"] = samples, labels, paces
        df["processes"] = [len(set(lab)) if lab else p for lab, p in zip(labels, df["processes"])]
        df["value"] = [float(np.median(s)) if s else v for s, v in zip(samples, df["value"])]
        tables[name] = df


def _host_launch(capsys, lab, tonight) -> tuple[int, dict]:
    code, out, err = cli(capsys, "compare", lab, tonight, "--no-record", "--format", "json")
    assert code in (0, 1), err
    rows = {(r["case"], r["metric"]): r for r in json.loads(out)["rows"] if r["suite"] == "launch"}
    return code, rows[("measure=host_launch,api=torch,nodes=1", "time")]


def test_a_directory_of_runs_of_six_processes_is_judged_on_its_runs_medians(capsys, tmp_path, monkeypatch):
    # Eleven nights of six processes, then a twelfth whose host launches cost 10 % more (the host's pace as before).
    lab = tmp_path / "lab"
    make_nights(lab, 11, host_sd=0.002, paced=True, alter=_six_processes)
    slow = make_nights(lab, 1, first=11, host_sd=0.002, paced=True, slow={"host_launch": 1.10},
                       alter=_six_processes)
    code, row = _host_launch(capsys, lab, slow[-1])
    assert code == 1 and row["verdict"] == WORSE and "runs of 6 processes" in row["note"], row
    assert row["catches"] < 0.08 and 0.08 < row["change"] < 0.12, row
    # Judged on the processes alone, the same night is within their ±30 %.
    monkeypatch.setattr(margins, "RUN_MEDIANS_FROM", 10**6)
    code, row = _host_launch(capsys, lab, slow[-1])
    assert row["verdict"] == UNKNOWN and row["catches"] > 0.25, row
    monkeypatch.undo()
    # An unchanged twelfth night: nothing WORSE.
    other = tmp_path / "other"
    same = make_nights(other, 12, host_sd=0.002, paced=True, alter=_six_processes)
    code, row = _host_launch(capsys, other, same[-1])
    assert code == 0 and row["verdict"] == SAME and row["catches"] < 0.08, row
