"""Who else used the GPU and the host: the vendor process lists (mocked NVML and amdsmi), the runner's watch
between cases, and the host's load over a run (a fake /proc)."""

import json
import os
import signal
import subprocess
import sys
import time
import types
from pathlib import Path

import pytest

from test_telemetry import AmdDev, fake_amdsmi, fake_nvml, three_gpus

from gpubench.machine import contention
from gpubench import results
from gpubench.run import layouts
from gpubench.machine.procfs import started
from gpubench.files import write_json
from gpubench.machine.telemetry import open_telemetry


def test_nvml_lists_compute_and_graphics_processes_once(monkeypatch):
    nv = fake_nvml(three_gpus())
    proc = lambda pid: types.SimpleNamespace(pid=pid, usedGpuMemory=1 << 30)  # noqa: E731
    nv.nvmlDeviceGetComputeRunningProcesses = lambda h: [proc(4321), proc(os.getpid())]
    nv.nvmlDeviceGetGraphicsRunningProcesses = lambda h: [proc(4321)]
    nv.nvmlDeviceGetUtilizationRates = lambda h: types.SimpleNamespace(gpu=97, memory=40)
    monkeypatch.setitem(sys.modules, "pynvml", nv)
    t = open_telemetry("cuda", 0)
    assert t.processes() == sorted({4321, os.getpid()})
    assert t.utilization() == 97.0


