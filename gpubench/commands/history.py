"""The nightly history on the command line: ``gpubench report DIR`` (the page) and ``gpubench export DIR --format
history-csv|history-json`` (its data: the formats of gpubench.report.history.outputs) share these options and their
checks. Not a subcommand of its own.

The library (gpubench.report.history, pandas and pyarrow with it) is imported where the work starts, so that
``--help`` stays quick.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gpubench.errors import UsageError
from gpubench.registry import Formats

if TYPE_CHECKING:
    from rich.console import Console

# The history's formats (the page, and the files export writes), read from their sources: importing the report
# loads pandas, and --help lists them.
OUTPUTS = Formats("gpubench.report.history.outputs")
_OPTIONS = ("since", "last", "filter", "baseline_window")


def add_options(p: argparse.ArgumentParser) -> None:
    """The options that choose what a directory's history holds."""
    g = p.add_argument_group("a directory of runs (its nightly history)")
    g.add_argument("--since", metavar="DATE", help="nights from DATE on (2026-11-20, or an ISO time; UTC)")
    g.add_argument("--last", type=int, metavar="N", help="the latest N nights only")
    g.add_argument("--filter", metavar="REGEX", help="figures whose 'suite case metric' matches REGEX")
    g.add_argument("--baseline-window", type=int, metavar="N",
                   help="the gate's window of nights, for the band drawn (default: compare's default window)")


def _given(args: argparse.Namespace) -> list[str]:
    return [f"--{k.replace('_', '-')}" for k in _OPTIONS if getattr(args, k, None) is not None]


def _ask(args: argparse.Namespace) -> Any:
    from gpubench.report import history

    window = {} if args.baseline_window is None else {"window": args.baseline_window}
    return history.Ask(args.since, args.last, args.filter, **window)


def is_history(paths: list[str], args: argparse.Namespace) -> bool:
    """Whether ``gpubench report PATHS`` asks for a history (one directory of runs); history options given with
    run directories are an error."""
    from gpubench.report.history import is_directory_of_runs

    if len(paths) == 1 and is_directory_of_runs(Path(paths[0])):
        return True
    if _given(args):
        raise UsageError(f"{' '.join(_given(args))} choose(s) the nights of a directory of runs: give one "
                         "directory such as results/<cluster>, not run directories")
    return False


def report(directory: str, out: str, args: argparse.Namespace) -> int:
    """``gpubench report DIR``: the page, ``out/index.html``."""
    from gpubench.console import out_console
    from gpubench.report import history

    ask = _ask(args)
    if Path(out).is_file():  # before a year of nights is read
        raise UsageError(f"--out {out} is a file: give a folder")
    try:
        page, doc = history.write(directory, out, ask)
    except OSError as e:
        raise UsageError(f"--out {out}: cannot write the page there ({e.strerror or e}); free some space or "
                         "choose another folder") from e
    nights = sum(n.get("nights", 1) for n in doc["nights"])
    opened = sum(f["open"] for f in doc["figures"])
    console = out_console()
    console.print(f"history: {nights} night(s), {len(doc['figures'])} figure(s), {opened} WORSE on their latest "
                  f"night{'; aggregated' if doc['aggregated'] else ''}", markup=False, highlight=False)
    _notes(console, doc)
    console.print(f"report: {page}", markup=False, highlight=False)
    return 0


def _notes(console: Console, doc: dict[str, Any]) -> None:
    """The runs the history left out, as the page says them: a night missing from the count is named, with why."""
    for note in doc["notes"]:
        console.print(note, markup=False, highlight=False)


def refuse_options(args: argparse.Namespace) -> None:
    """History options given to an export of another format."""
    if _given(args):
        raise UsageError(f"{' '.join(_given(args))} choose(s) the nights of a history: give --format "
                         f"{' or '.join(OUTPUTS.others())} and a directory of runs")


def export(directory: str, fmt: str, out: str, args: argparse.Namespace) -> int:
    """``gpubench export DIR --format history-csv|history-json``: the series the page draws, as data."""
    from gpubench.results import destination
    from gpubench.console import out_console
    from gpubench.report import history

    if not history.is_directory_of_runs(Path(directory)):
        raise UsageError(f"{directory} is not a directory of runs: --format {fmt} takes one such as "
                         "results/<cluster> (the folder holding the run directories)")
    doc = history.build(directory, _ask(args))
    destination.write_text(out, OUTPUTS.get(fmt).history(doc))
    nights = sum(n.get("nights", 1) for n in doc["nights"])
    console = out_console()
    console.print(f"{len(doc['figures'])} figure(s) over {nights} night(s) written to {out} as {fmt}"
                  f"{' (aggregated)' if doc['aggregated'] else ''}", markup=False, highlight=False)
    _notes(console, doc)
    return 0


__all__ = ["OUTPUTS", "add_options", "is_history", "report", "refuse_options", "export"]
