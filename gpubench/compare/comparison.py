"""A comparison of a baseline with a current result, from the paths the user gave to the verdict rows; and
the comparisons ``gpubench report`` shows for a list of runs (:func:`against_earlier`)."""

from __future__ import annotations

import dataclasses
import os
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import pandas as pd

from gpubench.compare import shared_machine as contention, cross, gate_memory as memory, pace, passes, settings
from gpubench.compare.load import KEY, Side, resolve
from gpubench.compare.thresholds import Thresholds
from gpubench.compare.verdict import (COMPARED, DEFAULT_ALPHA, MIN_RUNS, ONLY_BASELINE, ONLY_CURRENT, SKIPPED, WORSE,
                                      compare_frames)
from gpubench.errors import UsageError

EXIT_OK, EXIT_WORSE = 0, 1


@dataclass
class Report:
    baseline: Side
    current: Side
    baseline_system: dict[str, Any]
    current_system: dict[str, Any]
    cross_cluster: bool
    thresholds: Thresholds
    alpha: float
    rows: pd.DataFrame
    notes: list[str] = field(default_factory=list)
    # Software and NCCL/RCCL settings that differ ("name: baseline → current"): why a figure may have moved.
    setting_differences: list[str] = field(default_factory=list)
    # What the directory's memory knows of tonight's WORSE figures (gpubench.compare.passes.remember).
    regressions: list[passes.Regression] = field(default_factory=list)
    rerun: str | None = None  # the rerun that confirmed WORSE figures, as given or as recorded for the run
    # The lines that lead the summary: a GPU shared or a host busy during a side's run (compare.contention).
    contended: list[str] = field(default_factory=list)
    # The current run's directory where its verdict belongs to the baseline directory's memory (the nightly
    # gate), and the rows that verdict keeps: what record() writes.
    gate: Path | None = None
    worse: list[dict[str, Any]] = field(default_factory=list)
    recorded: str | None = None  # where record() wrote this verdict (gpubench.compare.gate_memory), if it did

    @property
    def system_differences(self) -> list[str]:
        return cross.differences(self.baseline_system, self.current_system)

    def counts(self) -> dict[str, int]:
        """Verdicts of compared rows, and the other rows by status."""
        compared = self.rows[self.rows["status"] == COMPARED]
        counts = Counter(compared["verdict"])
        counts.update(self.rows.loc[self.rows["status"] != COMPARED, "status"])
        return dict(counts)

    @property
    def exit_code(self) -> int:
        return EXIT_WORSE if (self.rows["verdict"] == WORSE).any() else EXIT_OK

    @property
    def baseline_text(self) -> str:
        return cross.describe(self.baseline_system, self.baseline)

    @property
    def current_text(self) -> str:
        return cross.describe(self.current_system, self.current)

    def title(self) -> str:
        kind = "cross-cluster comparison" if self.cross_cluster else "compare"
        text = f"gpubench {kind}\nbaseline: {self.baseline_text}\ncurrent:  {self.current_text}"
        if self.cross_cluster:
            differ = "; ".join(self.system_differences) or "nothing the fingerprints name"
            text += f"\ndiffers:  {differ} (judged on % of spec peak where known; other figures: ratio only)"
        return text

    def summary(self) -> str:
        c = self.counts()
        order = ("WORSE", "UNKNOWN", "SAME", "BETTER", "not-ok", "incomparable", "only-baseline", "only-current",
                 SKIPPED)
        text = ", ".join(f"{c[k]} {k}" for k in order if c.get(k))
        return text or "nothing compared"


