"""``gpubench list``: the suites (built-in and registered), their versions, backends and metrics."""

from __future__ import annotations

import argparse

from rich.markup import escape
from rich.table import Table

from gpubench.commands import EXIT_OK
from gpubench.console import out_console, unit_text
from gpubench.registry import all_suites


def add(sub: argparse._SubParsersAction) -> None:
    sub.add_parser("list", help="suites, their backends and metrics")


def main(args: argparse.Namespace, argv: list[str]) -> int:
    table = Table(title="gpubench suites")
    table.add_column("suite", no_wrap=True)  # a name is typed back: never folded
    for col in ("version", "backends", "metrics", "description"):
        table.add_column(col, overflow="fold")
    for name, cls in all_suites().items():
        metrics = ", ".join(f"{m.name} [{unit_text(m.unit)}, {'↑' if m.better == 'higher' else '↓'}]"
                            for m in cls.metrics)
        table.add_row(name, str(cls.version), ",".join(sorted(cls.backends)), escape(metrics), escape(cls.description))
    out_console().print(table)
    return EXIT_OK
