"""The gate's memory: what compare decided about each run of a directory, and what people accepted.

A nightly gate that only looks at tonight forgets: the regressed night joins the window of later nights, widens
its spread, and the regression reads "within the run-to-run spread" from the second night on. So compare
remembers, in files beside each run's tables:

- ``verdict.json`` (:data:`RECORD`): the verdict on a run, written when compare judges a run of a directory
  against the runs before it (``gpubench compare DIR RUN``, ci/nightly.sh), with the figures it found WORSE and
  since which run each one has been;
- ``accepted.json`` (:data:`ACCEPTED`): what ``gpubench accept`` made the new normal, by whom, when and why.

From them a directory's baseline is made of clean, accepted nights (:class:`Ledger`): a run measured on a
shared GPU or a busy host is left out whole; a run that carries a WORSE figure nobody accepted is left out for
that figure; and an accepted figure is judged from the first night of the accepted level on. A figure that
stays at its regressed level is therefore WORSE every night, against the last good nights, until it is fixed
("recovered") or accepted.
"""

from __future__ import annotations

import getpass
import json
import socket
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpubench.machine.contention import LOADED_HOST
from gpubench.results.rundir import utc_now
from gpubench.files import write_json

RECORD = "verdict.json"
ACCEPTED = "accepted.json"
RECORD_FORMAT, ACCEPTED_FORMAT, FILE_VERSION = "gpubench-verdict", "gpubench-acceptance", 1
# Why a whole run is no evidence of normal (run.json's contention): its figures were not the machine's alone.
SHARED, BUSY = "shared GPU", "busy host"

Key = tuple[str, str, str]  # (suite, case, metric)


def key_of(item: dict[str, Any]) -> Key:
    return (str(item["suite"]), str(item["case"]), str(item["metric"]))


def _read(path: Path, fmt: str) -> dict[str, Any] | None:
    """A memory file, or None where there is none or it is not one (a half-written file from a crash, an
    older or newer version: it is not trusted, and the run counts as never judged)."""
    try:
        doc = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(doc, dict) or doc.get("format") != fmt or doc.get("version") != FILE_VERSION:
        return None
    return doc


def who() -> str:
    try:
        user = getpass.getuser()
    except (KeyError, OSError):
        user = "unknown"
    return f"{user}@{socket.gethostname()}"


def left_out(meta: dict[str, Any]) -> str | None:
    """Why a complete run is no evidence of normal at all, or None: it shared its GPU, or its host was busy."""
    c = meta.get("contention") or {}
    if c.get("contended"):
        return SHARED
    host = c.get("host") or {}
    share = host.get("others_share")
    if host.get("loaded") or (share is not None and float(share) >= LOADED_HOST):
        return BUSY
    return None


@dataclass
class Entry:
    """One run of a directory: its run.json, its recorded verdict and its acceptances."""

    run_id: str
    path: Path
    meta: dict[str, Any]
    record: dict[str, Any] | None = None
    acceptances: list[dict[str, Any]] = field(default_factory=list)

    @classmethod
    def read(cls, run_id: str, path: Path, meta: dict[str, Any]) -> Entry:
        record = _read(path / RECORD, RECORD_FORMAT)
        accepted = _read(path / ACCEPTED, ACCEPTED_FORMAT) or {}
        return cls(run_id, path, meta, record, list(accepted.get("acceptances") or []))

    @property
    def worse(self) -> dict[Key, dict[str, Any]]:
        """The figures its recorded verdict found WORSE."""
        return {key_of(w): w for w in ((self.record or {}).get("worse") or [])}

    @property
    def reason(self) -> str | None:
        return left_out(self.meta)


@dataclass(frozen=True)
class Acceptance:
    """One accepted figure: in run ``run_id``, the level it has had since run ``start`` is its new normal."""

    run_id: str
    start: str
    at: str
    by: str
    reason: str


