"""Which launcher started this process, and where this rank sits: torchrun, then SLURM, then MPI.

torchrun is asked first because it may itself run inside a SLURM allocation (its variables are the ones that
describe the process); SLURM comes before MPI because ``srun --mpi=pmix`` also exports PMI/PMIx variables.
With none of them this is a plain process, and gpubench spawns the ranks itself (:mod:`gpubench.run.spawn`).
"""

from __future__ import annotations

import os
import zlib
from collections.abc import Mapping
from dataclasses import dataclass

from gpubench.errors import UsageError
from gpubench.ranks import hostlist

DEFAULT_PORT = 29517  # gpubench's rendezvous port when the launcher names none (torchrun uses 29500)


@dataclass(frozen=True)
class RankEnv:
    launcher: str  # "torchrun" | "slurm" | "mpi" | "spawn"
    rank: int
    world_size: int
    local_rank: int
    local_world_size: int
    master_addr: str
    master_port: int
    nnodes: int
    address_from: str = ""  # where master_addr came from, for a rank that cannot reach it: "MASTER_ADDR", ...

    @property
    def is_root(self) -> bool:
        return self.rank == 0


def _int(env: Mapping[str, str], *names: str) -> int | None:
    for name in names:
        value = env.get(name)
        if value not in (None, ""):
            try:
                return int(str(value).split("(")[0].split(",")[0])
            except ValueError as e:
                raise UsageError(f"launcher variable {name}={value!r} is not an integer") from e
    return None


def _port_for(job: str | None) -> int:
    # Jobs sharing a node must not share a rendezvous port; derive one from the job id, the same on every rank.
    if not job:
        return DEFAULT_PORT
    return 20000 + zlib.crc32(job.encode()) % 20000


