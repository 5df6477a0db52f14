"""gpubench check's stations and what changed with them: the binding of a station to its GPU's CPUs, host copies
one GPU at a time (Turns) and their total over every GPU at once, envelopes tied to a host class and a GPU count,
a node's own history as its envelope, WARN only beyond the warn line and noise, and the stations' environment."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from gpubench.run import runner
from gpubench import child
from gpubench.check import affinity, checkset, drive, envelope, node_history as history, station, stations
from gpubench.check.checkset import Evidence, Figure
from gpubench.check.judge import Judge
from gpubench.ranks import group

H2D = Figure("h2d", "h2d", "copy", r"direction=h2d,memory=pinned,src=host,dst=gpu\d+,copy_bytes=\d+", "bandwidth",
             run="turns", largest="copy_bytes")
H2D_ALL = Figure("h2d_all", "h2d, all", "copy", H2D.case, "bandwidth", target="node", combine="sum", needs=2,
                 largest="copy_bytes")
HOST = "Intel(R) Xeon(R) Processor"


def _samples(value: float, cv: float = 0.002, n: int = 12, seed: int = 0) -> list[float]:
    rng = np.random.default_rng(seed)
    return list(value * (1 + cv * rng.standard_normal(n)))


def _copy_row(gpu: int, value: float, size: int = 1 << 30, **extra) -> dict:
    samples = extra.pop("samples", _samples(value, seed=gpu))
    return {"suite": "copy", "metric": "bandwidth", "unit": "GB/s", "better": "higher", "status": "ok",
            "case": f"direction=h2d,memory=pinned,src=host,dst=gpu{gpu},copy_bytes={size}", "copy_bytes": size,
            "device_index": gpu, "device": "NVIDIA H100 80GB HBM3", "memory": "pinned", "roof": "host link",
            "value": float(np.median(samples)), "samples": samples, "contended": "", "host_load": 0.1, **extra}


def _env(host_class=(HOST,), gpus=None, typical=54.0, warn=48.6, fail=40.5, key="h2d") -> envelope.Envelope:
    e = envelope.Entry("GB/s", "higher", typical, warn, fail, 8, 0.01, gpus)
    return envelope.Envelope("NVIDIA H100 80GB HBM3", "H100", {key: e}, "test runs", "/x/h100.toml",
                             {"host_class": list(host_class)} if host_class else {})


# --- binding -------------------------------------------------------------------------------------------------

def _sysfs(tmp_path: Path, cpulist: str | None, node: int = 1) -> Path:
    dev = tmp_path / "bus/pci/devices/0000:19:00.0"
    dev.mkdir(parents=True)
    (dev / "numa_node").write_text(f"{node}\n")
    if cpulist is not None:
        (dev / "local_cpulist").write_text(cpulist + "\n")
    return tmp_path


def test_cpulist_reads_back():
    assert affinity.cpulist({0, 1, 2, 3, 8, 10, 11}) == "0-3,8,10-11" and affinity.cpulist([5]) == "5"


def test_a_station_binds_every_thread_to_its_gpus_cpus_and_says_so(tmp_path, monkeypatch):
    calls = []
    allowed = {0, 1, 2, 3, 4, 5, 6, 7}
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(calls[-1][1]) if calls else set(allowed))
    monkeypatch.setattr(os, "sched_setaffinity", lambda tid, cpus: calls.append((tid, set(cpus))))
    proc_self = tmp_path / "self"
    (proc_self / "task" / "11").mkdir(parents=True)
    (proc_self / "task" / "12").mkdir()
    sysfs = _sysfs(tmp_path, "4-7,12")
    record = affinity.bind("0000:19:00.0", sysfs, proc_self=proc_self)
    assert record == {"bound": True, "cpus": "4-7", "numa_node": 1, "source": "sysfs local_cpulist", "why": ""}
    assert sorted(calls) == [(11, {4, 5, 6, 7}), (12, {4, 5, 6, 7})]  # every thread, within what it may use
    assert affinity.describe(record) == "CPUs 4-7 (NUMA node 1)"


def test_nvml_names_the_cpus_where_sysfs_does_not(tmp_path, monkeypatch):
    class Nvml:
        def nvmlInit(self):
            pass

        def nvmlShutdown(self):
            pass

        def nvmlDeviceGetHandleByPciBusId(self, bus):
            assert bus == "0000:19:00.0"
            return "h"

        def nvmlDeviceGetCpuAffinity(self, handle, words):
            return [0b11110000]

    cpus, source = affinity.gpu_cpus("0000:19:00.0", _sysfs(tmp_path, None), Nvml())
    assert cpus == {4, 5, 6, 7} and source.startswith("NVML")


def test_where_binding_means_nothing_it_is_not_done_and_the_reason_is_kept(tmp_path, monkeypatch):
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1})
    monkeypatch.setattr(os, "sched_setaffinity", lambda *a: pytest.fail("nothing to bind"))
    one_node = affinity.bind("0000:19:00.0", _sysfs(tmp_path / "a", "0-1"))
    assert not one_node["bound"] and "every CPU this process may use" in one_node["why"]
    elsewhere = affinity.bind("0000:19:00.0", _sysfs(tmp_path / "b", "8-9"))
    assert not elsewhere["bound"] and "none of the CPUs near the GPU (8-9)" in elsewhere["why"]
    fake = affinity.bind(None)
    assert not fake["bound"] and "no PCI address" in fake["why"]
    assert affinity.describe(fake).startswith("not bound: ")


# --- turns, and the stations' environment ----------------------------------------------------------------------

class _Group:
    def __init__(self, rank: int, world: int, log: list):
        self.rank, self.world_size, self.log = rank, world, log

    def step(self, where=None):
        pass

    def gather_objects(self, obj):
        self.log.append(("wait", self.rank, obj))
        return [obj] * self.world_size


def test_turns_measure_each_case_on_one_gpu_at_a_time():
    log: list = []

    class Run:  # the runner as a layout sees it: its public run_case
        def __init__(self, rank):
            self.rank = rank

        def run_case(self, suite, case, cfg, **kw):
            log.append(("measure", self.rank, case))
            return [{"case": case, "device_index": self.rank}]

    for rank in range(3):
        turns = station.Turns(_Group(rank, 3, log))
        suite = type("S", (), {"name": "copy"})()
        assert turns.measure(Run(rank), suite, "h2d", None, None) == [{"case": "h2d", "device_index": rank}]
    # each rank measured at its own turn only: after the turns before it, and every turn ends at the control plane
    mine = [log[k * 4:(k + 1) * 4] for k in range(3)]
    for rank, events in enumerate(mine):
        assert [e[0] for e in events] == ["wait"] * rank + ["measure"] + ["wait"] * (3 - rank)
        assert [e[2] for e in events if e[0] == "wait"] == [0, 1, 2]


def test_the_checks_own_stations_are_no_co_tenant_of_any_figure(monkeypatch):
    # 4 x H200, 2026-11-29: once the stations had measured the GPU pairs, each held a context on its peers' GPUs,
    # and every pair's sendrecv named the other pair's two stations as sharing its GPUs. Every job names every
    # station as the check's own, and a station's run counts them so beside its group's ranks.
    jobs = []
    monkeypatch.setattr(drive.stations, "form", lambda members, folder: None)
    monkeypatch.setattr(drive.stations, "leave", lambda members: None)
    monkeypatch.setattr(drive.stations, "run", lambda members, job: jobs.append(job(0, 0)) or [{"run_dir": "d"}] * len(members))
    pool = object.__new__(stations.Pool)
    pool.ready, pool.failed, pool.folder = {g: {"pid": 100 + g} for g in range(4)}, {}, "stores"
    pool.get = lambda gpus: [object() for _ in gpus]
    plan = drive.Plan("fake", [0, 1, 2, 3], "out", "c", [])
    pairs = tuple(f for f in checkset.load() if f.key == "sendrecv")
    done = drive.session(plan, pool, [[0, 2], [1, 3]], [drive.Step("pairs round 2", "ranks", pairs)])
    assert [c.run_dir for c in done] == ["d", "d"] and [j["own"] for j in jobs] == [[100, 101, 102, 103]]
    # A station's run counts them beside its group's ranks (the layout's own pids) as no co-tenant.
    seen = {}
    monkeypatch.setattr(station.runner, "execute", lambda plan, backend, request, **kw: seen.update(kw) or _Done())
    monkeypatch.setattr(station, "plan_for", lambda *a, **k: None)
    s = _bare_station()
    s.group = _Group(0, 2, [])
    s.do_run({**jobs[0], "kind": "ranks", "request": _request_text()})
    assert seen["hooks"].own_pids == {100, 101, 102, 103} and isinstance(seen["layout"], station.Ranks)
    assert seen["layout"].own_pids() == {os.getpid()}  # _Group gathers this rank's pid for every rank


class _Done:
    run_dir = type("D", (), {"path": None})()
    status, failures = "complete", 0


def _bare_station():
    s = object.__new__(station.Station)
    s.backend, s.gpu, s.binding, s.group, s.runs = type("B", (), {"name": "fake"})(), 0, {}, None, 0
    s.comm_backend, s.emit = None, lambda *a, **k: None
    return s


def _request_text() -> str:
    from gpubench.run.request import RunRequest, dumps

    return dumps(RunRequest())


def test_after_a_stations_first_run_a_busy_gpu_is_its_own_doing(monkeypatch):
    # a GPU still busy from the station's previous run names no co-tenant (4 x H200: the turns run after the devices
    # run read "device 56% busy before the run" on GPUs the co-tenant never touched); the first run still says so, a
    # process of another namespace that cannot be named
    hooks = []
    monkeypatch.setattr(station.runner, "execute", lambda plan, backend, request, **kw: hooks.append(kw["hooks"])
                        or _Done())
    monkeypatch.setattr(station, "plan_for", lambda *a, **k: None)
    s = _bare_station()
    job = {"kind": "single", "request": _request_text()}
    s.do_run(job)
    s.do_run(job)
    assert [h.busy_is_ours for h in hooks] == [False, True]
    assert runner.RunHooks().busy_is_ours is False  # a plain run: a busy GPU as it starts is somebody else's


def test_stations_leave_the_launchers_rank_variables_behind(monkeypatch):
    seen = {}

    class Popen:
        def __init__(self, argv, **kw):
            seen.update(argv=argv, **kw)
            self.stdout, self.stdin, self.pid = iter(()), None, 1

        def poll(self):
            return 0

    monkeypatch.setenv("SLURM_PROCID", "3")
    monkeypatch.setenv("RANK", "3")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "4,5")
    monkeypatch.setattr(child.subprocess, "Popen", Popen)
    stations.Station("cuda", 1, 2, {"NCCL_NVLS_ENABLE": "0"})
    env = seen["env"]
    assert "SLURM_PROCID" not in env and "RANK" not in env  # a world of its own, not a rank of srun's step
    assert env["CUDA_VISIBLE_DEVICES"] == "4,5" and env["NCCL_NVLS_ENABLE"] == "0"
    assert seen["argv"][-4:] == ["gpubench.check.station", "cuda", "1", "2"] and seen["start_new_session"]


def _station(code: str) -> stations.Station:
    """A station whose process runs ``code`` (Python) instead of gpubench's station."""
    s = object.__new__(stations.Station)
    s.gpu, s.child = 2, child.Child([sys.executable, "-c", code], pipes=True)
    return s


