"""``gpubench info [--json]``: the system fingerprint and the device's state."""

from __future__ import annotations

import argparse
import json

from gpubench.commands import EXIT_OK, add_device_args, default_cluster


def add(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("info", help="system fingerprint and device state")
    add_device_args(p)
    p.add_argument("--json", action="store_true", help="print JSON")
    p.add_argument("--cluster", default=None, metavar="LABEL", help="cluster label (default: host name)")


def main(args: argparse.Namespace, argv: list[str]) -> int:
    from gpubench.backends import open_backend
    from gpubench.fingerprint import collect
    from gpubench.rundir import check_label

    cluster = check_label(args.cluster or default_cluster())
    backend = open_backend(args.backend, args.device)
    telemetry = backend.telemetry()
    try:
        info = collect(backend.identity(), cluster, telemetry)
        info["device"] = {
            "backend": backend.name,
            "index": backend.device_index,
            "name": backend.device_name(),
            "cache_bytes": backend.cache_bytes(),
            "memory_bytes": backend.memory_bytes(),
            "telemetry": getattr(telemetry, "source", "none"),
            "telemetry_note": getattr(telemetry, "why", None),
            "static": telemetry.static(),
            "state": telemetry.read(),
        }
    finally:
        telemetry.close()
    if args.json:
        print(json.dumps(info, indent=2, default=str))
        return EXIT_OK
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"gpubench info — fingerprint {info['fingerprint']}", show_header=False)
    table.add_column("key", style="bold")
    table.add_column("value")
    for section in ("identity", "device", "volatile"):
        for key, value in info[section].items():
            if isinstance(value, dict):
                value = ", ".join(f"{k}={v}" for k, v in value.items()) or "—"
            table.add_row(f"{section}.{key}", "—" if value is None else str(value))
    Console().print(table)
    return EXIT_OK
