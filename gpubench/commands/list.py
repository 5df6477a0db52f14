"""``gpubench list``: the suites (built-in and registered), their versions, backends and metrics."""

from __future__ import annotations

import argparse

from gpubench import declared
from gpubench.commands import EXIT_OK


def add(p: argparse.ArgumentParser) -> None:
    """No arguments."""


def main(args: argparse.Namespace, argv: list[str]) -> int:
    from rich.markup import escape
    from rich.table import Table

    from gpubench.console import out_console, unit_text

    table = Table(title="gpubench suites")
    table.add_column("suite", no_wrap=True)  # a name is typed back: never folded
    for col in ("version", "backends", "metrics", "description"):
        table.add_column(col, overflow="fold")
    # The suites' declarations, read without importing them (torch and the rest: gpubench.declared).
    for d in declared.suites():
        metrics = ", ".join(f"{m.name} [{unit_text(m.unit)}, {'↑' if m.better == 'higher' else '↓'}]"
                            for m in d.metrics)
        table.add_row(d.name, str(d.version), ",".join(sorted(d.backends)), escape(metrics), escape(d.description))
    out_console().print(table)
    return EXIT_OK
