"""Fleet view: GPUs or hosts whose figures sit away from the rest of the fleet.

A device is a (host, device_index) pair of the rows. For each (suite, case, metric), each device's figure (the
median of its samples, pooled where it has several rows) is set against the fleet's median; its robust z is

    z = (figure − fleet median) / spread,   spread = max(1.4826 · MAD, 0.5 % of |fleet median|)

where MAD is the median absolute deviation of the devices' figures (1.4826 · MAD estimates the standard
deviation of normal data, so k reads as "standard deviations"). A figure is flagged when it is beyond both
|z| > k (default 3) and a practical floor: |figure / fleet median − 1| at least the figure's threshold (default
5 %; per suite, metric and case from a thresholds file, gpubench.compare.thresholds). GPUs of one model differ by
a few percent, and on a node whose GPUs read a tight spread a robust z alone flags them (docs/compare.md, 'Fleet
view'). DCGM's diag holds a GPU to a fraction of a reference and gpu-fryer to a 10 % band around its peers; the floor
is that band.
The floor on the spread keeps a fleet of identical figures from a z of infinity. Both directions are flagged: a
device far faster than its peers is as suspect as a slow one (a wrong measurement, another SKU); the
``direction`` column says which.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from gpubench.compare.defaults import DEFAULT_K
from gpubench.compare.load import KEY, Side
from gpubench.compare.thresholds import Thresholds
from gpubench.errors import UsageError

MIN_SPREAD = 0.005  # fraction of |median|
COLUMNS = ("flagged", "host", "device_index", "device", "suite", "case", "metric", "unit", "better", "value",
           "fleet_median", "deviation", "worse_by", "z", "direction", "devices", "floor")
_PRECISION = 9  # deviations meet the floor at this precision (0.95 × x / x − 1 is not exactly −0.05)


def _device_key(df: pd.DataFrame) -> pd.Series:
    host = df["host"].where(df["host"].notna(), df["cluster"]).fillna("?").astype(str)
    idx = pd.to_numeric(df["device_index"], errors="coerce").fillna(0).astype(int)
    return host + ":" + idx.astype(str)


def robust_z(values: np.ndarray) -> tuple[float, np.ndarray]:
    """(fleet median, z of each value), as in the module docstring."""
    from scipy.stats import median_abs_deviation  # scipy.stats is slow to import (a second or more): on use only

    median = float(np.median(values))
    # scale="normal": MAD × 1.4826..., an estimate of the standard deviation
    spread = max(float(median_abs_deviation(values, scale="normal")), MIN_SPREAD * abs(median))
    dev = values - median
    if spread == 0:
        return median, np.where(dev == 0, 0.0, np.inf * np.sign(dev))
    return median, dev / spread


@dataclass
class FleetReport:
    sides: list[Side]
    rows: pd.DataFrame  # one row per (device, figure), COLUMNS, worst first
    devices: pd.DataFrame  # one row per device, worst first
    k: float
    thresholds: Thresholds = field(default_factory=Thresholds)

    @property
    def exit_code(self) -> int:
        return 1 if bool(self.rows["flagged"].any()) else 0

    def title(self) -> str:
        labels = ", ".join(s.label for s in self.sides)
        return (f"gpubench fleet — {len(self.devices)} devices in {labels}; flagged beyond {self.k:g} robust z and "
                f"{self.floor_text()} from the fleet median")

    def floor_text(self) -> str:
        """The practical floor in words: ``5%``, or ``5% (or the threshold th.toml names)``."""
        th = self.thresholds
        own = th.suites or th.cases
        return f"{100 * th.default:g}%" + (f" (or the threshold {th.source} names)" if own else "")

    def summary(self) -> str:
        flagged = self.devices[self.devices["flagged"] > 0]
        if flagged.empty:
            return (f"no device beyond {self.k:g} robust z and {self.floor_text()} from the fleet median on any of "
                    f"{self.rows.groupby(list(KEY)).ngroups} figures")
        return f"{len(flagged)} of {len(self.devices)} devices flagged: " + ", ".join(flagged["device_key"])


def analyze(sides: Sequence[Side], k: float = DEFAULT_K, thresholds: Thresholds | None = None) -> FleetReport:
    """Each device's figures against the fleet's (module docstring); ``thresholds`` give each figure's floor."""
    thresholds = thresholds or Thresholds()
    if not k > 0:
        raise UsageError(f"--k {k}: give a positive number of robust standard deviations, such as 3")
    raw = pd.concat([s.raw for s in sides], ignore_index=True)
    ok = raw[raw["status"] == "ok"].copy()
    if ok.empty:
        raise UsageError(f"{', '.join(s.label for s in sides)} has no ok rows: nothing to set against the fleet")
    ok["device_key"] = _device_key(ok)
    keys = sorted(ok["device_key"].unique())
    if len(keys) < 2:
        raise UsageError(f"the fleet view needs figures from 2 or more devices, and "
                         f"{', '.join(s.label for s in sides)} has only {keys[0]}: give a run of several devices "
                         "(gpubench run --devices all) or several runs")
    out = []
    for key, group in ok.groupby(list(KEY), sort=False):
        per_device = []
        for dev, rows in group.groupby("device_key", sort=True):
            samples = [float(x) for ss in rows["samples"] for x in (ss if ss is not None else [])]
            finite = [x for x in samples if math.isfinite(x)]
            if not finite:  # a derived figure has no samples, only its value (NaN where it has none)
                finite = [x for x in rows["value"].astype(float) if math.isfinite(x)]
            value = float(np.median(finite)) if finite else math.nan
            if math.isfinite(value):
                per_device.append((dev, rows.iloc[-1], value))
        if len(per_device) < 2:
            continue
        median, z = robust_z(np.array([v for _, _, v in per_device]))
        floor = thresholds.for_row(str(key[0]), str(key[2]), str(key[1]))
        for (dev, r, value), zi in zip(per_device, z):
            deviation = value / median - 1 if median else math.nan
            worse = (zi < 0) if r["better"] == "higher" else (zi > 0)
            far = math.isfinite(deviation) and round(abs(deviation), _PRECISION) >= floor
            out.append({
                "flagged": bool(abs(zi) > k and far), "floor": floor, "host": dev.rsplit(":", 1)[0], "device_index": int(dev.rsplit(":", 1)[1]),
                "device": r.get("device"), "suite": key[0], "case": key[1], "metric": key[2], "unit": r.get("unit"),
                "better": r.get("better"), "value": value, "fleet_median": median, "deviation": deviation,
                "worse_by": -deviation if r["better"] == "higher" else deviation,
                "z": float(zi), "direction": "" if zi == 0 else ("worse" if worse else "better"),
                "devices": len(per_device), "device_key": dev,
            })
    rows = pd.DataFrame(out)
    if rows.empty:
        raise UsageError("no figure was measured on 2 or more devices: the devices ran different cases")
    rows["_abs"] = rows["z"].abs()
    rows = rows.sort_values(["flagged", "_abs"], ascending=[False, False], kind="mergesort").drop(columns="_abs")
    rows = rows.reset_index(drop=True)
    return FleetReport(list(sides), rows, _devices(rows), k, thresholds)


def _devices(rows: pd.DataFrame) -> pd.DataFrame:
    out: list[dict[str, Any]] = []
    for dev, g in rows.groupby("device_key", sort=False):  # rows are worst first: g.iloc[0] is the worst figure
        worst = g.iloc[0]
        out.append({
            "device_key": dev, "host": worst["host"], "device_index": worst["device_index"], "device": worst["device"],
            "figures": len(g), "flagged": int(g["flagged"].sum()), "worst_z": float(worst["z"]),
            "worst_deviation": float(worst["deviation"]),
            "worst_figure": f"{worst['suite']} {worst['case']} {worst['metric']}",
            # Signed so that + is worse whatever the metric's direction: a slow GPU's times and bandwidths
            # agree instead of cancelling out.
            "median_worse_by": float(np.median(g["worse_by"])),
        })
    devices = pd.DataFrame(out)
    devices["_abs"] = devices["worst_z"].abs()
    return devices.sort_values(["flagged", "_abs"], ascending=[False, False], kind="mergesort") \
        .drop(columns="_abs").reset_index(drop=True)


__all__ = ["FleetReport", "analyze", "robust_z", "DEFAULT_K", "MIN_SPREAD"]
