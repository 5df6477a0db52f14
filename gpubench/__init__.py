"""gpubench: a portable GPU benchmark suite.

The package version is separate from the result-table schema version, which lives in
:mod:`gpubench.results` alone.
"""

__version__ = "0.1.0"
