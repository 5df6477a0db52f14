"""What ``gpubench run`` was asked to do, typed and checked: made once from the command line by
:mod:`gpubench.commands.run`, and all the layers below it (the runner, the ranks, the fleet, the autotune and
nccl-tests drivers) read. None of them sees the parsed command line itself, so what each needs is in its signature.

Three parts: what to run (:class:`Selection`), where (:class:`Placement`), and how (:class:`Conduct`); and the
command line as typed, which the processes a run starts for its ranks are given again.
"""

from __future__ import annotations

import base64
import pickle
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from gpubench.options import Options
from gpubench.suite import Suite


def _frozen(values: Mapping[str, Any]) -> Mapping[str, Any]:
    return MappingProxyType(dict(values))


@dataclass(frozen=True)
class Selection:
    """What to run: the suites, the cases among their grids, and the suites' own options."""

    suites: tuple[Suite, ...] = ()
    case_filter: str | None = None  # --filter: a regular expression over case ids
    sizes: tuple[int, ...] | None = None  # --sizes in bytes; None: not given
    dtypes: tuple[str, ...] | None = None  # --dtype, split
    dtype_text: str | None = None  # --dtype as typed: a child run is given it back unchanged
    search: bool = False  # --search
    # Every declared suite option's value as given (its dest → value, the default where not given), the
    # suites not selected included: a driver's child runs take the options of the suite they run.
    given: Mapping[str, Any] = field(default_factory=dict)
    # The selected suites' options, read and checked (suite name → its values).
    options: Mapping[str, Options] = field(default_factory=dict)

    def __post_init__(self):
        object.__setattr__(self, "given", _frozen(self.given))
        object.__setattr__(self, "options", _frozen(self.options))

    def __reduce__(self) -> tuple[Any, ...]:
        """Pickled whole, its frozen mappings as dicts (a run's request goes to the processes it starts)."""
        return (Selection, (self.suites, self.case_filter, self.sizes, self.dtypes, self.dtype_text, self.search,
                            dict(self.given), dict(self.options)))


@dataclass(frozen=True)
class Placement:
    """Where: the backend and device, the ranks of a multi-process suite, the devices of a fleet run."""

    backend: str = "auto"  # --backend as given: auto or a backend's name
    device: int = 0  # --device
    devices: str | None = None  # --devices as given (all, or a list of indices); None: one device
    nproc: int | None = None  # --nproc: ranks to start here when no launcher started them; None: one per GPU
    timeout: float = 60.0  # --timeout: seconds a rank may make no progress before the run ends

    @property
    def fleet(self) -> bool:
        return self.devices is not None


DEFAULT_TIMEOUT_S = Placement.timeout  # --timeout when not given

# --processes when not given: the figures the host sets are measured in this process and two fresh ones
# (gpubench.run.per_process).
DEFAULT_PROCESSES = 3


@dataclass(frozen=True)
class Conduct:
    """How: budgets, telemetry, processes per figure, and where the run directory goes."""

    quick: bool = False
    telemetry: bool = True  # False: --no-telemetry
    processes: int = 1  # --processes
    out: str = "results"  # --out: the results root
    cluster: str = "local"  # --cluster (checked), or the host's name


@dataclass(frozen=True)
class RunRequest:
    """One ``gpubench run``, checked: nothing in it can fail a run's start (a device may still be missing)."""

    what: Selection = field(default_factory=Selection)
    where: Placement = field(default_factory=Placement)
    how: Conduct = field(default_factory=Conduct)
    argv: tuple[str, ...] = ("gpubench",)  # as typed, the program first: ranks and fleet workers run it again

    def __post_init__(self):
        object.__setattr__(self, "argv", tuple(self.argv))


def dumps(request: RunRequest) -> str:
    """``request`` as one line of text, for a process this one starts (the check's stations, a run's workers)."""
    return base64.b64encode(pickle.dumps(request)).decode()


def loads(text: str) -> RunRequest:
    """The request :func:`dumps` wrote."""
    request = pickle.loads(base64.b64decode(text))
    if not isinstance(request, RunRequest):
        raise TypeError(f"not a run's request: {type(request).__name__}")
    return request


__all__ = ["Selection", "Placement", "Conduct", "RunRequest", "DEFAULT_PROCESSES", "DEFAULT_TIMEOUT_S", "dumps",
           "loads"]
