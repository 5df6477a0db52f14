"""A run whose processes are gone is ``abandoned`` for its readers (gpubench.results.rundir.status_of): compare never takes
it for a baseline and says so, the report marks it. Ranks and workers start so that no folder shadows the package."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd

from gpubench import results
from gpubench.compare import load
from gpubench.report.page import _shared
from gpubench.report.runs import Run
from gpubench.results.rundir import LEASE, LEASE_STALE_S, RunDir, status_of
from gpubench.machine.procfs import machine, proc_stat, started


def _run(root: Path, run_id: str, status: str, writer: dict | None = None, age_s: float = 0.0) -> Path:
    path = root / run_id
    path.mkdir(parents=True)
    meta = {"schema_version": results.SCHEMA_VERSION, "run_id": run_id, "status": status}
    if writer is not None:
        meta["writer"] = writer
    (path / results.RUN_FILE).write_text(json.dumps(meta))
    (path / LEASE).touch()
    for f in path.iterdir():
        os.utime(f, (time.time() - age_s, time.time() - age_s))
    return path


def _dead_pid() -> int:
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    return p.pid


def test_a_running_run_whose_writer_is_gone_is_abandoned(tmp_path):
    here = machine()
    me = {"host": "h", "pid": os.getpid(), "start": started(os.getpid()), "machine": here}
    assert status_of(_run(tmp_path, "a", "running", me)) == "running"
    gone = {**me, "pid": _dead_pid(), "start": None}
    assert status_of(_run(tmp_path, "b", "running", gone)) == "abandoned"
    reused = {**me, "start": (me["start"] or 0) + 1}  # our pid, another process's start: the pid was reused
    assert status_of(_run(tmp_path, "c", "running", reused)) == "abandoned"
    # Written on another machine: its lease says whether it lives.
    there = {**me, "machine": "elsewhere/boot/1"}
    assert status_of(_run(tmp_path, "d", "running", there, age_s=10)) == "running"
    assert status_of(_run(tmp_path, "e", "running", there, age_s=LEASE_STALE_S + 60)) == "abandoned"
    # Written before runs named their writer: any file's age.
    assert status_of(_run(tmp_path, "f", "running", None, age_s=LEASE_STALE_S + 60)) == "abandoned"
    assert status_of(_run(tmp_path, "g", "complete", gone)) == "complete"  # closed runs keep their word


def test_a_run_directory_names_its_writer_and_keeps_its_lease_until_it_ends(tmp_path):
    rd = RunDir.create(tmp_path, "t", {})
    assert rd.meta["writer"]["pid"] == os.getpid() and rd.meta["writer"]["machine"] == machine()
    end = time.monotonic() + 10
    while not (rd.path / LEASE).exists() and time.monotonic() < end:
        time.sleep(0.05)
    assert (rd.path / LEASE).exists() and status_of(rd.path) == "running"
    rd.finish("complete")
    assert status_of(rd.path) == "complete"


def test_compare_never_takes_an_abandoned_run_for_a_baseline_and_the_report_marks_it(tmp_path):
    gone = {"host": "h", "pid": _dead_pid(), "start": None, "machine": machine()}
    _run(tmp_path, "20260101T000000Z-aaaaaa", "complete")
    dead = _run(tmp_path, "20260102T000000Z-bbbbbb", "running", gone)
    statuses = {i: st for i, _, _, st in load.scan(tmp_path)}
    assert statuses == {"20260101T000000Z-aaaaaa": "complete", "20260102T000000Z-bbbbbb": "abandoned"}
    assert [i for i, _, _ in load.run_candidates(tmp_path)] == ["20260101T000000Z-aaaaaa"]
    run = Run(dead, results.frame([]), json.loads((dead / results.RUN_FILE).read_text()))
    run.label = "t"
    assert "abandoned" in _shared([run])
    assert isinstance(results.frame([]), pd.DataFrame)


def test_a_folder_named_gpubench_does_not_shadow_the_package_for_the_ranks(tmp_path):
    # A clone's folder where one stands (clone, pip install -e gpubench, run from the parent): a namespace package
    # for `python -m gpubench` from here. Every rank failed: "cannot import name '__version__' ... (unknown
    # location)".
    (tmp_path / "gpubench" / "docs").mkdir(parents=True)
    exe = str(Path(sys.executable).parent / "gpubench")
    # python -m from here imports the folder first (an editable install's finder comes after it); gpubench's
    # __main__ takes it off the path (tests/test_fleet_edges.py: torchrun -m gpubench)
    shadowed = subprocess.run([sys.executable, "-m", "gpubench", "--version"], cwd=tmp_path, capture_output=True,
                              text=True, timeout=120)
    assert shadowed.returncode == 0, shadowed.stderr[-2000:]
    proc = subprocess.run([exe, "run", "--suite", "comm", "--backend", "cpu", "--nproc", "2", "--quick", "--out",
                           str(tmp_path / "out"), "--cluster", "t", "--collectives", "all_reduce", "--sizes", "1K"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "ImportError" not in proc.stderr and list((tmp_path / "out" / "t").glob("*/comm.parquet"))


def test_a_folder_named_gpubench_does_not_shadow_the_package_for_autotunes_child_runs(tmp_path):
    # The knob sweep starts each configuration as a child `gpubench run --suite comm` in the folder it was started
    # from: there too the clone's folder was imported, and every configuration became an error row.
    (tmp_path / "gpubench" / "docs").mkdir(parents=True)
    # (on the fake device: gloo, the CPU's library, reads no NCCL knob, and a sweep there is refused)
    proc = subprocess.run([str(Path(sys.executable).parent / "gpubench"), "run", "--suite", "autotune", "--backend",
                           "fake", "--knob", "NCCL_PROTO=Simple", "--collectives", "all_reduce", "--min-bytes", "1K",
                           "--max-bytes", "1K", "--out", str(tmp_path / "out"), "--cluster", "t", "--no-telemetry"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=600,
                          env={**os.environ, "GPUBENCH_FAKE_CALL_S": "0.01"})
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    (run,) = [p for p in (tmp_path / "out" / "t").iterdir() if p.is_dir()]
    df = results.load(run)
    assert set(df["config"]) == {"default", "NCCL_PROTO=Simple"} and (df["status"] == "ok").all(), df["message"]
    assert not any("ImportError" in log.read_text() for log in (run / "configs").glob("*.log"))


def test_devices_all_under_a_launcher_with_one_task_per_node_refuses_in_one_line(tmp_path):
    # srun --ntasks-per-node=1 on a node of 2 GPUs measured device 0 alone, without a word.
    env = dict(os.environ, SLURM_PROCID="0", SLURM_NTASKS="1", SLURM_LOCALID="0", SLURM_NNODES="1",
               SLURM_NTASKS_PER_NODE="1", SLURM_STEP_NODELIST="node1", SLURM_JOB_ID="5", MASTER_ADDR="127.0.0.1",
               GPUBENCH_FAKE_DEVICES="2")
    proc = subprocess.run([str(Path(sys.executable).parent / "gpubench"), "run", "--suite", "launch", "--backend",
                           "fake", "--devices", "all", "--quick", "--out", str(tmp_path), "--cluster", "t"],
                          env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2, proc.stderr[-2000:]
    (line,) = proc.stderr.strip().splitlines()
    assert "1 process(es) on this node for its 2 GPUs" in line and "--ntasks-per-node=2" in line, line


def _all_threads_stopped(pid: int, limit_s: float = 30.0) -> None:
    end = time.monotonic() + limit_s
    while True:
        states = [(proc_stat(int(t.name)) or ["?"])[0] for t in Path(f"/proc/{pid}/task").iterdir()]
        if all(st in ("T", "t") for st in states):
            return
        assert time.monotonic() < end, states
        time.sleep(0.01)


def test_a_store_call_to_a_stopped_server_is_given_up_on_at_the_watchdogs_deadline():
    # A TCPStore client's check blocks while the store's process is SIGSTOPped, whatever its timeout: the
    # bounded call gives up at its own deadline, refuses the next at once while the first still hangs, and
    # works again (on a new client) once the server runs.
    import datetime as dt
    import signal as sig

    import torch.distributed as dist

    from gpubench.ranks.store import BoundedStore, Unanswered

    server = subprocess.Popen([sys.executable, "-c", "import datetime as d, time, torch.distributed as t; "
                               "s = t.TCPStore('127.0.0.1', 0, 1, True, timeout=d.timedelta(seconds=3), "
                               "wait_for_workers=False); print(s.port, flush=True); s.set('k', 'v'); time.sleep(300)"],
                              stdout=subprocess.PIPE, text=True)
    try:
        port = int(server.stdout.readline())
        store = BoundedStore(lambda: dist.TCPStore("127.0.0.1", port, 1, False, timeout=dt.timedelta(seconds=3),
                                                   wait_for_workers=False), deadline_s=2.0)
        assert store.call(lambda s: s.check(["k"]), deadline_s=60) is True  # connecting, on a loaded host
        os.kill(server.pid, sig.SIGSTOP)
        _all_threads_stopped(server.pid)  # a busy host stops them a moment later: one answered first (load 11)
        t0 = time.monotonic()
        try:
            store.call(lambda s: s.check(["k"]))
            raise AssertionError("a stopped server answered")
        except Unanswered:
            assert time.monotonic() - t0 < 10
        t1 = time.monotonic()
        try:
            store.call(lambda s: s.check(["k"]))
            raise AssertionError("a stopped server answered")
        except Unanswered as e:
            assert "still unanswered" in str(e) and time.monotonic() - t1 < 5
        os.kill(server.pid, sig.SIGCONT)
        end = time.monotonic() + 30
        while True:
            try:
                assert store.call(lambda s: s.check(["k"])) is True
                break
            except Unanswered:
                assert time.monotonic() < end
                time.sleep(0.2)
    finally:
        server.kill()
        server.wait()


def test_the_roster_is_learnt_even_where_each_connection_takes_longer_than_a_heartbeats_deadline():
    # 16 ranks on 2 busy cores (CI, 2026-11-26): connecting a store client took longer than the watchdog's 5 s
    # deadline, every try started a new one, and rank 0 stopped later was named without its pid and host. The roster's
    # client is now made once, with no deadline, as the group comes up (Group.__init__); its thread only reads.
    import threading

    from gpubench.ranks import group as g
    from gpubench.ranks.beats import key

    class Slow:
        def __init__(self):
            time.sleep(g._DEADLINE_S + 1.0)
            self.beats = {key(r): json.dumps({"pid": 100 + r, "host": f"node{r}"}) for r in range(3)}

        def check(self, keys):
            return all(k in self.beats for k in keys)

        def multi_get(self, keys):
            return [self.beats[k].encode() for k in keys]

    grp = g.Group.__new__(g.Group)
    grp.world_size, grp._roster, grp._stop = 3, {}, threading.Event()
    t = threading.Thread(target=grp._know_everyone, args=(Slow(),), daemon=True)
    t.start()
    t.join(60)
    assert not t.is_alive() and grp._roster[0]["pid"] == 100 and grp._roster[2]["host"] == "node2", grp._roster


def test_a_run_a_peer_closed_first_keeps_the_peers_word_when_its_own_process_finishes(tmp_path):
    # Under mpirun a stopped rank 0 is resumed to be ended: its own reason ("rank 1 is gone") comes after the
    # peer's, which named rank 0, and must not replace it.
    from gpubench.results.rundir import mark_ended

    rd = RunDir.create(tmp_path, "t", {})
    assert mark_ended(rd.path, "failed", "rank 0 (pid 1 on h) is stopped")
    rd.finish("failed", error="rank 1 is gone", cases_done=3)
    meta = json.loads((rd.path / results.RUN_FILE).read_text())
    assert meta["status"] == "failed" and meta["error"] == "rank 0 (pid 1 on h) is stopped"
    assert meta["cases_done"] == 3
    # A run nobody else closed takes its own word.
    own = RunDir.create(tmp_path, "u", {})
    own.finish("complete")
    assert json.loads((own.path / results.RUN_FILE).read_text())["status"] == "complete"


_SIGNALLED_RANK = """
import os, signal, sys, time
from gpubench.results import rundir
from gpubench.ranks import ending

