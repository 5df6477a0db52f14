"""The autotune suite's knob sweep: the grid and what may be swept, winners against the default beyond noise,
the exports NCCL loads, and a real sweep of child comm runs over gloo on CPU (fresh processes per config)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from gpubench import results
from gpubench.suites.autotune import exports, knobs, winners
from gpubench.suites.autotune.sweep import child_argv
from gpubench.errors import UsageError
from gpubench.ranks.python import module_command
from gpubench.request import Conduct, Placement, RunRequest, Selection

ROOT = Path(__file__).resolve().parent.parent


def test_grid_default_first_then_the_product():
    cfgs = knobs.configs({"NCCL_ALGO": ["Ring", "Tree"], "NCCL_PROTO": ["LL", "Simple"]})
    assert [c.name for c in cfgs] == ["default", "NCCL_ALGO=Ring,NCCL_PROTO=LL", "NCCL_ALGO=Ring,NCCL_PROTO=Simple",
                                      "NCCL_ALGO=Tree,NCCL_PROTO=LL", "NCCL_ALGO=Tree,NCCL_PROTO=Simple"]
    assert cfgs[0].env == () and cfgs[3].get("NCCL_ALGO") == "Tree"


def test_knob_parsing_and_what_may_never_be_swept(tmp_path):
    assert knobs.parse_knobs(["NCCL_ALGO=Ring,Tree", "NCCL_MAX_NCHANNELS=8,16"]) == {
        "NCCL_ALGO": ["Ring", "Tree"], "NCCL_MAX_NCHANNELS": ["8", "16"]}
    for bad, why in [("NCCL_IB_HCA=mlx5_0", "site setting"), ("NCCL_SOCKET_IFNAME=eth0", "site setting"),
                     ("NCCL_P2P_LEVEL=NVL", "site setting"), ("NCCL_NVLS_ENABLE=1", "site setting"),
                     ("NCCL_DEBUG=INFO", "not a knob"), ("NCCL_ALGO", "NAME=VALUE"), ("NCCL_ALGO=", "NAME=VALUE")]:
        with pytest.raises(UsageError, match=why):
            knobs.parse_knobs([bad])
    grid = tmp_path / "g.toml"
    grid.write_text('[knobs]\nNCCL_PROTO = ["LL", "Simple"]\nNCCL_BUFFSIZE = 4194304\n')
    assert knobs.load_grid(grid) == {"NCCL_PROTO": ["LL", "Simple"], "NCCL_BUFFSIZE": ["4194304"]}
    grid.write_text('[other]\nx = 1\n')
    with pytest.raises(UsageError, match=r"no \[knobs\]"):
        knobs.load_grid(grid)


def _row(config, size, samples, coll="all_reduce", valid=True, status="ok"):
    return {"config": config, "collective": coll, "bytes": size, "dtype": "float32", "op": "sum", "inplace": True,
            "metric": "busbw", "status": status, "valid": valid, "value": float(np.median(samples)),
            "samples": list(samples)}


def _sweep_frame():
    rng = np.random.default_rng(0)
    tight = lambda m: m * (1 + 0.002 * rng.standard_normal(10))  # noqa: E731
    rows = []
    for size in (1 << 20, 1 << 26):
        rows.append(_row("default", size, tight(100.0)))
        rows.append(_row("NCCL_ALGO=Ring,NCCL_PROTO=LL", size, tight(120.0 if size == 1 << 20 else 90.0)))
        rows.append(_row("NCCL_ALGO=Ring,NCCL_PROTO=Simple", size, tight(100.1 if size == 1 << 20 else 110.0)))
        # fastest of all, but it corrupted data: never a winner
        rows.append(_row("NCCL_ALGO=Tree,NCCL_PROTO=LL128", size, tight(500.0), valid=False))
    return pd.DataFrame(rows)


def test_winners_beat_the_default_beyond_noise_and_invalid_configs_never_win():
    w = winners.table(_sweep_frame())
    small, large = w.iloc[0], w.iloc[1]
    assert small["winner"] == "NCCL_ALGO=Ring,NCCL_PROTO=LL" and small["speedup"] == pytest.approx(1.2, rel=0.01)
    assert small["beyond_noise"] and small["p_value"] < 0.01
    assert large["winner"] == "NCCL_ALGO=Ring,NCCL_PROTO=Simple" and large["beyond_noise"]
    assert (w["configs"] == 3).all()  # the invalid config is not among the candidates


def test_a_tie_with_the_default_is_not_beyond_noise():
    rng = np.random.default_rng(1)
    rows = [_row("default", 1 << 20, 100 + rng.standard_normal(10)),
            _row("NCCL_PROTO=LL", 1 << 20, 100.2 + rng.standard_normal(10))]
    w = winners.table(pd.DataFrame(rows))
    assert not w.iloc[0]["beyond_noise"]


def test_a_win_on_noisy_rows_is_not_beyond_noise_and_does_not_choose_the_single_config():
    df = _sweep_frame()
    small = (df["bytes"] == 1 << 20)
    df["noisy"] = small & (df["config"] == "default")  # the default's 1 MiB figure is noisy
    w = winners.table(df)
    assert w.iloc[0]["winner"] == "NCCL_ALGO=Ring,NCCL_PROTO=LL" and w.iloc[0]["p_value"] < 0.01
    assert w.iloc[0]["noisy"] and not w.iloc[0]["beyond_noise"]
    assert w.iloc[1]["beyond_noise"] and not w.iloc[1]["noisy"]
    # Judged on the quiet 64 MiB case alone: Ring/Simple (1.1) over Ring/LL (0.9).
    name, score = winners.best_single(df)
    assert name == "NCCL_ALGO=Ring,NCCL_PROTO=Simple" and score == pytest.approx(1.1, rel=0.01)


def test_best_single_config_is_valid_everywhere_and_best_on_geometric_mean():
    name, score = winners.best_single(_sweep_frame())
    # Ring/LL: 1.2 and 0.9 → 1.039; Ring/Simple: 1.001 and 1.1 → 1.049
    assert name == "NCCL_ALGO=Ring,NCCL_PROTO=Simple" and score == pytest.approx((1.001 * 1.1) ** 0.5, rel=0.01)


def test_exports_env_file_and_tuner_csv():
    env = exports.env_file("NCCL_ALGO=Ring,NCCL_PROTO=Simple", 1.05, "run r")
    assert "NCCL_ALGO=Ring\nNCCL_PROTO=Simple\n" in env and env.startswith("#")
    assert "nothing to set" in exports.env_file("default", 1.0, "run r")
    text = exports.tuner_csv(winners.table(_sweep_frame()), nnodes=1, nranks=2)
    lines = [line for line in text.splitlines() if not line.startswith("#")]
    assert lines[0] == exports.HEADER
    small, large = (line.split(",") for line in lines[1:])
    mid = int((2**20 * 2**26) ** 0.5)
    assert small == ["allreduce", "0", str(mid), "ring", "ll", "-1", "1", "2", "-1", "-1"]
    assert large == ["allreduce", str(mid + 1), str(exports.MAX_BYTES), "ring", "simple", "-1", "1", "2", "-1", "-1"]


def test_tuner_csv_leaves_ties_partial_configs_and_untunable_collectives_to_nccl():
    w = pd.DataFrame([
        {"collective": "all_gather", "bytes": 1, "dtype": "float32", "op": "none", "inplace": False,
         "winner": "NCCL_PROTO=LL", "beyond_noise": True},  # no algorithm: the tuner needs both
        {"collective": "all_gather", "bytes": 2, "dtype": "float32", "op": "none", "inplace": False,
         "winner": "NCCL_ALGO=Ring,NCCL_PROTO=LL", "beyond_noise": False},  # a tie
        {"collective": "alltoall", "bytes": 1, "dtype": "float32", "op": "none", "inplace": False,
         "winner": "NCCL_ALGO=Ring,NCCL_PROTO=LL", "beyond_noise": True},  # not a tuner collective
    ])
    lines = [line for line in exports.tuner_csv(w, 1, 2).splitlines() if not line.startswith("#")]
    assert lines == [exports.HEADER]
    w = pd.DataFrame([{"collective": "reduce_scatter", "bytes": 8, "dtype": "float32", "op": "sum", "inplace": False,
                       "winner": "NCCL_ALGO=Tree,NCCL_PROTO=LL128,NCCL_MIN_NCHANNELS=8,NCCL_MAX_NCHANNELS=8",
                       "beyond_noise": True}])
    assert exports.tuner_csv(w, 2, 16).splitlines()[-1] == f"reducescatter,0,{exports.MAX_BYTES},tree,ll128,8,2,16,-1,-1"


def _request(quick: bool = False, **given) -> RunRequest:
    """A checked ``gpubench run`` as the CLI makes it: comm's options as argparse leaves them in ``given``."""
    return RunRequest(what=Selection(given=given), where=Placement(backend="cpu"),
                      how=Conduct(quick=quick, telemetry=False, cluster="c"))