def detect(env: Mapping[str, str] | None = None) -> RankEnv | None:
    """The launcher's view of this rank, or None when no launcher started this process."""
    env = os.environ if env is None else env
    # torchrun (and our own spawn, which sets the same variables plus GPUBENCH_SPAWNED).
    if "RANK" in env and "WORLD_SIZE" in env and ("TORCHELASTIC_RUN_ID" in env or "GPUBENCH_SPAWNED" in env
                                                  or "LOCAL_RANK" in env):
        world = _int(env, "WORLD_SIZE")
        local_world = _int(env, "LOCAL_WORLD_SIZE") or world
        return RankEnv(
            launcher="spawn" if "GPUBENCH_SPAWNED" in env else "torchrun",
            rank=_int(env, "RANK"),
            world_size=world,
            local_rank=_int(env, "LOCAL_RANK") or 0,
            local_world_size=local_world,
            master_addr=env.get("MASTER_ADDR", "127.0.0.1"),
            master_port=_int(env, "MASTER_PORT") or DEFAULT_PORT,
            nnodes=max(1, -(-world // max(1, local_world))),
            address_from="MASTER_ADDR" if env.get("MASTER_ADDR") else "",
        )
    if "SLURM_PROCID" in env and "SLURM_NTASKS" in env:
        world = _int(env, "SLURM_NTASKS")
        nnodes = _int(env, "SLURM_STEP_NUM_NODES", "SLURM_NNODES") or 1
        nodelist = env.get("SLURM_STEP_NODELIST") or env.get("SLURM_JOB_NODELIST") or env.get("SLURM_NODELIST")
        addr = env.get("MASTER_ADDR") or (hostlist.first(nodelist) if nodelist else "127.0.0.1")
        named = next((n for n in ("SLURM_STEP_NODELIST", "SLURM_JOB_NODELIST", "SLURM_NODELIST") if env.get(n)), "")
        source = "MASTER_ADDR" if env.get("MASTER_ADDR") else f"{named}'s first node" if named else ""
        return RankEnv(
            launcher="slurm",
            rank=_int(env, "SLURM_PROCID"),
            world_size=world,
            local_rank=_int(env, "SLURM_LOCALID") or 0,
            local_world_size=_int(env, "SLURM_NTASKS_PER_NODE") or max(1, world // nnodes),
            master_addr=addr,
            master_port=_int(env, "MASTER_PORT") or _port_for(env.get("SLURM_JOB_ID")),
            nnodes=nnodes,
            address_from=source,
        )
    rank = _int(env, "OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK")
    size = _int(env, "OMPI_COMM_WORLD_SIZE", "PMI_SIZE")
    if rank is not None and size is not None:
        local_rank = _int(env, "OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "PALS_LOCAL_RANKID") or 0
        local_size = _int(env, "OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS", "PALS_LOCAL_SIZE") or size
        nnodes = max(1, -(-size // local_size))
        addr = env.get("MASTER_ADDR")
        if not addr:
            if nnodes > 1:
                raise UsageError("under mpirun across nodes gpubench needs MASTER_ADDR (the first rank's host); "
                                 "pass it with mpirun -x MASTER_ADDR=<host> (Open MPI) or -genv (MPICH)")
            addr = "127.0.0.1"
        return RankEnv(
            launcher="mpi",
            rank=rank,
            world_size=size,
            local_rank=local_rank,
            local_world_size=local_size,
            master_addr=addr,
            master_port=_int(env, "MASTER_PORT") or _port_for(env.get("OMPI_MCA_orte_jobfam_session_dir")
                                                               or env.get("PMI_JOBID") or None),
            nnodes=nnodes,
            address_from="MASTER_ADDR" if env.get("MASTER_ADDR") else "",
        )
    return None


def rendezvous_hint(renv: RankEnv) -> str:
    """What to set where this rank cannot reach its rendezvous store (or rank 0 cannot host it), by launcher."""
    came = f"{renv.master_addr} came from {renv.address_from}" if renv.address_from else \
        f"{renv.master_addr} is the default"
    if renv.launcher == "torchrun":
        return f"{came}: check torchrun's --rdzv-endpoint (or --master-addr and --master-port)"
    if renv.launcher == "slurm":
        return (f"{came}: set MASTER_ADDR to rank 0's node as the other nodes reach it (in the batch script: "
                "export MASTER_ADDR=$(scontrol show hostnames \"$SLURM_JOB_NODELIST\" | head -n 1)), and MASTER_PORT "
                "to a port free there")
    if renv.launcher == "mpi":
        return (f"{came}: pass MASTER_ADDR=<rank 0's host> and MASTER_PORT=<a free port> to every rank (mpirun -x "
                "with Open MPI, -genv with MPICH)")
    return f"{came}: set MASTER_ADDR and MASTER_PORT to rank 0's host and a port free there"


# What makes detect() see a launcher: the variables that say which rank of which world this process is.
_RANK_VARIABLES = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "GROUP_RANK", "GROUP_WORLD_SIZE",
                   "ROLE_RANK", "ROLE_WORLD_SIZE", "GPUBENCH_SPAWNED", "MASTER_ADDR", "MASTER_PORT",
                   "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", "SLURM_STEP_ID", "SLURM_STEPID",
                   "SLURM_NTASKS_PER_NODE", "SLURM_STEP_NUM_TASKS", "SLURM_STEP_TASKS_PER_NODE",
                   "SLURM_STEP_NUM_NODES", "SLURM_STEP_NODELIST", "SLURM_NODEID")
_RANK_PREFIXES = ("TORCHELASTIC_", "OMPI_COMM_WORLD_", "PMI_", "PMIX_", "MPI_LOCAL", "PALS_")


def standalone(env: Mapping[str, str]) -> dict[str, str]:
    """``env`` without the variables by which a launcher tells a process its rank: for a child gpubench starts on
    its own (the check's runs), which must be a world of its own, not a rank of the step that started its parent
    (under srun, a child inheriting SLURM_PROCID would try to join the step)."""
    return {k: v for k, v in env.items() if k not in _RANK_VARIABLES and not k.startswith(_RANK_PREFIXES)}


def quiet_torch_logs(env: dict[str, str] | None = None) -> None:
    """In a rank (a launcher's variables, or gpubench's spawner's), torch's C++ warnings stay off standard error:
    a lost peer or store is said in gpubench's one line, not in c10d's warnings with their stack frames. Its errors
    still print. Before torch is imported (it reads the level then); TORCH_CPP_LOG_LEVEL, or GPUBENCH_DEBUG_HANG,
    keeps them all."""
    env = os.environ if env is None else env
    if "GPUBENCH_DEBUG_HANG" in env or not any(k in env for k in ("RANK", "SLURM_PROCID", "OMPI_COMM_WORLD_RANK",
                                                                   "PMI_RANK", "PMIX_RANK")):
        return
    env.setdefault("TORCH_CPP_LOG_LEVEL", "ERROR")


def share_host_cores(backend: str, local_world_size: int) -> None:
    """On backends that compute on the host's cores (cpu, fake), give each of this node's ranks its share of them:
    ranks that each spread over all of them spin against each other in torch's thread pools (docs/measurements.md,
    'Wall time'). GPU backends keep torch's default."""
    if backend not in ("cpu", "fake"):
        return
    import os

    import torch

    torch.set_num_threads(max(1, (os.cpu_count() or 1) // max(1, local_world_size)))


__all__ = ["RankEnv", "detect", "quiet_torch_logs", "share_host_cores", "standalone", "rendezvous_hint",
           "DEFAULT_PORT"]
