"""compare's output formats: one module each in this package, named for the format (a registry of
gpubench.registry.Formats, whose docstring says how they are found). A new format is one file here, and its test.

A format module defines
- ``compare(report, all_rows) -> str`` (or a rich renderable where ``CONSOLE`` is true: the terminal's);
- ``fleet(report) -> str``, where ``gpubench compare --fleet`` has the format (a module without one: the fleet
  view says it has no such output, exit 2);
- ``SUFFIXES``: the ``--out FILE`` suffixes that pick it (``(".md", ".markdown")``); none for stdout-only ones;
- ``CONSOLE = True`` for a format printed on the terminal and never written to a file (the default, terminal);
- ``ORDER``: where messages list it among the formats written to files.

:mod:`.common` is no format: it holds what every format shows (a row's cells, the listing, JSON values, Markdown
tables, JUnit XML).
"""

from __future__ import annotations

from types import ModuleType

from gpubench.errors import UsageError
from gpubench.registry import Formats

DEFAULT = "terminal"
SHARED = ("common",)

_FORMATS = Formats(__name__)
names, get, for_suffix, files, suffixes, is_console = (_FORMATS.names, _FORMATS.get, _FORMATS.for_suffix,
                                                         _FORMATS.files, _FORMATS.suffixes, _FORMATS.is_console)


def fleet(name: str) -> ModuleType:
    """The format's module, where it has a fleet view; a UsageError naming those that do where it has not."""
    module = get(name)
    if not hasattr(module, "fleet"):
        having = [n for n in names() if hasattr(get(n), "fleet")]
        raise UsageError(f"--fleet has no {name} output: choose {', '.join(having)}")
    return module


__all__ = ["DEFAULT", "SHARED", "names", "get", "for_suffix", "files", "suffixes", "is_console", "fleet"]
