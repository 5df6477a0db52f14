"""Which system a side ran on, whether two sides are the same system, and figures as % of spec peak.

A comparison across systems (another GPU model, count or driver) answers a different question than a
regression gate does, so compare refuses one unless ``--cross-cluster`` asks for it; it then shows ratios and,
where :mod:`gpubench.machine.spec_peaks` knows the hardware, each side's figure as a percentage of its own spec peak.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, Protocol

from gpubench.machine import spec_peaks as peaks
from gpubench import registry
from gpubench.errors import UsageError

if TYPE_CHECKING:
    import pandas as pd

# Facts of run.json's fingerprint identity that make two results different systems. Software (torch, CUDA
# runtime, NCCL) is left out on purpose: a gate exists to catch what a software upgrade does. Host names are
# left out too: nightly jobs land on any node of a cluster.
SYSTEM_KEYS = ("backend", "gpu_model", "gpu_count", "memory_bytes", "compute_capability", "multiprocessors",
               "driver_version")
CPU_KEYS = ("cpu_model", "cpu_count")  # on the cpu backend the CPU is the device


def system_of_meta(meta: dict[str, Any]) -> dict[str, Any]:
    """The system facts of one run.json (empty where it has no fingerprint)."""
    identity = (meta.get("fingerprint") or {}).get("identity") or {}
    keys = SYSTEM_KEYS + (CPU_KEYS if identity.get("backend") == "cpu" else ())
    return {k: identity.get(k) for k in keys if identity.get(k) is not None}


class SideRuns(Protocol):
    """What the system facts and the settings read of a side of a comparison (:class:`gpubench.compare.load.Side`,
    whose module imports this one): its name, each run's run.json and its rows."""

    label: str
    runs: list[dict[str, Any]]
    raw: pd.DataFrame

    @property
    def run_ids(self) -> list[str]: ...


def system_of(side: SideRuns) -> dict[str, Any]:
    """The system facts of a side's runs; from its rows where no run.json is at hand (a bare table)."""
    systems = [s for s in (system_of_meta(meta) for meta in side.runs) if s]
    if not systems:
        raw = side.raw
        system = {}
        for col, key in (("backend", "backend"), ("device", "gpu_model")):
            if col in raw.columns and raw[col].notna().any():
                system[key] = str(raw[col].dropna().iloc[-1])
        return system
    first = systems[0]
    for other in systems[1:]:
        diff = differences(first, other)
        if diff:
            raise UsageError(f"the runs of {side.label} were measured on different systems ({'; '.join(diff)}): "
                             "pool runs of one system only")
    return first


def differences(a: dict[str, Any], b: dict[str, Any]) -> list[str]:
    """'key: a → b' for each system fact both sides know and that differs."""
    return [f"{k}: {a[k]} → {b[k]}" for k in a if k in b and a[k] != b[k]]


def describe(system: dict[str, Any], side: SideRuns) -> str:
    """One line naming a side: device × count, driver, cluster, runs."""
    model = system.get("gpu_model") or system.get("cpu_model") or system.get("backend") or "unknown system"
    count = system.get("gpu_count")
    parts = [f"{model} ×{count}" if count and count > 1 else str(model)]
    if system.get("driver_version"):
        parts.append(f"driver {system['driver_version']}")
    clusters = sorted({str(m.get("cluster")) for m in side.runs if m.get("cluster")})
    if clusters:
        parts.append("cluster " + ",".join(clusters))
    ids = side.run_ids
    if len(ids) == 1:
        parts.append(f"run {ids[0]}")
    elif ids:
        parts.append(f"{len(ids)} runs {ids[0]} … {ids[-1]}")
    return ", ".join(parts)


def roof_of(row: dict[str, Any]) -> str | None:
    """The roof a row's figure is held against. Rows carry it (their ``roof`` column; empty where their suite
    declares none); only rows written before rows carried one (no ``roof`` column at all) ask their suite
    (``Suite.roof``, through the registry), which imports every suite and torch with them: seconds that a
    comparison of rows that carry it never pays."""
    value = row.get("roof")
    if isinstance(value, str):
        return value
    if "roof" in row:
        return None
    return registry.roof(row)


def spec_peak(row: dict[str, Any]) -> float | None:
    """The spec peak a row's figure is measured against, in the row's unit; None where there is none.

    Chosen by the roof the row is held against (:func:`roof_of`): throughput held against the tensor roof, the
    dense TFLOP/s of the row's dtype; bandwidth of a row that streams device memory (held against the memory or
    the vector roof), the memory bandwidth.
    """
    device = row.get("device")
    if not isinstance(device, str):
        return None
    metric, unit = row.get("metric"), row.get("unit")
    if metric == "throughput" and unit == "TFLOP/s" and roof_of(row) == "tensor":
        found = peaks.peak_tflops(device, str(row.get("dtype")))
        return found[0] if found else None
    if metric == "bandwidth" and unit == "GB/s" and roof_of(row) in ("memory", "vector"):
        peak = peaks.lookup(device)
        return peak.memory_gbps if peak else None
    return None


def pct_of_peak(row: dict[str, Any], value: float) -> float | None:
    peak = spec_peak(row)
    if peak is None or not math.isfinite(value):
        return None
    return 100.0 * value / peak


__all__ = ["SYSTEM_KEYS", "system_of", "system_of_meta", "differences", "describe", "spec_peak", "pct_of_peak", "roof_of"]
