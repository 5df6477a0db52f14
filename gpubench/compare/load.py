"""One side of a comparison: which runs a path names, and their rows pooled into one row per figure.

A path is
- a run directory (``run.json`` and its tables),
- a table file (``.parquet``; the ``run.json`` beside it, when there is one, gives its fingerprint),
- a directory of runs, such as ``results/<cluster>/``: for each figure, the ``window`` latest runs (by run_id:
  run_ids start with the UTC start time; default :data:`DEFAULT_WINDOW`) that are evidence of its normal level,
  of the same system as the other side where ``like`` names one. Runs that did not complete, that shared their
  GPU or ran on a busy host are no evidence; nor is a run for a figure it was judged WORSE on and nobody
  accepted, nor a run older than a figure's accepted level (:mod:`gpubench.compare.gate_memory`),
- or a small text file naming a run directory (the ``baseline`` pointer of ci/nightly.sh), relative to the
  file's own directory.

A side's rows are pooled into one row per figure by :mod:`gpubench.compare.pool` (``Side.pooled``): each run of
a window stays one piece of evidence (``run_values``, or one value per process of a figure measured in several).
``history_values`` adds the run medians of older runs of the directory (up to :data:`SPREAD_HISTORY` runs in
all): figures set by the host drift through quiet stretches longer than a window (docs/measurements.md, 'compare'),
so their spread is taken over the longer history as well.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from gpubench import results
from gpubench.compare import cross, gate_memory as memory
from gpubench.compare.defaults import DEFAULT_WINDOW
from gpubench.compare.pool import KEY, pool
from gpubench.results.rundir import status_of
from gpubench.errors import UsageError
from gpubench.results.host_set import disturbed_by_load

SPREAD_HISTORY = 20  # runs, the window's included, that a host-set figure's run-to-run spread is taken over
_POINTER_MAX_BYTES = 4096  # a pointer file holds one path; anything larger is not one


@dataclass
class Side:
    label: str  # the path as the user gave it
    paths: list[Path]  # run directories or table files, oldest first
    runs: list[dict[str, Any]]  # run.json of each (empty where a bare table has none)
    raw: pd.DataFrame  # every row of every run
    asked_window: int = 1
    notes: list[str] = field(default_factory=list)
    history: pd.DataFrame | None = None  # rows of older runs before the window (directory of runs only)
    # A directory of runs: the directory, its runs before the current one with their verdicts (the memory),
    # for each figure the runs of its window and the nights of its current regression, and the runs left out.
    directory: Path | None = None
    ledger: memory.Ledger | None = None
    windows: dict[tuple, list[str]] = field(default_factory=dict)
    regressions: dict[tuple, list[str]] = field(default_factory=dict)
    left_out: dict[str, list[str]] = field(default_factory=dict)  # reason -> run_ids
    # Figures whose every run was left out for the machine's state (a busy host, a shared GPU): why, by run count.
    unjudged: dict[tuple, dict[str, int]] = field(default_factory=dict)

    @property
    def run_ids(self) -> list[str]:
        ids = [str(r.get("run_id")) for r in self.runs if r.get("run_id")]
        if ids:
            return ids
        return sorted({str(x) for x in self.raw.get("run_id", pd.Series(dtype=object)).dropna()})

    def pooled(self) -> pd.DataFrame:
        return pool(self.raw, self.history)

    @property
    def is_window(self) -> bool:
        """Taken from a directory of runs as a window (a history that may still be filling), not one run."""
        return self.asked_window > 1

    def window_line(self) -> str | None:
        """``window: 5 runs (A … B); left out: 1 shared GPU, 3 regressed``, for a directory of runs."""
        if self.directory is None or not self.is_window:
            return None
        ids = self.run_ids
        span = f" ({ids[0]} … {ids[-1]})" if len(ids) > 1 else (f" ({ids[0]})" if ids else "")
        line = f"window: {len(ids)} run(s){span}: each figure's latest {self.asked_window} clean runs"
        order = [memory.SHARED, memory.BUSY, "regressed"]
        reasons = sorted(self.left_out, key=lambda k: (order.index(k) if k in order else len(order), k))
        gone = [f"{len(self.left_out[k])} {k}{_FOR.get(k, '')}" for k in reasons if self.left_out[k]]
        return line + (f"; left out: {', '.join(gone)}" if gone else "")


# A busy host's run is left out for the figures the host sets only (gpubench.results.host_set): the window line says so.
_FOR = {memory.BUSY: " (for the figures the host sets)"}


def is_run_dir(path: Path) -> bool:
    return (path / results.RUN_FILE).is_file() or any(path.glob(f"*{results.TABLE_SUFFIX}"))


def run_candidates(collection: Path) -> list[tuple[str, Path, dict[str, Any]]]:
    """(run_id, path, run.json) of the complete runs directly under ``collection``, oldest first.

    Symlinks are skipped (a ``baseline`` link would count a run twice); runs still running, interrupted or
    failed are skipped too: their tables are partial.
    """
    return [(i, p, m) for i, p, m, status in scan(collection) if status == "complete"]


def scan(collection: Path) -> list[tuple[str, Path, dict[str, Any], str]]:
    """(run_id, path, run.json, status) of every run directly under ``collection``, oldest first; a run whose
    run.json cannot be read has status ``unreadable`` (a crash mid-write, a newer gpubench)."""
    found = []
    for child in collection.iterdir():
        if child.is_symlink() or not child.is_dir() or not (child / results.RUN_FILE).is_file():
            continue
        try:
            meta = results.read_run_meta(child)
        except UsageError:
            found.append((child.name, child, {}, "unreadable"))
            continue
        found.append((str(meta.get("run_id") or child.name), child, meta, status_of(child, meta)))
    return sorted(found, key=lambda t: t[0])


def _read_pointer(path: Path) -> Path | None:
    """The run directory a small text file names, or None if it is not such a file."""
    if path.stat().st_size > _POINTER_MAX_BYTES:
        return None
    try:
        text = path.read_text().strip()
    except (OSError, UnicodeDecodeError):
        return None
    if not text or "\n" in text:
        return None
    target = Path(text)
    target = target if target.is_absolute() else path.parent / target
    return target if target.is_dir() else None


def _same_system(meta: dict[str, Any], like: dict[str, Any]) -> bool:
    return not cross.differences(cross.system_of_meta(meta), like)


def resolve(path: str | os.PathLike, *, window: int | None = 1, exclude: Sequence[str] = (),
            like: dict[str, Any] | None = None, want: Iterable[tuple] | None = None, baseline: bool = False) -> Side:
    """The runs ``path`` names (see the module docstring). A directory of runs is the ``baseline`` side's
    windows (``window``: runs per figure, None for :data:`DEFAULT_WINDOW`; ``exclude`` drops run_ids, ``like``
    (system facts, :func:`gpubench.compare.cross.system_of`) keeps its runs of that system where it has any,
    ``want`` names the figures (suite, case, metric) a window is looked for, default every figure of the runs
    it reads); any other side takes its latest complete run, whole."""
    label = str(path)
    explicit = window is not None
    window = window if explicit else 1
    p = Path(path)
    pinned = None  # the directory holding a pointer to a pinned baseline (ci/nightly.sh's BASELINE_WINDOW=0)
    if p.is_file() and p.suffix != results.TABLE_SUFFIX:
        target = _read_pointer(p)
        if target is None:
            raise UsageError(f"{p} is neither a {results.TABLE_SUFFIX} table nor a file naming a run directory")
        pinned, p = p.parent, target
    elif p.is_symlink() and p.is_dir():
        pinned = p.parent
    if p.is_file():
        if window > 1:
            raise UsageError(f"--baseline-window {window} needs a directory of runs, and {p} is one table")
        df = results.load_table(p)
        meta = results.read_run_meta(p.parent) if (p.parent / results.RUN_FILE).is_file() else {}
        return Side(label, [p], [meta] if meta else [], df)
    if not p.is_dir():
        raise UsageError(f"{p} does not exist: give a run directory, a {results.TABLE_SUFFIX} table or a "
                         "directory of runs such as results/<cluster>")
    if is_run_dir(p):
        if window > 1:
            raise UsageError(f"--baseline-window {window} needs a directory of runs (such as results/<cluster>), "
                             f"and {p} is one run")
        df = results.load(p)
        meta = df.attrs.get("run") or {}
        return Side(label, [p], [meta] if meta else [], df, directory=pinned)
    if not baseline:
        found = scan(p)
        latest = [c for c in found if c[3] == "complete"]
        if not latest:
            raise UsageError(results.no_complete_run(p, found))
        df = results.load(latest[-1][1])
        return Side(label, [latest[-1][1]], [latest[-1][2]], df)
    return _directory(p, label, window if explicit else DEFAULT_WINDOW, explicit, exclude, like, want)


# How many runs a directory's windows may reach back through, at most: a regression left red for weeks keeps
# its figure's window on the nights before it, further back than the others'.
MAX_SCAN = 200


def _directory(p: Path, label: str, window: int, explicit: bool, exclude: Sequence[str],
               like: dict[str, Any] | None, want: Iterable[tuple] | None) -> Side:
    """A directory of runs as a baseline: for each figure the latest ``window`` runs that are evidence of its
    normal level (and the older ones of its history), newest first until every wanted figure has its window."""
    every = scan(p)
    before, complete = _earlier_runs(p, every, exclude, like)
    ledger = memory.Ledger(memory.Entry.read(i, path, meta) for i, path, meta, _ in complete)
    reading = _Reading(window, set(want) if want is not None else None)
    reading.note_incomplete(before)
    for entry in reversed(ledger.entries):
        needed = reading.open_suites()
        if needed is not None and not needed or reading.loads >= reading.max_loads:
            break
        held = suites_of(entry.meta)
        if needed is not None and held is not None and not held & needed:
            continue  # a run of other suites only: no evidence for these figures, and not read
        reading.take(entry, ledger)
    return _directory_side(p, label, window, explicit, ledger, reading)


def suites_of(meta: dict[str, Any]) -> set[str] | None:
    """The suites a run measured, from its run.json (None where it does not say: its tables are read to know)."""
    suites = meta.get("suites")
    return {str(s) for s in suites} if isinstance(suites, (dict, list)) and suites else None


def _earlier_runs(p: Path, every: list[tuple[str, Path, dict[str, Any], str]], exclude: Sequence[str],
                  like: dict[str, Any] | None) -> tuple[list, list]:
    """The runs of ``every`` a baseline may come from (before the current one), and those of them complete (of
    the system ``like`` names, where there are any)."""
    current = [i for i, _, _, _ in every if i in set(exclude)]
    # Where the current run is one of this directory's, its baseline is the runs before it, not any made later.
    before = [c for c in every if c[0] not in set(exclude) and (not current or c[0] < min(current))]
    complete = [c for c in before if c[3] == "complete"]
    if like:
        mine = [c for c in complete if _same_system(c[2], like)]
        complete = mine or complete  # none of that system: the latest runs, and compare says they differ
    if not complete:
        if any(c[3] == "complete" for c in every):
            others = [results.why_not_complete(path, status) for _, path, _, status in before]
            said = f": {'; '.join(others[:_NAMED])}{_more(len(others))}" if others else ""
            raise UsageError(f"{p} holds no complete run other than the current one ({', '.join(exclude)}){said}; "
                             "a baseline needs an earlier complete run: give its run directory")
        raise UsageError(results.no_complete_run(p, every))
    return before, complete


@dataclass
class _Reading:
    """A directory's runs read newest first: for each figure the runs of its window and of its history, the
    nights of its current regression, and the runs left out and why.

    Runs are counted per suite: where several suites' nights share a directory (an elementwise night, a gemm
    night, a comm night), an elementwise figure's window and history are the latest elementwise runs, however
    many runs of other suites lie between them, and a run of other suites only is neither read nor named."""
    window: int
    wanted: set[tuple] | None
    win: dict[tuple, list[str]] = field(default_factory=dict)
    hist: dict[tuple, int] = field(default_factory=dict)
    episode: dict[tuple, list[str]] = field(default_factory=dict)
    frames: list[pd.DataFrame] = field(default_factory=list)
    older: list[pd.DataFrame] = field(default_factory=list)
    used: list[memory.Entry] = field(default_factory=list)
    left: dict[str, list[str]] = field(default_factory=dict)
    unreadable: dict[str, str] = field(default_factory=dict)
    why: dict[str, str] = field(default_factory=dict)  # run_id -> why it gave no rows (not complete, unreadable)
    scanned: Counter = field(default_factory=Counter)  # suite -> its runs read (runs left out whole not counted)
    loads: int = 0  # runs whose tables were read, every suite
    # figure -> how many runs of its suite had been read when it was last seen
    seen: dict[tuple, int] = field(default_factory=dict)
    # figure -> {why: runs}: runs that held it and were left out for the machine's state
    blocked: dict[tuple, Counter] = field(default_factory=dict)

    @property
    def reach(self) -> int:
        return max(SPREAD_HISTORY, self.window)

    @property
    def suites(self) -> set[str] | None:
        return {k[0] for k in self.wanted} if self.wanted is not None else None

    @property
    def max_loads(self) -> int:
        """Runs read at most: MAX_SCAN of each wanted suite (of the directory, where no figure is named)."""
        return MAX_SCAN * max(1, len(self.suites or ()))

    def note_incomplete(self, before: list[tuple[str, Path, dict[str, Any], str]]) -> None:
        wanted = self.suites
        for i, path, meta, status in before:  # runs that never completed: their tables are partial
            held = suites_of(meta)
            if status == "complete" or (wanted is not None and held is not None and not held & wanted):
                continue
            self.left.setdefault(status, []).append(i)
            self.why[i] = results.why_not_complete(path, status)
            if status == "unreadable":
                self.unreadable[i] = f"cannot read {path / results.RUN_FILE}"

    def open_suites(self) -> set[str] | None:
        """The wanted suites whose figures still need older runs (None: no figure named, every run is read up to
        MAX_SCAN): a suite is done once MAX_SCAN of its runs were read, or a whole history of them was and each
        of its figures has its window or has not been seen for a whole history (a figure new to the directory,
        or gone from it): only a figure still regressed keeps the reading going further back."""
        if self.wanted is None:
            return None
        out = set()
        for k in self.wanted:
            n = self.scanned[k[0]]
            if k[0] in out or n >= MAX_SCAN:
                continue
            if n < self.reach or (len(self.win.get(k, ())) < self.window and n - self.seen.get(k, 0) < self.reach):
                out.add(k[0])
        return out

    def take(self, entry: memory.Entry, ledger: memory.Ledger) -> None:
        """Read one run (the next older one) and take its rows into the windows and histories they belong to. A
        run on a shared GPU is no evidence for any of its figures; a run on a busy host none for the figures the
        host sets (gpubench.results.host_set), while those the GPU times stand."""
        self.loads += 1
        try:
            df = results.load(entry.path)
        except UsageError as e:  # a table cut short by a crash or a full disk: one bad night blocks no other
            self.left.setdefault(entry.reason or "unreadable", []).append(entry.run_id)
            self.why[entry.run_id] = str(e)
            if not entry.reason:
                self.unreadable[entry.run_id] = str(e)
            return
        df.attrs = {}  # its run.json is entry.meta; pandas would deep-copy it with every slice below
        held = set(df["suite"].astype(str)) if len(df) else set()
        if self.wanted is not None and not held & self.suites:
            return  # its run.json did not say which suites it holds: none of these figures'
        if entry.reason:
            self.left.setdefault(entry.reason, []).append(entry.run_id)
        keys = list(zip(*(df[k].astype(str) for k in KEY))) if len(df) else []
        if entry.reason not in (None, memory.BUSY):
            self._block(keys, entry.reason)
            return
        host = {k for k, r in zip(keys, df.to_dict("records")) if disturbed_by_load(r)} if entry.reason else set()
        self._block(host, memory.BUSY)
        self.scanned.update(held)
        place = {k: self._place(entry, k, ledger) if k not in host else None for k in dict.fromkeys(keys)}
        mask = pd.Series([place[k] == "window" for k in keys], index=df.index, dtype=bool)
        hmask = pd.Series([place[k] == "history" for k in keys], index=df.index, dtype=bool)
        if mask.any():
            self.frames.append(df[mask])
            # the runs a side names are those of its figures' windows (a figure no run has a number for, such
            # as a copy's TFLOP/s, is no figure)
            if _has_number(df[mask]):
                self.used.append(entry)
        if any(entry.run_id in self.episode.get(k, ()) for k in place):
            self.left.setdefault("regressed", []).append(entry.run_id)
        if hmask.any():
            self.older.append(df[hmask])

    def _block(self, keys: Iterable[tuple], why: str) -> None:
        for k in dict.fromkeys(keys):
            if self.wanted is None or k in self.wanted:
                self.blocked.setdefault(k, Counter())[why] += 1

    def _place(self, entry: memory.Entry, k: tuple, ledger: memory.Ledger) -> str | None:
        """Where a figure's rows of this run go: "window", "history" or None (not taken from this run)."""
        self.seen[k] = self.scanned[k[0]]
        why = ledger.evidence(entry, k)
        if why == "regressed" and not self.win.get(k):  # newer than its window: a night of its regression
            self.episode.setdefault(k, []).append(entry.run_id)
        if why is not None or (self.wanted is not None and k not in self.wanted):
            return None
        if len(self.win.setdefault(k, [])) < self.window:
            self.win[k].append(entry.run_id)
            return "window"
        if self.hist.get(k, 0) + len(self.win[k]) < self.reach:
            self.hist[k] = self.hist.get(k, 0) + 1
            return "history"
        return None


