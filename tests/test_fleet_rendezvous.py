"""A rendezvous that cannot be reached: an unresolvable first node (SLURM's variables, no MASTER_ADDR), a refused port,
a firewall that drops, something that answers but is no store, a rank 0 told to host the store at another host's
address; under the stand-in srun (tests/fleet/srun), SLURM's variables set per task, and Open MPI's mpirun.

Each rank ends within --timeout + 15 s with one ``gpubench: error:`` line that names the address and what to set,
exit 2, no traceback and no C++ frame, and leaves no --out folder behind. All cases start at once: each waits mostly
on its rank's connect.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from fleet.faults import ERROR, SRUN, gpubench_exe, mpirun  # noqa: E402

TIMEOUT = 8
NOWHERE = "gpu-01.invalid"  # RFC 6761: a name no resolver resolves


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class _Dropping:
    """A port whose accept queue is full and never drained: a new connection's SYN is dropped, as a firewall drops."""

    def __init__(self):
        self.listener = socket.socket()
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(0)
        self.port = self.listener.getsockname()[1]
        self.fill = []
        for _ in range(4):
            c = socket.socket()
            c.setblocking(False)
            try:
                c.connect(("127.0.0.1", self.port))
            except BlockingIOError:
                pass
            self.fill.append(c)


class _NoStore:
    """A port where something answers, but not a rendezvous store (another service's)."""

    def __init__(self):
        self.listener = socket.socket()
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(16)
        self.port = self.listener.getsockname()[1]
        import threading

        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self):
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            try:
                conn.recv(64)
                conn.sendall(b"HTTP/1.1 400 Bad Request\r\n\r\n")
            except OSError:
                pass
            conn.close()


def _slurm_task(rank: int, env: dict[str, str]) -> dict[str, str]:
    """SLURM's variables of one task of a 2-task step on one node, as srun sets them (no MASTER_ADDR)."""
    return {"SLURM_JOB_ID": "31337", "SLURM_STEP_ID": "0", "SLURM_PROCID": str(rank), "SLURM_NTASKS": "2",
            "SLURM_LOCALID": str(rank), "SLURM_NODEID": "0", "SLURM_NNODES": "1", "SLURM_STEP_NUM_NODES": "1",
            "SLURM_JOB_NODELIST": "vm", "SLURM_NTASKS_PER_NODE": "2", **env}


def _base_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items()
            if not k.startswith(("SLURM_", "OMPI_", "PMI", "TORCHELASTIC_", "GPUBENCH_FAKE_"))
            and k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT")}


def _run_args(out: Path) -> list[str]:
    return ["run", "--suite", "comm", "--backend", "cpu", "--timeout", str(TIMEOUT), "--max-bytes", "1M",
            "--out", str(out), "--cluster", "t"]


@pytest.mark.timeout(300)
def test_a_rendezvous_that_cannot_be_reached_ends_each_rank_in_one_line_naming_what_to_set(tmp_path):
    dropping, nostore, refused = _Dropping(), _NoStore(), _free_port()
    cases: dict[str, dict] = {
        # a real srun sets no MASTER_ADDR: the first node of the step is the rendezvous, and it does not resolve
        "srun-unresolvable": dict(argv=[sys.executable, str(SRUN), "--ntasks-per-node=2", gpubench_exe()],
                                  env={"FAKE_SLURM_NODES": NOWHERE, "FAKE_SLURM_NO_MASTER_ADDR": "1"},
                                  ranks=2, words=[f"{NOWHERE}:", "does not resolve", "SLURM_JOB_NODELIST",
                                                  "set MASTER_ADDR"]),
        "refused": dict(env=_slurm_task(1, {"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(refused)}),
                        words=[f"127.0.0.1:{refused}", "refused", "MASTER_ADDR"]),
        "dropped": dict(env=_slurm_task(1, {"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(dropping.port)}),
                        words=[f"127.0.0.1:{dropping.port}", "no answer", "MASTER_ADDR"]),
        "no-store": dict(env=_slurm_task(1, {"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(nostore.port)}),
                         words=[f"127.0.0.1:{nostore.port}", "no rendezvous store", "MASTER_ADDR"]),
        # rank 0 hosts the store under srun: told another host's address (TEST-NET-1), it says so at once
        "rank0-elsewhere": dict(env=_slurm_task(0, {"MASTER_ADDR": "192.0.2.7", "MASTER_PORT": str(refused)}),
                                words=["192.0.2.7:", "is not this host", "MASTER_ADDR"]),
    }
    if mpirun():
        cases["mpirun-unresolvable"] = dict(
            argv=[mpirun(), "--allow-run-as-root", "--oversubscribe", "-np", "2", "--output-filename",
                  str(tmp_path / "mpirun-unresolvable" / "logs"), "-x", f"MASTER_ADDR={NOWHERE}", gpubench_exe()],
            ranks=2, words=[f"{NOWHERE}:", "does not resolve", "mpirun -x"])
    started = time.monotonic()
    for name, case in cases.items():
        root = tmp_path / name
        (root / "logs").mkdir(parents=True)
        env = {**_base_env(), "FAKE_SLURM_LOGS": str(root / "logs"), **case.get("env", {})}
        argv = case.get("argv", [gpubench_exe()]) + _run_args(root / "out")
        case["proc"] = subprocess.Popen(argv, cwd=root, env=env, stdout=subprocess.DEVNULL,
                                        stderr=open(root / "err", "w"), start_new_session=True)
    try:
        while any(c["proc"].poll() is None for c in cases.values()) and time.monotonic() - started < TIMEOUT + 60:
            for case in cases.values():
                if "took" not in case and case["proc"].poll() is not None:
                    case["took"] = time.monotonic() - started
            time.sleep(0.1)
    finally:
        for case in cases.values():  # a launcher still running, and what it started: gone
            if case["proc"].poll() is None:
                os.killpg(case["proc"].pid, signal.SIGKILL)
            case["rc"] = case["proc"].wait(timeout=30)
            case.setdefault("took", time.monotonic() - started)
    print({name: round(case["took"], 1) for name, case in cases.items()})
    for name, case in cases.items():
        root = tmp_path / name
        texts = [p.read_text(errors="replace") for p in sorted(root.rglob("*")) if p.is_file() and
                 (p.name == "err" and "argv" not in case or p.name.endswith(".err") or p.name == "stderr")]
        lines = [ln for t in texts for ln in t.splitlines() if ln.strip()]
        errors = [ln for ln in lines if ln.startswith(ERROR)]
        # mpirun adds its own paragraph after a rank's exit (its words, not gpubench's): the ranks' own files say
        # the rest; every other line is gpubench's one line
        ours = [ln for ln in lines if not ln.startswith(("-----", " ", "Primary job", "a non-zero", "mpirun",
                                                         "the job", "Process name", "Exit code"))]
        assert case["rc"] == 2, (name, case["rc"], lines)
        assert case["took"] <= TIMEOUT + 15, (name, case["took"])
        assert 1 <= len(errors) <= case.get("ranks", 1) and ours == errors, (name, lines)
        assert all(all(w in ln for w in case["words"]) for ln in errors), (name, errors)
        assert not any("Traceback" in t or "frame #" in t for t in texts), name
        assert not (root / "out").exists(), name  # bad input leaves nothing behind