def test_a_station_that_ends_is_named_with_how():
    killed = _station("import os; os.kill(os.getpid(), 9)")
    failed = _station('import json, time; print(json.dumps({"event": "failed", "why": "no case matches", '
                      '"usage": True}), flush=True); time.sleep(30)')
    silent = _station("import time; time.sleep(30)")
    try:
        with pytest.raises(stations.StationError, match=r"GPU 2 \(pid \d+\) was killed by SIGKILL"):
            stations.wait_all([killed], "done", 30)
        with pytest.raises(stations.StationError) as e:
            stations.wait_all([failed], "done", 30)
        assert e.value.usage and "GPU 2: no case matches" in e.value.why
        with pytest.raises(stations.StationError, match="no 'done' within 0 s"):
            stations.wait_all([silent], "done", 0)
    finally:
        for s in (killed, failed, silent):
            s.child.kill()


# --- the total over every GPU at once --------------------------------------------------------------------------

def test_a_total_adds_every_gpus_figure_and_its_samples_and_keeps_who_shared():
    rows = [_copy_row(0, 40.0), _copy_row(1, 44.0, contended="pid 9 (burn)"), _copy_row(0, 9.0, size=1 << 20)]
    (ev,) = checkset.evidence(H2D_ALL, pd.DataFrame(rows), "run")
    assert ev.target == "node" and ev.value == pytest.approx(84.0, rel=0.01) and ev.row["gpus"] == 2
    assert len(ev.samples) == 12 and ev.samples[0] == pytest.approx(rows[0]["samples"][0] + rows[1]["samples"][0])
    assert ev.row["contended"] == "pid 9 (burn)"
    broken = [_copy_row(0, 40.0), {**_copy_row(1, 44.0), "status": "error", "message": "CUDA error"}]
    (bad,) = checkset.evidence(H2D_ALL, pd.DataFrame(broken), "run")
    assert bad.row["status"] == "error" and bad.why == "CUDA error"


