"""`gpubench check` end to end on fake GPUs: the stations it starts (and what ends them), the facts it reads, the verdict it prints and
writes (JSON against its schema, JUnit, Prometheus text read back by real parsers), gather and expect."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

ROOT = Path(__file__).resolve().parent.parent
# Two figures keep these runs short on a 2-core machine; the shipped set runs once below.
SMALL = """
[[figure]]
key = "hbm"
title = "HBM bandwidth (triad, fp32)"
suite = "elementwise"
case = 'op=triad,dtype=fp32,array_bytes=\\d+,impl=torch'
metric = "bandwidth"
largest = "array_bytes"

[[figure]]
key = "launch"
title = "kernel launch, host side"
suite = "launch"
case = 'measure=host_launch,api=torch,nodes=1'
metric = "time"
"""
FAKE_ENV = ("GPUBENCH_FAKE_",)


def _gpubench(*args, env=None, timeout=300, cwd=ROOT):
    base = {k: v for k, v in os.environ.items() if not k.startswith(FAKE_ENV)}
    return subprocess.run([sys.executable, "-m", "gpubench", *map(str, args)], capture_output=True, text=True,
                          timeout=timeout, cwd=cwd, env={**base, **(env or {})})


def _check(tmp_path, *args, env=None, checks=True):
    small = tmp_path / "small.toml"
    small.write_text(SMALL)
    extra = ["--checks", small] if checks else []
    return _gpubench("check", "--backend", "fake", "--out", tmp_path / "r", "--cluster", "n1", *extra, *args, env=env)


def _verdict(tmp_path) -> dict:
    (path,) = list((tmp_path / "r").rglob("check.json"))
    return json.loads(path.read_text())


def _states(doc) -> dict[tuple[str, str], str]:
    return {(v["check"], v["target"]): v["state"] for v in doc["verdicts"]}


@pytest.fixture(scope="module")
def four(tmp_path_factory):
    """Four fake GPUs: GPU 3 20 % slow, GPU 0 throttled by hardware, GPU 1's link at x8, GPU 2 with ECC errors."""
    tmp = tmp_path_factory.mktemp("four")
    facts = {"0": {"throttle": ["HwSlowdown"]}, "1": {"pcie_width": 8}, "2": {"ecc_uncorrected": 3}}
    proc = _check(tmp, "--format", "json", "--report", tmp / "v.json",
                  env={"GPUBENCH_FAKE_DEVICES": "4", "GPUBENCH_FAKE_SLOW": "3:1.25",
                       "GPUBENCH_FAKE_FACTS": json.dumps(facts)})
    return tmp, proc


def test_a_slow_gpu_and_bad_facts_are_named_and_the_others_pass(four):
    tmp, proc = four
    assert proc.returncode == 1, proc.stderr[-3000:]
    doc = json.loads((tmp / "v.json").read_text())
    s = _states(doc)
    assert s[("hbm", "gpu3")] == "FAIL" and all(s[("hbm", f"gpu{i}")] == "PASS" for i in range(3))
    assert s[("throttle", "gpu0")] == "FAIL" and s[("pcie_link", "gpu1")] == "FAIL" and s[("ecc", "gpu2")] == "FAIL"
    assert s[("throttle", "gpu1")] == "PASS" and s[("ecc", "gpu0")] == "PASS"
    texts = {(v["check"], v["target"]): v["text"] for v in doc["verdicts"]}
    assert "x8 of x16" in texts[("pcie_link", "gpu1")] and "HwSlowdown" in texts[("throttle", "gpu0")]
    assert "20% below its 3 peers' median" in texts[("hbm", "gpu3")]
    hbm3 = next(v for v in doc["verdicts"] if v["target"] == "gpu3" and v["check"] == "hbm")
    assert hbm3["retry"] == pytest.approx(hbm3["value"], rel=0.01)  # the retry in a fresh process agreed
    assert doc["state"] == "FAIL" and doc["headline"].startswith("node n1: FAIL (simulated: ")
    assert "— GPU 0 hardware throttling" in doc["headline"]  # the mark said once, not before each finding
    assert proc.stdout.strip().splitlines()[-1] == doc["headline"]  # the one line beside the JSON file
    # the verdict beside the figures, in an ordinary run directory
    assert _verdict(tmp)["verdicts"] == doc["verdicts"]
    run = Path(doc["run_dirs"][0])
    assert (run / "run.json").is_file() and (run / "elementwise.parquet").is_file()


