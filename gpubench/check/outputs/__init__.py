"""``gpubench check``'s outputs: one module per format, as compare's (gpubench.compare.outputs), in a registry of
gpubench.registry.Formats: a terminal view for people (table), and JSON, JUnit XML and a Prometheus textfile for
machines. A new format is one file here, and its test; ``gpubench check --format`` lists what is here.

A format module defines
- ``check(node) -> str``: the node's verdict in the format (a rich renderable where ``CONSOLE`` is true: the
  table, drawn on the terminal, written to a ``--report`` file as plain text); or, for a format that writes its
  own file, ``write(node, path)`` (prometheus: prometheus_client writes node-exporter's textfile);
- ``SUFFIXES`` and ``FILE_ONLY``, for a format that is only ever a ``--report`` file named with one of its
  suffixes: what to say where it is not.

:mod:`.common` is no format: it holds what every format says of a verdict.
"""

from __future__ import annotations

import io
from typing import TYPE_CHECKING

from gpubench.check.verdicts import NodeVerdict
from gpubench.errors import UsageError
from gpubench.registry import Formats

if TYPE_CHECKING:
    from rich.console import Console, RenderableType

DEFAULT = "table"
SHARED = ("common",)
# The width of the table's plain text in a --report file: a log keeps every column, and no colour.
FILE_WIDTH = 160

_FORMATS = Formats(__name__)
names, get, others, is_console = _FORMATS.names, _FORMATS.get, _FORMATS.others, _FORMATS.is_console


def _to_stdout(out: str | None) -> bool:
    return out is None or out == "-"


def check_report(fmt: str, out: str | None) -> None:
    """A format that is only ever a file needs ``--report`` named with its suffix: said before a GPU is touched."""
    said = _FORMATS.declared(fmt, "FILE_ONLY")
    if said and (_to_stdout(out) or not str(out).endswith(tuple(_FORMATS.declared(fmt, "SUFFIXES", ())))):
        raise UsageError(said)


def _plain(renderable: RenderableType) -> str:
    from rich.console import Console

    console = Console(record=True, width=FILE_WIDTH, color_system=None, force_terminal=False, file=io.StringIO())
    console.print(renderable)
    return console.export_text()


def write(node: NodeVerdict, fmt: str, out: str | None, console: Console) -> None:
    """Show or write the verdict: a CONSOLE format on ``console`` (or as plain text to ``out``), the others to
    ``out`` or stdout (``out`` None or ``-``), a format that writes its own file to ``out``."""
    from gpubench.results import destination

    module = get(fmt)
    check_report(fmt, out)
    if hasattr(module, "write"):
        module.write(node, str(destination.file(str(out), "--report")))
        return
    if is_console(fmt) and _to_stdout(out):
        console.print(module.check(node))
        return
    text = _plain(module.check(node)) if is_console(fmt) else module.check(node)
    if _to_stdout(out):
        print(text, end="", flush=True)
    else:
        destination.write_text(destination.file(str(out), "--report"), text, "--report")


__all__ = ["DEFAULT", "SHARED", "names", "get", "others", "is_console", "check_report", "write"]
