"""The autotune suite's knob sweep: the grid and what may be swept, winners against the default beyond noise,
the exports NCCL loads, and a real sweep of child comm runs over gloo on CPU (fresh processes per config)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from gpubench import results
from gpubench.suites.autotune import exports, knobs, winners
from gpubench.suites.autotune.sweep import child_argv
from gpubench.errors import UsageError
from gpubench.run.request import Conduct, Placement, RunRequest, Selection

ROOT = Path(__file__).resolve().parent.parent


def test_grid_default_first_then_the_product():
    cfgs = knobs.configs({"NCCL_ALGO": ["Ring", "Tree"], "NCCL_PROTO": ["LL", "Simple"]})
    assert [c.name for c in cfgs] == ["default", "NCCL_ALGO=Ring,NCCL_PROTO=LL", "NCCL_ALGO=Ring,NCCL_PROTO=Simple",
                                      "NCCL_ALGO=Tree,NCCL_PROTO=LL", "NCCL_ALGO=Tree,NCCL_PROTO=Simple"]
    assert cfgs[0].env == () and cfgs[3].get("NCCL_ALGO") == "Tree"


def test_the_default_runs_three_times_spread_through_the_sweep():
    cfgs = knobs.schedule(knobs.configs({"NCCL_ALGO": ["Ring", "Tree"], "NCCL_PROTO": ["LL", "Simple"]}))
    assert [c.label for c in cfgs] == [
        "default", "NCCL_ALGO=Ring,NCCL_PROTO=LL", "NCCL_ALGO=Ring,NCCL_PROTO=Simple", "default,repeat=2",
        "NCCL_ALGO=Tree,NCCL_PROTO=LL", "NCCL_ALGO=Tree,NCCL_PROTO=Simple", "default,repeat=3"]
    assert [c.name for c in cfgs].count("default") == knobs.DEFAULT_RUNS == 3


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


def _row(config, size, samples, coll="all_reduce", valid=True, status="ok", run=None, inplace=True):
    return {"config": config, "collective": coll, "bytes": size, "dtype": "float32", "op": "sum", "inplace": inplace,
            "metric": "busbw", "status": status, "valid": valid, "value": float(np.median(samples)),
            "samples": list(samples), "config_run": run or config}


def _sweep_frame(levels=(100.0, 100.0, 100.0)):
    """The default's three runs at ``levels``, and three other configurations at two sizes."""
    rng = np.random.default_rng(0)
    tight = lambda m: m * (1 + 0.002 * rng.standard_normal(10))  # noqa: E731
    rows = []
    for size in (1 << 20, 1 << 26):
        rows += [_row("default", size, tight(level), run=f"d{i}") for i, level in enumerate(levels)]
        rows.append(_row("NCCL_ALGO=Ring,NCCL_PROTO=LL", size, tight(120.0 if size == 1 << 20 else 90.0)))
        rows.append(_row("NCCL_ALGO=Ring,NCCL_PROTO=Simple", size, tight(100.1 if size == 1 << 20 else 110.0)))
        # fastest of all, but it corrupted data: never a winner
        rows.append(_row("NCCL_ALGO=Tree,NCCL_PROTO=LL128", size, tight(500.0), valid=False))
    return pd.DataFrame(rows)


def test_winners_beat_the_default_beyond_noise_and_invalid_configs_never_win():
    w = winners.table(_sweep_frame(levels=(100.0, 100.3, 99.8)))
    small, large = w.iloc[0], w.iloc[1]
    assert small["winner"] == "NCCL_ALGO=Ring,NCCL_PROTO=LL" and small["speedup"] == pytest.approx(1.2, rel=0.01)
    assert small["beyond_noise"] and small["p_value"] < 0.01 and small["default_runs"] == 3
    assert large["winner"] == "NCCL_ALGO=Ring,NCCL_PROTO=Simple" and large["beyond_noise"]
    assert (w["configs"] == 3).all()  # the invalid config is not among the candidates