class Ledger:
    """The runs of a directory before tonight's, oldest first, with what was decided about them."""

    def __init__(self, entries: Iterable[Entry]):
        self.entries = sorted(entries, key=lambda e: e.run_id)
        self.accepted: dict[Key, list[Acceptance]] = {}
        for e in self.entries:
            for a in e.acceptances:
                for f in a.get("figures") or []:
                    self.accepted.setdefault(key_of(f), []).append(Acceptance(
                        e.run_id, str(f.get("from") or e.run_id), str(a.get("at") or ""), str(a.get("by") or ""),
                        str(a.get("reason") or "")))

    def cut(self, key: Key) -> str | None:
        """The run from which ``key``'s evidence starts: the first night of its latest accepted level."""
        starts = [a.start for a in self.accepted.get(key, ())]
        return max(starts) if starts else None

    def regressed(self, entry: Entry, key: Key) -> bool:
        """``entry`` holds a WORSE of ``key`` that nobody accepted: a night of a regression, no evidence of normal.

        An acceptance covers the nights of the accepted level up to the accepted run; a night after it that was
        judged before the acceptance was judged against the old level, so its WORSE is covered too."""
        if key not in entry.worse:
            return False
        judged = str((entry.record or {}).get("judged_at") or "")
        for a in self.accepted.get(key, ()):
            if a.start <= entry.run_id <= a.run_id or (entry.run_id > a.run_id and judged < a.at):
                return False
        return True

    def evidence(self, entry: Entry, key: Key) -> str | None:
        """Why ``entry`` is no evidence for ``key``, or None when it is."""
        cut = self.cut(key)
        if cut is not None and entry.run_id < cut:
            return "before its accepted level"
        if self.regressed(entry, key):
            return "regressed"
        return None


def record(run_dir: Path, *, rows: list[dict[str, Any]], summary: dict[str, int], exit_code: int,
           baseline: dict[str, Any], rerun: str | None) -> Path:
    """Write ``run_dir``'s verdict (``rows``: compare's WORSE rows, each with its ``since`` and ``nights``)."""
    doc = {
        "format": RECORD_FORMAT, "version": FILE_VERSION, "run_id": run_dir.name, "judged_at": utc_now(),
        "baseline": baseline, "rerun": rerun, "exit_code": exit_code, "summary": summary,
        "worse": [{k: r.get(k) for k in ("suite", "case", "metric", "change", "since", "nights")} for r in rows],
    }
    path = run_dir / RECORD
    write_json(path, doc)
    return path


def recorded(run_dir: Path) -> dict[str, Any] | None:
    return _read(run_dir / RECORD, RECORD_FORMAT)


def accept(run_dir: Path, figures: list[dict[str, Any]], reason: str, pattern: str | None) -> dict[str, Any]:
    """Add an acceptance of ``figures`` (each suite, case, metric and ``from``: the first night of its level) to
    ``run_dir``'s accepted.json; the acceptance written."""
    path = run_dir / ACCEPTED
    doc = _read(path, ACCEPTED_FORMAT) or {"format": ACCEPTED_FORMAT, "version": FILE_VERSION, "acceptances": []}
    entry = {"at": utc_now(), "by": who(), "reason": reason, "filter": pattern, "figures": figures}
    doc["acceptances"].append(entry)
    write_json(path, doc)
    return entry


def acceptances_of(run_dir: Path) -> dict[Key, dict[str, Any]]:
    """The figures accepted in ``run_dir`` itself, with their acceptance (the latest of each)."""
    out = {}
    for a in (_read(run_dir / ACCEPTED, ACCEPTED_FORMAT) or {}).get("acceptances") or []:
        for f in a.get("figures") or []:
            out[key_of(f)] = a
    return out


__all__ = ["RECORD", "ACCEPTED", "SHARED", "BUSY", "Entry", "Ledger", "Acceptance", "left_out", "record",
           "recorded", "accept", "acceptances_of", "key_of"]
