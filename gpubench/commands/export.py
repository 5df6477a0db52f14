"""``gpubench export RUN --out FILE [--format ...]``: a run's figures in another tool's format; ``gpubench export
DIR --format history-csv|history-json``: a directory's nightly history as data (gpubench.commands.history). Exit
0, or 2 (a UsageError) for input it cannot use."""

from __future__ import annotations

import argparse

from gpubench.commands import history
from gpubench.errors import UsageError
from gpubench.registry import all_suites


def add(p: argparse.ArgumentParser) -> None:
    p.add_argument("run", metavar="RUN", help="a run directory or .parquet table; for history-csv and history-json a "
                                              "directory of runs (results/<cluster>)")
    p.add_argument("--format", choices=("pytest-benchmark", "tunableop", "triton-configs", *history.FORMATS),
                   default="pytest-benchmark",
                   help="output format (default: pytest-benchmark; tunableop and triton-configs take an "
                        "autotune-kernels run; history-csv and history-json a directory of runs)")
    p.add_argument("--out", required=True, metavar="FILE", help="file to write")
    history.add_options(p)


def main(args: argparse.Namespace, argv: list[str]) -> int:
    from gpubench import outputs  # these import pandas: not for --help
    from gpubench.console import out_console
    from gpubench.export import export

    outputs.file(args.out)  # a folder, a missing or read-only place: one line, before anything is read
    if args.format in history.FORMATS:
        return history.export(args.run, args.format, args.out, args)
    history.refuse_options(args)
    if args.format in ("tunableop", "triton-configs"):
        return _export_kernel_winners(args)

    written, left = export(args.run, args.out)
    out_console().print(f"{written} time figure(s) written to {args.out} as pytest-benchmark JSON"
                        + (f"; {left} row(s) left out (not ok, or not a time metric)" if left else ""),
                        markup=False, highlight=False)
    return 0


def _exporter(fmt: str) -> str:
    """The suite whose rows ``--format fmt`` writes (the one that lists it in ``Suite.exports``)."""
    found = [name for name, cls in all_suites().items() if fmt in cls.exports]
    if not found:
        raise UsageError(f"no suite exports {fmt}")
    return found[0]


def _export_kernel_winners(args: argparse.Namespace) -> int:
    from gpubench import outputs, results
    from gpubench.console import out_console
    from gpubench.kernels import config_export as kernel_export

    suite = _exporter(args.format)
    df = results.load(args.run)
    if "config" not in df.columns or not (df["suite"] == suite).any():
        raise UsageError(f"{args.run} has no {suite} rows: run gpubench run --suite {suite} first")
    meta = df.attrs.get("run") or {}
    write = kernel_export.tunableop_csv if args.format == "tunableop" else kernel_export.triton_configs
    outputs.write_text(args.out, write(df, meta))
    n = len(kernel_export.winners(df))
    out_console().print(f"{n} winner(s) written to {args.out} ({args.format})", markup=False, highlight=False)
    return 0
