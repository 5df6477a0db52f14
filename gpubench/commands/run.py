"""``gpubench run --suite NAME[,NAME...]``: plan the suites' cases, measure them, write a run directory.

The options every suite shares are here; a suite's own options come from its declaration (``Suite.options``,
gpubench/options.py): one argument group per suite, under the suite's name in ``gpubench run --help``.
"""

from __future__ import annotations

import argparse
import sys
import warnings

from gpubench.commands import EXIT_FAILED, EXIT_INTERRUPTED, EXIT_OK, add_device_args, default_cluster
from gpubench.errors import UsageError


def add(sub: argparse._SubParsersAction, suites: bool = True) -> None:
    """The ``run`` parser; ``suites``: with each registered suite's options (importing the suites)."""
    p = sub.add_parser("run", help="run suites and write a run directory")
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
    from gpubench.processes import DEFAULT_PROCESSES

    p.add_argument("--processes", type=int, default=DEFAULT_PROCESSES, metavar="N",
                   help="measure the figures whose level is set per process (host-timed and host-bound launches, "
                        "copies to and from host memory) in N processes: this one, then N-1 fresh ones, so that a "
                        f"run holds how far they move between processes (default: {DEFAULT_PROCESSES}; 1: this "
                        "process only)")
    p.add_argument("--no-telemetry", action="store_true",
                   help="don't poll NVML/amdsmi while measuring (its queries can perturb latency figures)")
    if suites:
        from gpubench.registry import all_suites

        for cls in all_suites().values():
            add_suite_options(p, cls)


def add_suite_options(p: argparse.ArgumentParser, cls) -> None:
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


def main(args: argparse.Namespace, argv: list[str]) -> int:
    from gpubench.backends import open_backend
    from gpubench.options import read
    from gpubench.registry import select
    from gpubench.rundir import check_label
    from gpubench.units import parse_size_list

    # Everything the user typed is checked before a directory is made or a device touched.
    suites = select(args.suite)
    cluster = check_label(args.cluster or default_cluster())
    if args.processes < 1:
        raise UsageError(f"--processes {args.processes}: give 1 or more (1 measures in this process only)")
    sizes = parse_size_list(args.sizes) if args.sizes else None
    dtypes = [d.strip() for d in args.dtype.split(",") if d.strip()] if args.dtype else None
    options = {s.name: read(s.options, args) for s in suites}
    engine = getattr(args, "engine", "torch")  # the comm suite's --engine
    if any(s.drives for s in suites):
        if len(suites) > 1 or args.devices is not None or engine != "torch":
            raise UsageError("autotune runs alone (its child comm runs start their own ranks): use --suite "
                             "autotune, without --devices or --engine")
        return next(s for s in suites if s.drives).drive(args, argv, cluster)
    if getattr(args, "nccl_tests_launcher", None) and engine != "nccl-tests":
        raise UsageError("--nccl-tests-launcher starts the nccl-tests binaries: add --engine nccl-tests")
    if engine != "torch":
        if [s.name for s in suites] != ["comm"]:
            raise UsageError(f"--engine {engine} runs the comm suite only: use --suite comm")
        from gpubench.nccltests import binaries

        return binaries.sweep(args, options["comm"], dtypes, cluster, argv)
    group, fleet = None, args.devices is not None

    def check(device, world_size: int) -> None:  # the grid the ranks will lay out, before any is started
        from gpubench import runner

        runner.plan(suites, device, quick=args.quick, sizes=sizes, dtypes=dtypes, case_filter=args.filter,
                    search=args.search, options=options, world_size=world_size)

    if fleet:
        from gpubench.ranks import fleet as fleet_ranks
        from gpubench.ranks.env import detect

        renv = detect()
        if renv is None:
            return fleet_ranks.spawn(args, argv, suites, check, cluster)
        backend, group = fleet_ranks.join(args, suites, renv)
    elif any(s.multiprocess for s in suites):
        from gpubench.ranks import start
        from gpubench.ranks.env import detect

        if len(suites) > 1:
            raise UsageError(f"{', '.join(s.name for s in suites if s.multiprocess)} runs one process per rank: "
                             "run it on its own (--suite comm), the other suites in a second command")
        renv = detect()
        if renv is None:  # nobody started the ranks: check the grid here, then start them
            return start.spawn(args, argv, check, cluster)
        backend, group = start.join(args, renv)
    else:
        backend = open_backend(args.backend, args.device)
        if args.backend == "auto":  # say what auto chose before anything is measured on it
            print(f"backend: {backend.name}, device {backend.device_index} ({backend.device_name()}) "
                  "(--backend auto)", file=sys.stderr, flush=True)
    try:
        return _run_plan(args, argv, suites, backend, cluster, sizes, dtypes, options, group, fleet)
    finally:
        if group is not None:
            group.close()


