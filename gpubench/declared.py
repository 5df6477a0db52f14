"""What the suites declare (name, version, backends, metrics, description, options, the names of their engines,
importers and exporters, and where their class is), read without importing them.

A suite's module imports torch, and through the library pandas and matplotlib: seconds on a busy machine. The
command line needs only the declarations for ``gpubench list``, ``gpubench run --help`` and a mistyped ``--suite``,
so it reads them from a cache that the first such command after an install or an edit writes (it pays the
import once). The cache is keyed on every source file of gpubench and of the built-in
suites (path, size, modification time), on the suite plugins' entry points and on the interpreter, so an edit or an
install is never answered from an old copy; where it cannot be written (a read-only home) the suites are imported
each time, as before.
"""

from __future__ import annotations

import hashlib
import importlib
import inspect
import json
import os
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import gpubench
from gpubench import __version__
from gpubench.errors import UsageError
from gpubench.options import Option
from gpubench.suite import Metric, Suite

# Bump when what is stored changes: an old cache is then rebuilt, never misread.
# 1: name, version, backends, metrics, description, options. 2: source and ways. 3: per_process.
FORMAT = 3
# The kinds of gpubench.suite a suite declares, by the name of its class attribute.
WAY_KINDS = ("engines", "importers", "exporters")


@dataclass(frozen=True)
class Declared:
    """A suite's declaration: the attributes of its class that the command line reads (duck-types the class for
    ``gpubench list`` and the ``run`` parser)."""

    name: str
    version: int
    backends: frozenset[str]
    metrics: tuple[Metric, ...]
    description: str
    options: tuple[Option, ...]
    # ``module:qualname`` of the class: :func:`suite_class` imports that suite alone to reach one of its ways.
    source: str = ""
    ways: tuple[tuple[str, str], ...] = ()  # (kind, name) of each Engine, Importer and Exporter it declares
    # Whether it may set cases per process (its class has its own Suite.per_process): the run then starts its
    # workers before it imports the suites (gpubench.run.prestart).
    per_process: bool = False


def of(cls: type[Suite]) -> Declared:
    """The declaration of a suite class. An option's ``type`` and ``check`` are code, not kept: a parser built from
    declarations reads every value as text (the run parses again with the suites themselves)."""
    options = tuple(Option(o.name, o.help, default=o.default, switch=o.switch, many=o.many, choices=o.choices,
                           metavar=o.metavar) for o in cls.options)
    ways = tuple((kind, w.name) for kind in WAY_KINDS for w in getattr(cls, kind, ()))
    return Declared(cls.name, int(cls.version), frozenset(cls.backends), tuple(cls.metrics), cls.description or "",
                    options, f"{cls.__module__}:{cls.__qualname__}", ways,
                    getattr(cls, "per_process", Suite.per_process) is not Suite.per_process)


def suites() -> list[Declared]:
    """Every registered suite's declaration, by name: from the cache when it is current, else from the suites
    (imported, then cached)."""
    key = _key()
    path = _cache_file()
    found = _read(path, key)
    if found is not None:
        return found
    from gpubench.registry import all_suites  # the suites' modules: torch and the rest

    return remember(list(all_suites().values()), key, path)


def remember(classes: list[Any], key: str | None = None, path: Path | None = None) -> list[Declared]:
    """The declarations of ``classes`` (every registered suite), written to the cache for the next command."""
    found = [of(cls) for cls in classes]
    _write(path or _cache_file(), key or _key(), found)
    return found


def _cache_file() -> Path:
    home = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    # One file per interpreter and installation: two checkouts or venvs never overwrite each other's.
    where = hashlib.sha256(f"{sys.executable}\0{Path(gpubench.__file__).resolve()}".encode()).hexdigest()[:16]
    return Path(home) / "gpubench" / f"suites-{where}.json"


def _sources() -> list[Path]:
    """gpubench's own folder and the built-in suites' (a checkout's suites/, or gpubench/suites installed)."""
    from gpubench.registry import BUILTIN_PACKAGE

    # The package alone, by name as the registry loads it (its __init__ is empty): its __path__ says where they are.
    package = importlib.import_module(BUILTIN_PACKAGE)
    return list(dict.fromkeys([Path(gpubench.__file__).resolve().parent, *(Path(p).resolve() for p in package.__path__)]))


def _key() -> str:
    """What the declarations depend on: this interpreter and gpubench's version, every source file's path, size and
    modification time, and the suite plugins' entry points with their distributions and modules' files."""
    h = hashlib.sha256(f"{FORMAT}\0{__version__}\0{sys.version}\0{sys.executable}".encode())
    for folder in _sources():
        for f in sorted(folder.rglob("*.py")):
            try:
                st = f.stat()
            except OSError:
                continue
            h.update(f"{f}\0{st.st_size}\0{st.st_mtime_ns}\n".encode())
    for line in _plugins():
        h.update(f"{line}\n".encode())
    return h.hexdigest()