def test_a_gain_within_what_the_defaults_own_runs_disagree_by_is_not_beyond_noise():
    # The default's three runs read 100, 88 and 106 (each tight within itself): a run of another configuration 20%
    # above the median is a draw of that noise, however small its rank test's p; 3x is beyond it.
    df = _sweep_frame(levels=(100.0, 88.0, 106.0))
    df.loc[(df["config"] == "NCCL_ALGO=Ring,NCCL_PROTO=LL") & (df["bytes"] == 1 << 26), "value"] = 300.0
    df.loc[(df["config"] == "NCCL_ALGO=Ring,NCCL_PROTO=LL") & (df["bytes"] == 1 << 26), "samples"] = pd.Series(
        [[300.0 + i for i in range(10)]] * len(df), index=df.index)
    w = winners.table(df)
    small, large = w.iloc[0], w.iloc[1]
    assert small["winner"] == "NCCL_ALGO=Ring,NCCL_PROTO=LL" and small["p_value"] < 0.01
    assert not small["beyond_noise"] and "run-to-run spread" in small["note"]
    assert large["winner"] == "NCCL_ALGO=Ring,NCCL_PROTO=LL" and large["beyond_noise"]


def test_one_run_of_the_default_measures_no_noise_so_nothing_is_beyond_it():
    df = _sweep_frame()
    df = df[~df["config_run"].isin(["d1", "d2"])]
    w = winners.table(df)
    assert not w["beyond_noise"].any() and w["note"].str.contains("needs 3 runs").all()
    best = winners.best_single(df)
    assert not best.beyond_noise and "needs 3 runs" in best.note


def test_a_tie_with_the_default_is_not_beyond_noise():
    rng = np.random.default_rng(1)
    rows = [*(_row("default", 1 << 20, 100 + rng.standard_normal(10), run=f"d{i}") for i in range(3)),
            _row("NCCL_PROTO=LL", 1 << 20, 100.2 + rng.standard_normal(10))]
    w = winners.table(pd.DataFrame(rows))
    assert not w.iloc[0]["beyond_noise"]


def test_a_win_on_noisy_rows_is_not_beyond_noise_and_does_not_choose_the_single_config():
    df = _sweep_frame()
    small = (df["bytes"] == 1 << 20)
    df["noisy"] = small & (df["config_run"] == "d0")  # a default run's 1 MiB figure is noisy
    w = winners.table(df)
    assert w.iloc[0]["winner"] == "NCCL_ALGO=Ring,NCCL_PROTO=LL" and w.iloc[0]["p_value"] < 0.01
    assert w.iloc[0]["noisy"] and not w.iloc[0]["beyond_noise"]
    assert w.iloc[1]["beyond_noise"] and not w.iloc[1]["noisy"]
    # Judged on the quiet 64 MiB case alone: Ring/Simple (1.1) over Ring/LL (0.9).
    best = winners.best_single(df)
    assert best.name == "NCCL_ALGO=Ring,NCCL_PROTO=Simple" and best.score == pytest.approx(1.1, rel=0.01)


def test_best_single_config_is_valid_everywhere_and_best_on_geometric_mean():
    best = winners.best_single(_sweep_frame(levels=(100.0, 100.3, 99.8)))
    # Ring/LL: 1.2 and 0.9 → 1.039; Ring/Simple: 1.001 and 1.1 → 1.049
    assert best.name == "NCCL_ALGO=Ring,NCCL_PROTO=Simple" and best.beyond_noise
    assert best.score == pytest.approx((1.001 * 1.1) ** 0.5, rel=0.01)


def test_best_env_sets_nothing_where_the_best_mean_is_within_the_defaults_own_spread():
    # The sweep: best.env set NCCL_ALGO=Ring for a 1.27x that a rerun did not repeat.
    best = winners.best_single(_sweep_frame(levels=(100.0, 88.0, 106.0)))
    assert best.name == "NCCL_ALGO=Ring,NCCL_PROTO=Simple" and not best.beyond_noise
    env = exports.env_file(best, "run r")
    assert "nothing to set" in env and "NCCL_" not in "".join(l for l in env.splitlines() if not l.startswith("#"))


