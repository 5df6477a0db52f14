"""Parsing and printing byte counts the way people type them on a command line."""

from __future__ import annotations

import re

from gpubench.errors import UsageError

# Binary multiples, as nccl-tests reads -b/-e (1M = 2**20): the sizes users compare against are powers of two.
_MULT = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([KMGT]?)(?:I?B)?\s*$", re.IGNORECASE)


def parse_size(text: str) -> int:
    """``"8"`` → 8, ``"1M"``/``"1MiB"``/``"1mb"`` → 1048576, ``"1.5G"`` → 1610612736."""
    m = _SIZE.match(str(text))
    if not m:
        raise UsageError(f"malformed size {text!r}: write a byte count like 8, 64K, 1M, 8G")
    value = float(m.group(1)) * _MULT[m.group(2).upper()]
    if value < 1 or value != int(value):
        raise UsageError(f"size {text!r} must be a whole number of bytes ≥ 1")
    return int(value)


def parse_size_list(text: str) -> list[int]:
    """A comma-separated list of sizes, e.g. ``"256M,1G"``."""
    parts = [p for p in str(text).split(",") if p.strip()]
    if not parts:
        raise UsageError(f"empty size list {text!r}: write sizes like 256M,1G")
    return [parse_size(p) for p in parts]


def format_bytes(n: float) -> str:
    """Shortest binary form: 1048576 → '1 MiB', 1536 → '1.5 KiB'; never an exponent, however large (the need
    of gemm's ``--sizes 300G`` reads '4,320,000 EiB', not '4.53e+12 TiB')."""
    for unit, scale in (("EiB", 1 << 60), ("PiB", 1 << 50), ("TiB", 1 << 40), ("GiB", 1 << 30), ("MiB", 1 << 20),
                        ("KiB", 1 << 10)):
        if n >= scale:
            v = n / scale
            return f"{v:,.0f} {unit}" if v >= 1e4 else f"{v:.4g} {unit}"
    return f"{int(n)} B"