def build(baseline: str | os.PathLike, current: str | os.PathLike, *, window: int | None = None,
          thresholds: Thresholds | None = None, alpha: float = DEFAULT_ALPHA, cross_cluster: bool = False,
          confirm: str | os.PathLike | None = None, host_pace: bool = True) -> Report:
    """Load both sides, check they are one system (unless ``cross_cluster``), judge every shared figure, and
    apply what the runs' metadata knows (gpubench.compare.passes). ``confirm``: a rerun of the WORSE cases.

    Where the current run is a run of the baseline's directory (the nightly gate: ``compare DIR RUN``), a rerun
    recorded there before confirms this comparison too, and :func:`record` keeps the verdict in the run's
    directory (gpubench.compare.gate_memory). Raises UsageError (exit 2) for inputs that cannot be compared; WORSE
    rows are the caller's exit 1.
    """
    if window is not None and window < 1:
        raise UsageError(f"--baseline-window {window}: give 1 or more runs")
    if not 0 < alpha < 1:
        raise UsageError(f"--alpha {alpha}: give a significance level between 0 and 1, such as 0.01")
    thresholds = thresholds or Thresholds()
    cur = resolve(current)
    want = set(zip(*(cur.raw[k].astype(str) for k in KEY))) if len(cur.raw) else set()
    # From a directory of runs the baseline is, per figure, the latest clean runs of the current run's system before
    # it (DEFAULT_WINDOW unless --baseline-window): `compare results/A results/A` judges the newest against the others.
    base = resolve(baseline, window=window, exclude=cur.run_ids, like=cross.system_of(cur), want=want, baseline=True)
    b_sys, c_sys = cross.system_of(base), cross.system_of(cur)
    diff = cross.differences(b_sys, c_sys)
    if diff and not cross_cluster:
        raise UsageError(f"{baseline} and {current} ran on different systems ({'; '.join(diff)}): pass "
                         "--cross-cluster to compare them anyway (ratios and % of spec peak)")
    gate = _gate_run(base, cur) if not diff else None
    rerun_path = str(confirm) if confirm else (_recorded_rerun(gate) if gate is not None else None)
    rerun = resolve(rerun_path) if rerun_path else None
    # Host-timed figures at the baseline's host pace (gpubench.compare.pace); not across systems: another host's
    # figures at this host's pace would mean nothing.
    paced = pace.adjust(base, cur, [rerun] if rerun else []) if host_pace and not diff else pace.Adjusted()
    rows = compare_frames(base.pooled(), cur.pooled(), thresholds, alpha, cross_cluster=bool(diff),
                          window=base.is_window)
    notes = [line for line in (base.window_line(), paced.note()) if line]
    if base.is_window and max((len(v) for v in base.windows.values()), default=len(base.paths)) < MIN_RUNS:
        notes.append(f"{baseline}: the baseline window holds {len(base.paths)} run(s); changes are judged from "
                     f"{MIN_RUNS} runs on, so nothing is WORSE yet")
    if rerun_path and not confirm:
        notes.append(f"confirmed with the rerun recorded for this run: {rerun_path}")
    done = passes.apply(rows, base, cur, rerun=rerun, thresholds=thresholds, alpha=alpha, cross_cluster=bool(diff))
    state = contention.describe(base.runs, cur.runs)
    differ = settings.differences(settings.of_side(base), settings.of_side(cur))
    report = Report(base, cur, b_sys, c_sys, cross_cluster, thresholds, alpha, done.rows,
                    [*notes, *base.notes, *cur.notes], [*differ, *filter(None, [state.host_difference])],
                    regressions=done.regressions, rerun=rerun_path, contended=state.lines, gate=gate,
                    worse=done.worse)
    _check_comparable(report, baseline, current)
    return report


def record(report: Report) -> Report:
    """``report`` as recorded: where it judged a run of the baseline's directory (the nightly gate), its verdict
    is written into that run's directory, so that later nights leave its regressions out of their baseline
    (gpubench.compare.gate_memory); the same report, with ``recorded`` saying where. A verdict that cannot be written
    is a UsageError (exit 2)."""
    if report.gate is None:
        return report
    return dataclasses.replace(report, recorded=str(_record(report, report.gate)))


def _gate_run(base: Side, cur: Side) -> Path | None:
    """The current run's directory when it is judged against the runs of its own directory (a window of them,
    or the pinned baseline named there): the nightly gate, whose verdicts the directory remembers."""
    if base.directory is None or len(cur.paths) != 1 or not cur.paths[0].is_dir():
        return None
    run = cur.paths[0]
    try:
        same = run.parent.resolve() == Path(base.directory).resolve()
    except OSError:
        return None
    return run if same else None


