"""Launch edges of issue 73, run with the launchers themselves on this machine's CPU: torchrun, SLURM's variables (the
stand-in srun of tests/fleet) and gpubench's own spawner."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from fleet.faults import HERE, SRUN, Scenario, gpubench_exe, run_all  # noqa: E402

from gpubench.errors import UsageError  # noqa: E402
from gpubench.results.rundir import kept
from gpubench.machine.procfs import machine  # noqa: E402

SLOW_COUNT = HERE / "slow_count"  # a sitecustomize that makes counting the cases kept slow (a slow disk)
_LAUNCHED = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT", "SLURM_PROCID", "SLURM_NTASKS")


def _clean_env(**extra: str) -> dict[str, str]:
    """This environment without a launcher's variables (a test run under one), plus ``extra``."""
    return {**{k: v for k, v in os.environ.items() if k not in _LAUNCHED}, **extra}


@pytest.mark.timeout(300)
def test_a_run_whose_rank_0_was_killed_under_torchrun_records_the_cases_it_kept(tmp_path):
    # Rank 1 closed the run for its lost peer, and torchrun's SIGTERM came while it counted the cases kept: the
    # signal's exit cut the count short, and run.json said failed without cases_done (3 cases in its table). Here
    # counting takes 8 s, as on a slow disk, and torchrun looks at its ranks every 5 s: its signal lands in the count.
    s = Scenario("torchrun", 0, "SIGKILL", launcher_args=("--monitor-interval", "5"),
                 env={"PYTHONPATH": str(SLOW_COUNT), "GPUBENCH_TEST_SLOW_COUNT_S": "8"})
    run_all([s], tmp_path)
    assert s.problem is None, s.errors
    assert s.meta["status"] == "failed" and "rank 0" in s.meta["error"], s.meta
    assert s.meta.get("cases_done") == kept(s.run_dir()) >= 1, (s.meta, s.errors[1][-2000:])


@pytest.mark.timeout(300)
def test_torchrun_dash_m_gpubench_runs_beside_a_folder_named_gpubench(tmp_path):
    # The README's form, `torchrun ... -m gpubench`, from the folder that holds a clone (pip install -e gpubench): each
    # rank's `python -m gpubench` imported the clone's folder as a namespace package before the editable install,
    # and every rank ended "ImportError: cannot import name '__version__'" with a traceback.
    (tmp_path / "gpubench" / "docs").mkdir(parents=True)
    proc = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
                           "-m", "gpubench", "run", "--suite", "comm", "--backend", "cpu", "--quick", "--collectives",
                           "all_reduce", "--sizes", "1K", "--out", str(tmp_path / "out"), "--cluster", "t"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=240, env=_clean_env())
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "Error" not in proc.stderr and list((tmp_path / "out" / "t").glob("*/comm.parquet")), proc.stderr[-3000:]
    # Two gloo ranks on this one CPU may share it: said in one line, before the first case and in run.json.
    (run,) = (tmp_path / "out" / "t").glob("*/run.json")
    (line,) = [n for n in json.loads(run.read_text())["notes"] if "share" in n]
    assert line.startswith("ranks 0 and 1 share the CPU of ") and line in " ".join(proc.stderr.split()), line


def _rank_lines(text: str) -> list[str]:
    return [ln for ln in text.strip().splitlines() if ln.strip()]


@pytest.mark.timeout(300)
def test_two_ranks_on_one_device_are_refused_in_one_line_before_anything_is_measured(tmp_path):
    # `--devices all` under torchrun, two processes on a node whose CPU backend has one device: both measured it at
    # once, and the run listed vm:0 twice.
    out = tmp_path / "out"
    proc = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
                           "--log-dir", str(tmp_path / "logs"), "--redirects", "3", "--no-python", gpubench_exe(), "run",
                           "--suite", "elementwise", "--backend", "cpu", "--devices", "all", "--quick", "--filter",
                           "op=copy,dtype=fp32", "--sizes", "1M", "--out", str(out), "--cluster", "t"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=240, env=_clean_env())
    assert proc.returncode != 0 and proc.stderr.count("exitcode  : 2 ") == 2, proc.stderr[-3000:]  # each rank: exit 2
    for r in (0, 1):
        (log,) = (tmp_path / "logs").glob(f"*/attempt_0/{r}/stderr.log")
        (line,) = _rank_lines(log.read_text())
        assert line.startswith("gpubench: error: ranks 0 and 1 both measure the CPU of "), line
        assert "start 1 per node (srun --ntasks-per-node=1, torchrun --nproc-per-node=1" in line, line
    assert not out.exists()  # nothing left behind


