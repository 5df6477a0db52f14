"""``gpubench``: the command line. Each subcommand is one module of :mod:`gpubench.commands` (``add`` builds its
arguments, ``main`` runs it); the table below is the whole dispatch.

Exit codes: 0 success; 1 a case failed (error or invalid) or compare found a regression; 2 bad input (one line
on stderr saying what to do); 130 interrupted (what was measured is kept).
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from gpubench import __version__
from gpubench.commands import EXIT_INTERRUPTED, EXIT_USAGE
from gpubench.errors import UsageError
from gpubench.ranks.env import quiet_torch_logs

# Subcommand → the module that adds its arguments and runs it, in the order --help lists them.
COMMANDS = {
    "list": "gpubench.commands.list",
    "info": "gpubench.commands.info",
    "run": "gpubench.commands.run",
    "compare": "gpubench.commands.compare",
    "accept": "gpubench.commands.accept",
    "check": "gpubench.commands.check",
    "expect": "gpubench.commands.expect",
    "calibrate": "gpubench.commands.calibrate",
    "export": "gpubench.commands.export",
    "import": "gpubench.commands.import_",
    "report": "gpubench.commands.report",
    "roofline": "gpubench.commands.roofline",
}


class _Parser(argparse.ArgumentParser):
    """argparse prints usage plus the error; users asked for one line that says what to do."""

    def error(self, message: str):  # type: ignore[override]
        raise UsageError(f"{message} (see {self.prog} --help)")


def build_parser(suite_options: bool = True) -> argparse.ArgumentParser:
    """The whole parser; ``suite_options``: with every registered suite's options under ``run`` (this imports
    the suites, which only ``run`` needs)."""
    parser = _Parser(prog="gpubench", description="Portable GPU benchmark suite.")
    parser.add_argument("--version", action="version", version=f"gpubench {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser, metavar="COMMAND")
    for module in dict.fromkeys(COMMANDS.values()):
        add = importlib.import_module(module).add
        add(sub, suite_options) if module == COMMANDS["run"] else add(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    quiet_torch_logs()  # a rank's C++ warnings: before the suites import torch
    try:
        args = build_parser(suite_options="run" in argv).parse_args(argv)
        return importlib.import_module(COMMANDS[args.command]).main(args, ["gpubench", *argv])
    except UsageError as e:
        print(f"gpubench: error: {e}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("gpubench: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED


if __name__ == "__main__":
    raise SystemExit(main())
