"""Issue 46's GPU acceptance, in one call on a 4-GPU machine (docs/measurements.md):
    python3 tests/gpu/run_fleet_faults.py OUT_DIR [NPROC]
1. `gpubench run --suite comm` on NPROC GPUs (default 4; NCCL), rank 0 SIGSTOPped once the run has rows, under
   gpubench's spawner, torchrun and the stand-in srun (tests/fleet/srun; mpirun too where installed): every other
   rank must end within --timeout + 15 s (--timeout 30), each in one `gpubench: error:` line naming rank 0 and its
   host; run.json failed, naming rank 0.
2. ci/check-nodes.sbatch under the stand-in srun: two simulated nodes of NPROC/2 GPUs each (the stand-in's
   FAKE_SLURM_CUDA gives each node half the machine), then the same with one node killed 20 s in: exit 0 (or 1 on a FAIL verdict), then exit 1
   with "no verdict; srun exit 137" for the dead node.
Prints each outcome: exit codes, the lines, run.json's status, wall times. LAUNCHERS (default every one here,
comma-separated), TIMEOUT_S (--timeout, default 30) and STEPS (default "stops sbatch") trim it to a shorter call.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests"))
from fleet.faults import ERROR, SRUN, Scenario, mpirun, run_all  # noqa: E402

NCCL_SAFE = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1"}
os.environ.update(NCCL_SAFE, PYTHONUNBUFFERED="1")  # every process started here inherits them


def stops(out: Path, nproc: int) -> None:
    launchers = ["spawn", "torchrun", "slurm"] + (["mpirun"] if mpirun() else [])
    launchers = [x for x in os.environ.get("LAUNCHERS", ",".join(launchers)).split(",") if x]
    for launcher in launchers:  # one at a time: each holds every GPU
        s = Scenario(launcher, 0, "SIGSTOP", timeout_s=float(os.environ.get("TIMEOUT_S", "30")), nproc=nproc, backend="cuda",
                     args=("--collectives", "all_reduce,all_gather", "--min-bytes", "1M", "--max-bytes", "1G",
                           "--step-factor", "2"))
        t0 = time.monotonic()
        run_all([s], out / "stops", start_limit_s=300.0)
        print(f"== comm, rank 0 SIGSTOP, {launcher}, {nproc} GPUs: {time.monotonic() - t0:.0f} s in all;"
              f" problem: {s.problem}")
        print(f"   ranks ended (s after the stop): { {r: round(t, 1) for r, t in s.ended_after.items()} }"
              f" (limit {s.timeout_s + 15:.0f}); launcher exit {s.launcher_rc}; task exits {s.codes}")
        print(f"   run.json: {s.meta.get('status')}: {s.meta.get('error')}; cases_done {s.meta.get('cases_done')}")
        for who, text in s.errors.items():
            lines = [ln for ln in text.splitlines() if ln.startswith(ERROR)]
            print(f"   {who}: {len(lines)} line(s){'; TRACEBACK' if 'Traceback' in text else ''}")
            for ln in lines:
                print(f"      {ln[:400]}")


def sbatch(out: Path, nproc: int) -> None:
    half = max(1, nproc // 2)
    visible = ";".join(",".join(map(str, range(k * half, (k + 1) * half))) for k in range(2))  # a half each
    for label, kill in (("two nodes", None), ("one node killed 20 s in", "node2")):
        env = dict(os.environ, PATH=f"{SRUN.parent}{os.pathsep}{Path(sys.executable).parent}{os.pathsep}"
                   f"{os.environ['PATH']}", SLURM_JOB_ID=str(int(time.time())), SLURM_JOB_NODELIST="node[1-2]",
                   FAKE_SLURM_NODES="node1,node2", FAKE_SLURM_CUDA=visible)
        if kill:
            env.update(FAKE_SLURM_KILL_NODE=kill, FAKE_SLURM_KILL_AFTER="20")
        t0 = time.monotonic()
        proc = subprocess.run(["bash", str(ROOT / "ci" / "check-nodes.sbatch"), str(out / "checks")], env=env,
                              capture_output=True, text=True, timeout=1500)
        print(f"== check-nodes.sbatch, {label}, {half} GPU(s) per node (CUDA_VISIBLE_DEVICES {visible}): "
              f"exit {proc.returncode}, {time.monotonic() - t0:.0f} s")
        tail = proc.stdout.splitlines()
        start = max((k for k, ln in enumerate(tail) if ln.startswith("fleet ")), default=len(tail) - 10)
        print("\n".join(f"   {ln}" for ln in tail[start:]))
        errs = [ln for ln in proc.stderr.splitlines() if ERROR in ln or "Traceback" in ln]
        print("\n".join(f"   stderr: {ln[:300]}" for ln in errs[-10:]))


def main() -> None:
    out = Path(sys.argv[1]).resolve()
    nproc = int(sys.argv[2]) if len(sys.argv) > 2 else 4
    out.mkdir(parents=True, exist_ok=True)
    steps = os.environ.get("STEPS", "stops sbatch").split()
    if "stops" in steps:
        stops(out, nproc)
    if "sbatch" in steps:
        sbatch(out, nproc)


if __name__ == "__main__":
    main()