@pytest.mark.timeout(300)
def test_one_gpu_for_two_tasks_is_refused_and_one_gpu_bound_to_each_task_is_not(tmp_path):
    # SLURM's variables (the stand-in srun), two tasks on a node of one fake GPU: both would measure it. Where SLURM
    # binds a GPU to each task (--gpus-per-task=1: each sees its own as device 0), the run goes ahead.
    def srun(*options: str, name: str) -> tuple[subprocess.CompletedProcess, Path]:
        logs = tmp_path / name / "logs"
        logs.mkdir(parents=True)
        env = _clean_env(FAKE_SLURM_LOGS=str(logs), FAKE_SLURM_GPUS="1", SLURM_JOB_ID=str(os.getpid() % 9000 + len(name)))
        proc = subprocess.run([sys.executable, str(SRUN), "--ntasks-per-node=2", *options, gpubench_exe(), "run",
                               "--suite", "launch", "--backend", "fake", "--devices", "all", "--quick", "--out",
                               str(tmp_path / name / "out"), "--cluster", "t"], env=env, capture_output=True,
                              text=True, timeout=240, cwd=tmp_path)
        return proc, logs

    shared, logs = srun(name="shared")
    assert shared.returncode == 2, shared.stderr[-2000:]
    for r in (0, 1):
        assert (logs / f"task-{r}.rc").read_text().split()[0] == "2"
        (line,) = _rank_lines((logs / f"task-{r}.err").read_text())
        assert line.startswith("gpubench: error: ranks 0 and 1 both measure fake GPU 0 of "), line
        assert "srun --ntasks-per-node=1" in line and "srun --gpus-per-task=1" in line, line
    assert not (tmp_path / "shared" / "out").exists()
    bound, logs = srun("--gpus-per-task=1", name="bound")
    assert bound.returncode == 0, (logs / "task-0.err").read_text()[-3000:] + (logs / "task-1.err").read_text()[-3000:]
    (run,) = (tmp_path / "bound" / "out" / "t").glob("*/run.json")
    meta = json.loads(run.read_text())
    assert meta["status"] == "complete" and [r["rank"] for r in meta["fleet"]] == [0, 1], meta.get("fleet")


class _Gathered:
    """A group whose ranks said ``said``: what each rank's gather_objects returns."""

    def __init__(self, said: list[dict]):
        self.said = said

    def gather_objects(self, _mine):
        return self.said


class _Gpu:
    is_gpu = True

    def device_key(self):
        return "GPU 1b2c"


def test_ranks_that_share_a_gpu_are_refused_and_gloos_that_share_a_cpu_are_said():
    from gpubench.ranks import apart

    here = f"{machine()}/"
    one = {"node": here, "key": "GPU 1b2c", "host": "node1", "cpus": 16}
    # Four ranks of one node, two of them on one GPU; a rank elsewhere on its own GPU.
    said = [one, {**one, "key": "GPU 9f00"}, one, {**one, "key": "GPU 77aa"}, {**one, "node": "elsewhere/"}]
    with pytest.raises(UsageError) as e:
        apart.one_each(_Gathered(said), _Gpu(), alone=True, why="NCCL/RCCL takes one GPU per rank")
    assert str(e.value) == ("ranks 0 and 2 both measure GPU 1b2c of node1: NCCL/RCCL takes one GPU per rank; this node "
                            "has 3 devices for its 4 processes: start 3 per node (srun --ntasks-per-node=3, torchrun "
                            "--nproc-per-node=3, mpirun --npernode 3), or give each task a GPU of its own (srun "
                            "--gpus-per-task=1)")
    apart_each = [dict(one, key=f"GPU {k}") for k in range(4)]
    assert apart.one_each(_Gathered(apart_each), _Gpu(), alone=True, why="") is None
    unknown = [dict(one, key=None)] * 2  # a device that cannot tell which it is: nothing said
    assert apart.one_each(_Gathered(unknown), _Gpu(), alone=True, why="") is None
    cpu = [dict(one, key="the CPU")] * 3
    assert apart.one_each(_Gathered(cpu), _Gpu(), alone=False, why="") == (
        "ranks 0-2 share the CPU of node1 (gloo's ranks may): each computes on 5 of its 16 CPU cores")
