"""Start a comm run under a launcher, stop or kill one of its ranks, and record what each process did.

Shared by the fault-matrix tests (tests/test_fleet_faults.py) and the GPU acceptance (tests/gpu/run_fleet_faults.sh):
one :class:`Scenario` is one run; :func:`run_all` runs several at once (each waits mostly on its ranks' watchdogs,
so a batch takes about as long as its slowest scenario).

Launchers: ``spawn`` (gpubench starts its ranks), ``torchrun`` (--standalone), ``slurm`` (tests/fleet/srun, the
stand-in that sets SLURM's variables), ``mpirun`` (Open MPI). Each rank's standard error is kept apart where the
launcher allows (torchrun's --redirects, srun's stand-in logs, mpirun's --output-filename); the spawner's ranks
share its own.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
SRUN = HERE / "srun"
ERROR = "gpubench: error:"


def gpubench_exe() -> str:
    return str(Path(sys.executable).parent / "gpubench")


def mpirun() -> str | None:
    return shutil.which("mpirun")


@dataclass
class Scenario:
    launcher: str
    victim: int  # the rank sent the signal
    sig: str  # SIGKILL, SIGSTOP, SIGTERM
    timeout_s: float = 8.0
    nproc: int = 2  # ranks in all
    nodes: int = 1  # simulated nodes under the stand-in srun, nproc / nodes ranks each
    args: tuple[str, ...] = ()  # the run's own arguments (default: a comm sweep long enough to be interrupted)
    backend: str = "cpu"
    env: dict[str, str] = field(default_factory=dict)
    launcher_args: tuple[str, ...] = ()  # the launcher's own options (torchrun: --monitor-interval 5)
    label: str = ""  # tells apart scenarios of the same launcher, victim and signal run at once
    # filled in by the run
    root: Path | None = None
    proc: subprocess.Popen | None = None
    ranks: list[dict] = field(default_factory=list)
    started_at: float | None = None
    signalled_at: float | None = None
    ended_after: dict[int, float] = field(default_factory=dict)  # rank -> seconds from the signal to its end
    launcher_rc: int | None = None
    errors: dict = field(default_factory=dict)  # rank -> its standard error ("all" where shared)
    codes: dict[int, int] = field(default_factory=dict)  # rank -> its exit code, where the launcher tells
    meta: dict = field(default_factory=dict)
    problem: str | None = None  # what went wrong with the scenario itself (never got rows, ...)

    @property
    def name(self) -> str:
        return f"{self.launcher}-rank{self.victim}-{self.sig}{self.label}"

    def command(self) -> list[str]:
        run = ["run", "--suite", "comm", "--backend", self.backend, "--out", str(self.root / "out"), "--cluster", "t",
               "--timeout", str(self.timeout_s), *(self.args or ("--collectives", "all_reduce,all_gather",
                                                                 "--min-bytes", "1K", "--max-bytes", "16M",
                                                                 "--step-factor", "2"))]
        # Longer than the harness can take to see the first case on a loaded VM (up to 64K, the run had ended before
        # the signal under load 13): its length past the signal costs nothing, the ranks end then.
        logs = self.root / "logs"
        if self.launcher == "spawn":
            return [gpubench_exe(), *run, "--nproc", str(self.nproc)]
        if self.launcher == "torchrun":
            return [sys.executable, "-m", "torch.distributed.run", "--standalone", *self.launcher_args,
                    "--nproc-per-node", str(self.nproc), "--log-dir", str(logs), "--redirects", "3", "--no-python", gpubench_exe(), *run]
        if self.launcher == "slurm":
            return [sys.executable, str(SRUN), f"--ntasks-per-node={self.nproc // self.nodes}", gpubench_exe(), *run]
        if self.launcher == "mpirun":
            return [mpirun() or "mpirun", "--allow-run-as-root", "--oversubscribe", "-np", str(self.nproc),
                    "--output-filename", str(logs), gpubench_exe(), *run]
        raise ValueError(self.launcher)

    def start(self, root: Path) -> None:
        self.root = root
        self.started_at = time.monotonic()
        (root / "logs").mkdir(parents=True, exist_ok=True)
        env = dict(os.environ, FAKE_SLURM_LOGS=str(root / "logs"),
                   FAKE_SLURM_NODES=",".join(f"node{n + 1}" for n in range(self.nodes)),
                   SLURM_JOB_ID=str(abs(hash(self.name)) % 100000), **self.env)
        for k in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT", "SLURM_PROCID", "SLURM_NTASKS"):
            env.pop(k, None)
        self.proc = subprocess.Popen(self.command(), cwd=root, env=env, stdout=subprocess.DEVNULL,
                                     stderr=open(root / "launcher.err", "w"), start_new_session=True)

    def run_dir(self) -> Path | None:
        runs = sorted((self.root / "out" / "t").glob("*/run.json"))
        return runs[0].parent if runs else None

    def ready(self, cases: int = 1) -> bool:
        """The run has its ranks' pids and ``cases`` cases written."""
        run = self.run_dir()
        if run is None or not any(run.glob("*.parquet")):
            return False
        try:
            meta = json.loads((run / "run.json").read_text())
            from gpubench import results

            n = results.load(run)["case"].nunique()
        except Exception:  # noqa: BLE001 — a file being written
            return False
        self.ranks = meta.get("dist", {}).get("ranks", [])
        return len(self.ranks) == self.nproc and n >= cases

    def fire(self) -> None:
        self.signalled_at = time.monotonic()
        try:
            os.kill(self.ranks[self.victim]["pid"], getattr(signal, self.sig))
        except ProcessLookupError:  # the sweep is long so that this cannot happen: say so if it does
            self.problem = "the victim had ended before it was signalled: the run was over (make its sweep longer)"

    def poll(self) -> bool:
        """Note the ranks that ended; whether every rank but a stopped victim has."""
        for r, rank in enumerate(self.ranks):
            if r not in self.ended_after and gone(rank["pid"]):
                self.ended_after[r] = time.monotonic() - self.signalled_at
        waiting = [r for r in range(self.nproc) if r not in self.ended_after and not (r == self.victim
                                                                                      and self.sig == "SIGSTOP")]
        # gpubench's spawner is the process that speaks for the run: it too must end on its own
        return not waiting and (self.launcher != "spawn" or self.proc.poll() is not None)

    def finish(self) -> None:
        """Everything of the run gone; what each rank said, the launcher's code, run.json."""
        end = time.monotonic() + 5  # the launcher reaps (and the stand-in srun records) the ranks that ended
        while time.monotonic() < end and self.launcher == "slurm" and any(
                not (self.root / "logs" / f"task-{r}.rc").exists() for r in self.ended_after):
            time.sleep(0.1)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            if self.proc.poll() is None:
                os.killpg(self.proc.pid, signal.SIGKILL)
        for rank in self.ranks:
            with contextlib.suppress(ProcessLookupError):
                os.kill(rank["pid"], signal.SIGKILL)
                os.kill(rank["pid"], signal.SIGCONT)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=30)
        self.launcher_rc = self.proc.returncode
        self.errors = _errors(self.launcher, self.root / "logs", self.root / "launcher.err", self.nproc)
        for f in (self.root / "logs").glob("task-*.rc"):  # the stand-in srun's record of each task
            self.codes[int(f.stem.split("-")[1])] = int(f.read_text().split()[0])
        run = self.run_dir()
        if run is not None:
            self.meta = json.loads((run / "run.json").read_text())


def gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    try:  # a zombie is gone too (its parent has not reaped it yet)
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] in ("Z", "X")
    except (OSError, IndexError):
        return True


def _errors(launcher: str, logs: Path, launcher_err: Path, nproc: int) -> dict:
    """Each rank's standard error, by rank; the spawner's ranks share the launcher's ("all")."""
    out: dict = {"launcher": launcher_err.read_text() if launcher_err.exists() else ""}
    for r in range(nproc):
        if launcher == "slurm":
            files = [logs / f"task-{r}.err"]
        elif launcher == "torchrun":
            files = list(logs.glob(f"*/attempt_0/{r}/stderr.log"))
        elif launcher == "mpirun":
            files = list(logs.glob(f"*/rank.{r}/stderr"))
        else:
            files = []
        out[r] = "".join(f.read_text(errors="replace") for f in files if f.exists())
    if launcher == "spawn":
        out["all"] = out["launcher"]
    return out


def run_all(scenarios: list[Scenario], root: Path, *, start_limit_s: float = 240.0) -> None:
    """Run the scenarios at once: start each, wait for its rows, signal its victim, wait for the other ranks to end
    (at most the timeout + 30 s), then end whatever is left. A scenario that never got going says so in
    ``problem``."""
    for k, s in enumerate(scenarios):
        s.start(root / s.name)
    end = time.monotonic() + start_limit_s
    pending = list(scenarios)
    try:
        while pending and time.monotonic() < end:
            for s in list(pending):
                if s.proc.poll() is not None:
                    s.problem = f"the launcher ended (exit {s.proc.returncode}) before the run had rows"
                    pending.remove(s)
                elif s.ready():
                    s.fire()
                    pending.remove(s)
            time.sleep(0.2)
        for s in pending:
            s.problem = f"no rows within {start_limit_s:.0f} s"
        live = [s for s in scenarios if s.signalled_at is not None]
        while live:
            for s in list(live):
                if s.poll() or time.monotonic() - s.signalled_at > s.timeout_s + 30:
                    live.remove(s)
            time.sleep(0.1)
    finally:
        for s in scenarios:
            s.finish()


__all__ = ["Scenario", "run_all", "gone", "mpirun", "gpubench_exe", "ERROR", "SRUN"]
