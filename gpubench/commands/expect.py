"""``gpubench expect RUNS... --out FILE.toml``: an envelope for ``gpubench check`` from a healthy fleet's check runs
(what each figure typically reads on this GPU model, and where to warn and fail: gpubench/check/envelope.py).
Exit 0, or 2 for input it cannot use."""

from __future__ import annotations

import argparse

from gpubench import __version__
from gpubench.errors import UsageError


def add(p: argparse.ArgumentParser) -> None:
    p.add_argument("paths", nargs="+", metavar="CHECK_RUN_OR_DIR",
                   help="check run directories (each holds check.json), or folders of them")
    p.add_argument("--out", required=True, metavar="FILE.toml", help="envelope file to write")
    p.add_argument("--match", default=None, metavar="REGEX",
                   help="device names the envelope is for (default: exactly the runs' GPU model)")
    p.add_argument("--min-nodes", type=int, default=2, metavar="N",
                   help="leave out a figure the host sets (a host-timed launch, copies to host memory) that fewer "
                        "than N nodes measured: its level is that host's (default: 2)")


def main(args: argparse.Namespace, argv: list[str]) -> int:
    # check runs' tables (pandas) and the console (rich): loaded when the command runs, not for --help
    from gpubench.check import envelope, node_history as history
    from gpubench.console import fmt_value, out_console

    if args.min_nodes < 1:
        raise UsageError(f"--min-nodes {args.min_nodes}: give 1 or more")
    found = history.verdict_files(args.paths)
    if not found:
        raise UsageError(f"no check run under {', '.join(args.paths)}: give the run directories gpubench check wrote")
    simulated = [str(p) for p, doc in found if doc.get("simulated")]
    if simulated and len(simulated) < len(found):
        raise UsageError(f"{simulated[0]} is a simulated check (the fake backend's made-up GPUs): leave it out of an "
                         "envelope of real ones")
    figures = history.collect(found)
    if not figures.values:
        raise UsageError("no figure of those runs was measured on an idle GPU: nothing to make an envelope from")
    hosts, dates = sorted(figures.hosts), sorted(d for d in figures.dates if d)
    model = next(iter(figures.models)) if len(figures.models) == 1 else None
    source = (f"{len(found)} check runs on {len(hosts)} node(s) ({', '.join(hosts)}), {model}, {', '.join(dates)}, "
              f"gpubench {__version__}")
    env = history.make(figures, source, args.match,
                       meta={"made_by": " ".join(argv), "made_on": envelope.today(), "gpubench_version": __version__,
                             "runs": len(found)}, min_nodes=args.min_nodes)
    out = envelope.write(env, args.out)
    console = out_console()
    for k, e in env.entries.items():
        console.print(f"{k}: typical {fmt_value(e.typical)} {e.unit}, warn at {fmt_value(e.warn_at)}, fail at "
                      f"{fmt_value(e.fail_at)} ({e.figures} figures, spread {e.spread:.2%})"
                      + (f", {e.gpus} GPUs at once" if e.gpus else "")
                      + (f"; at host pace {e.pace:g} µs (figure ∝ pace^{e.pace_slope:g}, from paces {e.pace_lo:g}-"
                         f"{e.pace_hi:g} µs)" if e.line() else ""), markup=False, highlight=False)
    if env.meta.get("left_out"):
        console.print(f"left out: {env.meta['left_out']}", markup=False, highlight=False)
    if env.meta.get("host_class"):
        console.print(f"figures the host sets: measured on hosts with {' or '.join(env.meta['host_class'])}",
                      markup=False, highlight=False)
    console.print(f"envelope: {out}", markup=False, highlight=False)
    return 0
