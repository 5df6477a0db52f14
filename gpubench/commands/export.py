"""``gpubench export RUN --out FILE [--format ...]``: a run's figures in another tool's format; ``gpubench export
DIR --format history-csv|history-json``: a directory's nightly history as data (gpubench.commands.history). Exit
0, or 2 (a UsageError) for input it cannot use.

The formats are those of gpubench.results.exports (any suite's rows), of the history (gpubench.report.history.outputs)
and those the suites declare (gpubench.suite.Exporter, read through gpubench.declared)."""

from __future__ import annotations

import argparse

from gpubench.commands import history
from gpubench.declared import way, ways
from gpubench.errors import UsageError
from gpubench.registry import Formats

# Read from their sources: importing the results loads pandas, and --help lists them.
OWN = Formats("gpubench.results.exports")


def add(p: argparse.ArgumentParser) -> None:
    p.add_argument("run", metavar="RUN", help=f"a run directory or .parquet table; for "
                                              f"{' and '.join(history.OUTPUTS.others())} a directory of runs "
                                              "(results/<cluster>)")
    p.add_argument("--format", default=OWN.default, metavar="FORMAT",
                   help=f"output format: {', '.join([f'{OWN.default} (default)', *OWN.others()])}, "
                        f"{', '.join(history.OUTPUTS.others())} (a directory of runs), or one a suite exports "
                        "(tunableop and triton-configs: an autotune-kernels run)")
    p.add_argument("--out", required=True, metavar="FILE", help="file to write")
    history.add_options(p)


def main(args: argparse.Namespace, argv: list[str]) -> int:
    from gpubench.results import destination  # these import pandas: not for --help
    from gpubench.console import out_console

    destination.file(args.out)  # a folder, a missing or read-only place: one line, before anything is read
    if args.format in history.OUTPUTS.others():
        return history.export(args.run, args.format, args.out, args)
    history.refuse_options(args)
    if args.format not in OWN.names():
        return _suite_format(args)
    text, said = OWN.get(args.format).export(args.run, args.out)
    destination.write_text(args.out, text)
    out_console().print(said, markup=False, highlight=False)
    return 0


def _suite_format(args: argparse.Namespace) -> int:
    """A format a suite declares (Suite.exporters, gpubench.suite), written from that suite's rows of the run."""
    from gpubench.results import destination
    from gpubench import results
    from gpubench.console import out_console

    declared = ways("exporters")
    if args.format not in declared:
        raise UsageError(f"unknown --format {args.format!r}: choose from "
                         f"{', '.join([*OWN.names(), *history.OUTPUTS.others(), *sorted(declared)])}")
    suite, exporter = way("exporters", args.format)
    df = results.load(args.run)
    if "suite" not in df.columns or not (df["suite"] == suite.name).any():
        raise UsageError(f"{args.run} has no {suite.name} rows: run gpubench run --suite {suite.name} first")
    text, said = exporter.write(df[df["suite"] == suite.name], df.attrs.get("run") or {})
    destination.write_text(args.out, text)
    out_console().print(f"{said} written to {args.out} ({args.format})", markup=False, highlight=False)
    return 0