def test_a_total_is_held_only_to_an_envelope_of_as_many_gpus():
    row = {**_copy_row(0, 150.0), "device_index": None, "gpus": 4}
    ev = Evidence(H2D_ALL, "node", None, None, row)
    env = _env(gpus=4, typical=170.0, warn=153.0, fail=127.5, key="h2d_all")
    assert Judge(env, host=HOST, gpus=4).one(ev, []).state == "WARN"
    other = Judge(env, host=HOST, gpus=8).one(ev, [])
    assert other.state == "SKIP" and "holds this total for 4 GPUs at once, this check measured 8" in other.text


# --- host classes, noise, retries ------------------------------------------------------------------------------

def test_a_figure_the_host_sets_is_held_to_an_envelope_of_its_host_class_only():
    ev = Evidence(H2D, "gpu0", 0, None, _copy_row(0, 47.8))
    same = Judge(_env(), host=HOST).one(ev, [])
    assert same.state == "WARN" and same.warn_at == 48.6 and "envelope h100.toml" in same.reference
    other = Judge(_env(), host="AMD EPYC 9654", links={0: 63.0}).one(ev, [])
    # another class of host: the spec fallback (0.70 × the link's 63 GB/s) holds it instead, and the verdict says why
    assert other.state == "PASS" and other.reference.startswith("spec fallback")
    assert any("holds it for hosts with Intel(R) Xeon(R) Processor, not AMD EPYC 9654" in n for n in other.notes)
    unrecorded = Judge(_env(host_class=()), host="AMD EPYC 9654").one(ev, [])
    assert unrecorded.state == "WARN"  # an envelope that does not say where it was made holds every host
    device = Evidence(Figure("hbm", "hbm", "elementwise", "x", "bandwidth"), "gpu0", 0, None,
                      {**_copy_row(0, 2700.0), "memory": None, "roof": "memory", "unit": "GB/s"})
    hbm = _env(typical=3000.0, warn=2850.0, fail=2700.0 * 1.05, key="hbm")
    assert Judge(hbm, host="AMD EPYC 9654").one(device, [], ).state == "FAIL"  # the GPU's own figure: any host


