"""Cases measured together (gpubench.cases.run_together): each opened once, then sampled in turn, a slice at a time,
so that each case's samples span the whole stretch they take (fake backend: programmed durations, exact clocks)."""

import dataclasses

import pytest

from gpubench import cases, engine
from gpubench.backends.fake import FakeBackend
from gpubench.rundir import ABANDONED
from gpubench.suite import Case, Metric, Skip, Suite

from conftest import make_workload

# Each sample one programmed call (1 ms), no warm-up minimum: a case's budget of 20 ms is 20 samples.
CFG = engine.EngineConfig(min_samples=4, max_samples=200, budget_s=0.02, min_warmup_s=0.0, max_warmup_s=1.0,
                          settle_window=2, settle_tol=0.0, min_sample_s=1e-12, target_cv=0.0)


class Four(Suite):
    """Four cases, n=0..3; ``fail`` makes one of them fail a way (prepare raises, Skip, wrong answer, a call raises),
    each call's (case, fake clock) is kept in ``calls``."""

    name, version, backends = "four", 1, frozenset({"fake"})
    metrics = (Metric("time", "s", "lower"),)

    def __init__(self, backend, fail=None, footprint=None):
        self.backend, self.fail, self.footprint, self.calls = backend, fail or {}, footprint, []

    def cases(self, ctx):
        return [Case.of(n=i) for i in range(4)]

    def prepare(self, case, backend, ctx=None):
        n, how = case["n"], self.fail.get(case["n"])
        if how == "prepare":
            raise RuntimeError("CUDA out of memory")
        if how == "skip":
            raise Skip("not on this device")
        w = make_workload(ok=how != "invalid", footprint=self.footprint)
        run = w.run

        def call(x):
            if how == "slice" and len(self.calls) > 60:
                raise RuntimeError("illegal memory access")
            self.calls.append((n, self.backend.now()))
            return run(x)

        w.run = call
        return w


def _together(suite, backend, **kw):
    return cases.run_together(suite, suite.cases(None), backend, {}, CFG, None, **kw)


def _span(calls, n):
    times = [t for m, t in calls if m == n]
    return min(times), max(times)


def test_cases_measured_together_each_span_the_others_stretch():
    be = FakeBackend(durations=[1e-3, 1.5e-3])  # never within the target CV: the budget ends each
    suite = Four(be)
    rows = _together(suite, be)
    assert [r[0]["status"] for r in rows] == ["ok"] * 4
    spans = [_span(suite.calls, n) for n in range(4)]
    # Each case's calls begin before every other case's end and end after every other's start: the slices of
    # all four alternate. One after the other, the first would be done before the second began.
    for a in range(4):
        for b in range(4):
            assert spans[a][0] < spans[b][1] and spans[b][0] < spans[a][1]
    for (row,) in rows:
        # Four slices, each its share of the budget (5 ms: 4 or 5 samples, a sample more where the clock's sum rounds
        # below 5 ms); the first batch of slices 2-4 thrown away
        assert 4 * 4 <= row["n"] <= 4 * 6 and row["stop"] == "budget"
        assert row["case_s"] > 0


def test_one_case_measured_together_reads_as_measured_alone():
    be = FakeBackend(durations=[1e-3])
    alone = engine.measure(make_workload(), FakeBackend(durations=[1e-3]), CFG)
    suite = Four(be)
    (row, *_), *_ = _together(suite, be)
    assert row["value"] == pytest.approx(1e-3) and alone.samples_s[0] == pytest.approx(1e-3)
    assert row["n"] >= CFG.min_samples and len(alone.samples_s) >= CFG.min_samples


@pytest.mark.parametrize("how,status", [("prepare", "error"), ("skip", "skipped"), ("invalid", "invalid"),
                                        ("slice", "error")])
def test_a_failing_case_is_its_own_row_and_the_others_are_measured(how, status):
    be = FakeBackend(durations=[1e-3, 1.5e-3])
    suite = Four(be, fail={1: how})
    rows = _together(suite, be)
    assert rows[1][0]["status"] == status
    if how == "invalid":
        assert rows[1][0]["message"] == "wrong answer" and rows[1][0]["n"] == 0
    if how == "slice":  # it failed half way: the cases after it in each turn go on
        assert "illegal memory access" in rows[1][0]["message"]
    assert [rows[i][0]["status"] for i in (0, 2, 3)] == ["ok"] * 3
    assert all(16 <= rows[i][0]["n"] <= 24 for i in (0, 2, 3))


def test_cases_whose_buffers_do_not_fit_together_are_measured_one_group_after_another():
    be = FakeBackend(durations=[1e-3], memory_bytes=1000)
    # Half of what one case may hold (0.75 × 1000 bytes) is 375: two cases of 150 bytes fit, a third does not.
    suite = Four(be, footprint=150)
    rows = _together(suite, be)
    assert [r[0]["status"] for r in rows] == ["ok"] * 4
    spans = [_span(suite.calls, n) for n in range(4)]
    assert spans[0][0] < spans[1][1] and spans[1][0] < spans[0][1]  # together
    assert spans[1][1] < spans[2][0]  # then the next two
    assert spans[2][0] < spans[3][1] and spans[3][0] < spans[2][1]


def test_a_ctrl_c_abandons_the_open_cases_and_leaves_the_unopened_without_rows():
    be = FakeBackend(durations=[1e-3], memory_bytes=1000)
    suite = Four(be, footprint=150)  # two groups: the second is not opened when the first is interrupted
    asked = {"n": 0}

    def interrupted():
        asked["n"] += 1
        return len(suite.calls) > 30

    rows = _together(suite, be, interrupted=interrupted)
    assert [r[0]["message"] for r in rows[:2]] == [ABANDONED] * 2 and rows[0][0]["status"] == "skipped"
    assert rows[2:] == [[], []]


def test_the_engine_samples_an_opened_workload_in_slices_of_its_budget():
    w = make_workload()
    opened = engine.Opened(w, FakeBackend(durations=[1e-3, 1.5e-3]), dataclasses.replace(CFG, budget_s=0.04))
    for _ in range(4):
        opened.slice(4)
    m = opened.close()
    assert 32 <= len(m.samples_s) <= 44 and m.stop == "budget" and opened.slices == 4
    assert w.counter["made"] >= 2  # the check's fresh set, then the sampling's
    assert engine.Opened(make_workload(ok=False), FakeBackend(), CFG).close().stop == "check"


def test_steady_samples_end_each_slice_early_and_the_workload_after_its_second():
    # Within the target CV from the start: the first slice ends at the rule's minimum, the second after one sample
    # more, and then the two moments agree: the slices left have nothing to add.
    opened = engine.Opened(make_workload(), FakeBackend(durations=[1e-3]), dataclasses.replace(CFG, target_cv=0.01))
    for _ in range(4):
        opened.slice(4)
    m = opened.close()
    assert opened.slices == 2 and len(m.samples_s) == CFG.min_samples + 1 and m.stop == "cv"
    # Apart (never within the target), every slice runs its share of the budget
    opened = engine.Opened(make_workload(), FakeBackend(durations=[1e-3, 1.5e-3]),
                           dataclasses.replace(CFG, target_cv=0.01))
    for _ in range(4):
        opened.slice(4)
    assert opened.slices == 4 and len(opened.close().samples_s) >= 16