def test_the_json_validates_against_its_schema(four):
    jsonschema = pytest.importorskip("jsonschema")
    from gpubench.check.outputs.json_ import load_schema

    tmp, _ = four
    doc = json.loads((tmp / "v.json").read_text())
    jsonschema.Draft202012Validator(load_schema()).validate(doc)
    doc["verdicts"][0]["state"] = "OK"
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.Draft202012Validator(load_schema()).validate(doc)


def test_a_shared_gpu_is_warned_with_the_pid_never_failed(tmp_path):
    proc = _check(tmp_path, "--no-retry", env={"GPUBENCH_FAKE_DEVICES": "3", "GPUBENCH_FAKE_SLOW": "1:1.3",
                                               "GPUBENCH_FAKE_FACTS": json.dumps({"1": {"pids": [4242]}})})
    assert proc.returncode == 0, proc.stderr[-3000:]
    s = _states(doc := _verdict(tmp_path))
    assert s[("hbm", "gpu1")] == "WARN" and s[("processes", "gpu1")] == "WARN"
    assert s[("hbm", "gpu0")] == "PASS" and s[("processes", "gpu0")] == "PASS"
    assert "pid 4242" in next(v["text"] for v in doc["verdicts"] if v["target"] == "gpu1" and v["check"] == "hbm")
    first = proc.stdout.splitlines()[0]
    assert first.startswith("node n1: WARN (simulated: ") and "— GPU 1 hbm" in first and "pid 4242" in first


def test_a_figure_below_the_floor_whose_retry_reaches_it_passes_with_the_note(tmp_path):
    env_file = tmp_path / "fake.toml"
    env_file.write_text('format = "gpubench-expect"\nversion = 1\ngpu = "Fake GPU"\nmatch = "^Fake GPU$"\n'
                        'source = "test"\n[figure.hbm]\nunit = "GB/s"\nbetter = "higher"\ntypical = 96.0\n'
                        'warn_at = 91.0\nfail_at = 86.0\n')
    marker = tmp_path / "slow-once"
    marker.write_text("")
    proc = _check(tmp_path, "--expect", env_file, "--devices", "0",
                  env={"GPUBENCH_FAKE_SLOW_CASES": "1.3:op=triad", "GPUBENCH_FAKE_SLOW_ONCE": str(marker)})
    assert proc.returncode == 0, proc.stderr[-3000:]
    hbm = next(v for v in _verdict(tmp_path)["verdicts"] if v["check"] == "hbm")
    assert hbm["state"] == "PASS" and hbm["value"] < 86.0 and hbm["retry"] >= 91.0
    assert "retry in a fresh process reached" in hbm["text"] and not marker.exists()


def test_all_slow_without_an_envelope_fail_against_the_spec(tmp_path):
    # The fake triad reads 96 GB/s at factor 1: 0.0398 makes it 2,412 GB/s, 72 % of the H100's 3,350 (fallback 80 %)
    proc = _check(tmp_path, "--expect", "none", "--no-retry",
                  env={"GPUBENCH_FAKE_DEVICES": "2", "GPUBENCH_FAKE_MODEL": "NVIDIA H100 80GB HBM3",
                       "GPUBENCH_FAKE_SLOW": "0:0.0398,1:0.0398"})
    assert proc.returncode == 1, proc.stderr[-3000:]
    hbm = [v for v in _verdict(tmp_path)["verdicts"] if v["check"] == "hbm"]
    assert [v["state"] for v in hbm] == ["FAIL", "FAIL"]
    assert all("72% of spec" in v["text"] and v["reference"].startswith("spec fallback") for v in hbm)
    launch = [v for v in _verdict(tmp_path)["verdicts"] if v["check"] == "launch"]
    assert {v["state"] for v in launch} == {"SKIP"}  # host-timed, no envelope: not judged, and says why


