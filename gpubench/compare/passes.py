"""What the runs' metadata knows, applied to compare's verdict rows in one place, in this order:

0. no clean baseline (:func:`without_baseline`): a figure whose every run in the baseline directory was left out
   for the machine's state (a busy host for a figure the host sets, a shared GPU) is UNKNOWN, saying so, instead
   of a figure of the current run alone: the machine's state never makes compare refuse (exit 2);
1. a shared GPU (:func:`gpubench.compare.shared_machine.shared_gpu`): a WORSE measured beside another process is
   UNKNOWN;
2. a busy host (:func:`gpubench.compare.shared_machine.busy_host`): a WORSE or BETTER of a figure the host sets,
   measured on a busy host, is UNKNOWN;
3. a rerun (:func:`gpubench.compare.confirm.apply`): a WORSE stays only where the rerun in a fresh process, judged
   against the same baseline through steps 1 and 2, is WORSE too;
4. the directory's memory (:func:`remember`): a WORSE says since which run the figure has been WORSE and for
   how many nights, and what differs between the last good run and the first bad one; a figure that was WORSE
   on the nights just before and is not tonight says it recovered;
5. acceptances of the current run itself (:func:`accepted_here`): a WORSE someone accepted on this run reads
   UNKNOWN, naming who, when and why.

Each pass may only turn a verdict (or, step 0, a figure of one side) into UNKNOWN, with a note saying why (it
knows less than the samples, never more), or add notes; the rows come back worst first.
"""

from __future__ import annotations

import math
import types
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from gpubench.compare import confirm, shared_machine as contention, gate_memory as memory, settings
from gpubench.compare.load import KEY, Side
from gpubench.compare.thresholds import Thresholds
from gpubench.compare.verdict import (BETTER, COMPARED, ONLY_CURRENT, SAME, UNKNOWN, WORSE, compare_frames,
                                      worst_first)


@dataclass
class Regression:
    """Figures WORSE since one run, and what differs between the last good run before it and that run."""

    since: str
    nights: int
    last_good: str | None
    figures: list[tuple] = field(default_factory=list)
    differences: list[str] = field(default_factory=list)

    def line(self) -> str:
        n = len(self.figures)
        head = f"WORSE since {self.since} ({self.nights} night{'s' if self.nights > 1 else ''}, {n} figure" \
               f"{'s' if n > 1 else ''})"
        if self.last_good is None:
            return head
        diff = "; ".join(self.differences) or "no setting gpubench records"
        return f"{head}; between the last good run {self.last_good} and {self.since}: {diff}"


def metadata(rows: pd.DataFrame, baseline_runs: Sequence[dict[str, Any]],
             current_runs: Sequence[dict[str, Any]]) -> pd.DataFrame:
    """Steps 1 and 2: a shared GPU and a busy host."""
    rows = contention.shared_gpu(rows, baseline_runs, current_runs)
    return contention.busy_host(rows, baseline_runs, current_runs)


@dataclass
class Passed:
    rows: pd.DataFrame  # the verdict rows after every pass, worst first
    regressions: list[Regression]  # what the memory knows of tonight's WORSE figures (step 4)
    worse: list[dict[str, Any]]  # the WORSE rows before step 5: what the run's verdict record keeps


def apply(rows: pd.DataFrame, base: Side, cur: Side, *, rerun: Side | None = None,
          thresholds: Thresholds | None = None, alpha: float = 0.01, cross_cluster: bool = False) -> Passed:
    """Every pass over ``rows`` (compare_frames' verdicts of ``base`` against ``cur``)."""
    rows = metadata(without_baseline(rows, base), base.runs, cur.runs)
    if rerun is not None:
        again = compare_frames(base.pooled(), rerun.pooled(), thresholds or Thresholds(), alpha,
                               cross_cluster=cross_cluster, window=base.is_window)
        rows = confirm.apply(rows, metadata(again, base.runs, rerun.runs))
    rows, regressions = remember(rows, base, cur)
    worse = rows[(rows["status"] == COMPARED) & (rows["verdict"] == WORSE)].to_dict("records") if len(rows) else []
    return Passed(worst_first(accepted_here(rows, cur)), regressions, worse)


_WHY = {memory.BUSY: "on a busy host (the host sets this figure)", memory.SHARED: "on a shared GPU"}


