"""Who else used the GPU and the host: the vendor process lists (mocked NVML and amdsmi), the runner's watch
between cases, and the host's load over a run (a fake /proc)."""

import os
import sys
import types

from test_telemetry import AmdDev, fake_amdsmi, fake_nvml, three_gpus

from gpubench import contention
from gpubench.telemetry import open_telemetry


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
    before = w.check()
    assert before == ["pid 4321 (python3)"]
    reader.pids = [os.getpid(), 9999]  # the first left, one this /proc does not show arrived
    after = w.check()
    assert w.note(before, after, "elementwise", "op=add") == "pid 4321 (python3), pid 9999 (not visible here)"
    reader.pids = [os.getpid()]
    assert w.note(w.check(), w.check(), "elementwise", "op=mul") == ""  # alone again
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


def test_host_load_names_the_heaviest_process_outside_the_run(tmp_path, monkeypatch):
    proc = fake_proc(tmp_path, {os.getpid(): ("gpubench", 1, 0), 4242: ("worker", os.getpid(), 0),
                                99: ("stress", 1, 0), 7: ("idle", 1, 0)})
    monkeypatch.setattr(contention.time, "monotonic", iter([0.0, 10.0]).__next__)
    load = contention.HostLoad(proc)
    tick = os.sysconf("SC_CLK_TCK")
    fake_proc(tmp_path, {os.getpid(): ("gpubench", 1, 50 * tick), 4242: ("worker", os.getpid(), 30 * tick),
                         99: ("stress", 1, 18 * tick), 7: ("idle", 1, 1)})
    monkeypatch.setattr(contention.os, "getloadavg", lambda: (9.0, 5.0, 1.0))
    monkeypatch.setattr(contention.os, "cpu_count", lambda: 16)
    s = load.summary()
    assert s == {"load1": 9.0, "cpus": 16, "loaded": True, "heaviest": "pid 99 (stress) 180% CPU"}
    assert contention.host_line(s) == "load 9.0 of 16 CPUs (heaviest: pid 99 (stress) 180% CPU)"
    assert contention.host_line({**s, "loaded": False}) is None


def test_pids_of_another_namespace_are_counted_not_named(tmp_path):
    # A container: the device lists host pids, this /proc shows none of them, ours among them unrecognisable.
    reader = Reader([123456])
    w = contention.Watch(reader, proc=tmp_path)
    assert w.check() == []  # only ourselves
    reader.pids = [123456, 234567]
    assert w.check() == ["1 other process (host pids 123456 234567)"]
    assert w.summary()["contended"] == "1 other process (host pids 123456 234567)"
