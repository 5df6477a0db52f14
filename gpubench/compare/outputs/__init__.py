"""compare's output formats: one module each in this package, named for the format (``json_`` for json: a
trailing ``_`` keeps a module from shadowing one of Python's). A new format is one file here, and its test.

A format module defines
- ``compare(report, all_rows) -> str`` (or a rich renderable where ``CONSOLE`` is true: the terminal's);
- ``fleet(report) -> str``, where ``gpubench compare --fleet`` has the format (a module without one: the fleet
  view says it has no such output, exit 2);
- ``SUFFIXES``: the ``--out FILE`` suffixes that pick it (``(".md", ".markdown")``); none for stdout-only ones;
- ``CONSOLE = True`` for a format printed on the terminal and never written to a file (the default, terminal);
- ``ORDER``: where messages list it among the formats written to files.

The names are read from the package without importing the modules, so that ``gpubench compare --help`` lists them
without loading what they import.
"""

from __future__ import annotations

import importlib
import pkgutil
from types import ModuleType

from gpubench.errors import UsageError

DEFAULT = "terminal"


def _modules() -> dict[str, str]:
    """{format: its module's name}."""
    return {m.name.rstrip("_"): m.name for m in pkgutil.iter_modules(__path__) if not m.name.startswith("_")}


def names() -> list[str]:
    """Every format, the default first, then by name."""
    return sorted(_modules(), key=lambda n: (n != DEFAULT, n))


def get(name: str) -> ModuleType:
    modules = _modules()
    if name not in modules:
        raise UsageError(f"no output format {name!r}: choose {', '.join(names())}")
    return importlib.import_module(f"{__name__}.{modules[name]}")


def for_suffix(suffix: str) -> str | None:
    """The format an ``--out`` file's suffix names, or None."""
    for name in names():
        if suffix.lower() in getattr(get(name), "SUFFIXES", ()):
            return name
    return None


def files() -> list[str]:
    """The formats written to files, in their ORDER."""
    return sorted((n for n in names() if not is_console(n)), key=lambda n: (getattr(get(n), "ORDER", 99), n))


def suffixes() -> list[str]:
    """Each file format's first suffix, in ORDER."""
    return [get(n).SUFFIXES[0] for n in files() if getattr(get(n), "SUFFIXES", ())]


def is_console(name: str) -> bool:
    return bool(getattr(get(name), "CONSOLE", False))


def fleet(name: str) -> ModuleType:
    """The format's module, where it has a fleet view; a UsageError naming those that do where it has not."""
    module = get(name)
    if not hasattr(module, "fleet"):
        having = [n for n in names() if hasattr(get(n), "fleet")]
        raise UsageError(f"--fleet has no {name} output: choose {', '.join(having)}")
    return module


__all__ = ["DEFAULT", "names", "get", "for_suffix", "files", "suffixes", "is_console", "fleet"]