def test_junit_and_prometheus_read_back(tmp_path):
    junitparser = pytest.importorskip("junitparser")
    parser = pytest.importorskip("prometheus_client.parser")
    env = {"GPUBENCH_FAKE_DEVICES": "2", "GPUBENCH_FAKE_FACTS": json.dumps({"1": {"pcie_width": 8}})}
    proc = _check(tmp_path, "--format", "junit", "--report", tmp_path / "j.xml", env=env)
    assert proc.returncode == 1, proc.stderr[-3000:]
    xml = junitparser.JUnitXml.fromfile(str(tmp_path / "j.xml"))
    cases = [(c.classname, c.name, [type(r).__name__ for r in c.result]) for s in xml for c in s]
    assert ("gpubench.check.pcie_link", "GPU 1", ["Failure"]) in cases or \
        any(c[0] == "gpubench.check.pcie_link" and "Failure" in c[2] for c in cases)
    prom = tmp_path / "node.prom"
    proc = _check(tmp_path, "--format", "prometheus", "--report", prom, env=env)
    assert proc.returncode == 1, proc.stderr[-3000:]
    families = {f.name: f for f in parser.text_string_to_metric_families(prom.read_text())}
    status = {(s.labels["gpu"], s.labels["check"]): s.value for s in families["gpubench_check_status"].samples}
    assert status[("1", "pcie_link")] == 0 and status[("0", "pcie_link")] == 1
    node = families["gpubench_check_node_status"].samples[0]
    assert node.labels["host"] == "n1" and node.value == 0
    # the fake backend's GPUs are made up: every sample says so, and every JUnit test case
    assert all(s.labels.get("simulated") == "true" for f in families.values() for s in f.samples)
    assert all(c.classname.startswith("gpubench.check.") for s in xml for c in s)
    text = (tmp_path / "j.xml").read_text()
    assert text.count('name="simulated" value="true"') == len(cases) + 1  # each case, and the suite