run, cut = sys.argv[1], sys.argv[2]
die = lambda *a, **k: os.kill(os.getpid(), signal.SIGKILL)  # the launcher's SIGKILL, at the worst moment

class Peer0Gone:  # rank 1 of a group whose rank 0 (and its store) died
    rank, trouble = 1, None
    def account(self, wait=False, deadline_s=None):
        return "rank 0 (pid 9 on h) is gone (its process ended) in comm all_reduce", "failed", True
    def say_ended(self, name, deadline_s=1.0):
        if cut == "last beat":
            die()

if cut == "count":
    rundir.kept = die
ending.install()
ending.follow(run_dir=run, group=Peer0Gone())
print("ready", flush=True)
while True:
    time.sleep(0.1)
"""


def test_a_rank_sent_sigterm_closes_its_run_and_says_so_before_what_a_sigkill_could_cut(tmp_path):
    # Open MPI sends SIGTERM to the ranks left when one dies and SIGKILL a second later (odls_base_sigkill_timeout):
    # a rank that took its last beat or counted the cases kept before closing the run left it "running" (CI,
    # 2026-11-27, mpirun, rank 0 killed). Here the SIGKILL comes during each of those; the record and the line stand.
    for cut in ("last beat", "count"):
        rd = RunDir.create(tmp_path, cut.replace(" ", "-"), {})
        p = subprocess.Popen([sys.executable, "-c", _SIGNALLED_RANK, str(rd.path), cut], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
        assert p.stdout.readline().strip() == "ready"
        p.send_signal(15)
        _, err = p.communicate(timeout=60)
        assert p.returncode == -9, (cut, p.returncode, err)  # it was cut there
        meta = json.loads((rd.path / results.RUN_FILE).read_text())
        assert meta["status"] == "failed", (cut, meta)
        assert meta["error"].startswith("a peer was lost: rank 0 (pid 9 on h) is gone"), meta["error"]
        assert meta["error"].endswith("then rank 1 stopped by SIGTERM"), meta["error"]
        lines = [ln for ln in err.splitlines() if ln.startswith("gpubench: error: ")]
        assert lines == [f"gpubench: error: {meta['error']}"], (cut, err)
