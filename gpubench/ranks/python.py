"""The command line that starts a gpubench module in a fresh Python: ranks, workers.

``python -m gpubench`` puts the current folder first on ``sys.path``, so a folder there named ``gpubench`` (a clone
of the repository, whose parent is where one stands after ``pip install -e gpubench``) is imported instead of the
installed package, and every rank fails on its first import. Python 3.11's ``-P`` leaves that folder out; on 3.10
the module is run from a ``-c`` that first takes it off the path.
"""

from __future__ import annotations

import sys


def module_command(module: str, *args: str) -> list[str]:
    """``[python, ..., module, *args]``: runs ``module`` as ``python -m`` does, without the current folder on the
    path."""
    if sys.version_info >= (3, 11):
        return [sys.executable, "-P", "-m", module, *args]
    code = ("import sys, runpy; sys.path.pop(0); "  # '' (the current folder), which -c puts first
            f"runpy.run_module({module!r}, run_name='__main__', alter_sys=True)")
    return [sys.executable, "-c", code, *args]


__all__ = ["module_command"]
