"""TOML read the same way everywhere gpubench reads it (thresholds, check sets, envelopes): tomllib from Python
3.11, tomli before; a file that cannot be read or parsed is one line saying which and why (exit 2)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from gpubench.errors import UsageError


def loads(text: str) -> dict[str, Any]:
    try:
        import tomllib  # Python 3.11+
    except ModuleNotFoundError:  # Python 3.10
        try:
            import tomli as tomllib  # type: ignore[no-redef]
        except ModuleNotFoundError as e:
            raise UsageError("reading TOML on Python 3.10 needs tomli: pip install tomli") from e
    return tomllib.loads(text)


def read(path: str | Path, what: str) -> dict[str, Any]:
    """The document in ``path``; ``what`` names it in the message ("the envelope", "the check set")."""
    try:
        return loads(Path(path).read_text())
    except (OSError, ValueError) as e:  # tomllib.TOMLDecodeError is a ValueError
        raise UsageError(f"cannot read {what} {path}: {e}") from e


__all__ = ["loads", "read"]
