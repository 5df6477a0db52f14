"""Figures whose level is set per process, measured in several processes of one run (gpubench.run.per_process): the
workers pool their samples into the run's rows, labelled, and one run then says how far such a figure moves
between processes, so that compare judges it against that spread (fake backend, real worker processes)."""

import json
import os
import subprocess
import sys
import time
import types
from pathlib import Path

import pytest
from test_compare_helpers import cli

from gpubench.run import per_process as processes
from gpubench.run import rows
from gpubench import results
from gpubench.child import Child
from gpubench.errors import UsageError

# One case set per process (a pinned host-to-device copy) and one not (a device-to-device copy), small.
COPY = ["run", "--suite", "copy", "--backend", "fake", "--quick", "--sizes", "64K", "--filter",
        "direction=(h2d|d2d),memory=(pinned|device)"]


def run(capsys, monkeypatch, out: Path, *more, levels: str | None = None, slow: str | None = None):
    for name, value in (("GPUBENCH_FAKE_PROCESS_LEVELS", levels), ("GPUBENCH_FAKE_SLOW_CASES", slow)):
        if value is None:
            monkeypatch.delenv(name, raising=False)
        else:
            monkeypatch.setenv(name, value)
    before = set(out.glob("t/*"))
    code, stdout, stderr = cli(capsys, *COPY, "--out", out, "--cluster", "t", *more)
    assert code == 0, stderr[-2000:]
    (new,) = set(out.glob("t/*")) - before
    return new, stdout, stderr


def test_a_per_process_case_pools_every_process_s_samples_labelled(capsys, monkeypatch, tmp_path):
    d, _, err = run(capsys, monkeypatch, tmp_path, levels="1,1.05,0.98")
    df = results.load(d)
    h2d = df[(df["direction"] == "h2d") & (df["metric"] == "time")].iloc[0]
    d2d = df[(df["direction"] == "d2d") & (df["metric"] == "time")].iloc[0]
    assert h2d["processes"] == 3 and sorted(set(h2d["sample_process"])) == [0, 1, 2]
    assert len(h2d["sample_process"]) == len(h2d["samples"]) == h2d["n"]
    by = {p: [s for s, q in zip(h2d["samples"], h2d["sample_process"]) if q == p] for p in range(3)}
    # each process measured its own level: 1.05 and 0.98 of the run's own
    assert by[1][0] / by[0][0] == pytest.approx(1.05) and by[2][0] / by[0][0] == pytest.approx(0.98)
    assert d2d["processes"] == 1 and d2d["sample_process"] == []  # a device's copy is the device's alone
    meta = json.loads((d / "run.json").read_text())
    assert meta["processes"]["asked"] == 3 and list(meta["processes"]["cases"]) == ["copy"]
    assert "process 2 of 3: measured the 1 case(s) set per process" in err


def test_runs_of_several_processes_are_judged_on_every_process(capsys, monkeypatch, tmp_path):
    window = tmp_path / "window"
    for levels in ("1,1.05,0.98", "1,0.98,1.05", "1,1.02,1.04"):  # three runs, their workers landing anywhere
        run(capsys, monkeypatch, window, levels=levels)
    cur = tmp_path / "current"
    same, _, _ = run(capsys, monkeypatch, cur, levels="1,1.04,0.98")
    slow, _, _ = run(capsys, monkeypatch, cur, levels="1,1.05,0.98", slow="1.6:direction=h2d")

    def h2d_time(*paths):
        code, out, _ = cli(capsys, "compare", *paths, "--format", "json")
        rows = [r for r in json.loads(out)["rows"] if r["case"].startswith("direction=h2d") and r["metric"] == "time"]
        return code, rows[0]

    code, row = h2d_time(window / "t", same)
    assert code == 0 and row["verdict"] == "SAME" and row["runs_baseline"] == 9  # three runs, three processes each
    code, row = h2d_time(window / "t", slow)
    assert code == 1 and row["verdict"] == "WORSE" and "over 9 processes of 3 runs" in row["note"]
    # one run's processes alone are not evidence enough: all of them may have landed in one mode of a figure
    code, row = h2d_time(sorted((window / "t").iterdir())[0], slow)
    assert code == 0 and row["verdict"] == "UNKNOWN"
    assert "pinned host buffers: its level moves between processes; judging it needs 3 or more baseline runs " \
           "(has 1, in 3 processes)" in row["note"]


