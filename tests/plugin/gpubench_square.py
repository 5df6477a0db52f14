"""A third-party suite in one file, as a user would write it outside gpubench: it squares a vector, declares
one option (``--square-scale``), one derived figure (the largest case's time per element) and one chart.
tests/test_plugin_suite.py registers it through the ``gpubench.suites`` entry-point group and drives it through
the CLI."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from gpubench.toolkit import BANDWIDTH, TIME, Case, Check, Derived, GridContext, Metric, Option, Suite, Workload

PER_ELEMENT = Metric("time_per_element", "ns", "lower")


class Square(Suite):
    name = "square"
    version = 1
    backends = frozenset({"cpu", "fake", "cuda", "hip"})
    metrics = (TIME, BANDWIDTH)  # measured per case; PER_ELEMENT is derived (summarize)
    description = "y = scale * x * x over a vector (a plugin suite)"
    params = ("elements", "scale")
    options = (
        Option("square-scale", "multiply the squares by S (default 1)", int, default=1, metavar="S",
               check=lambda v, _: None if v >= 1 else f"--square-scale {v} must be at least 1"),
    )

    def cases(self, ctx: GridContext):
        for n in (1 << 10, 1 << 12):
            yield Case.of(elements=n, scale=ctx.options.square_scale)

    def prepare(self, case: Case, backend: Any, ctx: GridContext | None = None) -> Workload:
        n, scale = case["elements"], ctx.options.square_scale
        assert scale == case["scale"]  # the same options reach the grid and each case

        def make_inputs():
            return {"x": torch.rand(n) + 0.5, "y": torch.full((n,), float("nan"))}

        def run(b):
            torch.mul(b["x"], b["x"], out=b["y"]).mul_(scale)
            return b["y"]

        def check(b, out) -> Check:
            err = float((out - scale * b["x"] * b["x"]).abs().max())
            return Check(err <= 1e-6, err, 1e-6)

        return Workload(run=run, make_inputs=make_inputs, bytes=8 * n, check=check)

    def summarize(self, rows: list[dict[str, Any]]) -> list[Derived]:
        """The largest case's time per element, its samples scaled from that case's own."""
        ok = [r for r in rows if r["metric"] == "time" and r["status"] == "ok"]
        if not ok:
            return []
        top = max(ok, key=lambda r: r["elements"])
        per = 1e3 / top["elements"]  # µs per call → ns per element
        return [Derived(Case.of(elements=top["elements"], scale=top["scale"]), PER_ELEMENT, top["value"] * per,
                        "time / elements of the largest case", tuple(s * per for s in top["samples"]))]

    @classmethod
    def charts(cls, runs, out):
        from gpubench.toolkit.charts import Chart, pyplot, save

        have = [r.ok(cls.name, "time") for r in runs if r.has(cls.name)]
        if not have:
            return []
        plt = pyplot()
        fig, ax = plt.subplots()
        for rows in have:
            ax.plot(rows["elements"].astype(int), rows["value"], marker="o")
        ax.set_xlabel("elements")
        ax.set_ylabel("time (us)")
        return [Chart(cls.name, "square: time vs elements", save(fig, Path(out), "square.png"))]
