"""``gpubench compare BASELINE CURRENT`` (or ``--fleet RUN...``): BETTER/WORSE/SAME per figure. Exit 0 when
nothing is WORSE (fleet: no device flagged), 1 when something is, 2 (a UsageError) for input it cannot use."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

# The defaults and the formats' names load nothing heavy: `gpubench compare --help` reads them; what compares
# (pandas, scipy) is imported where the command runs.
from gpubench.compare import outputs as formats
from gpubench.compare.defaults import DEFAULT_ALPHA, DEFAULT_K, DEFAULT_WINDOW
from gpubench.errors import UsageError


def add(p: argparse.ArgumentParser) -> None:
    p.add_argument("paths", nargs="+", metavar="PATH",
                   help="BASELINE CURRENT: each a run directory, a .parquet table or a directory of runs "
                        "(results/<cluster>: its latest run); with --fleet, the run(s) of the fleet")
    p.add_argument("--baseline-window", type=int, default=None, metavar="N",
                   help=f"take the N latest runs of a BASELINE directory of runs of the current run's system "
                        f"(default: {DEFAULT_WINDOW}); their run medians show how far each figure moves between "
                        "runs")
    p.add_argument("--thresholds", default=None, metavar="FILE",
                   help="TOML of per-suite/per-metric thresholds ([default] threshold = 0.05, [comm] busbw = "
                        "0.03), e.g. from gpubench calibrate; with --fleet, how far from the fleet median a figure "
                        "must be before it is flagged")
    p.add_argument("--threshold", type=float, default=None, metavar="FRACTION",
                   help="default threshold for metrics the file does not name (default: 0.05, i.e. 5%%)")
    p.add_argument("--alpha", type=float, default=DEFAULT_ALPHA, metavar="P",
                   help=f"significance level of the rank test on the samples (default: {DEFAULT_ALPHA:g})")
    p.add_argument("--format", choices=formats.names(), default=None, metavar="|".join(formats.names()),
                   help=f"output format (default: {formats.DEFAULT}; an --out file takes the format its suffix "
                        "names: .md, .xml, .json ...)")
    p.add_argument("--out", action="append", default=[], metavar="FILE",
                   help="write the output to FILE as well (the terminal still gets the table); repeatable")
    p.add_argument("--all", action="store_true", dest="all_rows",
                   help="list every figure in the terminal and Markdown views, not only those that are not SAME")
    p.add_argument("--confirm", default=None, metavar="RERUN",
                   help="a rerun of the WORSE cases (a run directory, e.g. gpubench run --filter ...): a figure "
                        "stays WORSE only if it is WORSE against the same baseline there too (ci/nightly.sh)")
    p.add_argument("--no-record", action="store_true",
                   help="don't record the verdict in CURRENT's run directory (by default a run judged against the "
                        "runs of its own directory keeps its verdict there, so that later nights leave its "
                        "regressions out of their baseline: docs/compare.md)")
    p.add_argument("--history", default=None, metavar="FOLDER",
                   help="draw the nightly history page of the directory CURRENT is kept in into FOLDER once this "
                        "verdict is recorded, as gpubench report DIR --out FOLDER does (with this --baseline-window): "
                        "one process for the gate and its page (ci/nightly.sh); a page that cannot be drawn is "
                        "said and leaves the exit code the gate's")
    p.add_argument("--no-host-pace", action="store_true",
                   help="judge the figures the host times as measured, not moved to the baseline's host pace "
                        "(by default, where the baseline's runs spread in the host's pace, compare takes out the "
                        "part of such a figure's movement that the pace explains: docs/compare.md)")
    p.add_argument("--cross-cluster", action="store_true",
                   help="compare different systems (GPU model, count, driver): ratios and %% of spec peak")
    p.add_argument("--fleet", action="store_true",
                   help="flag devices (host, GPU) whose figures sit beyond k robust standard deviations (MAD) "
                        "and beyond the threshold (5%% unless --threshold/--thresholds) from the fleet median")
    p.add_argument("--k", type=float, default=DEFAULT_K, metavar="K",
                   help=f"--fleet: flag beyond K (default: {DEFAULT_K:g})")


def _out_formats(args) -> list[tuple[Path, str]]:
    from gpubench.results import destination as outputs

    outs = []
    for name in args.out:
        path = outputs.file(name)  # a folder, a missing or read-only place: exit 2, before anything is judged
        fmt = args.format if args.format and not formats.is_console(args.format) else formats.for_suffix(path.suffix)
        if fmt is None:
            ends = formats.suffixes()
            raise UsageError(f"--out {name}: pass --format {'|'.join(formats.files())}, or name the file "
                             f"{', '.join(ends[:-1])} or {ends[-1]}")
        outs.append((path, fmt))
    return outs


def _emit(args, render: Callable[[str], Any]) -> None:
    """The --out files, then the terminal table (or, with --format and no --out, that format on stdout): a file
    that cannot be written is exit 2 before any verdict is shown, so that a CI gate never reads a full disk as a
    regression."""
    from gpubench.results import destination as outputs
    from gpubench.console import out_console

    outs = _out_formats(args)
    for path, fmt in outs:
        outputs.write_text(path, render(fmt))
    if args.format and not formats.is_console(args.format) and not outs:
        print(render(args.format), end="")
    else:
        out_console().print(render(formats.DEFAULT))


def main(args: argparse.Namespace, argv: list[str]) -> int:
    if not args.fleet and len(args.paths) != 2:  # answered at once, before pandas is loaded
        raise UsageError(f"compare takes BASELINE CURRENT (2 paths), not {len(args.paths)}; or pass --fleet RUN")
    from gpubench.compare import fleet, comparison as report, thresholds

    _out_formats(args)  # a bad --out fails before anything is loaded
    th = thresholds.load(args.thresholds) if args.thresholds else thresholds.Thresholds()
    if args.threshold is not None:
        th.default = thresholds.check_fraction(args.threshold, "--threshold")
    if args.fleet:
        given = {"--baseline-window": args.baseline_window is not None, "--confirm": args.confirm,
                 "--no-record": args.no_record, "--cross-cluster": args.cross_cluster, "--history": args.history}
        extra = [flag for flag, on in given.items() if on]
        if extra:
            raise UsageError(f"--fleet sets devices against each other, not against a baseline: drop "
                             f"{', '.join(extra)}")
        for fmt in {f for _, f in _out_formats(args)} | ({args.format} if args.format else set()):
            formats.fleet(fmt)  # a format without a fleet view: exit 2, before anything is loaded
        rep = fleet.analyze([_side(p) for p in args.paths], k=args.k, thresholds=th)
        _emit(args, lambda fmt: formats.fleet(fmt).fleet(rep))
        return rep.exit_code
    # build() applied what the runs' metadata knows (a shared GPU, a busy host, the rerun, the directory's memory);
    # record() keeps the verdict where the current run belongs to the baseline's directory.
    rep = report.build(args.paths[0], args.paths[1], window=args.baseline_window, thresholds=th, alpha=args.alpha,
                       cross_cluster=args.cross_cluster, confirm=args.confirm, host_pace=not args.no_host_pace)
    if not args.no_record:
        rep = report.record(rep)
    _emit(args, lambda fmt: formats.get(fmt).compare(rep, args.all_rows))
    if args.history is not None:
        _history_page(Path(args.paths[1]), args)
    return rep.exit_code


def _history_page(current: Path, args: argparse.Namespace) -> None:
    """--history: the page of the nights kept beside CURRENT (its parent directory), drawn after the verdict is
    recorded so that tonight's is on it. Drawing it here spares a night a second interpreter, its imports and a
    second read of the runs. A page that cannot be drawn is said on stderr: the exit code stays the gate's."""
    from gpubench.commands import history
    from gpubench.report.history import is_directory_of_runs

    # CURRENT as compare takes it: a directory of runs (its latest), a run directory, or a table in one.
    directory = current if is_directory_of_runs(current) else current.parent if current.is_dir() else \
        current.parent.parent
    ask = argparse.Namespace(since=None, last=None, filter=None, baseline_window=args.baseline_window)
    try:
        if not is_directory_of_runs(directory):
            raise UsageError(f"{current} is not kept in a directory of runs (results/<cluster>/)")
        if Path(args.history).is_file():  # said here: report's own check would name its --out, not --history
            raise UsageError(f"--history {args.history} is a file: give a folder")
        history.report(str(directory), args.history, ask)
    except Exception as e:  # noqa: BLE001 — whatever stops the page, the gate's verdict stands
        print(f"gpubench compare: the history page could not be drawn ({type(e).__name__}: {e})", file=sys.stderr)


def _side(path: str):
    from gpubench.compare.load import resolve

    return resolve(path)