def test_exports_env_file_and_tuner_csv():
    env = exports.env_file(winners.Best("NCCL_ALGO=Ring,NCCL_PROTO=Simple", 1.05, True, "why"), "run r")
    assert "NCCL_ALGO=Ring\nNCCL_PROTO=Simple\n" in env and env.startswith("#")
    assert "nothing to set" in exports.env_file(winners.Best("default", 1.0, False, ""), "run r")
    text = exports.tuner_csv(winners.table(_sweep_frame(levels=(100.0, 100.3, 99.8))), nnodes=1, nranks=2)
    lines = [line for line in text.splitlines() if not line.startswith("#")]
    assert lines[0] == exports.HEADER
    small, large = (line.split(",") for line in lines[1:])
    mid = int((2**20 * 2**26) ** 0.5)
    assert small == ["allreduce", "0", str(mid), "ring", "ll", "-1", "1", "2", "-1", "-1"]
    assert large == ["allreduce", str(mid + 1), str(exports.MAX_BYTES), "ring", "simple", "-1", "1", "2", "-1", "-1"]


def test_the_winners_table_tells_every_case_apart_at_80_columns(monkeypatch):
    # all_gather and reduce_scatter run in place and out of place: without the placement two lines read alike.
    from gpubench.console import out_console
    from gpubench.suites.autotune.sweep import winners_table

    rows = []
    for coll, places in (("all_reduce", (True,)), ("all_gather", (False, True)), ("reduce_scatter", (False, True))):
        for inplace in places:
            for size in (1 << 10, 1 << 20):
                rows += [_row("default", size, [100.0, 101, 99], coll=coll, inplace=inplace, run=f"d{i}")
                         for i in range(3)]
                rows.append(_row("NCCL_ALGO=Tree,NCCL_PROTO=LL128,NCCL_MAX_NCHANNELS=32", size, [130.0, 131, 129],
                                 coll=coll, inplace=inplace))
    w = winners.table(pd.DataFrame(rows))
    monkeypatch.setenv("COLUMNS", "80")
    console = out_console()
    with console.capture() as cap:
        console.print(winners_table(w))
    lines = cap.get().splitlines()
    assert max(len(line) for line in lines) <= 80
    cells = [re.split(r"\s{2,}", line.strip()) for line in lines]  # the columns stand two spaces apart or more
    keys = [tuple(c[:3]) for c in cells if c[0] in set(w["collective"])]
    assert len(keys) == len(w) == 10 and len(set(keys)) == len(keys), "\n".join(lines)
    assert {k[2] for k in keys if k[0] == "all_gather"} == {"yes", "no"}


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


def _request(quick: bool = False, nproc: int | None = None, timeout: float = 60.0, **given) -> RunRequest:
    """A checked ``gpubench run`` as the CLI makes it: comm's options as argparse leaves them in ``given``."""
    return RunRequest(what=Selection(given=given), where=Placement(backend="cpu", nproc=nproc, timeout=timeout),
                      how=Conduct(quick=quick, telemetry=False, cluster="c"))


