"""A host-timed figure held at its envelope's host pace (gpubench.check.envelope, gpubench.check.judge): envelopes
made from checks at several paces, the figure moved along the envelope's line and no further than its paces, a
real slowdown still caught, the retry moved from its own pace, the verdict's JSON saying what was measured."""

from __future__ import annotations

import numpy as np
import pytest

from gpubench.check import envelope
from gpubench.check.checkset import Evidence, Figure
from gpubench.check.judge import Judge
from gpubench.timing.pace_line import Line, median_pace

LAUNCH = Figure("launch", "launch", "launch", "measure=host_launch,api=torch,nodes=1", "time")
# One H200 host, 2026-11-28 (results/reference/h200/check-pace-20261128): fourteen idle checks read the launch at
# 7.0-8.3 µs with the pace probe at 54-64 µs and 10.5-11.8 µs at 93-112 µs; the line's slope was 0.69.
SLOPE, PACE, TYPICAL = 0.69, 60.0, 7.7


def _on_line(pace: float, regress: float = 1.0) -> float:
    return TYPICAL * (pace / PACE) ** SLOPE * regress


def _row(value: float, pace: float | None, n: int = 40, seed: int = 0) -> dict:
    rng = np.random.default_rng(seed)
    samples = list(value * (1 + 0.01 * rng.standard_normal(n)))
    paces = list(pace * (1 + 0.01 * rng.standard_normal(n))) if pace is not None else []
    return {"status": "ok", "value": float(np.median(samples)), "samples": samples, "host_pace": paces, "unit": "us",
            "better": "lower", "device": "Fake GPU", "device_index": 0, "case": LAUNCH.case,
            "timing_method": "host clock", "contended": "", "host_load": 0.0}


def _ev(value: float, pace: float | None, seed: int = 0) -> Evidence:
    return Evidence(LAUNCH, "gpu0", 0, None, _row(value, pace, seed=seed))


def _env(line: bool = True) -> envelope.Envelope:
    paced = {"pace": PACE, "pace_slope": SLOPE, "pace_lo": 54.0, "pace_hi": 112.0} if line else {}
    e = envelope.Entry("us", "lower", TYPICAL, round(TYPICAL * 1.1, 3), round(TYPICAL * 1.25, 3), 14, 0.024, **paced)
    return envelope.Envelope("Fake GPU", "^Fake GPU$", {"launch": e}, "test runs", "/x/fake.toml")


def test_an_envelope_of_checks_at_several_paces_is_held_at_one_pace_and_reads_back(tmp_path):
    rng = np.random.default_rng(1)
    paces = list(rng.choice([55.0, 58.0, 60.0, 95.0, 105.0, 112.0], 14))
    values = [_on_line(p) * (1 + 0.02 * rng.standard_normal()) for p in paces]
    paced = envelope.entry(values, "us", "lower", True, paces=paces)
    raw = envelope.entry(values, "us", "lower", True)
    assert paced.pace_slope == pytest.approx(SLOPE, abs=0.1) and paced.pace_lo == 55.0 and paced.pace_hi == 112.0
    assert paced.typical == pytest.approx(_on_line(paced.pace), rel=0.03)
    assert paced.spread < 0.03 < 0.15 < raw.spread and raw.line() is None  # the pace explains the spread
    # a figure the GPU times is never moved, nor one of runs without a pace
    assert envelope.entry(values, "us", "lower", False, paces=paces).line() is None
    assert envelope.entry(values, "us", "lower", True, paces=[None, *paces[1:]]).line() is None
    env = envelope.Envelope("Fake GPU", "^Fake GPU$", {"launch": paced}, "test runs")
    back = envelope.load_file(envelope.write(env, tmp_path / "e.toml")).entries["launch"]
    assert back.line() == paced.line() and back.typical == paced.typical


def test_a_slow_moment_of_the_host_passes_and_says_what_was_measured():
    slow = _on_line(105.0)  # 11.5 µs: past the fail line as measured, on the envelope's line
    (v,) = Judge(_env()).all([_ev(slow, 105.0)])
    assert v.state == "PASS", v.text
    assert v.measured == pytest.approx(slow, rel=0.01) and v.host_pace == pytest.approx(105.0, rel=0.01)
    assert v.value == pytest.approx(TYPICAL, rel=0.02)
    assert any("judged at the envelope's host pace: measured 11." in n and "105 µs against the envelope's 60" in n
               for n in v.notes), v.notes
    # the same figure without a pace, or against an envelope without a line, is judged as measured
    for judge, ev in ((Judge(_env()), _ev(slow, None)), (Judge(_env(line=False)), _ev(slow, 105.0))):
        (v,) = judge.all([ev])
        assert v.state == "FAIL" and v.measured is None and v.value == pytest.approx(slow, rel=0.01)