def test_nvml_without_process_queries_is_unknown_not_alone(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", fake_nvml(three_gpus()))
    t = open_telemetry("cuda", 0)
    assert t.processes() is None and t.utilization() is None


def test_amdsmi_process_list_in_both_rocm_spellings(monkeypatch):
    devs = [AmdDev("0000:03:00.0", "u0")]
    smi = fake_amdsmi(devs)
    monkeypatch.setitem(sys.modules, "amdsmi", smi)
    t = open_telemetry("hip", 0)
    smi.amdsmi_get_gpu_process_list = lambda h: [{"name": "python3", "pid": 77, "mem": 1}]  # ROCm 6
    assert t.processes() == [77]
    smi.amdsmi_get_gpu_process_list = lambda h: ["handle-9"]  # ROCm 5: handles to look up
    smi.amdsmi_get_gpu_process_info = lambda h, p: {"pid": 9, "name": "x"}
    assert t.processes() == [9]
    smi.amdsmi_get_gpu_activity = lambda h: {"gfx_activity": 88, "umc_activity": 1, "mm_activity": "N/A"}
    assert t.utilization() == 88.0


class Reader:
    def __init__(self, pids, busy=0.0):
        self.pids, self.busy = pids, busy

    def processes(self):
        return self.pids

    def utilization(self):
        return self.busy


def fake_proc(tmp_path, procs):
    """A /proc holding ``{pid: (comm, ppid, cpu ticks)}``."""
    for pid, (comm, ppid, ticks) in procs.items():
        d = tmp_path / str(pid)
        d.mkdir(exist_ok=True)
        (d / "comm").write_text(comm + "\n")
        fields = ["S", str(ppid)] + ["0"] * 9 + [str(ticks), "0"]
        (d / "stat").write_text(f"{pid} ({comm}) " + " ".join(fields) + "\n")
    return tmp_path


def test_watch_names_other_processes_and_leaves_ours_out(tmp_path):
    proc = fake_proc(tmp_path, {4321: ("python3", 1, 0)})
    reader = Reader([os.getpid(), 555, 4321])
    w = contention.Watch(reader, own_pids={555}, proc=proc)
    case = w.begin()
    assert case.before == ["pid 4321 (python3)"]
    reader.pids = [os.getpid(), 9999]  # the first left, one this /proc does not show arrived
    contended, load = w.end(case, "elementwise", "op=add")
    assert contended == "pid 4321 (python3), pid 9999 (not visible here)"
    assert load is None  # this /proc has no stat: the host's load is unknown, not idle
    reader.pids = [os.getpid()]
    w._last = None  # a case that starts later than right after the last one looks again
    assert w.end(w.begin(), "elementwise", "op=mul")[0] == ""  # alone again
    s = w.summary()
    assert s["cases"] == {"elementwise": ["op=add"]}
    assert s["contended"] == "pid 4321 (python3), pid 9999 (not visible here)"
    assert s["gpu"]["others"] == ["pid 4321 (python3)", "pid 9999 (not visible here)"]


def test_watch_alone_unknown_and_busy_before_the_run(tmp_path):
    alone = contention.Watch(Reader([os.getpid()]), proc=tmp_path)
    assert alone.note(alone.check(), alone.check()) == "" and alone.summary()["contended"] == ""
    unknown = contention.Watch(Reader(None, busy=None), proc=tmp_path)
    assert unknown.note(unknown.check(), unknown.check()) is None and unknown.summary()["contended"] is None
    # Our work has not started, yet the device is busy and no process shows (another container's): contended.
    busy = contention.Watch(Reader([], busy=96.0), proc=tmp_path)
    assert busy.note(busy.check(), busy.check()) == "device 96% busy before the run"
    assert busy.summary()["gpu"]["busy_before_pct"] == 96.0
    # A worker's turn: the device was just busy with this run's own processes, which names no co-tenant (it
    # flagged a quick night's 24 per-process cases "GPU shared" on an idle H100); a process that is there still is.
    ours = contention.Watch(Reader([], busy=96.0), proc=tmp_path, busy_is_ours=True)
    assert ours.end(ours.begin(), "launch", "measure=host_launch")[0] == ""
    assert ours.summary()["cases"] == {} and ours.summary()["contended"] == ""
    proc = fake_proc(tmp_path, {4321: ("python3", 1, 0)})
    there = contention.Watch(Reader([os.getpid(), 4321], busy=96.0), proc=proc, busy_is_ours=True)
    assert there.end(there.begin(), "launch", "measure=host_launch")[0] == "pid 4321 (python3)"


def _cpu_stat(proc, busy_ticks, idle_ticks, cpus=2):
    """/proc/stat with ``busy_ticks`` of user time over all CPUs."""
    lines = [f"cpu  {busy_ticks} 0 0 {idle_ticks} 0 0 0 0 0 0"] + [f"cpu{i} 0 0 0 0 0 0 0 0 0 0" for i in range(cpus)]
    (proc / "stat").write_text("\n".join(lines) + "\n")


def test_host_cpu_counts_what_others_used_not_ours(tmp_path, monkeypatch):
    # Two CPUs for 10 s: 2000 ticks of capacity. All CPUs together were busy 1500 ticks, 600 of them ours
    # (this process 400 and a worker 200, reaped children included): others used 900 / 2000 = 45 %.
    tick = os.sysconf("SC_CLK_TCK")
    pid = os.getpid()
    proc = fake_proc(tmp_path, {pid: ("gpubench", 1, 0), 4242: ("worker", pid, 0)})
    _cpu_stat(proc, 0, 0)
    monkeypatch.setattr(contention.time, "monotonic", iter([0.0, 10.0]).__next__)
    cpu = contention.HostCpu({pid, 4242}, proc)
    a = cpu.mark()
    _cpu_stat(proc, 15 * tick, 5 * tick)
    fake_proc(tmp_path, {pid: ("gpubench", 1, 4 * tick), 4242: ("worker", pid, 2 * tick)})
    b = cpu.mark()
    assert b.cpus == 2 and cpu.share(a, b) == pytest.approx(0.45)
    assert cpu.share(a, None) is None


def test_a_busy_host_is_said_first_and_last_and_marks_its_cases(tmp_path, monkeypatch):
    monkeypatch.setattr(contention.os, "cpu_count", lambda: 1)  # this /proc has no stat to count them

    class Busy(Reader):
        def host_load(self):
            return 0.8

    w = contention.Watch(Busy([os.getpid()]), proc=tmp_path)
    assert w.opening() == ["host busy: other processes used 80% of 1 CPU: figures the host sets (host-timed, "
                           "host-bound, host buffers, the CPU backend) are not this machine's alone"]
    assert w.end(w.begin(), "launch", "measure=host_launch") == ("", 0.8)
    s = w.summary()
    assert s["host"]["loaded"] is True and s["host"]["loaded_cases"] == {"launch": ["measure=host_launch"]}
    four = {"launch": {"measure=host_launch", "a", "b"}, "copy": {"c"}}
    (line,) = contention.closing(s, four)
    # this /proc shows no process at all: none is named, and the line says so
    assert line.startswith("host busy during this run: other processes used 80% of 1 CPU (no process could be "
                           "named); 1 of 4 cases")
    assert contention.closing({**s, "host": {**s["host"], "loaded": False}}, four) == [
        "host busy during 1 of 4 cases: other processes used 50% of its CPUs or more while they ran (the status of "
        "the figures the host sets says so)"]


def test_the_heaviest_process_outside_the_run_is_named(tmp_path, monkeypatch):
    proc = fake_proc(tmp_path, {os.getpid(): ("gpubench", 1, 0), 4242: ("worker", os.getpid(), 0),
                                99: ("stress", 1, 0), 7: ("idle", 1, 0)})
    monkeypatch.setattr(contention.time, "monotonic", iter([0.0, 10.0]).__next__)
    heavy = contention.Heaviest({os.getpid()}, proc)
    tick = os.sysconf("SC_CLK_TCK")
    fake_proc(tmp_path, {os.getpid(): ("gpubench", 1, 50 * tick), 4242: ("worker", os.getpid(), 30 * tick),
                         99: ("stress", 1, 18 * tick), 7: ("idle", 1, 1)})
    assert heavy.name() == "pid 99 (stress) 180% CPU"
    s = {"others_share": 0.56, "cpus": 16, "loaded": True, "heaviest": "pid 99 (stress) 180% CPU"}
    assert contention.host_line(s) == "other processes used 56% of 16 CPUs (heaviest: pid 99 (stress) 180% CPU)"
    assert contention.host_line({**s, "loaded": False}) is None
    # run.json of an older gpubench held the load average instead
    assert contention.host_line({"load1": 9.0, "cpus": 16, "loaded": True}) == "load 9.0 of 16 CPUs"


def test_what_others_ran_in_short_lived_children_is_their_parents(tmp_path, monkeypatch):
    # A test runner (pid 50) started and reaped processes that used 1.5 CPUs over the 10 s: none of them is in
    # /proc at the end, their time is in its cutime (issue 50, item 6).
    tick = os.sysconf("SC_CLK_TCK")

    def stat(procs):
        for pid, (comm, own, kids) in procs.items():
            (tmp_path / str(pid)).mkdir(exist_ok=True)
            fields = ["S", "1"] + ["0"] * 9 + [str(own), "0", str(kids), "0"]
            (tmp_path / str(pid) / "stat").write_text(f"{pid} ({comm}) " + " ".join(fields) + "\n")

    stat({50: ("pytest", 0, 0), 71: ("kdamond.0", 0, 0)})
    monkeypatch.setattr(contention.time, "monotonic", iter([0.0, 10.0]).__next__)
    heavy = contention.Heaviest({os.getpid()}, tmp_path)
    stat({50: ("pytest", tick, 15 * tick), 71: ("kdamond.0", tick // 10, 0)})
    assert heavy.top() == ("pid 50 (pytest) 160% CPU with its children", pytest.approx(1.6))


def test_a_heaviest_process_that_made_no_load_is_not_named():
    # Others kept 79 % of 2 CPUs busy, and the busiest process /proc showed used 1 % of one: it was not what made
    # the host busy (issue 50, item 6).
    host = {"others_share": 0.79, "cpus": 2, "loaded": True, "heaviest": "pid 71 (kdamond.0) 1% CPU",
            "heaviest_cpus": 0.01}
    line = "other processes used 79% of 2 CPUs (no process could be named: the busiest seen here, pid 71 (kdamond.0) 1% CPU)"
    assert contention.host_line(host) == line
    del host["heaviest_cpus"]  # a run.json of before 2026-11-26: the figure is read from the text
    assert contention.host_line(host) == line
    assert contention.host_line({**host, "heaviest": None}) == "other processes used 79% of 2 CPUs (no process could be named)"


def test_the_closing_lines_count_the_cases_measured_not_those_skipped():
    # 43 cases, 37 of them skipped for want of a GPU: 6 were measured, all on a busy host (issue 50, item 6).
    skipped = {f"s{k}" for k in range(37)}
    summary = {"contended": "", "cases": {}, "host": {"loaded": True, "others_share": 0.8, "cpus": 2,
                                                      "loaded_cases": {"gemm": sorted(skipped | set("abcdef"))}}}
    rows = ([{"suite": "gemm", "case": c, "status": "skipped", "stop": None} for c in skipped]
            + [{"suite": "gemm", "case": c, "status": "ok", "stop": "stop_rule"} for c in "abcdef"]
            + [{"suite": "gemm", "case": "best", "status": "ok", "stop": "derived"}])
    (line,) = contention.closing(summary, contention.measured(rows))
    assert "; 6 of 6 cases measured while others used 50%" in line


def test_pids_of_another_namespace_are_counted_not_named(tmp_path):
    # A container: the device lists host pids, this /proc shows none of them, ours among them unrecognisable.
    reader = Reader([123456])
    w = contention.Watch(reader, proc=tmp_path)
    assert w.check() == []  # only ourselves
    reader.pids = [123456, 234567]
    assert w.check() == ["1 other process (host pids 123456 234567)"]
    assert w.summary()["contended"] == "1 other process (host pids 123456 234567)"


def test_a_run_beside_another_process_says_so_first_last_and_in_each_row(capsys, monkeypatch, tmp_path):
    from gpubench.cli import main

    monkeypatch.setenv("GPUBENCH_FAKE_OTHER_PIDS", str(os.getppid()))
    monkeypatch.setenv("GPUBENCH_FAKE_HOST_BUSY", "0.9")
    code = main(["run", "--suite", "copy", "--backend", "fake", "--quick", "--sizes", "64K", "--processes", "1",
                 "--filter", "direction=(h2d|d2d),memory=(pinned|device)", "--out", str(tmp_path), "--cluster", "t"])
    out, err = capsys.readouterr()
    assert code == 0
    other = contention.process_name(os.getppid())
    first = err.splitlines()[0]
    assert first.startswith(f"GPU shared: {other}: figures measured beside it")
    assert any(line.startswith("host busy: other processes used 90% of") for line in err.splitlines()[:4])
    text = " ".join(out.split())
    # each row: the co-tenant; the host copy (whose rate the host sets) the host's load as well
    assert f"ok (shared: {other}; host busy: 90%)" in text and f"ok (shared: {other})" in text
    lines = out.strip().splitlines()
    assert lines[-1].startswith("run directory: ")
    assert lines[-3].startswith(f"GPU shared during this run: {other} (2 of 2 cases measured beside it")
    assert lines[-2].startswith("host busy during this run: other processes used 90% of")


def test_a_collectives_row_names_a_co_tenant_on_any_ranks_device_a_fleets_row_its_own():
    # rank 0 writes a collective's row, but another process on any rank's device slows the collective (4 x H200,
    # 2026-11-29: a co-tenant on GPU 2 went unnamed in the pairs whose rank 0 was on GPU 0 or 1)
    class Group:
        rank, world_size = 0, 2

        def gather_objects(self, obj):
            return [obj, "pid 4242 (python3)"]

    ranks, fleet = layouts.Ranks(Group()), layouts.Devices(Group())
    assert ranks.seen("") == "pid 4242 (python3)" and ranks.seen("pid 7 (a)") == "pid 7 (a), pid 4242 (python3)"
    assert fleet.seen("") == ""  # a fleet's row is its own device's figure
    assert contention.union([None, None]) is None and contention.union(["", None]) == ""
    assert contention.union(["pid 1 (a)", "pid 2 (b), pid 1 (a)"]) == "pid 1 (a), pid 2 (b)"


def _started_at(folder, cluster: str, limit_s: float = 180.0):
    """The run directory of the run writing into ``folder``/``cluster``, once it has a table."""
    end = time.monotonic() + limit_s
    while time.monotonic() < end:
        tables = list((folder / cluster).glob("*/*.parquet"))
        if tables:
            return tables[0].parent
        time.sleep(0.2)
    raise AssertionError(f"no table under {folder / cluster} within {limit_s:.0f} s")


@pytest.mark.timeout(420)
def test_two_runs_at_once_on_one_machine_name_each_other(tmp_path):
    # Two runs at once on this machine's CPU both ended clean, neither naming the other, although each names any other
    # process that shared the host or its GPU. Here the second runs while the first measures; then the first is
    # stopped with Ctrl-C. Each names the other (pid, run directory) in its rows, run.json and closing lines.
    env = {**os.environ, "GPUBENCH_RUNS_DIR": str(tmp_path / "runs")}
    exe = str(Path(sys.executable).parent / "gpubench")
    run = [exe, "run", "--suite", "elementwise", "--backend", "cpu", "--quick", "--out", str(tmp_path / "out")]
    first = subprocess.Popen([*run, "--cluster", "a"], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True)
    try:
        a = _started_at(tmp_path / "out", "a")
        second = subprocess.run([*run, "--cluster", "b", "--filter", "op=copy,dtype=fp32", "--sizes", "1M"], env=env,
                                capture_output=True, text=True, timeout=240)
        first.send_signal(signal.SIGINT)
        out_a, err_a = first.communicate(timeout=120)
    finally:
        if first.poll() is None:
            first.kill()
            first.wait()
    assert second.returncode == 0, second.stderr[-3000:]
    assert first.returncode in (0, 130), err_a[-3000:]
    (b,) = (tmp_path / "out" / "b").iterdir()
    meta_a, meta_b = (json.loads((d / "run.json").read_text()) for d in (a, b))
    name_a = f"pid {first.pid} (gpubench run {a.absolute()})"
    name_b = f"pid {meta_b['writer']['pid']} (gpubench run {b.absolute()})"
    assert meta_b["contention"]["contended"] == name_a, meta_b["contention"]
    assert set(results.load(b)["contended"]) == {name_a}
    assert f"GPU shared during this run: {name_a} (1 of 1 cases measured beside it" in second.stdout, second.stdout
    assert name_b in meta_a["contention"]["contended"].split(", "), meta_a["contention"]
    assert f"GPU shared during this run: {name_b}" in " ".join(out_a.split()) or \
        f"GPU shared during this run: {meta_a['contention']['contended']}" in out_a, out_a[-2000:]


def test_a_run_names_another_of_its_device_as_a_co_tenant_one_elsewhere_on_the_host_and_never_its_own(
        tmp_path, monkeypatch):
    from gpubench.machine import other_runs as beside

    monkeypatch.setenv("GPUBENCH_RUNS_DIR", str(tmp_path))
    others = [subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"]) for _ in range(4)]
    try:
        here = beside.Here("GPU aa", "out/t/r1", ["gpubench", "run", "--suite", "gemm"])
        stamp = dict(here.entry, since=time.time(), until=None)

        def entry(proc, **what):
            e = {**stamp, "pid": proc.pid, "start": started(proc.pid), "family": f"{proc.pid}-x", **what}
            write_json(tmp_path / f"{proc.pid}.json", e)

        entry(others[0], what="gpubench run /r/same")  # on this GPU: a co-tenant
        entry(others[1], key="GPU bb", what="gpubench run /r/other")  # on another GPU of the host
        entry(others[2], family=here.family, what="gpubench run /r/mine")  # a process of this very command
        entry(others[3], until=time.time() - 30, what="gpubench check")  # ended before this run looked
        seen = {o.pid: o for o in here.others(own=set())}
        assert set(seen) == {others[0].pid, others[1].pid}, seen
        assert seen[others[0].pid] == beside.Other(others[0].pid, f"pid {others[0].pid} (gpubench run /r/same)", True)
        assert seen[others[1].pid].name == f"pid {others[1].pid} (gpubench run /r/other on GPU bb)"
        assert not seen[others[1].pid].here
        assert here.others(own={others[0].pid, others[1].pid}) == []  # ranks of this run are its own
        # The watch: the co-tenant in the case's contended and run.json's, the other GPU's run in the host's part.
        w = contention.Watch(Reader([os.getpid()]), proc=tmp_path / "proc", beside=here)
        here.looked = time.time() - 10  # looked again, as at a case: the check that ended 30 s ago stays out
        contended, _ = w.end(w.begin(), "gemm", "c")
        assert contended == f"pid {others[0].pid} (gpubench run /r/same)"
        summary = w.summary()
        assert summary["contended"] == contended
        assert summary["host"]["gpubench_runs"] == [f"pid {others[1].pid} (gpubench run /r/other on GPU bb)"]
        lines = contention.closing(summary, {"gemm": {"c"}})
        assert lines[-1] == f"other gpubench runs on this host during this run: {summary['host']['gpubench_runs'][0]}"
        w.leave()
        assert json.loads(here.file.read_text())["until"] is not None
    finally:
        for p in others:
            p.kill()
            p.wait()
    assert beside.family() == f"{os.getpid()}-{started(os.getpid())}"  # pytest is no gpubench command
    assert beside._is_gpubench(["/venv/bin/python", "-P", "-m", "gpubench.run.worker"])
    assert beside._is_gpubench(["/venv/bin/python", "/venv/bin/gpubench", "run"])
    assert not beside._is_gpubench(["/venv/bin/python", "/venv/bin/torchrun", "--nproc-per-node", "2", "gpubench"])