def test_warn_only_beyond_the_warn_line_and_the_figures_noise():
    env = _env(typical=54.0, warn=48.6, fail=40.5)
    wide = Evidence(H2D, "gpu0", 0, None, _copy_row(0, 40.0, samples=[20.0, 30.0, 38.0, 40.0, 41.0, 55.0, 60.0]))
    v = Judge(env, host=HOST).one(wide, [])
    assert v.value < 40.5 and v.ci[1] >= 48.6 and v.state == "PASS"  # its own noise reaches the warn line
    narrow = Evidence(H2D, "gpu0", 0, None, _copy_row(0, 40.0, samples=[37.0, 38.0, 39.0, 40.0, 41.0, 42.0, 46.0]))
    v = Judge(env, host=HOST).one(narrow, [])
    assert v.state == "WARN" and "within noise of floor 40.5" in v.text
    floor_only = envelope.Envelope("g", "g", {"h2d": envelope.Entry("GB/s", "higher", None, None, 41.5)}, "", "/x.toml")
    assert Judge(floor_only).one(narrow, []).state == "WARN"  # a floor alone: its median past it still warns


def test_a_retry_fails_only_beyond_the_fail_line_with_its_own_noise():
    env = _env(typical=54.0, warn=48.6, fail=40.5)
    first = Evidence(H2D, "gpu0", 0, None, _copy_row(0, 30.0))
    noisy = Evidence(H2D, "gpu0", 0, None, _copy_row(0, 39.0, samples=[30.0, 35.0, 39.0, 44.0, 45.0]))
    v = Judge(env, retry=lambda ev: noisy, host=HOST).one(first, [])
    assert v.state == "WARN" and v.retry == pytest.approx(39.0) and "between the lines" in v.text
    tight = Evidence(H2D, "gpu0", 0, None, _copy_row(0, 31.0))
    assert Judge(env, retry=lambda ev: tight, host=HOST).one(first, []).state == "FAIL"
    healthy = Evidence(H2D, "gpu0", 0, None, _copy_row(0, 55.0))
    assert Judge(env, retry=lambda ev: healthy, host=HOST).one(first, []).state == "PASS"


