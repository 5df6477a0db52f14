"""Command line: ``gpubench list | info | run``.

Exit codes: 0 success; 1 a case failed (error or invalid); 2 bad input (one line on stderr saying what to
do); 130 interrupted (what was measured is kept).
"""

from __future__ import annotations

import argparse
import json
import socket
import sys
from collections.abc import Sequence
from pathlib import Path

from gpubench import __version__
from gpubench.errors import UsageError

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130


class _Parser(argparse.ArgumentParser):
    """argparse prints usage plus the error; users asked for one line that says what to do."""

    def error(self, message: str):  # type: ignore[override]
        raise UsageError(f"{message} (see {self.prog} --help)")


def _add_device_args(p: argparse.ArgumentParser) -> None:
    from gpubench.backends import NAMES

    p.add_argument("--backend", default="auto", choices=NAMES, metavar="|".join(NAMES),
                   help="device backend; auto picks cuda/hip when torch sees a GPU, else cpu (default: auto)")
    p.add_argument("--device", type=int, default=0, metavar="N", help="device index (default: 0)")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="gpubench", description="Portable GPU benchmark suite.")
    parser.add_argument("--version", action="version", version=f"gpubench {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser, metavar="COMMAND")

    sub.add_parser("list", help="suites, their backends and metrics")

    p = sub.add_parser("info", help="system fingerprint and device state")
    _add_device_args(p)
    p.add_argument("--json", action="store_true", help="print JSON")
    p.add_argument("--cluster", default=None, metavar="LABEL", help="cluster label (default: host name)")

    p = sub.add_parser("run", help="run suites and write a run directory")
    p.add_argument("--suite", required=True, metavar="NAME[,NAME...]", help="suites to run (gpubench list)")
    _add_device_args(p)
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
    p.add_argument("--no-telemetry", action="store_true",
                   help="don't poll NVML/amdsmi while measuring (its queries can perturb latency figures)")
    p.add_argument("--triton-warps", type=int, default=None, metavar="N",
                   help="elementwise: force N warps per program on its Triton kernels (default: the measured best, "
                        "4; dot 8). A smaller block runs slower: the way to test a regression gate on purpose")
    a = p.add_argument_group("autotune (NCCL/RCCL knob sweep over the comm options below)")
    a.add_argument("--knob", action="append", default=None, metavar="NAME=V1,V2",
                   help="a knob and its values to sweep, repeatable, e.g. NCCL_PROTO=LL,Simple (default: NCCL_ALGO "
                        "Ring,Tree × NCCL_PROTO LL,LL128,Simple)")
    a.add_argument("--grid", default=None, metavar="FILE.toml", help="the knobs in a TOML [knobs] table instead")
    a.add_argument("--budget", type=float, default=None, metavar="MINUTES",
                   help="start no configuration that would end past this; the rest are recorded as skipped")
    c = p.add_argument_group("comm (collectives; one process per rank)")
    c.add_argument("--min-bytes", default=None, metavar="SIZE", help="smallest size, e.g. 8, 1M (as nccl-tests -b)")
    c.add_argument("--max-bytes", default=None, metavar="SIZE", help="largest size, e.g. 8G (as nccl-tests -e)")
    c.add_argument("--step-factor", type=int, default=None, metavar="F",
                   help="multiply the size by F from --min-bytes to --max-bytes (default 2; as nccl-tests -f)")
    c.add_argument("--op", default=None, metavar="LIST", help="reduction ops: sum,prod,min,max,avg (default sum)")
    c.add_argument("--collectives", default=None, metavar="LIST",
                   help="all_reduce,all_gather,reduce_scatter,alltoall,broadcast,reduce,sendrecv (default all)")
    c.add_argument("--graph", action="store_true",
                   help="capture the timed calls in a CUDA/HIP graph (nccl-tests -G): the default on GPUs, kept "
                        "as a name for it (refused on CPUs)")
    c.add_argument("--eager", action="store_true",
                   help="time torch.distributed calls issued one by one from Python instead of a captured graph "
                        "(what a training loop's host gets; host-bound below tens of MiB)")
    c.add_argument("--alloc", default=None, choices=("torch", "nccl"),
                   help="where the buffers come from: torch's caching allocator (default, as training jobs) or "
                        "NCCL/RCCL's ncclMemAlloc (as nccl-tests allocates them)")
    c.add_argument("--register", action="store_true",
                   help="register every buffer with the communicator (ncclCommRegister, nccl-tests -R 1): "
                        "zero-copy transfers where NCCL supports them; implies --alloc nccl")
    c.add_argument("--nproc", type=int, default=None, metavar="N",
                   help="ranks to start on this machine when no launcher started gpubench (default: one per GPU; "
                        "2 on CPU)")
    c.add_argument("--engine", default="torch", choices=("torch", "nccl-tests"),
                   help="torch: gpubench's own loop over torch.distributed (default); nccl-tests: run the "
                        "nccl-tests/rccl-tests binaries with the same sweep into the same table")
    c.add_argument("--nccl-tests-dir", default=None, metavar="DIR",
                   help="where the *_perf binaries are (default: $NCCL_TESTS_DIR, $RCCL_TESTS_DIR, PATH)")
    c.add_argument("--nccl-tests-launcher", default=None, metavar="CMD",
                   help="run each binary under this launcher, one process per GPU (-g 1), as an MPI build of "
                        "nccl-tests runs, e.g. 'mpirun -np 2'; --nproc is then the ranks it starts (default: one "
                        "process driving every GPU, -g N)")
    c.add_argument("--timeout", type=float, default=60.0, metavar="SECONDS",
                   help="a rank that makes no progress for this long ends the run, naming the ranks that did not "
                        "arrive (default 60)")

    p = sub.add_parser("roofline", help="measured roofline chart of a run (elementwise and gemm rows)")
    p.add_argument("run_dir", metavar="RUN_DIR", help="a run directory written by gpubench run")
    p.add_argument("--out", default=None, metavar="FILE.png", help="chart file (default: RUN_DIR/roofline.png)")
    from gpubench.compare.commands import add_commands; add_commands(sub)  # noqa: E702 — compare, calibrate
    from gpubench.export_cli import add_commands as add_export; add_export(sub)  # noqa: E702 — export
    from gpubench.nccltests.cli import add_commands as add_import; add_import(sub)  # noqa: E702 — import
    from gpubench.report.cli import add_commands as add_report; add_report(sub)  # noqa: E702 — report
    return parser


def _default_cluster() -> str:
    # Host names can hold characters directory names should not; keep the safe part.
    host = socket.gethostname().split(".")[0] or "local"
    return "".join(ch if ch.isalnum() or ch in "._-" else "-" for ch in host)[:64] or "local"


def cmd_list(args) -> int:
    from rich.markup import escape
    from rich.table import Table

    from gpubench.registry import all_suites

    from gpubench.console import out_console, unit_text

    table = Table(title="gpubench suites")
    for col in ("suite", "version", "backends", "metrics", "description"):
        table.add_column(col, overflow="fold")
    for name, cls in all_suites().items():
        metrics = ", ".join(f"{m.name} [{unit_text(m.unit)}, {'↑' if m.better == 'higher' else '↓'}]"
                            for m in cls.metrics)
        table.add_row(name, str(cls.version), ",".join(sorted(cls.backends)), escape(metrics), escape(cls.description))
    out_console().print(table)
    return EXIT_OK


def cmd_info(args) -> int:
    from gpubench.backends import open_backend
    from gpubench.fingerprint import collect
    from gpubench.rundir import check_label

    cluster = check_label(args.cluster or _default_cluster())
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
    from rich.markup import escape
    from rich.table import Table

    from gpubench.console import out_console

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
    from gpubench.units import format_bytes

    if key.endswith("_bytes") and isinstance(value, int):
        return format_bytes(value)
    for suffix, unit in (("_mhz", "MHz"), ("_w", "W"), ("_c", "°C")):
        if key.endswith(suffix) and isinstance(value, (int, float)):
            return f"{value:g} {unit}"
    return str(value)


def cmd_run(args, argv: Sequence[str]) -> int:
    from gpubench.backends import open_backend
    from gpubench.registry import select
    from gpubench.rundir import check_label
    from gpubench.units import parse_size_list

    # Everything the user typed is checked before a directory is made or a device touched.
    suites = select(args.suite)
    cluster = check_label(args.cluster or _default_cluster())
    sizes = parse_size_list(args.sizes) if args.sizes else None
    dtypes = [d.strip() for d in args.dtype.split(",") if d.strip()] if args.dtype else None
    options = _suite_options(args)
    if any(s.drives for s in suites):
        if len(suites) > 1 or args.devices is not None or args.engine != "torch":
            raise UsageError("autotune runs alone (its child comm runs start their own ranks): use --suite "
                             "autotune, without --devices or --engine")
        return next(s for s in suites if s.drives).drive(args, argv, cluster)
    if args.nccl_tests_launcher and args.engine != "nccl-tests":
        raise UsageError("--nccl-tests-launcher starts the nccl-tests binaries: add --engine nccl-tests")
    if args.engine != "torch":
        if [s.name for s in suites] != ["comm"]:
            raise UsageError(f"--engine {args.engine} runs the comm suite only: use --suite comm")
        from gpubench.nccltests import engine

        return engine.run(args, options, dtypes, cluster, argv)
    group, fleet = None, args.devices is not None
    if fleet:
        from gpubench.dist import fleet as fleet_ranks
        from gpubench.dist.env import detect

        renv = detect()
        if renv is None:
            return fleet_ranks.spawn(args, argv, suites, options, sizes, dtypes, cluster)
        backend, group = fleet_ranks.join(args, suites, renv)
    elif any(s.multiprocess for s in suites):
        from gpubench.dist import ranks
        from gpubench.dist.env import detect

        if len(suites) > 1:
            raise UsageError(f"{', '.join(s.name for s in suites if s.multiprocess)} runs one process per rank: "
                             "run it on its own (--suite comm), the other suites in a second command")
        renv = detect()
        if renv is None:  # nobody started the ranks: check the grid here, then start them
            return ranks.spawn(args, argv, suites, options, sizes, dtypes, cluster)
        backend, group = ranks.join(args, renv)
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


def _suite_options(args) -> dict:
    """Options only some suites read (comm's sizes, ops, graph mode), checked here like the rest."""
    from gpubench.units import parse_size

    def names(text):
        return [x.strip() for x in text.split(",") if x.strip()] if text else None

    if args.step_factor is not None and args.step_factor < 2:
        raise UsageError(f"--step-factor {args.step_factor} must be an integer ≥ 2")
    if args.timeout <= 0:
        raise UsageError(f"--timeout {args.timeout} must be a positive number of seconds")
    if args.nproc is not None and args.nproc < 1:
        raise UsageError(f"--nproc {args.nproc} must be at least 1")
    if args.triton_warps is not None and args.triton_warps not in (1, 2, 4, 8, 16, 32):
        raise UsageError(f"--triton-warps {args.triton_warps} must be a power of two from 1 to 32")
    if args.register and args.alloc == "torch":
        raise UsageError("--register registers NCCL's own buffers: use it with --alloc nccl (or without --alloc)")
    return {
        "alloc": args.alloc,  # the comm suite resolves it (--register implies nccl, the default is torch)
        "register": bool(args.register),
        "min_bytes": parse_size(args.min_bytes) if args.min_bytes else None,
        "max_bytes": parse_size(args.max_bytes) if args.max_bytes else None,
        "step_factor": args.step_factor,
        "ops": names(args.op),
        "collectives": names(args.collectives),
        "graph": args.graph,
        "eager": args.eager,
        "triton_warps": args.triton_warps,
    }


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
            telemetry=not args.no_telemetry, group=group, fleet=fleet,
        )
    finally:
        if progress:
            progress.stop()
    if not root:
        return EXIT_INTERRUPTED if outcome.status == "interrupted" else (EXIT_FAILED if outcome.failures else EXIT_OK)
    console = out_console()
    for table in summary_tables(outcome.frame, {s.name: s.params for s in suites},
                                {s.name: s.shown for s in suites}):
        console.print(table)
    for s in suites:  # what a suite did not measure, or measured otherwise than asked: a line each
        for line in getattr(s, "notes", ()):
            console.print(f"{s.name}: {line}", markup=False, highlight=False, soft_wrap=True)
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


