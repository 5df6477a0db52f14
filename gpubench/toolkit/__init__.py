"""What a suite imports of gpubench: the one public surface for suite authors, built-in or plugin (as a
collective of nccl-tests fills a few hooks and common.cu does the rest). Everything here is owned elsewhere in
the library and only re-exported; a suite imports ``gpubench.toolkit`` and its submodules, nothing else of
gpubench (tests/test_suite_surface.py holds the built-in suites to it).

This module: declaring a suite — the contract (``Suite``, ``Case``, ``Workload``, ``Method``, ``Check``...), its
options, the one-line error, byte counts as people type them, the backend a case runs on and the request an
``Engine`` receives. By purpose, beside it:

- :mod:`.workloads` — what ``cases``/``prepare``/``summarize`` size, fill and place inputs with;
- :mod:`.charts` — what a suite's report charts draw with;
- :mod:`.console` — figures as text and the terminal, for messages and an engine's own output;
- :mod:`.results` — a table written or read by an engine, driver or importer of the suite's own;
- :mod:`.ranks` — what a multi-process engine or driver needs of ranks and child processes;
- :mod:`.nccl` — the nccl-tests model and its parsers;
- :mod:`.kernels` — gpubench's own Triton kernels.

A name whose owner a suite that only declares would not otherwise load (the request, the engine's sizing, the
Triton kernels...) is loaded on first use, so a suite pays for what it names. The toolkit sits on the floor
below the suites and above everything it re-exports (tests/test_layers.py); nothing in the library imports it.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from gpubench.backends import Backend, resolve_name
from gpubench.errors import UsageError
from gpubench.options import Option, names, read
from gpubench.suite import (BANDWIDTH, THROUGHPUT, TIME, Case, Check, Derived, Engine, Exporter, Graph, GridContext,
                            Importer, Method, Metric, Skip, Suite, Workload)
from gpubench.units import format_bytes, parse_size

if TYPE_CHECKING:
    from gpubench.run.request import RunRequest


def loaded_on_use(module: str, names: Mapping[str, str]) -> Callable[[str], Any]:
    """The ``__getattr__`` of a toolkit module whose ``names`` load on first use: each maps to ``"module"`` (the
    module itself) or ``"module:attribute"``."""

    def __getattr__(name: str) -> Any:
        if name not in names:
            raise AttributeError(f"module {module!r} has no attribute {name!r}")
        owner, _, attribute = names[name].partition(":")
        loaded = importlib.import_module(owner)
        return getattr(loaded, attribute) if attribute else loaded

    return __getattr__


# Only an Engine or a driver reads the request: a suite that declares a grid does not load its module.
_LAZY = {"RunRequest": "gpubench.run.request:RunRequest"}
__getattr__ = loaded_on_use(__name__, _LAZY)

__all__ = [
    "BANDWIDTH", "THROUGHPUT", "TIME", "Backend", "Case", "Check", "Derived", "Engine", "Exporter", "Graph",
    "GridContext", "Importer", "Method", "Metric", "Option", "RunRequest", "Skip", "Suite", "UsageError",
    "Workload", "format_bytes", "names", "parse_size", "read", "resolve_name",
]