def test_a_worker_that_fails_costs_its_samples_not_the_run(capsys, monkeypatch, tmp_path):
    d, out, err = run(capsys, monkeypatch, tmp_path, levels="1,x")  # worker 1 cannot start
    h2d = results.load(d).query("direction == 'h2d' and metric == 'time'").iloc[0]
    assert h2d["status"] == "ok" and sorted(set(h2d["sample_process"])) == [0, 2]
    note = next(n for n in json.loads((d / "run.json").read_text())["notes"] if n.startswith("process 2 of 3"))
    assert "ended with exit code 1" in note and "could not convert string to float: 'x'" in note
    assert note in " ".join(err.split())


def test_processes_must_be_one_or_more(capsys, tmp_path):
    code, _, err = cli(capsys, *COPY, "--out", tmp_path, "--processes", "0")
    assert code == 2 and "--processes 0: give 1 or more" in err
    assert not (tmp_path / "t").exists()


def test_pooling_a_worker_s_rows():
    row = {"status": "ok", "samples": [1.0, 1.0], "sample_process": [], "contended": "", "host_load": 0.1,
           "case_s": 0.5}
    other = {"status": "ok", "samples": [2.0], "contended": "pid 7 (x)", "host_load": 0.6, "case_s": 0.25}
    got = rows.pool(row, other, 2, target_cv=0.01)
    assert got["samples"] == [1.0, 1.0, 2.0] and got["sample_process"] == [0, 0, 2] and got["processes"] == 2
    assert got["value"] == 1.0 and got["contended"] == "pid 7 (x)" and got["host_load"] == 0.6 and got["noisy"]
    assert got["case_s"] == 0.75  # what the figure cost: every process's time on it
    bad = rows.pool(row, {"status": "invalid", "message": "3 sampled bytes differ"}, 1, 0.01)
    assert bad["status"] == "invalid" and bad["message"] == "process 2: 3 sampled bytes differ" and bad["n"] == 0
    assert rows.pool(row, {"status": "error", "message": "OOM"}, 1, 0.01) == row  # noted by the runner


def test_the_cpu_backend_starts_no_worker(capsys, tmp_path):
    # On the CPU a copy or a launch has nothing to measure (each case skips); nothing is measured again.
    code, _, err = cli(capsys, "run", "--suite", "launch,copy", "--backend", "cpu", "--quick", "--out", tmp_path,
                       "--cluster", "t")
    assert code == 0 and "process 2 of 3" not in err
    (run,) = (tmp_path / "t").iterdir()
    assert json.loads((run / "run.json").read_text())["processes"] == {
        "asked": 3, "cases": {}, "pinning": {"mode": "off", "cpus": [], "numa_node": None, "note": "not pinned"}}


def test_only_the_cases_the_run_measured_ok_are_measured_again(capsys, monkeypatch, tmp_path):
    # 64K fits the fake device; 4G does not (skipped): the workers measure the 64K case alone
    d, _, err = run(capsys, monkeypatch, tmp_path, "--sizes", "64K,4G", "--filter", "direction=h2d,memory=pinned")
    df = results.load(d)
    assert set(df.loc[df["status"] == "skipped", "copy_bytes"]) == {4 << 30}
    assert (df.loc[df["status"] == "ok", "processes"] == 3).all()
    assert "process 3 of 3: measured the 1 case(s) set per process" in err


def fake_sysfs(root: Path) -> Path:
    """A host of two NUMA nodes (CPUs 0-1 and 2-3) with one GPU on node 1."""
    for node, cpus in ((0, "0-1"), (1, "2-3")):
        (root / f"devices/system/node/node{node}").mkdir(parents=True)
        (root / f"devices/system/node/node{node}/cpulist").write_text(cpus + "\n")
    (root / "devices/system/node/has_cpu").write_text("0-1\n")
    (root / "bus/pci/devices/0000:19:00.0").mkdir(parents=True)
    (root / "bus/pci/devices/0000:19:00.0/numa_node").write_text("1\n")
    return root