def test_a_slower_launch_at_the_envelopes_pace_is_still_caught():
    (v,) = Judge(_env()).all([_ev(_on_line(60.0, regress=1.3), 60.0)])
    assert v.state == "FAIL" and v.value == pytest.approx(TYPICAL * 1.3, rel=0.02)
    (v,) = Judge(_env()).all([_ev(_on_line(100.0, regress=1.15), 100.0)])
    assert v.state == "WARN", v.text


def test_the_line_is_not_followed_beyond_the_envelopes_paces():
    # a host three times slower than any the envelope saw: moved only as far as its slowest pace (112 µs)
    (v,) = Judge(_env()).all([_ev(_on_line(300.0), 300.0)])
    assert v.state == "FAIL" and v.value == pytest.approx(_on_line(300.0) * (PACE / 112.0) ** SLOPE, rel=0.02)


def test_the_retry_is_moved_from_its_own_pace():
    first = _ev(_on_line(60.0, regress=1.4), 60.0)  # a bad moment that is not the pace: FAIL candidate
    retried = _ev(_on_line(110.0), 110.0, seed=3)  # the fresh process ran on a slower host, at the line
    (v,) = Judge(_env(), retry=lambda ev: retried).all([first])
    assert v.state == "PASS" and v.retry == pytest.approx(TYPICAL, rel=0.03), v.text
    (v,) = Judge(_env(), retry=lambda ev: _ev(_on_line(110.0, regress=1.4), 110.0, seed=4)).all([first])
    assert v.state == "FAIL" and "(retry: 10." in v.text


def test_a_rows_pace_needs_every_sample_to_carry_one():
    assert median_pace([1.0, 2.0, 3.0], [50.0, 70.0, 60.0]) == 60.0
    assert median_pace([1.0, 2.0], []) is None and median_pace([1.0, 2.0], [50.0]) is None
    assert median_pace([1.0], [0.0]) is None and median_pace([], []) is None
    assert Line(0.5, 100.0, 50.0, 200.0).factor(400.0, clip=True) == pytest.approx(0.5 ** 0.5)
    assert Line(0.5, 100.0, 50.0, 200.0).factor(400.0) == pytest.approx(0.25 ** 0.5)
    assert Line(0.5, 100.0).factor(float("nan")) == 1.0


def test_a_warn_on_a_host_figure_is_measured_again_and_one_on_a_gpu_figure_is_not():
    between = _ev(_on_line(60.0, regress=1.15), 60.0)  # between the lines at the envelope's pace
    asked = []

    def retry(ev):
        asked.append(ev.figure.key)
        return _ev(_on_line(58.0), 58.0, seed=5)

    (v,) = Judge(_env(), retry=retry).all([between])
    assert v.state == "PASS" and asked == ["launch"] and "retry in a fresh process reached" in v.text
    (v,) = Judge(_env(), retry=lambda ev: _ev(_on_line(60.0, regress=1.4), 60.0, seed=6)).all([between])
    assert v.state == "WARN" and "(retry: 10." in v.text  # a worse retry does not make a WARN a FAIL
    (v,) = Judge(_env(), retry=lambda ev: _ev(_on_line(60.0, regress=1.16), 60.0, seed=7)).all([between])
    assert v.state == "WARN"
    gpu_timed = dict(_ev(1.0, None).row, timing_method="cuda event")
    hbm = Figure("hbm", "hbm", "elementwise", "op=triad", "bandwidth")
    row = dict(gpu_timed, unit="GB/s", better="higher", value=4000.0, samples=[4000.0 + i for i in range(10)])
    env = envelope.Envelope("Fake GPU", "^Fake GPU$", {"hbm": envelope.Entry("GB/s", "higher", 4300.0, 4100.0, 3900.0)},
                            "test runs", "/x/fake.toml")
    asked.clear()
    (v,) = Judge(env, retry=retry).all([Evidence(hbm, "gpu0", 0, None, row)])
    assert v.state == "WARN" and asked == []