def _nothing_fits(outcome, progress) -> None:
    """A run in which every case was skipped for memory asked for nothing this machine can hold: its run directory
    goes (it holds no figure), and one line says so (exit 2), as for any other request that cannot be met."""
    import contextlib
    import shutil

    from gpubench.memory import TOO_BIG

    df = outcome.frame
    if outcome.status != "complete" or df.empty or not (df["status"] == "skipped").all():
        return
    messages = df["message"].astype(str)
    if not messages.str.contains(TOO_BIG, regex=False).all():
        return  # skipped for other reasons (no GPU for copies and launches): a run that says why, exit 0
    if progress:
        progress.discard()  # the skips it held back: the one line below says what they would
    shutil.rmtree(outcome.run_dir.path, ignore_errors=True)
    with contextlib.suppress(OSError):  # the cluster's folder too, where this run made it and left it empty
        outcome.run_dir.path.parent.rmdir()
    smallest = min(messages, key=len)
    raise UsageError(f"nothing asked for fits here: each of the {df['case'].nunique()} case(s) was too large (e.g. "
                     f"{smallest}); choose smaller --sizes")


def _run_plan(args, argv, suites, backend, cluster, sizes, dtypes, options, group, fleet=False) -> int:
    from gpubench import runner
    from gpubench.console import RunProgress, out_console, summary_tables
    from gpubench.rundir import ensure_writable, saved

    p = runner.plan(suites, backend, quick=args.quick, sizes=sizes, dtypes=dtypes, case_filter=args.filter,
                    search=args.search, options=options, group=None if fleet else group)
    root = group is None or group.rank == 0
    if root:
        ensure_writable(args.out, cluster)
    progress = RunProgress() if root else None
    try:
        outcome = runner.execute(
            p, backend, out=args.out, cluster=cluster, argv=argv, quick=args.quick, progress=progress,
            telemetry=not args.no_telemetry, group=group, fleet=fleet, processes=getattr(args, "processes", 1),
        )
        if root:
            _nothing_fits(outcome, progress)
    finally:
        if progress:
            progress.stop()
    if not root:
        return EXIT_INTERRUPTED if outcome.status == "interrupted" else (EXIT_FAILED if outcome.failures else EXIT_OK)
    console = out_console()
    for table in summary_tables(outcome.frame, {s.name: s.params for s in suites},
                                {s.name: s.shown for s in suites}, {s.name: s.blocks for s in suites}):
        console.print(table)
    for line in outcome.notes:  # what a suite did not measure, or measured otherwise than asked: a line each
        console.print(line, markup=False, highlight=False, soft_wrap=True)
    from gpubench.contention import closing

    measured = outcome.frame
    measured = measured[measured["stop"] != "derived"] if len(measured) else measured
    for line in closing(outcome.contention, int(measured["case"].nunique()) if len(measured) else 0):
        console.print(line, markup=False, highlight=False, soft_wrap=True)
    console.print(f"run directory: {outcome.run_dir.path}", markup=False, highlight=False)
    if outcome.status == "interrupted":
        # Read back from the run directory: what was measured before the Ctrl-C, none if none.
        left = f"; {outcome.abandoned} was abandoned" if outcome.abandoned else ""
        console.print(f"interrupted{left}; {saved(outcome.run_dir.path)}", markup=False, highlight=False)
        return EXIT_INTERRUPTED
    if outcome.failures:
        console.print(f"{outcome.failures} case(s) failed (status error or invalid); see the table", markup=False)
        return EXIT_FAILED
    return EXIT_OK
