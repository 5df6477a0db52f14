"""What both parsers settle once a run is read: its world size, node count and collective."""

from __future__ import annotations

from collections import Counter

from gpubench.nccltests import names
from gpubench.nccltests.model import ParseError, Run


def world(run: Run) -> None:
    """World size = the ranks listed in the device lines; nodes = their distinct host names.

    With NCCL_TESTS_SPLIT the ranks form groups that each run their own communicator (the ``Group`` field):
    the bandwidths are per group, so the world size is the size of rank 0's group.
    """
    if not run.devices:
        return
    ranks = Counter(d.rank for d in run.devices)
    twice = sorted(r for r, n in ranks.items() if n > 1)
    if twice:
        raise ParseError(
            run.source, run.line,
            f"rank {twice[0]} is listed {ranks[twice[0]]} times in the device lines: several processes each ran "
            "their own job (a binary built without MPI=1 launched by mpirun or srun?); rebuild nccl-tests with "
            "`make MPI=1` and run again")
    first = min(run.devices, key=lambda d: d.rank)
    mine = [d for d in run.devices if d.group == first.group]
    run.world_size = len(mine)
    run.nnodes = len({d.host for d in mine})


def collective(run: Run, user: str | None, hints: set[str]) -> None:
    """Settle ``run.collective``: the log's own word, else ``--collective``, else a command line echoed
    before the run, else the only collective the table's shape allows. A run with rows it cannot settle
    is an error that asks for ``--collective``."""
    fits = names.candidates(run.columns, run.rows, run.world_size, run.generation)
    if run.collective is not None:
        if user and user != run.collective:
            raise ParseError(run.source, run.line,
                             f"the log says this run is {run.collective} but --collective says {user}")
        run.collective_source = "log"
        return
    if user:
        if fits is not None and user not in fits:
            raise ParseError(run.source, run.line,
                             f"--collective {user} does not fit this table (it fits {_either(fits)})")
        run.collective, run.collective_source = user, "user"
        return
    if fits is None:
        return  # no rows: nothing to label
    usable = {h for h in hints if h in fits}
    if len(usable) == 1:
        run.collective, run.collective_source = usable.pop(), "hint"
        return
    if len(fits) == 1:
        run.collective, run.collective_source = next(iter(fits)), "table"
        return
    raise ParseError(run.source, run.line,
                     f"the log does not say which collective this run measured and its table fits "
                     f"{_either(fits)}: pass --collective NAME")


def _either(options: set[str]) -> str:
    items = sorted(options)
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " or " + items[-1]
