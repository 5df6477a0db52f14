"""Who ran this: a fingerprint of the machine and software behind a result.

Results are grouped by `fingerprint`, a hash of the stable identity only, so
two runs on the same machine and stack compare as like with like even when
clocks, temperatures, load or tuning variables differ; those are kept
alongside under `volatile` to explain differences, never to split groups.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import socket
import sys

from gpubench.machine.telemetry import Telemetry

# Variables that change collective or threading behaviour, hence timings.
_ENV_NAMES = ("CUDA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES",
              "ROCR_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER", "OMP_NUM_THREADS")
_ENV_PREFIXES = ("NCCL_", "RCCL_", "TORCH_NCCL_")
# gpubench's own options that share the prefix: where the nccl-tests/rccl-tests binaries are, not a setting of
# NCCL (older runs recorded them; compare leaves them out).
NOT_SETTINGS = frozenset({"NCCL_TESTS_DIR", "RCCL_TESTS_DIR"})


def identity_hash(identity: dict) -> str:
    """First 16 hex chars of sha256 over the identity as sorted-key JSON."""
    blob = json.dumps(identity, sort_keys=True).encode()
    return hashlib.sha256(blob).hexdigest()[:16]


def _cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                key, _, value = line.partition(":")
                if key.strip() == "model name":
                    return value.strip()
    except OSError:
        pass
    # ARM Linux has no "model name" line; macOS/Windows have no /proc.
    return platform.processor() or None


def _torch_facts():
    """(torch version, nccl version, collective lib), None where unknown."""
    try:
        import torch  # seconds to import, and absent where the suite runs without it
    except Exception:
        return None, None, None
    version = str(torch.__version__)
    hip = getattr(torch.version, "hip", None)
    if not (getattr(torch.version, "cuda", None) or hip):
        return version, None, None
    try:
        v = torch.cuda.nccl.version()
        nccl = ".".join(str(p) for p in v) if isinstance(v, tuple) else str(v)
    except Exception:
        return version, None, None
    # On ROCm torch links RCCL, which reports an NCCL-compatible version.
    return version, nccl, "rccl" if hip else "nccl"


def _version(dist: str) -> str | None:
    """An installed distribution's version, without importing it (Triton's import alone takes a second)."""
    # importlib.metadata takes tens of ms to import, and gpubench.machine.fingerprint is read by commands that never
    # fingerprint a run (compare): on use only
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(dist)
    except PackageNotFoundError:
        return None


def _env():
    return {k: v for k, v in sorted(os.environ.items())
            if (k in _ENV_NAMES or k.startswith(_ENV_PREFIXES)) and k not in NOT_SETTINGS}


def _loadavg():
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except (OSError, AttributeError):
        return None


def collect(device_identity: dict, cluster: str,
            telemetry: "Telemetry | None" = None) -> dict:
    """Identity (hashed), volatile state (not hashed) and the fingerprint.

    `device_identity` comes from the backend and is copied as is; host and
    software facts are added to it. With `telemetry`, the driver version
    joins the identity and the current readings join the volatile part.
    """
    tel = telemetry if telemetry is not None else Telemetry()
    try:
        static = tel.static()
    except Exception:
        static = Telemetry().static()
    try:
        reading = tel.read()
    except Exception:
        reading = Telemetry().read()

    torch_version, nccl, collective_lib = _torch_facts()
    identity = dict(device_identity)
    identity.update({
        "cluster": cluster,
        "hostname": socket.gethostname(),
        "cpu_model": _cpu_model(),
        "cpu_count": os.cpu_count(),
        "os": f"{platform.system()} {platform.release()}",
        "python": "{}.{}.{}".format(*sys.version_info[:3]),
        "torch": torch_version,
        "triton": _version("triton") or _version("pytorch-triton-rocm"),
        "nccl": nccl,
        "collective_lib": collective_lib,
    })
    # Keep a backend-supplied driver version when there is no telemetry.
    identity["driver_version"] = (static.get("driver_version")
                                  or device_identity.get("driver_version"))

    volatile = {
        "telemetry_source": tel.source,
        "telemetry_match": getattr(tel, "match", None),
        **{k: reading.get(k) for k in ("sm_clock_mhz", "mem_clock_mhz",
                                       "power_w", "temp_c", "throttle")},
        "max_sm_clock_mhz": static.get("max_sm_clock_mhz"),
        "max_mem_clock_mhz": static.get("max_mem_clock_mhz"),
        "power_limit_w": static.get("power_limit_w"),
        "loadavg": _loadavg(),
        "env": _env(),
    }
    return {"identity": identity, "volatile": volatile,
            "fingerprint": identity_hash(identity)}
