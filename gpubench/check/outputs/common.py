"""What every output of ``gpubench check`` says of a verdict: its figures as numbers people can act on, the
confidence behind it, and its evidence in one line (JUnit's failure body and system-out)."""

from __future__ import annotations

import math

from gpubench.check.verdicts import Verdict, target_text
from gpubench.console import fmt_value, unit_text


def finite(x: object) -> float | None:
    """``x`` as a float, or None where it is missing or not a number people can act on (NaN, inf)."""
    try:
        f = float(x)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None
    return f if math.isfinite(f) else None


def confidence_text(c: object) -> str:
    """``99 %``: rounded down, so that 0.996 never reads as a certainty it is not."""
    f = finite(c)
    if f is None:
        return "—"
    return "100 %" if f >= 1 else f"{math.floor(100 * f + 1e-9):.0f} %"


def _figure(x: object, unit: str | None) -> str:
    f = finite(x)
    return "—" if f is None else f"{fmt_value(f)} {unit_text(unit) if unit else ''}".strip()


def evidence(v: Verdict) -> str:
    """The figures behind a verdict in one line (JUnit's system-out and failure body): value, thresholds, peers."""
    parts = [f"{target_text(v)} {v.check}: {v.state} — {v.text}"]
    if finite(v.value) is not None:
        parts.append(f"value {_figure(v.value, v.unit)}")
    for label, x in (("fail at", v.fail_at), ("warn at", v.warn_at), ("typical", v.typical)):
        if finite(x) is not None:
            parts.append(f"{label} {_figure(x, v.unit)}")
    if finite(v.peer_median) is not None:
        parts.append(f"peers' median {_figure(v.peer_median, v.unit)}" + (f" ({v.peers})" if v.peers else ""))
    if v.ci and all(finite(x) is not None for x in v.ci):
        parts.append(f"95 % interval {fmt_value(v.ci[0])}–{fmt_value(v.ci[1])}")
    if finite(v.retry) is not None:
        parts.append(f"retry {_figure(v.retry, v.unit)}")
    if v.confidence is not None:
        parts.append(f"confidence {confidence_text(v.confidence)}")
    parts += [f"reference {v.reference}"] if v.reference else []
    parts += [f"run {v.run_dir}"] if v.run_dir else []
    return "; ".join(parts + list(v.notes))


__all__ = ["finite", "confidence_text", "evidence"]