def test_the_fake_backend_says_simulated_everywhere_and_writes_in_its_own_folder(tmp_path):
    small = tmp_path / "small.toml"
    small.write_text(SMALL)
    proc = _gpubench("check", "--backend", "fake", "--cluster", "n1", "--checks", small, cwd=tmp_path,
                     env={"GPUBENCH_FAKE_DEVICES": "1"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = proc.stdout.splitlines()
    assert lines[0].startswith("node n1: PASS (simulated: the fake backend's made-up GPUs, not hardware)")
    gpu0 = next(line for line in lines if line.startswith("GPU 0"))
    assert "Fake GPU (simulated)" in gpu0
    assert not (tmp_path / "results").exists()  # beside the user's own runs: never
    (path,) = list((tmp_path / "gpubench-check" / "n1").rglob("check.json"))
    doc = json.loads(path.read_text())
    assert doc["simulated"] is True and doc["verdicts"]
    assert all(v["simulated"] and v["text"].startswith("simulated: ") for v in doc["verdicts"])
    facts = {v["check"]: v["text"] for v in doc["verdicts"] if v["kind"] == "fact"}
    assert facts["nvlink"] == "simulated: 18 of 18 NVLink links up" and facts["pcie_link"].startswith("simulated: ")


def test_a_station_that_dies_is_replaced_and_one_that_cannot_start_fails_its_figures(tmp_path):
    marker = tmp_path / "dies"
    marker.write_text("")
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    proc = _check(tmp_path / "a", "--no-retry", env={"GPUBENCH_FAKE_DEVICES": "2",
                                                      "GPUBENCH_FAKE_STATION_DIES": str(marker)})
    assert proc.returncode == 0 and not marker.exists(), proc.stderr[-3000:]  # a fresh pair of stations measured
    doc = _verdict(tmp_path / "a")
    assert {v["state"] for v in doc["verdicts"] if v["check"] == "hbm"} == {"PASS"}
    proc = _check(tmp_path / "b", env={"GPUBENCH_FAKE_DEVICES": "2", "GPUBENCH_FAKE_PROCESS_LEVELS": "x"})
    assert proc.returncode == 1, proc.stderr[-3000:]
    assert not list((tmp_path / "b").rglob("check.json"))  # nothing measured: no run directory to keep it in
    assert "not measured: GPU 0: ValueError" in proc.stdout and "hbm" in proc.stdout


def test_a_nodes_own_history_becomes_its_envelope(tmp_path):
    env = {"GPUBENCH_FAKE_DEVICES": "1"}
    proc = _check(tmp_path, "--expect", "history", env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "history: 0 earlier check(s) of n1" in proc.stderr  # none yet: said, and the other references hold
    (first,) = [p.parent for p in (tmp_path / "r" / "n1").rglob("check.json")]
    for k in range(4):  # four more checks of this node, as if run on other nights
        doc = json.loads((first / "check.json").read_text())
        doc["started"] = f"2026-11-0{k + 1}T00:00:00+00:00"
        copy = first.parent / f"{first.name}-{k}"
        copy.mkdir()
        (copy / "check.json").write_text(json.dumps(doc))
    proc = _check(tmp_path, "--expect", "history", env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "history of n1: 5 earlier checks, 2026-11-01 to" in proc.stderr
    doc = max(((p, json.loads(p.read_text())) for p in (tmp_path / "r" / "n1").rglob("check.json")),
              key=lambda pd_: pd_[1]["started"])[1]
    held = {v["check"]: v for v in doc["verdicts"] if v["kind"] == "performance"}
    assert {held[k]["state"] for k in ("hbm", "launch")} == {"PASS"}, held
    assert all(held[k]["reference"].startswith("envelope n1 (history of n1: 5 earlier checks") for k in held)


def test_a_total_below_its_floor_is_measured_again_on_every_gpu_at_once(tmp_path):
    (tmp_path / "totals.toml").write_text(
        "[[figure]]\nkey = \"h2d_all\"\ntitle = \"h2d, every GPU at once\"\nsuite = \"copy\"\n"
        "case = 'direction=h2d,memory=pinned,src=host,dst=gpu\\d+,copy_bytes=\\d+'\nmetric = \"bandwidth\"\n"
        "largest = \"copy_bytes\"\ntarget = \"node\"\ncombine = \"sum\"\nneeds = 2\n")
    (tmp_path / "fake.toml").write_text(
        'format = "gpubench-expect"\nversion = 2\ngpu = "Fake GPU"\nmatch = "^Fake GPU$"\nsource = "test"\n'
        '[figure.h2d_all]\nunit = "GB/s"\nbetter = "higher"\ntypical = 135.0\nwarn_at = 125.0\nfail_at = 120.0\n'
        'gpus = 2\n')
    marker = tmp_path / "slow-once"
    marker.write_text("")
    proc = _gpubench("check", "--backend", "fake", "--out", tmp_path / "r", "--cluster", "n1", "--checks",
                     tmp_path / "totals.toml", "--expect", tmp_path / "fake.toml",
                     env={"GPUBENCH_FAKE_DEVICES": "2", "GPUBENCH_FAKE_SLOW_CASES": "2:direction=h2d",
                          "GPUBENCH_FAKE_SLOW_ONCE": str(marker)})
    assert proc.returncode == 0, proc.stderr[-3000:]
    doc = _verdict(tmp_path)
    (total,) = [v for v in doc["verdicts"] if v["check"] == "h2d_all"]
    # one station read half its GPU's rate: the total, 3/4 of typical, was measured again by two fresh stations
    assert total["value"] < 120.0 and total["retry"] == pytest.approx(135.4, rel=0.01), total
    assert total["state"] == "PASS" and "retry in a fresh process reached" in total["text"]
    assert [p["what"] for p in doc["phases"]] == ["start", "devices", "retry h2d_all node"]


def _marked(mark: str) -> list[str]:
    """The command lines of the processes whose environment carries ``mark`` (a check's stations inherit it)."""
    found = []
    for proc in Path("/proc").iterdir():
        try:
            if proc.name.isdigit() and mark.encode() in (proc / "environ").read_bytes():
                found.append((proc / "cmdline").read_bytes().decode(errors="replace"))
        except OSError:
            continue
    return found


def _started(tmp_path, mark: str):
    """A check on 2 fake GPUs, returned once its stations measure and a run of theirs is open. The shipped set: with
    two figures the whole check could end before the signal reached it (the 2-core VM under load)."""
    tmp_path.mkdir()
    base = {k: v for k, v in os.environ.items() if not k.startswith(FAKE_ENV)}
    proc = subprocess.Popen([sys.executable, "-m", "gpubench", "check", "--backend", "fake", "--out", tmp_path / "r"],
                            stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True,
                            cwd=ROOT, env={**base, "GPUBENCH_FAKE_DEVICES": "2", "GPUBENCH_TEST_MARK": mark})
    for line in proc.stderr:
        if line.startswith("check: measuring"):
            break
    else:
        pytest.fail(f"the check ended before it measured (exit {proc.wait()})")
    end = time.monotonic() + 120
    while not list((tmp_path / "r").rglob("run.json")) and proc.poll() is None and time.monotonic() < end:
        time.sleep(0.1)  # a run is open: what ends the check must close it
    return proc


def test_ctrl_c_ends_the_check_and_its_stations_and_so_does_its_death(tmp_path):
    import signal

    mark = f"check-{os.getpid()}-{time.monotonic_ns()}"
    proc = _started(tmp_path / "int", mark + "-int")
    # the check and its two stations (and whatever short-lived command a run starts: git rev-parse)
    assert sum("gpubench.check.station" in cmd for cmd in _marked(mark + "-int")) == 2
    proc.send_signal(signal.SIGINT)
    assert proc.wait(timeout=60) == 130 and "gpubench: interrupted" in proc.stderr.read()
    end = time.monotonic() + 30
    while _marked(mark + "-int") and time.monotonic() < end:
        time.sleep(0.2)
    assert not _marked(mark + "-int")  # no station outlives its check
    statuses = [json.loads(p.read_text())["status"] for p in (tmp_path / "int" / "r").rglob("run.json")]
    assert statuses and "running" not in statuses, statuses  # each run closed, with what it kept
    proc = _started(tmp_path / "kill", mark + "-kill")
    proc.kill()  # the check dies without a word: its stations notice and end
    proc.wait(timeout=10)
    while _marked(mark + "-kill") and time.monotonic() < end + 30:
        time.sleep(0.2)
    assert not _marked(mark + "-kill")
    statuses = [json.loads(p.read_text())["status"] for p in (tmp_path / "kill" / "r").rglob("run.json")]
    assert statuses and "running" not in statuses, statuses


def test_bad_input_is_one_line_and_exit_2(tmp_path):
    for args, words in ((["--devices", "7"], "no device 7"), (["--expect", tmp_path / "none.toml"], "cannot read"),
                        (["--format", "prometheus"], "--report PATH.prom"),
                        (["--gather"], "--fleet DIR"),
                        (["--backend", "cpu"], "--backend fake runs the check on made-up GPUs, to try the command"),
                        (["--format", "json", "--report", tmp_path / "no" / "v.json"], "does not exist")):
        proc = _check(tmp_path, *args)
        assert proc.returncode == 2 and words in proc.stderr, (args, proc.stderr)
        assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert not (tmp_path / "r" / "n1").exists() or not any((tmp_path / "r" / "n1").iterdir())


def test_the_shipped_set_on_three_gpus_runs_every_figure_and_pairs_in_rounds(tmp_path):
    # GPUBENCH_FAKE_CALL_S keeps the fake collectives to a few hundred real gloo calls; it makes every fake copy
    # 2 ms long too, 0.52 GB/s: against the fake Gen5 x16 link's nominal 63 GB/s, host copies FAIL (as they should)
    proc = _check(tmp_path, "--no-retry", checks=False,
                  env={"GPUBENCH_FAKE_DEVICES": "3", "GPUBENCH_FAKE_CALL_S": "2e-3"})
    assert proc.returncode == 1, proc.stderr[-3000:]
    assert "sendrecv on 3 GPU pairs in 3 rounds" in proc.stderr
    doc = _verdict(tmp_path)
    targets = {(v["check"], v["target"]) for v in doc["verdicts"]}
    for pair in ("gpu0-gpu1", "gpu0-gpu2", "gpu1-gpu2"):
        assert ("sendrecv", pair) in targets and ("peer", pair) in targets
    assert ("all_reduce", "node") in targets and ("hbm", "gpu2") in targets
    s = _states(doc)
    assert s[("gemm_bf16", "gpu0")] == "SKIP"  # the fake device has no bf16 products: said, never passed
    # per-GPU figures at once, host copies one GPU at a time, the node's all_reduce, three pairs
    assert len(doc["run_dirs"]) == 6
    orders = [json.loads((Path(d) / "run.json").read_text())["check"]["order"] for d in doc["run_dirs"]]
    assert orders[:2] == ["every GPU at once, case by case in step", "one GPU at a time"], orders
    failed = {v["check"] for v in doc["verdicts"] if v["state"] == "FAIL"}
    assert failed == {"h2d", "d2h"}, failed
    totals = {v["check"]: v for v in doc["verdicts"] if v["check"] in ("h2d_all", "d2h_all")}
    assert {v["state"] for v in totals.values()} == {"SKIP"}  # the host's figure, and no envelope holds it
    per_gpu = [v["value"] for v in doc["verdicts"] if v["check"] == "h2d"]
    assert len(per_gpu) == 3 and totals["h2d_all"]["value"] == pytest.approx(sum(per_gpu), rel=1e-6)
    h2d = next(v for v in doc["verdicts"] if v["check"] == "h2d")
    assert "PCIe link's nominal 63.0 GB/s" in h2d["reference"] and h2d["fail_at"] == pytest.approx(0.7 * 63.0, rel=1e-3)


COMM = """
[[figure]]
key = "all_reduce"
title = "all_reduce bus bandwidth, every GPU"
suite = "comm"
run = "node"
case = 'collective=all_reduce,bytes=\\d+,dtype=float32,op=sum,inplace=True'
metric = "busbw"
largest = "bytes"
target = "node"
needs = 2

[[figure]]
key = "sendrecv"
title = "sendrecv bus bandwidth, per GPU pair"
suite = "comm"
run = "pairs"
case = 'collective=sendrecv,bytes=\\d+,dtype=float32,op=none,inplace=False'
metric = "busbw"
largest = "bytes"
target = "pair"
needs = 2
"""


def test_a_collective_names_a_co_tenant_on_any_of_its_gpus(tmp_path):
    # A pair's row is written by its rank 0, but a process on the other GPU slows it as much (4 x H200, 2026-11-29:
    # the pairs 0-2 and 1-2 missed a co-tenant on GPU 2): every collective's rows name who shared any of its GPUs.
    checks = tmp_path / "comm.toml"
    checks.write_text(COMM)
    proc = _gpubench("check", "--backend", "fake", "--out", tmp_path / "r", "--cluster", "n1", "--checks", checks,
                     "--no-retry", env={"GPUBENCH_FAKE_DEVICES": "3", "GPUBENCH_FAKE_CALL_S": "2e-3",
                                        "GPUBENCH_FAKE_OTHER_PIDS": "2:4242"})
    assert proc.returncode in (0, 1), proc.stderr[-3000:]
    named = {}
    for d in _verdict(tmp_path)["run_dirs"]:
        pair = json.loads((Path(d) / "run.json").read_text())["check"]["phase"]
        for r in pd.read_parquet(Path(d) / "comm.parquet").to_dict("records"):
            named.setdefault((r["collective"], pair), set()).add("pid 4242" in str(r["contended"]))
    assert named.pop(("all_reduce", "node")) == {True}
    pairs = {phase: who for (c, phase), who in named.items() if c == "sendrecv"}
    assert len(pairs) == 3 and sorted(map(sorted, pairs.values())) == [[False], [True], [True]], named


def test_expect_makes_an_envelope_that_the_next_check_uses_and_gather_reads_the_fleet(tmp_path, four):
    tmp4, _ = four
    from gpubench.check import envelope

    # one node's checks: the figure the host sets (the host-timed launch) is that host's, left out and said so
    proc = _gpubench("expect", tmp4 / "r", "--out", tmp_path / "one.toml")
    assert proc.returncode == 0, proc.stderr
    assert "left out: launch: the host sets them, and fewer than 2 nodes measured them" in proc.stdout
    one = envelope.load_file(tmp_path / "one.toml")
    assert "hbm" in one.entries and "launch" not in one.entries and "launch" in one.meta["left_out"]
    proc = _gpubench("expect", tmp4 / "r", "--out", tmp_path / "fake.toml", "--min-nodes", "1")
    assert proc.returncode == 0, proc.stderr
    env = envelope.load_file(tmp_path / "fake.toml")
    assert env.matches("Fake GPU") and {"hbm", "launch"} <= set(env.entries) and "left_out" not in env.meta
    assert env.entries["hbm"].figures == 4 and "1 check runs on 1 node(s) (n1)" in env.source
    # a second node, healthy, checked against that envelope; then the fleet gathered
    proc = _gpubench("check", "--backend", "fake", "--out", tmp4 / "r", "--cluster", "n2", "--checks",
                     tmp4 / "small.toml", "--expect", tmp_path / "fake.toml", env={"GPUBENCH_FAKE_DEVICES": "2"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.startswith("node n2: PASS (simulated: ")
    proc = _gpubench("check", "--gather", "--fleet", tmp4 / "r", "--format", "json")
    assert proc.returncode == 1, proc.stderr  # n1 FAILed
    nodes = json.loads(proc.stdout)["nodes"]
    assert [n["host"] for n in nodes] == ["n1", "n2"] and [n["state"] for n in nodes] == ["FAIL", "PASS"]
    table = _gpubench("check", "--gather", "--fleet", tmp4 / "r")
    assert "2 nodes — 1 FAIL, 1 PASS" in table.stdout


def test_a_slow_hosts_launch_is_judged_at_the_envelopes_host_pace(tmp_path):
    # The fake host runs at half speed (its pace probe 200 µs, its host-timed calls twice as long): against an
    # envelope whose launch line says the figure follows the pace, a PASS that says what was measured; against one
    # without the line, the same figure FAILs.
    one = {"GPUBENCH_FAKE_DEVICES": "1"}
    for d in ("a", "b-True", "b-False"):
        (tmp_path / d).mkdir()
    proc = _check(tmp_path / "a", "--expect", "none", "--no-retry", env={**one, "GPUBENCH_FAKE_HOST_PACE": "1"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    launch = next(v for v in _verdict(tmp_path / "a")["verdicts"] if v["check"] == "launch")["value"]
    head = 'format = "gpubench-expect"\nversion = 3\ngpu = "Fake GPU"\nmatch = "^Fake GPU$"\nsource = "test"\n'
    entry = (f'[figure.launch]\nunit = "us"\nbetter = "lower"\ntypical = {launch}\nwarn_at = {launch * 1.1}\n'
             f'fail_at = {launch * 1.25}\n')
    for line, state in ((True, "PASS"), (False, "FAIL")):
        env_file = tmp_path / f"fake-{line}.toml"
        env_file.write_text(head + entry + ("pace = 100.0\npace_slope = 1.0\npace_lo = 90.0\npace_hi = 300.0\n"
                                            if line else ""))
        out = tmp_path / f"b-{line}"
        proc = _check(out, "--expect", env_file, "--no-retry", env={**one, "GPUBENCH_FAKE_HOST_PACE": "2"})
        assert proc.returncode == (0 if line else 1), proc.stderr[-3000:]
        v = next(v for v in _verdict(out)["verdicts"] if v["check"] == "launch")
        assert v["state"] == state, v["text"]
        if line:
            assert v["measured"] == pytest.approx(2 * launch, rel=0.05) and v["host_pace"] == pytest.approx(200.0)
            assert v["value"] == pytest.approx(launch, rel=0.05)
            assert any("judged at the envelope's host pace" in n and "200 µs against the envelope's 100" in n
                       for n in v["notes"]), v["notes"]
        else:
            assert v["measured"] is None and v["value"] == pytest.approx(2 * launch, rel=0.05)


PAIRS = """
[[figure]]
key = "sendrecv"
title = "sendrecv bus bandwidth, per GPU pair"
suite = "comm"
run = "pairs"
case = 'collective=sendrecv,bytes=\\d+,dtype=float32,op=none,inplace=False'
metric = "busbw"
largest = "bytes"
target = "pair"
needs = 2
"""


@pytest.mark.timeout(400)
def test_an_8_gpu_nodes_pair_rounds_each_take_what_the_others_do_and_say_nothing_of_torch(tmp_path):
    # 8 fake GPUs, 7 rounds of 4 pairs: each round's stations used to form their group over TCP stores, and torch
    # looks up the name of every address a store connects or accepts; where the resolver dropped some of that burst,
    # rounds 2, 3, 5 and 7 each waited its 5-s timeout (5.2-5.9 s against 0.6-0.8), with a store's connect timing out
    # and 37 lines of C++ frames on standard error.
    checks = tmp_path / "pairs.toml"
    checks.write_text(PAIRS)
    proc = _gpubench("check", "--backend", "fake", "--out", tmp_path / "r", "--checks", checks, "--format", "json",
                     "--report", tmp_path / "v.json", env={"GPUBENCH_FAKE_DEVICES": "8"}, timeout=380)
    assert proc.returncode == 0, proc.stderr[-3000:]
    noise = [ln for ln in proc.stderr.splitlines() if not ln.startswith("check: ")]
    assert noise == [], noise[:20]
    rounds = [p["wall_s"] for p in _verdict(tmp_path)["phases"] if p["what"].startswith("pairs round")]
    assert len(rounds) == 7
    # twice the fastest, and a second of slack for a loaded 2-core machine: well under a 5-s stall
    assert max(rounds) <= 2 * min(rounds) + 1.0, rounds
