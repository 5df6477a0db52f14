"""``gpubench calibrate RUN... --out FILE.toml``: thresholds for compare from the spread of several runs of one
machine. Exit 0, or 2 (a UsageError) for input it cannot use."""

from __future__ import annotations

import argparse

from gpubench.compare.defaults import DEFAULT_FLOOR, DEFAULT_MAX_THRESHOLD, DEFAULT_SAFETY


def add(p: argparse.ArgumentParser) -> None:
    p.add_argument("paths", nargs="+", metavar="RUN_DIR_OR_DIRS",
                   help="2 or more run directories of the same build on one machine, or directories of runs")
    p.add_argument("--out", required=True, metavar="FILE.toml", help="thresholds file to write")
    p.add_argument("--safety", type=float, default=DEFAULT_SAFETY, metavar="X",
                   help=f"multiply the observed spread by X (default: {DEFAULT_SAFETY:g})")
    p.add_argument("--floor", type=float, default=DEFAULT_FLOOR, metavar="FRACTION",
                   help=f"no threshold below this (default: {DEFAULT_FLOOR:g})")
    p.add_argument("--max-threshold", type=float, default=DEFAULT_MAX_THRESHOLD, metavar="FRACTION",
                   help=f"a case whose threshold would exceed this is not gated (default: {DEFAULT_MAX_THRESHOLD:g})")
    p.add_argument("--no-host-pace", action="store_true",
                   help="take the spread of the figures the host times as measured, not at the runs' common host "
                        "pace (compare judges them at the pace by default: docs/compare.md)")


def main(args: argparse.Namespace, argv: list[str]) -> int:
    from rich.table import Table  # these import pandas: not for --help

    from gpubench.compare import calibrate
    from gpubench.compare.outputs.common import pct
    from gpubench.console import out_console

    cal = calibrate.calibrate(calibrate.expand(args.paths), safety=args.safety, floor=args.floor,
                              max_threshold=args.max_threshold, host_pace=not args.no_host_pace)
    out = calibrate.write(cal, args.out)
    table = Table(title=f"thresholds from {len(cal.runs)} runs (each case's spread × {cal.safety:g}, at least "
                        f"{cal.floor:g}; above {cal.max_threshold:g} not gated)", title_justify="left")
    for col in ("suite", "case", "metric", "threshold", "run-to-run spread", "runs"):
        table.add_column(col, overflow="fold")
    for d in cal.detail.to_dict("records"):
        th = pct(d["threshold"]) if d["gated"] else "not gated"
        table.add_row(str(d["suite"]), str(d["case"]), str(d["metric"]), th, pct(d["spread"]), str(d["runs"]))
    console = out_console()
    console.print(table)
    if cal.paced:
        console.print(f"host pace: the spread of {cal.paced} host-timed figure(s) taken at the runs' common host pace; "
                      "--no-host-pace takes it as measured", markup=False, highlight=False)
    console.print(f"thresholds: {out}", markup=False, highlight=False)
    return 0
