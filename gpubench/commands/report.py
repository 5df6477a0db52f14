"""``gpubench report``: its arguments and what it does. Exit 0 when the page is written; 2 (a UsageError,
one line on stderr) for input it cannot use. Given one directory of runs (results/<cluster>) instead of run
directories, it draws that directory's nightly history (gpubench.report.history)."""

from __future__ import annotations

import argparse
from pathlib import Path

from gpubench import outputs
from gpubench.console import out_console
from gpubench.errors import UsageError
from gpubench.report import history, write

DEFAULT_OUT = "gpubench-report"


def add(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("report", help="an HTML page and PNG charts of one or more runs (overlaid), with compare "
                                      "tables between them")
    p.add_argument("paths", nargs="+", metavar="RUN_DIR",
                   help="run directories (each holding run.json); the first is the baseline of the compare tables. "
                        "Or one directory of runs (results/<cluster>, as ci/nightly.sh keeps them): the page of "
                        "its nightly history")
    p.add_argument("--out", default=DEFAULT_OUT, metavar="DIR",
                   help=f"folder for index.html and the PNGs (default: ./{DEFAULT_OUT}; created if missing)")
    add_history_options(p)


def add_history_options(p: argparse.ArgumentParser) -> None:
    """The options that choose what a directory's history holds (report DIR, export DIR --format history-*)."""
    g = p.add_argument_group("a directory of runs (its nightly history)")
    g.add_argument("--since", metavar="DATE", help="nights from DATE on (2026-11-20, or an ISO time; UTC)")
    g.add_argument("--last", type=int, metavar="N", help="the latest N nights only")
    g.add_argument("--filter", metavar="REGEX", help="figures whose 'suite case metric' matches REGEX")
    g.add_argument("--baseline-window", type=int, default=history.Ask.window, metavar="N",
                   help=f"the gate's window, for the band drawn (default: {history.Ask.window}, as compare's)")


def history_ask(args: argparse.Namespace, paths: list[str]) -> history.Ask | None:
    """What the history is asked for when ``paths`` is one directory of runs; None for run directories (and an
    error when history options were given with them)."""
    if len(paths) == 1 and history.is_directory_of_runs(Path(paths[0])):
        return history.Ask(args.since, args.last, args.filter, args.baseline_window)
    given = [f"--{k.replace('_', '-')}" for k in ("since", "last", "filter") if getattr(args, k) is not None]
    if args.baseline_window != history.Ask.window:
        given.append("--baseline-window")
    if given:
        raise UsageError(f"{' '.join(given)} choose(s) the nights of a directory of runs: give one directory such "
                         "as results/<cluster>, not run directories")
    return None


def main(args: argparse.Namespace, argv: list[str]) -> int:
    ask = history_ask(args, args.paths)
    if ask is not None:
        return _history(args.paths[0], args.out, ask)
    out = outputs.folder(args.out)  # before anything is loaded or drawn
    try:
        page, charts = write(args.paths, out)
    except OSError as e:  # a full disk while the charts were written
        raise UsageError(f"--out {out}: cannot write the report there ({e.strerror or e}); free some space or "
                         "choose another folder") from e
    console = out_console()
    for c in charts:
        console.print(f"{c.suite}: {c.file or 'no chart (' + c.note + ')'}", markup=False, highlight=False)
    console.print(f"report: {page}", markup=False, highlight=False)
    return 0


def _history(directory: str, out: str, ask: history.Ask) -> int:
    if Path(out).is_file():  # before a year of nights is read
        raise UsageError(f"--out {out} is a file: give a folder")
    try:
        page, doc = history.write(directory, out, ask)
    except OSError as e:
        raise UsageError(f"--out {out}: cannot write the page there ({e.strerror or e}); free some space or "
                         "choose another folder") from e
    nights = sum(n.get("nights", 1) for n in doc["nights"])
    opened = sum(f["open"] for f in doc["figures"])
    out_console().print(f"history: {nights} night(s), {len(doc['figures'])} figure(s), {opened} WORSE on their "
                        f"latest night{'; aggregated' if doc['aggregated'] else ''}", markup=False, highlight=False)
    out_console().print(f"report: {page}", markup=False, highlight=False)
    return 0


__all__ = ["add", "main", "add_history_options", "history_ask"]