def _plugins() -> list[str]:
    from importlib.metadata import entry_points

    from gpubench.registry import ENTRY_POINT_GROUP

    out = []
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        dist = getattr(ep, "dist", None)
        out.append(f"{ep.name}={ep.value} {getattr(dist, 'name', '')} {getattr(dist, 'version', '')} "
                   f"{_stamp(ep.value.partition(':')[0])}")
    return out


def _stamp(module: str) -> str:
    """The size and modification time of a plugin module's file (an editable plugin changes without a new version)."""
    from importlib.util import find_spec

    try:
        spec = find_spec(module)
        st = Path(spec.origin).stat() if spec is not None and spec.origin else None
    except (ImportError, ValueError, OSError):
        return "?"
    return f"{st.st_size} {st.st_mtime_ns}" if st else "?"


def _read(path: Path, key: str) -> list[Declared] | None:
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
        if doc.get("key") != key:
            return None
        return [_declared(d) for d in doc["suites"]]
    except (OSError, ValueError, KeyError, TypeError):
        return None  # none yet, another version's, or half-written by a crash: rebuilt


def _declared(d: dict[str, Any]) -> Declared:
    options = tuple(Option(**{**o, "choices": tuple(o["choices"]) if o["choices"] else None}) for o in d["options"])
    return Declared(d["name"], d["version"], frozenset(d["backends"]), tuple(Metric(*m) for m in d["metrics"]),
                    d["description"], options, d["source"], tuple((k, n) for k, n in d["ways"]), d["per_process"])


def _jsonable(value: object) -> Any:
    """An option's default as JSON keeps it (a tuple becomes a list); anything else as its text, which is what
    ``--help`` shows of it."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    return str(value)


def _write(path: Path, key: str, found: list[Declared]) -> None:
    doc = {"key": key, "suites": [
        {"name": d.name, "version": d.version, "backends": sorted(d.backends), "description": d.description,
         "metrics": [[m.name, m.unit, m.better] for m in d.metrics],
         "options": [{"name": o.name, "help": o.help, "default": _jsonable(o.default), "switch": o.switch,
                      "many": o.many, "choices": list(o.choices) if o.choices else None, "metavar": o.metavar}
                     for o in d.options],
         "source": d.source, "ways": [list(w) for w in d.ways], "per_process": d.per_process}
        for d in found]}
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        # Whole or not at all: another command may read it meanwhile.
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".suites-", suffix=".tmp")
    except OSError:
        return  # a read-only home: the next command imports the suites again
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(doc, f)
        os.replace(tmp, path)
    except OSError:
        Path(tmp).unlink(missing_ok=True)  # a full disk: nothing half-written is left


def ways(kind: str) -> dict[str, str]:
    """Every ``kind`` ("engines", "importers" or "exporters": gpubench.suite) the installed suites declare, by
    name, with the name of the suite that declares it (the first where two do): read from the suites'
    declarations, so that no suite is imported to learn it."""
    found: dict[str, str] = {}
    for d in suites():
        for k, name in d.ways:
            if k == kind:
                found.setdefault(name, d.name)
    return found


def way(kind: str, name: str) -> tuple[Any, Any]:
    """The suite that declares the ``kind`` called ``name``, and the object, importing that suite alone; a
    UsageError naming those there are where none is."""
    known = ways(kind)
    if name not in known:
        what = {"engines": "runs with --engine", "importers": "imports logs of", "exporters": "exports"}[kind]
        raise UsageError(f"no suite {what} {name!r}: choose from {', '.join(sorted(known)) or 'none installed'}")
    cls = suite_class(known[name])
    return cls, next(w for w in getattr(cls, kind) if w.name == name)


def suite_class(name: str) -> Any:
    """The class of the suite called ``name``, importing its module alone where its declaration says where it is
    (``gpubench import`` needs comm's, not torch through the others'); else from every suite."""
    from gpubench.registry import all_suites  # the full search, where the declaration's place is stale

    for d in suites():
        if d.name != name or not d.source:
            continue
        module, _, qualname = d.source.partition(":")
        try:
            obj: Any = importlib.import_module(module)
            for part in qualname.split("."):
                obj = getattr(obj, part)
        except (ImportError, AttributeError):
            break  # moved since the declarations were read: the full search below finds it
        if inspect.isclass(obj) and issubclass(obj, Suite) and obj.name == name:
            return obj
    return all_suites()[name]


__all__ = ["Declared", "FORMAT", "WAY_KINDS", "of", "remember", "suites", "ways", "way", "suite_class"]
