"""Regression thresholds: how large a change must be before compare calls it WORSE or BETTER.

A thresholds file is TOML. Values are fractions (0.05 is 5 %)::

    [default]
    threshold = 0.05        # every metric not named below

    [comm]
    threshold = 0.04        # every metric of the comm suite not named below
    busbw = 0.03            # the comm suite's busbw

    [launch."measure=gpu_gap,api=torch,nodes=1"]
    time = 0.02             # one case's metric: wins over its suite's
    [launch."measure=host_launch,api=torch,nodes=1"]
    time = "not gated: run-to-run spread 48%"   # never WORSE or BETTER (UNKNOWN, with this note)

``gpubench calibrate`` writes one per case from runs of one machine (:mod:`gpubench.compare.calibrate`);
files of per-suite thresholds (older calibrations) read as before.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from gpubench.compare.defaults import DEFAULT_THRESHOLD
from gpubench.errors import UsageError
from gpubench.files import loads

SUITE_DEFAULT = "threshold"  # the key a suite's table uses for all its metrics
NOT_GATED = "not gated"  # a case metric's value starting with this: too noisy to gate


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
    # (suite, case) -> {metric: fraction}: one case's own thresholds, before its suite's
    cases: dict[tuple[str, str], dict[str, float]] = field(default_factory=dict)
    # (suite, case) -> {metric: why}: figures too noisy to gate ("not gated: run-to-run spread 40%")
    ungated: dict[tuple[str, str], dict[str, str]] = field(default_factory=dict)

    def for_row(self, suite: str, metric: str, case: str | None = None) -> float:
        if case is not None and metric in self.cases.get((suite, case), {}):
            return self.cases[(suite, case)][metric]
        per_suite = self.suites.get(suite, {})
        if metric in per_suite:
            return per_suite[metric]
        return per_suite.get(SUITE_DEFAULT, self.default)

    def not_gated(self, suite: str, metric: str, case: str) -> str | None:
        """Why a case's metric is not gated, or None when it is."""
        return self.ungated.get((suite, case), {}).get(metric)

    def as_dict(self) -> dict:
        return {"default": self.default, "suites": self.suites, "source": self.source,
                "cases": {f"{s}/{c}": m for (s, c), m in self.cases.items()},
                "not_gated": {f"{s}/{c}": m for (s, c), m in self.ungated.items()}}


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
        per_suite = th.suites.setdefault(str(section), {})
        for k, v in body.items():
            if isinstance(v, Mapping):  # [suite."case"]: that case's metrics
                _parse_case(th, str(section), str(k), v, where)
            else:
                per_suite[str(k)] = check_fraction(v, f"{where} [{section}] {k}")
        if not per_suite:
            del th.suites[str(section)]
    return th


def _parse_case(th: Thresholds, suite: str, case: str, body: Mapping, where: str) -> None:
    for metric, v in body.items():
        at = f"{where} [{suite}.{case!r}] {metric}"
        if isinstance(v, str):
            if not v.startswith(NOT_GATED):
                raise UsageError(f"{at}: {v!r} is neither a fraction nor \"{NOT_GATED}: why\"")
            th.ungated.setdefault((suite, case), {})[str(metric)] = v
        elif isinstance(v, Mapping):
            raise UsageError(f"{at}: a case's table holds metric = fraction lines, not another [table]")
        else:
            th.cases.setdefault((suite, case), {})[str(metric)] = check_fraction(v, at)


def load(path: str | os.PathLike) -> Thresholds:
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as e:
        raise UsageError(f"cannot read thresholds file {path}: {e.strerror or e}") from e
    try:
        data = loads(text)
    except ValueError as e:  # tomllib.TOMLDecodeError is a ValueError
        raise UsageError(f"{path} is not valid TOML: {e}") from e
    return parse(data, str(path))


def _key(name: str) -> str:
    # Bare TOML keys are letters, digits, '_' and '-'; anything else is quoted.
    if name and all(c.isalnum() or c in "_-" for c in name):
        return name
    return _quoted(name)


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
    for suite, case in sorted({*th.cases, *th.ungated}):
        lines += ["", f"[{_key(suite)}.{_quoted(case)}]"]
        for metric, value in sorted({**th.cases.get((suite, case), {}), **th.ungated.get((suite, case), {})}.items()):
            text = _quoted(value) if isinstance(value, str) else repr(value)
            note = notes.get((suite, case, metric))
            lines.append(f"{_key(metric)} = {text}" + (f"  # {note}" if note else ""))
    return "\n".join(lines) + "\n"


def _quoted(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


__all__ = ["DEFAULT_THRESHOLD", "NOT_GATED", "Thresholds", "load", "parse", "dumps"]
