"""The values facts are made of, shared by the readers and the rules: a GPU's identity and the two conversions
every vendor answer goes through (``None`` is "unknown" throughout)."""

from __future__ import annotations

Gpu = tuple[int, str | None, str | None]  # (CUDA/HIP index, uuid, PCI bus id)


def as_int(x: object) -> int | None:
    """A count, or None: amdsmi says "N/A" for an unsupported field, and bool is a flag, not a count."""
    if isinstance(x, bool) or not isinstance(x, (int, float)):
        return None
    return int(x)


def as_flag(x: object) -> bool | None:
    """A flag, or None where ``x`` is neither a bool nor an int."""
    if isinstance(x, bool):
        return x
    return bool(x) if isinstance(x, int) else None
