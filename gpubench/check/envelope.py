"""What a healthy GPU of a model reads on each check: the envelope, and the spec fallback where there is none.

An envelope (``gpubench/expect/*.toml``, or ``--expect FILE``) holds per check key a ``typical`` figure, a ``warn_at``
and a ``fail_at``, each in the figure's unit, with where they come from: the command, date, GPU and gpubench version
of the runs they were made from. ``gpubench expect RUNS... --out FILE`` makes one from a healthy fleet's check runs
(:func:`build`): typical is the median of every GPU's figure over the runs, and the thresholds sit below it (above,
for a time) by a margin of several times the figures' own spread, never less than a fixed fraction:

    warn_at = typical × (1 − max(WARN_MARGIN, 3 · spread)),   fail_at = typical × (1 − max(FAIL_MARGIN, 5 · spread))

where ``spread`` is the robust relative standard deviation of those figures. The fixed fractions are wider for a
figure the host sets (host-timed launches, copies to host memory: gpubench.results.host_set), whose level moves from one
process to the next (docs/measurements.md, 'check'). For comparison, DCGM's floors are 0.75 × a measured reference
and Azure's 0.93–0.96 × a typical figure (docs/check.md).

A figure the host times moves with the host's pace (gpubench.machine.host_pace). Where the runs' figures and paces draw a line
(gpubench.timing.pace_line), the figures are moved along it to the runs' median pace first, the entry keeps the line, and a
check moves its own figure to that pace before judging it (gpubench.check.judge).

Where no envelope matches the GPU, a figure whose row names its roof is held against a fraction of the spec peak
(gpubench.machine.spec_peaks) or of the PCIe link's nominal rate (generation × width, read from NVML), as TransferBench's
health check holds links to 0.95 × nominal: coarse, and said so in each verdict.
"""

from __future__ import annotations

import datetime as dt
import math
import os
import re
import tempfile
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from gpubench.timing import pace_line as paceline
from gpubench.machine import spec_peaks as peaks
from gpubench import files
from gpubench.errors import UsageError
from gpubench.results.host_set import set_by_host

EXPECT_DIR = Path(__file__).resolve().parent.parent / "expect"
# Envelope file versions: 1 first; 2 host_class (the CPU models the host-set figures were measured on) and an entry's
# gpus (a node total's GPU count); 3 a host-timed figure's line on the host's pace (pace, pace_slope, pace_lo, pace_hi),
# its thresholds then at that pace. An older file reads as one without what came later.
FORMAT, VERSION = "gpubench-expect", 3
WARN_MARGIN, FAIL_MARGIN = 0.05, 0.10
HOST_WARN_MARGIN, HOST_FAIL_MARGIN = 0.10, 0.25
# Spec fallback: (warn, fail) as fractions of the roof, below what healthy H100s and H200s read of it
# (docs/measurements.md, 'check').
SPEC_FRACTIONS = {"memory": (0.85, 0.80), "tensor": (0.55, 0.50), "host link": (0.75, 0.70)}
# PCIe: GT/s per lane by generation, and the line code's efficiency (8b/10b to Gen2, 128b/130b from Gen3).
_PCIE_GT = {1: 2.5, 2: 5.0, 3: 8.0, 4: 16.0, 5: 32.0, 6: 64.0}


def pcie_gbps(gen: int | None, width: int | None) -> float | None:
    """Nominal one-direction rate of a PCIe link in GB/s (1e9), before packet overheads; None if unknown."""
    if not gen or not width or gen not in _PCIE_GT:
        return None
    return _PCIE_GT[gen] * width * (0.8 if gen <= 2 else 128 / 130) / 8


@dataclass(frozen=True)
class Entry:
    unit: str
    better: str
    typical: float | None  # None where the source publishes a floor only (gpubench/expect/mi300x.toml)
    warn_at: float | None
    fail_at: float
    figures: int = 0  # how many figures (GPUs × runs) it was made from
    spread: float = 0.0
    gpus: int | None = None  # a node total of a figure the host sets: how many GPUs it was measured on
    source: str = ""  # where this entry comes from, where not from the file's source (a node's own history)
    hosts: tuple[str, ...] = ()  # the host classes its figures were measured on (the file's host_class)
    # A host-timed figure moves with the host's pace (docs/measurements.md, 'check'): where the entry's runs drew a
    # line of it on the pace (gpubench.timing.pace_line), its thresholds are at ``pace`` (µs), where a check moves its
    # figure first.
    pace: float | None = None
    pace_slope: float | None = None
    pace_lo: float | None = None  # the slowest and fastest paces of those runs: the line is not followed beyond
    pace_hi: float | None = None

    def line(self) -> paceline.Line | None:
        if self.pace is None or self.pace_slope is None:
            return None
        return paceline.Line(self.pace_slope, self.pace, self.pace_lo, self.pace_hi)


