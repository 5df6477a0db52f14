"""The nights of a directory of runs (as ci/nightly.sh keeps them), as the history page reads them.

Each complete run is a night: its run.json, the gate's record of it and what people accepted
(:class:`gpubench.compare.gate_memory.Entry`), whether it shared its GPU or ran on a busy host (drawn hollow: the
gate never takes such a night as evidence), the suites it ran, for each of them the settings that changed since
the previous night of that suite (a vertical marker on the page: where nightlies of several suites share a
directory, an elementwise night is compared with the elementwise night before it, not with a comm run between)
and the few columns of its tables the page draws. Runs that did not complete are left out and counted, runs that
cannot be read are left out and named with why, as compare leaves them out of a window.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import os
import re
import types
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from gpubench import results
from gpubench.compare import cross, gate_memory as memory, settings
from gpubench.compare.load import is_run_dir, scan
from gpubench.errors import UsageError

# The columns the page needs of a night's tables: the figure, its median and samples, and how it was measured
# (a suite's version; comm's graph/alloc/register/layout, which compare lists among settings).
COLUMNS = ("suite", "suite_version", "case", "metric", "unit", "better", "status", "value", "samples",
           *settings.METHOD_COLUMNS)
# Nights read before the first night shown (--since, --last), for the baseline band of the first ones: a
# window of 5 clean nights, and room for a regression or some shared nights before it.
LEAD_IN = 30


@dataclass
class Night:
    entry: memory.Entry
    time: str  # when it started (run.json's start_time), ISO 8601
    table: pa.Table  # its rows, COLUMNS only
    hollow: str | None = None  # memory.SHARED or memory.BUSY: no evidence of normal, drawn hollow
    suites: frozenset[str] = frozenset()  # the suites its tables hold
    # suite -> the settings that differ from the previous night of that suite (suites without any left out)
    changes: dict[str, list[str]] = field(default_factory=dict)
    system: tuple = ()  # the system facts (cross.system_of_meta): a window holds nights of one system
    shown: bool = True  # False: read for the band of the first nights shown only

    @property
    def run_id(self) -> str:
        return self.entry.run_id

    @property
    def judged(self) -> bool:
        return self.entry.record is not None


@dataclass
class Nights:
    directory: Path
    nights: list[Night]  # oldest first, the lead-in nights first
    notes: list[str] = field(default_factory=list)

    @property
    def shown(self) -> list[Night]:
        return [n for n in self.nights if n.shown]


def is_directory_of_runs(path: Path) -> bool:
    """A folder holding run directories (results/<cluster>/), not a run directory itself."""
    return path.is_dir() and not is_run_dir(path) and any(
        (c / results.RUN_FILE).is_file() for c in path.iterdir() if c.is_dir() and not c.is_symlink())


def parse_since(text: str) -> dt.datetime:
    """``YYYY-MM-DD`` or an ISO 8601 time (UTC unless it says otherwise)."""
    try:
        when = dt.datetime.fromisoformat(re.sub(r"Z$", "+00:00", text.strip()))
    except ValueError as e:
        raise UsageError(f"--since {text}: give a date such as 2026-11-20 (or 2026-11-20T03:00:00Z)") from e
    return when if when.tzinfo else when.replace(tzinfo=dt.timezone.utc)


def _time(meta: dict[str, Any], run_id: str) -> str:
    """A night's start (run.json), or the UTC time its run_id begins with."""
    start = meta.get("start_time")
    if start:
        return str(start)
    m = re.match(r"(\d{8}T\d{6})Z", run_id)
    return dt.datetime.strptime(m.group(1), "%Y%m%dT%H%M%S").replace(tzinfo=dt.timezone.utc).isoformat() \
        if m else ""


def _when(night_time: str) -> dt.datetime | None:
    try:
        t = dt.datetime.fromisoformat(re.sub(r"Z$", "+00:00", night_time))
    except ValueError:
        return None
    return t if t.tzinfo else t.replace(tzinfo=dt.timezone.utc)


def _pick(every: list, since: dt.datetime | None, last: int | None) -> tuple[int, int]:
    """(first index read, first index shown) of the complete runs ``every``, oldest first."""
    first = 0
    if since is not None:
        first = next((k for k, (i, _, m) in enumerate(every) if (_when(_time(m, i)) or since) >= since), len(every))
    if last is not None:
        first = max(first, len(every) - last)
    return max(0, first - LEAD_IN), first


def _read_table(path: Path) -> pa.Table | str:
    """A night's rows (COLUMNS), or why its tables cannot be read."""
    try:
        return results.read_columns(path, COLUMNS)
    except UsageError as e:
        return str(e)