# --- envelopes: files, merging, a node's own history -----------------------------------------------------------

def test_host_class_and_gpus_round_trip_through_the_file(tmp_path):
    env = _env(gpus=4, key="h2d_all")
    path = envelope.write(env, tmp_path / "e.toml")
    text = path.read_text()
    assert f"version = {envelope.VERSION}" in text and f"host_class = ['{HOST}']" in text and "gpus = 4" in text
    back = envelope.load_file(path)
    assert back.entries["h2d_all"].gpus == 4 and back.entries["h2d_all"].hosts == (HOST,)


def test_a_merged_envelope_keeps_each_entrys_source_and_host_class():
    own = _env(host_class=("AMD EPYC 9654",), key="h2d")
    own.source, own.path = "history of n1: 6 earlier checks", "/out/n1"
    shipped = _env(key="d2h")
    both = envelope.merged(own, shipped)
    assert set(both.entries) == {"h2d", "d2h"}
    assert both.entries["h2d"].source.startswith("n1 (history of n1") and both.entries["h2d"].hosts == ("AMD EPYC 9654",)
    assert both.entries["d2h"].hosts == (HOST,) and "h100.toml (test runs)" in both.entries["d2h"].source


def _doc(host: str, started: str, run_dir: str, state: str = "PASS", value: float = 54.0, version: int = 2) -> dict:
    return {"format": "gpubench-check", "version": version, "host": host, "started": started,
            "host_class": HOST, "gpus": [{"index": 0, "name": "NVIDIA H100 80GB HBM3"}],
            "verdicts": [{"check": "h2d", "target": "gpu0", "kind": "performance", "state": state, "value": value,
                          "unit": "GB/s", "better": "higher", "run_dir": run_dir,
                          "case": _copy_row(0, 1.0)["case"]}]}


def _history(tmp_path: Path, states: list[str], version: int = 2) -> Path:
    """Check runs of node n1 under tmp/out/n1, each a run directory with its check.json and a copy table."""
    from gpubench import results

    root = tmp_path / "out" / "n1"
    for k, state in enumerate(states):
        run = root / f"2026112{k}T000000Z-00000{k}"
        run.mkdir(parents=True)
        (run / "run.json").write_text(json.dumps({"status": "complete", "schema_version": results.SCHEMA_VERSION}))
        results.save(results.frame([_copy_row(0, 54.0 + k)], ("direction",)), run / "copy.parquet", suite="copy")
        doc = _doc("n1", f"2026-11-2{k}T00:00:00+00:00", str(run), state, 54.0 + k, version)
        (run / "check.json").write_text(json.dumps(doc))
    return root


