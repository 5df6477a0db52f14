"""Every comparison states, per figure, the smallest change it would call WORSE today (its minimum detectable
effect, gpubench.compare.sensitivity), and counts the figures it is blind to and why."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from synthetic_nights import make_nights
from test_compare_helpers import cli

from gpubench.compare import sensitivity
from gpubench.compare.verdict import BETTER, MIN_RUNS, SAME, UNKNOWN, WORSE, judge

RNG = np.random.default_rng(7)
RUNS = [100.0, 101.0, 99.0, 100.5, 100.0]  # five run medians: a 2 % range


def window(scale: float = 1.0, n: int = 10) -> tuple[list[float], list[float]]:
    """(pooled samples, run medians) of a window of the five RUNS, each ``n`` tight samples."""
    samples = [v * scale * (1 + RNG.normal(0, 0.001)) for v in RUNS for _ in range(n)]
    return samples, [v * scale for v in RUNS]


def at(change: float, **kw) -> dict:
    base, runs = window()
    cur = [100.0 * (1 + change) * (1 + RNG.normal(0, 0.001)) for _ in range(10)]
    return judge(base, cur, "lower", 0.03, 0.01, baseline_runs=runs, window=True, **kw)


def test_a_window_catches_its_spread_times_its_factor_and_judges_so():
    row = at(0.0)
    assert row["catches"] == pytest.approx(2.5 * 0.02) and row["catches_limit"] == sensitivity.SPREAD
    # what it says it catches, it calls WORSE; a little less, it does not
    assert at(row["catches"] * 1.02)["verdict"] == WORSE
    assert at(row["catches"] * 0.98)["verdict"] in (UNKNOWN, SAME)
    assert at(-row["catches"] * 1.02)["verdict"] == BETTER  # the rule is the same for either direction


def test_the_threshold_is_the_floor_of_what_a_quiet_window_catches():
    base, runs = window()
    row = judge(base, base[:10], "lower", 0.08, 0.01, baseline_runs=runs, window=True)
    assert row["catches"] == 0.08 and row["catches_limit"] == sensitivity.THRESHOLD


def test_figures_the_gate_cannot_judge_are_blind_and_say_why():
    base, runs = window()
    filling = judge(base[:20], base[:10], "lower", 0.05, 0.01, baseline_runs=runs[:2], window=True)
    assert math.isinf(filling["catches"]) and filling["catches_limit"] == f"window still filling (2 of {MIN_RUNS} runs)"
    host = judge(base[:10], base[10:20], "lower", 0.05, 0.01, moves="host-timed")
    assert math.isinf(host["catches"]) and host["catches_limit"].startswith("set by the host, too few runs")
    few = judge([1.0, 1.01, 0.99], [1.0, 1.02, 0.98], "lower", 0.05, 0.01)  # 3 vs 3 samples: p ≥ 0.1
    assert math.isinf(few["catches"]) and few["catches_limit"].startswith("too few samples")
    assert sensitivity.text(few["catches"]) == "blind" and sensitivity.text(0.042) == "≥ 4.2%"


def test_two_single_runs_catch_what_their_samples_can_show():
    tight = [100 * (1 + RNG.normal(0, 0.002)) for _ in range(20)]
    wide = [100 * (1 + RNG.normal(0, 0.05)) for _ in range(20)]
    assert judge(tight, tight, "lower", 0.05, 0.01)["catches"] == 0.05
    row = judge(wide, wide, "lower", 0.05, 0.01)
    assert row["catches_limit"] == sensitivity.SAMPLES and 0.05 < row["catches"] < 0.10
    assert row["catches"] == pytest.approx(sensitivity.sample_mde(np.std(wide, ddof=1) / np.mean(wide), 20, 20, 0.01))


def test_summary_counts_by_kind_against_the_goals():
    rows = [{"catches": 0.03, "set_by_host": ""}, {"catches": 0.07, "set_by_host": ""},
            {"catches": 0.12, "set_by_host": "host-timed"}, {"catches": math.inf, "set_by_host": "host-timed",
                                                              "catches_limit": "run-to-run spread"},
            {"catches": math.nan, "set_by_host": ""}]
    s = sensitivity.summary(rows)
    assert s["figures"] == 4 and s["blind"] == 1 and s["why_blind"] == {"run-to-run spread": 1}
    assert (s["gpu"]["within_goal"], s["gpu"]["figures"], s["gpu"]["worst"]) == (1, 2, 0.07)
    assert (s["host"]["within_goal"], s["host"]["figures"]) == (1, 2)
    assert sensitivity.line(rows) == ("catches: 1 of 2 GPU-timed figure(s) to 5% or less (worst 7.0%); 1 of 2 "
                                      "host-set figure(s) to 15% or less (worst blind); blind (> 25%): 1 (1 "
                                      "run-to-run spread)")


@pytest.fixture(scope="module")
def nights(tmp_path_factory):
    """Nine quick-set nights; the last with the host-timed launches 30 % slower and the GPU's GEMMs 10 %."""
    lab = tmp_path_factory.mktemp("nights") / "lab"
    return make_nights(lab, 9, slow={r"launch measure=host_launch": 1.3, r"gemm .* throughput": 1.1}, slow_from=8)


def test_every_output_states_what_each_figure_catches(capsys, nights, tmp_path):
    lab, tonight = nights[0].parent, nights[-1]
    md, js = tmp_path / "s.md", tmp_path / "c.json"
    code, out, err = cli(capsys, "compare", lab, tonight, "--no-record", "--out", md, "--out", js)
    assert code == 1, err  # the GEMMs, which the GPU times: caught
    doc = json.loads(js.read_text())
    rows = {(r["suite"], r["case"], r["metric"]): r for r in doc["rows"]}
    gemm = [r for k, r in rows.items() if k[0] == "gemm" and k[2] == "throughput"]
    assert gemm and all(r["verdict"] == WORSE and r["catches"] <= sensitivity.GOAL_GPU for r in gemm)
    launch = [r for k, r in rows.items() if k[1].startswith("measure=host_launch")]
    # the synthetic host-timed launches spread as an H100's did: a 30 % slowdown is not caught, and says so
    assert launch and all(r["verdict"] != WORSE for r in launch)
    assert all(r["catches"] is None or r["catches"] > 0.30 for r in launch)  # None: blind (inf in JSON)
    s = doc["sensitivity"]
    assert s["figures"] == sum(r["status"] == "compared" for r in doc["rows"]) and s["blind"] >= len(launch)
    assert "catches: " in " ".join(out.split()) and "blind (> 25%)" in " ".join(out.split())
    head = next(ln for ln in md.read_text().splitlines() if ln.startswith("| verdict"))
    assert "| threshold | catches |" in head


def test_the_sensitivity_format_lists_every_figure_least_sensitive_first(capsys, nights):
    lab = nights[0].parent
    code, out, err = cli(capsys, "compare", lab, nights[-2], "--no-record", "--format", "sensitivity")
    assert code == 0, err
    table = [ln for ln in out.splitlines() if ln.startswith("| ") and not ln.startswith("| suite")]
    assert len(table) == 147  # every figure of the quick night compared
    caught = [ln.split(" | ")[7] for ln in table]
    blind = [c == "blind" for c in caught]
    assert blind == sorted(blind, reverse=True)  # the blind ones first
