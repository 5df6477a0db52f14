"""nccl-tests and rccl-tests: read their logs (every output generation, text and ``-J`` JSON) into gpubench's
``comm`` table, and run their binaries.

- :func:`parse_text` / :func:`parse_json` → a list of :class:`Run` (one per ``# nThread`` block);
- :func:`gpubench.nccltests.convert.comm_rows` → rows of the ``comm`` table (:mod:`gpubench.commtable`);
- ``gpubench import nccl-tests FILE...`` (:mod:`gpubench.nccltests.cli`) → a run directory;
- :mod:`gpubench.nccltests.binary` finds, builds the command line of, and runs ``<collective>_perf``.

docs/nccl-tests.md lists the generations recognised and the column mapping.
"""

from gpubench.nccltests.model import Device, ParseError, Row, Run
from gpubench.nccltests.parse_json import parse_json
from gpubench.nccltests.parse_text import parse_text

__all__ = ["Device", "ParseError", "Row", "Run", "parse_json", "parse_text"]