@dataclass
class Envelope:
    gpu: str
    match: str  # a regex on the device name
    entries: dict[str, Entry]
    source: str = ""  # where the figures come from, in words (runs, command, date, GPU, version)
    path: str = ""
    meta: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self):
        # Each entry knows the host classes it was measured on, so that a merged envelope keeps them apart.
        classes = tuple(host_classes(self))
        self.entries = {k: e if e.hosts or not classes else replace(e, hosts=classes) for k, e in self.entries.items()}

    def matches(self, device: str | None) -> bool:
        return bool(device) and re.search(self.match, device, re.IGNORECASE) is not None


@dataclass(frozen=True)
class Thresholds:
    warn_at: float | None
    fail_at: float
    typical: float | None
    reference: str  # in words: "envelope h100-sxm.toml (…)" or "spec fallback: 0.80 × 3,350 GB/s"
    ceiling: float | None = None  # the spec figure a fallback is a fraction of
    line: paceline.Line | None = None  # the pace the thresholds are at, and how the figure moves with it


def load_file(path: str | Path) -> Envelope:
    doc = files.read(path, "the envelope")
    if doc.get("format") != FORMAT or not isinstance(doc.get("version"), int):
        raise UsageError(f"{path} is not a gpubench envelope (format = \"{FORMAT}\"): make one with gpubench expect")
    if doc["version"] > VERSION:
        raise UsageError(f"{path} is envelope version {doc['version']}, newer than this gpubench reads ({VERSION}): "
                         "upgrade gpubench")
    try:
        entries = {k: Entry(**{"typical": None, "warn_at": None, **v}) for k, v in doc.get("figure", {}).items()}
    except TypeError as e:
        raise UsageError(f"{path}: a [figure] entry is malformed: {e}") from e
    meta = {k: v for k, v in doc.items() if k != "figure"}
    return Envelope(str(doc.get("gpu", "")), str(doc.get("match", "^$")), entries, str(doc.get("source", "")),
                    str(path), meta)


def shipped() -> list[Envelope]:
    return [load_file(p) for p in sorted(EXPECT_DIR.glob("*.toml"))]


def for_device(device: str | None, choice: str | None = None) -> Envelope | None:
    """The envelope for ``device``: ``choice`` a file, or "none" (spec fallback and peers only); by default the
    first shipped envelope whose pattern matches the device name."""
    if choice == "none":
        return None
    if choice:
        return load_file(choice)
    return next((e for e in shipped() if e.matches(device)), None)


def host_classes(env: Envelope) -> list[str]:
    """The host classes (CPU models) the envelope's figures the host sets were measured on; [] where unrecorded."""
    value = env.meta.get("host_class")
    return [str(v) for v in value] if isinstance(value, list) else [str(value)] if value else []


def unheld(key: str, row: dict[str, Any], env: Envelope | None, host: str | None = None,
           gpus: int | None = None) -> str:
    """Why the envelope's entry for ``key`` does not hold the figure in ``row`` ("" where it does, or has none): a
    figure the host sets measured on another class of host, a node total measured on another count of GPUs."""
    if env is None or key not in env.entries or not set_by_host(row):
        return ""
    e = env.entries[key]
    if e.hosts and host and host not in e.hosts:
        return (f"the host sets this figure and {e.source or Path(env.path).name} holds it for hosts with "
                f"{' or '.join(e.hosts)}, not {host}")
    if e.gpus and gpus and e.gpus != gpus:
        return f"{Path(env.path).name} holds this total for {e.gpus} GPUs at once, this check measured {gpus}"
    return ""


def thresholds(key: str, row: dict[str, Any], env: Envelope | None, link_gbps: float | None = None,
               host: str | None = None, gpus: int | None = None) -> Thresholds | None:
    """What the figure of check ``key`` in ``row`` is held against: its envelope entry (where :func:`unheld` has no
    objection), else the spec fallback of its roof, else None."""
    if env is not None and key in env.entries and not unheld(key, row, env, host, gpus):
        e = env.entries[key]
        if e.unit == row.get("unit"):
            where = e.source or f"{Path(env.path).name} ({env.source})"
            return Thresholds(e.warn_at, e.fail_at, e.typical, f"envelope {where}", line=e.line())
    return _spec(row, link_gbps)


def merged(first: Envelope, then: Envelope | None) -> Envelope:
    """``first``'s entries, and ``then``'s for the keys ``first`` lacks; each entry says which it came from."""
    def own(env: Envelope) -> dict[str, Entry]:
        return {k: replace(e, source=e.source or f"{Path(env.path).name} ({env.source})")
                for k, e in env.entries.items()}

    entries = {**(own(then) if then is not None else {}), **own(first)}
    source = first.source + (f"; other figures: {then.source}" if then is not None else "")
    return Envelope(first.gpu, first.match, entries, source, first.path, dict(first.meta))


