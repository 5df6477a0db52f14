"""nccl-tests and rccl-tests: read their logs (every output generation, text and ``-J`` JSON).

- :mod:`~gpubench.nccltests.model`: what a parsed log holds (runs, devices, rows) and what both parsers share
  (the names nccl-tests prints, its printed numbers' rounding);
- :mod:`~gpubench.nccltests.envscrub`: which of a process environment may be stored (NCCL_*/RCCL_* settings that
  do not look secret);
- :mod:`~gpubench.nccltests.parse_text` / :mod:`~gpubench.nccltests.parse_json` → a list of :class:`Run` (one
  per ``# nThread`` block);
- :mod:`~gpubench.nccltests.headerless`: the columns of result rows pasted without their table header;
- :mod:`~gpubench.nccltests.prefix`: what a log puts before nccl-tests' own text on each line;

What the runs become is the collectives suite's business (suites/comm/: its table, the importer that writes it,
and the engine that runs the binaries); it declares the formats ``gpubench import`` takes and the engines
``gpubench run --engine`` offers (gpubench.suite.Suite), and the commands find it through the registry.

docs/nccl-tests.md lists the generations recognised and the column mapping.

It may import gpubench's floor modules (errors) only.
"""

from gpubench.nccltests.model import Device, ParseError, Row, Run
from gpubench.nccltests.parse_json import parse_json
from gpubench.nccltests.parse_text import parse_text

__all__ = ["Device", "ParseError", "Row", "Run", "parse_json", "parse_text"]
