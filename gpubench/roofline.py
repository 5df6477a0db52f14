"""The measured roofline of a run: ``gpubench roofline RUN_DIR [--out FILE.png]``.

Per dtype, a log-log chart of TFLOP/s over arithmetic intensity (FLOP per byte, each case's declared
``work_flops / work_bytes``: BabelStream's bytes for ``elementwise``, A+B+C once for ``gemm``). Rows are chosen
by the roof their suite says they are held against (the ``roof`` column, or ``Suite.roof`` for older rows), never
by suite:

- measured roofs, solid, each from the panel's own dtype and from figures whose samples spread at most
  :data:`ROOF_SPREAD` (a figure that moves more is no level to hold others against; where none is steady, no
  measured roof is drawn): the memory roof is the best bandwidth the dtype's rows held against the memory or
  vector roof sustained (a steady point whose own bytes moved faster, such as a GEMM whose operands stayed in
  cache, raises it to that rate, so that no steady point sits above the roof drawn); the compute roofs are the
  best TF/s of the dtype's rows held against the tensor roof (tensor cores) and of those held against the vector
  roof (the ``fma`` sweep: vector units);
- spec roofs, dashed: the vendor's memory bandwidth and dense peaks (gpubench/peaks.py), where known;
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

from gpubench import peaks, registry
from gpubench.chartfit import thin_ticks
from gpubench.console import fmt_value
from gpubench.errors import UsageError

# Points never take the roofs' colours (red: tensor/gemm, orange: vector/fma).
_POINT_COLORS = ("tab:blue", "tab:green", "tab:purple", "tab:brown", "tab:cyan", "tab:olive", "tab:gray")
_MARKERS = ("o", "s", "^", "D", "v", "P", "X")

# Spec figures are rounded by the vendor; a point this close above one is not called an error.
SPEC_SLACK = 1.005

# The roofs a row may be held against that this chart draws (gpubench.peaks); "host link" and "peer link" are
# other charts' business. Rows held against memory or the vector units stream device memory: their bandwidth
# places the memory roof.
TENSOR, VECTOR, MEMORY = "tensor", "vector", "memory"
ROOFS = (TENSOR, VECTOR, MEMORY)
# A figure sets a roof only where its samples spread (CV) at most this: compare's default threshold, the least
# change it calls a change. A bf16 dot at ±24 % on a busy 2-core VM once drew every panel's memory roof.
ROOF_SPREAD = 0.05


@dataclass
class Point:
    suite: str
    label: str  # its suite's name for its series (Suite.point_label): "gemm torch", "elementwise fma", ...
    case: str
    intensity: float  # FLOP/byte
    tflops: float
    unit: str  # "tensor" (held against the tensor roof) or "vector" (any other arithmetic): which spec peak bounds it
    steady: bool = True  # its spread is at most ROOF_SPREAD: it may set or raise a roof


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

    def measured_roof(self, p: Point) -> float:
        """The highest measured roof drawn at the point's intensity (TF/s; inf where none is drawn)."""
        peaks = [x for x in (self.tensor_tflops, self.vector_tflops) if x]
        slope = self.memory_gbps * p.intensity / 1e3 if self.memory_gbps else math.inf
        return min(slope, max(peaks) if peaks else math.inf)

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


def steady(rows: pd.DataFrame) -> pd.Series:
    """Per row, whether its samples spread at most :data:`ROOF_SPREAD` (its cv; none known: not steady)."""
    cv = pd.to_numeric(rows["cv"], errors="coerce") if "cv" in rows.columns else pd.Series(math.nan, index=rows.index)
    return cv <= ROOF_SPREAD


def memory_roofs(df: pd.DataFrame) -> dict[str, float]:
    """The measured memory roof of each dtype (GB/s): the best steady bandwidth its rows held against the memory or
    vector roof sustained; a dtype with none steady has none. The elementwise chart draws these too."""
    moved = _ok(df, "bandwidth", (MEMORY, VECTOR))
    if "dtype" not in moved.columns:
        return {}
    moved = moved[(pd.to_numeric(moved["value"], errors="coerce") > 0) & steady(moved)]
    return {str(d): float(v) for d, v in moved.groupby(moved["dtype"].astype(str))["value"].max().items()}


def analyze(df: pd.DataFrame) -> tuple[str | None, list[Roofs]]:
    """(device name, roofs and points per dtype) of one run's rows."""
    device = str(df["device"].dropna().iloc[0]) if "device" in df.columns and df["device"].notna().any() else None
    spec = peaks.lookup(device)
    memory = memory_roofs(df)

    by_dtype: dict[str, Roofs] = {}

    def roofs(dtype: str) -> Roofs:
        if dtype not in by_dtype:
            by_dtype[dtype] = Roofs(
                dtype, memory_gbps=memory.get(dtype),
                spec_memory_gbps=spec.memory_gbps if spec else None,
                spec_tensor_tflops=spec.tflops.get(dtype) if spec else None,
                spec_vector_tflops=spec.vector_tflops.get(dtype) if spec else None,
            )
        return by_dtype[dtype]

    rows = _ok(df, "throughput", ROOFS)
    rows = rows.assign(_steady=steady(rows))
    # Tensor-core points first, then the rest, as the legend has always listed them.
    for row in sorted(rows.to_dict("records"), key=lambda r: r["roof"] != TENSOR):
        flops, nbytes, value = row.get("work_flops"), row.get("work_bytes"), row["value"]
        if not flops or not nbytes or not math.isfinite(value) or value <= 0:
            continue  # copy and fill do no arithmetic: they are the memory roof, not points on it
        # Arithmetic off the tensor cores runs on the vector units, whichever roof bounds it here.
        unit = TENSOR if row["roof"] == TENSOR else VECTOR
        ro = roofs(str(row["dtype"]))
        label = registry.point_label(row)
        ro.points.append(Point(row["suite"], label, row["case"], flops / nbytes, float(value), unit, row["_steady"]))
        if not row["_steady"]:
            continue  # drawn, hollow; too noisy to set a roof
        if row["roof"] == TENSOR:
            ro.tensor_tflops = max(ro.tensor_tflops or 0.0, float(value))
            ro.tensor_suite = row["suite"] if ro.tensor_tflops == float(value) else ro.tensor_suite
        elif row["roof"] == VECTOR:
            ro.vector_tflops = max(ro.vector_tflops or 0.0, float(value))
    for ro in by_dtype.values():  # a point's own rate above the best op's (operands in cache) raises the roof to it
        fastest = max((p.tflops * 1e3 / p.intensity for p in ro.points if p.steady), default=0.0)
        if ro.memory_gbps is not None:  # none of this dtype measured: a GEMM's byte rate is no memory roof
            ro.memory_gbps = max(ro.memory_gbps, fastest)
    return device, [by_dtype[d] for d in sorted(by_dtype)]


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
    ax.set_title(ro.dtype if measured else f"{ro.dtype} (no measured roof: no figure spread under {ROOF_SPREAD:.0%})")
    ax.grid(True, which="both", alpha=0.25)
    ax.legend(fontsize=7, loc="best")


def _roof_label(kind: str, bw: float | None, peak: float | None, unit: str) -> str:
    parts = []
    if bw:
        parts.append(f"{fmt_value(bw)} GB/s")
    if peak:
        parts.append(f"{fmt_value(peak)} TF/s {unit}")
    return f"{kind}: " + ", ".join(parts) if parts else kind


__all__ = ["Point", "Roofs", "ROOFS", "ROOF_SPREAD", "analyze", "memory_roofs", "on_roofline", "steady", "violations",
           "plot"]
