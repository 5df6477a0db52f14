"""A stand-in nccl-tests binary for the engine's tests: it prints a real log, keeping only the result rows of the
sizes its -b and -e ask for (the engine runs a sweep across 16 MiB as two runs of the binary) and no footer
average (which was of every row), and appends its argv to a file."""

from __future__ import annotations

import sys
from pathlib import Path

_BODY = """
a = sys.argv[1:]
with open(ARGV, 'a') as f:
    f.write(' '.join(a) + '\\n')
lo, hi = int(a[a.index('-b') + 1]), int(a[a.index('-e') + 1])
text = pathlib.Path(LOG).read_text()
if GRAPH:  # the header's graph field says whether -G was given, as nccl-tests' does
    text = text.replace('graph: 0', 'graph: ' + ('1' if '-G' in a else '0'))
for line in text.splitlines():
    cells = line.split()
    if cells and cells[0].isdigit() and not lo <= int(cells[0]) <= hi or 'Avg bus bandwidth' in line:
        continue
    print(line)
"""


def write_stand_in(path: Path, log: Path, argv: Path, *, help_text: str = "usage: -b -e -f -g\n", before: str = "",
                   graph: bool = False) -> None:
    """An executable at ``path`` printing ``log`` as above; ``before``: more code run first; ``graph``: the header's
    graph field follows -G."""
    path.write_text(f"#!{sys.executable}\nimport sys, pathlib\n"
                    f"if '-h' in sys.argv: sys.stdout.write({help_text!r}); sys.exit(0)\n" + before
                    + _BODY.replace("ARGV", repr(str(argv))).replace("LOG", repr(str(log)))
                    .replace("GRAPH", repr(graph)))
    path.chmod(0o755)