def test_pinning_chooses_cpus_near_the_gpu(tmp_path, monkeypatch):
    sysfs, every = fake_sysfs(tmp_path), {0, 1, 2, 3}
    pin = processes.choose_pinning("00000000:19:00.0", "core", sysfs=sysfs, allowed=every)
    assert (pin.mode, pin.cpus, pin.numa_node) == ("core", (3,), 1) and "NUMA node 1" in pin.note
    assert processes.choose_pinning("00000000:19:00.0", "node", sysfs=sysfs, allowed=every).cpus == (2, 3)
    assert processes.choose_pinning("00000000:19:00.0", "core:1", sysfs=sysfs, allowed=every).note == \
        "CPU 1, as asked, off the GPU's node"
    # a GPU whose node the host does not say: any CPU this process may use
    assert processes.choose_pinning(None, "node", sysfs=sysfs, allowed={0, 1}).cpus == (0, 1)
    assert processes.choose_pinning("00000000:19:00.0", "off", sysfs=sysfs, allowed=every).cpus == ()
    monkeypatch.setenv(processes.PIN_ENV, "core")
    assert processes.choose_pinning("00000000:19:00.0", sysfs=sysfs, allowed=every).cpus == (3,)
    for bad in ("cores", "node:1", "core:x"):
        with pytest.raises(UsageError, match=f"{processes.PIN_ENV}={bad}: give off, node, core or core:N"):
            processes.choose_pinning(None, bad, sysfs=sysfs, allowed=every)
    with pytest.raises(UsageError, match="CPU 9 is not one this process may use"):
        processes.choose_pinning(None, "core:9", sysfs=sysfs, allowed=every)


def _allowed(pid: int) -> str:
    status = Path(f"/proc/{pid}/status").read_text()
    return next(ln.split(":", 1)[1].strip() for ln in status.splitlines() if ln.startswith("Cpus_allowed_list"))