def without_baseline(rows: pd.DataFrame, base: Side) -> pd.DataFrame:
    """Step 0: a figure of the current run only, whose runs in the baseline directory were all left out for the
    machine's state, is UNKNOWN with the reason (and catches nothing)."""
    if not base.unjudged or rows.empty:
        return rows
    rows = rows.copy()
    for i, r in rows.iterrows():
        why = base.unjudged.get(tuple(str(r[k]) for k in KEY))
        if r["status"] != ONLY_CURRENT or not why:
            continue
        runs = ", ".join(f"{n} run(s) {_WHY.get(k, k)}" for k, n in why.items())
        rows.at[i, "status"], rows.at[i, "verdict"] = COMPARED, UNKNOWN
        rows.at[i, "note"] = f"no clean baseline: the directory's runs of it were left out ({runs})"
        rows.at[i, "catches"], rows.at[i, "catches_limit"] = math.inf, "no clean baseline"
    return rows


def _meta_of(side: Side, run_id: str) -> dict[str, Any] | None:
    if side.ledger is not None:
        for e in side.ledger.entries:
            if e.run_id == run_id:
                return e.meta
    return None


def _settings(meta: dict[str, Any] | None) -> settings.Settings:
    return settings.of_side(types.SimpleNamespace(runs=[meta] if meta else [], raw=None))


def remember(rows: pd.DataFrame, base: Side, cur: Side) -> tuple[pd.DataFrame, list[Regression]]:
    """Step 4: each WORSE row's ``since`` and ``nights``, with a note; recoveries noted; the regressions."""
    if base.ledger is None or rows.empty:
        return rows, []
    tonight = cur.run_ids[-1] if cur.run_ids else "this run"
    tonight_meta = cur.runs[-1] if cur.runs else None
    rows = rows.copy()
    found: dict[tuple, Regression] = {}
    for i, r in rows.iterrows():
        if r["status"] != COMPARED:
            continue
        key = tuple(str(r[k]) for k in KEY)
        episode = base.regressions.get(key, [])
        window = base.windows.get(key, [])
        last_good = window[-1] if window else None
        if r["verdict"] == WORSE:
            since, nights = (episode[0] if episode else tonight), len(episode) + 1
            rows.at[i, "since"], rows.at[i, "nights"] = since, nights
            head = f"WORSE since {since} ({nights} night{'s' if nights > 1 else ''})"
            rows.at[i, "note"] = "; ".join(x for x in (head, str(r["note"] or "")) if x)
            reg = found.get((since, last_good))
            if reg is None:
                first = tonight_meta if since == tonight else _meta_of(base, since)
                diff = settings.differences(_settings(_meta_of(base, last_good)), _settings(first)) \
                    if last_good else []
                reg = found[(since, last_good)] = Regression(since, nights, last_good, differences=diff)
            reg.figures.append(key)
        elif episode:
            nights = len(episode)
            was = f"WORSE since {episode[0]} for {nights} night{'s' if nights > 1 else ''}"
            text = f"recovered: {was}, back within the level of the nights before" if r["verdict"] in (SAME, BETTER) \
                else f"{was}; not WORSE tonight"
            rows.at[i, "note"] = "; ".join(x for x in (text, str(r["note"] or "")) if x)
    return rows, sorted(found.values(), key=lambda g: g.since)


def accepted_here(rows: pd.DataFrame, cur: Side) -> pd.DataFrame:
    """Step 5: a WORSE the current run itself has an acceptance for reads UNKNOWN, saying who accepted it."""
    if rows.empty or len(cur.paths) != 1 or not cur.paths[0].is_dir():
        return rows
    accepted = memory.acceptances_of(cur.paths[0])
    if not accepted:
        return rows
    rows = rows.copy()
    for i, r in rows.iterrows():
        a = accepted.get(tuple(str(r[k]) for k in KEY))
        if a is not None and r["status"] == COMPARED and r["verdict"] == WORSE:
            rows.at[i, "verdict"] = "UNKNOWN"
            rows.at[i, "note"] = "; ".join(x for x in (str(r["note"] or ""), f"accepted by {a.get('by')} on "
                                                       f"{a.get('at')}: {a.get('reason')}") if x)
    return rows


__all__ = ["apply", "without_baseline", "metadata", "remember", "accepted_here", "Regression", "Passed"]