def test_child_argv_passes_the_comm_options():
    from gpubench.suites.comm import OPTIONS

    # As argparse leaves them: sizes parsed to bytes, lists split, the timeout a float.
    given = dict(min_bytes=1024, max_bytes=None, step_factor=4, op=["sum", "max"], collectives=["all_reduce"],
                 nproc=3, timeout=30.0, graph=False, engine="torch")
    argv = child_argv(_request(quick=True, **given), Path("/o"), "comm", OPTIONS)
    start = module_command("gpubench")  # no folder named gpubench where the sweep runs can shadow the package
    assert argv[:len(start)] == start and argv[len(start):] == [
        "run", "--suite", "comm", "--out", "/o", "--cluster", "c", "--backend", "cpu", "--min-bytes", "1024",
        "--step-factor", "4", "--op", "sum,max", "--collectives", "all_reduce", "--nproc", "3", "--timeout", "30.0",
        "--quick", "--no-telemetry"]
    # A sweep of NCCL knobs over registered NCCL buffers: every child run allocates and registers them.
    given.update(alloc="nccl", register=True, graph=True)
    assert child_argv(_request(quick=True, **given), Path("/o"), "comm", OPTIONS)[-12:] == [
        "--op", "sum,max", "--collectives", "all_reduce", "--graph", "--alloc", "nccl", "--register", "--nproc", "3",
        "--timeout", "30.0"][-10:] + ["--quick", "--no-telemetry"]
    # Every comm option a user can give reaches the child: the child command line is made from comm's declaration.
    every = {o.dest: (True if o.switch else ["x"] if o.dest in ("op", "collectives") else "v") for o in OPTIONS}
    assert {o.flag for o in OPTIONS} - {"--engine", "--nccl-tests-dir", "--nccl-tests-launcher"} <= set(
        child_argv(_request(**every), Path("/o"), "comm", OPTIONS))


