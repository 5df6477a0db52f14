"""nccl-tests and rccl-tests: read their logs (every output generation, text and ``-J`` JSON) into gpubench's
``comm`` table, and run their binaries.

- :mod:`~gpubench.nccltests.model`: what a parsed log holds (runs, devices, rows) and what both parsers share
  (the names nccl-tests prints, its printed numbers' rounding, which environment may be stored);
- :mod:`~gpubench.nccltests.parse_text` / :mod:`~gpubench.nccltests.parse_json` → a list of :class:`Run` (one
  per ``# nThread`` block);
- :mod:`~gpubench.nccltests.importer`: runs → rows of the ``comm`` table (:mod:`gpubench.commtable`) → a run
  directory (``gpubench import nccl-tests FILE...``);
- :mod:`~gpubench.nccltests.binaries` finds, builds the command line of, and runs ``<collective>_perf``, and
  sweeps them for ``gpubench run --suite comm --engine nccl-tests``.

docs/nccl-tests.md lists the generations recognised and the column mapping.
"""

from gpubench.nccltests.model import Device, ParseError, Row, Run
from gpubench.nccltests.parse_json import parse_json
from gpubench.nccltests.parse_text import parse_text

__all__ = ["Device", "ParseError", "Row", "Run", "parse_json", "parse_text"]
