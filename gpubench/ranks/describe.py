"""What a multi-process run records about its ranks and its communication library, in run.json."""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
from typing import Any

from gpubench.backends.base import Backend
from gpubench.ranks.group import Group

# NCCL/RCCL read these; a run that does not record them cannot be compared with another. Values that look
# like secrets (tokens, keys) never reach a results file.
_ENV = re.compile(r"^(NCCL_|RCCL_|TORCH_NCCL_|CUDA_VISIBLE_DEVICES$|HIP_VISIBLE_DEVICES$|ROCR_VISIBLE_DEVICES$)")
_SECRET = re.compile(r"(TOKEN|SECRET|PASSWORD|KEY)", re.IGNORECASE)


def comm_env(env: dict[str, str] | None = None) -> dict[str, str]:
    env = os.environ if env is None else env
    return {k: v for k, v in sorted(env.items()) if _ENV.match(k) and not _SECRET.search(k)}


def library_version(backend_name: str) -> str | None:
    """NCCL (or RCCL, which answers the same call in a ROCm torch) version as torch loaded it."""
    if backend_name not in ("cuda", "hip"):
        return None
    try:
        import torch

        v = torch.cuda.nccl.version()
        return ".".join(map(str, v)) if isinstance(v, tuple) else str(v)
    except Exception:  # noqa: BLE001 — a torch built without NCCL/RCCL
        return None


def topology(backend_name: str) -> str | None:
    """The vendor tool's link matrix (``nvidia-smi topo -m`` / ``amd-smi topology``), as printed."""
    cmd = {"cuda": ["nvidia-smi", "topo", "-m"], "hip": ["amd-smi", "topology"]}.get(backend_name)
    if not cmd or shutil.which(cmd[0]) is None:
        return None
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None if out.returncode == 0 else None


def run_meta(group: Group, backend: Backend) -> dict[str, Any]:
    """Every rank's place (gathered: every rank must call this), the launcher, the library and its settings."""
    me = {"rank": group.rank, "pid": os.getpid(), "host": socket.gethostname(),
          "device_index": backend.device_index, "device": backend.device_name()}
    ranks = group.gather_objects(me)
    renv = group.renv
    return {
        "launcher": renv.launcher,
        "world_size": renv.world_size,
        "nnodes": renv.nnodes,
        "local_world_size": renv.local_world_size,
        "data_backend": group.data_backend,
        "library": ("rccl" if backend.name == "hip" else "nccl") if group.data_backend == "nccl" else group.data_backend,
        "library_version": library_version(backend.name),
        "env": comm_env(),
        "topology": topology(backend.name) if group.rank == 0 else None,
        "timeout_s": group.timeout_s,
        "ranks": ranks,
    }
