"""The measured roofline of a run: ``gpubench roofline RUN_DIR [--out FILE.png]``.

Per dtype, a log-log chart of TFLOP/s over arithmetic intensity (FLOP per byte, each case's declared
``work_flops / work_bytes``: BabelStream's bytes for ``elementwise``, A+B+C once for ``gemm``). Rows are chosen
by the roof their suite says they are held against (the ``roof`` column, or ``Suite.roof`` for older rows), never
by suite:

- measured roofs, solid: the memory roof is the best bandwidth the run sustained, whichever row gave it (any row
  held against the memory or vector roof, any dtype: bytes are bytes; a point whose own bytes moved faster, such
  as a GEMM whose operands stayed in cache, raises it to that rate, so that no point sits above the roof drawn);
  the compute roofs are the best TF/s of the dtype's rows held against the tensor roof (tensor cores) and of
  those held against the vector roof (the ``fma`` sweep: vector units);
- spec roofs, dashed: the vendor's memory bandwidth and dense peaks (gpubench/peaks.py), where known;
- every measured point with flops at its analytic intensity.

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


@dataclass
class Point:
    suite: str
    label: str  # its suite's name for its series (Suite.point_label): "gemm torch", "elementwise fma", ...
    case: str
    intensity: float  # FLOP/byte
    tflops: float
    unit: str  # "tensor" (held against the tensor roof) or "vector" (any other arithmetic): which spec peak bounds it


@dataclass
class Roofs:
    dtype: str
    memory_gbps: float | None = None  # measured: best bandwidth sustained (any elementwise op, or a point's own)
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


def analyze(df: pd.DataFrame) -> tuple[str | None, list[Roofs]]:
    """(device name, roofs and points per dtype) of one run's rows."""
    device = str(df["device"].dropna().iloc[0]) if "device" in df.columns and df["device"].notna().any() else None
    spec = peaks.lookup(device)
    moved = _ok(df, "bandwidth", (MEMORY, VECTOR))
    moved = moved[pd.to_numeric(moved["value"], errors="coerce") > 0]
    memory = float(moved["value"].max()) if len(moved) else None

    by_dtype: dict[str, Roofs] = {}

    def roofs(dtype: str) -> Roofs:
        if dtype not in by_dtype:
            by_dtype[dtype] = Roofs(
                dtype, memory_gbps=memory,
                spec_memory_gbps=spec.memory_gbps if spec else None,
                spec_tensor_tflops=spec.tflops.get(dtype) if spec else None,
                spec_vector_tflops=spec.vector_tflops.get(dtype) if spec else None,
            )
        return by_dtype[dtype]

    rows = _ok(df, "throughput", ROOFS)
    # Tensor-core points first, then the rest, as the legend has always listed them.
    for row in sorted(rows.to_dict("records"), key=lambda r: r["roof"] != TENSOR):
        flops, nbytes, value = row.get("work_flops"), row.get("work_bytes"), row["value"]
        if not flops or not nbytes or not math.isfinite(value) or value <= 0:
            continue  # copy and fill do no arithmetic: they are the memory roof, not points on it
        # Arithmetic off the tensor cores runs on the vector units, whichever roof bounds it here.
        unit = TENSOR if row["roof"] == TENSOR else VECTOR
        ro = roofs(str(row["dtype"]))
        label = registry.point_label(row)
        ro.points.append(Point(row["suite"], label, row["case"], flops / nbytes, float(value), unit))
        if row["roof"] == TENSOR:
            ro.tensor_tflops = max(ro.tensor_tflops or 0.0, float(value))
            ro.tensor_suite = row["suite"] if ro.tensor_tflops == float(value) else ro.tensor_suite
        elif row["roof"] == VECTOR:
            ro.vector_tflops = max(ro.vector_tflops or 0.0, float(value))
    for ro in by_dtype.values():  # a point's own rate above the best op's (operands in cache) raises the roof to it
        fastest = max((p.tflops * 1e3 / p.intensity for p in ro.points), default=0.0)
        if ro.memory_gbps is not None or fastest:
            ro.memory_gbps = max(ro.memory_gbps or 0.0, fastest)
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
        xs = [p.intensity for p in ro.points]
        lo, hi = min(xs + [0.05]) / 2, max(xs + [2000.0]) * 2
        grid = [lo * (hi / lo) ** (i / 200) for i in range(201)]

        def roof_line(bw, peak, style, label, color):
            if bw is None and peak is None:
                return
            ys = [min(bw * x / 1e3 if bw else math.inf, peak or math.inf) for x in grid]
            ax.plot(grid, ys, style, color=color, label=label, linewidth=1.6)

        measured = _roof_label("measured", ro.memory_gbps, ro.tensor_tflops, ro.tensor_suite or TENSOR)
        roof_line(ro.memory_gbps, ro.tensor_tflops, "-", measured, "tab:red")
        if ro.vector_tflops:
            roof_line(ro.memory_gbps, ro.vector_tflops, "-", _roof_label("measured", None, ro.vector_tflops, "fma"), "tab:orange")
        roof_line(ro.spec_memory_gbps, ro.spec_tensor_tflops, "--", _roof_label("spec", ro.spec_memory_gbps, ro.spec_tensor_tflops, "tensor"), "tab:red")
        if ro.spec_vector_tflops:
            roof_line(ro.spec_memory_gbps, ro.spec_vector_tflops, "--", _roof_label("spec", None, ro.spec_vector_tflops, "vector"), "tab:orange")
        for i, label in enumerate(sorted({p.label for p in ro.points})):
            pts = [p for p in ro.points if p.label == label]
            ax.scatter([p.intensity for p in pts], [p.tflops for p in pts], s=16, label=label, zorder=3,
                       color=_POINT_COLORS[i % len(_POINT_COLORS)], marker=_MARKERS[i % len(_MARKERS)])
        bad_pts = [p for p in ro.points if (id(ro), id(p)) in flagged]
        if bad_pts:
            ax.scatter([p.intensity for p in bad_pts], [p.tflops for p in bad_pts], s=80, facecolors="none",
                       edgecolors="black", linewidths=1.5, label="above spec roof: measurement error", zorder=4)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("arithmetic intensity (FLOP/byte)")
        ax.set_ylabel("TFLOP/s")
        ax.set_title(ro.dtype)
        ax.grid(True, which="both", alpha=0.25)
        ax.legend(fontsize=7, loc="lower right")
    for ax in list(axes.flat)[len(all_roofs):]:
        ax.axis("off")
    fig.suptitle(f"gpubench roofline — {device or 'unknown device'}")
    fig.tight_layout()
    thin_ticks(fig)
    fig.savefig(path, dpi=130)
    plt.close(fig)


def _roof_label(kind: str, bw: float | None, peak: float | None, unit: str) -> str:
    parts = []
    if bw:
        parts.append(f"{fmt_value(bw)} GB/s")
    if peak:
        parts.append(f"{fmt_value(peak)} TF/s {unit}")
    return f"{kind}: " + ", ".join(parts) if parts else kind


__all__ = ["Point", "Roofs", "ROOFS", "analyze", "on_roofline", "violations", "plot"]
