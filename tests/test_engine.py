"""The engine on the fake backend: every duration is programmed, so every number is exact."""

import dataclasses

import pytest
import torch

from gpubench.timing import engine, fills
from gpubench.backends.fake import FakeBackend
from gpubench.timing.engine import EngineConfig
from gpubench.suite import BANDWIDTH, THROUGHPUT, TIME, Metric, Workload

from conftest import make_workload

# No batching (min_sample_s tiny) and no warm-up minimum, so each sample is one programmed call.
ONE_CALL = EngineConfig(min_samples=3, max_samples=50, budget_s=1.0, min_warmup_s=0.0, max_warmup_s=1.0,
                        settle_window=2, settle_tol=0.0, min_sample_s=1e-12, target_cv=0.01)


def test_constant_durations_stop_on_cv_at_min_samples():
    be = FakeBackend(durations=[1e-3])
    m = engine.measure(make_workload(), be, ONE_CALL)
    assert m.samples_s == [1e-3] * 3
    assert m.stop == "cv" and m.inner == 1 and m.settled


def test_warmup_waits_for_settled_times_and_samples_follow_the_programmed_clock():
    # check call (1), warm-up: 5,4,3,3 ms -> settled after the two 3 ms batches; then samples.
    durations = [9e-3, 5e-3, 4e-3, 3e-3, 3e-3, 1e-3, 2e-3, 3e-3, 1e-3, 2e-3, 3e-3]
    be = FakeBackend(durations=lambda w, i: durations[min(i, len(durations) - 1)])
    cfg = EngineConfig(**{**ONE_CALL.__dict__, "min_samples": 3, "max_samples": 6})
    m = engine.measure(make_workload(), be, cfg)
    assert m.warmup_s == pytest.approx(15e-3)  # 5+4+3+3 ms of fake time
    assert m.samples_s == pytest.approx([1e-3, 2e-3, 3e-3, 1e-3, 2e-3, 3e-3])
    assert m.stop == "max_samples"  # spread never falls under 1%


def test_budget_stops_a_noisy_measurement():
    be = FakeBackend(durations=[1e-3, 3e-3])  # CV ~ 0.7 forever
    cfg = EngineConfig(**{**ONE_CALL.__dict__, "budget_s": 0.02, "max_samples": 10_000, "settle_tol": 1.0})
    m = engine.measure(make_workload(), be, cfg)
    assert m.stop == "budget"
    # sampling stops at the first sample that ends at or past 20 ms of fake time
    assert sum(m.samples_s) >= 0.02 and sum(m.samples_s[:-1]) < 0.02


def test_batches_calls_until_a_sample_is_long_enough():
    be = FakeBackend(durations=[1e-4])
    cfg = EngineConfig(**{**ONE_CALL.__dict__, "min_sample_s": 1e-3})
    m = engine.measure(make_workload(), be, cfg)
    assert m.inner == 10
    assert m.samples_s == pytest.approx([1e-4] * len(m.samples_s))


@pytest.mark.parametrize("after", [0, 2, 6])
def test_an_interruption_abandons_the_measurement_at_the_next_check(after):
    # `interrupted` is asked before the check, between its steps (inputs, call, reference), before each input
    # set, then after every batch: asked `after` times with no, then yes, the engine stops there.
    be = FakeBackend(durations=[1e-3, 3e-3])  # never settles, never meets the CV target: a long measurement
    asked = []

    def interrupted():
        asked.append(be.calls)
        return len(asked) > after

    with pytest.raises(engine.Interrupted):
        engine.measure(make_workload(), be, ONE_CALL, interrupted=interrupted)
    # before the check and after its inputs: no call; after its call, after it, before the one input set: its
    # call; then one batch (one call here) per question
    assert be.calls == [0, 0, 1, 1, 1, 2, 3][after] and asked[-1] == be.calls
    with pytest.raises(ValueError, match="group"):
        engine.measure(make_workload(), be, ONE_CALL, group=object(), interrupted=lambda: False)