def _gpubench(*args, timeout=600):
    return subprocess.run([sys.executable, "-m", "gpubench", *map(str, args)], capture_output=True, text=True,
                          timeout=timeout, cwd=ROOT, env=dict(os.environ))


def test_a_cpu_sweep_runs_each_config_in_fresh_processes_and_writes_the_exports(tmp_path):
    # gloo ignores NCCL's knobs, so every config measures the same thing: the plumbing is what is tested.
    proc = _gpubench("run", "--suite", "autotune", "--backend", "cpu", "--knob", "NCCL_PROTO=LL,Simple",
                     "--collectives", "all_reduce", "--min-bytes", "1K", "--max-bytes", "4K", "--step-factor", "4",
                     "--out", tmp_path, "--cluster", "t", "--no-telemetry")
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    (run,) = [p for p in (tmp_path / "t").iterdir() if p.is_dir()]
    df = results.load(run)
    assert set(df["suite"]) == {"autotune"} and df["run_id"].nunique() == 1
    assert list(dict.fromkeys(df["config"])) == ["default", "NCCL_PROTO=LL", "NCCL_PROTO=Simple"]
    assert set(df.loc[df["config"] == "NCCL_PROTO=LL", "NCCL_PROTO"]) == {"LL"}
    assert (df["status"] == "ok").all() and df["case"].nunique() == 3 * 2
    # each config ran in its own child run (its own processes), kept inside the autotune run
    assert df["config_run"].nunique() == 3 and len(list((run / "configs").glob("*.log"))) == 3
    meta = json.loads((run / "run.json").read_text())
    assert meta["status"] == "complete" and meta["autotune"]["configs"][0] == "default"
    assert meta["dist"]["world_size"] == 2 and meta.get("fingerprint")
    assert (run / "winners.csv").exists() and (run / "best.env").read_text().startswith("#")
    assert (run / "nccl-tuner.csv").read_text().splitlines()[1] == exports.HEADER
    assert "autotune winners" in proc.stdout


