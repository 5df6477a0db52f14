"""``gpubench export RUN``'s own formats, written from any suite's rows: one module per format, as compare's
outputs (gpubench.compare.outputs), in a registry of gpubench.registry.Formats. A new format is one file here, and
its test; ``gpubench export`` lists what is here beside the history's formats (gpubench.report.history.outputs) and
the formats the suites declare (gpubench.suite.Exporter).

A format module defines ``export(run, out) -> (text, line)``: the rows of ``run`` (a run directory or a table) in
the format, and the line the command says once the text is written to ``out``; a run it cannot export is a
UsageError saying why.
"""

from __future__ import annotations

from gpubench.registry import Formats

DEFAULT = "pytest-benchmark"

_FORMATS = Formats(__name__)
names, get = _FORMATS.names, _FORMATS.get

__all__ = ["DEFAULT", "names", "get"]