def test_child_argv_passes_the_comm_options():
    from gpubench.suites.comm import OPTIONS

    # As argparse leaves them: sizes parsed to bytes, lists split, the timeout a float.
    given = dict(min_bytes=1024, max_bytes=None, step_factor=4, op=["sum", "max"], collectives=["all_reduce"],
                 graph=False, engine="torch", nproc=3, timeout=30.0)
    argv = child_argv(_request(quick=True, **given), Path("/o"), "comm", OPTIONS)
    assert argv == ["gpubench", "run", "--suite", "comm", "--out", "/o", "--cluster", "c", "--backend", "cpu", "--min-bytes", "1024",
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


def test_a_trial_is_given_the_runs_request_itself_with_comm_in_its_place():
    from gpubench.run.request import dumps, loads
    from gpubench.suites.autotune.sweep import trial_request
    from gpubench.suites.comm import Comm

    request = _request(quick=True, nproc=3, timeout=30.0, min_bytes=1024, collectives=["all_reduce"], knob=["X=1"])
    trial = loads(dumps(trial_request(request, Path("/o/01"), Comm())))
    assert [s.name for s in trial.what.suites] == ["comm"] and trial.what.options["comm"]["min_bytes"] == 1024
    assert trial.where == request.where and trial.how == replace(request.how, out="/o/01")
    assert trial.what.given == request.what.given  # every option as the user gave it, autotune's own included
    assert trial.argv == tuple(child_argv(request, Path("/o/01"), "comm", Comm.options))  # what its ranks re-read
    with pytest.raises(UsageError, match="--step-factor 1"):  # comm's own checks, as its command line had them
        trial_request(_request(step_factor=1), Path("/o"), Comm())


def _gpubench(*args, timeout=600, env=None):
    return subprocess.run([sys.executable, "-m", "gpubench", *map(str, args)], capture_output=True, text=True,
                          timeout=timeout, cwd=ROOT, env={**os.environ, **(env or {})})


# Each fake call a real collective over gloo that counts as 10 ms (tests/test_rows_unchanged.py does the same).
FAKE = {"GPUBENCH_FAKE_CALL_S": "0.01"}


def _fake_sweep(tmp_path, *knob_args, env=None):
    """A sweep of all_reduce at 1 and 4 KiB on the fake device, whose first process is slow (1.25x: a slow draw
    of the default's first run) and which takes ``env``'s other settings; its run directory and its output."""
    marker = tmp_path / "slow-once"
    marker.touch()
    proc = _gpubench("run", "--suite", "autotune", "--backend", "fake", *knob_args, "--collectives", "all_reduce",
                     "--min-bytes", "1K", "--max-bytes", "4K", "--step-factor", "4", "--out", tmp_path / "out",
                     "--cluster", "t", "--no-telemetry",
                     env={**FAKE, "GPUBENCH_FAKE_SLOW_CASES": "1.25:all_reduce", "GPUBENCH_FAKE_SLOW_ONCE": str(marker),
                          **(env or {})})
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    (run,) = [p for p in (tmp_path / "out" / "t").iterdir() if p.is_dir()]
    return run, proc.stdout


def test_a_sweep_runs_each_config_in_fresh_processes_and_recommends_a_real_gain(tmp_path):
    # NCCL_PROTO=Simple really is 4x as fast on this device; LL changes nothing.
    run, out = _fake_sweep(tmp_path, "--knob", "NCCL_PROTO=LL,Simple",
                           env={"GPUBENCH_FAKE_KNOBS": "NCCL_PROTO=Simple:0.25"})
    df = results.load(run)
    assert set(df["suite"]) == {"autotune"} and df["run_id"].nunique() == 1
    assert list(dict.fromkeys(df["config"])) == ["default", "NCCL_PROTO=LL", "NCCL_PROTO=Simple"]
    assert set(df.loc[df["config"] == "NCCL_PROTO=LL", "NCCL_PROTO"]) == {"LL"}
    # each run of a config in its own child run (its own processes), kept inside the autotune run; the default thrice
    assert (df["status"] == "ok").all() and df["case"].nunique() == 5 * 2
    assert df["config_run"].nunique() == 5 and len(list((run / "configs").glob("*.log"))) == 5
    assert df.loc[df["config"] == "default", "config_run"].nunique() == 3
    meta = json.loads((run / "run.json").read_text())
    assert meta["status"] == "complete" and meta["autotune"]["configs"][0] == "default"
    assert meta["autotune"]["default_runs"] == 3
    assert meta["dist"]["world_size"] == 2 and meta.get("fingerprint")
    # Against the median of the default's runs, not its slow first draw: 4x, not 5x.
    w = pd.read_csv(run / "winners.csv")
    assert (w["winner"] == "NCCL_PROTO=Simple").all() and w["beyond_noise"].all() and (w["default_runs"] == 3).all()
    assert w["speedup"].tolist() == pytest.approx([4.0, 4.0], rel=1e-3)
    env = (run / "best.env").read_text()
    assert env.startswith("#") and env.splitlines()[-1] == "NCCL_PROTO=Simple"
    assert (run / "nccl-tuner.csv").read_text().splitlines()[1] == exports.HEADER
    assert "autotune winners" in out and "best.env: NCCL_PROTO=Simple" in out


def test_a_sweep_recommends_no_knob_for_a_draw_of_the_noise(tmp_path):
    # The default's first run drew slow (1.25x), and NCCL_PROTO=LL changes nothing: held against that run alone, LL
    # read 1.25x "beyond noise" and best.env set it; the default's runs together say it is the default's level.
    run, out = _fake_sweep(tmp_path, "--knob", "NCCL_PROTO=LL")
    w = pd.read_csv(run / "winners.csv")
    assert not w["beyond_noise"].any() and (w["default_runs"] == 3).all()
    env = (run / "best.env").read_text()
    assert all(line.startswith("#") for line in env.splitlines()), env
    assert "nothing to set" in env and "nothing to set" in out
    assert [line for line in (run / "nccl-tuner.csv").read_text().splitlines() if not line.startswith("#")] == [
        exports.HEADER]


def test_a_config_nccl_rejects_is_an_error_row_and_the_sweep_goes_on(tmp_path, monkeypatch):
    from gpubench.suites.autotune import sweep
    from gpubench.suites.autotune import Autotune, Comm

    real = sweep.subprocess.run

    def run(cmd, env=None, **kw):
        if env and env.get("NCCL_PROTO") == "LL128":  # what NCCL >= 2.24 does with an impossible choice
            cmd = [sys.executable, "-c", "import sys; print('NCCL WARN No algorithm/protocol available'); sys.exit(1)"]
        return real(cmd, env=env, **kw)

    monkeypatch.setattr(sweep.subprocess, "run", run)
    for k, v in FAKE.items():
        monkeypatch.setenv(k, v)
    request = RunRequest(
        what=Selection(given=dict(min_bytes=1024, max_bytes=1024, step_factor=None, op=None,
                                  collectives=["all_reduce"], graph=False, knob=["NCCL_PROTO=LL128"], grid=None,
                                  budget=None)),
        where=Placement(backend="fake"), how=Conduct(telemetry=False, out=str(tmp_path), cluster="t"))
    assert sweep.run(request, Autotune.version, Autotune.params, Comm()) == 0
    (run,) = [p for p in (tmp_path / "t").iterdir() if p.is_dir()]
    df = results.load(run)
    by = df.drop_duplicates("case").groupby("config", sort=False)["status"].agg(list).to_dict()
    # the default's last run came after the rejected configuration: the sweep went on
    assert by == {"default": ["ok", "ok", "ok"], "NCCL_PROTO=LL128": ["error"]}
    assert "No algorithm/protocol" in df.loc[df["config"] == "NCCL_PROTO=LL128", "message"].iloc[0]


def test_the_budget_skips_what_would_not_fit(tmp_path):
    proc = _gpubench("run", "--suite", "autotune", "--backend", "fake", "--knob", "NCCL_PROTO=LL,Simple",
                     "--collectives", "all_reduce", "--min-bytes", "1K", "--max-bytes", "1K", "--budget", "0.001",
                     "--out", tmp_path, "--cluster", "t", "--no-telemetry", env=FAKE)
    assert proc.returncode == 0, proc.stderr[-2000:]
    (run,) = [p for p in (tmp_path / "t").iterdir() if p.is_dir()]
    df = results.load(run)
    by = df.drop_duplicates("case").set_index("case")["status"].to_dict()
    assert by == {"config=default,collective=all_reduce,bytes=1024,dtype=float32,op=sum,inplace=True": "ok",
                  "config=NCCL_PROTO=LL": "skipped", "config=default,repeat=2": "skipped",
                  "config=NCCL_PROTO=Simple": "skipped", "config=default,repeat=3": "skipped"}
    assert "--budget" in df.loc[df["status"] == "skipped", "message"].iloc[0]
    assert "nothing to set" in (run / "best.env").read_text()


def test_bad_autotune_input_exits_2_before_anything_is_written(tmp_path):
    for args, why in [(["--knob", "NCCL_IB_HCA=x"], "site setting"), (["--budget", "0"], "--budget"),
                      (["--knob", "NCCL_PROTO=LL", "--grid", "g.toml"], "not both"),
                      (["--devices", "all"], "runs alone"),
                      # gloo reads none of NCCL's knobs: a sweep on the CPU would crown a draw of the noise
                      (["--knob", "NCCL_ALGO=Ring,Tree"], "gloo, which reads none of NCCL's knobs (NCCL_ALGO)"),
                      ([], "gloo, which reads none of NCCL's knobs (NCCL_ALGO, NCCL_PROTO)")]:
        proc = _gpubench("run", "--suite", "autotune", "--backend", "cpu", *args, "--out", tmp_path / "x")
        assert proc.returncode == 2 and why in proc.stderr and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
        assert proc.stderr.startswith("gpubench: error: ")
    assert not (tmp_path / "x").exists()
