"""``gpubench accept RUN|DIR --reason TEXT [--filter REGEX]``: make a regression the new normal.

A WORSE figure stays WORSE on every later night until it recovers or is accepted (docs/compare.md). Accepting
the WORSE figures of a judged run records, in the run's directory, who accepted them, when and why; from the
first night of the regression on, compare then judges them against the level they have had since, and those
nights become baseline evidence for them again. Exit 0 when something was accepted, 2 when nothing could be.
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path

from gpubench.errors import UsageError


def add(p: argparse.ArgumentParser) -> None:
    p.add_argument("path", metavar="RUN|DIR", help="a run directory judged by compare, or a directory of runs "
                                                   "(results/<cluster>: its latest complete run)")
    p.add_argument("--reason", required=True, metavar="TEXT", help="why this level is the new normal (recorded)")
    p.add_argument("--filter", default=None, metavar="REGEX",
                   help="accept only the WORSE figures whose 'suite case metric' matches (default: all of them)")


def _run_of(path: Path) -> Path:
    from gpubench.compare.load import is_run_dir, scan  # pandas: not for --help
    from gpubench.results import no_complete_run

    if not path.is_dir():
        raise UsageError(f"{path} is not a directory: give a run directory or a directory of runs (results/<cluster>)")
    if is_run_dir(path):
        return path
    found = scan(path)
    runs = [p for _, p, _, status in found if status == "complete"]
    if not runs:
        raise UsageError(no_complete_run(path, found))
    return runs[-1]


def main(args: argparse.Namespace, argv: list[str]) -> int:
    reason = (args.reason or "").strip()
    if not reason:
        raise UsageError("--reason is empty: say why this level is the new normal (it is recorded with the run)")
    try:
        pattern = re.compile(args.filter) if args.filter else None
    except re.error as e:
        raise UsageError(f"bad --filter {args.filter!r}: {e}") from e
    from gpubench.compare import gate_memory as memory

    run = _run_of(Path(args.path))
    rec = memory.recorded(run)
    if rec is None:
        raise UsageError(f"{run} has no recorded verdict: judge it first against the runs before it "
                         f"(gpubench compare {run.parent} {run})")
    worse = list(rec.get("worse") or [])
    chosen = [w for w in worse if pattern is None or pattern.search(f"{w['suite']} {w['case']} {w['metric']}")]
    if not chosen:
        what = f" matching {args.filter!r}" if pattern else ""
        raise UsageError(f"nothing to accept: {run.name} has {len(worse)} WORSE figure(s){what} in its recorded "
                         "verdict (gpubench compare lists them)")
    figures = [{"suite": w["suite"], "case": w["case"], "metric": w["metric"], "from": w.get("since") or run.name}
               for w in chosen]
    entry = memory.accept(run, figures, reason, args.filter)
    starts = sorted({f["from"] for f in figures})
    print(f"accepted {len(figures)} WORSE figure(s) of {run.name} ({entry['by']}, {entry['at']}: {reason})")
    print(f"from {', '.join(starts)} on, compare judges them against the level they have had since; recorded in "
          f"{run / memory.ACCEPTED}")
    return 0
