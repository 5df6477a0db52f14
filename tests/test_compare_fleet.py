"""gpubench compare --fleet: devices far from the fleet median are flagged (tables of several devices built
here as a multi-device run would write them)."""

import json
import xml.etree.ElementTree as ET

import numpy as np
import pytest
from test_compare_helpers import cli, one_line_error

from gpubench import results
from gpubench.compare.fleet import robust_z
from gpubench.timing.stats import summarize

CASES = ("op=copy,dtype=fp32", "op=triad,dtype=fp32")


def fleet_run(path, devices, run_id="20990101T000000Z-f1ee70"):
    """A run directory with rows from each (host, device_index, factor): bandwidth × factor, time ÷ factor."""
    rows = []
    for host, index, factor in devices:
        for case in CASES:
            for metric, unit, better, value in (("bandwidth", "GB/s", "higher", 3000.0 * factor),
                                                ("time", "us", "lower", 100.0 / factor)):
                samples = [value * k for k in (1.0, 1.001, 0.999, 1.0005, 0.9995)]
                st = summarize(samples)
                rows.append({"run_id": run_id, "suite": "elementwise", "suite_version": 1, "case": case,
                             "metric": metric, "unit": unit, "better": better, "value": st["median"],
                             **{k: st[k] for k in ("mean", "min", "max", "stdev", "iqr", "cv", "n")},
                             "samples": samples, "noisy": False, "status": "ok", "message": "",
                             "backend": "cuda", "device": "NVIDIA H100 80GB HBM3", "device_index": index,
                             "host": host, "cluster": "c"})
    path.mkdir(parents=True)
    results.save(results.frame(rows), path / "elementwise.parquet", suite="elementwise")
    (path / "run.json").write_text(json.dumps({"schema_version": results.SCHEMA_VERSION, "run_id": run_id,
                                               "cluster": "c", "status": "complete"}))
    return path


EIGHT = [(f"node{h}", i, 1.0 + 0.002 * ((h * 4 + i) % 3)) for h in range(2) for i in range(4)]


def test_an_outlier_gpu_is_flagged_and_exits_1(capsys, tmp_path):
    devices = [(h, i, 0.90 if (h, i) == ("node1", 2) else f) for h, i, f in EIGHT]
    run = fleet_run(tmp_path / "run", devices)
    code, out, err = cli(capsys, "compare", "--fleet", run)
    assert code == 1, err
    assert "node1:2" in out and "1 of 8 devices flagged" in out
    code, out, _ = cli(capsys, "compare", "--fleet", run, "--format", "json")
    doc = json.loads(out)
    assert doc["exit_code"] == 1
    assert doc["devices"][0]["device_key"] == "node1:2" and doc["devices"][0]["flagged"] == 4
    assert all(d["flagged"] == 0 for d in doc["devices"][1:])
    top = doc["rows"][:4]  # worst first: the slow GPU's four figures, each about 10 % worse than the median
    assert {r["device_key"] for r in top} == {"node1:2"}
    assert all(r["flagged"] and r["direction"] == "worse" for r in top)
    assert sorted(round(r["deviation"], 2) for r in top) == [-0.1, -0.1, 0.11, 0.11]
    assert not any(r["flagged"] for r in doc["rows"][4:])
    assert len(doc["rows"]) == 8 * 4  # every device's deviation on every figure


def test_a_quiet_fleet_exits_0(capsys, tmp_path):
    run = fleet_run(tmp_path / "run", EIGHT)
    code, out, err = cli(capsys, "compare", "--fleet", run)
    assert code == 0, err
    assert "no device beyond 3 robust z" in out


def test_k_sets_how_far_is_too_far(capsys, tmp_path):
    devices = [(h, i, 0.97 if (h, i) == ("node0", 1) else 1.0) for h, i, _ in EIGHT]
    run = fleet_run(tmp_path / "run", devices)
    # 3 % from a median with no spread: 6 robust z at the 0.5 % floor of the spread; a 2 % practical floor
    assert cli(capsys, "compare", "--fleet", run, "--threshold", "0.02")[0] == 1
    assert cli(capsys, "compare", "--fleet", run, "--threshold", "0.02", "--k", "7")[0] == 0


# An idle 4 × H100 node (2026-11-26): GPU 2 read 2.2-2.4 % below the others, robust z 3.2-4.6.
IDLE_NODE = [("node0", 0, 1.0), ("node0", 1, 1.002), ("node0", 2, 0.977), ("node0", 3, 0.999)]


