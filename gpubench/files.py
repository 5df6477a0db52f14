"""Files gpubench reads and writes the same way everywhere: TOML read (thresholds, check sets, envelopes; tomllib
from Python 3.11, tomli before; a file that cannot be read or parsed is one line saying which and why, exit 2), and
JSON written atomically with the mode results are shared with (run.json, the gate's memory, the runs registry)."""

from __future__ import annotations

import json
import os
import tempfile
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


def share(path: str | os.PathLike) -> None:
    """mkstemp makes files private (0600); results are shared, so give them the umask's usual mode."""
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(path, 0o666 & ~umask)


def write_json(path: Path, data: dict[str, Any]) -> None:
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w") as f:
            json.dump(data, f, indent=2, sort_keys=False, default=str)
            f.write("\n")
        share(tmp)
        os.replace(tmp, path)  # readers see the old file or the new one whole, never a part
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


__all__ = ["loads", "read", "share", "write_json"]