def test_an_interruption_stops_an_input_fill_between_its_pieces(monkeypatch):
    # A fill of GiBs on the host takes seconds in one torch call, which Python cannot interrupt: the fills ask
    # the engine's check between pieces, so a Ctrl-C waits for one piece, not the whole set.
    monkeypatch.setattr(fills, "PIECE", 1000)
    made = []

    def make_inputs():
        x = fills.uniform(10 * fills.PIECE + 1, torch.float32, "cpu")  # 11 pieces
        made.append(x)
        return x

    asked = []

    def interrupted():
        asked.append(True)
        return len(asked) > 4

    w = dataclasses.replace(make_workload(), make_inputs=make_inputs)
    with pytest.raises(engine.Interrupted):
        engine.measure(w, FakeBackend(durations=[1e-3]), ONE_CALL, interrupted=interrupted)
    # asked before the check, then before each piece of its inputs: the fourth piece was never drawn
    assert not made and len(asked) == 5


def test_fills_cover_every_element_and_ask_nothing_outside_the_engine(monkeypatch):
    monkeypatch.setattr(fills, "PIECE", 1000)
    x = fills.uniform(2 * fills.PIECE + 7, torch.float32, "cpu", -0.5, 0.5)
    assert bool(((x >= -0.5) & (x < 0.5)).all()) and x.unique().numel() > 1000  # random, no piece left out
    assert bool(fills.full((3, fills.PIECE), float("nan"), torch.bfloat16, "cpu").isnan().all())
    asked = []
    with fills.stop_with(lambda: asked.append(True)):
        fills.full(2 * fills.PIECE + 7, 1.0, torch.float64, "cpu")
    assert len(asked) == 3  # one a piece
    fills.full(2 * fills.PIECE + 7, 1.0, torch.float64, "cpu")
    assert len(asked) == 3  # the check ended with its block


def test_failed_check_is_never_timed():
    be = FakeBackend(durations=[1e-3])
    w = make_workload(ok=False)
    m = engine.measure(w, be, ONE_CALL)
    assert not m.valid and m.stop == "check" and m.samples_s == []
    assert be.calls == 1  # the check's own call only


@pytest.mark.parametrize("footprint,expected", [(1 << 20, 4), (3 << 19, 3), (8 << 20, 1), (1, 64)])
def test_rotation_spans_four_times_the_cache(footprint, expected):
    be = FakeBackend(cache_bytes=1 << 20)
    w = make_workload(cache="rotate", footprint=footprint)
    assert engine.rotation_sets(w, be.cache_bytes(), ONE_CALL) == expected


def test_rotation_cycles_through_every_input_set():
    be = FakeBackend(durations=[1e-3], cache_bytes=1 << 20)
    w = make_workload(cache="rotate", footprint=1 << 20)
    m = engine.measure(w, be, ONE_CALL)
    assert m.sets == 4
    timed = w.seen[1:]  # after the check's call (set 1)
    assert set(timed) == {2, 3, 4, 5}
    assert timed == [2, 3, 4, 5, 2]  # 2 warm-up calls, then 3 samples, cycling


def test_flush_mode_flushes_before_every_single_call_sample():
    be = FakeBackend(durations=[1e-4])
    cfg = EngineConfig(**{**ONE_CALL.__dict__, "min_sample_s": 1e-3})
    m = engine.measure(make_workload(cache="flush"), be, cfg)
    assert m.inner == 1  # a flushed cache only holds for one call
    assert be.flushes == be.calls - 1  # every timed call, none for the check