def test_pinning_moves_every_thread_of_a_process_and_back(tmp_path):
    cpu = max(os.sched_getaffinity(0))
    child = subprocess.Popen([sys.executable, "-c", "import threading, time; threading.Thread(target=time.sleep, "
                              "args=(60,), daemon=True).start(); print(1, flush=True); time.sleep(60)"],
                             stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline().strip() == "1"  # its second thread runs
        before = processes.pin_threads(child.pid, [cpu])
        assert len(before) >= 2
        assert {_allowed(int(t)) for t in os.listdir(f"/proc/{child.pid}/task")} == {str(cpu)}
    finally:
        child.kill()
        child.wait(timeout=30)
    mine = os.sched_getaffinity(0)
    with processes.pinned(processes.Pinning("core", (cpu,))):
        assert os.sched_getaffinity(0) == {cpu}
    assert os.sched_getaffinity(0) == mine
    with processes.pinned(processes.Pinning("core", (cpu,)), on=False):
        assert os.sched_getaffinity(0) == mine


def test_a_pinned_run_records_where_it_measured(capsys, monkeypatch, tmp_path):
    cpu = max(os.sched_getaffinity(0))
    monkeypatch.setenv(processes.PIN_ENV, f"core:{cpu}")
    d, _, err = run(capsys, monkeypatch, tmp_path, levels="1,1.05,0.98")
    pinning = json.loads((d / "run.json").read_text())["processes"]["pinning"]
    assert pinning["mode"] == "core" and pinning["cpus"] == [cpu] and pinning["note"].startswith(f"CPU {cpu}")
    h2d = results.load(d).query("direction == 'h2d' and metric == 'time'").iloc[0]
    assert sorted(set(h2d["sample_process"])) == [0, 1, 2]  # every process measured, pinned
    monkeypatch.setenv(processes.PIN_ENV, "sideways")
    code, _, err = cli(capsys, *COPY, "--out", tmp_path / "bad", "--cluster", "t")
    assert code == 2 and "GPUBENCH_PIN=sideways: give off, node, core or core:N" in err
    assert not list((tmp_path / "bad").rglob("run.json"))  # no run written


def test_a_worker_leaves_at_once_once_its_rows_are_written(capsys, monkeypatch, tmp_path):
    # The run waits for each worker to end before the next one measures. Through the interpreter's teardown with
    # torch loaded that wait took 0.77-0.97 s a worker on this VM (1.9 s for two on an H100's quick night);
    # leaving at once, 0.06 s, beside three busy loops too (2026-11-27).
    waited = []
    end = processes.Workers._end

    def timed(self, k):
        t0 = time.monotonic()
        end(self, k)
        waited.append(time.monotonic() - t0)

    monkeypatch.setattr(processes.Workers, "_end", timed)
    d, _, _ = run(capsys, monkeypatch, tmp_path)
    assert len(waited) == 2 and max(waited) < 0.4, waited
    h2d = results.load(d).query("direction == 'h2d' and metric == 'time'").iloc[0]
    assert h2d["processes"] == 3  # the rows of both workers were read before they left


def test_the_workers_start_up_before_the_run_measures_anything(capsys, monkeypatch, tmp_path):
    # A worker opening its context and laying out its suites on the same GPU slowed the first suite's samples by
    # 17-23 % in 3 of 4 runs on an H100 (2026-11-28): the run's first case, here one no worker measures again, comes
    # after every worker has said it is ready.
    from gpubench.run import runner

    said = []
    ready, case = processes.Workers.wait_ready, runner.run_case

    def waited(self):
        ready(self)
        said.append(("ready", sorted(self.ready)))

    def measured(suite, c, *a, **k):
        said.append(("case", suite.name))
        return case(suite, c, *a, **k)

    monkeypatch.setattr(processes.Workers, "wait_ready", waited)
    monkeypatch.setattr(runner, "run_case", measured)
    one_each = "op=copy,dtype=fp32,array_bytes=65536,impl=torch|direction=h2d,memory=pinned"
    code, _, stderr = cli(capsys, "run", "--suite", "elementwise,copy", "--backend", "fake", "--quick", "--sizes",
                          "64K", "--filter", one_each, "--out", tmp_path, "--cluster", "t")
    assert code == 0, stderr[-2000:]
    assert said[0] == ("ready", [1, 2]) and said[1] == ("case", "elementwise"), said[:4]


def _spawns(monkeypatch, said: list) -> list:
    """Every gpubench.run.prestart.spawn of the test, recorded (its Started) in ``said`` as it happens."""
    from gpubench.run import prestart

    spawned, spawn = [], prestart.spawn

    def recorded(count, env=None):
        started = spawn(count, env)
        said.append(("spawn", count))
        spawned.append((started, sorted(p.pid for p in started.procs.values())))
        return started

    monkeypatch.setattr(prestart, "spawn", recorded)
    return spawned


def test_the_workers_start_before_the_run_imports_its_suites(capsys, monkeypatch, tmp_path):
    # Their start-up (torch, the suites) cost a quick night 2.6-3.5 s on an H100 once the run waited for it (a70aa88):
    # started as the command begins, they import while the run does; the same two serve the run.
    from gpubench.commands import run as run_command

    said: list = []
    spawned = _spawns(monkeypatch, said)
    select = run_command.select
    monkeypatch.setattr(run_command, "select", lambda names: said.append(("select", names)) or select(names))
    monkeypatch.setenv("GPUBENCH_PRESTART", "1")
    d, _, err = run(capsys, monkeypatch, tmp_path, levels="1,1.05,0.98")
    assert said[:2] == [("spawn", 2), ("select", "copy")] and [s[0] for s in said].count("spawn") == 1, said
    h2d = results.load(d).query("direction == 'h2d' and metric == 'time'").iloc[0]
    by = {p: [s for s, q in zip(h2d["samples"], h2d["sample_process"]) if q == p] for p in range(3)}
    assert by[1][0] / by[0][0] == pytest.approx(1.05) and by[2][0] / by[0][0] == pytest.approx(0.98)
    assert "process 2 of 3: measured the 1 case(s) set per process" in err
    _all_ended(spawned[0][1])


def _all_ended(pids: list[int]) -> None:
    for pid in pids:
        with pytest.raises(ProcessLookupError):  # reaped: no such process (a zombie would still answer)
            os.kill(pid, 0)


def test_workers_started_early_that_the_run_does_not_need_are_ended_unopened(capsys, monkeypatch, tmp_path):
    # The filter leaves only a device-to-device copy, which no worker measures: the two started as the command
    # began are ended before anything is measured, and none is started later.
    said: list = []
    spawned = _spawns(monkeypatch, said)
    monkeypatch.setenv("GPUBENCH_PRESTART", "1")
    code, _, err = cli(capsys, "run", "--suite", "copy", "--backend", "fake", "--quick", "--sizes", "64K",
                       "--filter", "direction=d2d,memory=device", "--out", tmp_path, "--cluster", "t")
    assert code == 0 and "process 2 of 3" not in err, err[-2000:]
    assert said == [("spawn", 2)], said
    _all_ended(spawned[0][1])
    (d,) = (tmp_path / "t").iterdir()
    assert json.loads((d / "run.json").read_text())["processes"]["cases"] == {}


def test_a_worker_that_is_never_told_to_start_leaves_without_reading_the_run(tmp_path):
    # Started early, it must not open a device nor read a spec before the run tells it to: given end of input
    # instead, it leaves cleanly (it would fail reading the spec the run never wrote).
    from gpubench.run import prestart

    started = prestart.spawn(1)
    (proc,) = started.procs.values()
    proc.hang_up()
    assert proc.proc.wait(timeout=120) == 0, (started.dir / "stderr-1.txt").read_text()[-2000:]
    assert not (started.dir / "rows-1.pkl").exists()
    started.kill()
    assert not started.dir.exists()


@pytest.mark.parametrize("backend,env,nodes,want", [
    ("cuda", {}, (), True),
    ("hip", {}, (), True),
    ("fake", {}, (), False),  # on the CI VM the speculative imports would compete with the run's own
    ("cpu", {}, (), False),
    ("auto", {}, ("present",), True),
    ("auto", {}, ("absent",), False),
    ("fake", {"GPUBENCH_PRESTART": "1"}, (), True),
    ("cuda", {"GPUBENCH_PRESTART": "0"}, (), False),
    ("cuda", {"GPUBENCH_PIN": "core"}, (), False),  # a pinned run starts them with the pinning's environment
    ("cuda", {"GPUBENCH_PIN": "off"}, (), True),
])
def test_which_runs_start_their_workers_early(tmp_path, backend, env, nodes, want):
    from gpubench.run import prestart

    (tmp_path / "present").touch()
    nodes = tuple(str(tmp_path / n) for n in nodes)
    assert prestart.wanted(backend, 3, True, env=env, gpu_nodes=nodes) is want
    assert prestart.wanted(backend, 1, True, env=env, gpu_nodes=nodes) is False  # --processes 1: no worker
    assert prestart.wanted(backend, 3, False, env=env, gpu_nodes=nodes) is False  # no suite sets a case per process


def test_only_a_run_whose_suites_set_cases_per_process_starts_workers_early(monkeypatch):
    from gpubench.run import prestart

    monkeypatch.setenv("GPUBENCH_PRESTART", "1")
    assert prestart.early(["gemm", "elementwise"], "fake", 3) is None
    started = prestart.early(["gemm", "launch"], "fake", 3)
    try:
        assert started is not None and started.count == 2
    finally:
        if started is not None:
            started.kill()


def _workers_of(pid: int) -> set[int]:
    """The pids of ``python -m gpubench.run.worker`` processes whose parent is ``pid`` (Linux's /proc)."""
    found = set()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmd = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        if int(stat.rsplit(")", 1)[1].split()[1]) == pid and b"gpubench.run.worker" in cmd:
            found.add(int(entry.name))
    return found


def _gone(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return True
    return state == "Z"  # ended, waiting for init to reap it


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
@pytest.mark.parametrize("sig", ["SIGKILL", "SIGTERM"])
def test_workers_started_early_end_when_the_run_is_killed_before_it_needs_them(tmp_path, sig):
    # Started as the command begins, they import while the run does; the run killed then (no finally, no Ctrl-C
    # handler yet) must not leave them behind: each reads end of input on its standard input and leaves.
    import signal

    env = {**os.environ, "GPUBENCH_PRESTART": "1"}
    run = subprocess.Popen([sys.executable, "-m", "gpubench", *COPY, "--out", str(tmp_path), "--cluster", "t"],
                           env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        workers: set[int] = set()
        while len(workers) < 2 and time.monotonic() < deadline and run.poll() is None:
            workers = _workers_of(run.pid)
            time.sleep(0.05)
        assert len(workers) == 2, f"the run started {sorted(workers)} (exit {run.poll()})"
        run.send_signal(getattr(signal, sig))
        run.wait(timeout=30)
        deadline = time.monotonic() + 120  # a worker may still be importing torch on a loaded 2-core VM
        while not all(_gone(p) for p in workers) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert all(_gone(p) for p in workers), [p for p in workers if not _gone(p)]
    finally:
        if run.poll() is None:
            run.kill()
            run.wait()


def test_a_worker_that_closed_its_output_but_does_not_end_is_killed_and_costs_its_samples(monkeypatch, tmp_path):
    # On a loaded host a worker's teardown outlasted the 5 s the run gave it after its output ended, and the wait's
    # timeout ended the run. Now it is a worker failure, as any other: killed, and the run goes on without it.
    child = Child([sys.executable, "-c", "import os, time; os.close(1); time.sleep(60)"], pipes=True)
    log = open(tmp_path / "stderr-1.txt", "w")
    started = types.SimpleNamespace(dir=tmp_path, take=lambda: ({1: child}, {1: log}, {}))
    monkeypatch.setattr(processes, "_EXIT_WAIT_S", 1.0)
    workers = processes.Workers(1, started=started)
    t0 = time.monotonic()
    try:
        workers.wait_ready()
        assert workers.failed == {1: "closed its output and did not end within 1 s: killed"}
        assert not child.alive and time.monotonic() - t0 < 30
    finally:
        child.kill()
        log.close()
