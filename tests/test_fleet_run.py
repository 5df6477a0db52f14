"""`gpubench run --devices`: one process per device, one run directory, and the fleet view on it (fake GPUs)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from gpubench import results
from gpubench.run.devices import parse_devices
from gpubench.errors import UsageError

ROOT = Path(__file__).resolve().parent.parent
FEW = ["--suite", "elementwise", "--backend", "fake", "--quick", "--filter", "op=(copy|triad),dtype=fp32"]


def _gpubench(*args, env=None, timeout=300):
    return subprocess.run([sys.executable, "-m", "gpubench", *map(str, args)], capture_output=True, text=True,
                          timeout=timeout, cwd=ROOT, env={**os.environ, **(env or {})})


def _only_run(out: Path) -> Path:
    runs = [p for p in (out / "t").iterdir() if p.is_dir()]
    assert len(runs) == 1, runs
    return runs[0]


def test_parse_devices():
    assert parse_devices("all", 3) == [0, 1, 2]
    assert parse_devices("2,0", 3) == [2, 0]
    for bad, why in [("0,0", "twice"), ("3", "no device 3"), ("x", "use 'all'"), ("", "use 'all'"), ("-1", "no device")]:
        with pytest.raises(UsageError, match=why):
            parse_devices(bad, 3)
    with pytest.raises(UsageError, match="no device"):
        parse_devices("all", 0)


def test_devices_all_runs_every_device_into_one_run(tmp_path):
    proc = _gpubench("run", *FEW, "--devices", "all", "--out", tmp_path, "--cluster", "t")
    assert proc.returncode == 0, proc.stderr[-2000:]
    run = _only_run(tmp_path)
    df = results.load(run)
    ok = df[df["status"] == "ok"]
    assert sorted(ok["device_index"].unique()) == [0, 1]
    # Each device ran every case, and every row carries the run's one id.
    per_device = ok.groupby("device_index")["case"].apply(lambda c: sorted(set(c)))
    assert per_device[0] == per_device[1] and len(per_device[0]) == 2
    assert df["run_id"].nunique() == 1 and df["run_id"].iloc[0] == run.name
    meta = json.loads((run / "run.json").read_text())
    assert meta["status"] == "complete"
    assert [d["device_index"] for d in meta["fleet"]] == [0, 1] and [d["rank"] for d in meta["fleet"]] == [0, 1]
    assert "gpu" in proc.stdout  # the summary has a line per (GPU, case)


def test_fleet_view_flags_the_slow_device_of_a_devices_run(tmp_path):
    # Three fake GPUs, the third 20 % slower: the fleet view names it, worst first, and exits 1.
    env = {"GPUBENCH_FAKE_DEVICES": "3", "GPUBENCH_FAKE_SLOW": "2:1.2"}
    proc = _gpubench("run", *FEW, "--devices", "all", "--out", tmp_path, "--cluster", "t", env=env)
    assert proc.returncode == 0, proc.stderr[-2000:]
    run = _only_run(tmp_path)
    assert sorted(results.load(run)["device_index"].unique()) == [0, 1, 2]
    fleet = _gpubench("compare", "--fleet", run, "--format", "json", env=env)
    assert fleet.returncode == 1, fleet.stdout[-2000:] + fleet.stderr[-2000:]
    report = json.loads(fleet.stdout)
    text = json.dumps(report)
    assert ":2" in text
    flagged = [r for r in report["rows"] if r["flagged"]]
    assert flagged and all(r["device_index"] == 2 for r in flagged)
    # The slow device's figures sit 20 % above the median in time, 1/1.2 of it in bandwidth and throughput.
    assert {r["metric"]: round(r["deviation"], 6) for r in flagged} == {
        "time": 0.2, "bandwidth": round(1 / 1.2 - 1, 6), "throughput": round(1 / 1.2 - 1, 6)}


def test_devices_subset_and_bad_input(tmp_path):
    proc = _gpubench("run", *FEW, "--devices", "1", "--out", tmp_path, "--cluster", "t")
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert set(results.load(_only_run(tmp_path))["device_index"]) == {1}
    for args, why in [(["--devices", "0,0"], "twice"), (["--devices", "5"], "no device 5"),
                      (["--filter", "nothing-matches"], "no case matches")]:
        bad = _gpubench("run", *FEW, *args if args[0] == "--devices" else ["--devices", "all", *args],
                        "--out", tmp_path / "bad", "--cluster", "t")
        assert bad.returncode == 2 and why in bad.stderr and len(bad.stderr.strip().splitlines()) == 1, bad.stderr
    comm = _gpubench("run", "--suite", "comm", "--backend", "cpu", "--devices", "all", "--out", tmp_path / "bad")
    assert comm.returncode == 2 and "--nproc" in comm.stderr
    assert not (tmp_path / "bad").exists()  # nothing written for bad input


def test_a_stopped_device_process_ends_the_run_naming_its_rank_and_keeping_rows(tmp_path):
    # The full elementwise grid on fake GPUs: long enough to stop rank 1 after a few cases.
    timeout_s = 8
    args = [sys.executable, "-m", "gpubench", "run", "--suite", "elementwise", "--backend", "fake", "--devices",
            "all", "--out", str(tmp_path), "--cluster", "t", "--timeout", str(timeout_s)]
    proc = subprocess.Popen(args, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        end = time.monotonic() + 180
        while True:
            if proc.poll() is not None or time.monotonic() >= end:
                proc.kill()  # (if it still runs) so that its output ends
                err = proc.communicate()[1]  # every rank's own word on why, then the end of the tracebacks
                raise AssertionError("\n".join([ln for ln in err.splitlines() if "gpubench: error" in ln] + [err[-2000:]]))
            tables = list((tmp_path / "t").glob("*/elementwise.parquet"))
            if tables and results.load(tables[0])["case"].nunique() >= 2:
                break
            time.sleep(0.2)
        run = tables[0].parent
        ranks = json.loads((run / "run.json").read_text())["fleet"]
        before = results.load(run)["case"].nunique()
        victim = ranks[1]["pid"]
        t0 = time.monotonic()
        os.kill(victim, signal.SIGSTOP)
        _, err = proc.communicate(timeout=timeout_s + 30)
        took = time.monotonic() - t0
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode not in (0, None)
    assert took < timeout_s + 15, took
    assert "rank 1" in err, err[-3000:]
    df = results.load(run)
    assert df["case"].nunique() >= before and set(df["device_index"]) == {0, 1}
    meta = json.loads((run / "run.json").read_text())
    assert meta["status"] == "failed" and "rank 1" in meta["error"]
    for r in ranks:  # no orphans (a stopped process that was killed is reaped by its parent)
        try:
            os.kill(r["pid"], 0)
            assert Path(f"/proc/{r['pid']}/stat").read_text().split()[2] == "Z"
        except (ProcessLookupError, FileNotFoundError):
            pass