def _directory_side(p: Path, label: str, window: int, explicit: bool, ledger: memory.Ledger,
                    reading: _Reading) -> Side:
    """The baseline side a directory's reading gives, with notes on the runs it could not read or lacked."""
    win, left, used = reading.win, reading.left, reading.used
    if reading.frames and not used:
        used = [e for e in ledger.entries if any(e.run_id in v for v in win.values())]
    unjudged = {k: dict(v) for k, v in reading.blocked.items() if not win.get(k)}
    if not reading.frames and not unjudged:
        named = list(reading.why.values())  # each names its run's path and why it gave no rows
        said = f": {'; '.join(named[:_NAMED])}{_more(len(named))};" if named else ":"
        raise UsageError(f"{p} holds no run that is evidence of a normal level (left out: "
                         f"{', '.join(f'{len(v)} {k}' for k, v in left.items()) or 'none'}){said} give a run "
                         "directory")
    if not reading.frames:  # every run was left out for the machine's state: its figures are judged UNKNOWN
        return Side(label, [], [], results.frame([]), asked_window=window, directory=p, ledger=ledger,
                    left_out={k: sorted(v) for k, v in left.items() if v}, unjudged=unjudged)
    used.sort(key=lambda e: e.run_id)
    oldest = used[0].run_id
    # runs left out before the oldest run used are no news; busy ones were read, for the figures the GPU times
    left = {k: sorted(i for i in v if i > oldest or k == memory.BUSY) for k, v in left.items()}
    older = reading.older
    side = Side(label, [e.path for e in used], [e.meta for e in used],
                pd.concat(list(reversed(reading.frames)), ignore_index=True), asked_window=window,
                history=pd.concat(list(reversed(older)), ignore_index=True) if older else None, directory=p,
                ledger=ledger, windows={k: sorted(v) for k, v in win.items()},
                regressions={k: sorted(v) for k, v in reading.episode.items()},
                left_out={k: v for k, v in left.items() if v}, unjudged=unjudged)
    if reading.unreadable:
        side.notes.append(f"{label}: left out {len(reading.unreadable)} run(s) that cannot be read: "
                          + "; ".join(f"{i} ({why})" for i, why in reading.unreadable.items()))
    if explicit and max((len(v) for v in win.values()), default=0) < window:
        side.notes.append(f"{label}: {max((len(v) for v in win.values()), default=0)} clean run(s), fewer than "
                          f"the window of {window}")
    return side


_NAMED = 3  # runs an error message names one by one


def _more(n: int) -> str:
    return f"; {n - _NAMED} more" if n > _NAMED else ""


def _has_number(df: pd.DataFrame) -> bool:
    """Whether any row holds a finite value (rows of figures a run has no number for do not)."""
    return bool(pd.to_numeric(df["value"], errors="coerce").notna().any()) if "value" in df.columns else False


__all__ = ["KEY", "DEFAULT_WINDOW", "MAX_SCAN", "Side", "resolve", "pool", "run_candidates", "scan", "is_run_dir"]