def test_flushed_samples_are_queued_many_per_batch_behind_one_hold():
    # Each batch: one hold, then (flush, timed call) per sample, all queued before the GPU reaches them, so
    # that the GPU runs them back to back and the host's time to issue a call is never timed as the call's.
    order = []

    class Logged(FakeBackend):
        def hold(self, seconds):
            order.append(("hold", seconds))
            return super().hold(seconds)

        def flush_cache(self):
            order.append("flush")
            super().flush_cache()

        def call(self, workload, inputs):
            order.append("call")
            return super().call(workload, inputs)

    be = Logged(durations=[1e-3])
    w = make_workload(cache="flush")
    w.method = dataclasses.replace(w.method, hold=True)
    cfg = EngineConfig(**{**ONE_CALL.__dict__, "max_samples": 500})
    m = engine.measure(w, be, cfg)
    timed = order[1:]  # after the check's call
    holds = [i for i, x in enumerate(timed) if isinstance(x, tuple)]
    batches = [timed[i + 1 : j] for i, j in zip(holds, holds[1:] + [len(timed)])]
    assert timed[0] == ("hold", engine.FLUSH_HOLD_S)  # the first batch: one sample, time unknown
    assert all(b == ["flush", "call"] * (len(b) // 2) for b in batches)
    # after the first, a batch keeps the GPU busy FLUSH_BATCH_S: 100 samples of 1 ms, capped at 64
    sizes = [len(b) // 2 for b in batches]
    assert sizes[0] == 1 and max(sizes) == engine.FLUSH_MAX_BATCH
    assert [timed[i][1] for i in holds] == pytest.approx([engine.FLUSH_HOLD_S * k for k in sizes])
    assert m.inner == 1 and m.unheld == 0
    # every call of the last batch is a sample (all take 1 ms, so the CV rule stops after one batch of samples)
    assert len(m.samples_s) == sizes[-1] and m.samples_s == pytest.approx([1e-3] * sizes[-1]) and m.stop == "cv"


def test_flushed_samples_stop_at_the_sample_cap():
    cfg = EngineConfig(**{**ONE_CALL.__dict__, "max_samples": 70, "target_cv": 0.0, "budget_s": 100.0})
    be = FakeBackend(durations=[1e-3, 2e-3])  # never settles under the CV target
    m = engine.measure(make_workload(cache="flush"), be, cfg)
    assert len(m.samples_s) == 70 and m.stop == "max_samples"


def test_metrics_derive_from_bytes_flops_and_time():
    w = Workload(run=lambda x: x, make_inputs=lambda: 0, bytes=2_000_000_000, flops=4_000_000_000_000)
    got = engine.metric_samples(w, (TIME, BANDWIDTH, THROUGHPUT), [1.0, 2.0])
    assert got["time"] == [1e6, 2e6]  # us
    assert got["bandwidth"] == [2.0, 1.0]  # GB/s
    assert got["throughput"] == [4.0, 2.0]  # TFLOP/s


def test_suite_specific_metric_from_derive():
    w = Workload(run=lambda x: x, make_inputs=lambda: 0, bytes=1e9, derive=lambda s: {"busbw": 1.5 / s})
    got = engine.metric_samples(w, (Metric("busbw", "GB/s", "higher"),), [0.5])
    assert got == {"busbw": [3.0]}
    with pytest.raises(ValueError, match="neither engine-derived"):
        engine.metric_samples(w, (Metric("nope", "x", "higher"),), [0.5])


def test_device_state_is_recorded_from_telemetry():
    be = FakeBackend(durations=[1e-3], reading={"sm_clock_mhz": 1755.0, "mem_clock_mhz": 2619.0, "power_w": 300.0,
                                                "temp_c": 61.0, "throttle": ["SwPowerCap"]})
    m = engine.measure(make_workload(), be, ONE_CALL, telemetry=be.telemetry())
    assert m.state["sm_clock_mhz"] == 1755.0 and m.state["throttle"] == "SwPowerCap"
    assert m.state["readings"] >= 2


def test_zero_duration_fake_is_refused():
    be = FakeBackend(durations=[0.0])
    with pytest.raises(ValueError, match="positive"):
        engine.measure(make_workload(ok=True), be, ONE_CALL)


class CountingSync(FakeBackend):
    """Records the order of synchronize calls and timer kinds, to check what host timing brackets."""

    def __init__(self, **kw):
        super().__init__(**kw)
        self.log = []

    def synchronize(self):
        self.log.append("sync")

    def call(self, workload, inputs):
        self.log.append("call")
        return super().call(workload, inputs)


def test_host_timing_drains_the_queue_before_and_after_the_timed_enqueue():
    be = CountingSync(durations=[1e-3])
    w = make_workload()
    w.method = dataclasses.replace(w.method, timing="host")
    m = engine.measure(w, be, ONE_CALL)
    assert m.samples_s == [1e-3] * 3
    # check: call, sync; then every batch: sync, call (timed), sync
    assert be.log[:2] == ["call", "sync"]
    assert be.log[2:] == ["sync", "call", "sync"] * (len(be.log[2:]) // 3)


class FlakyHold:
    def __init__(self, ok):
        self.ok = ok

    def held(self):
        return self.ok


class HoldingBackend(FakeBackend):
    def __init__(self, pattern, **kw):
        super().__init__(**kw)
        self.pattern = list(pattern)

    def hold(self, seconds):
        self.holds.append(seconds)
        return FlakyHold(self.pattern.pop(0) if self.pattern else True)


def test_a_hold_that_ran_out_discards_the_sample_and_doubles_the_hold():
    be = HoldingBackend([False, False], durations=[1e-3])
    w = make_workload()
    w.method = dataclasses.replace(w.method, hold=True)
    m = engine.measure(w, be, ONE_CALL)
    assert m.unheld == 2
    assert be.holds[:3] == [0.005, 0.01, 0.02]  # doubled after each failure, then kept
    assert set(be.holds[3:]) == {0.02}
    assert m.samples_s == [1e-3] * 3


def test_a_hold_that_never_holds_is_an_error():
    be = HoldingBackend([False] * 100, durations=[1e-3])
    w = make_workload()
    w.method = dataclasses.replace(w.method, hold=True)
    with pytest.raises(RuntimeError, match="stream hold ran out"):
        engine.measure(w, be, ONE_CALL)


def test_hold_on_a_backend_that_cannot_hold_is_a_skip():
    from gpubench.backends.cpu import CpuBackend
    from gpubench.suite import Skip

    w = make_workload()
    w.method = dataclasses.replace(w.method, hold=True)
    with pytest.raises(Skip, match="cannot hold a stream"):
        engine.measure(w, CpuBackend(), ONE_CALL)


def test_a_workload_can_ask_for_a_longer_warmup_in_every_mode():
    # Settled from the first batches (constant 1 ms calls): only the workload's minimum keeps it warming up.
    cfg = EngineConfig(**{**ONE_CALL.__dict__, "min_warmup_s": 0.0, "max_warmup_s": 0.5})
    w = make_workload()
    assert engine.measure(w, FakeBackend(durations=[1e-3]), cfg).warmup_s < 0.01
    w.method = dataclasses.replace(w.method, min_warmup_s=0.2)
    m = engine.measure(w, FakeBackend(durations=[1e-3]), cfg)
    assert 0.2 <= m.warmup_s < 0.21 and m.settled
    # Longer than the config's maximum (--quick's 0.5 s): the workload's minimum still holds.
    w.method = dataclasses.replace(w.method, min_warmup_s=1.5)
    m = engine.measure(w, FakeBackend(durations=[1e-3]), engine.QUICK)
    assert 1.5 <= m.warmup_s < 1.51 and m.settled


def test_an_unsettled_workload_stops_warming_at_its_own_minimum_when_that_is_longer():
    # Per-call times alternate 1 and 3 ms forever: never settled, so the warm-up ends at the longer of the
    # config's maximum and the workload's minimum.
    cfg = EngineConfig(**{**ONE_CALL.__dict__, "max_warmup_s": 0.1, "settle_tol": 0.0})
    w = make_workload()
    w.method = dataclasses.replace(w.method, min_warmup_s=0.3)
    m = engine.measure(w, FakeBackend(durations=[1e-3, 3e-3]), cfg)
    assert 0.3 <= m.warmup_s < 0.304 and not m.settled


def test_a_power_limited_workload_samples_whole_periods_and_three_suffice():
    # 1 ms calls: warm-up batches keep the config's length (one call here), then each sample lasts a 50 ms
    # period (50 calls), and the CV rule stops at three of them although the config asks for ten.
    cfg = EngineConfig(**{**ONE_CALL.__dict__, "min_samples": 10})
    w = make_workload()
    w.method = dataclasses.replace(w.method, period_s=0.05)
    m = engine.measure(w, FakeBackend(durations=[1e-3]), cfg)
    assert m.inner == 50 and m.samples_s == pytest.approx([1e-3] * 3) and m.stop == "cv"
    assert m.warmup_s < 0.01  # the warm-up's batches did not grow to the period
    w.method = dataclasses.replace(w.method, period_s=0.0)
    m = engine.measure(w, FakeBackend(durations=[1e-3]), cfg)
    assert m.inner == 1 and len(m.samples_s) == 10


def test_a_period_is_ignored_for_flushed_workloads():
    w = make_workload()
    w.method = dataclasses.replace(w.method, period_s=0.05, cache="flush")
    assert engine.measure(w, FakeBackend(durations=[1e-3]), ONE_CALL).inner == 1  # one call per flushed sample


@pytest.mark.parametrize("host_s,bound", [(0.0, False), (2e-5, False), (9e-5, True), (3e-4, True)])
def test_a_device_waiting_for_the_host_is_called_host_bound(host_s, bound):
    # A 100 µs call; the host takes host_s to issue one. At 90 µs the device still runs its own time but the
    # host is what keeps it busy; at 300 µs each call waits for the host and takes 300 µs.
    be = FakeBackend(durations=[1e-4], host_seconds=host_s)
    cfg = EngineConfig(**{**ONE_CALL.__dict__, "min_sample_s": 1e-3})
    m = engine.measure(make_workload(), be, cfg)
    assert m.host_issue_s == pytest.approx(host_s)
    assert m.host_bound is bound
    assert m.samples_s == pytest.approx([max(1e-4, host_s)] * len(m.samples_s))


def test_host_issue_is_not_measured_where_the_host_cannot_hold_the_device_back():
    from gpubench.backends.cpu import CpuBackend

    held = make_workload()
    held.method = dataclasses.replace(held.method, hold=True)  # the whole batch is issued before the device runs it
    flushed = make_workload(cache="flush")  # one call per sample, behind a hold
    timed_on_host = make_workload()
    timed_on_host.method = dataclasses.replace(timed_on_host.method, timing="host")
    for w in (held, flushed, timed_on_host):
        m = engine.measure(w, FakeBackend(durations=[1e-4], host_seconds=3e-4), ONE_CALL)
        assert m.host_issue_s is None and m.host_bound is None
    # A CPU backend runs each call as it is issued: there is no queue to starve.
    m = engine.measure(make_workload(), CpuBackend(), ONE_CALL)
    assert m.host_issue_s is None and m.host_bound is None


@pytest.mark.parametrize("mode", ["1", "fail", ""])
def test_graph_mode_times_replays_or_the_calls_eager_saying_why(monkeypatch, mode):
    # Any workload may ask for graphs. The fake device captures with GPUBENCH_FAKE_GRAPHS=1 (a replay makes the
    # captured calls again), fails every capture with =fail, and cannot capture without it.
    from gpubench.suite import Graph

    monkeypatch.setenv("GPUBENCH_FAKE_GRAPHS", mode)
    w = make_workload()
    w.method = dataclasses.replace(w.method, graph=Graph(calls=4))
    m = engine.measure(w, FakeBackend(durations=[1e-3]), ONE_CALL)
    assert m.valid and m.samples_s == pytest.approx([1e-3] * len(m.samples_s))  # a replay of 4: 4 calls' time
    if mode == "1":
        assert m.notes == {"graph": True, "graph_calls": 4} and w.extra == {} and m.sets == 1
        assert set(w.seen[-4:]) == {w.seen[-1]}  # the replays call the captured set
    elif mode == "fail":
        assert m.notes == {"message": "graph capture failed, timed eager: rank 0: RuntimeError: fake graph capture "
                                      "failed: operation not permitted when stream is capturing", "graph": False}
    else:
        assert m.notes == {"graph": False}


def test_a_long_call_gets_a_shorter_graph():
    from gpubench.timing.graphs import calls_for
    from gpubench.suite import Graph

    g = Graph(calls=20, long_call_s=1e-3, span_s=4e-3)
    assert [calls_for(g, t) for t in (1e-5, 9.9e-4, 1e-3, 2e-3, 0.1)] == [20, 20, 4, 2, 1]


@pytest.mark.parametrize("host_calls,graph_calls", [
    ((1e-5, 5e-3, 1e-5, 1e-5), 20),  # one slow timed call (a rank arriving late): still a short call
    ((1e-5, 5e-3, 5e-3, 5e-3), 1),  # a call that is long every time: a graph of one
    ((1e-5, 1e-5, 2e-3, 2e-3), 20),
])
def test_the_calls_per_replay_follow_the_quickest_timed_call(monkeypatch, host_calls, graph_calls):
    from gpubench.timing.graphs import TIMED_CALLS
    from gpubench.suite import Graph

    monkeypatch.setenv("GPUBENCH_FAKE_GRAPHS", "1")
    be = FakeBackend(durations=[1e-5])
    w = make_workload()
    w.method = dataclasses.replace(w.method, graph=Graph(calls=20, long_call_s=1e-3, span_s=4e-3))
    # The set-up call, then the timed ones: each costs the host what host_calls says (later calls: nothing).
    costs = iter(host_calls)
    plain = w.run
    w.run = lambda x: (be.host_clock.advance(next(costs, 0.0)), plain(x))[1]
    assert len(host_calls) == 1 + TIMED_CALLS
    m = engine.measure(w, be, ONE_CALL)
    assert m.valid and m.notes["graph"] is True and m.notes["graph_calls"] == graph_calls


def test_the_stop_rule_says_why_it_stopped():
    from gpubench.timing.stop_rule import StopRule

    rule = StopRule(target_cv=0.01, min_samples=3, max_samples=5, budget_s=1.0)
    rule.initialize()
    for t in (1.0, 1.0):
        rule.add(t)
    assert not rule.is_finished(0.1) and rule.reason is None
    rule.add(1.0)
    assert rule.is_finished(0.1) and rule.reason == "cv"
    rule.initialize()
    for t in (1.0, 2.0, 1.0):
        rule.add(t)
    assert not rule.is_finished(0.5) and rule.is_finished(1.0) and rule.reason == "budget"
    rule.initialize()
    for t in (1.0, 2.0, 1.0, 2.0, 1.0):
        rule.add(t)
    assert rule.is_finished(0.0) and rule.reason == "max_samples"


@pytest.mark.parametrize("status", ["invalid", "error"])
def test_a_rows_own_message_outlives_the_graph_fallbacks_note(monkeypatch, status):
    # The graph fallback notes "timed eager" in the workload's extra columns; a row that failed must still say why
    # it failed (it came back saying only "graph capture failed, timed eager: ..." for a wrong answer or an OOM).
    from gpubench.run import runner
    from gpubench.suite import Case, Graph, Metric, Suite

    monkeypatch.setenv("GPUBENCH_FAKE_GRAPHS", "fail")

    class Tiny(Suite):
        name, version, backends = "tiny", 1, frozenset({"fake"})
        metrics = (Metric("time", "s", "lower"),)

        def cases(self, ctx):
            return [Case.of(n=1)]

        def prepare(self, case, backend, ctx=None):
            w = make_workload(ok=status != "invalid")
            if status == "error":
                run = w.run

                def run_then_fail(x):
                    if len(w.seen) >= 4:  # after the graph's set-up calls: the eager timing's
                        raise RuntimeError("CUDA out of memory")
                    return run(x)

                w.run = run_then_fail
            w.method = dataclasses.replace(w.method, graph=Graph(calls=4))
            return w

    (row,) = runner.run_case(Tiny(), Case.of(n=1), FakeBackend(durations=[1e-3]), {}, ONE_CALL, None)
    assert row["status"] == status
    first = "wrong answer" if status == "invalid" else "RuntimeError: CUDA out of memory"
    assert row["message"].startswith(first), row["message"]
    assert "graph capture failed, timed eager" in row["message"] and row["graph"] is False


@pytest.mark.parametrize("ends", ["ok", "skipped", "error"])
def test_each_row_keeps_what_its_case_cost_in_wall_time(ends):
    # case_s is the run's own cost, not a figure: real seconds from laying out the case to its check, whatever the
    # fake clock says, and kept on a row that was skipped or failed too (a case that took a minute to fail cost it).
    import time

    from gpubench.run import runner
    from gpubench.suite import Case, Metric, Skip, Suite

    class Slow(Suite):
        name, version, backends = "slow", 1, frozenset({"fake"})
        metrics = (Metric("time", "s", "lower"),)

        def cases(self, ctx):
            return [Case.of(n=1)]

        def prepare(self, case, backend, ctx=None):
            time.sleep(0.3)  # as a suite laying out a GiB of inputs
            if ends == "skipped":
                raise Skip("not here")
            if ends == "error":
                raise RuntimeError("CUDA out of memory")
            return make_workload()

    t0 = time.monotonic()
    (row,) = runner.run_case(Slow(), Case.of(n=1), FakeBackend(durations=[1e-3]), {}, ONE_CALL, None)
    took = time.monotonic() - t0
    assert row["status"] == ends
    assert 0.3 <= row["case_s"] <= took
