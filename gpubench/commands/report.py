"""``gpubench report``: its arguments and what it does. Exit 0 when the page is written; 2 (a UsageError,
one line on stderr) for input it cannot use. Given one directory of runs (results/<cluster>) instead of run
directories, it draws that directory's nightly history (gpubench.commands.history)."""

from __future__ import annotations

import argparse

from gpubench.commands import history
from gpubench.errors import UsageError

DEFAULT_OUT = "gpubench-report"


def add(p: argparse.ArgumentParser) -> None:
    p.add_argument("paths", nargs="+", metavar="RUN_DIR",
                   help="run directories (each holding run.json); the first is the baseline of the compare tables. "
                        "Or one directory of runs (results/<cluster>, as ci/nightly.sh keeps them): the page of "
                        "its nightly history")
    p.add_argument("--out", default=DEFAULT_OUT, metavar="DIR",
                   help=f"folder for index.html and the PNGs (default: ./{DEFAULT_OUT}; created if missing)")
    history.add_options(p)


def main(args: argparse.Namespace, argv: list[str]) -> int:
    if history.is_history(args.paths, args):
        return history.report(args.paths[0], args.out, args)

    from gpubench.results import destination as outputs  # these import pandas and matplotlib: not for --help
    from gpubench.console import out_console
    from gpubench.report import write

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


__all__ = ["add", "main"]
