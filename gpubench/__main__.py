"""``python -m gpubench`` (and torchrun's ``-m gpubench``, which starts each rank so)."""

import os
import sys


def _shadows(entry: str, ours: str) -> bool:
    """Whether the sys.path entry ``entry`` holds a folder named gpubench other than this package."""
    there = os.path.join(entry or os.curdir, "gpubench")
    return os.path.isdir(there) and os.path.realpath(there) != os.path.realpath(ours)


def _unshadowed() -> None:
    """``python -m`` puts the folder one stands in first on sys.path, and a folder there named gpubench (a clone, beside
    which one stands after ``pip install -e gpubench``) is imported as a namespace package before an editable
    install's finder is asked: the package's first import of its own names failed on every rank ("cannot import name
    '__version__'"). This file is the package's own: such folders leave the path and the package is imported again."""
    package = sys.modules.get("gpubench")
    if package is None or getattr(package, "__file__", None):
        return  # the package itself
    ours = os.path.dirname(os.path.abspath(__file__))
    sys.path[:] = [entry for entry in sys.path if not _shadows(entry, ours)]
    for name in [n for n in sys.modules if n == "gpubench" or n.startswith("gpubench.")]:
        del sys.modules[name]


_unshadowed()

from gpubench.cli import entry  # noqa: E402 — after the path is the package's

entry()
