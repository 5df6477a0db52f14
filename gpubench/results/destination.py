"""Where gpubench writes what people asked for (``--out FILE`` or ``--out DIR``): checked before any work is done,
and any failure to write — a read-only place, a folder where a file was meant, a full disk — is one line and exit
2 (a UsageError), never a traceback, and never compare's exit 1, which means "something got WORSE"."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from gpubench.errors import UsageError
from gpubench.results import share


def _why(e: OSError) -> str:
    return e.strerror or str(e)


def folder(path: str | os.PathLike, flag: str = "--out", *, parents: bool = False) -> Path:
    """``path`` as a folder this process can write into, created if missing (with its ``parents`` if asked)."""
    p = Path(path)
    if p.exists() and not p.is_dir():
        raise UsageError(f"{flag} {p} is a file: give a folder")
    if not parents and not p.parent.is_dir():
        raise UsageError(f"{flag} {p}: {p.parent} does not exist; create it or choose another folder")
    try:
        p.mkdir(parents=parents, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=p, prefix=".probe-"):
            pass
    except OSError as e:
        raise UsageError(f"{flag} {p}: cannot write there ({_why(e)}); choose a folder you can write") from e
    return p


def file(path: str | os.PathLike, flag: str = "--out") -> Path:
    """``path`` as a file this process can write: not a folder, in an existing folder it can write into."""
    p = Path(path)
    if p.is_dir():
        raise UsageError(f"{flag} {p} is a folder: give a file name in it, such as {p / ('out' + (p.suffix or '.txt'))}")
    if not p.parent.is_dir():
        raise UsageError(f"{flag} {p}: {p.parent} does not exist; create it or choose another file")
    if p.exists() and not os.access(p, os.W_OK):
        raise UsageError(f"{flag} {p}: the file is read-only; choose a file you can write")
    try:
        with tempfile.NamedTemporaryFile(dir=p.parent, prefix=".probe-"):
            pass
    except OSError as e:
        raise UsageError(f"{flag} {p}: cannot write in {p.parent} ({_why(e)}); choose a file you can write") from e
    return p


def write_text(path: str | os.PathLike, text: str, flag: str = "--out") -> Path:
    """Write ``text`` to ``path`` (written beside, then renamed: a reader never sees half of it)."""
    p = Path(path)
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{p.name}.", suffix=".tmp", dir=p.parent)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                f.write(text)
            share(tmp)
            os.replace(tmp, p)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
    except OSError as e:
        raise UsageError(f"{flag} {p}: cannot write it ({_why(e)}); free some space or choose another file") from e
    return p


__all__ = ["folder", "file", "write_text"]