def test_a_gpu_a_few_percent_from_its_peers_is_not_flagged(capsys, tmp_path):
    run = fleet_run(tmp_path / "run", IDLE_NODE)
    code, out, err = cli(capsys, "compare", "--fleet", run, "--format", "json")
    assert code == 0, err
    doc = json.loads(out)
    gpu2 = [r for r in doc["rows"] if r["device_key"] == "node0:2"]
    assert all(abs(r["z"]) > 3 for r in gpu2)  # beyond the robust z, as on the node
    assert all(not r["flagged"] and r["floor"] == 0.05 for r in gpu2)  # but within the 5 % floor
    code, out, _ = cli(capsys, "compare", "--fleet", run)
    assert code == 0 and "no device beyond 3 robust z and 5% from the fleet median" in " ".join(out.split())


def test_a_gpu_10_percent_slower_is_flagged(capsys, tmp_path):
    devices = [(h, i, 0.90 if i == 2 else f) for h, i, f in IDLE_NODE]
    code, out, err = cli(capsys, "compare", "--fleet", fleet_run(tmp_path / "run", devices))
    assert code == 1, err
    assert "1 of 4 devices flagged: node0:2" in " ".join(out.split())


def test_the_floor_comes_from_the_thresholds_file_per_suite_and_metric(capsys, tmp_path):
    run = fleet_run(tmp_path / "run", IDLE_NODE)
    toml = tmp_path / "th.toml"
    toml.write_text("[elementwise]\nbandwidth = 0.02\n")
    code, out, err = cli(capsys, "compare", "--fleet", run, "--thresholds", toml, "--format", "json")
    assert code == 1, err
    flagged = [r for r in json.loads(out)["rows"] if r["flagged"]]
    assert {(r["device_key"], r["metric"]) for r in flagged} == {("node0:2", "bandwidth")}  # time keeps 5 %


def test_one_device_exits_2(capsys, tmp_path):
    run = fleet_run(tmp_path / "run", [("node0", 0, 1.0)])
    code, _, err = cli(capsys, "compare", "--fleet", run)
    assert code == 2
    assert "needs figures from 2 or more devices" in one_line_error(err)


def test_several_runs_make_one_fleet_and_the_formats_parse(capsys, tmp_path):
    a = fleet_run(tmp_path / "a", [("node0", 0, 1.0), ("node0", 1, 1.0)], "20990101T000000Z-00000a")
    b = fleet_run(tmp_path / "b", [("node1", 0, 1.0), ("node1", 1, 0.8)], "20990101T000000Z-00000b")
    xml, md = tmp_path / "f.xml", tmp_path / "f.md"
    code, _, err = cli(capsys, "compare", "--fleet", a, b, "--out", xml, "--out", md)
    assert code == 1, err
    root = ET.parse(xml).getroot()
    cases = root.findall("./testsuite/testcase")
    assert len(cases) == 4 and root.get("failures") == "1"
    failed = [c for c in cases if c.find("failure") is not None]
    assert failed[0].get("classname") == "gpubench.fleet.node1" and failed[0].get("name").startswith("device 1")
    text = md.read_text()
    assert text.startswith("### ") and "#### flagged figures" in text
    table = [ln for ln in text.splitlines() if ln.startswith("| node")]
    assert table[0].startswith("| node1:1 |")


def test_plain_compare_pools_the_devices_of_a_run(capsys, tmp_path):
    run = fleet_run(tmp_path / "run", EIGHT)
    code, out, err = cli(capsys, "compare", run, run, "--format", "json")
    assert code == 0, err
    rows = json.loads(out)["rows"]
    assert len(rows) == 4  # one per figure, not per device
    assert {r["n_baseline"] for r in rows} == {8 * 5}


def test_fleet_takes_no_baseline_options(capsys, tmp_path):
    run = fleet_run(tmp_path / "run", EIGHT)
    code, _, err = cli(capsys, "compare", "--fleet", run, "--baseline-window", "3")
    assert code == 2 and "drop --baseline-window" in one_line_error(err)
    for flag in ("--confirm", "--cross-cluster"):
        args = [flag, str(run)] if flag == "--confirm" else [flag]
        code, _, err = cli(capsys, "compare", "--fleet", run, *args)
        assert code == 2 and f"drop {flag}" in one_line_error(err)


def test_robust_z():
    median, z = robust_z(np.array([10.0, 10.0, 10.0, 10.0, 7.0]))
    assert median == 10.0
    assert z[-1] == pytest.approx(-3.0 / 0.05)  # MAD 0: the spread is 0.5 % of the median
    median, z = robust_z(np.array([1.0, 2.0, 3.0, 4.0, 100.0]))
    assert median == 3.0 and z[-1] == pytest.approx(97 / 1.4826, rel=1e-5)  # scipy: 1 / Φ⁻¹(3/4) = 1.482602