def test_a_nodes_own_history_is_its_envelope_once_it_has_enough_healthy_checks(tmp_path):
    root = _history(tmp_path, ["PASS", "PASS", "SKIP", "PASS"])
    env, why = history.own(root, "n1", "NVIDIA H100 80GB HBM3")
    assert env is None and "4 earlier check(s) of n1" in why and f"fewer than {history.MIN_RUNS}" in why
    root = _history(tmp_path / "more", ["PASS", "PASS", "SKIP", "PASS", "WARN", "PASS"])
    env, why = history.own(root, "n1", "NVIDIA H100 80GB HBM3")
    e = env.entries["h2d"]
    assert e.figures == 5 and e.typical == 56.0  # the WARN's figure is left out: a degradation is no norm
    assert e.hosts == (HOST,) and env.source.startswith("history of n1: 6 earlier checks, 2026-11-20 to 2026-11-25")
    assert history.own(root, "n2", None)[0] is None and history.own(root, "n1", "NVIDIA H200")[0] is None


def test_checks_before_version_2_are_no_history_of_todays_host_copies(tmp_path):
    root = _history(tmp_path, ["PASS"] * 6, version=1)
    assert history.own(root, "n1", None)[0] is None


def test_on_gpus_a_figure_is_measured_at_the_one_size_it_is_judged_at(tmp_path):
    import re

    figures = [f for f in checkset.load() if f.key in ("h2d", "peer", "hbm")]
    on_gpu = re.compile(checkset.selection(figures, "cuda")[1])
    assert on_gpu.fullmatch("direction=h2d,memory=pinned,src=host,dst=gpu3,copy_bytes=1073741824")
    assert not on_gpu.fullmatch("direction=h2d,memory=pinned,src=host,dst=gpu3,copy_bytes=1048576")
    assert on_gpu.fullmatch("direction=peer,memory=device,src=gpu0,dst=gpu3,copy_bytes=1073741824")
    assert on_gpu.fullmatch("op=triad,dtype=fp32,array_bytes=268435456,impl=torch")  # no `at`: the quick grid's
    fake = re.compile(checkset.selection(figures, "fake")[1])  # 1 GiB does not fit the fake device: the grid's sizes
    assert fake.fullmatch("direction=h2d,memory=pinned,src=host,dst=gpu3,copy_bytes=1048576")
    bad = tmp_path / "c.toml"
    bad.write_text('[[figure]]\nkey = "x"\ntitle = "x"\nsuite = "s"\ncase = "n=1"\nmetric = "m"\nat = "1G"\n')
    with pytest.raises(checkset.UsageError, match="at = \"1G\" picks a size"):
        checkset.load(bad)


def test_a_gpu_its_run_has_no_row_for_is_not_measured_never_absent(tmp_path):
    from gpubench import results
    from gpubench.check import drive

    run = tmp_path / "run"
    run.mkdir()
    (run / "run.json").write_text(json.dumps({"status": "failed", "schema_version": results.SCHEMA_VERSION}))
    results.save(results.frame([_copy_row(0, 54.0)], ("direction",)), run / "copy.parquet", suite="copy")
    plan = drive.Plan("cuda", [0, 1], str(tmp_path), "n1", [H2D])
    plan.children.append(drive.Child("turns", str(run), 1, figures=("h2d",), gpus=(0, 1), status="failed"))
    evs = {e.target: e for e in drive.evidence(plan)}
    assert set(evs) == {"gpu0", "gpu1"} and evs["gpu0"].row is not None and evs["gpu1"].row is None
    v = Judge(_env(), host=HOST).one(evs["gpu1"], [])
    assert v.state == "FAIL" and v.text == "not measured: its run (failed) has no row of it"


