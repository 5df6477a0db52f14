"""A suite's own command-line options: declared once on the suite, read everywhere from that declaration.

A suite lists :class:`Option` s in ``Suite.options``. From that one list the CLI builds an argument group under
the suite's name (``gpubench run --help``), the values are parsed and checked, and they reach the suite's
``cases`` and ``prepare`` as one frozen :class:`Options` (``ctx.options.min_bytes``); a driver that starts child
runs (autotune) writes them back into a command line with :meth:`Option.argv`, so no option is dropped on the way.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Protocol

from gpubench.errors import UsageError


class ArgumentAdder(Protocol):
    """An argparse parser or argument group: what :meth:`Option.add_to` calls (below gpubench/commands/ nothing
    names argparse: tests/test_layers.py)."""

    def add_argument(self, *name_or_flags: str, **kwargs: Any) -> object: ...


@dataclass(frozen=True)
class Option:
    """One ``--name`` of ``gpubench run`` that only some suites read.

    ``type`` turns the text into the value (it may raise UsageError with a message that says what to do);
    ``check(value, options)`` returns a message when the value (alone or with the suite's other options) is
    unusable, which becomes exit 2 before anything is started. ``switch`` makes a flag without a value.
    """

    name: str  # without the dashes: "min-bytes" is --min-bytes, read as options.min_bytes
    help: str
    type: Callable[[str], Any] = str
    default: Any = None
    switch: bool = False
    many: bool = False  # may be given more than once: the value is the list of what was given
    choices: tuple[str, ...] | None = None
    metavar: str | None = None
    check: Callable[[Any, Mapping[str, Any]], str | None] | None = None

    @property
    def dest(self) -> str:
        return self.name.replace("-", "_")

    @property
    def flag(self) -> str:
        return f"--{self.name}"

    def add_to(self, group: ArgumentAdder) -> None:
        """Add this option to an argparse parser or argument group."""
        if self.switch:
            group.add_argument(self.flag, dest=self.dest, action="store_true", help=self.help)
            return
        kw: dict[str, Any] = {"dest": self.dest, "default": self.default, "help": self.help}
        if self.many:
            kw["action"] = "append"
        if self.choices:
            kw["choices"] = self.choices
        else:
            kw["type"] = self.type
        if self.metavar:
            kw["metavar"] = self.metavar
        group.add_argument(self.flag, **kw)

    def argv(self, value: Any) -> list[str]:
        """The command-line words that give ``value`` back (none for the default)."""
        if self.switch:
            return [self.flag] if value else []
        if value is None or value == self.default:
            return []
        if self.many:
            return [word for v in value for word in (self.flag, str(v))]
        text = ",".join(map(str, value)) if isinstance(value, (list, tuple)) else str(value)
        return [self.flag, text]


class Options(Mapping[str, Any]):
    """The values of a suite's options, frozen: read as ``options.name`` or ``options["name"]``."""

    __slots__ = ("_values",)

    def __init__(self, values: Mapping[str, Any] | Iterable[tuple[str, Any]] = ()):
        object.__setattr__(self, "_values", MappingProxyType(dict(values)))

    def __getattr__(self, name: str) -> Any:
        try:
            return self._values[name]
        except KeyError:
            raise AttributeError(f"no option {name!r}") from None

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError("Options are frozen: a suite reads its options, it does not change them")

    def __getitem__(self, key: str) -> Any:
        return self._values[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def __reduce__(self) -> tuple[Any, ...]:
        """Pickled as its values (a run's request goes to the processes it starts whole)."""
        return (Options, (dict(self._values),))

    def __hash__(self) -> int:
        return hash(tuple(sorted((k, repr(v)) for k, v in self._values.items())))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Mapping) and dict(self) == dict(other)

    def __repr__(self) -> str:
        return f"Options({dict(self._values)!r})"

    def replace(self, **values: Any) -> Options:
        return Options({**self._values, **values})


def read(declared: Sequence[Option], given: object) -> Options:
    """The declared options' values from ``given`` (an argparse namespace or a mapping; a missing one takes
    its default), each checked: a UsageError names the first that cannot be used."""
    get = given.get if isinstance(given, Mapping) else (lambda k, d=None: getattr(given, k, d))
    values = {o.dest: get(o.dest, False if o.switch else o.default) for o in declared}
    options = Options(values)
    for o in declared:
        if o.check is not None and values[o.dest] is not None:
            message = o.check(values[o.dest], options)
            if message:
                raise UsageError(message)
    return options


def names(text: str) -> list[str]:
    """``"a, b,c"`` → ``["a", "b", "c"]``: the type of list options (--op, --collectives)."""
    return [x.strip() for x in text.split(",") if x.strip()]


__all__ = ["Option", "Options", "read", "names"]
