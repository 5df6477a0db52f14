"""Launch edges of issue 73, run with the launchers themselves on this machine's CPU: torchrun, SLURM's variables (the
stand-in srun of tests/fleet) and gpubench's own spawner."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from fleet.faults import HERE, Scenario, run_all  # noqa: E402

from gpubench.rundir import kept  # noqa: E402

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
