"""Which NCCL/RCCL settings a sweep may change, and the grid of configurations it tries.

Sweepable: algorithm, protocol, channels/CTAs, buffer size, threads — NCCL's tuning knobs, read at communicator
init. Never swept: site settings (network interfaces, IB, P2P level, plugins, topology files) and NVLink SHARP /
multicast (``NCCL_NVLS_ENABLE`` stays as the environment sets it): a sweep records them, and refuses a grid
that names them. RCCL reads the same ``NCCL_*`` names; gloo, the CPU backend's library, reads none of them, so a
sweep there is refused (every configuration would measure the same thing, and the winner would be a draw).
"""

from __future__ import annotations

import itertools
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from gpubench.toolkit import UsageError
from gpubench.toolkit.results import MIN_RUNS

SWEEPABLE = ("NCCL_ALGO", "NCCL_PROTO", "NCCL_MIN_NCHANNELS", "NCCL_MAX_NCHANNELS", "NCCL_MIN_CTAS",
             "NCCL_MAX_CTAS", "NCCL_BUFFSIZE", "NCCL_NTHREADS")
# Site-specific or unsafe to vary: recorded, never swept.
SITE = re.compile(r"^(NCCL_(IB_|SOCKET_|NET|P2P_|SHM_|CROSS_NIC|TOPO_|TUNER_|COLLNET|NVLS|GDR|CUMEM|MNNVL|CONF)"
                  r"|RCCL_)")
# Without a grid: algorithm × protocol, what the acceptance sweeps first.
DEFAULT_GRID = {"NCCL_ALGO": ["Ring", "Tree"], "NCCL_PROTO": ["LL", "LL128", "Simple"]}
DEFAULT = "default"
# The backends whose collectives read these knobs: NCCL, RCCL (the same NCCL_* names), and the fake device, which
# honours them where GPUBENCH_FAKE_KNOBS says (tests). Any other (cpu: gloo) reads none.
READERS = frozenset({"cuda", "hip", "fake"})
# The default configuration's runs in a sweep: the fewest from which compare knows how far a figure moves between
# runs, the noise a winner must beat (winners.py).
DEFAULT_RUNS = MIN_RUNS


@dataclass(frozen=True)
class Config:
    """One configuration: the knobs it sets (none for the environment's own, ``default``)."""

    env: tuple[tuple[str, str], ...] = ()
    repeat: int = 1  # which run of this configuration (the default runs several times: its noise)

    @property
    def name(self) -> str:
        return ",".join(f"{k}={v}" for k, v in self.env) or DEFAULT

    @property
    def label(self) -> str:
        """The configuration in its rows' case ids: its name, and which run of it after the first."""
        return f"{self.name},repeat={self.repeat}" if self.repeat > 1 else self.name

    def get(self, knob: str) -> str | None:
        return dict(self.env).get(knob)


def parse_knobs(items: Sequence[str]) -> dict[str, list[str]]:
    """``--knob NCCL_ALGO=Ring,Tree`` (repeatable) → {knob: values}."""
    grid: dict[str, list[str]] = {}
    for item in items:
        name, sep, values = item.partition("=")
        name = name.strip()
        vals = [v.strip() for v in values.split(",") if v.strip()]
        if not sep or not name or not vals:
            raise UsageError(f"bad --knob {item!r}: write NAME=VALUE[,VALUE...], e.g. NCCL_PROTO=LL,Simple")
        grid.setdefault(name, []).extend(v for v in vals if v not in grid.get(name, []))
    return check(grid)


def load_grid(path: str | os.PathLike) -> dict[str, list[str]]:
    """A TOML file with a ``[knobs]`` table: ``NCCL_ALGO = ["Ring", "Tree"]``."""
    try:
        import tomllib
    except ModuleNotFoundError:  # Python < 3.11
        import tomli as tomllib
    try:
        data = tomllib.loads(Path(path).read_text())
    except (OSError, ValueError) as e:
        raise UsageError(f"cannot read --grid {path}: {e}") from e
    knobs = data.get("knobs")
    if not isinstance(knobs, dict) or not knobs:
        raise UsageError(f"--grid {path} has no [knobs] table: add e.g. NCCL_ALGO = [\"Ring\", \"Tree\"]")
    grid = {}
    for k, v in knobs.items():
        values = v if isinstance(v, list) else [v]
        grid[str(k)] = [str(x) for x in values]
    return check(grid)


def check(grid: Mapping[str, Sequence[str]]) -> dict[str, list[str]]:
    for knob in grid:
        if SITE.match(knob):
            raise UsageError(f"{knob} is a site setting: gpubench records it and never sweeps it (sweep "
                             f"{', '.join(SWEEPABLE)})")
        if knob not in SWEEPABLE:
            raise UsageError(f"{knob} is not a knob gpubench sweeps: choose from {', '.join(SWEEPABLE)}")
        if not grid[knob]:
            raise UsageError(f"{knob} has no values to sweep")
    return {k: list(v) for k, v in grid.items()}


def configs(grid: Mapping[str, Sequence[str]]) -> list[Config]:
    """The environment's own configuration first (the baseline every winner is held against), then the grid's
    product in the order the knobs were given."""
    names = list(grid)
    out = [Config()]
    for values in itertools.product(*(grid[k] for k in names)):
        out.append(Config(tuple(zip(names, values))))
    return out


def schedule(cfgs: Sequence[Config], default_runs: int = DEFAULT_RUNS) -> list[Config]:
    """The order a sweep runs ``cfgs`` (the default first): the default again, ``default_runs`` times in all, spread
    evenly through the others and last, so that a drift of the machine over the sweep shows in the default's runs."""
    default, others = cfgs[0], list(cfgs[1:])
    out, done = [default], 0
    for r in range(2, default_runs + 1):
        upto = round((r - 1) * len(others) / (default_runs - 1))
        out += others[done:upto] + [Config(default.env, repeat=r)]
        done = upto
    return out + others[done:]


def check_backend(backend: str, grid: Mapping[str, Sequence[str]]) -> None:
    """Refuse knobs that the backend's collectives do not read: a sweep there would crown a draw of the noise."""
    if backend not in READERS:
        library = "gloo" if backend == "cpu" else f"the {backend} backend's library"
        raise UsageError(f"the {backend} backend's collectives run over {library}, which reads none of NCCL's knobs "
                         f"({', '.join(grid)}): every configuration would measure the same; sweep them with "
                         f"--backend cuda (NCCL) or hip (RCCL)")


def in_force(env: Mapping[str, str] | None = None) -> dict[str, str]:
    """The NCCL/RCCL settings of the environment the sweep starts from: recorded with the run."""
    env = os.environ if env is None else env
    return {k: v for k, v in sorted(env.items()) if k.startswith(("NCCL_", "RCCL_")) and "KEY" not in k
            and "TOKEN" not in k}


__all__ = ["Config", "SWEEPABLE", "DEFAULT", "DEFAULT_GRID", "DEFAULT_RUNS", "READERS", "parse_knobs", "load_grid",
           "check", "configs", "schedule", "check_backend", "in_force"]