def _recorded_rerun(run: Path) -> str | None:
    """The rerun recorded with ``run``'s verdict, where it still exists (relative to the run's directory)."""
    rec = memory.recorded(run)
    rel = (rec or {}).get("rerun")
    if not rel:
        return None
    path = (run / rel).resolve()
    return str(path) if path.is_dir() else None


def _record(report: Report, run: Path) -> Path:
    base, rerun = report.baseline, report.rerun
    rel = os.path.relpath(rerun, run) if rerun else None
    try:
        return memory.record(run, rows=report.worse, summary=report.counts(), exit_code=report.exit_code,
                             baseline={"label": base.label, "runs": base.run_ids, "left_out": base.left_out},
                             rerun=rel)
    except OSError as e:
        raise UsageError(f"cannot record the verdict in {run / memory.RECORD}: {e.strerror or e}; pass "
                         "--no-record to compare without remembering it") from e


def _check_comparable(report: Report, baseline: str | os.PathLike, current: str | os.PathLike) -> None:
    rows = report.rows
    shared = rows
    if len(rows):
        # a case skipped on one side and absent from the other is no more shared than one on one side only
        one_side = rows["n_baseline"].isna() | rows["n_current"].isna()
        shared = rows[~(rows["status"].isin([ONLY_BASELINE, ONLY_CURRENT]) | ((rows["status"] == SKIPPED) & one_side))]
    if shared.empty:
        raise UsageError(f"{baseline} and {current} have no figure in common: compare runs of the same suites "
                         "(gpubench run --suite ... with the same --quick/--dtype/--sizes)")
    if not (shared["status"] == COMPARED).any():
        why = Counter(shared["status"])
        raise UsageError(f"nothing to compare between {baseline} and {current}: the shared figures are "
                         f"{', '.join(f'{n} {s}' for s, n in why.items())}; rerun the failed cases, or promote a new "
                         "baseline after a suite version change")


class TableRun(Protocol):
    """A run as the report read it (:class:`gpubench.report.runs.Run`, a floor above): its folder, rows, run.json and
    label."""

    path: Path
    df: pd.DataFrame
    meta: dict[str, Any]
    label: str


@dataclass
class CompareTable:
    baseline: TableRun
    current: TableRun
    report: Report | None = None  # None with a note saying why not
    note: str = ""


def _suites(run: TableRun) -> set[str]:
    return set(run.df["suite"].dropna().astype(str)) if "suite" in run.df.columns else set()


def _system(run: TableRun) -> dict[str, Any]:
    """A run's system facts from the run.json the report read already (loading each pair's tables again only to
    read them was 18 of the 46 table reads of a report of 10 runs); from its rows where it has none."""
    return cross.system_of_meta(run.meta) or cross.system_of(resolve(run.path))


def against_earlier(runs: Sequence[TableRun]) -> list[CompareTable]:
    """The report page's comparisons: the first run as the baseline of each later run, across clusters where the
    systems differ. Runs of different suites have nothing to compare: a later run is judged against the first
    earlier run that shares a suite with it, and gets a note if none does."""
    out = []
    for k, cur in enumerate(runs[1:], start=1):
        base = next((b for b in runs[:k] if _suites(b) & _suites(cur)), None)
        if base is None:
            out.append(CompareTable(runs[0], cur, note=f"no earlier run in the report has its suites "
                                                       f"({', '.join(sorted(_suites(cur))) or 'no rows'})"))
            continue
        try:
            differ = bool(cross.differences(_system(base), _system(cur)))
            out.append(CompareTable(base, cur, build(base.path, cur.path, cross_cluster=differ)))
        except UsageError as e:  # not comparable (e.g. only failed rows shared): say so on the page
            out.append(CompareTable(base, cur, note=str(e)))
    return out


__all__ = ["Report", "build", "record", "CompareTable", "against_earlier", "EXIT_OK", "EXIT_WORSE"]
