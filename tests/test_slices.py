"""A figure the host sets is sampled across each process's measuring time, in slices (gpubench.slices), and compare
judges it on the level the host reached (gpubench.compare.pool): fake backend, real worker processes, and a host
whose level follows the moment (GPUBENCH_FAKE_MOMENT_LEVELS), as an H100's host did."""

import math

import numpy as np
import pytest
from test_compare_helpers import cli

from gpubench import engine, results, slices
from gpubench.compare.pool import LEVEL_QUANTILE

# One case set per process (a pinned host-to-device copy) and one not (a device-to-device copy), small.
COPY = ["run", "--suite", "copy", "--backend", "fake", "--quick", "--sizes", "64K", "--filter",
        "direction=(h2d|d2d),memory=(pinned|device)"]


def run(capsys, monkeypatch, out, moments=None, slow=None):
    for name, value in (("GPUBENCH_FAKE_MOMENT_LEVELS", moments), ("GPUBENCH_FAKE_SLOW_CASES", slow)):
        if value is None:
            monkeypatch.delenv(name, raising=False)
        else:
            monkeypatch.setenv(name, value)
    monkeypatch.delenv("GPUBENCH_FAKE_PROCESS_LEVELS", raising=False)
    before = set(out.glob("t/*"))
    code, _, err = cli(capsys, *COPY, "--out", out, "--cluster", "t")
    assert code == 0, err[-2000:]
    (new,) = set(out.glob("t/*")) - before
    return new, err


def rows_of(run_dir):
    df = results.load(run_dir)
    return (df[(df["direction"] == "h2d") & (df["metric"] == "time")].iloc[0],
            df[(df["direction"] == "d2d") & (df["metric"] == "time")].iloc[0])


def test_each_process_samples_a_host_set_case_in_slices_and_a_device_s_case_once(capsys, monkeypatch, tmp_path):
    d, err = run(capsys, monkeypatch, tmp_path)
    h2d, d2d = rows_of(d)
    per = np.bincount(np.asarray(h2d["sample_process"]))
    first = engine.QUICK.min_samples  # the first slice as before; each later one at least LATER_MIN_SAMPLES
    assert len(per) == 3 and all(n >= first + slices.LATER * slices.LATER_MIN_SAMPLES for n in per), per
    assert h2d["n"] == len(h2d["samples"]) == per.sum()
    assert d2d["processes"] == 1 and d2d["n"] < first + slices.LATER * slices.LATER_MIN_SAMPLES
    assert f"in {slices.LATER} more slices" in err


def test_a_host_whose_level_follows_the_moment_reads_one_level_run_after_run(capsys, monkeypatch, tmp_path):
    """Two runs on hosts of other cycles: every process's first slice falls on the slow level (the moments 0-2
    of its cycle; process k begins at moment k), so the fast one is read only in the later slices; each run reads
    both levels, and the level compare judges (a time's low quantile) is the fast one in both, where the
    median is the slow one."""
    levels = []
    for phase in ("1.5,1.5,1.5,1", "1.5,1.5,1.5,1,1.5"):
        d, _ = run(capsys, monkeypatch, tmp_path / phase.replace(",", "-"), moments=phase)
        h2d, _ = rows_of(d)
        samples = np.asarray(h2d["samples"])
        fast = float(samples.min())
        assert samples.max() / fast == pytest.approx(1.5, rel=0.02)  # one run reads both levels
        level = float(np.quantile(samples, LEVEL_QUANTILE))
        assert level == pytest.approx(fast, rel=0.02) and float(np.median(samples)) > 1.4 * fast
        levels.append(level)
    assert levels[1] == pytest.approx(levels[0], rel=0.02)


def test_the_gate_catches_a_slower_host_on_its_level_and_passes_the_same_one(capsys, monkeypatch, tmp_path):
    lab = tmp_path / "lab"
    for _ in range(3):
        run(capsys, monkeypatch, lab, moments="1.5,1.5,1")
    same, _ = run(capsys, monkeypatch, tmp_path / "cur", moments="1.5,1,1.5")
    slow, _ = run(capsys, monkeypatch, tmp_path / "cur", moments="1.5,1,1.5", slow="1.3:direction=h2d")

    def verdict(run_dir):
        import json
        code, out, _ = cli(capsys, "compare", lab / "t", run_dir, "--format", "json", "--no-record")
        row = next(r for r in json.loads(out)["rows"] if r["case"].startswith("direction=h2d") and r["metric"] == "time")
        return code, row

    code, row = verdict(same)
    assert code == 0 and row["verdict"] == "SAME" and row["runs_baseline"] == 3, row
    code, row = verdict(slow)
    assert code == 1 and row["verdict"] == "WORSE" and row["change"] == pytest.approx(0.3, abs=0.03), row


def test_which_cases_are_sliced_their_cost_decides():
    rows = [{"suite": "copy", "case": "a", "metric": "time", "status": "ok", "case_s": 0.1},
            {"suite": "copy", "case": "a", "metric": "bandwidth", "status": "ok", "case_s": 0.1},
            {"suite": "copy", "case": "big", "metric": "time", "status": "ok", "case_s": slices.SLICE_COST_S * 2},
            {"suite": "copy", "case": "bad", "metric": "time", "status": "error", "case_s": 0.01},
            {"suite": "copy", "case": "nan", "metric": "time", "status": "ok", "case_s": math.nan},
            {"suite": "launch", "case": "x", "metric": "time", "status": "ok", "case_s": 0.2, "stop": "derived"}]
    cases = {"copy": ["a", "big", "bad", "nan"], "launch": ["x"]}
    assert slices.chosen(rows, cases) == {"copy": ["a"]}


def test_a_later_slice_shares_the_budget_and_is_not_checked_again():
    cfg = slices.later_config(engine.QUICK, 3)
    assert cfg.budget_s == pytest.approx(engine.QUICK.budget_s / (3 * (slices.LATER + 1)))
    assert cfg.check is False and cfg.settle_window == 1 and cfg.min_warmup_s == 0.0
    assert cfg.min_samples == min(engine.QUICK.min_samples, slices.LATER_MIN_SAMPLES)
    assert engine.QUICK.check is True and engine.FULL.check is True
