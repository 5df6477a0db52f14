"""``gpubench check``: a node's verdict, each GPU, link and copy path PASS / WARN / FAIL / SKIP with its evidence.

Exit 0 PASS or WARN (and SKIP), 1 FAIL (with --strict, WARN too), 2 bad input. docs/check.md.
"""

from __future__ import annotations

import argparse

# The formats' names load nothing heavy (read from their sources): --help lists them.
from gpubench.check import outputs
from gpubench.check.verdicts import HISTORY, OUT
from gpubench.commands import EXIT_FAILED, EXIT_OK, add_device_args, default_cluster
from gpubench.errors import UsageError


def add(p: argparse.ArgumentParser) -> None:
    add_device_args(p)
    p.add_argument("--devices", default="all", metavar="all|LIST", help="GPUs to check (default: all)")
    p.add_argument("--out", default=OUT, metavar="DIR",
                   help=f"where the check's run directories go, DIR/<cluster>/<run> (default: ./{OUT}, apart from "
                        "your own runs' ./results)")
    p.add_argument("--cluster", default=None, metavar="LABEL", help="this node's label (default: host name)")
    p.add_argument("--expect", default=None, metavar=f"FILE|none|{HISTORY}",
                   help="envelope to hold the figures against (default: the shipped one for the GPU model; none: "
                        f"the spec fallback and peers only; {HISTORY}: this node's own earlier checks under "
                        "--out, for every figure with 5 or more, the shipped one for the others); make one with "
                        "gpubench expect")
    p.add_argument("--fleet", default=None, metavar="DIR",
                   help="other nodes' check runs: their GPUs' figures are peers too; with --gather, the verdicts "
                        "to gather")
    p.add_argument("--gather", action="store_true",
                   help="measure nothing: gather the nodes' verdicts under --fleet DIR, each held against the fleet")
    p.add_argument("--expect-nodes", default=None, metavar="N|HOSTLIST",
                   help="with --gather: the nodes that should have a verdict (a count, or a SLURM host list such as "
                        "gpu[01-16]; default: SLURM_JOB_NODELIST where set); each one without is a FAIL")
    p.add_argument("--srun-exit", type=int, default=None, metavar="CODE",
                   help="with --gather: srun's exit code for the nodes' checks, quoted on a node without a verdict")
    p.add_argument("--fabric", nargs="?", const="quick", default=None, metavar="MODE",
                   help="check the fabric between nodes instead of a node: run as one task per GPU under srun, "
                        "torchrun or mpirun; rounds of node pairs, GPU g with GPU g: quick (one matching and a second "
                        "pass for suspects; the default), stride (about log2 N rounds), full (every pair once), "
                        "racks-within, racks-across (with --topology or Slurm's topology)")
    p.add_argument("--topology", default=None, metavar="FILE",
                   help="with --fabric: each node's rack (Slurm's topology.conf, or 'node rack' lines)")
    p.add_argument("--timeout", type=float, default=60.0, metavar="SECONDS",
                   help="with --fabric: how long a node pair may stay silent before it FAILs (default 60)")
    p.add_argument("--fabric-bytes", default=None, metavar="BYTES",
                   help="with --fabric: bytes each GPU sends its partner per exchange (default 256M on GPUs)")
    p.add_argument("--checks", default=None, metavar="FILE.toml",
                   help="another check set than the shipped one (same form as gpubench/check/checks.toml)")
    p.add_argument("--strict", action="store_true", help="WARN fails too (exit 1)")
    p.add_argument("--no-retry", action="store_true",
                   help="a figure that would FAIL is not measured again in a fresh process before it does")
    p.add_argument("--format", default=outputs.DEFAULT, choices=outputs.names(),
                   help=f"what to print (default: {outputs.DEFAULT}); {'/'.join(outputs.others())} go to --report "
                        "FILE or stdout")
    p.add_argument("--report", default=None, metavar="FILE",
                   help="write the --format output here (a .prom file for prometheus: node-exporter's textfile)")


def main(args: argparse.Namespace, argv: list[str]) -> int:
    # The check's modules read tables (pandas) and draw them (rich): loaded when the command runs, not for --help
    from gpubench.results import destination
    from gpubench.check import gather
    from gpubench.check.node import Request, run

    if args.gather:
        if not args.fleet:
            raise UsageError("--gather reads the verdicts under --fleet DIR: give the folder of the nodes' check runs")
        return gather.main(args.fleet, args.format, args.report, args.strict, args.expect_nodes, args.srun_exit)
    if args.fabric is not None:
        return _fabric(args, argv)
    outputs.check_report(args.format, args.report)
    if args.report and args.report != "-":
        destination.file(args.report, "--report")  # a report that cannot be written says so before a GPU is touched
    if args.device != 0 and args.devices == "all":
        args.devices = str(args.device)  # --device N: that GPU alone
    req = Request(backend=args.backend, devices=args.devices, out=args.out, cluster=args.cluster or default_cluster(),
                  expect=args.expect, fleet=args.fleet, strict=args.strict, retry=not args.no_retry, checks=args.checks)
    return _verdict(run(req, argv), args)


def _verdict(node, args: argparse.Namespace) -> int:
    from gpubench.console import out_console

    console = out_console()
    outputs.write(node, args.format, args.report, console)
    if not outputs.is_console(args.format) and args.report and args.report != "-":
        # the machine format went to a file: people still get the one line
        console.print(node.headline(), markup=False, highlight=False, soft_wrap=True)
    return EXIT_FAILED if node.exit_code() else EXIT_OK


def _fabric(args: argparse.Namespace, argv: list[str]) -> int:
    from gpubench.check.fabric.allocation import FabricRequest, run
    from gpubench.units import parse_size

    from gpubench.check.fabric.schedule import MODES

    outputs.check_report(args.format, args.report)
    if args.fabric not in MODES:
        raise UsageError(f"unknown fabric mode {args.fabric!r}: give one of {', '.join(MODES)}")
    if not args.timeout > 0:
        raise UsageError(f"--timeout {args.timeout:g} must be a positive number of seconds")
    floor = rate = None
    if args.expect not in (None, "none", "history"):  # an envelope's fabric_link floor (GB/s a node pair) and nic_rate (Gb/s a port), where it has them
        from gpubench.check.envelope import load_file

        entries = load_file(args.expect).entries
        floor = entries["fabric_link"].fail_at if "fabric_link" in entries else None
        rate = entries["nic_rate"].typical or entries["nic_rate"].fail_at if "nic_rate" in entries else None
    req = FabricRequest(mode=args.fabric, backend=args.backend, out=args.out, cluster=args.cluster or "fabric",
                        timeout_s=args.timeout, topology=args.topology, floor=floor, nic_rate_gbps=rate,
                        nbytes=parse_size(args.fabric_bytes) if args.fabric_bytes else None)
    node = run(req, argv)
    return EXIT_OK if node is None else _verdict(node, args)  # a rank that followed: the leader speaks for the check