def read(directory: str | os.PathLike, since: str | None = None, last: int | None = None) -> Nights:
    """The nights of ``directory`` from ``since`` on, the ``last`` of them at most, with up to LEAD_IN nights
    before them read for the baseline band."""
    path = Path(directory)
    every = scan(path)
    complete = [(i, p, m) for i, p, m, status in every if status == "complete"]
    if not complete:
        raise UsageError(f"{path} holds no complete run: give a directory of runs written by gpubench run "
                         "(results/<cluster>)")
    start, shown_from = _pick(complete, parse_since(since) if since else None, last)
    if shown_from >= len(complete):
        raise UsageError(f"{path} holds no run from {since} on (its latest: {complete[-1][0]}): give an earlier "
                         "--since")
    chosen = complete[start:]
    tables = [_read_table(p) for _, p, _ in chosen]
    out = Nights(path, [])
    unreadable = []
    for k, ((i, p, meta), table) in enumerate(zip(chosen, tables)):
        if isinstance(table, str):
            unreadable.append((p, table))
            continue
        suites = frozenset(s for s in pc.unique(table.column("suite")).to_pylist() if s is not None)
        out.nights.append(Night(memory.Entry.read(i, p, meta), _time(meta, i), table, memory.left_out(meta),
                                suites, system=tuple(sorted(cross.system_of_meta(meta).items())),
                                shown=start + k >= shown_from))
    _note_left_out(out, every, unreadable, chosen[0][0], complete[shown_from][0])
    _changes(out.nights)
    return out


def _unreadable_meta(path: Path) -> str:
    """Why a run's run.json cannot be read (scan says only that it cannot)."""
    try:
        results.read_run_meta(path)
    except UsageError as e:
        return str(e)
    return f"cannot read {path / results.RUN_FILE}"


def _note_left_out(out: Nights, every: list, unreadable: list[tuple[Path, str]], first_read: str,
                   first_shown: str) -> None:
    """Notes of the runs left out: those not complete among the nights shown counted by status, each one that
    cannot be read among those read (a band's too) named with why (its path is in what the reader said, or put
    before it)."""
    gone: dict[str, int] = {}
    for i, path, _, status in every:
        if status == "unreadable" and i >= first_read:
            unreadable.append((path, _unreadable_meta(path)))
        elif status != "complete" and i >= first_shown:
            gone[status] = gone.get(status, 0) + 1
    if gone:  # scan's statuses: running, interrupted, failed, unknown
        out.notes.append("left out, not complete (their tables may be partial): "
                         + ", ".join(f"{n} {why}" for why, n in sorted(gone.items())))
    for path, why in sorted(unreadable, key=lambda u: u[0].name):
        out.notes.append(f"left out, cannot be read: {why if str(path) in why else f'{path}: {why}'}")


def _method(rows: pa.Table) -> dict[str, str]:
    """How ``rows`` were measured, as compare reads it (settings.Settings.method); the rows stand in by the
    distinct values of their method columns, which is all compare reads of them."""
    method = {}
    case = rows.column("case").cast("string")
    for col in settings.METHOD_COLUMNS:
        # As compare: a column the case id names is what the case is (gemm's layout), not how it was measured.
        how = pc.filter(rows.column(col), pc.invert(pc.match_substring_regex(case, settings.named_by_case(col))))
        known = pc.unique(how.drop_null()).to_pylist()
        if known:
            method[col] = known
    if not method:
        return {}
    width = max(len(v) for v in method.values())
    raw = pd.DataFrame({c: v + [v[-1]] * (width - len(v)) for c, v in method.items()})
    return settings.of_side(types.SimpleNamespace(runs=[], raw=raw)).method


def _settings(night: Night) -> dict[str, settings.Settings]:
    """The night's settings by suite, as compare reads a run of that suite: its run.json's, and how that suite's
    rows were measured."""
    run = settings.of_side(types.SimpleNamespace(runs=[night.entry.meta], raw=None))
    suite = night.table.column("suite")
    return {s: dataclasses.replace(run, method=_method(night.table.filter(pc.equal(suite, s))))
            for s in sorted(night.suites)}


def _changes(nights: list[Night]) -> None:
    """Each night's settings, per suite, that differ from the previous night of that suite: system facts (the
    driver), software, NCCL variables, the run's options and how comm rows were measured, worded as compare
    words them. A suite's first night has none: there is nothing of its own to differ from."""
    before: dict[str, tuple[Night, settings.Settings]] = {}
    for night in nights:
        for suite, now in _settings(night).items():
            if suite in before:
                previous, was = before[suite]
                changed = cross.differences(dict(previous.system), dict(night.system)) + \
                    settings.differences(was, now)
                if changed:
                    night.changes[suite] = changed
            before[suite] = (night, now)


__all__ = ["Night", "Nights", "read", "is_directory_of_runs", "parse_since", "COLUMNS", "LEAD_IN"]
