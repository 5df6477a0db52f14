"""``gpubench run --suite NAME[,NAME...]``: plan the suites' cases, measure them, write a run directory.

The options every suite shares are here; a suite's own options come from its declaration (``Suite.options``,
gpubench/options.py): one argument group per suite, under the suite's name in ``gpubench run --help``.
"""

from __future__ import annotations

import argparse
import warnings
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from gpubench.commands import add_device_args, default_cluster
from gpubench.errors import UsageError
from gpubench.options import read
from gpubench.declared import way
from gpubench.registry import all_suites, select
from gpubench.run.request import DEFAULT_PROCESSES, DEFAULT_TIMEOUT_S, Conduct, Placement, RunRequest, Selection
from gpubench.units import parse_size_list

if TYPE_CHECKING:
    from gpubench.run.prestart import Started

# The runner, the run directory, the console and the rank starters import pandas (and the suites torch): they are
# imported where a run starts, so that this module, which every command line imports for its parser, stays light.


def add(p: argparse.ArgumentParser, suites: Iterable[Any] = ()) -> None:
    """The ``run`` arguments, with the options of ``suites`` (their classes, or their declarations:
    gpubench.declared)."""
    p.add_argument("--suite", required=True, metavar="NAME[,NAME...]", help="suites to run (gpubench list)")
    add_device_args(p)
    p.add_argument("--quick", action="store_true", help="small grid and short budgets (a smoke run)")
    p.add_argument("--out", default="results", metavar="DIR", help="results root (default: ./results)")
    p.add_argument("--cluster", default=None, metavar="LABEL", help="cluster label (default: host name)")
    p.add_argument("--sizes", default=None, metavar="LIST", help="sizes for suites with a size axis, e.g. 256M,1G")
    p.add_argument("--dtype", default=None, metavar="LIST", help="dtypes to run, e.g. fp32,bf16")
    p.add_argument("--filter", default=None, metavar="REGEX", help="only cases whose id matches")
    p.add_argument("--search", action="store_true",
                   help="suites with a search mode sweep their shapes for the best figure (gemm: M,N,K, as "
                        "mamf-finder does); others ignore it")
    p.add_argument("--devices", default=None, metavar="all|LIST",
                   help="run on each of these devices at once, one process per device, into one run directory "
                        "with host and GPU columns (e.g. all, or 0,2); under srun/mpirun/torchrun each rank takes "
                        "its local GPU. gpubench compare --fleet then flags the outliers")
    p.add_argument("--processes", type=int, default=DEFAULT_PROCESSES, metavar="N",
                   help="measure the figures whose level is set per process (host-timed and host-bound launches, "
                        "copies to and from host memory) in N processes: this one, then N-1 fresh ones, so that a "
                        f"run holds how far they move between processes (default: {DEFAULT_PROCESSES}; 1: this "
                        "process only)")
    p.add_argument("--no-telemetry", action="store_true",
                   help="don't poll NVML/amdsmi while measuring (its queries can perturb latency figures)")
    p.add_argument("--nproc", type=int, default=None, metavar="N",
                   help="ranks to start on this machine when no launcher started gpubench, for a suite whose cases "
                        "run among processes (default: one per GPU; 2 on CPU)")
    p.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT_S, metavar="SECONDS",
                   help="a rank that makes no progress for this long ends the run, naming the ranks that did not "
                        f"arrive (default {DEFAULT_TIMEOUT_S:g})")
    for cls in suites:
        add_suite_options(p, cls)


def add_suite_options(p: argparse.ArgumentParser, cls: Any) -> None:
    """``cls``'s options as an argument group titled with its name; an option whose flag another suite (or
    ``run`` itself) already has is left out with a warning rather than taking the command line down."""
    if not cls.options:
        return
    group = p.add_argument_group(f"{cls.name} ({cls.description})" if cls.description else cls.name)
    for option in cls.options:
        try:
            option.add_to(group)
        except argparse.ArgumentError as e:
            warnings.warn(f"suite {cls.name!r}: option {option.flag} left out: {e}", stacklevel=2)


def request_of(args: argparse.Namespace, argv: list[str]) -> RunRequest:
    """The run asked for, typed; everything the user typed is checked here, before a directory is made or a device
    touched (a UsageError: one line, exit 2)."""
    from gpubench.results.rundir import check_label

    suites = select(args.suite)
    cluster = check_label(args.cluster or default_cluster())
    if args.processes < 1:
        raise UsageError(f"--processes {args.processes}: give 1 or more (1 measures in this process only)")
    if args.nproc is not None and args.nproc < 1:
        raise UsageError(f"--nproc {args.nproc} must be at least 1")
    if not args.timeout > 0:
        raise UsageError(f"--timeout {args.timeout:g} must be a positive number of seconds")
    sizes = parse_size_list(args.sizes) if args.sizes else None
    dtypes = [d.strip() for d in args.dtype.split(",") if d.strip()] if args.dtype else None
    options = {s.name: read(s.options, args) for s in suites}
    # Every suite's options as given, for the drivers whose child runs take another suite's (autotune: comm's).
    given = {o.dest: getattr(args, o.dest, False if o.switch else o.default)
             for cls in all_suites().values() for o in cls.options}
    return RunRequest(
        what=Selection(suites=tuple(suites), case_filter=args.filter, sizes=None if sizes is None else tuple(sizes),
                       dtypes=None if dtypes is None else tuple(dtypes), dtype_text=args.dtype, search=args.search,
                       given=given, options=options),
        where=Placement(backend=args.backend, device=args.device, devices=args.devices, nproc=args.nproc,
                        timeout=args.timeout),
        how=Conduct(quick=args.quick, telemetry=not args.no_telemetry, processes=args.processes, out=args.out,
                    cluster=cluster),
        argv=tuple(argv),
    )


def main(args: argparse.Namespace, argv: list[str]) -> int:
    from gpubench.run import prestart

    # Before request_of imports the suites (torch): the workers import alongside (gpubench.run.prestart). Only a plain
    # run of one device takes them: not --devices, not another --engine.
    plain = args.devices is None and getattr(args, "engine", "torch") == "torch"
    names = [n.strip() for n in str(args.suite).split(",")]
    early = prestart.early(names, args.backend, args.processes) if plain else None
    try:
        return _main(args, argv, early)
    finally:
        if early is not None:
            early.kill()  # where the run did not take them (it ended them itself where it did)


def _main(args: argparse.Namespace, argv: list[str], early: Started | None) -> int:
    request = request_of(args, argv)
    suites = list(request.what.suites)
    engine = getattr(args, "engine", "torch")  # a suite's --engine: another engine into its table (gpubench.suite)
    drivers = [s.driver for s in suites if s.driver]
    if drivers:
        if len(suites) > 1 or args.devices is not None or engine != "torch":
            raise UsageError(drivers[0].alone)
        return drivers[0].run(request)
    if engine != "torch":
        owner, chosen = way("engines", engine)
        if [s.name for s in suites] != [owner.name]:
            raise UsageError(f"--engine {engine} runs the {owner.name} suite only: use --suite {owner.name}")
        return chosen.run(request)
    for s in suites:  # options an engine of the suite reads, given to gpubench's own loop
        for other in s.engines:
            for dest in other.own_options:
                if getattr(args, dest, None):
                    raise UsageError(f"--{dest.replace('_', '-')} is for --engine {other.name}: add --engine "
                                     f"{other.name}")
    from gpubench.run.measure import measure

    return measure(request, early)
