"""``gpubench roofline RUN_DIR``: the measured roofline chart of a run's elementwise and gemm rows."""

from __future__ import annotations

import argparse
from pathlib import Path

from gpubench.commands import EXIT_FAILED, EXIT_OK
from gpubench.errors import UsageError


def add(p: argparse.ArgumentParser) -> None:
    p.add_argument("run_dir", metavar="RUN_DIR", help="a run directory written by gpubench run")
    p.add_argument("--out", default=None, metavar="FILE.png", help="chart file (default: RUN_DIR/roofline.png)")


def main(args: argparse.Namespace, argv: list[str]) -> int:
    from rich.table import Table  # these import pandas and matplotlib: not for --help

    from gpubench.results import destination as outputs
    from gpubench import results
    from gpubench.report import roofline
    from gpubench.console import out_console

    df = results.load(args.run_dir)
    device, all_roofs = roofline.analyze(df)
    if not any(ro.points for ro in all_roofs):
        raise UsageError(f"{args.run_dir} has no elementwise or gemm throughput rows: run "
                         "`gpubench run --suite elementwise,gemm` and give its run directory")
    out = outputs.file(Path(args.out) if args.out else Path(args.run_dir) / "roofline.png")
    bad = roofline.violations(all_roofs)
    try:
        roofline.plot(device, all_roofs, out, bad)
    except OSError as e:
        raise UsageError(f"--out {out}: cannot write the chart ({e.strerror or e}); choose another file") from e

    def fmt(x, unit):
        return "—" if x is None else f"{x:.1f} {unit}"

    table = Table(title=f"roofline — {device or 'unknown device'}", title_justify="left")
    for col in ("dtype", "points", "memory (measured / spec)", "gemm (measured / spec tensor)",
                "fma (measured / spec vector)"):
        table.add_column(col)
    for ro in all_roofs:
        table.add_row(ro.dtype, str(len(ro.points)),
                      f"{fmt(ro.memory_gbps, 'GB/s')} / {fmt(ro.spec_memory_gbps, 'GB/s')}",
                      f"{fmt(ro.tensor_tflops, 'TF/s')} / {fmt(ro.spec_tensor_tflops, 'TF/s')}",
                      f"{fmt(ro.vector_tflops, 'TF/s')} / {fmt(ro.spec_vector_tflops, 'TF/s')}")
    console = out_console()
    console.print(table)
    for line in (s for ro in all_roofs for s in ro.notes()):
        console.print(line, markup=False, highlight=False)
    for ro, p, roof in bad:
        console.print(f"measurement error: {ro.dtype} {p.label} {p.case}: {p.tflops:.2f} TF/s at {p.intensity:.3g} "
                      f"FLOP/B is above the spec roof {roof:.2f} TF/s", markup=False, highlight=False)
    console.print(f"chart: {out}", markup=False, highlight=False)
    return EXIT_FAILED if bad else EXIT_OK
