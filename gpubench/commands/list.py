"""``gpubench list``: the suites (built-in and registered), their versions, backends and metrics."""

from __future__ import annotations

import argparse

from gpubench.commands import EXIT_OK


def add(sub: argparse._SubParsersAction) -> None:
    sub.add_parser("list", help="suites, their backends and metrics")


def main(args: argparse.Namespace, argv: list[str]) -> int:
    from rich.console import Console
    from rich.table import Table

    from gpubench.registry import all_suites

    table = Table(title="gpubench suites")
    for col in ("suite", "version", "backends", "metrics", "description"):
        table.add_column(col)
    for name, cls in all_suites().items():
        metrics = ", ".join(f"{m.name} [{m.unit}, {'↑' if m.better == 'higher' else '↓'}]" for m in cls.metrics)
        table.add_row(name, str(cls.version), ",".join(sorted(cls.backends)), metrics, cls.description)
    Console().print(table)
    return EXIT_OK
