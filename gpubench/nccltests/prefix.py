"""What stands before nccl-tests' own text on each line of a log, learnt from the log itself.

Launchers and log collectors put something before every line a job prints: Open MPI ``--tag-output``
(``[1,0]<stdout>:``), ``srun --label`` (`` 0: ``), MPICH ``-prepend-rank`` (``[0] ``), SkyPilot over mpirun
(``(head, rank=0, pid=3808) [1,0]<stdout>:``), Kubernetes (an RFC 3339 time: ``…T12:00:00.123456789Z ``), ``pdsh``
(``node07: ``), a README that indents the log. The launchers known by name are stripped as before; any other
prefix is learnt from the lines that carry one of nccl-tests' own anchors (``# nThread``, ``#  Rank``, the table
header, the footer) after something else: that something, with its digits and spaces generalised, is a prefix
the log's other lines may carry too, result rows included. A prefix must be seen on at least two anchor lines,
so that a one-off line cannot teach one.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable

# Lines that only nccl-tests / rccl-tests print, wherever they stand in a line.
ANCHOR = re.compile(
    r"#\s*nThreads?:?\s+\d+\s+nGpus"
    r"|#\s+Rank\s+\d+\s+(?:Group\s+\d+\s+)?Pid\s"
    r"|#\s+(?:size|bytes)\s+(?:count|N)\s"
    r"|#\s+\(B\)\s+\(elements\)"
    r"|#\s*(?:Out of bounds values|Avg bus bandwidth)\s*:"
    r"|#\s*[nr]ccl-tests version\s"
    r"|#\s*Collective test (?:starting|concluded):"
    r"|#\s*Using devices"
)

# Launchers known by name. A result row never starts with ``digits: `` nor with ``[``, so these cannot eat data.
KNOWN = re.compile(
    r"^(?:\[\d+,\d+\]<(?:stdout|stderr)>:\s?"  # Open MPI --tag-output
    r"|\s*\d+:\s"  # srun --label (right-aligned from 10 tasks on: " 7: ")
    r"|\[\d+\]\s)"  # MPICH / Intel MPI -prepend-rank
)


def _shape(prefix: str) -> str:
    """A prefix as a pattern: digit runs → any digits, space runs → any spaces, the rest as written."""
    out = []
    for token in re.findall(r"\d+|\s+|[^\d\s]+", prefix):
        out.append(r"\d+" if token.isdigit() else r"\s*" if token.isspace() else re.escape(token))
    return "".join(out)


class Prefixes:
    """The prefixes of one log: :meth:`strip` gives a line without its prefix (unchanged when it has none)."""

    def __init__(self, learnt: Iterable[str] = ()):
        # Longest first: "(head, rank=0, pid=1) [1,0]<stdout>:" before a bare indentation.
        self.patterns = [re.compile(p) for p in sorted(set(learnt), key=len, reverse=True)]

    @classmethod
    def learn(cls, lines: Iterable[str]) -> Prefixes:
        seen: Counter[str] = Counter()
        for line in lines:
            line = _known(line)
            m = ANCHOR.search(line)
            if m and m.start() > 0:
                seen[_shape(line[:m.start()])] += 1
        return cls(p for p, n in seen.items() if n >= 2)

    def strip(self, line: str) -> str:
        line = _known(line)
        for p in self.patterns:
            m = p.match(line)
            if m and m.end() > 0:
                return _known(line[m.end():])
        return line

    def describe(self) -> list[str]:
        return [p.pattern for p in self.patterns]


def _known(line: str) -> str:
    m = KNOWN.match(line)
    return line[m.end():] if m else line


__all__ = ["Prefixes", "ANCHOR", "KNOWN"]
