"""``gpubench``: the command line. Each subcommand is one module of :mod:`gpubench.commands` (``add`` builds its
arguments, ``main`` runs it); the table below is the whole dispatch.

Exit codes: 0 success; 1 a case failed (error or invalid) or compare found a regression; 2 bad input (one line
on stderr saying what to do); 130 interrupted (what was measured is kept). :mod:`.reference` writes docs/cli.md
from the parsers. It may import the commands and what a command line needs before them; nothing imports it.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from gpubench import __version__
from gpubench.run import leave
from gpubench.commands import EXIT_INTERRUPTED, EXIT_USAGE
from gpubench.errors import UsageError, say_error
from gpubench.ranks.env import quiet_torch_logs

# Subcommand → the module that adds its arguments and runs it, and the line --help shows for it, in --help's order.
# Only the module of the command given is imported, and it imports what its work needs (pandas, torch) where that
# work starts: --help, a usage error and each command's --help answer at once (issue 48).
COMMANDS = {
    "list": ("gpubench.commands.list", "suites, their backends and metrics"),
    "info": ("gpubench.commands.info", "system fingerprint and device state"),
    "run": ("gpubench.commands.run", "run suites and write a run directory"),
    "compare": ("gpubench.commands.compare",
                "compare a run with a baseline: BETTER/WORSE/SAME per figure; exit 1 if anything is WORSE"),
    "accept": ("gpubench.commands.accept",
               "accept the WORSE figures of a judged run as the new normal, with a reason"),
    "check": ("gpubench.commands.check",
              "a node's health verdict: every GPU, link and copy path, in about a minute"),
    "expect": ("gpubench.commands.expect", "an envelope for gpubench check from healthy nodes' check runs"),
    "calibrate": ("gpubench.commands.calibrate",
                  "thresholds for compare from the spread of several runs of one machine"),
    "export": ("gpubench.commands.export",
               "a run's figures in another tool's format (pytest-benchmark JSON; the kernel sweep's winners as a "
               "TunableOp-style CSV or Triton configs); a directory's nightly history as CSV or JSON"),
    "import": ("gpubench.commands.import_",
               "import nccl-tests / rccl-tests logs (text or -J JSON) as a comm table"),
    "report": ("gpubench.commands.report",
               "an HTML page and PNG charts of one or more runs (overlaid), with compare tables between them"),
    "roofline": ("gpubench.commands.roofline", "measured roofline chart of a run (elementwise and gemm rows)"),
}


class _Parser(argparse.ArgumentParser):
    """argparse prints usage plus the error; users asked for one line that says what to do."""

    def error(self, message: str):  # type: ignore[override]
        raise UsageError(f"{message} (see {self.prog} --help)")


def build_parser(command: str | None = None, suites: Iterable[Any] = ()) -> argparse.ArgumentParser:
    """The parser, with the arguments of ``command`` (the others are names and help lines: enough to choose one);
    every command's with ``command`` None (tests, docs). ``suites``: the suites whose options ``run`` takes (their
    classes, or their declarations read without importing them: gpubench.declared)."""
    parser = _Parser(prog="gpubench", description="Portable GPU benchmark suite.")
    parser.add_argument("--version", action="version", version=f"gpubench {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser, metavar="COMMAND")
    for name, (module, summary) in COMMANDS.items():
        p = sub.add_parser(name, help=summary)
        if command is None or name == command:
            add = importlib.import_module(module).add
            add(p, suites) if name == "run" else add(p)
    return parser


def parse(argv: list[str]) -> argparse.Namespace:
    """The command line, parsed; bad input is a UsageError before anything heavy is imported."""
    # The command is the first word that is not an option (gpubench takes no option with a value before it).
    command = next((a for a in argv if not a.startswith("-")), None)
    if command not in COMMANDS:
        return build_parser("").parse_args(argv)  # --help, --version, or a word that is no command: argparse says
    if command != "run":
        return build_parser(command).parse_args(argv)
    from gpubench import declared

    # First against the suites' declarations, read without importing a suite: --help and a mistyped name or option
    # answer at once. Then against the suites themselves, which the run imports anyway (their options' types).
    known = declared.suites()
    args = build_parser(command, known).parse_args(argv)
    from gpubench.registry import all_suites, check_names

    check_names(args.suite, [d.name for d in known])
    return build_parser(command, all_suites().values()).parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    quiet_torch_logs()  # a rank's C++ warnings: before the suites import torch
    made = None
    try:
        args = parse(argv)
        made = _unmade(getattr(args, "out", None))
        return importlib.import_module(COMMANDS[args.command][0]).main(args, ["gpubench", *argv])
    except UsageError as e:
        _remove_empty(made)  # bad input leaves nothing behind, not even the --out folder it was checked with
        say_error(str(e))
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("gpubench: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED


def entry() -> None:
    """The ``gpubench`` command and ``python -m gpubench``: :func:`main`, then, with torch loaded, out of the
    process at once (gpubench.run.leave: the interpreter's teardown would take seconds); its status is main's."""
    code = main()
    if "torch" not in sys.modules:
        raise SystemExit(code)
    leave.at_once(code)


def _unmade(out: object) -> Path | None:
    """The topmost folder of an ``--out`` path that does not exist yet (the command may make it), else None."""
    if not isinstance(out, str) or not out:
        return None
    path, top = Path(out).absolute(), None
    while not path.exists() and path != path.parent:
        path, top = path.parent, path
    return top


def _remove_empty(top: Path | None) -> None:
    """``top`` and the folders in it, deepest first, where they hold nothing (a folder another process wrote into
    meanwhile stays: rmdir removes only empty ones)."""
    if top is None or not top.is_dir() or top.is_symlink():
        return
    try:
        folders = sorted((p for p in top.rglob("*") if p.is_dir() and not p.is_symlink()),
                         key=lambda p: len(p.parts), reverse=True)
    except OSError:  # another process refused the same input (a rank of the same step) and removed it meanwhile
        folders = []
    for folder in folders:
        with contextlib.suppress(OSError):
            folder.rmdir()
    with contextlib.suppress(OSError):
        top.rmdir()


if __name__ == "__main__":
    entry()