def cmd_roofline(args) -> int:
    from rich.table import Table

    from gpubench import results, roofline
    from gpubench.console import out_console

    df = results.load(args.run_dir)
    device, all_roofs = roofline.analyze(df)
    if not any(ro.points for ro in all_roofs):
        raise UsageError(f"{args.run_dir} has no elementwise or gemm throughput rows: run "
                         "`gpubench run --suite elementwise,gemm` and give its run directory")
    out = Path(args.out) if args.out else Path(args.run_dir) / "roofline.png"
    if not out.parent.is_dir():
        raise UsageError(f"{out.parent} does not exist: give --out a file in an existing directory")
    bad = roofline.violations(all_roofs)
    roofline.plot(device, all_roofs, out, bad)

    def fmt(x, unit):
        return "—" if x is None else f"{x:.1f} {unit}"

    table = Table(title=f"roofline — {device or 'unknown device'}", title_justify="left")
    for col in ("dtype", "points", "memory (measured / spec)", "gemm (measured / spec tensor)",
                "fma (measured / spec vector)"):
        table.add_column(col)
    for ro in all_roofs:
        table.add_row(ro.dtype, str(len(ro.points)),
                      f"{fmt(ro.memory_gbps, 'GB/s')} / {fmt(ro.spec_memory_gbps, 'GB/s')}",
                      f"{fmt(ro.tensor_tflops, 'TF/s')} / {fmt(ro.spec_tensor_tflops, 'TF/s')}",
                      f"{fmt(ro.vector_tflops, 'TF/s')} / {fmt(ro.spec_vector_tflops, 'TF/s')}")
    console = out_console()
    console.print(table)
    for ro, p, roof in bad:
        console.print(f"measurement error: {ro.dtype} {p.label} {p.case}: {p.tflops:.2f} TF/s at {p.intensity:.3g} "
                      f"FLOP/B is above the spec roof {roof:.2f} TF/s", markup=False, highlight=False)
    console.print(f"chart: {out}", markup=False, highlight=False)
    return EXIT_FAILED if bad else EXIT_OK


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        args = build_parser().parse_args(argv)
        if args.command == "list":
            return cmd_list(args)
        if args.command == "info":
            return cmd_info(args)
        if args.command == "roofline":
            return cmd_roofline(args)
        if args.command == "import":  # gpubench/nccltests/cli.py
            from gpubench.nccltests.cli import run_import
            return run_import(args, ["gpubench", *argv])
        if getattr(args, "run_command", None):  # compare, calibrate (gpubench/compare/commands.py), export, ...
            return args.run_command(args)
        return cmd_run(args, ["gpubench", *argv])
    except UsageError as e:
        print(f"gpubench: error: {e}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("gpubench: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED


if __name__ == "__main__":
    raise SystemExit(main())
