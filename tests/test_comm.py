"""comm: launcher detection, nccl-tests' conventions, the checks, and real gloo runs among local processes
(started by gpubench itself), including a rank killed or stopped mid-run."""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from nccl_stand_in import write_stand_in

from gpubench import results
from gpubench.suites.comm import caveats
from gpubench.suites.comm import table as commtable
from gpubench.ranks.env import detect, standalone
from gpubench.errors import UsageError

ROOT = Path(__file__).resolve().parent.parent


# --- launchers --------------------------------------------------------------------------------------------
def test_torchrun_variables_are_read_first():
    env = {"RANK": "3", "WORLD_SIZE": "8", "LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "2", "MASTER_ADDR": "n1",
           "MASTER_PORT": "1234", "TORCHELASTIC_RUN_ID": "x", "SLURM_PROCID": "0", "SLURM_NTASKS": "4"}
    r = detect(env)
    assert (r.launcher, r.rank, r.world_size, r.local_rank, r.nnodes) == ("torchrun", 3, 8, 1, 4)
    assert (r.master_addr, r.master_port) == ("n1", 1234)


def test_slurm_variables_give_rank_nodes_and_the_first_host():
    env = {"SLURM_PROCID": "5", "SLURM_NTASKS": "8", "SLURM_LOCALID": "1", "SLURM_NNODES": "2",
           "SLURM_STEP_NODELIST": "gpu[07-08]", "SLURM_JOB_ID": "4242"}
    r = detect(env)
    assert (r.launcher, r.rank, r.world_size, r.local_rank, r.local_world_size, r.nnodes) == ("slurm", 5, 8, 1, 4, 2)
    assert r.master_addr == "gpu07"
    assert r.master_port == detect(dict(env, SLURM_PROCID="0")).master_port  # the same port on every rank


def test_open_mpi_variables_and_the_missing_master_across_nodes():
    env = {"OMPI_COMM_WORLD_RANK": "1", "OMPI_COMM_WORLD_SIZE": "2", "OMPI_COMM_WORLD_LOCAL_RANK": "1",
           "OMPI_COMM_WORLD_LOCAL_SIZE": "2"}
    r = detect(env)
    assert (r.launcher, r.rank, r.world_size, r.nnodes, r.master_addr) == ("mpi", 1, 2, 1, "127.0.0.1")
    with pytest.raises(UsageError, match="MASTER_ADDR"):
        detect(dict(env, OMPI_COMM_WORLD_SIZE="4"))  # 2 per node: 2 nodes, and no master named


def test_no_launcher_means_none():
    assert detect({"HOME": "/root"}) is None


@pytest.mark.parametrize("env", [
    {"RANK": "1", "WORLD_SIZE": "2", "LOCAL_RANK": "1", "TORCHELASTIC_RUN_ID": "x", "MASTER_ADDR": "n1"},
    {"SLURM_PROCID": "1", "SLURM_NTASKS": "2", "SLURM_LOCALID": "0", "SLURM_STEP_NODELIST": "gpu[1-2]",
     "SLURM_JOB_ID": "7"},
    {"OMPI_COMM_WORLD_RANK": "1", "OMPI_COMM_WORLD_SIZE": "2", "OMPI_COMM_WORLD_LOCAL_RANK": "1"},
    {"PMI_RANK": "0", "PMI_SIZE": "2"},
])
def test_a_standalone_child_sees_no_launcher_but_keeps_the_rest(env):
    # The check's own runs start from a rank's environment: they must not try to join its launcher's world.
    assert detect(env) is not None
    child = standalone({**env, "PATH": "/bin", "CUDA_VISIBLE_DEVICES": "0,1", "NCCL_NVLS_ENABLE": "0"})
    assert detect(child) is None
    assert child["PATH"] == "/bin" and child["CUDA_VISIBLE_DEVICES"] == "0,1" and child["NCCL_NVLS_ENABLE"] == "0"


# --- nccl-tests' conventions ------------------------------------------------------------------------------
def test_busbw_factors_are_nccl_tests():
    assert commtable.busbw_factor("all_reduce", 4) == pytest.approx(1.5)
    for c in ("all_gather", "reduce_scatter", "alltoall"):
        assert commtable.busbw_factor(c, 4) == pytest.approx(0.75)
    for c in ("broadcast", "reduce", "sendrecv"):
        assert commtable.busbw_factor(c, 4) == 1.0


