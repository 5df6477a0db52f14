"""Launchers put a prefix before every line of a job's output; the table is read from what follows it.

- Open MPI ``--tag-output``: ``[1,0]<stdout>:`` / ``[1,3]<stderr>:``
- Slurm ``srun --label``: ``0: `` (right-aligned when there are 10 or more tasks: `` 7: ``)
- MPICH / Intel MPI ``-prepend-rank``: ``[0] ``

A result row never contains ``digits: `` at its start, nor starts with ``[``, so these cannot eat data.
"""

from __future__ import annotations

import re

_PREFIX = re.compile(
    r"^(?:\[\d+,\d+\]<(?:stdout|stderr)>:\s?"  # Open MPI
    r"|\s*\d+:\s"  # srun --label
    r"|\[\d+\]\s)"  # MPICH/Intel MPI -prepend-rank
)


def strip(line: str) -> str:
    """The line without its launcher prefix (unchanged when it has none)."""
    m = _PREFIX.match(line)
    return line[m.end():] if m else line
