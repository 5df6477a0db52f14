"""The measured roofline of a run: ``gpubench roofline RUN_DIR [--out FILE.png]``.

Per dtype, a log-log chart of TFLOP/s over arithmetic intensity (FLOP per byte, each case's declared
``work_flops / work_bytes``: BabelStream's bytes for ``elementwise``, A+B+C once for ``gemm``). Rows are chosen
by the roof their suite says they are held against (the ``roof`` column, or ``Suite.roof`` for older rows), never
by suite:

- measured roofs, solid, each from the panel's own dtype and from figures whose samples spread at most
  :data:`ROOF_SPREAD` (a figure that moves more is no level to hold others against; where none is steady, no
  measured roof is drawn): the memory roof is the best bandwidth the dtype's rows held against the memory or
  vector roof sustained (a steady point whose own bytes moved faster, such as a GEMM whose operands stayed in
  cache, raises it to that rate); the compute roofs are the best TF/s of the dtype's rows held against the tensor
  roof (tensor cores) and of those held against the vector roof (the ``fma`` sweep: vector units). A roof is
  never drawn below a figure it is chosen from: where a noisy one reads above the best steady one, that roof is
  not drawn and the chart says why in words (:class:`Level`);
- spec roofs, dashed: the vendor's memory bandwidth and dense peaks (gpubench/machine/spec_peaks.py), where known;
- every measured point with flops at its analytic intensity, hollow where its spread is too wide to set a roof.
  Without a compute roof (a CPU's panel) the memory roof ends past the last point, not at TF/s nothing reached.

A point above its spec roof — min(spec bandwidth × intensity, spec peak of the unit it runs on) — is
physically impossible, so it is reported as a measurement error (exit 1): wrong byte or flop counts, a
timer that missed work, or a wrong spec entry.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from gpubench.machine import spec_peaks as peaks
from gpubench import registry
from gpubench.report.chartfit import thin_ticks
from gpubench.console import fmt_value
from gpubench.errors import UsageError

# Points never take the roofs' colours (red: tensor/gemm, orange: vector/fma).
_POINT_COLORS = ("tab:blue", "tab:green", "tab:purple", "tab:brown", "tab:cyan", "tab:olive", "tab:gray")
_MARKERS = ("o", "s", "^", "D", "v", "P", "X")

# Spec figures are rounded by the vendor; a point this close above one is not called an error.
SPEC_SLACK = 1.005

# The roofs a row may be held against that this chart draws (gpubench.machine.spec_peaks); "host link" and "peer link" are
# other charts' business. Rows held against memory or the vector units stream device memory: their bandwidth
# places the memory roof.
TENSOR, VECTOR, MEMORY = "tensor", "vector", "memory"
ROOFS = (TENSOR, VECTOR, MEMORY)
# A figure sets a roof only where its samples spread (CV) at most this: compare's default threshold, the least
# change it calls a change (a noisy one drew every panel's memory roof: docs/measurements.md, 'gemm').
ROOF_SPREAD = 0.05
# A chart's short word for a roof a noisy figure reads above (Level): the figures are said under it.
_UNDER = "steady figures read under a noisy one"


@dataclass
class Point:
    suite: str
    label: str  # its suite's name for its series (Suite.point_label): "gemm torch", "elementwise fma", ...
    case: str
    intensity: float  # FLOP/byte
    tflops: float
    unit: str  # "tensor" (held against the tensor roof) or "vector" (any other arithmetic): which spec peak bounds it
    steady: bool = True  # its spread is at most ROOF_SPREAD: it may set or raise a roof
    cv: float = math.nan  # its spread, for the words that say why a roof is not drawn
    roof: str = ""  # the roof its row is held against (MEMORY, VECTOR or TENSOR): the roof it may set

    def figure(self, value: float) -> Figure:
        """This point as a figure of ``value`` (its TF/s, or its bytes' rate in GB/s)."""
        return Figure(value, self.label, self.cv, self.steady)


@dataclass(frozen=True)
class Figure:
    """One figure a roof is chosen from: its value (GB/s or TF/s), its series' name and its spread."""
    value: float
    label: str
    cv: float
    steady: bool


@dataclass(frozen=True)
class Level:
    """What a roof's figures allow. The best steady one is the roof, unless a noisy one reads above it: then
    there is none, since the steady level is contradicted by a figure of its own chart and the noisy one is no
    level to hold others against."""
    best: Figure | None = None  # the best steady figure
    top: Figure | None = None  # the best figure, steady or not

    @classmethod
    def of(cls, figures) -> Level:
        figures = [f for f in figures if f is not None and math.isfinite(f.value) and f.value > 0]
        best = max((f for f in figures if f.steady), key=lambda f: f.value, default=None)
        return cls(best, max(figures, key=lambda f: f.value, default=None))

    @property
    def roof(self) -> float | None:
        # A point's byte rate is its TF/s over its intensity: a rounding above its own row's bandwidth is the same
        return self.best.value if self.best and self.best.value * (1 + 1e-9) >= self.top.value else None

    def withheld(self, unit: str) -> str | None:
        """Why the best steady figure is drawn as no roof, in words; None where it is, or where none is steady."""
        if self.best is None or self.roof is not None:
            return None
        best, top = self.best, self.top
        return (f"the steady figures read at most {fmt_value(best.value)} {unit} ({best.label}), under "
                f"{fmt_value(top.value)} {unit} of {top.label}, whose samples spread {top.cv:.0%} (a roof needs "
                f"{ROOF_SPREAD:.0%} or less)")


@dataclass
class Roofs:
    dtype: str
    memory_gbps: float | None = None  # measured: best steady bandwidth of this dtype (an op's, or a point's own)
    tensor_tflops: float | None = None  # measured: best gemm of this dtype
    tensor_suite: str | None = None  # the suite whose row set it, for the legend
    vector_tflops: float | None = None  # measured: best fma sweep of this dtype
    spec_memory_gbps: float | None = None
    spec_tensor_tflops: float | None = None
    spec_vector_tflops: float | None = None
    points: list[Point] = field(default_factory=list)
    withheld: dict[str, str] = field(default_factory=dict)  # roof (MEMORY, TENSOR, VECTOR) -> why it is not drawn

    def measured_roof(self, p: Point) -> float:
        """The measured roof drawn at the point's intensity for the unit it runs on (TF/s; inf where none is drawn):
        the memory roof, up to the compute roof of its unit (a GEMM's tensor cores outrun the fma sweep's)."""
        peak = self.tensor_tflops if p.unit == TENSOR else self.vector_tflops
        slope = self.memory_gbps * p.intensity / 1e3 if self.memory_gbps else math.inf
        return min(slope, peak or math.inf)

    def notes(self) -> list[str]:
        """Each roof a steady figure would set that is not drawn, and why, in words (for under the chart)."""
        return [f"{self.dtype}: no measured {kind} roof: {why}" for kind, why in self.withheld.items()]

    def spec_roof(self, p: Point) -> float | None:
        """The physical ceiling at the point's intensity, or None where the spec is unknown."""
        peak = self.spec_tensor_tflops if p.unit == "tensor" else self.spec_vector_tflops
        if peak is None or self.spec_memory_gbps is None:
            return None
        return min(self.spec_memory_gbps * p.intensity / 1e3, peak)


def _ok(df: pd.DataFrame, metric: str, roofs: tuple[str, ...]) -> pd.DataFrame:
    """The ok ``metric`` rows held against one of ``roofs``, with their roof in a ``roof`` column."""
    if "suite" not in df.columns:
        return df.iloc[0:0].assign(roof=None)
    rows = df[(df["metric"] == metric) & (df["status"] == "ok")]
    rows = rows.assign(roof=[registry.roof(r) for r in rows.to_dict("records")])
    return rows[rows["roof"].isin(roofs)]


def on_roofline(df: pd.DataFrame) -> bool:
    """Whether any row of ``df`` (whatever its status) is held against a roof this chart draws."""
    if "suite" not in df.columns:
        return False
    return any(registry.roof(r) in ROOFS for r in df.to_dict("records"))


def _cv(rows: pd.DataFrame) -> pd.Series:
    return pd.to_numeric(rows["cv"], errors="coerce") if "cv" in rows.columns else pd.Series(math.nan, index=rows.index)


def steady(rows: pd.DataFrame) -> pd.Series:
    """Per row, whether its samples spread at most :data:`ROOF_SPREAD` (its cv; none known: not steady)."""
    return _cv(rows) <= ROOF_SPREAD


def _spread(rows: pd.DataFrame) -> pd.DataFrame:
    """``rows`` with their figure (``_value``), spread (``_cv``) and steadiness (``_steady``) as plain floats."""
    return rows.assign(_value=pd.to_numeric(rows["value"], errors="coerce").astype(float), _cv=_cv(rows).astype(float),
                       _steady=steady(rows))


def memory_levels(df: pd.DataFrame) -> dict[str, Level]:
    """Per dtype, the bandwidth figures its rows held against the memory or vector roof sustained, as a
    :class:`Level`: its roof is the measured memory roof. The elementwise chart draws these too."""
    moved = _ok(df, "bandwidth", (MEMORY, VECTOR))
    if "dtype" not in moved.columns:
        return {}
    figures: dict[str, list[Figure]] = {}
    for r in _spread(moved).to_dict("records"):
        figures.setdefault(str(r["dtype"]), []).append(
            Figure(r["_value"], registry.point_label(r), r["_cv"], r["_steady"]))
    return {d: Level.of(f) for d, f in figures.items()}


def memory_roofs(df: pd.DataFrame) -> dict[str, float]:
    """The measured memory roof of each dtype (GB/s): the best steady bandwidth its rows held against the memory or
    vector roof sustained; a dtype with none steady, or with a noisy one above it, has none."""
    return {d: lv.roof for d, lv in memory_levels(df).items() if lv.roof is not None}


def analyze(df: pd.DataFrame) -> tuple[str | None, list[Roofs]]:
    """(device name, roofs and points per dtype) of one run's rows."""
    device = str(df["device"].dropna().iloc[0]) if "device" in df.columns and df["device"].notna().any() else None
    spec = peaks.lookup(device)
    by_dtype: dict[str, Roofs] = {}

    def roofs(dtype: str) -> Roofs:
        if dtype not in by_dtype:
            by_dtype[dtype] = Roofs(
                dtype, spec_memory_gbps=spec.memory_gbps if spec else None,
                spec_tensor_tflops=spec.tflops.get(dtype) if spec else None,
                spec_vector_tflops=spec.vector_tflops.get(dtype) if spec else None,
            )
        return by_dtype[dtype]

    rows = _spread(_ok(df, "throughput", ROOFS))
    # Tensor-core points first, then the rest, as the legend has always listed them.
    for row in sorted(rows.to_dict("records"), key=lambda r: r["roof"] != TENSOR):
        flops, nbytes, value = row.get("work_flops"), row.get("work_bytes"), row["_value"]
        if not flops or not nbytes or not math.isfinite(value) or value <= 0:
            continue  # copy and fill do no arithmetic: they are the memory roof, not points on it
        # Arithmetic off the tensor cores runs on the vector units, whichever roof bounds it here.
        unit = TENSOR if row["roof"] == TENSOR else VECTOR
        point = Point(row["suite"], registry.point_label(row), row["case"], flops / nbytes, value, unit,
                      row["_steady"], row["_cv"], row["roof"])
        roofs(str(row["dtype"])).points.append(point)
    memory = memory_levels(df)
    for ro in by_dtype.values():
        _measured(ro, memory.get(ro.dtype))
    return device, [by_dtype[d] for d in sorted(by_dtype)]


def _measured(ro: Roofs, memory: Level | None) -> None:
    """Sets the measured roofs of ``ro`` from its points and its dtype's bandwidth figures (``memory``), and says
    why where a steady figure is drawn as no roof."""
    levels = {k: Level.of(p.figure(p.tflops) for p in ro.points if p.roof == k) for k in (TENSOR, VECTOR)}
    if memory is not None and memory.best is not None:  # none steady of this dtype: a GEMM's byte rate is no roof
        # A point whose own bytes moved faster than the best op's (operands in cache) raises the roof to its rate;
        # a noisy one does not, and one above the roof leaves none drawn.
        rates = (p.figure(p.tflops * 1e3 / p.intensity) for p in ro.points)
        levels[MEMORY] = Level.of([memory.best, memory.top, *rates])
    ro.memory_gbps, ro.tensor_tflops, ro.vector_tflops = (levels[k].roof if k in levels else None
                                                           for k in (MEMORY, TENSOR, VECTOR))
    setters = (p.suite for p in ro.points if p.roof == TENSOR and p.steady and p.tflops == ro.tensor_tflops)
    ro.tensor_suite = next(setters, None)
    ro.withheld = {k: why for k, lv in levels.items() if (why := lv.withheld("GB/s" if k == MEMORY else "TF/s"))}


def violations(all_roofs: list[Roofs]) -> list[tuple[Roofs, Point, float]]:
    """Points above their spec roof: (roofs, point, the roof it breaks)."""
    out = []
    for ro in all_roofs:
        for p in ro.points:
            roof = ro.spec_roof(p)
            if roof is not None and p.tflops > roof * SPEC_SLACK:
                out.append((ro, p, roof))
    return out


def plot(device: str | None, all_roofs: list[Roofs], path: Path, bad: list) -> None:
    try:
        import matplotlib
    except ImportError as e:
        raise UsageError(f"the roofline chart needs matplotlib ({e}): pip install matplotlib") from e
    matplotlib.use("Agg")  # files only: no display on a cluster node
    import matplotlib.pyplot as plt

    n = max(1, len(all_roofs))
    cols = min(3, n)
    rows = math.ceil(n / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(6 * cols, 4.6 * rows), squeeze=False)
    flagged = {(id(ro), id(p)) for ro, p, _ in bad}
    for ax, ro in zip(axes.flat, all_roofs):
        _panel(ax, ro, flagged)
    for ax in list(axes.flat)[len(all_roofs):]:
        ax.axis("off")
    fig.suptitle(f"gpubench roofline — {device or 'unknown device'}")
    fig.tight_layout()
    thin_ticks(fig)
    fig.savefig(path, dpi=130)
    plt.close(fig)


def _panel(ax, ro: Roofs, flagged: set[tuple[int, int]]) -> None:
    """One dtype's roofs and points on ``ax``."""
    xs = [p.intensity for p in ro.points]
    # Without a compute roof (measured or spec) the chart ends past the last point: a CPU's memory roof climbing to
    # 30 TF/s said what nothing measured.
    ceiling = any((ro.tensor_tflops, ro.vector_tflops, ro.spec_tensor_tflops, ro.spec_vector_tflops))
    lo, hi = min(xs + [0.05]) / 2, max(xs + ([2000.0] if ceiling else [])) * 2
    grid = [lo * (hi / lo) ** (i / 200) for i in range(201)]

    def roof_line(bw, peak, style, label, color):
        if bw is None and peak is None:
            return
        # A memory roof without a compute roof, or a compute roof without a memory roof, bounds nothing beyond the
        # points: it is drawn over their span only.
        span = grid if bw and peak else [x for x in grid if min(xs) / 2 <= x <= max(xs) * 2]
        ys = [min(bw * x / 1e3 if bw else math.inf, peak or math.inf) for x in span]
        ax.plot(span, ys, style, color=color, label=label, linewidth=1.6)

    # The memory roof rises to a compute roof (the tensor one in red, the vector one in orange); the bandwidth is
    # said with the first line drawn. Alone (no compute roof of this kind), it is drawn only over the points.
    lines = (("measured", "-", ro.memory_gbps, ((ro.tensor_tflops, ro.tensor_suite or TENSOR), (ro.vector_tflops, "fma"))),
             ("spec", "--", ro.spec_memory_gbps, ((ro.spec_tensor_tflops, "tensor"), (ro.spec_vector_tflops, "vector"))))
    for kind, style, bw, peaks_ in lines:
        said = False
        for (peak, unit), color in zip(peaks_, ("tab:red", "tab:orange")):
            if peak:
                roof_line(bw, peak, style, _roof_label(kind, None if said else bw, peak, unit), color)
                said = said or bool(bw)
        if bw and not said:
            roof_line(bw, None, style, _roof_label(kind, bw, None, "") + " (no compute roof)", "tab:red")
    for i, label in enumerate(sorted({p.label for p in ro.points})):
        color, marker, named = _POINT_COLORS[i % len(_POINT_COLORS)], _MARKERS[i % len(_MARKERS)], label
        for steady_ in (True, False):  # a point too noisy to set a roof is drawn hollow
            pts = [p for p in ro.points if p.label == label and p.steady == steady_]
            if pts:
                ax.scatter([p.intensity for p in pts], [p.tflops for p in pts], s=16, zorder=3, marker=marker,
                           label=named, facecolors=color if steady_ else "none", edgecolors=color)
                named = None  # one legend entry a series
    if any(not p.steady for p in ro.points):
        ax.scatter([], [], s=16, facecolors="none", edgecolors="gray",
                   label=f"hollow: spread over {ROOF_SPREAD:.0%}, sets no roof")
    bad_pts = [p for p in ro.points if (id(ro), id(p)) in flagged]
    if bad_pts:
        ax.scatter([p.intensity for p in bad_pts], [p.tflops for p in bad_pts], s=80, facecolors="none",
                   edgecolors="black", linewidths=1.5, label="above spec roof: measurement error", zorder=4)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("arithmetic intensity (FLOP/byte)")
    ax.set_ylabel("TFLOP/s")
    measured = ro.memory_gbps or ro.tensor_tflops or ro.vector_tflops
    if ro.withheld and measured:  # else the title says it; the figures, in words, go under the chart (Roofs.notes)
        ax.plot([], [], " ", label=f"no measured {' or '.join(ro.withheld)} roof: {_UNDER}")
    why = _UNDER if ro.withheld else f"no figure spread under {ROOF_SPREAD:.0%}"
    ax.set_title(ro.dtype if measured else f"{ro.dtype} (no measured roof: {why})")
    ax.grid(True, which="both", alpha=0.25)
    ax.legend(fontsize=7, loc="best")


def _roof_label(kind: str, bw: float | None, peak: float | None, unit: str) -> str:
    parts = []
    if bw:
        parts.append(f"{fmt_value(bw)} GB/s")
    if peak:
        parts.append(f"{fmt_value(peak)} TF/s {unit}")
    return f"{kind}: " + ", ".join(parts) if parts else kind


__all__ = ["Figure", "Level", "Point", "Roofs", "ROOFS", "ROOF_SPREAD", "analyze", "memory_levels", "memory_roofs",
           "on_roofline", "steady", "violations", "plot"]
