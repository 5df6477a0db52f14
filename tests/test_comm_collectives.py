"""comm's collectives beyond nccl-tests' classic seven (gather, scatter, hypercube, alltoallv, bisection), run for
real among gloo processes started by gpubench's spawner and by torchrun: data checked, nccl-tests' bandwidths, and
the worlds each cannot run said in one line."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from gpubench import results
from gpubench.suites.comm import table as commtable

ROOT = Path(__file__).resolve().parent.parent
NEW = ("gather", "scatter", "hypercube", "alltoallv", "bisection")
# torch.distributed's forms: gather and scatter in place as nccl-tests lays them out, hypercube as its all-gather.
PLACED = {("gather", False), ("gather", True), ("scatter", False), ("scatter", True), ("hypercube", False),
          ("hypercube", True), ("alltoallv", False), ("bisection", False)}
_LAUNCHED = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT", "SLURM_PROCID", "SLURM_NTASKS")


def _gpubench(out: Path, launcher: str, nproc: int, *args: str, env: dict[str, str] | None = None):
    common = ("run", "--suite", "comm", "--quick", "--out", str(out), "--cluster", "t", *args)
    if launcher == "torchrun":
        cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", str(nproc), "-m",
               "gpubench", *common]
    else:
        cmd = [sys.executable, "-m", "gpubench", *common, "--nproc", str(nproc)]
    clean = {k: v for k, v in os.environ.items() if k not in _LAUNCHED}  # not a launcher's rank, if run under one
    return subprocess.run(cmd, capture_output=True, text=True, timeout=240, cwd=ROOT, env={**clean, **(env or {})})


def _run(out: Path):
    (run,) = [p for p in (out / "t").iterdir() if p.is_dir()]
    return run, results.load(run)


def _notes(run: Path) -> list[str]:
    return [n for n in json.loads((run / "run.json").read_text())["notes"] if n.startswith("comm: ")]


@pytest.mark.parametrize("launcher", ["spawn", "torchrun"])
@pytest.mark.parametrize("nproc", [2, 4])
def test_every_new_collective_runs_checked_among_gloo_processes(tmp_path, launcher, nproc):
    proc = _gpubench(tmp_path, launcher, nproc, "--backend", "cpu", "--collectives", ",".join(NEW), "--sizes", "64K")
    assert proc.returncode == 0, proc.stderr[-3000:]
    run, df = _run(tmp_path)
    meta = json.loads((run / "run.json").read_text())
    assert meta["status"] == "complete" and meta["dist"]["world_size"] == nproc
    assert meta["dist"]["launcher"] == launcher and not _notes(run)  # every world of 2 or 4 runs them all
    assert set(df["status"]) == {"ok"}, df[df.status != "ok"][["case", "message"]]
    time = df[df.metric == "time"]
    assert set(zip(time.collective, time.inplace)) == PLACED and len(time) == len(PLACED)
    assert time["valid"].all() and (time["wrong"] == 0).all() and (time["world_size"] == nproc).all()
    assert not time["graph"].any()  # gloo on CPUs: eager
    assert {c: set(g) for c, g in time.groupby("collective")["root"]} == {
        c: {0 if c in ("gather", "scatter") else -1} for c in NEW}
    wide = df.pivot_table(index=["case", "collective"], columns="metric", values="value").reset_index()
    for _, r in wide.iterrows():
        assert r["busbw"] == pytest.approx(r["algbw"] * commtable.busbw_factor(r["collective"], nproc))


def test_nccl_tests_bandwidths_and_checks_in_graphs_on_the_fake_backend(tmp_path):
    # Each fake call lasts 2 ms + bytes / 100 GB/s on every rank, and graphs are captured (their replays make the
    # calls again over gloo): algbw is bytes / time but for hypercube, which counts the (n-1)/n it receives.
    proc = _gpubench(tmp_path, "spawn", 4, "--backend", "fake", "--collectives", ",".join(NEW), "--sizes", "1M",
                     env={"GPUBENCH_FAKE_CALL_S": "2e-3", "GPUBENCH_FAKE_GRAPHS": "1"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    _, df = _run(tmp_path)
    time = df[df.metric == "time"]
    assert set(zip(time.collective, time.inplace)) == PLACED
    assert time["graph"].all() and time["valid"].all() and (time["wrong"] == 0).all(), time[["case", "message"]]
    wide = df.pivot_table(index=["collective", "inplace", "bytes"], columns="metric", values="value").reset_index()
    moved = {"hypercube": 0.75}
    busbw = {"gather": 0.75, "scatter": 0.75, "alltoallv": 0.75, "hypercube": 1.0, "bisection": 1.0}
    for _, r in wide.iterrows():
        t = 2e-3 + r["bytes"] / 100e9
        assert r["time"] == pytest.approx(t * 1e6)
        assert r["algbw"] == pytest.approx(r["bytes"] * moved.get(r["collective"], 1.0) / t / 1e9), r["collective"]
        assert r["busbw"] == pytest.approx(r["algbw"] * busbw[r["collective"]]), r["collective"]
    # alltoallv's 1 MiB request among 4 ranks: 16-byte shares of 1/6, 2/6 and 3/6 of it, 16 B under 1 MiB.
    assert set(wide[wide.collective == "alltoallv"]["bytes"]) == {(1 << 20) - 16}


@pytest.mark.parametrize("nproc", [1, 3])
def test_a_world_a_collective_cannot_run_is_one_line(tmp_path, nproc):
    # hypercube needs a power of two, bisection an even world (both 2 or more ranks); gather, scatter and alltoallv
    # run in any world, one rank's included (the library's local copy).
    proc = _gpubench(tmp_path, "spawn", nproc, "--backend", "cpu", "--collectives", ",".join(NEW), "--sizes", "1K")
    assert proc.returncode == 0, proc.stderr[-3000:]
    run, df = _run(tmp_path)
    time = df[df.metric == "time"]
    runs = {(c, p) for c, p in PLACED if c not in ("hypercube", "bisection")}
    assert set(zip(time.collective, time.inplace)) == runs and time["valid"].all() and set(df.status) == {"ok"}
    said = [n for n in _notes(run) if not n.startswith("comm: world of one")]
    assert said == [f"comm: hypercube needs a power-of-two world of 2 or more ranks (nccl-tests' too), not {nproc}: "
                    "not run (1 sizes)",
                    f"comm: bisection needs an even world of 2 or more ranks, not {nproc}: not run (1 sizes)"], said
    assert "skipped" not in proc.stdout and all(line in proc.stdout for line in said)
