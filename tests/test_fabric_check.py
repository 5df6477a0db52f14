"""gpubench check --fabric under its launchers on one machine: ranks as simulated nodes (the stand-in srun of
tests/fleet gives each task SLURM's variables and its node's name; torchrun's agents, one per simulated node), gloo
doing the sends, the fake backend making a node, a link or a rail slow or silent (GPUBENCH_FAKE_FABRIC), NIC facts
from fake sysfs trees. Each run is bounded in time."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from gpubench.backends.fake import fabric_factor
from gpubench.check.facts.readers import fake_sysfs
from gpubench.check.fabric import schedule
from gpubench.check.fabric.pair_rounds import node_names
from gpubench.errors import UsageError
from gpubench.results import load

FLEET = Path(__file__).resolve().parent / "fleet"
TIMEOUT_S = 20


def _gpubench() -> str:
    return shutil.which("gpubench") or str(Path(sys.executable).parent / "gpubench")


def _srun(tmp: Path, nodes: int, rails: int, *args: str, fabric: str = "", limit_s: float = 240,
          env: dict | None = None, out: Path | None = None) -> tuple[int, dict, str, float]:
    """The fabric check over ``nodes`` simulated nodes of ``rails`` GPUs: its exit code, check.json, stderr and wall."""
    names = ",".join(f"node{i:02d}" for i in range(1, nodes + 1))
    out = out or tmp / f"out-{time.monotonic_ns()}"
    run_env = {**os.environ, "MASTER_PORT": str(_free_port()), "FAKE_SLURM_NODES": names, "FAKE_SLURM_GPUS": str(rails), "GPUBENCH_FAKE_FABRIC": fabric,
               "PATH": f"{FLEET}:{os.environ['PATH']}", **(env or {})}
    cmd = [sys.executable, str(FLEET / "srun"), f"--ntasks-per-node={rails}", _gpubench(), "check", "--fabric",
           *args, "--backend", "fake", "--timeout", str(TIMEOUT_S), "--out", str(out), "--format", "json"]
    t0 = time.monotonic()
    p = subprocess.run(cmd, capture_output=True, text=True, env=run_env, timeout=limit_s, cwd=tmp)
    wall = time.monotonic() - t0
    doc = json.loads(p.stdout) if p.stdout.strip().startswith("{") else {}
    return p.returncode, doc, p.stderr, wall


def _states(doc: dict, check: str) -> dict[str, str]:
    return {v["target"]: v["state"] for v in doc["verdicts"] if v["check"] == check}


# --- the made-up fabric, without processes ---------------------------------------------------------------------

def test_the_made_up_fabric_matches_a_node_a_link_either_way_and_a_rail_and_refuses_a_malformed_item():
    spec = "node03=0.4,node01-node04=0.3,node02:nic1=0,gpu-01-gpu-02=0.5"
    assert fabric_factor(spec, ("node03", "node05"), 0) == 0.4
    assert fabric_factor(spec, ("node04", "node01"), 1) == 0.3
    assert fabric_factor(spec, ("node01", "node05"), 1) == 1.0
    assert fabric_factor(spec, ("node05", "node02"), 1) == 0.0 and fabric_factor(spec, ("node05", "node02"), 0) == 1.0
    assert fabric_factor(spec, ("gpu-02", "gpu-01"), 3) == 0.5  # names with hyphens: the link matched whole
    assert fabric_factor("", ("a", "b"), 0) == 1.0
    for bad in ("node03", "node03=x", "=0.5", "node03=-1"):
        with pytest.raises(UsageError, match="GPUBENCH_FAKE_FABRIC"):
            fabric_factor(bad, ("node03", "b"), 0)


def test_simulated_nodes_on_one_host_are_told_apart_by_their_node_number():
    rows = [{"rank": r, "name": "vm", "node_id": r // 2, "rail": r % 2} for r in range(4)]
    assert [(m.node, m.rail) for m in node_names(rows)] == [("vm-n0", 0), ("vm-n0", 1), ("vm-n1", 0), ("vm-n1", 1)]
    named = [{"rank": r, "name": f"gpu{r // 2}", "node_id": r // 2, "rail": r % 2} for r in range(4)]
    assert [m.node for m in node_names(named)] == ["gpu0", "gpu0", "gpu1", "gpu1"]


# --- under the stand-in srun -----------------------------------------------------------------------------------

def test_a_healthy_fleet_of_four_nodes_passes_ten_times_of_ten_and_its_nights_compare_same(tmp_path):
    walls, runs = [], []
    for _ in range(10):
        code, doc, err, wall = _srun(tmp_path, 4, 1, out=tmp_path / "nights")
        assert code == 0 and doc["state"] == "PASS", (doc.get("headline"), err[-2000:])
        assert set(_states(doc, "fabric_node")) == {"node01", "node02", "node03", "node04"}
        assert "Traceback" not in err and "[rank" not in err, err[-2000:]
        walls.append(wall)
        runs.append(doc["run_dirs"][0])
    print(f"\n10 healthy 4-node fabric checks: {min(walls):.1f}-{max(walls):.1f} s")
    df = load(runs[-1])
    assert set(df["metric"]) == {"busbw", "latency"} and (df["status"] == "ok").all()
    assert {"pair", "rail", "phase", "bytes"} <= set(df.columns) and (df[df["metric"] == "busbw"]["value"] > 0).all()
    # A night held against the night before: compare reads the fabric's rows as any suite's.
    p = subprocess.run([_gpubench(), "compare", runs[0], runs[-1]], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0 and "WORSE" not in p.stdout and "SAME" in p.stdout, p.stdout[-3000:] + p.stderr[-2000:]
    # The nights on the history page, a card per pair and figure.
    p = subprocess.run([_gpubench(), "report", str(Path(runs[0]).parent), "--out", str(tmp_path / "history")],
                       capture_output=True, text=True, timeout=240)
    page = (tmp_path / "history" / "index.html").read_text()
    assert p.returncode == 0 and "10 night(s)" in p.stdout + p.stderr and "pair=node01-" in page, p.stderr[-2000:]
    _, slow, _, _ = _srun(tmp_path, 4, 1, fabric="node01=0.5")  # a night whose node01 got slow
    p = subprocess.run([_gpubench(), "compare", runs[-1], slow["run_dirs"][0]], capture_output=True, text=True,
                       timeout=120)
    assert p.returncode == 1 and "WORSE" in p.stdout and "node01" in p.stdout, p.stdout[-3000:]


def test_a_slow_node_of_eight_is_named_with_its_rails_and_its_partners_spared(tmp_path):
    code, doc, err, _ = _srun(tmp_path, 8, 2, fabric="node03=0.4")
    assert code == 1 and doc["state"] == "FAIL", err[-3000:]
    nodes = _states(doc, "fabric_node")
    assert nodes.pop("node03") == "FAIL" and set(nodes.values()) == {"PASS"}, doc["headline"]
    assert set(_states(doc, "fabric_nic")) == {"node03:rail0", "node03:rail1"}  # each rail measured alone
    assert "fabric rail 1 of node03 alone" in err
    named = [v for v in doc["verdicts"] if v["state"] == "FAIL"]
    assert all(v["nodes"] == ["node03"] for v in named), named


def test_a_slow_link_is_named_alone_and_neither_of_its_nodes(tmp_path):
    a, b = schedule.quick([f"node{i:02d}" for i in range(1, 9)])[0][0]  # a pair the quick plan measures first
    code, doc, err, _ = _srun(tmp_path, 8, 1, fabric=f"{a}-{b}=0.3")
    failed = [v for v in doc["verdicts"] if v["state"] != "PASS" and v["check"].startswith("fabric")]
    assert code == 1 and [v["target"] for v in failed] == [f"{a}-{b}"], (failed, err[-3000:])
    assert "the link, not either node" in failed[0]["text"] and sorted(failed[0]["nodes"]) == sorted([a, b])
    assert set(_states(doc, "fabric_node").values()) == {"PASS"}


def test_a_silent_rail_is_named_and_the_check_ends_within_the_timeout_and_fifteen_seconds(tmp_path):
    _, _, _, healthy = _srun(tmp_path, 4, 2)
    code, doc, err, wall = _srun(tmp_path, 4, 2, fabric="node02:nic1=0")
    assert code == 1 and _states(doc, "fabric_nic").get("node02:rail1") == "FAIL", (doc.get("headline"), err[-3000:])
    assert _states(doc, "fabric_node")["node02"] == "FAIL" and _states(doc, "fabric_all_reduce") == {"allocation": "SKIP"}
    assert {s for n, s in _states(doc, "fabric_node").items() if n != "node02"} == {"PASS"}
    print(f"\nsilent rail: {wall:.1f} s against a healthy check's {healthy:.1f} s at --timeout {TIMEOUT_S}")
    assert wall - healthy <= TIMEOUT_S + 15, (wall, healthy)
    assert "Traceback" not in err, err[-3000:]


def test_nic_facts_are_read_on_every_node_from_its_own_tree(tmp_path):
    for node in ("node01", "node02"):
        nics = fake_sysfs.healthy_nics()[:3]
        if node == "node02":  # one port down, one trained down to half of its peers' rate
            nics[0] = fake_sysfs.ib_nic("mlx5_0", state="1: DOWN", phys_state="3: Disabled")
            nics[1] = fake_sysfs.ib_nic("mlx5_1", rate="200 Gb/sec (4X HDR)")
        fake_sysfs.write_tree(tmp_path / "sys" / node, nics=nics)
    code, doc, err, _ = _srun(tmp_path, 2, 1, env={"GPUBENCH_FAKE_SYSFS": str(tmp_path / "sys" / "{node}")})
    facts = {(v["check"], v["target"]): v["state"] for v in doc["verdicts"] if v["kind"] == "fact"}
    assert facts[("nic_port", "node02:mlx5_0/1")] == "FAIL" and facts[("nic_port", "node01:mlx5_0/1")] == "PASS", facts
    assert facts[("nic_rate", "node02:mlx5_1/1")] == "WARN", facts
    assert code == 1 and doc["state"] == "FAIL"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_under_torchrun_two_agents_are_two_nodes(tmp_path):
    torchrun = shutil.which("torchrun") or str(Path(sys.executable).parent / "torchrun")
    port, out = _free_port(), tmp_path / "out"
    env = {**os.environ, "GPUBENCH_FAKE_FABRIC": "", "TORCH_CPP_LOG_LEVEL": "ERROR"}
    agents = [subprocess.Popen([torchrun, "--nnodes", "2", "--node-rank", str(k), "--nproc-per-node", "2",
                                "--master-addr", "127.0.0.1", "--master-port", str(port), "--no-python",
                                _gpubench(), "check", "--fabric", "--backend", "fake", "--timeout", str(TIMEOUT_S),
                                "--out", str(out), "--format", "json", "--report", str(tmp_path / f"c{k}.json")],
                               env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path)
              for k in range(2)]
    try:
        ends = [a.communicate(timeout=240) for a in agents]
    finally:
        for a in agents:
            a.kill()
    assert [a.returncode for a in agents] == [0, 0], [e[1][-2000:] for e in ends]
    doc = json.loads((tmp_path / "c0.json").read_text())
    host = socket.gethostname()
    assert set(_states(doc, "fabric_node")) == {f"{host}-n0", f"{host}-n1"} and doc["state"] == "PASS"
    assert not (tmp_path / "c1.json").exists()  # the leader alone speaks for the check


def test_outside_a_launcher_it_says_how_to_start_it_in_one_line(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "OMPI_", "PMI"))
           and k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK")}
    p = subprocess.run([_gpubench(), "check", "--fabric", "--backend", "fake"], capture_output=True, text=True,
                       env=env, timeout=60, cwd=tmp_path)
    assert p.returncode == 2 and p.stderr.count("\n") == 1 and "srun --ntasks-per-node" in p.stderr, p.stderr
    p = subprocess.run([_gpubench(), "check", "--fabric", "sideways", "--backend", "fake"], capture_output=True,
                       text=True, env={**env, "SLURM_PROCID": "0", "SLURM_NTASKS": "1"}, timeout=60, cwd=tmp_path)
    assert p.returncode == 2 and "unknown fabric mode 'sideways'" in p.stderr and p.stderr.count("\n") == 1, p.stderr


def test_an_envelope_floor_fails_every_pair_below_it_in_full_mode_and_its_nic_rate_holds_ports(tmp_path):
    env = tmp_path / "fabric.toml"
    env.write_text('format = "gpubench-expect"\nversion = 2\ngpu = "any"\nmatch = "."\n'
                   '[figure.fabric_link]\nunit = "GB/s"\nbetter = "higher"\nfail_at = 1000.0\n'
                   '[figure.nic_rate]\nunit = "Gb/s"\nbetter = "higher"\ntypical = 400.0\nfail_at = 400.0\n')
    for node in ("node01", "node02", "node03", "node04"):
        rate = "200 Gb/sec (4X HDR)" if node == "node04" else "400 Gb/sec (4X NDR)"
        fake_sysfs.write_tree(tmp_path / "sys" / node, nics=[fake_sysfs.ib_nic("mlx5_0", rate=rate)])
    code, doc, err, _ = _srun(tmp_path, 4, 1, "full", "--expect", str(env),
                              env={"GPUBENCH_FAKE_SYSFS": str(tmp_path / "sys" / "{node}")})
    assert "full: 3 rounds of 2 node pairs" in err, err[-2000:]
    assert set(_states(doc, "fabric_node").values()) == {"FAIL"}, doc.get("headline")  # each below with 3 partners
    rates = _states(doc, "nic_rate")
    assert rates.pop("node04:mlx5_0/1") == "FAIL" and set(rates.values()) == {"PASS"}, rates
    assert code == 1


def test_the_fabric_verdict_reads_in_junit_and_prometheus_parsers_a_series_and_a_case_per_node_link_and_port(tmp_path):
    junitparser = pytest.importorskip("junitparser")
    parser = pytest.importorskip("prometheus_client.parser")
    fake_sysfs.write_tree(tmp_path / "sys", nics=fake_sysfs.healthy_nics()[:2])
    env = {"GPUBENCH_FAKE_SYSFS": str(tmp_path / "sys")}
    cases = {}
    for fmt, name in (("junit", "f.xml"), ("prometheus", "f.prom")):
        names = ",".join(f"node{i:02d}" for i in range(1, 5))
        p = subprocess.run([sys.executable, str(FLEET / "srun"), "--ntasks-per-node=1", _gpubench(), "check",
                            "--fabric", "--backend", "fake", "--timeout", str(TIMEOUT_S), "--out", str(tmp_path / "o"),
                            "--format", fmt, "--report", str(tmp_path / name)], capture_output=True, text=True,
                           timeout=240, cwd=tmp_path,
                           env={**os.environ, **env, "MASTER_PORT": str(_free_port()), "FAKE_SLURM_NODES": names,
                                "FAKE_SLURM_GPUS": "1", "GPUBENCH_FAKE_FABRIC": "node03=0.4"})
        assert p.returncode == 1, p.stderr[-2000:]
    for case in junitparser.JUnitXml.fromfile(str(tmp_path / "f.xml")):
        for c in case:
            cases[(c.classname, c.name)] = "failed" if not c.is_passed and not c.is_skipped else \
                "skipped" if c.is_skipped else "passed"
    failed = sorted(k for k, s in cases.items() if s == "failed")
    assert ("gpubench.check.fabric_node", "node03") in failed and all("node03" in name for _, name in failed), failed
    assert cases[("gpubench.check.fabric_node", "node01")] == "passed"
    families = {f.name: f for f in parser.text_string_to_metric_families((tmp_path / "f.prom").read_text())}
    status = {(s.labels["check"], s.labels["target"]): s.value for s in families["gpubench_check_status"].samples}
    assert status[("fabric_node", "node03")] == 0.0 and status[("fabric_node", "node02")] == 1.0
    assert status[("nic_port", "node01:mlx5_0/1")] == 1.0 and status[("nic_port", "node04:mlx5_1/1")] == 1.0
    labels = [tuple(sorted(s.labels.items())) for s in families["gpubench_check_status"].samples]
    assert len(labels) == len(set(labels))  # one series each: node-exporter drops a file with two


def test_under_mpirun_ranks_named_as_two_nodes_are_two_nodes_with_rails_from_zero(tmp_path):
    mpirun = shutil.which("mpirun")
    if mpirun is None:
        pytest.skip("Open MPI's mpirun is not installed (.ci/run installs openmpi-bin)")
    # One host's four ranks as two nodes (their names SLURMD_NODENAME's way): mpirun numbers them 0..3 on the host,
    # so each node's rails come from its ranks' order, 0 and 1.
    script = (f"SLURMD_NODENAME=mpinode$((OMPI_COMM_WORLD_RANK / 2)) exec {_gpubench()} check --fabric --backend fake "
              f"--timeout {TIMEOUT_S} --out {tmp_path / 'out'} --format json --report {tmp_path / 'c.json'}")
    root = ["--allow-run-as-root"] if os.geteuid() == 0 else []
    p = subprocess.run([mpirun, *root, "--oversubscribe", "-np", "4", "-x", "MASTER_ADDR=127.0.0.1", "-x",
                        f"MASTER_PORT={_free_port()}", "-x", "PATH", "bash", "-c", script], capture_output=True,
                       text=True, timeout=240, cwd=tmp_path)
    assert p.returncode == 0, p.stderr[-3000:]
    doc = json.loads((tmp_path / "c.json").read_text())
    assert _states(doc, "fabric_link") == {"mpinode0-mpinode1": "PASS"} and doc["state"] == "PASS"
    assert "fabric of 2 nodes × 2 rails" in p.stderr


def test_racks_from_a_topology_file_pair_nodes_across_racks_only(tmp_path):
    topo = tmp_path / "topology.conf"
    topo.write_text("# two leaves under one spine\nSwitchName=leaf1 Nodes=node[01-02]\nSwitchName=leaf2 Nodes=node[03-04]\n"
                    "SwitchName=spine Switches=leaf[1-2]\n")
    code, doc, err, _ = _srun(tmp_path, 4, 1, "racks-across", "--topology", str(topo))
    assert code == 0 and "racks-across: 1 round of 2 node pairs" in err, err[-2000:]
    links = set(_states(doc, "fabric_link"))
    racks = {"node01": 1, "node02": 1, "node03": 2, "node04": 2}
    assert links and all(racks[a] != racks[b] for a, b in (t.split("-") for t in links)), links


def test_one_node_is_refused_in_one_line_not_a_pass_of_nothing(tmp_path):
    code, doc, err, _ = _srun(tmp_path, 1, 2)
    lines = [x for x in err.splitlines() if x.startswith("gpubench: error:")]
    assert code == 2 and not doc and len(lines) == 2 and "run it across two nodes or more" in lines[0], err[-2000:]
    assert "Traceback" not in err
