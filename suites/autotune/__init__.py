"""``autotune``: NCCL/RCCL knob sweeps that end in a winner table and exports (its modules beside this file).

Not timed by the engine directly: each configuration needs fresh processes (NCCL reads its settings once per
process), so the suite drives child comm runs, each timed by the engine as the comm suite always is, and
gathers their rows under a ``config`` column. ``gpubench run --suite autotune [--knob NCCL_ALGO=Ring,Tree ...]
[--grid FILE.toml] [--budget MINUTES]`` plus the comm options (sizes, collectives, dtype, --nproc).

The kernel-config sweep (Triton launch shapes) is its own suite, ``autotune-kernels``: it runs in-process through
the engine like any suite, since Triton configurations need no fresh process.
"""

from __future__ import annotations

from typing import Any

from gpubench.toolkit import Engine, Option, RunRequest, Suite, read
from gpubench.suites.comm import Comm
from gpubench.suites.autotune import charts as charts_autotune
from gpubench.suites.autotune import sweep
from gpubench.suites.comm import table as commtable


def _positive(value: float, _: Any) -> str | None:
    return None if value > 0 else f"--budget {value} must be a positive number of minutes"


def _drive(request: RunRequest) -> int:
    """The suite's run: each configuration a child comm run, their rows gathered into this suite's table."""
    read(Comm.options, request.what.given)  # the child runs' options are checked here, once, before any starts
    return sweep.run(request, Autotune.version, Autotune.params, Comm())


class Autotune(Suite):
    name = "autotune"
    version = 1
    backends = frozenset({"cuda", "hip", "cpu", "fake"})
    metrics = commtable.METRICS
    description = "NCCL/RCCL knob sweep over comm's collectives: per-size winners, env file, tuner CSV"
    params = ("config", *commtable.PARAMS)
    shown = ("busbw",)
    # Runs its own driver instead of the engine's case loop: the CLI hands it the run's request.
    driver = Engine("autotune", _drive,
                    alone="autotune runs alone (its child comm runs start their own ranks): use --suite autotune, "
                          "without --devices or --engine")
    chart_order = 70
    # Its own; the child runs take the comm suite's options as the user gave them (listed under comm).
    options = (
        Option("knob", "a knob and its values to sweep, repeatable, e.g. NCCL_PROTO=LL,Simple (default: NCCL_ALGO "
                       "Ring,Tree × NCCL_PROTO LL,LL128,Simple)", many=True, metavar="NAME=V1,V2"),
        Option("grid", "the knobs in a TOML [knobs] table instead", metavar="FILE.toml"),
        Option("budget", "start no configuration that would end past this; the rest are recorded as skipped",
               float, metavar="MINUTES", check=_positive),
    )

    @classmethod
    def charts(cls, runs, out):
        return charts_autotune.autotune(runs, out)
