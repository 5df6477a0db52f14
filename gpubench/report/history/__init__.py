"""``gpubench report DIR``: the nightly history of a directory of runs (as ci/nightly.sh keeps them), one page.

Per suite, a small multiple of every figure over the nights: the median with the interquartile range of its
samples, the band of the baseline window the gate judged each night against, the nights the gate found WORSE
(since when), the nights it recovered, what people accepted and why, the nights the settings changed (with what
changed) and the nights measured on a shared GPU or a busy host (hollow); worst recent change first, a filter
box, each figure's table on click. The same series are data: ``gpubench export DIR --format history-json`` (the
document the page embeds) or ``history-csv``. Modules: :mod:`.nights` reads the directory, :mod:`.series` and
:mod:`.gate` make each figure's series and marks, :mod:`.document` the data, :mod:`.outputs` the page and the
data's files, one module per format.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpubench.results import destination
from gpubench.compare.load import DEFAULT_WINDOW
from gpubench.errors import UsageError
from gpubench.report.history import document, nights, series
from gpubench.report.history.nights import is_directory_of_runs
from gpubench.report.history.outputs import page

PAGE = page.PAGE


@dataclass(frozen=True)
class Ask:
    """What the history is asked for: nights from ``since`` on, the ``last`` of them, figures whose ``suite case
    metric`` matches ``pattern``, a baseline ``window`` of that many nights (the gate's --baseline-window)."""

    since: str | None = None
    last: int | None = None
    pattern: str | None = None
    window: int = DEFAULT_WINDOW

    def __post_init__(self):
        if self.last is not None and self.last < 1:
            raise UsageError(f"--last {self.last}: give a number of nights, 1 or more")
        if self.window < 1:
            raise UsageError(f"--baseline-window {self.window}: give a number of runs, 1 or more")

    def options(self) -> dict[str, Any]:
        return {"since": self.since, "last": self.last, "filter": self.pattern, "baseline-window": self.window}


def build(directory: str | os.PathLike, ask: Ask = Ask(), max_points: int = document.MAX_POINTS) -> dict[str, Any]:
    """The history document of ``directory`` (see :mod:`.document`)."""
    data = nights.read(directory, ask.since, ask.last)
    figs = series.figures(data, ask.pattern, ask.window)
    return document.build(data, figs, options=ask.options(), max_points=max_points)


def write(directory: str | os.PathLike, out: str | os.PathLike, ask: Ask = Ask()) -> tuple[Path, dict[str, Any]]:
    """Write the page of ``directory`` as ``out/index.html``; (its path, its document). Nothing is created
    before the document is made, so a directory that cannot be drawn leaves no folder behind."""
    doc = build(directory, ask)
    folder = destination.folder(out)
    return destination.write_text(folder / PAGE, page.history(doc)), doc


__all__ = ["Ask", "build", "write", "is_directory_of_runs", "PAGE"]
