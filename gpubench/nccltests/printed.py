"""Numbers as nccl-tests prints them, with how much rounding each printed figure carries.

Bandwidths and times are printed with ``%6.2f``/``%7.2f``-style formats, and since 2.17.3 with the first of
``%.2f``, ``%.1f``, ``%.0f`` and ``%.1e`` that fits the column (so ``12439.2`` and ``1.2e+04`` occur). The
busbw check compares figures within their print rounding, so each number comes with half a unit in its last
printed digit.
"""

from __future__ import annotations

import math
import re

_NUMBER = re.compile(r"^[-+]?(?:(\d+)(?:\.(\d*))?|\.(\d+))(?:[eE]([-+]?\d+))?$")
_SPECIAL = {"nan": math.nan, "-nan": math.nan, "+nan": math.nan, "inf": math.inf, "+inf": math.inf,
            "-inf": -math.inf}


def figure(token: str) -> tuple[float, float] | None:
    """``"12439.2"`` → (12439.2, 0.05); ``"1.2e+04"`` → (12000.0, 500.0); ``"nan"`` → (nan, nan); None if the
    token is not a number C's printf could have written."""
    special = _SPECIAL.get(token.lower())
    if special is not None:
        return special, math.nan
    m = _NUMBER.match(token)
    if not m:
        return None
    decimals = len(m.group(2) or m.group(3) or "")
    exponent = int(m.group(4) or 0)
    return float(token), 0.5 * 10.0 ** (exponent - decimals)


def count(token: str) -> int | None:
    """A ``%6g``-printed element count (``0``, ``12``, ``1.23457e+06``) → int; None if not a count."""
    f = figure(token)
    if f is None or not math.isfinite(f[0]) or f[0] < 0:
        return None
    return int(round(f[0]))


def integer(token: str) -> int | None:
    return int(token) if re.fullmatch(r"[-+]?\d+", token) else None