def test_a_config_nccl_rejects_is_an_error_row_and_the_sweep_goes_on(tmp_path, monkeypatch):
    from gpubench.suites.autotune import sweep
    from gpubench.suites.autotune import COMM_OPTIONS, Autotune

    real = sweep.subprocess.run

    def run(cmd, env=None, **kw):
        if env and env.get("NCCL_PROTO") == "LL128":  # what NCCL >= 2.24 does with an impossible choice
            cmd = [sys.executable, "-c", "import sys; print('NCCL WARN No algorithm/protocol available'); sys.exit(1)"]
        return real(cmd, env=env, **kw)

    monkeypatch.setattr(sweep.subprocess, "run", run)
    request = RunRequest(
        what=Selection(given=dict(min_bytes="1K", max_bytes="1K", step_factor=None, op=None, collectives="all_reduce",
                                  nproc=None, timeout=60.0, graph=False, knob=["NCCL_PROTO=LL128,Simple"], grid=None,
                                  budget=None)),
        where=Placement(backend="cpu"), how=Conduct(telemetry=False, out=str(tmp_path), cluster="t"))
    assert sweep.run(request, Autotune.version, Autotune.params, COMM_OPTIONS) == 0
    (run,) = [p for p in (tmp_path / "t").iterdir() if p.is_dir()]
    df = results.load(run)
    by = df.drop_duplicates("config").set_index("config")["status"].to_dict()
    assert by == {"default": "ok", "NCCL_PROTO=LL128": "error", "NCCL_PROTO=Simple": "ok"}
    assert "No algorithm/protocol" in df.loc[df["config"] == "NCCL_PROTO=LL128", "message"].iloc[0]


def test_the_budget_skips_what_would_not_fit(tmp_path):
    proc = _gpubench("run", "--suite", "autotune", "--backend", "cpu", "--knob", "NCCL_PROTO=LL,Simple",
                     "--collectives", "all_reduce", "--min-bytes", "1K", "--max-bytes", "1K", "--budget", "0.001",
                     "--out", tmp_path, "--cluster", "t", "--no-telemetry")
    assert proc.returncode == 0, proc.stderr[-2000:]
    (run,) = [p for p in (tmp_path / "t").iterdir() if p.is_dir()]
    df = results.load(run)
    by = df.drop_duplicates("config").set_index("config")["status"].to_dict()
    assert by == {"default": "ok", "NCCL_PROTO=LL": "skipped", "NCCL_PROTO=Simple": "skipped"}
    assert "--budget" in df.loc[df["status"] == "skipped", "message"].iloc[0]


def test_bad_autotune_input_exits_2_before_anything_is_written(tmp_path):
    for args, why in [(["--knob", "NCCL_IB_HCA=x"], "site setting"), (["--budget", "0"], "--budget"),
                      (["--knob", "NCCL_PROTO=LL", "--grid", "g.toml"], "not both"),
                      (["--devices", "all"], "runs alone")]:
        proc = _gpubench("run", "--suite", "autotune", "--backend", "cpu", *args, "--out", tmp_path / "x")
        assert proc.returncode == 2 and why in proc.stderr and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert not (tmp_path / "x").exists()