def _simulate(name, inputs, op, count):
    """What each of len(inputs) ranks holds after ``name``, computed directly (no communication)."""
    world = len(inputs)
    red = {"sum": sum, "max": lambda xs: torch.stack(xs).amax(0), "min": lambda xs: torch.stack(xs).amin(0),
           "prod": lambda xs: torch.stack(xs).prod(0), "avg": lambda xs: sum(xs) / len(xs)}.get(op)
    if name == "all_reduce":
        return [red(inputs)] * world
    if name == "all_gather":
        return [torch.cat(inputs)] * world
    if name == "reduce_scatter":
        return list(red(inputs).chunk(world))
    if name == "alltoall":
        return [torch.cat([inputs[j].chunk(world)[k] for j in range(world)]) for k in range(world)]
    if name == "broadcast":
        return [inputs[0]] * world
    if name == "reduce":
        return [red(inputs)] + [None] * (world - 1)
    if name == "sendrecv":
        return [inputs[(k - 1) % world] for k in range(world)]
    if name in ("gather", "hypercube"):  # hypercube is an all-gather by recursive doubling
        return [torch.cat(inputs)] + [None if name == "gather" else torch.cat(inputs)] * (world - 1)
    if name == "scatter":
        return list(inputs[0].chunk(world))
    if name == "bisection":
        return [inputs[(k + world // 2) % world] for k in range(world)]
    if name == "alltoallv":  # rank j's input in consecutive segments, one per destination in rank order
        from gpubench.suites.comm.alltoallv import shares

        share = shares(count, 8, world)  # at distance d: d/(1+2+...+(n-1)) of count*n elements, to 16 bytes
        assert share == tuple((d * count * world * 8 // (world * (world - 1) // 2)) // 16 * 2 for d in range(world))
        segs = [inputs[j].split([share[(k - j) % world] for k in range(world)]) for j in range(world)]
        return [torch.cat([segs[j][k] for j in range(world)]) for k in range(world)]
    raise AssertionError(name)


def _expected_output_cases() -> list[tuple[str, str, int]]:
    """Each collective at the worlds it runs in (hypercube: not 3), every op where it reduces, sum elsewhere."""
    from gpubench.suites.comm.collectives import COLLECTIVES

    return [(name, op, world) for name, coll in COLLECTIVES.items() for world in (3, 4) if not coll.refuses(world)
            for op in (("sum", "prod", "max", "avg") if coll.reduces else ("sum",))]


@pytest.mark.parametrize("name, op, world", _expected_output_cases())
def test_each_collectives_expected_output_is_what_the_collective_computes(name, op, world):
    from gpubench.suites.comm.buffers import _values
    from gpubench.suites.comm.collectives import COLLECTIVES

    coll = COLLECTIVES[name]
    send_n, recv_n = coll.buffers(world * 10 * 3, 8, world)  # float64 inputs: 8-byte elements
    nbytes = max(send_n, recv_n) * 8  # the row's bytes, as nccl-tests prints them
    assert coll.sized(nbytes, 8, world) == (send_n, recv_n)
    count = coll.elements(nbytes, 8, world)
    inputs = [_values(torch, 11, r, 0, send_n, send_n, torch.float64, "cpu") for r in range(world)]
    assert all((x != 0).all() for x in inputs)  # random, never zeros

    def values(r, start, length):
        return _values(torch, 11, r, start, length, send_n, torch.float64, "cpu")

    for rank, got in enumerate(_simulate(name, inputs, op, count)):
        want = coll.expect(values, torch, rank, world, op, count, 0, recv_n if name != "all_reduce" else send_n)
        if got is None:
            assert want is None
        else:
            assert torch.equal(want, got.to(torch.float64)), (name, op, rank)
        if want is not None and recv_n > 7:  # a slice of the output is the same slice of the whole
            part = coll.expect(values, torch, rank, world, op, count, 3, recv_n - 5)
            assert torch.equal(part, want[3:recv_n - 2]), (name, rank)


def test_values_of_any_slice_match_the_whole():
    from gpubench.suites.comm.buffers import _values

    whole = _values(torch, 5, 2, 0, 1000, 1000, torch.float32, "cpu")
    assert torch.equal(_values(torch, 5, 2, 123, 456, 1000, torch.float32, "cpu"), whole[123:579])
    assert set(whole.unique().tolist()) == {-2.0, -1.0, 1.0, 2.0}


# --- real gloo runs -------------------------------------------------------------------------------------
def _gpubench(*args, timeout=600, env=None):
    return subprocess.run([sys.executable, "-m", "gpubench", *map(str, args)], capture_output=True, text=True,
                          timeout=timeout, cwd=ROOT, env={**os.environ, **(env or {})})


def _only_run(out: Path) -> Path:
    runs = [p for p in (out / "t").iterdir() if p.is_dir()]
    assert len(runs) == 1, runs
    return runs[0]


@pytest.mark.parametrize("nproc", [2, 4])
def test_cpu_quick_runs_gloo_collectives_among_processes(tmp_path, nproc):
    extra = [] if nproc == 2 else ["--nproc", "4"]
    proc = _gpubench("run", "--suite", "comm", "--backend", "cpu", "--quick", "--out", tmp_path, "--cluster", "t",
                     *extra)
    assert proc.returncode == 0, proc.stderr[-3000:]
    run = _only_run(tmp_path)
    df = results.load(run)
    assert set(df["status"]) == {"ok"}, df[df.status != "ok"][["case", "message"]]
    assert set(df["collective"]) == set(commtable.COLLECTIVES[:7])  # --quick's grid: the others when named
    assert (df["world_size"] == nproc).all() and (df["engine"] == "torch").all()
    assert df["valid"].all() and (df["wrong"] == 0).all()
    assert not df["graph"].any()  # gloo on CPUs is timed eager, without being asked
    assert "comm:" not in proc.stdout  # nothing left out, nothing to say
    wide = df.pivot_table(index=["case", "collective"], columns="metric", values="value").reset_index()
    for _, r in wide.iterrows():
        assert r["busbw"] == pytest.approx(r["algbw"] * commtable.busbw_factor(r["collective"], nproc))
    rank_times = df[df.metric == "time"]["rank_time_us"]
    assert rank_times.map(len).eq(nproc).all()  # every rank's own time is kept
    meta = json.loads((run / "run.json").read_text())
    assert meta["status"] == "complete" and meta["dist"]["world_size"] == nproc
    assert meta["dist"]["launcher"] == "spawn" and len(meta["dist"]["ranks"]) == nproc


def test_exact_figures_on_the_fake_backend(tmp_path):
    # Each fake call lasts 2 ms + bytes / 100 GB/s on every rank: algbw and busbw follow exactly.
    proc = _gpubench("run", "--suite", "comm", "--backend", "fake", "--quick", "--out", tmp_path, "--cluster", "t",
                     "--collectives", "all_reduce,alltoall", "--sizes", "1M", env={"GPUBENCH_FAKE_CALL_S": "2e-3"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    df = results.load(_only_run(tmp_path))
    t = 2e-3 + (1 << 20) / 100e9
    for coll, factor in (("all_reduce", 1.0), ("alltoall", 0.5)):
        rows = df[df.collective == coll].set_index("metric")["value"]
        assert rows["time"] == pytest.approx(t * 1e6)
        assert rows["algbw"] == pytest.approx((1 << 20) / t / 1e9)
        assert rows["busbw"] == pytest.approx((1 << 20) / t / 1e9 * factor)


def test_a_collective_the_host_cannot_issue_fast_enough_is_flagged_host_bound(tmp_path):
    # Issuing a call costs each rank's host 3 ms, more than the 2 ms the call takes: every call waits for the
    # host, the rows say so (and carry the host's time), and so does the summary. Without that cost, neither.
    common = ("run", "--suite", "comm", "--backend", "fake", "--quick", "--cluster", "t", "--collectives",
              "all_reduce", "--sizes", "1M")
    slow = _gpubench(*common, "--out", tmp_path / "slow", env={"GPUBENCH_FAKE_CALL_S": "2e-3",
                                                               "GPUBENCH_FAKE_HOST_S": "3e-3"})
    fast = _gpubench(*common, "--out", tmp_path / "fast", env={"GPUBENCH_FAKE_CALL_S": "2e-3"})
    for proc in (slow, fast):
        assert proc.returncode == 0, proc.stderr[-3000:]
    s = results.load(_only_run(tmp_path / "slow")).set_index("metric")
    f = results.load(_only_run(tmp_path / "fast")).set_index("metric")
    assert s.loc["time", "value"] == pytest.approx(3e3) and s.loc["time", "host_us"] == pytest.approx(3e3)
    assert s["host_bound"].eq(True).all() and "host-bound" in slow.stdout
    assert f.loc["time", "host_us"] == 0.0 and f["host_bound"].eq(False).all() and "host-bound" not in fast.stdout


def _rows(out: Path):
    df = results.load(_only_run(out))
    return df[df.metric == "time"].set_index(["collective", "inplace"])


def test_graphs_are_the_default_where_the_backend_captures_them(tmp_path):
    # A fake device that captures graphs (its replays make the calls again, really, over gloo): by default every
    # case is a captured graph, checked; --eager asks for the host's calls; a capture that fails is timed eager
    # with the reason in its row, and one line under the table says so. Each fake call lasts 1 ms.
    common = ("run", "--suite", "comm", "--backend", "fake", "--quick", "--cluster", "t", "--collectives",
              "all_reduce,all_gather", "--sizes", "64K")
    env = {"GPUBENCH_FAKE_CALL_S": "1e-3"}
    runs = {mode: _gpubench(*common, *flags, "--out", tmp_path / mode, env={**env, "GPUBENCH_FAKE_GRAPHS": graphs})
            for mode, flags, graphs in (("default", (), "1"), ("eager", ("--eager",), "1"),
                                        ("fail", (), "fail"), ("incapable", (), ""))}
    for proc in runs.values():
        assert proc.returncode == 0, proc.stderr[-3000:]
    t = 1e-3 + (64 << 10) / 100e9
    for mode, proc in runs.items():
        rows = _rows(tmp_path / mode)
        assert len(rows) == 3 and rows["valid"].all() and (rows["wrong"] == 0).all(), rows
        assert rows["value"].tolist() == pytest.approx([t * 1e6] * 3)  # a graph of K calls: K calls' time
        graphed = mode == "default"
        assert rows["graph"].eq(graphed).all(), (mode, rows["graph"])
        if graphed:
            assert rows["graph_calls"].between(1, 20).all()
        failed = rows["message"].str.contains("graph capture failed, timed eager: rank 0: RuntimeError: fake graph")
        assert failed.all() if mode == "fail" else not failed.any(), (mode, rows["message"])
        notes = [line for line in proc.stdout.splitlines() if line.startswith("comm:")]
        assert notes == (["comm: graph capture failed for 3 case(s), timed eager instead (rows: graph False): rank "
                          "0: RuntimeError: fake graph capture failed: operation not permitted when stream is "
                          "capturing"] if mode == "fail" else []), (mode, proc.stdout[-2000:])
    meta = json.loads((_only_run(tmp_path / "fail") / "run.json").read_text())
    assert len([n for n in meta["notes"] if n.startswith("comm: ")]) == 1


def test_sendrecv_rows_in_graphs_say_why_they_read_under_nccl_tests_and_only_there(tmp_path):
    # 2 and 4 x H100 (2026-11-27): torch.distributed's captured point-to-point call reads 0.92 of nccl-tests at 1 MiB,
    # 0.98-1.00 at 16 MiB; from 16 to 64 MiB NCCL's own calls from a process per GPU read the same, a few percent
    # under nccl-tests' threads (2026-11-28). The rows say which, where they were captured, and only there.
    common = ("run", "--suite", "comm", "--backend", "fake", "--quick", "--cluster", "t", "--collectives",
              "sendrecv", "--sizes", "1M,16M", "--nproc", "2")
    for graphs in ("1", ""):
        proc = _gpubench(*common, "--out", tmp_path / (graphs or "eager"), env={"GPUBENCH_FAKE_GRAPHS": graphs})
        assert proc.returncode == 0, proc.stderr[-3000:]
        df = results.load(_only_run(tmp_path / (graphs or "eager")))
        busbw = df[df.metric == "busbw"]
        notes = {int(r.bytes): r.message for r in busbw.itertuples()}
        own = {n for n, m in notes.items() if caveats.P2P_NOTE in m}
        layout = {n for n, m in notes.items() if caveats.P2P_LAYOUT_NOTE in m}
        assert (own, layout) == (({1 << 20}, {16 << 20}) if graphs else (set(), set())), (graphs, notes)
        assert set(busbw.status) == {"ok"} and sorted(busbw.bytes) == [1 << 20, 16 << 20]
    # The sizes a run on the fake backend makes slowly (64 MiB and more: a minute on the CI VM), at the rule itself.

    class Capturing:
        def __init__(self, graphs):
            self._graphs = graphs

        def graphs(self):
            return self._graphs

    said = {n: caveats.graph_note("sendrecv", n << 20, True, Capturing(object())) for n in (8, 16, 64, 128)}
    assert said == {8: caveats.P2P_NOTE, 16: caveats.P2P_LAYOUT_NOTE, 64: caveats.P2P_LAYOUT_NOTE, 128: ""}
    assert caveats.graph_note("sendrecv", 32 << 20, True, Capturing(None)) == ""  # the capture failed: eager
    assert caveats.graph_note("sendrecv", 32 << 20, False, Capturing(object())) == ""
    assert caveats.graph_note("alltoall", 32 << 20, True, Capturing(object())) == ""
    # alltoall from 64 MiB: one run's figure is one draw of several speeds (4 x H200 and 4 x H100, 2026-11-27/28).
    assert caveats.graph_note("alltoall", 64 << 20, True, Capturing(object())) == caveats.ALLTOALL_RUNS_NOTE
    assert caveats.graph_note("alltoall", 1 << 30, True, Capturing(object())) == caveats.ALLTOALL_RUNS_NOTE
    assert caveats.graph_note("alltoall", 64 << 20, False, Capturing(object())) == ""
    assert caveats.graph_note("all_gather", 1 << 30, True, Capturing(object())) == ""


def test_a_world_of_one_says_so_in_one_line_and_runs_what_has_meaning(tmp_path):
    # One rank has no bus: the default measures the library's local copy (all_gather out of place) and says so
    # in one line; a collective no world of one can run is one line too, not a skipped row per size.
    one = _gpubench("run", "--suite", "comm", "--backend", "cpu", "--quick", "--nproc", "1", "--out", tmp_path / "a",
                    "--cluster", "t")
    asked = _gpubench("run", "--suite", "comm", "--backend", "cpu", "--quick", "--nproc", "1", "--out",
                      tmp_path / "b", "--cluster", "t", "--collectives", "sendrecv,all_reduce")
    for proc in (one, asked):
        assert proc.returncode == 0, proc.stderr[-3000:]
    rows = _rows(tmp_path / "a")
    assert set(rows.index) == {("all_gather", False)} and len(rows) == 3 and rows["valid"].all()
    notes = [line for line in one.stdout.splitlines() if line.startswith("comm:")]
    assert len(notes) == 1 and "bus bandwidth needs 2 or more ranks" in notes[0] and "local copy" in notes[0]
    rows = _rows(tmp_path / "b")
    assert set(rows.index) == {("all_reduce", True)} and "skipped" not in asked.stdout
    notes = [line for line in asked.stdout.splitlines() if line.startswith("comm:")]
    assert len(notes) == 2 and notes[1] == "comm: sendrecv needs 2 or more ranks: not run (3 sizes)", notes


def test_sizes_under_one_element_per_rank_are_one_line(tmp_path):
    # 4 B among 2 ranks: no rank gets a whole float32 of a gathered or scattered buffer.
    proc = _gpubench("run", "--suite", "comm", "--backend", "cpu", "--quick", "--out", tmp_path, "--cluster", "t",
                     "--collectives", "all_gather,all_reduce", "--sizes", "4,1K")
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = _rows(tmp_path)
    assert sorted(rows.reset_index()[["collective", "bytes"]].itertuples(index=False, name=None)) == [
        ("all_gather", 1024), ("all_gather", 1024), ("all_reduce", 4), ("all_reduce", 1024)]
    notes = [line for line in proc.stdout.splitlines() if line.startswith("comm:")]
    assert notes == ["comm: all_gather: 2 case(s) of 4-4 B not run: less than one element per rank among 2 ranks"]


def test_bad_comm_options_exit_2_before_anything_starts(tmp_path):
    for args, needle in ((["--collectives", "allreduce"], "unknown collective"),
                         (["--op", "mean"], "unknown --op"),
                         (["--min-bytes", "1M", "--max-bytes", "1K"], "swap them"),
                         (["--step-factor", "1"], "step-factor"),
                         (["--dtype", "fp8"], "no dtype"),
                         (["--alloc", "nccl"], "need a GPU backend"),
                         (["--register"], "need a GPU backend"),
                         (["--alloc", "torch", "--register"], "use it with --alloc nccl"),
                         (["--engine", "nccl-tests", "--alloc", "torch"], "leave --alloc out"),
                         (["--graph"], "gloo on CPUs is timed eager"),
                         (["--backend", "fake", "--graph", "--eager"], "opposite")):
        proc = _gpubench("run", "--suite", "comm", "--backend", "cpu", "--out", tmp_path, *args, timeout=120)
        assert proc.returncode == 2 and needle in proc.stderr, (args, proc.stderr)
        assert len(proc.stderr.strip().splitlines()) == 1
    proc = _gpubench("run", "--suite", "comm,elementwise", "--backend", "cpu", "--out", tmp_path, timeout=120)
    assert proc.returncode == 2 and "on its own" in proc.stderr
    assert not (tmp_path / "t").exists()


def _start_long_run(tmp_path, timeout_s, own_group=False):
    # Many cases of real gloo work, so that the run is still going when a rank is killed. own_group: the
    # spawner leads a process group, as a shell's foreground job does (a terminal's Ctrl-C goes to the group).
    args = [sys.executable, "-m", "gpubench", "run", "--suite", "comm", "--backend", "cpu", "--out", str(tmp_path),
            "--cluster", "t", "--collectives", "all_reduce,all_gather", "--min-bytes", "1K", "--max-bytes", "64K",
            "--step-factor", "2", "--timeout", str(timeout_s)]
    return subprocess.Popen(args, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=own_group)


def _wait_for_rows(tmp_path, proc, cases=2, limit=180):
    end = time.monotonic() + limit
    while time.monotonic() < end:
        if proc.poll() is not None:
            err = proc.communicate()[1]  # every rank's own word on why, then the end of the tracebacks
            raise AssertionError("\n".join([ln for ln in err.splitlines() if "gpubench: error" in ln] + [err[-2000:]]))
        runs = list((tmp_path / "t").glob("*/comm.parquet"))
        if runs and results.load(runs[0])["case"].nunique() >= cases:
            run = runs[0].parent
            return run, json.loads((run / "run.json").read_text())["dist"]["ranks"]
        time.sleep(0.2)
    raise AssertionError("the run measured nothing in time")


def _clean_up(proc, ranks, group=False):
    """Nothing of the run is left behind, whatever happened; never raises (the test's own failure shows)."""
    with contextlib.suppress(OSError):
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL) if group else proc.kill()
    for r in ranks:
        with contextlib.suppress(OSError):
            if not _gone(r["pid"]):
                os.kill(r["pid"], signal.SIGKILL)


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    # A zombie is gone too (its parent has not reaped it yet).
    try:
        return Path(f"/proc/{pid}/stat").read_text().split()[2] == "Z"
    except OSError:
        return True


@pytest.mark.parametrize("how", ["kill", "stop"])
def test_a_dead_or_stopped_rank_ends_the_run_naming_it_and_keeping_rows(tmp_path, how):
    timeout_s = 8
    proc = _start_long_run(tmp_path, timeout_s)
    ranks = []
    try:
        run, ranks = _wait_for_rows(tmp_path, proc)
        before = results.load(run)["case"].nunique()
        victim = ranks[1]["pid"]
        t0 = time.monotonic()
        os.kill(victim, signal.SIGKILL if how == "kill" else signal.SIGSTOP)
        _, err = proc.communicate(timeout=timeout_s + 30)
        took = time.monotonic() - t0
    finally:
        alive = [r for r in ranks if not _gone(r["pid"])]
        _clean_up(proc, ranks)
    assert proc.returncode not in (0, None)
    assert took < timeout_s + 15, (took, err[-3000:])  # within the timeout (plus the parent's grace and exits)
    assert "rank 1" in err, err[-3000:]
    if how == "stop":
        assert "stopped" in err or "silent" in err or "behind" in err, err[-3000:]
    df = results.load(run)
    cases = list(dict.fromkeys(df["case"]))
    assert len(cases) >= before  # what was measured is kept; the case in flight may be an error row
    assert (df[df["case"].isin(cases[:before])]["status"] == "ok").all()
    meta = json.loads((run / "run.json").read_text())
    assert meta["status"] == "failed" and "rank 1" in meta["error"]
    assert not alive  # no orphans


@pytest.mark.parametrize("sig", ["SIGTERM", "SIGKILL"])
def test_the_ranks_never_outlive_the_spawner(tmp_path, sig):
    # SIGTERM (a job's time limit, `timeout`): the spawner stops its ranks and marks the run interrupted.
    # SIGKILL gives it no say: the ranks notice their store is gone and end themselves, rank 0 marking the run.
    timeout_s = 60  # far longer than either path may take: neither waits for the stall timeout
    proc = _start_long_run(tmp_path, timeout_s)
    ranks = []  # known once the run has rows; the clean-up below must not depend on getting that far
    try:
        run, ranks = _wait_for_rows(tmp_path, proc)
        before = results.load(run)["case"].nunique()
        t0 = time.monotonic()
        proc.send_signal(getattr(signal, sig))
        _, err = proc.communicate(timeout=30)
        end = time.monotonic() + 20
        while time.monotonic() < end and not all(_gone(r["pid"]) for r in ranks):
            time.sleep(0.2)
        took = time.monotonic() - t0
    finally:
        alive = [r for r in ranks if not _gone(r["pid"])]  # what the spawner left behind, before clean-up
        _clean_up(proc, ranks)
    assert not alive, f"orphaned ranks after {sig}"
    assert took < 15, took
    meta = json.loads((run / "run.json").read_text())
    if sig == "SIGTERM":
        assert proc.returncode == 128 + signal.SIGTERM
        assert "stopped by SIGTERM" in err, err[-3000:]
        assert meta["status"] == "interrupted" and "SIGTERM" in meta["error"]
    else:
        assert meta["status"] == "failed" and "store" in meta["error"], meta.get("error")
    df = results.load(run)
    assert (df[df["case"].isin(list(dict.fromkeys(df["case"]))[:before])]["status"] == "ok").all()


@pytest.mark.parametrize("to", ["terminal", "spawner"])
def test_ctrl_c_stops_every_rank_after_the_case_once(tmp_path, to):
    # terminal: SIGINT to the spawner's process group, as Ctrl-C in a shell; spawner: `kill -INT` of it alone
    # (a CI runner cancelling a job). Either way the ranks finish their case and stop, the run is marked
    # interrupted with what was measured, exit 130; a Ctrl-C counted twice would end a rank mid-case.
    proc = _start_long_run(tmp_path, 60, own_group=True)
    ranks = []
    try:
        run, ranks = _wait_for_rows(tmp_path, proc)
        if to == "terminal":
            os.killpg(proc.pid, signal.SIGINT)
        else:
            proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    finally:
        alive = [r for r in ranks if not _gone(r["pid"])]
        _clean_up(proc, ranks, group=True)
    assert proc.returncode == 130, err[-3000:]
    assert not alive
    meta = json.loads((run / "run.json").read_text())
    assert meta["status"] == "interrupted", meta.get("error")
    df = results.load(run)
    cases = df["case"].nunique()
    assert 2 <= cases < 21 and (df["status"] == "ok").all(), df[df.status != "ok"][["case", "message"]]
    assert "stopping after this case" in err and "Traceback" not in err, err[-3000:]


@pytest.fixture
def world_of_one(monkeypatch):
    """One rank in this process (a world of one is still a group) and a Comm suite bound to it."""
    import socket

    from gpubench.ranks.env import RankEnv
    from gpubench.ranks.group import Group
    from gpubench.suites.comm import Comm

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    monkeypatch.delenv("GPUBENCH_STORE_HOSTED", raising=False)
    group = Group(RankEnv("spawn", 0, 1, 0, 1, "127.0.0.1", port, 1), "gloo", 30)
    try:
        yield Comm(), group
    finally:
        group.close()


def _cases(suite, group, collective, backend=None, **options):
    from gpubench.backends.cpu import CpuBackend
    from gpubench.suite import GridContext

    # --alloc nccl is refused on a CPU backend before any case; the cases are planned as for CUDA, run on the CPU.
    gpu = backend is not None or options.get("alloc") == "nccl"
    ctx = GridContext(backend="cuda" if gpu else "cpu", quick=True, cache_bytes=1 << 20, memory_bytes=1 << 30,
                      sizes=(4096,), options=(("collectives", [collective]), *options.items()), group=group)
    return [suite.prepare(case, backend or CpuBackend(), ctx) for case in suite.cases(ctx)]


@pytest.mark.parametrize("collective", ["all_reduce", "gather", "scatter", "alltoallv"])
def test_a_wrong_result_is_counted_and_the_case_invalid(world_of_one, collective):
    # Corrupt one element of the output.
    from gpubench.timing import engine
    from gpubench.backends.cpu import CpuBackend

    suite, group = world_of_one
    w = _cases(suite, group, collective)[0]
    good = engine.check(w, CpuBackend())
    assert good.ok and w.extra["wrong"] == 0

    run = w.run

    def corrupt(b):
        out = run(b)
        out[7] += 1
        return out

    w.run = corrupt
    bad = engine.check(w, CpuBackend())
    assert not bad.ok and bad.error == 1 and w.extra["valid"] is False and w.extra["wrong"] == 1


def test_an_operation_the_backend_lacks_skips_the_case_with_its_words(world_of_one, monkeypatch):
    # torch.distributed says a backend lacks an operation in a RuntimeError (or NotImplementedError): the case is
    # skipped with those words in its row; any other failure stays the case's error.
    import torch.distributed as dist

    from gpubench.backends.cpu import CpuBackend
    from gpubench.suite import Skip
    from gpubench.timing import engine

    suite, group = world_of_one
    monkeypatch.setattr(dist, "gather", lambda *a, **k: (_ for _ in ()).throw(
        RuntimeError("Backend gloo does not support gather\nException raised from gather at ...")))
    with pytest.raises(Skip, match=r"^gloo cannot run gather: Backend gloo does not support gather$"):
        engine.check(_cases(suite, group, "gather")[0], CpuBackend())
    monkeypatch.setattr(dist, "scatter", lambda *a, **k: (_ for _ in ()).throw(RuntimeError("Connection reset")))
    with pytest.raises(RuntimeError, match="Connection reset"):
        engine.check(_cases(suite, group, "scatter")[0], CpuBackend())


def test_graph_rows_carry_the_checks_verdict(world_of_one, monkeypatch):
    # A graph workload is built around the eager one; its rows must still say valid/wrong (on an H200 they were
    # empty: the graph workload's extra was a copy that the check never wrote to). The fake device captures:
    # its replays make the calls again.
    from gpubench.timing import engine, graphs
    from gpubench.backends.fake import FakeBackend

    monkeypatch.setenv("GPUBENCH_FAKE_GRAPHS", "1")
    suite, group = world_of_one
    fake = FakeBackend()
    # all_reduce (in place only in torch): its input is refilled and the call made again; all_gather (out of place
    # and in place): the replay's output is read. The engine's graph mode makes the replaying workload.
    prepared = [graphs.prepare(w, fake, group)
                for w in _cases(suite, group, "all_reduce", fake) + _cases(suite, group, "all_gather", fake)]
    workloads = [w for w, _, _ in prepared]
    assert {(notes["graph"], w.extra["valid"]) for w, _, notes in prepared} == {(True, None)} and len(workloads) == 3
    for w in workloads:
        assert engine.check(w, fake).ok
        assert w.extra["valid"] is True and w.extra["wrong"] == 0, w.extra
    # A replay whose output is wrong is found wrong.
    w = workloads[1]
    replay = w.run
    w.run = lambda x: replay(x).add_(1)
    assert not engine.check(w, fake).ok and w.extra["valid"] is False and w.extra["wrong"] == 4096 // 4


class _StandInNccl:
    """NCCL's four buffer calls over host memory, as ctypes calls them (out-parameters through byref), keeping
    what is allocated and registered: the suite's --alloc nccl/--register plumbing runs on the CPU."""

    def __init__(self, fail_alloc=False):
        import ctypes

        self.ctypes, self.fail_alloc = ctypes, fail_alloc
        self.live, self.registered, self.calls = {}, {}, []

    def ncclMemAlloc(self, ref, nbytes):
        self.calls.append("alloc")
        if self.fail_alloc:
            return 1  # ncclUnhandledCudaError
        buf = self.ctypes.create_string_buffer(int(nbytes))
        self.live[self.ctypes.addressof(buf)] = buf
        ref._obj.value = self.ctypes.addressof(buf)
        return 0

    def ncclCommRegister(self, comm, ptr, nbytes, ref):
        self.calls.append("register")
        assert comm.value == 0xC0FFEE and ptr.value in self.live
        ref._obj.value = len(self.registered) + 1
        self.registered[ref._obj.value] = ptr.value
        return 0

    def ncclCommDeregister(self, comm, handle):
        self.calls.append("deregister")
        del self.registered[handle.value]
        return 0

    def ncclMemFree(self, ptr):
        self.calls.append("free")
        assert not set(self.registered.values()) & {ptr.value}  # deregistered before it is freed
        del self.live[ptr.value]
        return 0

    def ncclGetErrorString(self, result):
        return b"unhandled cuda error"


@pytest.mark.parametrize("register", [False, True], ids=["alloc-nccl", "register"])
def test_nccl_buffers_are_the_cases_and_released_when_it_ends(world_of_one, monkeypatch, register):
    # --alloc nccl takes every buffer from ncclMemAlloc (nccl-tests' allocation), --register registers each with
    # the communicator (nccl-tests -R 1); the check still reads the right answer from them, the rows say how the
    # buffers were made, and the case's end deregisters and frees all of them (a stand-in NCCL, on the CPU).
    from gpubench.timing import engine
    from gpubench.backends.cpu import CpuBackend
    from gpubench.ranks import ncclmem

    lib = _StandInNccl()
    monkeypatch.setattr(ncclmem, "library", lambda: lib)
    monkeypatch.setattr(ncclmem, "comm_of", lambda group, device: 0xC0FFEE)
    monkeypatch.setattr(ncclmem, "CHUNK_BYTES", 1 << 20)
    suite, group = world_of_one
    workloads = _cases(suite, group, "all_gather", alloc="nccl", register=register)
    assert len(workloads) == 2  # out of place and in place
    for w in workloads:
        assert (w.extra["alloc"], w.extra["register"]) == ("nccl", register)
        with w.method.context():
            assert engine.check(w, CpuBackend()).ok and w.extra["wrong"] == 0
            assert len(lib.live) == 1  # the case's 4 KiB buffers share one chunk, the run's
            assert len(lib.registered) == (1 if register else 0)
    # The chunk outlives the cases: the second case used the first's memory, nothing was freed or registered twice.
    assert lib.calls == ["alloc"] + ["register"] * register and len(lib.live) == 1
    # Without --alloc on a CPU the buffers are torch's own.
    (w,) = _cases(suite, group, "all_reduce")
    assert (w.extra["alloc"], w.extra["register"]) == ("torch", False) and w.method.context is None


def test_gpu_buffers_are_nccls_by_default_and_torchs_where_nccl_cannot_allocate(world_of_one, monkeypatch):
    # On a GPU the default is nccl-tests' allocation (ncclMemAlloc); an NCCL without it (older than 2.19) leaves the
    # run on torch's caching allocator with one note, where --alloc nccl asked by name is refused.
    from gpubench.backends.fake import FakeBackend
    from gpubench.errors import UsageError
    from gpubench.ranks import ncclmem
    from gpubench.suite import GridContext

    suite, group = world_of_one
    monkeypatch.setattr(ncclmem, "library", lambda: _StandInNccl())
    monkeypatch.setattr(ncclmem, "CHUNK_BYTES", 1 << 20)
    (w,) = _cases(suite, group, "all_reduce", FakeBackend())
    assert w.extra["alloc"] == "nccl" and w.method.context is not None

    def old_nccl():
        raise UsageError("libnccl.so.2 has no ncclMemAlloc (NCCL 2.19 or newer has them)")

    monkeypatch.setattr(ncclmem, "library", old_nccl)
    ctx = GridContext(backend="cuda", quick=True, cache_bytes=1 << 20, memory_bytes=1 << 30, sizes=(4096,),
                      options=(("collectives", ["all_reduce"]),), group=group)
    (case,) = suite.cases(ctx)
    assert suite.prepare(case, FakeBackend(), ctx).extra["alloc"] == "torch"
    assert [n for n in suite.notes(ctx) if "torch's caching allocator: libnccl.so.2 has no ncclMemAlloc" in n]
    with pytest.raises(UsageError, match="has no ncclMemAlloc"):
        list(suite.cases(GridContext(backend="cuda", quick=True, cache_bytes=1 << 20, memory_bytes=1 << 30,
                                     sizes=(4096,), options=(("alloc", "nccl"),), group=group)))


def test_a_failed_nccl_allocation_is_the_cases_error(world_of_one, monkeypatch):
    from gpubench.timing import engine
    from gpubench.backends.cpu import CpuBackend
    from gpubench.ranks import ncclmem

    monkeypatch.setattr(ncclmem, "library", lambda: _StandInNccl(fail_alloc=True))
    monkeypatch.setattr(ncclmem, "CHUNK_BYTES", 1 << 20)
    suite, group = world_of_one
    (w,) = _cases(suite, group, "all_reduce", alloc="nccl")
    with pytest.raises(RuntimeError, match=r"ncclMemAlloc\(1048576\) failed: unhandled cuda error"):
        with w.method.context():
            engine.check(w, CpuBackend())


@pytest.mark.parametrize("register,layout", [(False, None), (True, None), (False, "one-thread")],
                         ids=["default", "register", "one-thread"])
def test_engine_nccl_tests_runs_the_binaries_and_keeps_what_they_printed(tmp_path, register, layout):
    # A stand-in all_reduce_perf that prints a real nccl-tests 2.19.6 log (2 × H200) and records its argv.
    log = ROOT / "tests" / "fixtures" / "nccl-tests" / "nt-2.19.6-all_reduce-h200x2.txt"
    bindir = tmp_path / "bin"
    bindir.mkdir()
    # Each binary run also notes when it started, and lasts over a second (the run's times have whole seconds).
    write_stand_in(bindir / "all_reduce_perf", log, tmp_path / "argv",
                   before="import os, time\n" f"pathlib.Path({str(tmp_path / 'env')!r})"
                   ".write_text(os.environ.get('NCCL_P2P_DIRECT_DISABLE', '-'))\n"
                   f"with open({str(tmp_path / 'began')!r}, 'a') as f: f.write(f'{{time.time()}}\\n')\n"
                   "time.sleep(1.1)\n")
    proc = _gpubench("run", "--suite", "comm", "--engine", "nccl-tests", "--nccl-tests-dir", bindir,
                     "--collectives", "all_reduce", "--min-bytes", "1M", "--max-bytes", "8G", "--step-factor", "4",
                     "--nproc", "2", "--out", tmp_path / "r", "--cluster", "t", *(["--register"] * register),
                     *(["--nccl-tests-layout", layout] if layout else []),
                     timeout=120, env={"NCCL_P2P_DIRECT_DISABLE": "1", "NCCL_IB_SECRET": "s3cr3t"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    # One thread per GPU by default (-t 2 -g 1: one rank per GPU, as the torch engine lays them out); -g 2, one
    # thread driving both, only when asked.
    ranks = "-g 2" if layout else "-t 2 -g 1"
    # The sweep in two runs of the binary: the sizes under 16 MiB, then the rest (SPLIT_BYTES: a sweep to 4 GiB
    # read nccl-tests' small sizes low after its warm-up at the largest)
    rest = f"-f 4 -d float -o sum -n 20 -w 5 -c 1 {ranks}" + " -R 1" * register
    assert (tmp_path / "argv").read_text().splitlines() == [f"-b 1048576 -e 4194304 {rest}",
                                                            f"-b 16777216 -e 8589934592 {rest}"]
    run = next((tmp_path / "r" / "t").iterdir())
    df = results.load(run)
    assert (df["engine"] == "nccl-tests").all() and (df["world_size"] == 2).all()
    # How it measured, in the columns a gpubench run fills: the log's headers (2.28.9) mean ncclMemAlloc, its
    # header says graph: 0, and the engine knows the -R it passed.
    assert [set(df[c]) for c in ("graph", "alloc", "register")] == [{False}, {"nccl"}, {register}]
    printed = [line.split() for line in log.read_text().splitlines() if line.strip()[:1].isdigit()]
    busbw = df[(df.metric == "busbw") & (~df.inplace)].set_index("bytes")["value"]
    assert sorted(busbw.index) == sorted(int(row[0]) for row in printed)  # every size once, from either run
    for row in printed:
        assert busbw[int(row[0])] == float(row[7])  # out-of-place busbw, exactly as printed
    meta = json.loads((run / "run.json").read_text())
    assert len(meta["engine"]["runs"]) == 2 and meta["engine"]["split_bytes"] == 16 << 20
    assert " ".join(meta["engine"]["runs"][0]["command"]).endswith(ranks + " -R 1" * register)
    assert meta["engine"]["register"] is register
    # The run began when its first binary run did, not when its logs were imported after the last.
    began = [float(t) for t in (tmp_path / "began").read_text().split()]
    start, end = (dt.datetime.fromisoformat(meta[k]).timestamp() for k in ("start_time", "end_time"))
    assert start <= min(began) < max(began) <= end
    # The layout, in run.json and in every row.
    name = "thread per 2 GPUs" if layout else "thread per GPU"
    assert (meta["engine"]["layout"], set(df["layout"])) == (name, {name})
    # The binary ran with the caller's NCCL settings, and the run records them (never what looks like a secret).
    assert (tmp_path / "env").read_text() == "1"
    env = meta["fingerprint"]["volatile"]["env"]
    assert env["NCCL_P2P_DIRECT_DISABLE"] == "1" and "NCCL_IB_SECRET" not in env
    assert (run / meta["engine"]["runs"][0]["log"]).read_text().startswith(log.read_text()[:40])


@pytest.mark.parametrize("sig,code,said", [(signal.SIGINT, 130, "interrupted (SIGINT)"),
                                            (signal.SIGTERM, 143, "stopped by SIGTERM")], ids=["ctrl-c", "sigterm"])
def test_engine_nccl_tests_stopped_mid_sweep_keeps_what_finished_and_leaves_no_binary(tmp_path, sig, code, said):
    # all_reduce_perf prints its log; all_gather_perf, next, notes its pid and hangs. The binaries run in a session of
    # their own (neither a terminal's Ctrl-C nor a signal to gpubench reaches them): the sweep must end them itself,
    # and keep the all_reduce rows, not lose them with its staging folder.
    log = ROOT / "tests" / "fixtures" / "nccl-tests" / "nt-2.19.6-all_reduce-h200x2.txt"
    bindir, pidfile = tmp_path / "bin", tmp_path / "gather.pid"
    bindir.mkdir()
    write_stand_in(bindir / "all_reduce_perf", log, tmp_path / "argv")
    write_stand_in(bindir / "all_gather_perf", log, tmp_path / "argv",
                   before=f"import os, time\npathlib.Path({str(pidfile)!r}).write_text(str(os.getpid()))\n"
                          "time.sleep(300)\n")
    proc = subprocess.Popen([sys.executable, "-m", "gpubench", "run", "--suite", "comm", "--engine", "nccl-tests",
                             "--nccl-tests-dir", str(bindir), "--collectives", "all_reduce,all_gather",
                             "--min-bytes", "1M", "--max-bytes", "8M", "--nproc", "2", "--out", str(tmp_path / "r"),
                             "--cluster", "t"], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 180
        while not (pidfile.exists() and pidfile.read_text()) and time.monotonic() < deadline:
            assert proc.poll() is None, proc.communicate()
            time.sleep(0.1)
        gather = int(pidfile.read_text())
        proc.send_signal(sig)
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == code, err[-2000:]
    run = _only_run(tmp_path / "r")
    assert f"gpubench: {said}; the nccl-tests runs that finished are kept: {run}" in err
    meta = json.loads((run / "run.json").read_text())
    assert meta["status"] == "interrupted" and said in meta["error"]
    df = results.load(run)
    assert set(df["collective"]) == {"all_reduce"} and (df["status"] == "ok").any()
    assert [r["log"] for r in meta["engine"]["runs"]] == ["all_reduce-float32-sum.log"]
    # the hung binary is gone (ended and reaped by the sweep, not left on the GPUs)
    deadline = time.monotonic() + 30
    while Path(f"/proc/{gather}").exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not Path(f"/proc/{gather}").exists()


def _fake_launcher(tmp_path, ranks: int, joined: bool) -> Path:
    """A stand-in `mpirun -np N BIN ARGS`: an MPI build (joined) prints one world's table once, as rank 0 does;
    a build without MPI starts N unrelated processes, each printing a world of one GPU."""
    fixture = ROOT / "tests" / "fixtures" / "nccl-tests" / "nt-2.19.6-all_reduce-h200x2.txt"
    text = fixture.read_text()
    if not joined:  # one device line: each process is its own world
        text = "\n".join(line for line in text.splitlines() if "Rank  1 Group" not in line)
    (tmp_path / "printed.txt").write_text(text)
    bindir = tmp_path / "bin"
    bindir.mkdir()
    write_stand_in(bindir / "all_reduce_perf", tmp_path / "printed.txt", tmp_path / "argv")
    launcher = tmp_path / "mpirun"
    launcher.write_text(f"#!{sys.executable}\nimport subprocess, sys, pathlib\n"
                        f"with open({str(tmp_path / 'launched')!r}, 'a') as f: f.write(' '.join(sys.argv[1:]) + '\\n')\n"
                        "n = int(sys.argv[2])  # mpirun -np N BIN ARGS\n"
                        f"for _ in range(1 if {joined} else n):\n"
                        "    subprocess.run(sys.argv[3:], check=True)\n")
    launcher.chmod(0o755)
    return bindir


@pytest.mark.parametrize("joined", [True, False], ids=["mpi-build", "no-mpi-build"])
def test_engine_nccl_tests_under_a_launcher_runs_one_gpu_per_process(tmp_path, joined):
    # One process per GPU (the torch engine's layout): -g 1 under the launcher, and a log whose world is not
    # the --nproc ranks asked for (a build without MPI) is refused, not imported as a world of one.
    bindir = _fake_launcher(tmp_path, 2, joined)
    proc = _gpubench("run", "--suite", "comm", "--engine", "nccl-tests", "--nccl-tests-dir", bindir,
                     "--nccl-tests-launcher", f"{tmp_path / 'mpirun'} -np 2", "--collectives", "all_reduce",
                     "--min-bytes", "1M", "--max-bytes", "8G", "--step-factor", "4", "--nproc", "2",
                     "--out", tmp_path / "r", "--cluster", "t", timeout=120)
    launched = (tmp_path / "launched").read_text().splitlines()[0]
    assert launched.startswith(f"-np 2 {bindir / 'all_reduce_perf'} -b 1048576") and launched.endswith("-g 1")
    if joined:
        assert proc.returncode == 0, proc.stderr[-3000:]
        run = next((tmp_path / "r" / "t").iterdir())
        assert (results.load(run)["world_size"] == 2).all()
        meta = json.loads((run / "run.json").read_text())
        assert meta["engine"]["launcher"] == [str(tmp_path / "mpirun"), "-np", "2"]
        assert meta["engine"]["runs"][0]["command"][:3] == meta["engine"]["launcher"]
        assert meta["engine"]["layout"] == "process per GPU" and "-t" not in meta["engine"]["runs"][0]["command"]
    else:
        assert proc.returncode == 2, proc.stderr[-3000:]
        assert "world size 1, expected 2" in proc.stderr and "make MPI=1" in proc.stderr, proc.stderr[-3000:]
        assert not (tmp_path / "r" / "t").exists() or not any((tmp_path / "r" / "t").iterdir())


def test_engine_nccl_tests_launcher_errors_are_one_line_exit_2(tmp_path):
    binary = tmp_path / "all_reduce_perf"
    binary.write_text("#!/bin/sh\n")
    binary.chmod(0o755)
    for engine, launcher, said in (("nccl-tests", "no-such-mpirun -np 2", "not on PATH"),
                                   ("nccl-tests", "mpirun 'unclosed", "--nccl-tests-launcher"),
                                   ("torch", "mpirun -np 2", "add --engine nccl-tests")):
        proc = _gpubench("run", "--suite", "comm", "--engine", engine, "--nccl-tests-dir", tmp_path,
                         "--nccl-tests-launcher", launcher, "--collectives", "all_reduce", "--nproc", "2",
                         "--out", tmp_path / "r", timeout=120)
        assert proc.returncode == 2 and said in proc.stderr, proc.stderr[-2000:]
        assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    for engine, extra, said in (("torch", ["--nccl-tests-layout", "one-thread"], "add --engine nccl-tests"),
                                ("nccl-tests", ["--nccl-tests-layout", "one-thread", "--nccl-tests-launcher",
                                                "mpirun -np 2"], "leave --nccl-tests-launcher out")):
        proc = _gpubench("run", "--suite", "comm", "--engine", engine, "--nccl-tests-dir", tmp_path, *extra,
                         "--collectives", "all_reduce", "--nproc", "2", "--out", tmp_path / "r", timeout=120)
        assert proc.returncode == 2 and said in proc.stderr, proc.stderr[-2000:]
    assert not (tmp_path / "r").exists()


def test_engine_nccl_tests_names_where_it_looked_when_the_binary_is_missing(tmp_path):
    proc = _gpubench("run", "--suite", "comm", "--engine", "nccl-tests", "--nccl-tests-dir", tmp_path,
                     "--nproc", "2", "--out", tmp_path / "r", timeout=120, env={"NCCL_TESTS_DIR": ""})
    assert proc.returncode == 2 and str(tmp_path) in proc.stderr and "NCCL_TESTS_DIR" in proc.stderr


def test_laggards_name_the_missing_the_silent_and_the_store():
    from gpubench.ranks.beats import laggards

    beats = {0: {"step": 5, "where": "case a", "time": 100.0},
             2: {"step": 3, "where": "case a", "time": 90.0, "pid": 42, "host": "gpu07"}}
    assert laggards(beats, 3, now=100.0, stale_s=3) == ("rank 1 never started; rank 2 (pid 42 on gpu07) silent for 10 s "
                                                        "(dead or stopped) in case a")
    # No heartbeat at all: the store itself is out of reach (a SIGKILLed spawner took it along), said so.
    assert "rendezvous store" in laggards({}, 2, now=0.0, stale_s=3)


def test_a_stale_beat_loses_a_rank_elsewhere_or_gone_but_not_one_running_here():
    # A beat 10 s old: on another machine the rank is lost (nothing else to go by); on this one, a process that
    # runs only waited for a core (a busy host), and one that ended is gone.
    from gpubench.ranks.beats import laggards, lost, machine, started

    here = machine()
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    me = {"step": 1, "where": "case a", "time": 90.0, "pid": os.getpid(), "host": "h", "machine": here,
          "start": started(os.getpid())}
    fresh = {**me, "time": 100.0}
    for beat, is_lost in [(me, False), ({**me, "machine": "elsewhere"}, True), ({**me, "pid": dead.pid}, True)]:
        assert lost({0: fresh, 1: beat}, 2, now=100.0, stale_s=3, here=here) == ([1] if is_lost else []), beat
    words = laggards({0: fresh, 1: me}, 2, now=100.0, stale_s=3, here=here, me=0)
    assert "silent for 10 s (its process runs here: starved of CPU or wedged)" in words, words


def test_a_rank_that_starts_before_its_store_waits_for_it_longer_than_the_timeout(tmp_path):
    # Launched by hand as torchrun's variables say (rank 0 hosts the store): rank 1 starts 6 s before rank 0,
    # with --timeout 6, so that the store comes up past the timeout of rank 1's start. The group comes up once rank 0
    # does and the run completes; rank 1 neither gives up on the store (it waits up to --timeout + 5 s once its
    # imports are done: tests/test_fleet_rendezvous.py holds that bound) nor calls rank 0 lost in the meantime.
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    base = {**os.environ, "WORLD_SIZE": "2", "LOCAL_WORLD_SIZE": "2", "MASTER_ADDR": "127.0.0.1",
            "MASTER_PORT": str(port)}
    args = [sys.executable, "-m", "gpubench", "run", "--suite", "comm", "--backend", "cpu", "--out", str(tmp_path),
            "--cluster", "t", "--timeout", "6", "--collectives", "all_reduce", "--min-bytes", "1K", "--max-bytes", "4K"]
    procs = []
    try:
        for rank, delay in ((1, 0), (0, 6)):
            time.sleep(delay)
            procs.append(subprocess.Popen(args, cwd=ROOT, env={**base, "RANK": str(rank), "LOCAL_RANK": str(rank)},
                                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
        outs = [p.communicate(timeout=240) for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    assert [p.returncode for p in procs] == [0, 0], [o[1][-2000:] for o in outs]
    meta = json.loads((_only_run(tmp_path) / "run.json").read_text())
    assert meta["status"] == "complete" and meta["dist"]["world_size"] == 2


def test_a_store_that_does_not_answer_loses_a_peer_only_where_its_host_is_not_known_to_run():
    # On a signal a rank reads the store for 0.4 s to learn whether a peer was lost first. Where rank 0 hosts the
    # store on this machine and its process runs, a store that did not answer in time was slow (a loaded host):
    # nobody is known lost, and the run ends as this rank's signal says. Where rank 0 is gone, or runs elsewhere
    # (nothing to look at), the unanswered store stands for a lost peer, as before.
    from gpubench.ranks import beats
    from gpubench.ranks.group import Group
    from gpubench.ranks.store import BoundedStore, TcpRendezvous

    class Silent:
        def check(self, keys):
            raise TimeoutError("no answer")

    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    here = beats.machine()
    group = object.__new__(Group)
    group.rank, group.world_size, group.timeout_s, group._here = 1, 2, 8.0, here
    group._store_host, group._rdv = "rank 0", TcpRendezvous("127.0.0.1", 1, 2)
    group._reader = BoundedStore(lambda: Silent(), 0.2)
    for rank0, lost in [({"pid": os.getpid(), "machine": here, "start": beats.started(os.getpid())}, False),
                        ({"pid": dead.pid, "machine": here}, True),
                        ({"pid": os.getpid(), "machine": "elsewhere"}, True),
                        (None, True)]:
        group._roster = {0: rank0} if rank0 else {}
        words, status, said_lost = group.account(deadline_s=0.2)
        assert said_lost is lost and status == "failed" and "which hosts it" in words, (rank0, words)
    # Rank 0 itself hosts the store: unanswered, it was slow, whether or not its roster holds its own beat yet.
    group.rank, group._roster = 0, {}
    words, status, said_lost = group.account(deadline_s=0.2)
    assert said_lost is False and "this rank hosts" in words, words
    # gpubench's spawner hosts it: slow while the spawner is still this rank's parent and runs; lost where this rank
    # has another parent now (the spawner is gone) or the spawner is stopped.
    from unittest import mock

    from gpubench.ranks.group import SPAWNER
    from gpubench.machine.procfs import proc_stat

    group._store_host, group._spawner = SPAWNER, os.getppid()
    words, status, said_lost = group.account(deadline_s=0.2)
    assert said_lost is False and "spawner (pid" in words and "running" in words, words
    group._spawner = dead.pid
    words, status, said_lost = group.account(deadline_s=0.2)
    assert said_lost is True and "which hosts it, is stopped, gone or out of reach" in words, words
    stopped = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        os.kill(stopped.pid, signal.SIGSTOP)
        for _ in range(100):
            if (proc_stat(stopped.pid) or ("",))[0] in ("T", "t"):
                break
            time.sleep(0.05)
        group._spawner = stopped.pid
        with mock.patch.object(os, "getppid", return_value=stopped.pid):
            words, status, said_lost = group.account(deadline_s=0.2)
        assert said_lost is True and "which hosts it" in words, words
    finally:
        stopped.kill()
        stopped.wait()


def test_a_rank_s_first_beat_is_tried_again_while_the_group_comes_up():
    # The store's host is busy starting too: a first beat that fails (refused, unanswered) is tried again until the
    # start's grace is over, then the failure stands.
    from gpubench.ranks.group import Group
    from gpubench.ranks.store import BoundedStore

    tries = []

    class Store:
        def set(self, key, value):
            tries.append(key)
            if len(tries) < 3:
                raise ConnectionRefusedError("not yet")

    group = object.__new__(Group)
    group.rank, group._step, group._where, group._last_change, group._ended = 1, 0, "", time.time(), None
    group._started, group._here = 0.0, "here"
    group._writer = BoundedStore(lambda: Store(), 1.0)
    group._first_beat(time.time() + 10)
    assert len(tries) == 3
    tries.clear()
    with pytest.raises(ConnectionRefusedError):
        group._first_beat(time.time() - 1)  # the grace is over: the first failure stands
    assert len(tries) == 1


def test_a_stalled_rank_waits_for_a_peer_still_at_work_but_not_for_a_silent_or_idle_one():
    # Rank 1 waits in a gather for rank 0, which a loaded host slows: while rank 0's heartbeat is fresh and
    # it moved within the timeout, rank 1's watchdog waits; once rank 0 is silent (stopped, dead), missing, or
    # has not moved either (the operation hung), it does not.
    from gpubench.ranks.group import Group
    from gpubench.ranks.store import BoundedStore

    class Store:
        def __init__(self, beats):
            self.beats = {f"gpubench/hb/{r}": json.dumps(b) for r, b in beats.items()}

        def check(self, keys):
            return all(k in self.beats for k in keys)

        def get(self, key):
            return self.beats[key].encode()

    now = time.time()
    me = {"step": 3, "where": "c", "time": now, "moved": now - 20}
    group = object.__new__(Group)
    group.rank, group.world_size, group.timeout_s = 1, 2, 8.0
    group._starting_until = now - 60  # the group came up long ago
    for peer, waits in [({"time": now - 0.4, "moved": now - 1}, True),  # at work
                        ({"time": now - 0.4, "moved": now - 9}, False),  # alive, not moving: a hang
                        ({"time": now - 6, "moved": now - 6.5}, False),  # silent: stopped or dead
                        (None, False)]:  # never started
        beats = {1: me} if peer is None else {0: {"step": 9, "where": "c", **peer}, 1: me}
        group._reader, group._roster, group._here = BoundedStore(lambda b=beats: Store(b), 5.0), {}, "here"
        assert group._others_moving() is waits, peer
    # While the group comes up (this rank started 20 s ago, --timeout 8), a peer that has not started yet is still
    # coming: the rank waits for it, up to a minute from its start; a peer that started and fell silent is lost.
    group._starting_until = now + 40
    for peer, waits in [(None, True), ({"time": now - 6, "moved": now - 6.5}, False)]:
        beats = {1: me} if peer is None else {0: {"step": 9, "where": "c", **peer}, 1: me}
        group._reader = BoundedStore(lambda b=beats: Store(b), 5.0)
        assert group._others_moving() is waits, peer
    # A peer that started but is still setting up (its first beat, or in the process group's init) last moved
    # before it waited for the store: while the group comes up it is still coming, not hung; after, it is hung.
    for where in ("", "init"):
        beats = {0: {"step": 1, "where": where, "time": now - 0.4, "moved": now - 12}, 1: me}
        group._reader, group._starting_until = BoundedStore(lambda b=beats: Store(b), 5.0), now + 40
        assert group._others_moving() is True, where
        group._starting_until = now - 1
        assert group._others_moving() is False, where
    group._starting_until = now - 1
    group._reader = BoundedStore(lambda: Store({1: me}), 5.0)
    assert group._others_moving() is False
