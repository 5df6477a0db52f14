"""One module per subcommand of ``gpubench``; each has ``add(p)`` (its arguments) and ``main(args, argv)``
(what it does, returning the exit code). :mod:`gpubench.cli` holds the table of them.

The command line imports a command's module to parse its arguments: what ``add`` needs is imported at the top, what
the work needs (pandas, torch, matplotlib, and the library modules that import them) where the work starts, so that
``--help`` and a usage error answer at once (tests/test_cli_startup.py holds every command to it).

Exit codes: 0 success; 1 a case failed (error or invalid) or compare found a regression; 2 bad input (one line
on stderr saying what to do); 130 interrupted (what was measured is kept).

The top floor: they may import anything; nothing imports them but the command table (gpubench.cli).
"""

from __future__ import annotations

import argparse
import socket

from gpubench.backends import NAMES
from gpubench.errors import EXIT_FAILED, EXIT_INTERRUPTED, EXIT_OK, EXIT_USAGE


def add_device_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--backend", default="auto", choices=NAMES, metavar="|".join(NAMES),
                   help="device backend; auto picks cuda/hip when torch sees a GPU, else cpu (default: auto)")
    p.add_argument("--device", type=int, default=0, metavar="N", help="device index (default: 0)")


def default_cluster() -> str:
    # Host names can hold characters directory names should not; keep the safe part.
    host = socket.gethostname().split(".")[0] or "local"
    return "".join(ch if ch.isalnum() or ch in "._-" else "-" for ch in host)[:64] or "local"

__all__ = ["EXIT_OK", "EXIT_FAILED", "EXIT_USAGE", "EXIT_INTERRUPTED", "add_device_args", "default_cluster"]