def _spec(row: dict[str, Any], link_gbps: float | None) -> Thresholds | None:
    roof, better = row.get("roof"), row.get("better")
    if roof not in SPEC_FRACTIONS or better != "higher":
        return None
    peak = peaks.lookup(row.get("device"))
    if roof == "memory" and peak and peak.memory_gbps and row.get("unit") == "GB/s":
        ceiling, what = peak.memory_gbps, f"{peak.gpu} memory bandwidth {peak.memory_gbps:,.0f} GB/s"
    elif roof == "tensor" and peak and row.get("dtype") in peak.tflops and row.get("unit") == "TFLOP/s":
        ceiling = peak.tflops[row["dtype"]]
        what = f"{peak.gpu} dense {row['dtype']} peak {ceiling:,.1f} TFLOP/s"
    elif roof == "host link" and link_gbps and row.get("unit") == "GB/s":
        ceiling, what = link_gbps, f"the PCIe link's nominal {link_gbps:.1f} GB/s"
    else:
        return None
    warn, fail = SPEC_FRACTIONS[roof]
    return Thresholds(warn * ceiling, fail * ceiling, None, f"spec fallback: {fail:.2f} × {what} (no envelope)",
                      ceiling)


def _robust_spread(values: np.ndarray) -> float:
    from scipy.stats import median_abs_deviation  # scipy.stats is slow to import (a second or more): on use only

    median = float(np.median(values))
    return float(median_abs_deviation(values, scale="normal")) / abs(median) if median else 0.0


def entry(values: list[float], unit: str, better: str, host_set: bool, gpus: int | None = None,
          paces: list[float | None] | None = None) -> Entry:
    """One check's envelope from healthy figures (see the module docstring). ``paces``: each figure's host pace
    (µs), where it was taken: a figure the host sets whose every value has one, and whose values the pace explains
    (gpubench.timing.pace_line.fit), is moved to its line's pace before its typical figure and spread are taken."""
    keep = [i for i, x in enumerate(values) if math.isfinite(x)]
    if not keep:
        raise UsageError("no finite figure to make an envelope entry from")
    v = np.array([values[i] for i in keep], dtype=float)
    p = [paces[i] for i in keep] if paces is not None and len(paces) == len(values) else []
    line = paceline.fit(p, v) if host_set and p and all(x is not None for x in p) else None
    if line is not None:
        v = v * np.array([line.factor(x) for x in p])
    typical, spread = float(np.median(v)), _robust_spread(v)
    warn_m, fail_m = (HOST_WARN_MARGIN, HOST_FAIL_MARGIN) if host_set else (WARN_MARGIN, FAIL_MARGIN)
    warn, fail = max(warn_m, 3 * spread), max(fail_m, 5 * spread)
    sign = -1 if better == "higher" else 1
    paced = {} if line is None else {"pace": _round(line.pace), "pace_slope": round(line.slope, 4),
                                     "pace_lo": _round(line.lo), "pace_hi": _round(line.hi)}
    return Entry(unit, better, _round(typical), _round(typical * (1 + sign * warn)),
                 _round(typical * (1 + sign * fail)), len(v), round(spread, 5), gpus if host_set else None, **paced)


def _round(x: float) -> float:
    return float(f"{x:.4g}")


def write(env: Envelope, path: str | Path) -> Path:
    """The envelope as TOML, written whole or not at all."""
    lines = [f"# {env.gpu}: what a healthy GPU reads on each of gpubench check's figures. Made by gpubench expect;",
             "# docs/check.md says how the thresholds follow from the figures.",
             f'format = "{FORMAT}"', f"version = {VERSION}", f"gpu = {_q(env.gpu)}", f"match = {_q(env.match)}",
             f"source = {_q(env.source)}"]
    lines += [f"{k} = {_value(v)}" for k, v in env.meta.items()
              if k not in ("format", "version", "gpu", "match", "source") and isinstance(v, (str, int, float, list))]
    for key, e in env.entries.items():
        lines += ["", f"[figure.{key}]", f"unit = {_q(e.unit)}", f"better = {_q(e.better)}", f"typical = {e.typical}",
                  f"warn_at = {e.warn_at}", f"fail_at = {e.fail_at}", f"figures = {e.figures}", f"spread = {e.spread}"]
        lines += [f"gpus = {e.gpus}"] if e.gpus else []
        lines += [f"{k} = {getattr(e, k)}" for k in ("pace", "pace_slope", "pace_lo", "pace_hi")] if e.line() else []
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    with os.fdopen(fd, "w") as f:
        f.write("\n".join(lines) + "\n")
    os.replace(tmp, path)
    return path


def _value(v: object) -> str:
    if isinstance(v, list):
        return "[" + ", ".join(_q(str(x)) for x in v) + "]"
    return _q(v) if isinstance(v, str) else str(v)


def _q(s: str) -> str:
    # TOML literal strings keep regex backslashes as typed; a quote inside falls back to a basic string.
    return f"'{s}'" if "'" not in s and "\n" not in s else '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'


def today() -> str:
    return dt.datetime.now(dt.timezone.utc).date().isoformat()


__all__ = ["Envelope", "Entry", "Thresholds", "load_file", "shipped", "for_device", "thresholds", "unheld", "merged",
           "host_classes", "entry", "write", "pcie_gbps", "EXPECT_DIR", "SPEC_FRACTIONS"]