@pytest.mark.timeout(120)
def test_a_station_whose_check_is_gone_ends_in_one_line():
    # The check's end closes the station's protocol before its parent poll notices (srun killing a node's step,
    # 4 x H100, 2026-11-27): the station's next answer cannot be written. It ends in one line, exit 1, no traceback.
    proc = subprocess.Popen([sys.executable, "-m", "gpubench.check.station", "fake", "0", "1"],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert json.loads(proc.stdout.readline())["event"] == "ready"
        proc.stdout.close()
        proc.stdin.write(json.dumps({"do": "ungroup"}) + "\n")
        proc.stdin.flush()
        assert proc.wait(timeout=60) == 1
        err = proc.stderr.read()
    finally:
        proc.kill()
    assert "Traceback" not in err, err
    assert err.strip().splitlines() == [f"gpubench: error: {station.GONE}"], err


_ORPHANS = """
import os, sys, time
from gpubench.check import checkset, drive, stations
pool = stations.Pool("fake", [0, 1], {})
pool.start()
group = pool.get([0, 1])
stations.form([group], pool.folder)
node = tuple(f for f in checkset.load() if f.key == "all_reduce")
job = drive._job(drive.Plan("fake", [0, 1], sys.argv[1], "t", list(node)), drive.Step("node", "ranks", node,
                                                                                       (1 << 20,)), [0, 1])
for _ in range(30):  # collective jobs queued (over gloo, a few tenths of a second each): the check dies meanwhile
    for s in group:
        s.send(do="run", **job(s.gpu))
print(" ".join(str(s.proc.pid) for s in group), flush=True)
time.sleep(120)
"""


def test_a_station_group_names_the_check_not_a_spawner_when_its_parent_is_gone():
    # 4 x H100, 2026-11-27, a node's step killed under the stand-in srun: the stations' groups said "gpubench's
    # spawner (pid …), which hosts it, is gone" of the check, which is no spawner and hosts no store (the station of
    # rank 0 does).
    assert group.store_host({"GPUBENCH_STORE_HOSTED": "check"}) == group.CHECK
    assert group.store_host({"GPUBENCH_STORE_HOSTED": "1"}) == group.SPAWNER
    line = group.parent_gone(group.CHECK, 1, "127.0.0.1:37497", 5750, "vm")
    assert line == "rank 1: the gpubench check (pid 5750 on vm) that started this measuring process is gone"
    assert group.parent_gone(group.SPAWNER, 1, "127.0.0.1:37497", 5750, "vm") == (
        "rank 1 lost the rendezvous store at 127.0.0.1:37497: gpubench's spawner (pid 5750 on vm), which hosts it, "
        "is gone")


@pytest.mark.timeout(180)
def test_stations_in_a_group_end_in_one_line_naming_the_check_when_it_is_killed(tmp_path):
    # A check killed while its stations measure in a group (a node's step killed by srun): each station ends within a
    # few seconds in one `gpubench: error:` line that names the check (its own parent watch or its group's, whichever
    # sees it first), no traceback.
    err = tmp_path / "err"
    with err.open("w") as sink:
        check = subprocess.Popen([sys.executable, "-c", _ORPHANS, str(tmp_path / "runs")], stdout=subprocess.PIPE,
                                 stderr=sink, text=True)
        pids = [int(p) for p in check.stdout.readline().split()]
        assert len(pids) == 2, err.read_text()[-2000:]
        time.sleep(2)  # the jobs are under way
        check.kill()
        check.wait(timeout=30)
        deadline = time.time() + 60
        while time.time() < deadline and any(_alive(p) for p in pids):
            time.sleep(0.2)
    try:
        assert not any(_alive(p) for p in pids), "a station outlived its check by a minute"
    finally:
        for p in pids:
            if _alive(p):
                os.kill(p, 9)
    lines = [ln for ln in err.read_text().splitlines() if ln.strip()]
    assert "Traceback" not in err.read_text(), err.read_text()[-3000:]
    errors = [ln for ln in lines if ln.startswith("gpubench: error:")]
    assert len(errors) == 2 and all("gpubench check" in ln and "spawner" not in ln for ln in errors), lines


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return not Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] == "Z"
