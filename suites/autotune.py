"""``autotune``: NCCL/RCCL knob sweeps that end in a winner table and exports (gpubench.autotune).

Not timed by the engine directly: each configuration needs fresh processes (NCCL reads its settings once per
process), so the suite drives child comm runs, each timed by the engine as the comm suite always is, and
gathers their rows under a ``config`` column. ``gpubench run --suite autotune [--knob NCCL_ALGO=Ring,Tree ...]
[--grid FILE.toml] [--budget MINUTES]`` plus the comm options (sizes, collectives, dtype, --nproc).

The kernel-config sweep (Triton launch shapes) is its own suite, ``autotune-kernels``: it runs in-process through
the engine like any suite, since Triton configurations need no fresh process.
"""

from __future__ import annotations

from typing import Any, ClassVar

from gpubench import commtable
from gpubench.suite import Suite


class Autotune(Suite):
    name = "autotune"
    version = 1
    backends = frozenset({"cuda", "hip", "cpu", "fake"})
    metrics = commtable.METRICS
    description = "NCCL/RCCL knob sweep over comm's collectives: per-size winners, env file, tuner CSV"
    params = ("config", *commtable.PARAMS)
    shown = ("busbw",)
    # Runs its own driver instead of the engine's case loop: the CLI hands it the command line.
    drives: ClassVar[bool] = True

    def drive(self, args: Any, argv: list[str], cluster: str) -> int:
        from gpubench.autotune import sweep

        return sweep.run(args, argv, cluster, self.version, self.params)
