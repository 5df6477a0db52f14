"""Finding suites: the built-in ones in ``gpubench.suites`` and third-party ones under the
``gpubench.suites`` entry-point group (``[project.entry-points."gpubench.suites"] name = "pkg.mod:Class"``)."""

from __future__ import annotations

import functools
import importlib
import inspect
import pkgutil
import warnings
from collections.abc import Iterable, Mapping
from importlib.metadata import entry_points
from typing import Any

from gpubench.errors import UsageError
from gpubench.suite import Suite

ENTRY_POINT_GROUP = "gpubench.suites"


def _suites_in(module) -> list[type[Suite]]:
    return [
        obj
        for _, obj in inspect.getmembers(module, inspect.isclass)
        if issubclass(obj, Suite) and obj is not Suite and obj.__module__ == module.__name__ and "name" in vars(obj)
    ]


# The built-in suites' package, loaded by name as the entry points are: the library depends on the Suite
# contract, never on a suite (tests/test_layers.py holds it to that).
BUILTIN_PACKAGE = "gpubench.suites"


def builtin_suites() -> dict[str, type[Suite]]:
    """Each module of the suites' package, and each package (a suite of several files: its class in the
    package's ``__init__.py``), holds its suites; names starting with ``_`` are helpers."""
    pkg = importlib.import_module(BUILTIN_PACKAGE)
    found: dict[str, type[Suite]] = {}
    for info in pkgutil.iter_modules(pkg.__path__):
        if info.name.startswith("_"):
            continue  # helpers of suites, not suites
        module = importlib.import_module(f"{pkg.__name__}.{info.name}")
        for cls in _suites_in(module):
            found[cls.name] = cls
    return found


def plugin_suites() -> dict[str, type[Suite]]:
    found: dict[str, type[Suite]] = {}
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        try:
            cls = ep.load()
        except Exception as e:  # a broken plugin must not take the built-in suites down with it
            warnings.warn(f"suite plugin {ep.name!r} ({ep.value}) failed to load: {e}", stacklevel=2)
            continue
        if not (inspect.isclass(cls) and issubclass(cls, Suite)):
            warnings.warn(f"suite plugin {ep.name!r} ({ep.value}) is not a gpubench.suite.Suite", stacklevel=2)
            continue
        found[cls.name] = cls
    return found


def all_suites() -> dict[str, type[Suite]]:
    suites = builtin_suites()
    for name, cls in plugin_suites().items():
        if name in suites:
            warnings.warn(f"suite plugin {name!r} has the name of a built-in suite; the built-in one is used", stacklevel=2)
            continue
        suites[name] = cls
    return dict(sorted(suites.items()))


@functools.lru_cache(maxsize=1)
def _declared() -> dict[str, type[Suite]]:
    return all_suites()  # read per row below, so loaded once


def roof(row: Mapping[str, Any]) -> str | None:
    """The roof a row's figure is held against: its ``roof`` column, or, for a row written before rows carried
    one, what its suite declares of it (``Suite.roof``); None: none, or a suite not installed here."""
    value = row.get("roof")
    if isinstance(value, str):
        return value
    cls = _declared().get(str(row.get("suite")))
    return cls.roof(row) if cls else None


def point_label(row: Mapping[str, Any]) -> str:
    """How a chart's legend names the series of a row (``Suite.point_label``; the suite's name where unknown)."""
    cls = _declared().get(str(row.get("suite")))
    return cls.point_label(row) if cls else str(row.get("suite"))


def check_names(names: str | list[str], known: Iterable[str]) -> list[str]:
    """``"a,b"`` → ``["a", "b"]``; none given, or a name not in ``known``, is a UsageError listing the known ones."""
    if isinstance(names, str):
        names = [n.strip() for n in names.split(",") if n.strip()]
    if not names:
        raise UsageError("no suite given: pass --suite NAME (see gpubench list)")
    known = list(known)
    unknown = [n for n in names if n not in known]
    if unknown:
        raise UsageError(f"unknown suite {', '.join(map(repr, unknown))}: choose from {', '.join(known)} (gpubench list)")
    return names


def select(names: str | list[str]) -> list[Suite]:
    """``"a,b"`` → instances of suites a and b; an unknown name is a UsageError listing the known ones."""
    known = all_suites()
    names = check_names(names, known)
    return [known[n]() for n in dict.fromkeys(names)]
