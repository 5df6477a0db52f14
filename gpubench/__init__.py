"""gpubench: a portable GPU benchmark suite.

The package version is separate from the result-table schema version, which lives in
:mod:`gpubench.results` alone.
"""

from pathlib import Path as _Path

__version__ = "0.1.0"
# The name to pip-install (pyproject's [project] name): `gpubench` on the package index is another project. The
# command and the import are `gpubench`.
DISTRIBUTION = "gpubench-suite"

# Installed, the built-in suites are gpubench/suites (pyproject maps the top-level suites/ there). Run from
# a source checkout (python -m pytest, python -m gpubench), this directory shadows the installed package and
# suites/ sits beside it: let gpubench.suites resolve to that directory too.
_checkout = _Path(__file__).resolve().parent.parent
if not (_Path(__file__).parent / "suites").is_dir() and (_checkout / "suites" / "elementwise.py").is_file():
    __path__.append(str(_checkout))  # noqa: F821 — __path__ is defined for packages
