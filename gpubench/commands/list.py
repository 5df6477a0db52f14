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

    # Three columns, the suite's text in one: at 80 columns five narrow ones cut words ("torch.distribu|ted").
    table = Table(title="gpubench suites")
    table.add_column("suite", no_wrap=True)  # a name is typed back: never folded
    table.add_column("version", no_wrap=True)
    table.add_column("what it measures, metrics and backends", overflow="fold")
    # The suites' declarations, read without importing them (torch and the rest: gpubench.declared).
    for d in declared.suites():
        metrics = ", ".join(f"{m.name} [{unit_text(m.unit)}, {'↑' if m.better == 'higher' else '↓'}]"
                            for m in d.metrics)
        text = "\n".join(line for line in (escape(d.description), f"[dim]metrics: {escape(metrics)}[/]",
                                           f"[dim]backends: {', '.join(sorted(d.backends))}[/]") if line)
        table.add_row(d.name, str(d.version), text)
    out_console().print(table)
    return EXIT_OK
