"""Finding what is installed by name: suites, the built-in ones in ``gpubench.suites`` and third-party ones under
the ``gpubench.suites`` entry-point group (``[project.entry-points."gpubench.suites"] name = "pkg.mod:Class"``);
and output formats, one module each in their owner's package (:class:`Formats`: compare's, check's, export's and
the history page's outputs)."""

from __future__ import annotations

import ast
import functools
import importlib
import inspect
import pkgutil
import sys
import warnings
from collections.abc import Iterable, Mapping
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

from gpubench.errors import UsageError

if TYPE_CHECKING:
    from gpubench.suite import Suite

ENTRY_POINT_GROUP = "gpubench.suites"


def _suites_in(module) -> list[type[Suite]]:
    # The suite contract is imported where suites are looked for: a --help that lists formats has no use for it.
    from gpubench.suite import Suite

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


def entry_points(group: str) -> Any:
    """importlib.metadata's, imported when suites are looked for (email, zipfile and csv come with it)."""
    from importlib.metadata import entry_points as installed

    return installed(group=group)


def plugin_suites() -> dict[str, type[Suite]]:
    from gpubench.suite import Suite

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


class Formats:
    """The formats of a package of output formats: one module each, named for its format (``json_`` is json, a
    trailing ``_`` keeping a module from shadowing one of Python's; ``history_csv`` is history-csv).

    The package's ``__init__`` names its ``DEFAULT`` format and, in ``SHARED``, its modules that are no format but
    what the formats share. A format module declares its ``SUFFIXES`` (a file's suffixes that are it), ``CONSOLE``
    (drawn on the terminal, not printed as text), ``ORDER`` (where messages list it among the files) and what its
    owner's contract adds. Each is a literal at the top of its file and read from the source: a command lists the
    formats, their suffixes and kinds without importing the package or a format module (the results and the
    report import pandas; --help stays quick). :meth:`get` imports the module that renders."""

    def __init__(self, package: str):
        self.package = package

    def _folders(self) -> list[str]:
        module = sys.modules.get(self.package)
        if module is not None:
            return list(module.__path__)
        # Not imported: where its name lays it out below gpubench's folder, so that its parents are not imported.
        top, *rest = self.package.split(".")
        return [str(Path(p, *rest)) for p in importlib.import_module(top).__path__]

    def _package(self) -> dict[str, Any]:
        return _literals(Path(self._folders()[0]) / "__init__.py")

    @property
    def default(self) -> str:
        return self._package()["DEFAULT"]

    def _modules(self) -> dict[str, tuple[str, Path]]:
        """{format: (its module's name, its file)}."""
        shared = set(self._package().get("SHARED", ()))
        found: dict[str, tuple[str, Path]] = {}
        for m in pkgutil.iter_modules(self._folders()):
            if m.name.startswith("_") or m.name in shared:
                continue
            where = Path(getattr(m.module_finder, "path", ""), m.name)
            found[m.name.rstrip("_").replace("_", "-")] = (m.name, where / "__init__.py" if m.ispkg else
                                                                 where.with_suffix(".py"))
        return found

    def names(self) -> list[str]:
        """Every format, the default first, then by name."""
        default = self.default
        return sorted(self._modules(), key=lambda n: (n != default, n))

    def others(self) -> list[str]:
        """Every format but the default, by name."""
        return [n for n in self.names() if n != self.default]

    def _module(self, name: str) -> tuple[str, Path]:
        modules = self._modules()
        if name not in modules:
            raise UsageError(f"no output format {name!r}: choose {', '.join(self.names())}")
        return modules[name]

    def declared(self, name: str, key: str, default: object = None) -> Any:
        """What the format ``name`` declares as ``key`` (SUFFIXES, CONSOLE, ...), read from its source."""
        return _literals(self._module(name)[1]).get(key, default)

    def get(self, name: str) -> ModuleType:
        return importlib.import_module(f"{self.package}.{self._module(name)[0]}")

    def for_suffix(self, suffix: str) -> str | None:
        """The format a file's suffix names, or None."""
        return next((n for n in self.names() if suffix.lower() in self.declared(n, "SUFFIXES", ())), None)

    def is_console(self, name: str) -> bool:
        return bool(self.declared(name, "CONSOLE", False))

    def files(self) -> list[str]:
        """The formats written to files (those not CONSOLE), in their ORDER."""
        return sorted((n for n in self.names() if not self.is_console(n)),
                      key=lambda n: (self.declared(n, "ORDER", 99), n))

    def suffixes(self) -> list[str]:
        """Each file format's first suffix, in ORDER."""
        return [s[0] for s in (self.declared(n, "SUFFIXES", ()) for n in self.files()) if s]


@functools.lru_cache(maxsize=64)
def _read_literals(path: Path, stamp: tuple[int, int]) -> dict[str, Any]:
    found: dict[str, Any] = {}
    for node in ast.parse(path.read_text(encoding="utf-8"), str(path)).body:
        target = node.targets[0] if isinstance(node, ast.Assign) and len(node.targets) == 1 else \
            node.target if isinstance(node, ast.AnnAssign) and node.value is not None else None
        if isinstance(target, ast.Name) and target.id.isupper():
            try:
                found[target.id] = ast.literal_eval(node.value)
            except (ValueError, TypeError):
                pass  # not a literal (a path, a compiled pattern): nothing the registry reads
    return found


def _literals(path: Path) -> dict[str, Any]:
    """The ``NAME = literal`` assignments at the top of a module's source (read again once it changes)."""
    st = path.stat()
    return _read_literals(path, (st.st_mtime_ns, st.st_size))
