"""The nightly history's outputs: one module per format, as compare's (gpubench.compare.outputs), in a registry of
gpubench.registry.Formats. The page (the default: ``gpubench report DIR`` and ``gpubench compare --history`` draw
it into a folder) and the files ``gpubench export DIR --format NAME`` writes of the same document (history-csv,
history-json). A new format is one file here, and its test; ``gpubench export`` lists every format here but the
page (:func:`others`).

A format module defines ``history(doc) -> str``: the history document (gpubench.report.history.document) in the
format.
"""

from __future__ import annotations

from gpubench.registry import Formats

DEFAULT = "page"

_FORMATS = Formats(__name__)
names, get, others = _FORMATS.names, _FORMATS.get, _FORMATS.others


__all__ = ["DEFAULT", "names", "get", "others"]
