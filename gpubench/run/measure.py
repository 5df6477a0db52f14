"""A run's request measured: its session (alone, the ranks of a collective, each device of ``--devices``: decided
by :mod:`gpubench.run.session`), the runner, and on the terminal of the process that writes the run its tables and
closing lines; the exit code. ``gpubench run`` ends here, and so does a run another run starts with its request
(autotune's trials: ``python -m gpubench.run.measure REQUEST_FILE``).
"""

from __future__ import annotations

import contextlib
import shutil
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from gpubench.errors import EXIT_FAILED, EXIT_INTERRUPTED, EXIT_OK, EXIT_USAGE, UsageError, say_error
from gpubench.machine.contention import MEASURED_KEYS, closing, measured
from gpubench.machine.memory_budget import TOO_BIG
from gpubench.run.request import RunRequest, loads

if TYPE_CHECKING:
    from gpubench.console import RunProgress
    from gpubench.run import runner
    from gpubench.run.prestart import Started
    from gpubench.suite import Suite


def measure(request: RunRequest, early: Started | None = None) -> int:
    """The suites' cases, measured in the processes the request asks for (gpubench.run.session decides which), with
    the progress and the summary on the terminal of the process that writes the run."""
    from gpubench.console import RunProgress
    from gpubench.run import runner
    from gpubench.run.session import measuring, open_run

    session = open_run(request)
    if isinstance(session, int):  # this process started the ranks: their exit code
        return session
    with measuring(session):
        progress = RunProgress() if session.root else None
        try:
            outcome = runner.execute(session.plan, session.backend, request, layout=session.layout,
                                     progress=progress, early=early if session.group is None else None)
            if session.root:
                _nothing_fits(outcome, progress)
        finally:
            if progress:
                progress.stop()
        if session.root:
            return _summary(outcome, request.what.suites)
        if outcome.error:  # a peer lost: this rank's one line, and out at once (no teardown with a peer gone)
            from gpubench.ranks import ending

            ending.end(outcome.status, outcome.error, EXIT_FAILED)
    return EXIT_INTERRUPTED if outcome.status == "interrupted" else (EXIT_FAILED if outcome.failures else EXIT_OK)


def _nothing_fits(outcome: runner.Outcome, progress: RunProgress | None) -> None:
    """A run in which every case was skipped for memory asked for nothing this machine can hold: its run directory
    goes (it holds no figure), and one line says so (exit 2), as for any other request that cannot be met."""
    df = outcome.frame
    if outcome.status != "complete" or df.empty or not (df["status"] == "skipped").all():
        return
    messages = df["message"].astype(str)
    if not messages.str.contains(TOO_BIG, regex=False).all():
        return  # skipped for other reasons (no GPU for copies and launches): a run that says why, exit 0
    if progress:
        progress.discard()  # the skips it held back: the one line below says what they would
    shutil.rmtree(outcome.run_dir.path, ignore_errors=True)
    with contextlib.suppress(OSError):  # the cluster's folder too, where this run made it and left it empty
        outcome.run_dir.path.parent.rmdir()
    smallest = min(messages, key=len)
    raise UsageError(f"nothing asked for fits here: each of the {df['case'].nunique()} case(s) was too large (e.g. "
                     f"{smallest}); choose smaller --sizes")


def _summary(outcome: runner.Outcome, suites: Sequence[Suite]) -> int:
    """The run's tables and closing lines on the terminal; the exit code."""
    from gpubench.console import cost_line, out_console, say, summary_tables
    from gpubench.ranks import ending
    from gpubench.results.rundir import saved

    console = out_console()
    for table in summary_tables(outcome.frame, {s.name: s.params for s in suites},
                                {s.name: s.shown for s in suites}, {s.name: s.blocks for s in suites}):
        console.print(table)
    for line in outcome.notes:  # what a suite did not measure, or measured otherwise than asked: a line each
        say(console, line)
    cases = measured(outcome.frame.reindex(columns=MEASURED_KEYS).to_dict("records"))
    # What the cases took, then what shared the machine with them: a warning is the last word before the path.
    for line in [cost_line(outcome.frame), *closing(outcome.contention, cases)]:
        if line:
            say(console, line)
    say(console, f"run directory: {outcome.run_dir.path}")
    if outcome.error:  # the ranks could no longer agree: a peer was lost (it is named), what was kept is above
        ending.end(outcome.status, outcome.error, EXIT_FAILED)  # the line names the run and its cases; no teardown
    if outcome.status == "interrupted":
        # Read back from the run directory: what was measured before the Ctrl-C, none if none.
        left = f"; {outcome.abandoned} was abandoned" if outcome.abandoned else ""
        say(console, f"interrupted{left}; {saved(outcome.run_dir.path)}")
        return EXIT_INTERRUPTED
    if outcome.failures:
        say(console, f"{outcome.failures} case(s) failed (status error or invalid); see the table")
        return EXIT_FAILED
    return EXIT_OK


def main(argv: Sequence[str]) -> int:
    """``python -m gpubench.run.measure REQUEST_FILE``: the request a run wrote there (:func:`gpubench.run.request.
    dumps`), measured as ``gpubench run`` measures its own; bad input one line, exit 2."""
    try:
        return measure(loads(Path(argv[0]).read_text()))
    except UsageError as e:
        say_error(str(e))
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("gpubench: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED


__all__ = ["measure", "main"]


if __name__ == "__main__":
    from gpubench.run import leave

    leave.at_once(main(sys.argv[1:]))  # torch is loaded: out without the interpreter's teardown, as gpubench is
