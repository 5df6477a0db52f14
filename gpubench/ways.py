"""The other ways into and out of a suite's table than gpubench's own case loop, each a small object a suite
declares (``Suite.driver``, ``Suite.engines``, ``Suite.importers``, ``Suite.exporters``) and a command finds by
name in the suites' declarations (gpubench.declared.way, which imports the declaring suite alone): the command that
reaches one never asks which suite it belongs to.

- An :class:`Engine` runs a suite's grid another way and writes the suite's own table: ``gpubench run --engine
  NAME`` (comm: the nccl-tests binaries), or, as a suite's ``driver``, always in place of the case loop
  (autotune: a child comm run per NCCL configuration).
- An :class:`Importer` turns another tool's logs into a run of the suite's table (``gpubench import TOOL``).
- An :class:`Exporter` writes a run's rows in another tool's format (``gpubench export --format NAME``).

A new one is one file beside its suite (its function) and a line in the suite's class; tests/test_ways.py holds
each built-in one to be reachable by its name.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Engine:
    """``run(request)`` (a gpubench.request.RunRequest; its exit status) measures the suite's grid its own way."""

    name: str
    run: Callable[[Any], int]
    # Options of the suite that only this engine reads (their ``dest``): given to another engine, a usage error.
    own_options: tuple[str, ...] = ()
    # For a driver: why it cannot share a run with other suites, ``--devices`` or ``--engine`` (the usage error).
    alone: str = ""


@dataclass(frozen=True)
class Importer:
    """``read(paths, tool=..., out=..., cluster=..., collective=..., argv=..., ranks=...)`` writes a run directory
    of the suite's table from ``paths`` and returns what it read, for the command to print: ``runs`` (each with
    ``rows``, ``source``, ``line``, ``tool``, ...), ``failed``, ``warnings``, ``invalid`` and ``run_dir`` (the comm
    suite's importer is the model)."""

    name: str
    read: Callable[..., Any]


@dataclass(frozen=True)
class Exporter:
    """``write(table, meta)``: the text of a run's rows (a results table with its run.json ``meta``) in this
    format, and one line saying what it holds."""

    name: str
    write: Callable[[Any, dict[str, Any]], tuple[str, str]]
    # What the command says where the run has none of the suite's rows.
    needs: str = ""


__all__ = ["Engine", "Importer", "Exporter"]
