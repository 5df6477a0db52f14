"""The launch suite's plumbing on the fake backend, and its skips on the CPU."""

import importlib

import pytest

from gpubench.timing import engine
from gpubench.run import runner
from gpubench.backends.cpu import CpuBackend
from gpubench.backends.fake import FakeBackend
from gpubench.run.rows import derived_rows

L = importlib.import_module("gpubench.suites.launch")
CFG = engine.EngineConfig(min_samples=3, budget_s=0.01, min_warmup_s=0.0, max_warmup_s=0.01, min_sample_s=1e-9)


def per_kernel_model(fixed_us, per_kernel_us):
    """Fake device: a call costs fixed + per_kernel × its kernels, in µs."""
    return lambda w, i: (fixed_us + per_kernel_us * w.extra["kernels_per_call"]) * 1e-6


def run_suite(backend):
    suite = L.Launch()
    p = runner.plan([suite], backend, quick=True)
    rows = []
    for case in p.cases["launch"]:
        rows.extend(runner.run_case(suite, case, backend, {}, CFG, None))
    rows.extend(derived_rows(suite, suite.summarize(rows), {}))
    return {(r["measure"], r["api"], r["nodes"]): r for r in rows}


def test_graph_fixed_and_per_node_cost_are_fitted_exactly():
    rows = run_suite(FakeBackend(durations=per_kernel_model(4.0, 0.95)))
    assert rows[("graph_replay", "torch", 1000)]["value"] == pytest.approx(4.0 + 950.0)
    assert rows[("graph_replay_fixed", "torch", 0)]["value"] == pytest.approx(4.0, abs=1e-9)
    assert rows[("graph_replay_per_node", "torch", 0)]["value"] == pytest.approx(0.95, abs=1e-12)
    assert rows[("graph_launch_per_node", "torch", 0)]["unit"] == "us"
    assert "least squares over nodes=1,10,100,1000" in rows[("graph_replay_fixed", "torch", 0)]["message"]
    # eager chain of 100 kernels vs graph: same fake cost here, so exactly 1x
    assert rows[("chain_speedup", "torch", 100)]["value"] == pytest.approx(1.0)
    assert rows[("chain_speedup", "torch", 100)]["metric"] == "speedup"


def test_every_measured_case_is_checked_and_uses_its_timing_mode():
    be = FakeBackend(durations=per_kernel_model(3.0, 1.0))
    rows = run_suite(be)
    for (measure, api, _), r in rows.items():
        if api != "torch":
            assert r["status"] == "skipped" and "need a GPU" in r["message"]
        elif r["stop"] != "derived":
            assert r["status"] == "ok", r["message"]
            assert r["check_error"] == 0.0  # the counter moved by exactly the kernels launched
    assert be.holds, "gpu_gap and graph_replay time behind a stream hold"


def test_fit_line():
    fixed, slope = L.fit_line([(1, 5.0), (10, 14.0), (100, 104.0), (1000, 1004.0)])
    assert fixed == pytest.approx(4.0) and slope == pytest.approx(1.0)


def test_a_counter_that_moved_wrongly_fails_its_check():
    chk = L._check(10)
    c = L.Counter(x=__import__("torch").tensor([7.0]), start=0.0)
    result = chk(c, None)
    assert not result.ok and "moved by 7, expected 10" in result.detail


def test_cpu_backend_skips_every_case_with_the_reason():
    suite = L.Launch()
    be = CpuBackend()
    for case in runner.plan([suite], be, quick=True).cases["launch"]:
        rows = runner.run_case(suite, case, be, {}, CFG, None)
        assert {r["status"] for r in rows} == {"skipped"}
        assert "no GPU" in rows[0]["message"]
    assert suite.summarize([]) == []


def test_graphs_are_captured_once_per_node_count_largest_first(monkeypatch):
    captured = []
    monkeypatch.setattr(L, "_capture", lambda fn, x, nodes: captured.append(nodes) or object())
    monkeypatch.setattr(L, "_GRAPHS", {})
    a = L._graph_counter("torch", None, 1000, "cpu")
    a.x.add_(5.0)  # as replays move it
    b = L._graph_counter("torch", None, 1000, "cpu")
    assert a is b and captured == [1000]  # graph_launch and chain_graph reuse graph_replay's graph
    assert b.start == float(b.x.item())  # refilled with a fresh start, which check() counts from
    L._graph_counter("torch", None, 10, "cpu")
    assert captured == [1000, 100, 10]  # the grid's larger graph first (see the test below)
    grid = [c["nodes"] for c in L.Launch().cases(None) if c["measure"] == "graph_replay"]
    assert grid == sorted(L.GRAPH_NODES, reverse=True)


def test_a_graph_is_captured_after_the_grid_s_larger_ones_whatever_the_process_measures(monkeypatch):
    # A graph's per-node cost depends on the graphs captured before it in the process (suites/launch.py,
    # _GRAPHS): a run filtered to one node count, or a worker measuring one case, captures the larger ones first,
    # as the whole sweep's process has when it reaches that case; a graph is captured once per process.
    captured = []
    monkeypatch.setattr(L, "_capture", lambda fn, x, nodes: captured.append(nodes) or f"graph of {nodes}")
    monkeypatch.setattr(L, "_GRAPHS", {})
    c = L._graph_counter("torch", None, 1, "cpu")
    assert captured == [1000, 100, 10, 1] and c.graph == "graph of 1"
    assert L._graph_counter("torch", None, 100, "cpu").graph == "graph of 100" and len(captured) == 4
    monkeypatch.setattr(L, "_GRAPHS", {})
    captured.clear()
    L._graph_counter("torch", None, 100, "cpu")
    L._graph_counter("torch", None, 7, "cpu")  # a count the grid does not hold: after the grid's larger ones
    assert captured == [1000, 100, 10, 7]
