"""Regression thresholds: how large a change must be before compare calls it WORSE or BETTER.

A thresholds file is TOML. Values are fractions (0.05 is 5 %)::

    [default]
    threshold = 0.05        # every metric not named below

    [comm]
    threshold = 0.04        # every metric of the comm suite not named below
    busbw = 0.03            # the comm suite's busbw

``gpubench calibrate`` writes such a file from runs of one machine (:mod:`gpubench.compare.calibrate`).
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from gpubench.errors import UsageError

DEFAULT_THRESHOLD = 0.05
SUITE_DEFAULT = "threshold"  # the key a suite's table uses for all its metrics


def _toml_loads(text: str) -> dict:
    try:
        import tomllib  # Python 3.11+
    except ModuleNotFoundError:  # Python 3.10
        try:
            import tomli as tomllib  # type: ignore[no-redef]
        except ModuleNotFoundError as e:
            raise UsageError("reading a thresholds file on Python 3.10 needs tomli: pip install tomli") from e
    return tomllib.loads(text)


def check_fraction(value: object, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise UsageError(f"{where}: threshold {value!r} is not a number; give a fraction such as 0.05 for 5%")
    if not 0 <= value < 1:
        raise UsageError(f"{where}: threshold {value} is outside [0, 1); thresholds are fractions (0.05 is 5%)")
    return float(value)


@dataclass
class Thresholds:
    default: float = DEFAULT_THRESHOLD
    # suite -> {metric: fraction}; the key SUITE_DEFAULT covers the suite's other metrics
    suites: dict[str, dict[str, float]] = field(default_factory=dict)
    source: str | None = None  # the file they came from

    def for_row(self, suite: str, metric: str) -> float:
        per_suite = self.suites.get(suite, {})
        if metric in per_suite:
            return per_suite[metric]
        return per_suite.get(SUITE_DEFAULT, self.default)

    def as_dict(self) -> dict:
        return {"default": self.default, "suites": self.suites, "source": self.source}


def parse(data: Mapping, where: str) -> Thresholds:
    th = Thresholds(source=where)
    for section, body in data.items():
        if not isinstance(body, Mapping):
            raise UsageError(f"{where}: {section!r} is not a [table]; write [suite] then metric = fraction lines")
        if section == "default":
            unknown = set(body) - {SUITE_DEFAULT}
            if unknown:
                raise UsageError(f"{where}: [default] takes only 'threshold', not {', '.join(sorted(unknown))}")
            if SUITE_DEFAULT in body:
                th.default = check_fraction(body[SUITE_DEFAULT], f"{where} [default]")
            continue
        th.suites[str(section)] = {
            str(k): check_fraction(v, f"{where} [{section}] {k}") for k, v in body.items()
        }
    return th


def load(path: str | os.PathLike) -> Thresholds:
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as e:
        raise UsageError(f"cannot read thresholds file {path}: {e.strerror or e}") from e
    try:
        data = _toml_loads(text)
    except ValueError as e:  # tomllib.TOMLDecodeError is a ValueError
        raise UsageError(f"{path} is not valid TOML: {e}") from e
    return parse(data, str(path))


def _key(name: str) -> str:
    # Bare TOML keys are letters, digits, '_' and '-'; anything else is quoted.
    if name and all(c.isalnum() or c in "_-" for c in name):
        return name
    return '"' + name.replace("\\", "\\\\").replace('"', '\\"') + '"'


def dumps(th: Thresholds, header: str = "", notes: Mapping[tuple[str, str], str] | None = None) -> str:
    """TOML text that :func:`load` reads back as ``th``; ``notes[(suite, metric)]`` become comments."""
    notes = notes or {}
    lines = [f"# {line}" if line else "#" for line in header.splitlines()]
    lines += ["", "[default]", f"threshold = {th.default!r}"] if lines else ["[default]", f"threshold = {th.default!r}"]
    for suite in sorted(th.suites):
        lines += ["", f"[{_key(suite)}]"]
        for metric in sorted(th.suites[suite]):
            note = notes.get((suite, metric))
            lines.append(f"{_key(metric)} = {th.suites[suite][metric]!r}" + (f"  # {note}" if note else ""))
    return "\n".join(lines) + "\n"


__all__ = ["DEFAULT_THRESHOLD", "Thresholds", "load", "parse", "dumps"]
