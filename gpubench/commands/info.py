"""``gpubench info [--json]``: the system fingerprint and the device's state."""

from __future__ import annotations

import argparse
import json

from gpubench.backends import open_backend
from gpubench.commands import EXIT_OK, add_device_args, default_cluster
from gpubench.machine.fingerprint import collect
from gpubench.units import format_bytes


def add(p: argparse.ArgumentParser) -> None:
    add_device_args(p)
    p.add_argument("--json", action="store_true", help="print JSON")
    p.add_argument("--cluster", default=None, metavar="LABEL", help="cluster label (default: host name)")


def main(args: argparse.Namespace, argv: list[str]) -> int:
    from rich.markup import escape  # these (the console and the run directory: pandas) are not for --help
    from rich.table import Table

    from gpubench.console import out_console
    from gpubench.results.rundir import check_label

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
    table = Table(title=f"gpubench info — fingerprint {info['fingerprint']}", show_header=False)
    table.add_column("key", style="bold")
    table.add_column("value")
    for section in ("identity", "device", "volatile"):
        for key, value in info[section].items():
            if isinstance(value, dict):
                # What this machine cannot tell (no GPU, no telemetry) is left out, not printed as None.
                value = ", ".join(f"{k}={_info_text(k, v)}" for k, v in value.items() if v is not None) or None
            if value is None or value == []:
                continue
            table.add_row(f"{section}.{key}", escape(_info_text(key, value)))
    out_console().print(table)
    return EXIT_OK


def _info_text(key: str, value) -> str:
    """A value as people read it: bytes in KiB/MiB/GiB, clocks with their unit."""
    if key.endswith("_bytes") and isinstance(value, int):
        return format_bytes(value)
    for suffix, unit in (("_mhz", "MHz"), ("_w", "W"), ("_c", "°C")):
        if key.endswith(suffix) and isinstance(value, (int, float)):
            return f"{value:g} {unit}"
    return str(value)
