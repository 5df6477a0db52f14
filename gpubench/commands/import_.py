"""``gpubench import nccl-tests|rccl-tests FILE... [--out DIR] [--cluster LABEL] [--collective NAME]``."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from gpubench.commands import EXIT_FAILED, EXIT_OK
from gpubench.errors import UsageError
from gpubench.nccltests.model import TOOLS
from gpubench.declared import way


def add(p: argparse.ArgumentParser) -> None:
    p.add_argument("tool", metavar="TOOL",
                   help=f"the tool that wrote the logs: {', '.join(TOOLS)}, or another a suite imports (the logs' "
                        "content wins where it says otherwise)")
    p.add_argument("files", nargs="+", metavar="FILE", help="logs: text output or nccl-tests -J JSON")
    p.add_argument("--out", default="results", metavar="DIR", help="results root (default: ./results)")
    p.add_argument("--cluster", default=None, metavar="LABEL",
                   help="cluster label (default: the host of rank 0 in the first log)")
    p.add_argument("--collective", default=None, metavar="NAME",
                   help="collective of runs whose log does not name it (nccl-tests before 2.16.7), e.g. all_reduce")
    p.add_argument("--ranks", default=None, type=int, metavar="N",
                   help="the world size of runs whose log does not list every rank (a fragment of a paste) and whose "
                        "table cannot settle it (busbw of sendrecv, broadcast and reduce does not depend on it)")


def main(args: argparse.Namespace, argv: Sequence[str]) -> int:
    from gpubench.console import fmt_value, out_console  # pandas: not for --help

    if args.ranks is not None and args.ranks < 1:
        raise UsageError(f"--ranks {args.ranks}: give the number of ranks the run had (1 or more)")
    _, importer = way("importers", args.tool)  # the suite whose table the logs become (Suite.importers)
    done = importer.read(list(args.files), tool=args.tool, out=args.out, cluster=args.cluster,
                         collective=args.collective, argv=list(argv), ranks=args.ranks)
    for w in done.warnings:
        print(f"gpubench: warning: {w}", file=sys.stderr)
    console = out_console()
    for run, wrong in zip(done.runs, done.invalid or [0] * len(done.runs)):
        if not run.rows:
            continue
        peak = max((r.busbw for r in run.rows), default=float("nan"))
        bad = f", {wrong} wrong (status invalid)" if wrong else ""
        console.print(
            f"{run.source}:{run.line}  {run.tool} {run.version or '(' + str(run.generation) + ')'}  "
            f"{run.collective}  {run.world_size} ranks on {run.nnodes} node(s)  {len(run.rows)} results{bad}  "
            f"peak busbw {fmt_value(peak)} GB/s", markup=False, highlight=False)
    for run in done.failed:  # what a user pastes such a log for: the reason, and NCCL's last words before it
        console.print(f"{run.source}:{run.line}  {run.tool}  failed: {run.failure}", markup=False, highlight=False)
        for w in run.warnings:
            console.print(f"  NCCL WARN {w}", markup=False, highlight=False)
    console.print(f"{done.rows} rows; run directory: {done.run_dir.path}", markup=False, highlight=False)
    if done.failed:
        console.print(f"{len(done.failed)} run(s) failed: imported as failed with the reason (run.json 'failure')",
                      markup=False, highlight=False)
        return EXIT_FAILED
    wrong = sum(done.invalid)
    if wrong:  # as gpubench run does when a case gave a wrong answer
        console.print(f"{wrong} result(s) the tool found wrong: imported as invalid (their message says why)",
                      markup=False, highlight=False)
        return EXIT_FAILED
    return EXIT_OK
